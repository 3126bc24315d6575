/* SPDX-License-Identifier: MIT */
/* Threads, condition variables and the monotonic clock, on POSIX threads or Win32. */
#if !defined(_WIN32)
#  define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#endif

#include "core/platform.h"

#if defined(_WIN32)
#  include <windows.h>
#else
#  include <time.h>
#endif

#if defined(_WIN32)
double posenc__seconds_now(void)
{
    static LARGE_INTEGER frequency; /* constant after boot; a racing first write stores the same */
    LARGE_INTEGER now;
    if (frequency.QuadPart == 0)
        QueryPerformanceFrequency(&frequency);
    QueryPerformanceCounter(&now);
    return (double)now.QuadPart / (double)frequency.QuadPart;
}

void posenc__sleep_seconds(double seconds)
{
    Sleep(seconds <= 0 ? 0 : (DWORD)(seconds * 1e3 + 0.5));
}
#else
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
#endif

/* ---- threads (temporary) ---- */

#include <string.h>
#if !defined(_WIN32)
#  include <pthread.h>
#endif

/* The thread object keeps the function and its argument, so the start routine (whose signature
 * the system fixes) finds them through one pointer. */
typedef struct thread_impl {
    void *handle;
    void (*fn)(void *arg);
    void *arg;
} thread_impl;
_Static_assert(sizeof(thread_impl) <= sizeof(posenc__thread), "thread fits");

#if defined(_WIN32)
static DWORD WINAPI thread_main(LPVOID opaque)
{
    thread_impl *impl = opaque;
    impl->fn(impl->arg);
    return 0;
}

bool posenc__thread_start(posenc__thread *thread, void (*fn)(void *arg), void *arg)
{
    thread_impl *impl = (thread_impl *)thread;
    impl->fn = fn;
    impl->arg = arg;
    impl->handle = CreateThread(NULL, 0, thread_main, impl, 0, NULL);
    return impl->handle != NULL;
}

void posenc__thread_join(posenc__thread *thread)
{
    thread_impl *impl = (thread_impl *)thread;
    WaitForSingleObject(impl->handle, INFINITE);
    CloseHandle(impl->handle);
}

uint64_t posenc__thread_id(void) { return (uint64_t)GetCurrentThreadId(); }

_Static_assert(sizeof(CONDITION_VARIABLE) <= sizeof(posenc__condition), "condition fits");
bool posenc__condition_init(posenc__condition *condition)
{
    InitializeConditionVariable((PCONDITION_VARIABLE)condition);
    return true;
}
void posenc__condition_destroy(posenc__condition *condition) { (void)condition; }
void posenc__condition_wait(posenc__condition *condition, posenc__mutex *mutex)
{
    SleepConditionVariableSRW((PCONDITION_VARIABLE)condition, (PSRWLOCK)mutex, INFINITE, 0);
}
void posenc__condition_wake_one(posenc__condition *condition)
{
    WakeConditionVariable((PCONDITION_VARIABLE)condition);
}
void posenc__condition_wake_all(posenc__condition *condition)
{
    WakeAllConditionVariable((PCONDITION_VARIABLE)condition);
}
#else
_Static_assert(sizeof(pthread_t) <= sizeof(void *), "pthread_t fits");

static void *thread_main(void *opaque)
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
    pthread_t handle;
    if (pthread_create(&handle, NULL, thread_main, impl) != 0)
        return false;
    memcpy(&impl->handle, &handle, sizeof handle);
    return true;
}

void posenc__thread_join(posenc__thread *thread)
{
    thread_impl *impl = (thread_impl *)thread;
    pthread_t handle;
    memcpy(&handle, &impl->handle, sizeof handle);
    pthread_join(handle, NULL);
}

uint64_t posenc__thread_id(void)
{
    pthread_t self = pthread_self();
    uint64_t id = 0;
    memcpy(&id, &self, sizeof self < sizeof id ? sizeof self : sizeof id);
    return id;
}

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
#endif
