/* SPDX-License-Identifier: MIT */
/* `posenc bench` 16-bit floor rows: for f16 and bf16 RoPE in place, the copy shaped like the
 * operation, the same pass with each element converted to f32 and back (the floor: what a
 * 16-bit RoPE costs before any arithmetic) and the operation itself, NeoX and GPT-J, timed in
 * turn in one run on the native CPU path. They split a 16-bit row's distance from the copy
 * into the conversions' share and the rotation's. */
#ifndef POSENC_BENCH_CONVERSION_H
#define POSENC_BENCH_CONVERSION_H

#include <posenc/posenc.h>
#include <stdbool.h>

#define BENCH_CONVERSION_ROWS 4

typedef struct bench_conversion_row {
    const char *name;       /* "rope decode", "rope prefill" */
    posenc_dtype dtype;
    int64_t tokens;
    posenc_status status;   /* not OK: `error` says why */
    char error[320];
    uint32_t runs, repeats; /* timed runs, calls per run and form */
    double copy, floor, neox, gptj; /* seconds per call, medians */
    /* Per run, copy time / floor time, and floor time / each operation's time. */
    double floor_ratio, floor_p10, floor_p90;
    double neox_ratio, gptj_ratio;
} bench_conversion_row;

/* Whether the rows are measured on this device: the native CPU path, the one backend with the
 * floor. */
bool bench_conversion_applies(const posenc_device_info *info);
void bench_conversion_run(posenc_context *context, uint32_t runs, double sample_seconds,
                          bench_conversion_row rows[BENCH_CONVERSION_ROWS]);
void bench_conversion_print(const bench_conversion_row rows[BENCH_CONVERSION_ROWS]);
/* `, "conversion_floor_rows": [...]` inside a device's JSON object. */
void bench_conversion_print_json(const bench_conversion_row rows[BENCH_CONVERSION_ROWS]);

#endif
