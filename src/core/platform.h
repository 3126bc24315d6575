/* SPDX-License-Identifier: MIT */
/* The few operating-system services the library and the command-line tool need: run-once,
 * thread-local storage, dynamic loading, processor and memory counts, files replaced in one
 * step, and small string helpers. */
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

/* ---- threads, condition variables and time (platform_threads.c; posenc__cpu_count is there
 * too, atomics are in core/atomics.h) ---- */

/* A thread running fn(arg). The object must stay at one address until posenc__thread_join. */
typedef struct posenc__thread {
    void *opaque[4];
} posenc__thread;
/* False when the system could not start one. */
bool posenc__thread_start(posenc__thread *thread, void (*fn)(void *arg), void *arg);
void posenc__thread_join(posenc__thread *thread);
/* A number naming the calling thread, distinct among the threads alive at one time. */
uint64_t posenc__thread_id(void);
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

/* dlopen/dlsym/dlclose, or their Windows equivalents. NULL on failure. */
void *posenc__library_open(const char *name);
void *posenc__library_symbol(void *library, const char *name);
void posenc__library_close(void *library);

/* Cores this process may run on (affinity-aware where the OS tells), at least 1. */
uint32_t posenc__cpu_count(void);
/* Physical memory in bytes, 0 when unknown. */
uint64_t posenc__physical_memory(void);
/* A field of the CPU description ("model name" -> "AMD EPYC 9B14", "vendor_id"), or
 * `fallback` where the OS does not tell. */
void posenc__cpu_field(const char *key, const char *fallback, char *out, size_t size);

/* Memory aligned to `alignment` (a power of two); free with posenc__aligned_free. */
void *posenc__aligned_alloc(size_t alignment, size_t size);
void posenc__aligned_free(void *memory);

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
/* Whether `path` names an existing directory. */
bool posenc__is_directory(const char *path);

/* Case-insensitive substring search. */
const char *posenc__strcasestr(const char *haystack, const char *needle);
/* Copies at most size-1 bytes and always terminates. */
void posenc__copy_string(char *out, size_t size, const char *in);
/* strdup that returns NULL for NULL. */
char *posenc__strdup(const char *s);

#endif
