/* SPDX-License-Identifier: MIT */
/* bench_run: each device in turn, its first call, its rows and the rows that apply to it, then
 * its part of the report. */
#include "bench.h"

#include <stdio.h>
#include <string.h>

#include "bench_report.h"
#include "bench_runner.h"
#include "support.h"
#include <posenc/posenc_diagnostics.h>

/* The rows beyond bench_cases that apply to the device: host memory, the paged KV cache, the
 * 16-bit floor, the QK norm and calls apart. False when any of them failed. */
static bool run_extra_rows(posenc_context *context, const bench_options *options,
                           bench_device_figures *f)
{
    bool ok = true;
    f->has_memory = bench_memory_applies(f->info);
    if (f->has_memory) {
        bench_progress(options, f->selector, "host memory", BENCH_CASE_COUNT, BENCH_CASE_COUNT);
        bench_memory_run(context, options->runs, options->sample_seconds, f->memory);
        for (int i = 0; i < BENCH_MEMORY_ROWS; i++)
            ok = ok && f->memory[i].status == POSENC_OK;
    }
    f->has_kv_cache = bench_kv_cache_applies(f->info);
    if (f->has_kv_cache) {
        bench_progress(options, f->selector, "kv cache", BENCH_CASE_COUNT, BENCH_CASE_COUNT);
        bench_kv_cache_run(context, options->runs, options->sample_seconds, f->kv_cache);
        for (int i = 0; i < BENCH_KV_CACHE_ROWS; i++)
            ok = ok && f->kv_cache[i].status == POSENC_OK;
    }
    f->has_conversion = bench_conversion_applies(f->info);
    if (f->has_conversion) {
        bench_progress(options, f->selector, "16-bit floor", BENCH_CASE_COUNT, BENCH_CASE_COUNT);
        bench_conversion_run(context, options->runs, options->sample_seconds, f->conversion);
        for (int i = 0; i < BENCH_CONVERSION_ROWS; i++)
            ok = ok && f->conversion[i].status == POSENC_OK;
    }
    bench_progress(options, f->selector, "qk norm", BENCH_CASE_COUNT, BENCH_CASE_COUNT);
    f->has_norm = bench_norm_run(context, options->runs, options->sample_seconds, f->norm);
    for (int i = 0; f->has_norm && i < BENCH_NORM_ROWS; i++)
        ok = ok && f->norm[i].status == POSENC_OK;
    f->has_apart = bench_apart_applies(f->info);
    if (f->has_apart) {
        bench_progress(options, f->selector, "calls apart", BENCH_CASE_COUNT, BENCH_CASE_COUNT);
        bench_apart_run(context, options->runs, options->sample_seconds, f->apart);
        for (int i = 0; i < BENCH_APART_ROWS; i++)
            ok = ok && f->apart[i].status == POSENC_OK;
    }
    return ok;
}

/* Measures and reports one device; false when anything failed. */
static bool run_device(const bench_options *options, const bench_caches *caches,
                       const posenc_device_info *info, const char *selector, bool first_device)
{
    bench_device_figures f;
    memset(&f, 0, sizeof f);
    f.info = info;
    f.selector = selector;

    /* GPU backends build kernels: time that with an empty cache, then a filled one. */
    char dir[512] = "";
    bool gpu = info->backend == POSENC_BACKEND_VULKAN || info->backend == POSENC_BACKEND_OPENCL;
    bool have_dir = gpu && support_temp_directory_create("posenc-bench", dir, sizeof dir);
    bench_progress(options, selector, "first call", 0, BENCH_CASE_COUNT);
    bench_measure_first_call(info, options, selector, have_dir ? dir : NULL, &f.first);
    bool ok = f.first.status == POSENC_OK;

    posenc_context *context = NULL;
    posenc_status status =
        bench_open_device(info, options, have_dir ? dir : NULL, NULL, &context);
    f.variant = status == POSENC_OK ? posenc_diagnostics_kernel_variant(context) : NULL;
    for (size_t i = 0; i < BENCH_CASE_COUNT; i++) {
        if (status != POSENC_OK) {
            f.results[i].status = status;
            snprintf(f.results[i].error, sizeof f.results[i].error, "%s: %s",
                     posenc_status_name(status), posenc_thread_last_error());
        } else {
            bench_run_case(context, &bench_cases[i], options, selector, (unsigned)i,
                           &f.results[i]);
        }
        ok = ok && f.results[i].status == POSENC_OK;
    }
    if (status == POSENC_OK)
        ok = run_extra_rows(context, options, &f) && ok;
    bench_progress_clear(options);

    bench_report_device(options, caches, &f, first_device);
    fflush(stdout);
    posenc_context_destroy(context);
    if (have_dir)
        support_remove_tree(dir);
    return ok;
}

bool bench_run(const bench_options *options, const bench_device *devices, uint32_t count)
{
    bench_caches caches = bench_read_caches();
    bench_report_start(options, count, &caches);
    bool ok = true;
    for (uint32_t d = 0; d < count; d++) {
        posenc_device_info info;
        if (posenc_device_get(devices[d].index, &info) != POSENC_OK)
            continue;
        ok = run_device(options, &caches, &info, devices[d].selector, d == 0) && ok;
    }
    bench_report_end(options, ok);
    return ok;
}
