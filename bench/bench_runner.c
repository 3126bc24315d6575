/* SPDX-License-Identifier: MIT */
/* bench_runner.h: the timed runs of a row, and a device's first-call figures. */
#include "bench_runner.h"

#include <stdio.h>
#include <string.h>

#include "bench_stats.h"
#include "support.h"

bench_caches bench_read_caches(void)
{
    bench_caches caches = {0};
    support_cpu_caches(&caches.l1d, &caches.l2, &caches.l3);
    return caches;
}

/* ---- progress on a terminal ---- */

void bench_progress(const bench_options *options, const char *device, const char *what,
                    unsigned done, unsigned total)
{
    if (!options->progress)
        return;
    fprintf(stderr, "\r\033[K  %s: %s (%u/%u)", device, what, done, total);
    fflush(stderr);
}

void bench_progress_clear(const bench_options *options)
{
    if (options->progress) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
}

/* A batch of `repeats` calls of the operation (copy false) or of its copy; seconds per call. */
static double time_batch(bench_workload *w, bool copy, uint32_t repeats, posenc_status *status)
{
    double start = support_seconds_now();
    for (uint32_t r = 0; r < repeats && *status == POSENC_OK; r++)
        *status = copy ? bench_workload_copy(w) : bench_workload_call(w);
    return (support_seconds_now() - start) / repeats;
}

/* Warm-up runs of the operation and of its copy (every page of the tensors mapped, both paths'
 * code and tables hot), then timed runs, each a batch of calls lasting about sample_seconds
 * and a batch of as many copies, so both see the same machine state. Unless the runs were given
 * (--runs), a row takes at least min_row_seconds of operation time, so that the medians of large
 * tensors rest on more than a handful of calls. */
void bench_run_case(posenc_context *context, const bench_case *c, const bench_options *options,
                    const char *device, unsigned index, bench_result *result)
{
    memset(result, 0, sizeof *result);
    bench_workload w;
    char label[96];
    bench_case_label(c, label, sizeof label);
    bench_progress(options, device, label, index + 1, BENCH_CASE_COUNT);

    posenc_status status =
        bench_workload_prepare(&w, context, c, &result->bytes, &result->footprint);
    posenc_status copy_status = POSENC_OK;
    for (uint32_t i = 0; status == POSENC_OK && i < options->warmup; i++) {
        status = bench_workload_call(&w);
        if (copy_status == POSENC_OK)
            copy_status = bench_workload_copy(&w);
    }
    double single = 0.0;
    if (status == POSENC_OK)
        single = time_batch(&w, false, 1, &status);
    if (status != POSENC_OK) {
        result->status = status;
        bench_format_error(context, status, result->error, sizeof result->error);
        bench_workload_free(&w);
        return;
    }
    uint32_t repeats = bench_calls_per_run(single, options->sample_seconds);
    result->repeats = repeats;
    uint32_t runs = options->runs;
    if (!options->runs_given && single > 0.0) {
        double wanted = options->min_row_seconds / (single * repeats);
        runs = wanted > BENCH_MAX_RUNS ? BENCH_MAX_RUNS
               : wanted > runs         ? (uint32_t)wanted + 1
                                       : runs;
    }

    if (copy_status == POSENC_OK)
        copy_status = bench_workload_copy(&w);
    result->has_copy = copy_status == POSENC_OK;
    result->shaped_copy = w.shaped_copy;
    if (!result->has_copy)
        bench_format_error(context, copy_status, result->copy_note, sizeof result->copy_note);

    /* Odd runs time the copy first: neither always finds the caches as the other left them. */
    double times[BENCH_MAX_RUNS], copies[BENCH_MAX_RUNS], ratios[BENCH_MAX_RUNS];
    uint32_t run = 0;
    for (; run < runs && status == POSENC_OK; run++) {
        bool copy_first = result->has_copy && (run & 1);
        if (copy_first)
            copies[run] = time_batch(&w, true, repeats, &copy_status);
        times[run] = time_batch(&w, false, repeats, &status);
        if (result->has_copy && !copy_first)
            copies[run] = time_batch(&w, true, repeats, &copy_status);
        if (result->has_copy && copy_status != POSENC_OK) {
            result->has_copy = false;
            bench_format_error(context, copy_status, result->copy_note, sizeof result->copy_note);
        }
    }
    if (status != POSENC_OK) {
        result->status = status;
        bench_format_error(context, status, result->error, sizeof result->error);
        bench_workload_free(&w);
        return;
    }
    result->runs = run;
    if (result->has_copy) {
        /* Each run against its own copy: drifts in what else the machine does cancel out,
         * where a ratio of two medians would keep them. */
        for (uint32_t i = 0; i < run; i++)
            ratios[i] = copies[i] / times[i];
        bench_spread(ratios, run, &result->ratio, &result->ratio_p10, &result->ratio_p90);
        bench_spread(copies, run, &result->copy_median, &result->copy_p10, &result->copy_p90);
    }
    bench_spread(times, run, &result->median, &result->p10, &result->p90);
    bench_workload_free(&w);
}

posenc_status bench_open_device(const posenc_device_info *info, const bench_options *options,
                                const char *cache_dir, const char *pipeline_cache,
                                posenc_context **context)
{
    char selector[16];
    snprintf(selector, sizeof selector, "%u", info->backend_index);
    posenc_context_desc desc = {
        .backend = info->backend,
        .device = selector,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV |
                 POSENC_CONTEXT_ALLOW_SOFTWARE,
        .num_threads = options->threads,
        .cache_dir = cache_dir,
        .pipeline_cache_path = pipeline_cache,
    };
    return posenc_context_create(&desc, context);
}

/* Context creation and the first decode RoPE, on a fresh context. */
static posenc_status time_first_call(const posenc_device_info *info, const bench_options *options,
                                     const char *cache_dir, const char *pipeline_cache,
                                     double *context_seconds, double *op_seconds, char *error,
                                     size_t error_size)
{
    posenc_context *context = NULL;
    double start = support_seconds_now();
    posenc_status status = bench_open_device(info, options, cache_dir, pipeline_cache, &context);
    *context_seconds = support_seconds_now() - start;
    if (status != POSENC_OK) {
        const char *detail = posenc_thread_last_error();
        snprintf(error, error_size, "%s: %s", posenc_status_name(status),
                 detail && *detail ? detail : posenc_status_string(status));
        return status;
    }
    uint64_t unused_bytes, unused_footprint;
    bench_workload w;
    status = bench_workload_prepare(&w, context, &bench_cases[0], &unused_bytes, &unused_footprint);
    if (status == POSENC_OK) {
        start = support_seconds_now();
        status = bench_workload_call(&w);
        *op_seconds = support_seconds_now() - start;
    }
    if (status != POSENC_OK)
        bench_format_error(context, status, error, error_size);
    bench_workload_free(&w);
    posenc_context_destroy(context);
    return status;
}

/* A fresh context made ready by posenc_prepare (in the cache state `dir` is in), then its first
 * decode RoPE and the median of the later ones: what a first frame costs after a warm-up. */
static bool time_prepared_call(const posenc_device_info *info, const bench_options *options,
                               const char *cache_dir, const char *pipeline_cache,
                               bench_first_call *first)
{
    posenc_context *context = NULL;
    if (bench_open_device(info, options, cache_dir, pipeline_cache, &context) != POSENC_OK)
        return false;
    uint64_t unused_bytes, unused_footprint;
    bench_workload w;
    posenc_status status =
        bench_workload_prepare(&w, context, &bench_cases[0], &unused_bytes, &unused_footprint);
    posenc_prepare_desc prepare = {.rope = &w.rope, .rope_count = 1};
    double start = support_seconds_now();
    if (status == POSENC_OK)
        status = posenc_prepare(context, &prepare);
    first->prepare_seconds = support_seconds_now() - start;
    double later[BENCH_LATER_CALLS];
    for (int i = 0; i <= BENCH_LATER_CALLS && status == POSENC_OK; i++) {
        start = support_seconds_now();
        status = bench_workload_call(&w);
        double seconds = support_seconds_now() - start;
        if (i == 0)
            first->prepared_first_op_seconds = seconds;
        else
            later[i - 1] = seconds;
    }
    if (status == POSENC_OK) {
        bench_spread(later, BENCH_LATER_CALLS, &first->later_op_seconds, NULL, NULL);
    }
    bench_workload_free(&w);
    posenc_context_destroy(context);
    return status == POSENC_OK;
}

/* Cold: a fresh context with the empty kernel cache `dir` (NULL: none, as on the CPU); warm:
 * again with the cache the cold run filled. */
void bench_measure_first_call(const posenc_device_info *info, const bench_options *options,
                              const char *selector, const char *dir, bench_first_call *first)
{
    memset(first, 0, sizeof *first);
    char pipeline[600] = "";
    if (dir && info->backend == POSENC_BACKEND_VULKAN)
        snprintf(pipeline, sizeof pipeline, "%s/pipeline-cache.bin", dir);
    first->status = time_first_call(info, options, dir, pipeline[0] ? pipeline : NULL,
                                    &first->context_seconds, &first->first_op_seconds,
                                    first->error, sizeof first->error);
    if (first->status == POSENC_OK && dir) {
        char ignored[320];
        first->has_warm = time_first_call(info, options, dir, pipeline[0] ? pipeline : NULL,
                                          &first->warm_context_seconds,
                                          &first->warm_first_op_seconds, ignored,
                                          sizeof ignored) == POSENC_OK;
    }
    if (first->status == POSENC_OK)
        first->has_prepared = time_prepared_call(info, options, dir,
                                                 pipeline[0] ? pipeline : NULL, first);
    if (first->status == POSENC_OK && dir)
        first->has_engine = bench_engine_time(info, dir, &first->engine, first->engine_error,
                                              sizeof first->engine_error);
    if (first->status == POSENC_OK)
        bench_fresh_process_run(selector, options->quick ? 3 : 5, &first->fresh);
}
