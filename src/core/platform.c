/* SPDX-License-Identifier: MIT */
/* Operating-system services for POSIX and Windows. */
#if !defined(_WIN32)
#  define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif

#include "core/platform.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#if defined(_WIN32)
#  include <windows.h>
#  include <io.h>
#  include <process.h>
#else
#  include <dlfcn.h>
#  include <pthread.h>
#  include <sched.h>
#  include <unistd.h>
#endif
#if defined(__APPLE__)
#  include <sys/types.h>
#  include <sys/sysctl.h>
#endif

_Static_assert(sizeof(posenc__once) >= sizeof(void *) * 8, "once storage");

#if defined(_WIN32)
static BOOL CALLBACK run_once_trampoline(PINIT_ONCE once, PVOID fn, PVOID *context)
{
    (void)once;
    (void)context;
    ((void (*)(void))fn)();
    return TRUE;
}

void posenc__run_once(posenc__once *once, void (*fn)(void))
{
    InitOnceExecuteOnce((PINIT_ONCE)once, run_once_trampoline, (PVOID)fn, NULL);
}

_Static_assert(sizeof(SRWLOCK) <= sizeof(posenc__mutex), "SRWLOCK fits");
bool posenc__mutex_init(posenc__mutex *mutex)
{
    InitializeSRWLock((PSRWLOCK)mutex);
    return true;
}
void posenc__mutex_destroy(posenc__mutex *mutex) { (void)mutex; }
void posenc__mutex_lock(posenc__mutex *mutex) { AcquireSRWLockExclusive((PSRWLOCK)mutex); }
void posenc__mutex_unlock(posenc__mutex *mutex) { ReleaseSRWLockExclusive((PSRWLOCK)mutex); }

void *posenc__library_open(const char *name) { return (void *)LoadLibraryA(name); }
void *posenc__library_symbol(void *library, const char *name)
{
    return (void *)GetProcAddress((HMODULE)library, name);
}
void posenc__library_close(void *library) { FreeLibrary((HMODULE)library); }

uint32_t posenc__cpu_count(void)
{
    SYSTEM_INFO info;
    GetSystemInfo(&info);
    return info.dwNumberOfProcessors ? (uint32_t)info.dwNumberOfProcessors : 1;
}

uint64_t posenc__physical_memory(void)
{
    MEMORYSTATUSEX status = {.dwLength = sizeof status};
    return GlobalMemoryStatusEx(&status) ? status.ullTotalPhys : 0;
}
#else
/* pthread_once takes no argument, so the once-object carries its own pthread_once_t and the
 * function runs through a per-thread slot set just before the call. */
typedef struct once_impl {
    pthread_once_t once;
} once_impl;
_Static_assert(sizeof(once_impl) <= sizeof(posenc__once), "pthread_once_t fits");

static POSENC__THREAD_LOCAL void (*pending_once_fn)(void);

static void run_pending_once(void) { pending_once_fn(); }

void posenc__run_once(posenc__once *once, void (*fn)(void))
{
    once_impl *impl = (once_impl *)once;
    pending_once_fn = fn;
    pthread_once(&impl->once, run_pending_once);
}

_Static_assert(sizeof(pthread_mutex_t) <= sizeof(posenc__mutex), "pthread_mutex_t fits");
bool posenc__mutex_init(posenc__mutex *mutex)
{
    return pthread_mutex_init((pthread_mutex_t *)mutex, NULL) == 0;
}
void posenc__mutex_destroy(posenc__mutex *mutex)
{
    pthread_mutex_destroy((pthread_mutex_t *)mutex);
}
void posenc__mutex_lock(posenc__mutex *mutex) { pthread_mutex_lock((pthread_mutex_t *)mutex); }
void posenc__mutex_unlock(posenc__mutex *mutex) { pthread_mutex_unlock((pthread_mutex_t *)mutex); }

void *posenc__library_open(const char *name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }
void *posenc__library_symbol(void *library, const char *name) { return dlsym(library, name); }
void posenc__library_close(void *library) { dlclose(library); }

uint32_t posenc__cpu_count(void)
{
#  if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return (uint32_t)n;
    }
#  endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}

uint64_t posenc__physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
}
#endif

void posenc__cpu_field(const char *key, const char *fallback, char *out, size_t size)
{
    posenc__copy_string(out, size, fallback);
#if defined(__linux__)
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
#elif defined(__APPLE__)
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
#endif
}

const char *posenc__strcasestr(const char *haystack, const char *needle)
{
    size_t n = strlen(needle);
    for (; *haystack; haystack++) {
        size_t i = 0;
        while (i < n && haystack[i] &&
               tolower((unsigned char)haystack[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return haystack;
    }
    return n == 0 ? haystack : NULL;
}

void posenc__copy_string(char *out, size_t size, const char *in)
{
    if (size == 0)
        return;
    size_t n = in ? strlen(in) : 0;
    if (n >= size)
        n = size - 1;
    if (n)
        memcpy(out, in, n);
    out[n] = '\0';
}

char *posenc__strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy)
        memcpy(copy, s, n);
    return copy;
}

void *posenc__aligned_alloc(size_t alignment, size_t size)
{
#if defined(_WIN32)
    return _aligned_malloc(size, alignment);
#else
    void *memory = NULL;
    return posix_memalign(&memory, alignment, size) == 0 ? memory : NULL;
#endif
}

void posenc__aligned_free(void *memory)
{
#if defined(_WIN32)
    _aligned_free(memory);
#else
    free(memory);
#endif
}

/* ---- files replaced in one step ---- */

FILE *posenc__temp_file_create(const char *destination, char *temp_path, size_t temp_path_size)
{
    /* A name no other writer uses: the process id and a per-thread address and counter. The
     * exclusive creation refuses an existing file, so a clash is retried, never shared. */
    static POSENC__THREAD_LOCAL unsigned counter;
#if defined(_WIN32)
    unsigned long process = (unsigned long)_getpid();
#else
    unsigned long process = (unsigned long)getpid();
#endif
    for (int attempt = 0; attempt < 64; attempt++) {
        int n = snprintf(temp_path, temp_path_size, "%s.%lu-%llx-%u.tmp", destination, process,
                         (unsigned long long)(uintptr_t)&counter, counter++);
        if (n <= 0 || (size_t)n >= temp_path_size) {
            errno = ENAMETOOLONG;
            return NULL;
        }
#if defined(_WIN32)
        int fd = _open(temp_path, _O_WRONLY | _O_CREAT | _O_EXCL | _O_BINARY | _O_NOINHERIT,
                       _S_IREAD | _S_IWRITE);
#else
        int flags = O_WRONLY | O_CREAT | O_EXCL;
#  if defined(O_CLOEXEC)
        flags |= O_CLOEXEC;
#  endif
        /* 0666 less the umask, as fopen would create it. */
        int fd = open(temp_path, flags, 0666);
#endif
        if (fd < 0) {
            if (errno == EEXIST)
                continue;
            return NULL;
        }
#if defined(_WIN32)
        FILE *file = _fdopen(fd, "wb");
#else
        FILE *file = fdopen(fd, "wb");
#endif
        if (!file) {
            int saved = errno;
#if defined(_WIN32)
            _close(fd);
#else
            close(fd);
#endif
            remove(temp_path);
            errno = saved;
        }
        return file;
    }
    errno = EEXIST;
    return NULL;
}

bool posenc__file_commit(FILE *file)
{
    bool ok = fflush(file) == 0;
    int saved = errno;
#if defined(_WIN32)
    ok = ok && _commit(_fileno(file)) == 0;
#else
    ok = ok && fsync(fileno(file)) == 0;
#endif
    if (!ok)
        saved = errno;
    if (fclose(file) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    errno = saved;
    return ok;
}

bool posenc__file_replace(const char *from, const char *to)
{
#if defined(_WIN32)
    if (MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
        return true;
    switch (GetLastError()) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND: errno = ENOENT; break;
    case ERROR_ACCESS_DENIED:
    case ERROR_SHARING_VIOLATION: errno = EACCES; break;
    case ERROR_NOT_SAME_DEVICE: errno = EXDEV; break;
    case ERROR_DISK_FULL: errno = ENOSPC; break;
    default: errno = EIO; break;
    }
    return false;
#else
    return rename(from, to) == 0;
#endif
}

bool posenc__is_directory(const char *path)
{
#if defined(_WIN32)
    DWORD attributes = GetFileAttributesA(path);
    return attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY);
#else
    struct stat status;
    return stat(path, &status) == 0 && S_ISDIR(status.st_mode);
#endif
}
