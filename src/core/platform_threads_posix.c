/* SPDX-License-Identifier: MIT */
/* Run-once, mutexes, threads, condition variables, the processor count and the monotonic clock
 * on POSIX threads (Linux, macOS and the other Unix-like systems). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT; clock_gettime, nanosleep */

#include "core/platform.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

/* ---- run-once and mutexes ---- */

_Static_assert(sizeof(posenc__once) >= sizeof(void *) * 8, "once storage");

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

/* ---- threads ---- */

/* What a posenc__thread holds: the system's handle, and the function and argument that the
 * new thread reads from here (written before it starts, so it sees them). */
typedef struct thread_impl {
    pthread_t handle;
    void (*fn)(void *arg);
    void *arg;
} thread_impl;
_Static_assert(sizeof(thread_impl) <= sizeof(posenc__thread), "thread handle fits");

static void *thread_trampoline(void *opaque)
{
    thread_impl *impl = opaque;
    impl->fn(impl->arg);
    return NULL;
}

bool posenc__thread_start(posenc__thread *thread, void (*fn)(void *arg), void *arg)
{
    thread_impl *impl = (thread_impl *)thread;
    impl->fn = fn;
    impl->arg = arg;
    return pthread_create(&impl->handle, NULL, thread_trampoline, impl) == 0;
}

void posenc__thread_join(posenc__thread *thread)
{
    pthread_join(((thread_impl *)thread)->handle, NULL);
}

/* ---- condition variables (on the pthread_mutex_t above) ---- */

_Static_assert(sizeof(pthread_cond_t) <= sizeof(posenc__condition), "pthread_cond_t fits");

bool posenc__condition_init(posenc__condition *condition)
{
    return pthread_cond_init((pthread_cond_t *)condition, NULL) == 0;
}
void posenc__condition_destroy(posenc__condition *condition)
{
    pthread_cond_destroy((pthread_cond_t *)condition);
}
void posenc__condition_wait(posenc__condition *condition, posenc__mutex *mutex)
{
    pthread_cond_wait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex);
}
void posenc__condition_wake_one(posenc__condition *condition)
{
    pthread_cond_signal((pthread_cond_t *)condition);
}
void posenc__condition_wake_all(posenc__condition *condition)
{
    pthread_cond_broadcast((pthread_cond_t *)condition);
}

/* ---- processors ---- */

uint32_t posenc__cpu_count(void)
{
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return (uint32_t)n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}

/* One processor group: nothing to spread over (see platform_threads_win32.c). */
void posenc__thread_spread(uint32_t index) { (void)index; }

/* ---- time ---- */

double posenc__seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void posenc__sleep_seconds(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0) {
    }
}
