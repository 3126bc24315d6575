/* SPDX-License-Identifier: MIT */
/* Run-once, mutexes, threads, condition variables, the processor count (processor groups
 * included) and the monotonic clock on Win32. */
#include "core/platform.h"

#include <windows.h>
#include <process.h>

/* ---- run-once and mutexes ---- */

_Static_assert(sizeof(posenc__once) >= sizeof(void *) * 8, "once storage");

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

/* ---- threads ---- */

/* What a posenc__thread holds: the system's handle, and the function and argument that the
 * new thread reads from here (written before it starts, so it sees them). */
typedef struct thread_impl {
    HANDLE handle;
    void (*fn)(void *arg);
    void *arg;
} thread_impl;
_Static_assert(sizeof(thread_impl) <= sizeof(posenc__thread), "thread handle fits");

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

/* ---- condition variables (on the SRWLOCK above) ---- */

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

/* ---- processors ---- */

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

/* ---- time ---- */

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
