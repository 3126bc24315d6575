/* SPDX-License-Identifier: MIT */
/* Operating-system services for POSIX and Windows: run-once, mutexes, the environment, dynamic
 * loading, processor and memory facts, memory mappings and child processes. */
#if !defined(_WIN32)
#  define _GNU_SOURCE /* setenv, MAP_ANONYMOUS, MAP_NORESERVE, dl_iterate_phdr */
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
#  include <shellapi.h>
#  include <io.h>
#  include <process.h>
#else
#  include <dlfcn.h>
#  if defined(__ELF__)
#    include <link.h> /* dl_iterate_phdr */
#  endif
#  include <pthread.h>
#  include <signal.h>
#  include <spawn.h>
#  include <sys/mman.h>
#  include <sys/wait.h>
#  include <unistd.h>
#  if defined(__APPLE__)
#    include <crt_externs.h> /* a shared library has no direct `environ` there */
#    include <sys/sysctl.h>
#    define environ (*_NSGetEnviron())
#  else
extern char **environ;
#  endif
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
#endif

/* A program is dynamically linked exactly when it names a dynamic linker: without one no
 * libc.so is mapped, and a library dlopen brings in would run on a second, uninitialised C
 * library. The test holds for static-pie programs too, which have a PT_DYNAMIC (and a non-NULL
 * _DYNAMIC, so a weak reference to it would not tell) to relocate themselves but no PT_INTERP,
 * and for a program started as `ld.so ./program`, whose own headers keep their PT_INTERP. */
bool posenc__library_loading(const char **reason)
{
#if defined(__ELF__)
    bool dynamic = false;
    dl_iterate_phdr(note_interpreter, &dynamic);
    if (!dynamic) {
        if (reason)
            *reason = "dynamic loading is not available in a static binary";
        return false;
    }
#else
    (void)reason;
#endif
    return true;
}

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

/* ---- the environment ---- */

const char *posenc__env_get(const char *name) { return getenv(name); }

bool posenc__env_get_path(const char *name, char *out, size_t size)
{
#if defined(_WIN32)
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
#else
    const char *value = getenv(name);
#endif
    bool fits = value && *value && strlen(value) < size;
    if (fits)
        posenc__copy_string(out, size, value);
#if defined(_WIN32)
    free(value);
#endif
    return fits;
}

#if defined(_WIN32)
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
#endif

bool posenc__env_set(const char *name, const char *value)
{
#if defined(_WIN32)
    return put_environment(name, value);
#else
    return setenv(name, value, 1) == 0;
#endif
}

bool posenc__env_unset(const char *name)
{
#if defined(_WIN32)
    return put_environment(name, "");
#else
    return unsetenv(name) == 0;
#endif
}

char **posenc__utf8_arguments(int argc, char **argv)
{
#if defined(_WIN32)
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
#else
    (void)argc;
    return argv;
#endif
}

uint64_t posenc__process_id(void)
{
#if defined(_WIN32)
    return (uint64_t)GetCurrentProcessId();
#else
    return (uint64_t)getpid();
#endif
}

/* ---- processor caches and the terminal ---- */

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
#endif

#if defined(__APPLE__)
static uint64_t sysctl_size(const char *name)
{
    int64_t value = 0;
    size_t size = sizeof value;
    return sysctlbyname(name, &value, &size, NULL, 0) == 0 && value > 0 ? (uint64_t)value : 0;
}
#endif

void posenc__cpu_caches(uint64_t *l1d, uint64_t *l2, uint64_t *l3)
{
    uint64_t sizes[4] = {0};
#if defined(__linux__)
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
#elif defined(_WIN32)
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
#elif defined(__APPLE__)
    sizes[1] = sysctl_size("hw.l1dcachesize");
    sizes[2] = sysctl_size("hw.l2cachesize");
    sizes[3] = sysctl_size("hw.l3cachesize");
#endif
    *l1d = sizes[1];
    *l2 = sizes[2];
    *l3 = sizes[3];
}

int posenc__stream_redirect(FILE *stream, FILE *target)
{
    fflush(stream);
    fflush(target);
#if defined(_WIN32)
    int saved = _dup(_fileno(stream));
    if (saved >= 0 && _dup2(_fileno(target), _fileno(stream)) != 0) {
        _close(saved);
        saved = -1;
    }
#else
    int saved = dup(fileno(stream));
    if (saved >= 0 && dup2(fileno(target), fileno(stream)) < 0) {
        close(saved);
        saved = -1;
    }
#endif
    return saved;
}

void posenc__stream_restore(FILE *stream, int saved)
{
    if (saved < 0)
        return;
    fflush(stream);
#if defined(_WIN32)
    _dup2(saved, _fileno(stream));
    _close(saved);
#else
    dup2(saved, fileno(stream));
    close(saved);
#endif
}

#if defined(_WIN32) && !defined(ENABLE_VIRTUAL_TERMINAL_PROCESSING)
#  define ENABLE_VIRTUAL_TERMINAL_PROCESSING 0x0004
#endif

bool posenc__is_terminal(FILE *stream)
{
#if defined(_WIN32)
    /* A console shows escape sequences as text unless it was switched to interpret them. */
    DWORD mode = 0;
    HANDLE handle = (HANDLE)_get_osfhandle(_fileno(stream));
    return _isatty(_fileno(stream)) && GetConsoleMode(handle, &mode) &&
           (mode & ENABLE_VIRTUAL_TERMINAL_PROCESSING);
#else
    return isatty(fileno(stream)) != 0;
#endif
}

/* ---- the alternate signal stack ---- */

void posenc__signal_stack_save(posenc__signal_stack *saved)
{
    saved->saved = false;
#if !defined(_WIN32)
    stack_t current;
    if (sigaltstack(NULL, &current) == 0) {
        saved->sp = current.ss_sp;
        saved->size = current.ss_size;
        saved->flags = current.ss_flags;
        saved->saved = true;
    }
#endif
}

void posenc__signal_stack_restore(const posenc__signal_stack *saved)
{
#if !defined(_WIN32)
    stack_t current;
    if (!saved->saved || sigaltstack(NULL, &current) != 0 || (current.ss_flags & SS_ONSTACK))
        return;
    if (current.ss_sp == saved->sp && current.ss_size == saved->size &&
        (current.ss_flags & SS_DISABLE) == (saved->flags & SS_DISABLE))
        return;
    stack_t previous = {.ss_sp = saved->sp, .ss_size = saved->size,
                        .ss_flags = saved->flags & SS_DISABLE};
    sigaltstack(&previous, NULL);
#else
    (void)saved;
#endif
}

/* ---- memory mappings ---- */

void *posenc__memory_map(size_t bytes)
{
#if defined(_WIN32)
    return VirtualAlloc(NULL, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
#else
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#  if defined(MAP_NORESERVE)
    flags |= MAP_NORESERVE;
#  endif
    void *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    return memory == MAP_FAILED ? NULL : memory;
#endif
}

void posenc__memory_unmap(void *memory, size_t bytes)
{
    if (!memory)
        return;
#if defined(_WIN32)
    (void)bytes;
    VirtualFree(memory, 0, MEM_RELEASE);
#else
    munmap(memory, bytes);
#endif
}

/* ---- child processes ---- */

#if defined(_WIN32)
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
#endif

bool posenc__process_start(posenc__process *process, const char *const *argv)
{
    memset(process, 0, sizeof *process);
#if defined(_WIN32)
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
#else
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, (char *const *)argv, environ) != 0)
        return false;
    process->opaque[0] = (void *)(intptr_t)pid;
    return true;
#endif
}

int posenc__process_wait(posenc__process *process)
{
#if defined(_WIN32)
    HANDLE handle = process->opaque[0];
    if (!handle)
        return -1;
    DWORD code = 0;
    bool ok = WaitForSingleObject(handle, INFINITE) == WAIT_OBJECT_0 &&
              GetExitCodeProcess(handle, &code);
    CloseHandle(handle);
    process->opaque[0] = NULL;
    return ok ? (int)code : -1;
#else
    pid_t pid = (pid_t)(intptr_t)process->opaque[0];
    if (pid <= 0)
        return -1;
    int status;
    pid_t waited;
    while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    process->opaque[0] = NULL;
    return waited == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
#endif
}
