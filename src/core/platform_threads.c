/* SPDX-License-Identifier: MIT */
/* Threads, condition variables, the processor count and the monotonic clock, on POSIX threads
 * or Win32. */
#if !defined(_WIN32)
#  define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT; clock_gettime, nanosleep */
#endif

#include "core/platform.h"

#if defined(_WIN32)
#  include <windows.h>
#  include <process.h>
#else
#  include <pthread.h>
#  include <sched.h>
#  include <time.h>
#  include <unistd.h>
#endif

/* ---- threads ---- */

/* What a posenc__thread holds: the system's handle, and the function and argument that the
 * new thread reads from here (written before it starts, so it sees them). */
typedef struct thread_impl {
#if defined(_WIN32)
    HANDLE handle;
#else
    pthread_t handle;
#endif
    void (*fn)(void *arg);
    void *arg;
} thread_impl;
_Static_assert(sizeof(thread_impl) <= sizeof(posenc__thread), "thread handle fits");

#if defined(_WIN32)
static unsigned __stdcall thread_trampoline(void *opaque)
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
    /* _beginthreadex rather than CreateThread: the C runtime's per-thread state is set up and
     * freed with the thread. */
    uintptr_t handle = _beginthreadex(NULL, 0, thread_trampoline, impl, 0, NULL);
    impl->handle = (HANDLE)handle;
    return handle != 0;
}

void posenc__thread_join(posenc__thread *thread)
{
    thread_impl *impl = (thread_impl *)thread;
    WaitForSingleObject(impl->handle, INFINITE);
    CloseHandle(impl->handle);
}

uint64_t posenc__thread_id(void) { return GetCurrentThreadId(); }
#else
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

/* The address of a thread-local object: distinct among live threads, and a number whatever
 * pthread_t is on this system (an integer on Linux, a pointer on macOS). */
uint64_t posenc__thread_id(void)
{
    static POSENC__THREAD_LOCAL char marker;
    return (uint64_t)(uintptr_t)&marker;
}
#endif

/* ---- condition variables ---- */

/* A posenc__mutex is an SRWLOCK on Windows and a pthread_mutex_t elsewhere (platform.c). */
#if defined(_WIN32)
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

/* ---- processors ---- */

#if defined(_WIN32)
/* The process's affinity within its primary group when someone narrowed it (start /affinity,
 * SetProcessAffinityMask, a job object), else 0. GetProcessAffinityMask tells only of one
 * group, and gives 0 once the process has threads in several (posenc__thread_spread's). */
static KAFFINITY narrowed_affinity(void)
{
    DWORD_PTR process = 0, system = 0;
    if (!GetProcessAffinityMask(GetCurrentProcess(), &process, &system))
        return 0;
    return process != 0 && process != system ? (KAFFINITY)process : 0;
}

uint32_t posenc__cpu_count(void)
{
    KAFFINITY narrowed = narrowed_affinity();
    if (narrowed) {
        uint32_t n = 0;
        for (; narrowed; narrowed &= narrowed - 1)
            n++;
        return n;
    }
    /* Every processor group: a machine with more than 64 logical processors has several. */
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n ? (uint32_t)n : 1;
}

/* Before Windows 11 and Server 2022 a process's threads all start in one processor group (of at
 * most 64 logical processors) and stay there unless moved; posenc__cpu_count counts every
 * group, so a pool as large as it would crowd one group. Thread `index` of a pool (0: the
 * caller, which stays where it is) goes round-robin over the groups from the caller's, all of
 * the group's processors allowed. Where the affinity was narrowed, it is left alone. On
 * Windows 11 this confines each thread to one group, where the scheduler would have spread
 * them anyway. */
void posenc__thread_spread(uint32_t index)
{
    WORD groups = GetActiveProcessorGroupCount();
    GROUP_AFFINITY current;
    if (groups < 2 || index == 0 || narrowed_affinity() ||
        !GetThreadGroupAffinity(GetCurrentThread(), &current))
        return;
    GROUP_AFFINITY affinity = {0};
    affinity.Group = (WORD)((current.Group + index) % groups);
    DWORD count = GetActiveProcessorCount(affinity.Group);
    if (count == 0)
        return;
    /* A group's active processors are its lowest-numbered ones (no hot-added gaps). */
    affinity.Mask = count >= 8 * sizeof(KAFFINITY) ? ~(KAFFINITY)0
                                                   : ((KAFFINITY)1 << count) - 1;
    SetThreadGroupAffinity(GetCurrentThread(), &affinity, NULL);
}
#else
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

void posenc__thread_spread(uint32_t index) { (void)index; }
#endif

/* ---- time ---- */

#if defined(_WIN32)
double posenc__seconds_now(void)
{
    /* The frequency is fixed at boot and reading it is cheap: asked each time, so that no
     * shared variable is written from several threads. */
    LARGE_INTEGER frequency, now;
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
