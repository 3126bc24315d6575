/* SPDX-License-Identifier: MIT */
/* Median and percentiles of a bench's runs (bench_stats.h). */
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

void bench_format_time(double seconds, char *text, size_t size)
{
    snprintf(text, size, seconds < 1e-3 ? "%.2f us" : "%.3f ms",
             seconds < 1e-3 ? seconds * 1e6 : seconds * 1e3);
}
