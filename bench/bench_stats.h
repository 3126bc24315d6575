/* SPDX-License-Identifier: MIT */
/* The bench's statistics over the times or ratios of its runs: median and 10th to 90th
 * percentile, interpolated; how many calls a run makes; how the rows print a time, a size and an error, and how the JSON
 * output prints a string. */
#ifndef POSENC_BENCH_STATS_H
#define POSENC_BENCH_STATS_H

#include <posenc/posenc.h>
#include <stddef.h>
#include <stdint.h>

/* Sorts `values` (n >= 1) in place, then gives its median and 10th and 90th percentiles (any of
 * the three outputs may be NULL). */
void bench_spread(double *values, uint32_t n, double *median, double *p10, double *p90);

/* How many calls a timed run makes so that it lasts about `sample_seconds`, from one call's
 * time `single` (1000 where that read 0): from 1 to 100000. */
uint32_t bench_calls_per_run(double single, double sample_seconds);

/* A time as the rows print it: "0.80 us" below a millisecond, "4.300 ms" below a second, else
 * "1.250 s". */
void bench_format_time(double seconds, char *text, size_t size);

/* A size as the rows print it: "512 B", "1 MiB", "1.5 GiB". */
void bench_format_bytes(uint64_t bytes, char *text, size_t size);

/* "POSENC_X: detail" for a failed call on `context`: its last error, or the status's own text
 * when there is none. */
void bench_format_error(const posenc_context *context, posenc_status status, char *text,
                        size_t size);

/* Prints `text` to stdout as a JSON string: quoted, with quotes, backslashes and control
 * characters escaped. */
void bench_print_json_string(const char *text);

#endif
