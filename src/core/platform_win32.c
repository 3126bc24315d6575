/* SPDX-License-Identifier: MIT */
/* platform.h on Windows: UTF-8 <-> UTF-16, the environment, dynamic loading, processor and
 * memory facts and aligned memory. */
#include "core/platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <windows.h>

/* ---- UTF-8 and UTF-16 ---- */

wchar_t *posenc__utf8_to_wide(const char *utf8)
{
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8, -1, NULL, 0);
    if (n <= 0) {
        errno = EILSEQ;
        return NULL;
    }
    wchar_t *wide = malloc((size_t)n * sizeof *wide);
    if (!wide) {
        errno = ENOMEM;
        return NULL;
    }
    MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, utf8, -1, wide, n);
    return wide;
}

char *posenc__wide_to_utf8(const wchar_t *wide)
{
    int n = WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, wide, -1, NULL, 0, NULL, NULL);
    if (n <= 0) {
        errno = EILSEQ;
        return NULL;
    }
    char *utf8 = malloc((size_t)n);
    if (!utf8) {
        errno = ENOMEM;
        return NULL;
    }
    WideCharToMultiByte(CP_UTF8, WC_ERR_INVALID_CHARS, wide, -1, utf8, n, NULL, NULL);
    return utf8;
}

/* ---- dynamic loading ---- */

/* Windows has no static programs: a DLL can always be loaded. */
bool posenc__library_loading(const char **reason)
{
    (void)reason;
    return true;
}

void *posenc__library_open(const char *name)
{
    wchar_t *wide = posenc__utf8_to_wide(name);
    HMODULE library = wide ? LoadLibraryW(wide) : NULL;
    free(wide);
    return (void *)library;
}
void *posenc__library_symbol(void *library, const char *name)
{
    return (void *)GetProcAddress((HMODULE)library, name);
}
void posenc__library_close(void *library) { FreeLibrary((HMODULE)library); }

/* ---- processor and memory facts ---- */

uint64_t posenc__physical_memory(void)
{
    MEMORYSTATUSEX status = {.dwLength = sizeof status};
    return GlobalMemoryStatusEx(&status) ? status.ullTotalPhys : 0;
}

/* The system has no text description of the processor to read a field from. */
void posenc__cpu_field(const char *key, const char *fallback, char *out, size_t size)
{
    (void)key;
    posenc__copy_string(out, size, fallback);
}

/* ---- memory ---- */

void *posenc__aligned_alloc(size_t alignment, size_t size)
{
    return _aligned_malloc(size, alignment);
}

void posenc__aligned_free(void *memory) { _aligned_free(memory); }

/* ---- the environment and the process ---- */

bool posenc__env_get_path(const char *name, char *out, size_t size)
{
    /* The process's own (wide) block, which _wputenv_s updates too: the C runtime's narrow copy
     * holds the value in the ANSI code page, where a non-ASCII path may not survive. */
    wchar_t *wide_name = posenc__utf8_to_wide(name);
    if (!wide_name)
        return false;
    DWORD length = GetEnvironmentVariableW(wide_name, NULL, 0);
    wchar_t *wide_value = length ? malloc((size_t)length * sizeof *wide_value) : NULL;
    bool ok = wide_value && GetEnvironmentVariableW(wide_name, wide_value, length) == length - 1;
    char *value = ok ? posenc__wide_to_utf8(wide_value) : NULL;
    free(wide_name);
    free(wide_value);
    bool fits = value && *value && strlen(value) < size;
    if (fits)
        posenc__copy_string(out, size, value);
    free(value);
    return fits;
}

uint64_t posenc__process_id(void) { return (uint64_t)GetCurrentProcessId(); }

/* ---- the alternate signal stack: Windows has none to keep ---- */

void posenc__signal_stack_save(posenc__signal_stack *saved) { saved->saved = false; }

void posenc__signal_stack_restore(const posenc__signal_stack *saved) { (void)saved; }
