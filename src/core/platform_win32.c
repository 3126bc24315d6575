/* SPDX-License-Identifier: MIT */
/* platform.h on Windows: UTF-8 <-> UTF-16, the environment and command line, dynamic loading,
 * processor and memory facts, streams, memory mappings and child processes. */
#include "core/platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <windows.h>
#include <shellapi.h>
#include <io.h>

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
bool posenc__library_loaded(const char *name)
{
    wchar_t *wide = posenc__utf8_to_wide(name);
    HMODULE library = wide ? GetModuleHandleW(wide) : NULL;
    free(wide);
    return library != NULL;
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

void posenc__cpu_caches(uint64_t *l1d, uint64_t *l2, uint64_t *l3)
{
    uint64_t sizes[4] = {0};
    DWORD bytes = 0;
    GetLogicalProcessorInformation(NULL, &bytes);
    SYSTEM_LOGICAL_PROCESSOR_INFORMATION *entries = bytes ? malloc(bytes) : NULL;
    if (entries && GetLogicalProcessorInformation(entries, &bytes)) {
        /* One entry per cache instance; the first of each level stands for all. */
        for (DWORD i = 0; i < bytes / sizeof *entries; i++) {
            const CACHE_DESCRIPTOR *cache = &entries[i].Cache;
            if (entries[i].Relationship != RelationCache || cache->Type == CacheInstruction)
                continue;
            if (cache->Level >= 1 && cache->Level <= 3 && !sizes[cache->Level])
                sizes[cache->Level] = cache->Size;
        }
    }
    free(entries);
    *l1d = sizes[1];
    *l2 = sizes[2];
    *l3 = sizes[3];
}

/* ---- memory ---- */

void *posenc__aligned_alloc(size_t alignment, size_t size)
{
    return _aligned_malloc(size, alignment);
}

void posenc__aligned_free(void *memory) { _aligned_free(memory); }

void *posenc__memory_map(size_t bytes)
{
    return VirtualAlloc(NULL, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void posenc__memory_unmap(void *memory, size_t bytes)
{
    if (!memory)
        return;
    (void)bytes;
    VirtualFree(memory, 0, MEM_RELEASE);
}

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

/* _wputenv_s updates the C runtime's environment (narrow and wide) and the process's block. */
static bool put_environment(const char *name, const char *value)
{
    wchar_t *wide_name = posenc__utf8_to_wide(name);
    wchar_t *wide_value = wide_name ? posenc__utf8_to_wide(value) : NULL;
    errno_t error = wide_value ? _wputenv_s(wide_name, wide_value) : errno;
    free(wide_name);
    free(wide_value);
    errno = error;
    return error == 0;
}

bool posenc__env_set(const char *name, const char *value) { return put_environment(name, value); }

bool posenc__env_unset(const char *name) { return put_environment(name, ""); }

/* CommandLineToArgvW is in shell32 (linked in src/CMakeLists.txt). */
char **posenc__utf8_arguments(int argc, char **argv)
{
    int count = 0;
    wchar_t **wide = CommandLineToArgvW(GetCommandLineW(), &count);
    if (!wide || count != argc) {
        LocalFree(wide);
        return argv;
    }
    char **utf8 = calloc((size_t)count + 1, sizeof *utf8);
    for (int i = 0; utf8 && i < count; i++) {
        utf8[i] = posenc__wide_to_utf8(wide[i]);
        if (!utf8[i]) {
            while (i-- > 0)
                free(utf8[i]);
            free(utf8);
            utf8 = NULL;
        }
    }
    LocalFree(wide);
    return utf8 ? utf8 : argv;
}

uint64_t posenc__process_id(void) { return (uint64_t)GetCurrentProcessId(); }

/* ---- streams and the console ---- */

int posenc__stream_redirect(FILE *stream, FILE *target)
{
    fflush(stream);
    fflush(target);
    int saved = _dup(_fileno(stream));
    if (saved >= 0 && _dup2(_fileno(target), _fileno(stream)) != 0) {
        _close(saved);
        saved = -1;
    }
    return saved;
}

void posenc__stream_restore(FILE *stream, int saved)
{
    if (saved < 0)
        return;
    fflush(stream);
    _dup2(saved, _fileno(stream));
    _close(saved);
}

/* Older SDK headers lack it; the console takes it from Windows 10 on. */
#if !defined(ENABLE_VIRTUAL_TERMINAL_PROCESSING)
#  define ENABLE_VIRTUAL_TERMINAL_PROCESSING 0x0004
#endif

bool posenc__is_terminal(FILE *stream)
{
    /* A console shows escape sequences as text unless it was switched to interpret them. */
    DWORD mode = 0;
    HANDLE handle = (HANDLE)_get_osfhandle(_fileno(stream));
    return _isatty(_fileno(stream)) && GetConsoleMode(handle, &mode) &&
           (mode & ENABLE_VIRTUAL_TERMINAL_PROCESSING);
}

/* ---- the alternate signal stack: Windows has none to keep ---- */

void posenc__signal_stack_save(posenc__signal_stack *saved) { saved->saved = false; }

void posenc__signal_stack_restore(const posenc__signal_stack *saved) { (void)saved; }

/* ---- child processes ---- */

/* One argument as the C runtime's command-line parser reads it back: quoted where it holds
 * blanks or quotes, a quote escaped with a backslash and backslashes before one doubled. */
static size_t quote_argument(const char *argument, char *out)
{
    size_t n = 0;
    bool quote = !*argument || strpbrk(argument, " \t\n\v\"") != NULL;
    if (quote && out)
        out[n] = '"';
    n += quote;
    for (const char *c = argument;; c++) {
        size_t backslashes = 0;
        while (*c == '\\') {
            backslashes++;
            c++;
        }
        /* Backslashes are literal unless a quote (this argument's or the closing one) follows. */
        size_t copies = *c == '"' || (!*c && quote) ? 2 * backslashes : backslashes;
        for (size_t b = 0; b < copies; b++, n++)
            if (out)
                out[n] = '\\';
        if (!*c)
            break;
        if (*c == '"') {
            if (out)
                out[n] = '\\';
            n++;
        }
        if (out)
            out[n] = *c;
        n++;
    }
    if (quote && out)
        out[n] = '"';
    return n + quote;
}

bool posenc__process_start(posenc__process *process, const char *const *argv)
{
    memset(process, 0, sizeof *process);
    size_t length = 1;
    for (size_t i = 0; argv[i]; i++)
        length += quote_argument(argv[i], NULL) + 1;
    char *line = malloc(length);
    if (!line)
        return false;
    size_t at = 0;
    for (size_t i = 0; argv[i]; i++) {
        if (i)
            line[at++] = ' ';
        at += quote_argument(argv[i], line + at);
    }
    line[at] = '\0';
    wchar_t *wide_line = posenc__utf8_to_wide(line);
    wchar_t *wide_program = posenc__utf8_to_wide(argv[0]);
    free(line);
    STARTUPINFOW startup = {.cb = sizeof startup};
    PROCESS_INFORMATION info;
    bool ok = wide_line && wide_program &&
              CreateProcessW(wide_program, wide_line, NULL, NULL, FALSE, 0, NULL, NULL, &startup,
                             &info);
    free(wide_line);
    free(wide_program);
    if (!ok)
        return false;
    CloseHandle(info.hThread);
    process->opaque[0] = info.hProcess;
    return true;
}

int posenc__process_wait(posenc__process *process)
{
    HANDLE handle = process->opaque[0];
    if (!handle)
        return -1;
    DWORD code = 0;
    bool ok = WaitForSingleObject(handle, INFINITE) == WAIT_OBJECT_0 &&
              GetExitCodeProcess(handle, &code);
    CloseHandle(handle);
    process->opaque[0] = NULL;
    return ok ? (int)code : -1;
}
