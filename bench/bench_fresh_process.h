/* SPDX-License-Identifier: MIT */
/* The bench's fresh-process first call: `posenc rope` on one decode step, run as a new process
 * on the device and timed from its start to its exit, so that the loading of the device's
 * runtime and driver is counted as an application pays it. */
#ifndef POSENC_BENCH_FRESH_PROCESS_H
#define POSENC_BENCH_FRESH_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#define BENCH_FRESH_PROCESS_MAX_RUNS 16

typedef struct bench_fresh_process {
    bool measured;
    uint32_t runs;         /* timed runs, after one that fills the kernel cache */
    double median_seconds; /* start to exit */
    double p10_seconds, p90_seconds;
    char note[320];        /* why it was not measured */
} bench_fresh_process;

/* Runs `posenc rope --generate 1,1,32,8,128 --device <selector> --quiet` once untimed (it
 * fills the default kernel cache, as an application's first run does) and then `runs` times
 * (at most BENCH_FRESH_PROCESS_MAX_RUNS), timed. */
void bench_fresh_process_run(const char *selector, uint32_t runs, bench_fresh_process *result);

void bench_fresh_process_print(const bench_fresh_process *result, bool pipelines_built);
/* ", \"fresh_process\": {...}" inside the device's first_call object. */
void bench_fresh_process_print_json(const bench_fresh_process *result);

#endif
