/* SPDX-License-Identifier: MIT */
/* The operating-system services the library needs (the tests use them too): run-once, threads,
 * time, the environment, dynamic loading, processor and memory facts, files (paths in UTF-8 on
 * every system) and small string helpers. Those only the programs need (child processes, memory
 * maps, stream redirects, directories, terminals, cache sizes, setting the environment, thread
 * ids, whether a library is loaded) are support/support.h's.
 * Implemented per system in platform_posix.c, platform_threads_posix.c, platform_files_posix.c
 * or their _win32.c counterparts (src/CMakeLists.txt compiles one set); what is the same
 * everywhere is in platform.c and platform_files.c. */
#ifndef POSENC_CORE_PLATFORM_H
#define POSENC_CORE_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(_MSC_VER)
#  define POSENC__THREAD_LOCAL __declspec(thread)
#else
#  define POSENC__THREAD_LOCAL _Thread_local
#endif

/* Marks a printf-like function so that GCC and Clang check its calls. MinGW-w64's "printf"
 * archetype is msvcrt's (no %zu); its C99 stdio (__USE_MINGW_ANSI_STDIO) is "gnu_printf". */
#if defined(__MINGW32__)
#  define POSENC__PRINTF_LIKE(format_index, first_arg) \
      __attribute__((format(gnu_printf, format_index, first_arg)))
#elif defined(__GNUC__) || defined(__clang__)
#  define POSENC__PRINTF_LIKE(format_index, first_arg) \
      __attribute__((format(printf, format_index, first_arg)))
#else
#  define POSENC__PRINTF_LIKE(format_index, first_arg)
#endif

/* Runs `fn` exactly once per process, whichever thread gets there first; the others wait. */
typedef struct posenc__once {
    void *opaque[8];
} posenc__once;
void posenc__run_once(posenc__once *once, void (*fn)(void));

/* A plain (non-recursive) mutex, for state that several threads may reach at once. */
typedef struct posenc__mutex {
    void *opaque[8];
} posenc__mutex;
/* False when the system could not make one. */
bool posenc__mutex_init(posenc__mutex *mutex);
void posenc__mutex_destroy(posenc__mutex *mutex);
void posenc__mutex_lock(posenc__mutex *mutex);
void posenc__mutex_unlock(posenc__mutex *mutex);

/* ---- threads, condition variables and time (platform_threads_*.c, with run-once, mutexes and
 * posenc__cpu_count; atomics are in core/atomics.h) ---- */

/* A thread running fn(arg). The object must stay at one address until posenc__thread_join. */
typedef struct posenc__thread {
    void *opaque[4];
} posenc__thread;
/* False when the system could not start one. */
bool posenc__thread_start(posenc__thread *thread, void (*fn)(void *arg), void *arg);
void posenc__thread_join(posenc__thread *thread);
/* Called by thread `index` of a pool (0: the caller) when it starts: on Windows before 11, with
 * more than 64 logical processors, moves it to a processor group round-robin, since the system
 * keeps a process's threads in one group. A no-op elsewhere. */
void posenc__thread_spread(uint32_t index);

/* A condition variable used with a posenc__mutex (pthread_cond_t, CONDITION_VARIABLE). */
typedef struct posenc__condition {
    void *opaque[8];
} posenc__condition;
bool posenc__condition_init(posenc__condition *condition);
void posenc__condition_destroy(posenc__condition *condition);
/* Releases `mutex`, sleeps until woken (spurious wake-ups happen), takes `mutex` again. */
void posenc__condition_wait(posenc__condition *condition, posenc__mutex *mutex);
void posenc__condition_wake_one(posenc__condition *condition);
void posenc__condition_wake_all(posenc__condition *condition);

/* Seconds on a monotonic clock with an unspecified origin (clock_gettime(CLOCK_MONOTONIC),
 * QueryPerformanceCounter): for intervals, never for dates. */
double posenc__seconds_now(void);
/* Sleeps the calling thread for about `seconds`. */
void posenc__sleep_seconds(double seconds);

#if defined(_WIN32)
#  include <wchar.h>
/* UTF-8 to a new UTF-16 string and back (free with free()), for the wide-character Windows
 * calls. NULL with errno set (EILSEQ for bytes that are not UTF-8, ENOMEM). */
wchar_t *posenc__utf8_to_wide(const char *utf8);
char *posenc__wide_to_utf8(const wchar_t *wide);
/* errno for the Win32 errors (GetLastError) that file calls meet; EIO for the others. */
int posenc__errno_from_win32(unsigned long error);
#endif

/* ---- the environment and the process (platform_posix.c, platform_win32.c) ---- */

/* getenv: the value of a variable, NULL when unset. Not for paths on Windows, where it is in the
 * ANSI code page; use posenc__env_get_path there. */
const char *posenc__env_get(const char *name);
/* The value of a variable in UTF-8 (on Windows read from the wide-character environment, so a
 * path outside the ANSI code page survives) into `out`. False when unset, empty or longer than
 * size-1 bytes. */
bool posenc__env_get_path(const char *name, char *out, size_t size);

/* The calling process's id. */
uint64_t posenc__process_id(void);

/* Whether this process can load shared libraries at all: false, with `*reason` "dynamic loading
 * is not available in a static binary", in a statically linked ELF program, where glibc's
 * dlopen would map a second C library into the process and crash in it. True on Windows and
 * macOS, which have no static programs. */
bool posenc__library_loading(const char **reason);
/* dlopen/dlsym/dlclose, or their Windows equivalents (LoadLibraryW: a path in UTF-8). NULL on
 * failure, and always in a static binary (posenc__library_loading). */
void *posenc__library_open(const char *name);
/* The first of the `count` libraries `names` that opens, tried in order, its name in `*opened`
 * when `opened` is not NULL; NULL when none does (a runtime's loader under its names). */
void *posenc__library_open_first(const char *const *names, size_t count, const char **opened);
void *posenc__library_symbol(void *library, const char *name);
void posenc__library_close(void *library);

/* Cores this process may run on (affinity-aware where the OS tells), at least 1. */
uint32_t posenc__cpu_count(void);
/* Physical memory in bytes, 0 when unknown. */
uint64_t posenc__physical_memory(void);
/* A field of the CPU description ("model name" -> "AMD EPYC 9B14", "vendor_id"), or
 * `fallback` where the OS does not tell. */
void posenc__cpu_field(const char *key, const char *fallback, char *out, size_t size);

/* The calling thread's alternate signal stack, kept across calls that may install another:
 * LLVM (inside PoCL and other OpenCL drivers) installs a stack of its own on the thread that
 * first compiles, and that thread is the caller's. Putting the caller's back keeps the library
 * from changing the thread's signal state (and keeps AddressSanitizer, which frees the stack it
 * installed when the thread exits, from freeing LLVM's). No-op outside POSIX. */
typedef struct posenc__signal_stack {
    void *sp;
    size_t size;
    int flags;
    bool saved;
} posenc__signal_stack;
void posenc__signal_stack_save(posenc__signal_stack *saved);
void posenc__signal_stack_restore(const posenc__signal_stack *saved);

/* Memory aligned to `alignment` (a power of two); free with posenc__aligned_free. */
void *posenc__aligned_alloc(size_t alignment, size_t size);
void posenc__aligned_free(void *memory);

/* ---- files (platform_files_*.c; files replaced in one step in platform_files.c) ---- */

/* Every path is UTF-8, converted to UTF-16 for the wide-character calls on Windows, where the
 * narrow ones would read it in the ANSI code page. */

/* The separator the system's own paths use ('\\' on Windows, where '/' is accepted too). */
#if defined(_WIN32)
#  define POSENC__PATH_SEPARATOR '\\'
#else
#  define POSENC__PATH_SEPARATOR '/'
#endif

/* The folder for this user's caches: %LOCALAPPDATA% on Windows; else $XDG_CACHE_HOME when it is
 * absolute (the XDG spec ignores relative ones), else ~/Library/Caches on macOS and ~/.cache
 * elsewhere. False when the environment does not tell or the path does not fit. */
bool posenc__user_cache_directory(char *out, size_t size);

/* fopen. NULL with errno set on failure. */
FILE *posenc__file_open(const char *path, const char *mode);
/* remove: a file (or an empty directory on POSIX). False with errno set on failure. */
bool posenc__file_remove(const char *path);
/* mkdir with owner-only permissions where the system has them. False with errno set on failure;
 * EEXIST when something of that name exists. */
bool posenc__make_directory(const char *path);

/* Files replaced in one step: write a temporary file beside the destination, commit it, then
 * rename it over the destination, so that a reader (or a failure half-way) never leaves a
 * destination half written or gone. Each returns errno-style reasons through errno. */
/* Creates and opens for binary writing a new file in the directory of `destination`, named
 * "<destination>.<unique>.tmp" (its path into `temp_path`); exclusive creation, so an existing
 * file is never shared or truncated. NULL with errno set on failure. */
FILE *posenc__temp_file_create(const char *destination, char *temp_path, size_t temp_path_size);
/* Flushes `file` to the disk and closes it (closed in every case). False with errno set when
 * any of it failed: the data may not all be there. */
bool posenc__file_commit(FILE *file);
/* Renames `from` to `to`, replacing `to` if it exists (POSIX rename; MoveFileEx with
 * MOVEFILE_REPLACE_EXISTING on Windows, where rename refuses an existing target). Both must be
 * on one volume. False with errno set on failure. */
bool posenc__file_replace(const char *from, const char *to);
/* The per-system steps of the two above. Creates and opens for binary writing a new file at
 * `path`, never inherited by child processes; NULL with errno set on failure, EEXIST when
 * something of that name exists. */
FILE *posenc__file_create_new(const char *path);
/* fflush, then the system's own buffers to the disk (fsync, _commit); the file stays open.
 * False with errno set on failure. */
bool posenc__file_sync(FILE *file);

/* Case-insensitive substring search. */
const char *posenc__strcasestr(const char *haystack, const char *needle);
/* Copies at most size-1 bytes and always terminates. */
void posenc__copy_string(char *out, size_t size, const char *in);
/* strdup that returns NULL for NULL. */
char *posenc__strdup(const char *s);

#endif
