/* SPDX-License-Identifier: MIT */
/* support.h on POSIX (Linux, macOS, the BSDs): cache sizes, memory maps, streams and the
 * terminal, the program's arguments, the environment, loaded libraries, thread ids and child
 * processes. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE, setenv, RTLD_NOLOAD */

#include "support.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__APPLE__)
#  include <crt_externs.h> /* a shared library has no direct `environ` there */
#  include <sys/sysctl.h>
#  define environ (*_NSGetEnviron())
#else
extern char **environ;
#endif

#include "core/platform.h" /* posenc__library_loading, POSENC__THREAD_LOCAL */

/* ---- cache sizes: Linux tells in sysfs, macOS through sysctl; elsewhere nothing is known ---- */

#if defined(__linux__)
/* "32K", "1024K", "32M" as in sysfs. */
static uint64_t parse_cache_size(const char *text)
{
    char *end = NULL;
    unsigned long long value = strtoull(text, &end, 10);
    if (end && (*end == 'K' || *end == 'k'))
        value *= 1024;
    else if (end && (*end == 'M' || *end == 'm'))
        value *= 1024 * 1024;
    return value;
}

void support_cpu_caches(uint64_t *l1d, uint64_t *l2, uint64_t *l3)
{
    uint64_t sizes[4] = {0};
    for (int index = 0; index < 8; index++) {
        char path[128], level[16] = "", type[32] = "", size[32] = "";
        const char *fields[3] = {"level", "type", "size"};
        char *values[3] = {level, type, size};
        size_t lengths[3] = {sizeof level, sizeof type, sizeof size};
        bool ok = true;
        for (int f = 0; f < 3 && ok; f++) {
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index,
                     fields[f]);
            FILE *file = fopen(path, "r");
            ok = file && fgets(values[f], (int)lengths[f], file);
            if (file)
                fclose(file);
        }
        if (!ok)
            break;
        int n = atoi(level);
        if (strncmp(type, "Instruction", 11) != 0 && n >= 1 && n <= 3)
            sizes[n] = parse_cache_size(size);
    }
    *l1d = sizes[1];
    *l2 = sizes[2];
    *l3 = sizes[3];
}

#elif defined(__APPLE__)
static uint64_t sysctl_size(const char *name)
{
    int64_t value = 0;
    size_t size = sizeof value;
    return sysctlbyname(name, &value, &size, NULL, 0) == 0 && value > 0 ? (uint64_t)value : 0;
}

void support_cpu_caches(uint64_t *l1d, uint64_t *l2, uint64_t *l3)
{
    *l1d = sysctl_size("hw.l1dcachesize");
    *l2 = sysctl_size("hw.l2cachesize");
    *l3 = sysctl_size("hw.l3cachesize");
}

#else
void support_cpu_caches(uint64_t *l1d, uint64_t *l2, uint64_t *l3)
{
    *l1d = *l2 = *l3 = 0;
}
#endif

/* ---- memory maps ---- */

void *support_memory_map(size_t bytes)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#if defined(MAP_NORESERVE)
    flags |= MAP_NORESERVE;
#endif
    void *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    return memory == MAP_FAILED ? NULL : memory;
}

void support_memory_unmap(void *memory, size_t bytes)
{
    if (!memory)
        return;
    munmap(memory, bytes);
}

/* ---- the program and its streams ---- */

char **support_utf8_arguments(int argc, char **argv)
{
    (void)argc;
    return argv;
}

int support_stream_redirect(FILE *stream, FILE *target)
{
    fflush(stream);
    fflush(target);
    int saved = dup(fileno(stream));
    if (saved >= 0 && dup2(fileno(target), fileno(stream)) < 0) {
        close(saved);
        saved = -1;
    }
    return saved;
}

void support_stream_restore(FILE *stream, int saved)
{
    if (saved < 0)
        return;
    fflush(stream);
    dup2(saved, fileno(stream));
    close(saved);
}

bool support_is_terminal(FILE *stream) { return isatty(fileno(stream)) != 0; }

/* ---- the environment, loaded libraries and threads ---- */

bool support_env_set(const char *name, const char *value) { return setenv(name, value, 1) == 0; }

bool support_env_unset(const char *name) { return unsetenv(name) == 0; }

bool support_library_loaded(const char *name)
{
    if (!posenc__library_loading(NULL))
        return false;
    void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (library)
        dlclose(library); /* drops the reference RTLD_NOLOAD took */
    return library != NULL;
}

/* The address of a thread-local object: distinct among live threads, and a number whatever
 * pthread_t is on this system (an integer on Linux, a pointer on macOS). */
uint64_t support_thread_id(void)
{
    static POSENC__THREAD_LOCAL char marker;
    return (uint64_t)(uintptr_t)&marker;
}

/* ---- child processes ---- */

bool support_process_start(support_process *process, const char *const *argv)
{
    memset(process, 0, sizeof *process);
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, (char *const *)argv, environ) != 0)
        return false;
    process->opaque[0] = (void *)(intptr_t)pid;
    return true;
}

int support_process_wait(support_process *process)
{
    pid_t pid = (pid_t)(intptr_t)process->opaque[0];
    if (pid <= 0)
        return -1;
    int status;
    pid_t waited;
    while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    process->opaque[0] = NULL;
    return waited == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
