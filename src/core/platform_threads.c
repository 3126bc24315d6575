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
