/* SPDX-License-Identifier: MIT */
/* The bench's statistics over the times or ratios of its runs: median and 10th to 90th
 * percentile, interpolated. */
#ifndef POSENC_CLI_BENCH_STATS_H
#define POSENC_CLI_BENCH_STATS_H

#include <stdint.h>

/* Sorts `values` (n >= 1) in place, then gives its median and 10th and 90th percentiles (any of
 * the three outputs may be NULL). */
void bench_spread(double *values, uint32_t n, double *median, double *p10, double *p90);

#endif
