/* SPDX-License-Identifier: MIT */
/* platform.h on POSIX (Linux, macOS, the BSDs): the environment, dynamic loading, processor
 * and memory facts, streams, the signal stack, memory mappings and child processes. */
#define _GNU_SOURCE /* setenv, MAP_ANONYMOUS, MAP_NORESERVE, dl_iterate_phdr */

#include "core/platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__ELF__)
#  include <link.h> /* dl_iterate_phdr */
#endif
#if defined(__APPLE__)
#  include <crt_externs.h> /* a shared library has no direct `environ` there */
#  include <sys/sysctl.h>
#  define environ (*_NSGetEnviron())
#else
extern char **environ;
#endif

/* ---- dynamic loading ---- */

#if defined(__ELF__)
/* dl_iterate_phdr visits the main program first: whether its program headers name an
 * interpreter (PT_INTERP, the dynamic linker) into `*found`. */
static int note_interpreter(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_INTERP)
            *(bool *)found = true;
    }
    return 1; /* the main program alone */
}

/* A program is dynamically linked exactly when it names a dynamic linker: without one no
 * libc.so is mapped, and a library dlopen brings in would run on a second, uninitialised C
 * library. The test holds for static-pie programs too, which have a PT_DYNAMIC (and a non-NULL
 * _DYNAMIC, so a weak reference to it would not tell) to relocate themselves but no PT_INTERP,
 * and for a program started as `ld.so ./program`, whose own headers keep their PT_INTERP. */
bool posenc__library_loading(const char **reason)
{
    bool dynamic = false;
    dl_iterate_phdr(note_interpreter, &dynamic);
    if (!dynamic) {
        if (reason)
            *reason = "dynamic loading is not available in a static binary";
        return false;
    }
    return true;
}
#else
/* Mach-O: every program is dynamically linked. */
bool posenc__library_loading(const char **reason)
{
    (void)reason;
    return true;
}
#endif

void *posenc__library_open(const char *name)
{
    return posenc__library_loading(NULL) ? dlopen(name, RTLD_NOW | RTLD_LOCAL) : NULL;
}
bool posenc__library_loaded(const char *name)
{
    if (!posenc__library_loading(NULL))
        return false;
    void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (library)
        dlclose(library); /* drops the reference RTLD_NOLOAD took */
    return library != NULL;
}
void *posenc__library_symbol(void *library, const char *name) { return dlsym(library, name); }
void posenc__library_close(void *library) { dlclose(library); }

/* ---- processor and memory facts ---- */

uint64_t posenc__physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
}

/* Linux tells in /proc/cpuinfo and sysfs, macOS through sysctl; elsewhere nothing is known. */
#if defined(__linux__)
void posenc__cpu_field(const char *key, const char *fallback, char *out, size_t size)
{
    posenc__copy_string(out, size, fallback);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, strlen(key)) != 0)
            continue;
        const char *colon = strchr(line, ':');
        if (!colon)
            break;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        posenc__copy_string(out, size, colon);
        size_t n = strlen(out);
        while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
            out[--n] = '\0';
        break;
    }
    fclose(f);
}

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

void posenc__cpu_caches(uint64_t *l1d, uint64_t *l2, uint64_t *l3)
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
void posenc__cpu_field(const char *key, const char *fallback, char *out, size_t size)
{
    posenc__copy_string(out, size, fallback);
    /* The sysctl behind each /proc/cpuinfo field asked for; Apple silicon has no vendor entry. */
    const char *name = strcmp(key, "model name") == 0  ? "machdep.cpu.brand_string"
                       : strcmp(key, "vendor_id") == 0 ? "machdep.cpu.vendor"
                                                       : NULL;
    char value[256];
    size_t length = sizeof value - 1;
    if (name && sysctlbyname(name, value, &length, NULL, 0) == 0 && length > 0) {
        value[length] = '\0';
        posenc__copy_string(out, size, value);
    }
}

static uint64_t sysctl_size(const char *name)
{
    int64_t value = 0;
    size_t size = sizeof value;
    return sysctlbyname(name, &value, &size, NULL, 0) == 0 && value > 0 ? (uint64_t)value : 0;
}

void posenc__cpu_caches(uint64_t *l1d, uint64_t *l2, uint64_t *l3)
{
    *l1d = sysctl_size("hw.l1dcachesize");
    *l2 = sysctl_size("hw.l2cachesize");
    *l3 = sysctl_size("hw.l3cachesize");
}
#else
void posenc__cpu_field(const char *key, const char *fallback, char *out, size_t size)
{
    (void)key;
    posenc__copy_string(out, size, fallback);
}

void posenc__cpu_caches(uint64_t *l1d, uint64_t *l2, uint64_t *l3)
{
    *l1d = *l2 = *l3 = 0;
}
#endif

/* ---- memory ---- */

void *posenc__aligned_alloc(size_t alignment, size_t size)
{
    void *memory = NULL;
    return posix_memalign(&memory, alignment, size) == 0 ? memory : NULL;
}

void posenc__aligned_free(void *memory) { free(memory); }

void *posenc__memory_map(size_t bytes)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#if defined(MAP_NORESERVE)
    flags |= MAP_NORESERVE;
#endif
    void *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    return memory == MAP_FAILED ? NULL : memory;
}

void posenc__memory_unmap(void *memory, size_t bytes)
{
    if (!memory)
        return;
    munmap(memory, bytes);
}

/* ---- the environment and the process ---- */

/* The environment is in UTF-8 already (or in whatever bytes the paths are): nothing to convert. */
bool posenc__env_get_path(const char *name, char *out, size_t size)
{
    const char *value = getenv(name);
    bool fits = value && *value && strlen(value) < size;
    if (fits)
        posenc__copy_string(out, size, value);
    return fits;
}

bool posenc__env_set(const char *name, const char *value) { return setenv(name, value, 1) == 0; }

bool posenc__env_unset(const char *name) { return unsetenv(name) == 0; }

char **posenc__utf8_arguments(int argc, char **argv)
{
    (void)argc;
    return argv;
}

uint64_t posenc__process_id(void) { return (uint64_t)getpid(); }

/* ---- streams and the terminal ---- */

int posenc__stream_redirect(FILE *stream, FILE *target)
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

void posenc__stream_restore(FILE *stream, int saved)
{
    if (saved < 0)
        return;
    fflush(stream);
    dup2(saved, fileno(stream));
    close(saved);
}

bool posenc__is_terminal(FILE *stream) { return isatty(fileno(stream)) != 0; }

/* ---- the alternate signal stack ---- */

void posenc__signal_stack_save(posenc__signal_stack *saved)
{
    saved->saved = false;
    stack_t current;
    if (sigaltstack(NULL, &current) == 0) {
        saved->sp = current.ss_sp;
        saved->size = current.ss_size;
        saved->flags = current.ss_flags;
        saved->saved = true;
    }
}

void posenc__signal_stack_restore(const posenc__signal_stack *saved)
{
    stack_t current;
    if (!saved->saved || sigaltstack(NULL, &current) != 0 || (current.ss_flags & SS_ONSTACK))
        return;
    if (current.ss_sp == saved->sp && current.ss_size == saved->size &&
        (current.ss_flags & SS_DISABLE) == (saved->flags & SS_DISABLE))
        return;
    stack_t previous = {.ss_sp = saved->sp, .ss_size = saved->size,
                        .ss_flags = saved->flags & SS_DISABLE};
    sigaltstack(&previous, NULL);
}

/* ---- child processes ---- */

bool posenc__process_start(posenc__process *process, const char *const *argv)
{
    memset(process, 0, sizeof *process);
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, (char *const *)argv, environ) != 0)
        return false;
    process->opaque[0] = (void *)(intptr_t)pid;
    return true;
}

int posenc__process_wait(posenc__process *process)
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
