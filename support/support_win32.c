/* SPDX-License-Identifier: MIT */
/* support.h on Windows: cache sizes, memory maps, the command line in UTF-8, streams and the
 * console, the environment, loaded libraries, thread ids and child processes. UTF-8 and UTF-16
 * convert through the library's platform layer, its one implementation. */
#include "support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <windows.h>
#include <shellapi.h>
#include <io.h>

#include "core/platform.h"

/* ---- cache sizes ---- */

void support_cpu_caches(uint64_t *l1d, uint64_t *l2, uint64_t *l3)
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

/* ---- memory maps ---- */

void *support_memory_map(size_t bytes)
{
    return VirtualAlloc(NULL, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void support_memory_unmap(void *memory, size_t bytes)
{
    if (!memory)
        return;
    (void)bytes;
    VirtualFree(memory, 0, MEM_RELEASE);
}

/* ---- the command line, streams and the console ---- */

/* CommandLineToArgvW is in shell32 (linked in support/CMakeLists.txt). */
char **support_utf8_arguments(int argc, char **argv)
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

int support_stream_redirect(FILE *stream, FILE *target)
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

void support_stream_restore(FILE *stream, int saved)
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

bool support_is_terminal(FILE *stream)
{
    /* A console shows escape sequences as text unless it was switched to interpret them. */
    DWORD mode = 0;
    HANDLE handle = (HANDLE)_get_osfhandle(_fileno(stream));
    return _isatty(_fileno(stream)) && GetConsoleMode(handle, &mode) &&
           (mode & ENABLE_VIRTUAL_TERMINAL_PROCESSING);
}

/* ---- the environment, loaded libraries and threads ---- */

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

bool support_env_set(const char *name, const char *value) { return put_environment(name, value); }

bool support_env_unset(const char *name) { return put_environment(name, ""); }

bool support_library_loaded(const char *name)
{
    wchar_t *wide = posenc__utf8_to_wide(name);
    HMODULE library = wide ? GetModuleHandleW(wide) : NULL;
    free(wide);
    return library != NULL;
}

uint64_t support_thread_id(void) { return GetCurrentThreadId(); }

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

bool support_process_start(support_process *process, const char *const *argv)
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

int support_process_wait(support_process *process)
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
