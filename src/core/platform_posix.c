/* SPDX-License-Identifier: MIT */
/* platform.h on POSIX (Linux, macOS, the BSDs): the environment, dynamic loading, processor
 * and memory facts, aligned memory and the signal stack. */
#define _GNU_SOURCE /* setenv, dl_iterate_phdr */

#include "core/platform.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>
#if defined(__ELF__)
#  include <link.h> /* dl_iterate_phdr */
#endif
#if defined(__APPLE__)
#  include <sys/sysctl.h>
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
void *posenc__library_symbol(void *library, const char *name) { return dlsym(library, name); }
void posenc__library_close(void *library) { dlclose(library); }

/* ---- processor and memory facts ---- */

uint64_t posenc__physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
}

/* Linux tells in /proc/cpuinfo, macOS through sysctl; elsewhere nothing is known. */
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

#else
void posenc__cpu_field(const char *key, const char *fallback, char *out, size_t size)
{
    (void)key;
    posenc__copy_string(out, size, fallback);
}

#endif

/* ---- memory ---- */

void *posenc__aligned_alloc(size_t alignment, size_t size)
{
    void *memory = NULL;
    return posix_memalign(&memory, alignment, size) == 0 ? memory : NULL;
}

void posenc__aligned_free(void *memory) { free(memory); }

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

uint64_t posenc__process_id(void) { return (uint64_t)getpid(); }

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
