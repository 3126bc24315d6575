/* SPDX-License-Identifier: MIT */
/* The bench's entry: what `posenc bench` measures on each device (bench_cases.c), how it times
 * it (bench_runner.c) and how it prints it (bench_report.c). The command line's flags and the
 * choice of devices stay with the command (src/cli/cmd_bench.c); the bench reaches the library
 * through its public headers and posenc/posenc_diagnostics.h alone. */
#ifndef POSENC_BENCH_BENCH_H
#define POSENC_BENCH_BENCH_H

#include <posenc/posenc.h>
#include <stdbool.h>
#include <stdint.h>

/* The most timed runs of one row. */
#define BENCH_MAX_RUNS 1000

typedef struct bench_options {
    uint32_t threads;       /* CPU worker threads, 0: every core this process may use */
    uint32_t runs;          /* timed runs per row (the least, unless runs_given) */
    uint32_t warmup;        /* warm-up runs per row */
    double sample_seconds;  /* a timed run repeats the call until it lasts about this long */
    double min_row_seconds; /* without runs_given: more runs until a row's calls last this long */
    bool runs_given;        /* `runs` is what the user asked for, exactly */
    bool quick;
    bool json;
    bool progress;          /* a progress line on stderr */
} bench_options;

/* One device to measure: its posenc_device_get index and the selector that names it in the
 * output and in the fresh-process runs ("vulkan:0", "cpu"). */
typedef struct bench_device {
    uint32_t index;
    char selector[32];
} bench_device;

/* Measures every device in turn and prints the table (or the JSON object) on stdout. False when
 * any measurement failed (the output says which). */
bool bench_run(const bench_options *options, const bench_device *devices, uint32_t count);

#endif
