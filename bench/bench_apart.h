/* SPDX-License-Identifier: MIT */
/* `posenc bench` rows of calls apart: the timestep call and RoPE of a few tokens, each call
 * made after a pause of the caller's own work (a model's other layers between two calls),
 * against the same calls back to back, on the native CPU path, whose worker threads sleep
 * between calls further apart than their spin. */
#ifndef POSENC_BENCH_APART_H
#define POSENC_BENCH_APART_H

#include <posenc/posenc.h>
#include <stdbool.h>

#define BENCH_APART_ROWS 4

typedef struct bench_apart_row {
    const char *name;       /* "timesteps apart", ... */
    char shape[48];         /* as the main rows print it */
    posenc_status status;   /* not OK: `error` says why */
    char error[320];
    uint32_t runs, repeats; /* timed runs, back-to-back calls per run */
    double together, apart; /* seconds per call, medians */
    /* Per run, back-to-back time / apart time: 1.0 when a pause costs a call nothing. */
    double ratio, ratio_p10, ratio_p90;
} bench_apart_row;

bool bench_apart_applies(const posenc_device_info *info);
void bench_apart_run(posenc_context *context, uint32_t runs, double sample_seconds,
                     bench_apart_row rows[BENCH_APART_ROWS]);
void bench_apart_print(const bench_apart_row rows[BENCH_APART_ROWS]);
/* `, "apart_rows": [...]` inside a device's JSON object. */
void bench_apart_print_json(const bench_apart_row rows[BENCH_APART_ROWS]);

#endif
