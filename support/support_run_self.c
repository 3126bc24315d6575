/* SPDX-License-Identifier: MIT */
/* support_run_self: posix_spawn on POSIX systems, CreateProcessW on Windows. The executable's
 * path comes from the system (/proc/self/exe, _NSGetExecutablePath, GetModuleFileNameW), not
 * from argv[0], which need not name a file. */
#if !defined(_WIN32)
#  define _XOPEN_SOURCE 700 /* readlink, posix_spawn */
#  if defined(__APPLE__)
#    define _DARWIN_C_SOURCE /* _NSGetExecutablePath's header */
#  endif
#endif
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#if defined(_WIN32)

#include <windows.h>

#include "core/platform.h" /* posenc__utf8_to_wide */

/* Appends `arg` to the command line `out` (`size` wide chars) quoted the way the C runtime's
 * argument parser (CommandLineToArgvW) reads it back: backslashes before a quote doubled. */
static bool append_quoted(wchar_t *out, size_t size, size_t *used, const wchar_t *arg)
{
    size_t n = *used;
#define PUT(c)                                                                                   \
    do {                                                                                         \
        if (n + 1 >= size)                                                                       \
            return false;                                                                        \
        out[n++] = (c);                                                                          \
    } while (0)
    if (n)
        PUT(L' ');
    PUT(L'"');
    for (const wchar_t *c = arg;; c++) {
        size_t backslashes = 0;
        while (*c == L'\\') {
            backslashes++;
            c++;
        }
        /* Backslashes are literal unless a quote follows: before the closing quote or an
         * escaped one, each is doubled. */
        size_t copies = (*c == L'"' || *c == 0) ? backslashes * 2 : backslashes;
        for (size_t i = 0; i < copies; i++)
            PUT(L'\\');
        if (*c == 0)
            break;
        if (*c == L'"')
            PUT(L'\\');
        PUT(*c);
    }
    PUT(L'"');
#undef PUT
    out[n] = 0;
    *used = n;
    return true;
}

bool support_run_self(const char *const *args, int *exit_code, double *seconds, char *error,
                      size_t error_size)
{
    wchar_t program[MAX_PATH + 1];
    DWORD length = GetModuleFileNameW(NULL, program, MAX_PATH + 1);
    if (length == 0 || length > MAX_PATH) {
        snprintf(error, error_size, "the path of this program is unknown or too long");
        return false;
    }
    wchar_t command_line[4096];
    size_t used = 0;
    bool fits = append_quoted(command_line, sizeof command_line / sizeof command_line[0], &used,
                              program);
    for (size_t i = 0; fits && args[i]; i++) {
        wchar_t *wide = posenc__utf8_to_wide(args[i]);
        fits = wide && append_quoted(command_line, sizeof command_line / sizeof command_line[0],
                                     &used, wide);
        free(wide);
    }
    if (!fits) {
        snprintf(error, error_size, "the command line is too long");
        return false;
    }
    SECURITY_ATTRIBUTES inherit = {(DWORD)sizeof inherit, NULL, TRUE};
    HANDLE null_device = CreateFileW(L"NUL", GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE,
                                     &inherit, OPEN_EXISTING, 0, NULL);
    if (null_device == INVALID_HANDLE_VALUE) {
        snprintf(error, error_size, "cannot open NUL (error %lu)", (unsigned long)GetLastError());
        return false;
    }
    STARTUPINFOW startup = {.cb = (DWORD)sizeof startup, .dwFlags = STARTF_USESTDHANDLES};
    startup.hStdInput = null_device;
    startup.hStdOutput = null_device;
    startup.hStdError = null_device;
    PROCESS_INFORMATION process;
    double start = support_seconds_now();
    BOOL started = CreateProcessW(program, command_line, NULL, NULL, TRUE, CREATE_NO_WINDOW, NULL,
                                  NULL, &startup, &process);
    DWORD failure = GetLastError();
    CloseHandle(null_device);
    if (!started) {
        snprintf(error, error_size, "CreateProcessW failed (error %lu)", (unsigned long)failure);
        return false;
    }
    WaitForSingleObject(process.hProcess, INFINITE);
    *seconds = support_seconds_now() - start;
    DWORD code = 1;
    GetExitCodeProcess(process.hProcess, &code);
    CloseHandle(process.hThread);
    CloseHandle(process.hProcess);
    *exit_code = (int)code;
    return true;
}

#else

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

extern char **environ;

static bool program_path(char *out, size_t size)
{
#if defined(__APPLE__)
    uint32_t capacity = (uint32_t)size;
    return _NSGetExecutablePath(out, &capacity) == 0;
#else
    ssize_t length = readlink("/proc/self/exe", out, size - 1);
    if (length <= 0 || (size_t)length >= size - 1)
        return false;
    out[length] = 0;
    return true;
#endif
}

bool support_run_self(const char *const *args, int *exit_code, double *seconds, char *error,
                      size_t error_size)
{
    char program[4096];
    if (!program_path(program, sizeof program)) {
        snprintf(error, error_size, "the path of this program is unknown");
        return false;
    }
    char *argv[64];
    size_t argc = 0;
    argv[argc++] = program;
    for (size_t i = 0; args[i]; i++) {
        if (argc + 1 >= sizeof argv / sizeof argv[0]) {
            snprintf(error, error_size, "too many arguments");
            return false;
        }
        argv[argc++] = (char *)args[i]; /* posix_spawn's prototype; it does not write them */
    }
    argv[argc] = NULL;
    posix_spawn_file_actions_t actions;
    if (posix_spawn_file_actions_init(&actions) != 0) {
        snprintf(error, error_size, "posix_spawn_file_actions_init failed");
        return false;
    }
    int rc = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    pid_t child = 0;
    double start = support_seconds_now();
    if (rc == 0)
        rc = posix_spawn(&child, program, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        snprintf(error, error_size, "cannot start %s: %s", program, strerror(rc));
        return false;
    }
    int status = 0;
    pid_t waited;
    do {
        waited = waitpid(child, &status, 0);
    } while (waited < 0 && errno == EINTR);
    *seconds = support_seconds_now() - start;
    if (waited < 0) {
        snprintf(error, error_size, "waitpid failed: %s", strerror(errno));
        return false;
    }
    /* 127: the exec in the child failed after the spawn (older C libraries report it so). */
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
}

#endif
