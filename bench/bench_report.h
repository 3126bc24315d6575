/* SPDX-License-Identifier: MIT */
/* How the bench prints its figures: a table per device on stdout, or one JSON object (the
 * format tools and tests read: its names and fields do not change). */
#ifndef POSENC_BENCH_REPORT_H
#define POSENC_BENCH_REPORT_H

#include <posenc/posenc.h>
#include <stdbool.h>

#include "bench.h"
#include "bench_apart.h"
#include "bench_conversion.h"
#include "bench_kv_cache.h"
#include "bench_memory.h"
#include "bench_norm.h"
#include "bench_runner.h"

/* Everything measured on one device. */
typedef struct bench_device_figures {
    const posenc_device_info *info;
    const char *selector;
    const char *variant; /* the CPU kernels' variant, NULL on other backends */
    bench_first_call first;
    bench_result results[BENCH_CASE_COUNT];
    /* the rows measured on this device */
    bool has_memory, has_kv_cache, has_conversion, has_norm, has_apart;
    bench_memory_row memory[BENCH_MEMORY_ROWS];
    bench_kv_cache_row kv_cache[BENCH_KV_CACHE_ROWS];
    bench_conversion_row conversion[BENCH_CONVERSION_ROWS];
    bench_norm_row norm[BENCH_NORM_ROWS];
    bench_apart_row apart[BENCH_APART_ROWS];
} bench_device_figures;

/* The run's heading (text), or the JSON object's opening fields. */
void bench_report_start(const bench_options *options, uint32_t device_count,
                        const bench_caches *caches);
/* One device's figures; `first_device` for the JSON separators. */
void bench_report_device(const bench_options *options, const bench_caches *caches,
                         const bench_device_figures *figures, bool first_device);
/* The end of the JSON object, with whether every measurement succeeded; nothing for text. */
void bench_report_end(const bench_options *options, bool ok);

#endif
