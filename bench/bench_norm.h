/* SPDX-License-Identifier: MIT */
/* `posenc bench` QK norm rows: Qwen3's RMSNorm of q and k over each head fused into RoPE (one
 * posenc_rope with q_norm_weight and k_norm_weight), against RoPE alone of the same tensors and
 * the in-place copy of the same bytes, timed in turn in one run, on every device that takes the
 * norm's fields (one that refuses them has no rows). */
#ifndef POSENC_BENCH_NORM_H
#define POSENC_BENCH_NORM_H

#include <posenc/posenc.h>
#include <stdbool.h>

#define BENCH_NORM_ROWS 4

typedef struct bench_norm_row {
    const char *name;       /* "decode", "prefill" */
    posenc_dtype dtype;
    int64_t tokens;
    posenc_status status;   /* not OK: `error` says why */
    char error[320];
    uint32_t runs, repeats; /* timed runs, calls per run and pass */
    double copy, rope, normed; /* seconds per call, medians */
    /* Per run, copy time / fused time and RoPE time / fused time. */
    double copy_ratio, copy_p10, copy_p90;
    double rope_ratio, rope_p10, rope_p90;
} bench_norm_row;

/* Measures the rows on `context`; false (no rows) where the device refuses the norm's fields. */
bool bench_norm_run(posenc_context *context, uint32_t runs, double sample_seconds,
                    bench_norm_row rows[BENCH_NORM_ROWS]);
void bench_norm_print(const bench_norm_row rows[BENCH_NORM_ROWS]);
/* `, "qk_norm_rows": [...]` inside a device's JSON object. */
void bench_norm_print_json(const bench_norm_row rows[BENCH_NORM_ROWS]);

#endif
