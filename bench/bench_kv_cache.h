/* SPDX-License-Identifier: MIT */
/* `posenc bench` KV cache rows: RoPE that writes k and v into a paged KV cache in one call,
 * against RoPE in place followed by a separate copy of k and v into the cache rows, timed side
 * by side in one run on the native CPU path. */
#ifndef POSENC_BENCH_KV_CACHE_H
#define POSENC_BENCH_KV_CACHE_H

#include <posenc/posenc.h>
#include <stdbool.h>

#define BENCH_KV_CACHE_ROWS 2

typedef struct bench_kv_cache_row {
    const char *name;       /* "kv cache decode", ... */
    int64_t tokens;
    posenc_status status;   /* not OK: `error` says why */
    char error[320];
    uint32_t runs, repeats; /* timed runs, calls per run and form */
    double fused, separate; /* seconds per call, medians */
    /* Per run, separate time / fused time: above 1.0 the fused call saves that much. */
    double ratio, ratio_p10, ratio_p90;
} bench_kv_cache_row;

/* Whether the rows are measured on this device: the native CPU path, where the separate copy
 * is the host loop an engine would write. */
bool bench_kv_cache_applies(const posenc_device_info *info);
void bench_kv_cache_run(posenc_context *context, uint32_t runs, double sample_seconds,
                        bench_kv_cache_row rows[BENCH_KV_CACHE_ROWS]);
void bench_kv_cache_print(const bench_kv_cache_row rows[BENCH_KV_CACHE_ROWS]);
/* `, "kv_cache_rows": [...]` inside a device's JSON object. */
void bench_kv_cache_print_json(const bench_kv_cache_row rows[BENCH_KV_CACHE_ROWS]);

#endif
