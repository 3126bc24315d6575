/* SPDX-License-Identifier: MIT */
/* Median and percentiles of a bench's runs, and how its times, sizes and strings print
 * (bench_stats.h). */
#include "bench_stats.h"

#include <stdio.h>
#include <stdlib.h>

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of `n` sorted values, interpolated. */
static double quantile(const double *sorted, uint32_t n, double q)
{
    double at = q * (n - 1);
    uint32_t i = (uint32_t)at;
    if (i + 1 >= n)
        return sorted[n - 1];
    return sorted[i] + (at - i) * (sorted[i + 1] - sorted[i]);
}

void bench_spread(double *values, uint32_t n, double *median, double *p10, double *p90)
{
    qsort(values, n, sizeof values[0], compare_double);
    if (median)
        *median = quantile(values, n, 0.5);
    if (p10)
        *p10 = quantile(values, n, 0.1);
    if (p90)
        *p90 = quantile(values, n, 0.9);
}

uint32_t bench_calls_per_run(double single, double sample_seconds)
{
    uint32_t calls = single > 0.0 ? (uint32_t)(sample_seconds / single) : 1000;
    return calls < 1 ? 1 : calls > 100000 ? 100000 : calls;
}

void bench_format_time(double seconds, char *text, size_t size)
{
    if (seconds < 1e-3)
        snprintf(text, size, "%.2f us", seconds * 1e6);
    else if (seconds < 1.0)
        snprintf(text, size, "%.3f ms", seconds * 1e3);
    else
        snprintf(text, size, "%.3f s", seconds);
}

/* The same units as `posenc devices` prints (src/cli/device.c). */
void bench_format_bytes(uint64_t bytes, char *text, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double value = (double)bytes;
    int unit = 0;
    while (value >= 1024.0 && unit < 5) {
        value /= 1024.0;
        unit++;
    }
    if (unit == 0)
        snprintf(text, size, "%llu B", (unsigned long long)bytes);
    else if (value == (double)(uint64_t)value)
        snprintf(text, size, "%.0f %s", value, units[unit]);
    else
        snprintf(text, size, "%.1f %s", value, units[unit]);
}

void bench_format_error(const posenc_context *context, posenc_status status, char *text,
                        size_t size)
{
    const char *detail = posenc_context_last_error(context);
    snprintf(text, size, "%s: %s", posenc_status_name(status),
             detail && *detail ? detail : posenc_status_string(status));
}

void bench_print_json_string(const char *text)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if (*c < 0x20)
            printf("\\u%04x", *c);
        else
            putchar(*c);
    }
    putchar('"');
}
