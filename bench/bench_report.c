/* SPDX-License-Identifier: MIT */
/* bench_report.h: the table and the JSON object of `posenc bench`. */
#include "bench_report.h"

#include <stdio.h>

#include "bench_stats.h"

/* Where the tensors live while an operation runs: the smallest cache that holds them, "DRAM"
 * when they are at least twice the last level (a streaming pass then finds nothing of its
 * previous pass cached), and "L3+DRAM" in between, where part of them stays cached from one
 * call to the next and both the operation and its copy run faster than from memory alone. */
static const char *bench_regime(const bench_caches *caches, const posenc_device_info *info,
                                uint64_t footprint)
{
    if (!info->unified_memory)
        return "VRAM";
    if (caches->l1d && footprint <= caches->l1d)
        return "L1";
    if (caches->l2 && footprint <= caches->l2)
        return "L2";
    if (caches->l3 && footprint <= caches->l3)
        return "L3";
    if (caches->l3 && footprint < 2 * caches->l3)
        return "L3+DRAM";
    return caches->l3 ? "DRAM" : "?";
}

static void print_device_header(const posenc_device_info *info, const char *selector,
                                const char *variant, const bench_options *options)
{
    printf("\n%s  %s  [%s]", selector, info->name, info->driver);
    if (variant) {
        if (options->threads)
            printf("  %s kernels, %u threads", variant, options->threads);
        else
            printf("  %s kernels, %u threads (all cores)", variant, info->compute_units);
    }
    printf("\n");
}

static void print_first_call(const posenc_device_info *info, const bench_first_call *first)
{
    if (first->status != POSENC_OK) {
        printf("  first call: failed: %s\n", first->error);
        return;
    }
    char a[32], b[32];
    bench_format_time(first->context_seconds, a, sizeof a);
    bench_format_time(first->first_op_seconds, b, sizeof b);
    printf("  first call: context %s, first RoPE %s", a, b);
    if (first->has_warm) {
        bench_format_time(first->warm_context_seconds, a, sizeof a);
        bench_format_time(first->warm_first_op_seconds, b, sizeof b);
        printf(" (empty kernel cache); with the cache filled: context %s, first RoPE %s", a, b);
    }
    printf("\n");
    bench_fresh_process_print(&first->fresh, info->backend == POSENC_BACKEND_VULKAN);
    if (first->has_prepared) {
        char c[32];
        bench_format_time(first->prepare_seconds, a, sizeof a);
        bench_format_time(first->prepared_first_op_seconds, b, sizeof b);
        bench_format_time(first->later_op_seconds, c, sizeof c);
        printf("  warm-up: posenc_prepare %s%s, then first RoPE %s, later RoPE %s (median of "
               "%d)\n",
               a, first->has_warm ? " (cache filled)" : "", b, c, BENCH_LATER_CALLS);
    }
    if (first->has_engine) {
        const bench_engine_times *e = &first->engine;
        char c[32], d[32];
        bench_format_time(e->context_seconds, a, sizeof a);
        bench_format_time(e->prepare_seconds, b, sizeof b);
        bench_format_time(e->first_seconds, c, sizeof c);
        bench_format_time(e->later_seconds, d, sizeof d);
        printf("  warm-up on an engine's device: context %s, posenc_prepare %s, then first %s "
               "%s, later %s (median of %d); kernels built by the calls: %llu\n",
               a, b, e->call, c, d, BENCH_ENGINE_LATER, (unsigned long long)e->built_by_calls);
    } else if (first->engine_error[0]) {
        printf("  warm-up on an engine's device: not measured: %s\n", first->engine_error);
    }
    printf("  %-22s %-5s %-5s %-16s %9s %-7s %11s %7s %8s %9s %7s %7s %-11s\n", "operation",
           "dtype", "style", "shape", "bytes", "cache", "median", "spread", "GB/s", "copy GB/s",
           "spread", "vs copy", "p10-p90");
}

static void print_row(const bench_case *c, const bench_result *r, const char *regime)
{
    char shape[48], bytes[32], median[32], spread[16], gbps[16], copy[16], copy_spread[16],
        ratio[16], ratio_range[24];
    bench_case_shape(c, shape, sizeof shape);
    bench_format_bytes(r->bytes, bytes, sizeof bytes);
    const char *style = c->kind == BENCH_ROPE ? posenc_rope_style_name(c->style) : "-";
    if (r->status != POSENC_OK) {
        printf("  %-22s %-5s %-5s %-16s %9s %-7s failed: %s\n", c->name,
               posenc_dtype_name(c->dtype), style, shape, bytes, regime, r->error);
        return;
    }
    bench_format_time(r->median, median, sizeof median);
    snprintf(spread, sizeof spread, "+-%.0f%%", 50.0 * (r->p90 - r->p10) / r->median);
    snprintf(gbps, sizeof gbps, "%.1f", (double)r->bytes / r->median * 1e-9);
    if (r->has_copy) {
        snprintf(copy, sizeof copy, "%.1f", (double)r->bytes / r->copy_median * 1e-9);
        snprintf(copy_spread, sizeof copy_spread, "+-%.0f%%",
                 50.0 * (r->copy_p90 - r->copy_p10) / r->copy_median);
        snprintf(ratio, sizeof ratio, "%.2f", r->ratio);
        snprintf(ratio_range, sizeof ratio_range, "%.2f-%.2f", r->ratio_p10, r->ratio_p90);
    } else {
        snprintf(copy, sizeof copy, "-");
        snprintf(copy_spread, sizeof copy_spread, "-");
        snprintf(ratio, sizeof ratio, "-");
        snprintf(ratio_range, sizeof ratio_range, "-");
    }
    printf("  %-22s %-5s %-5s %-16s %9s %-7s %11s %7s %8s %9s %7s %7s %-11s\n", c->name,
           posenc_dtype_name(c->dtype), style, shape, bytes, regime, median, spread, gbps, copy,
           copy_spread, ratio, ratio_range);
}

static void print_json_device(const posenc_device_info *info, const char *selector,
                              const char *variant, const bench_options *options,
                              const bench_first_call *first, const bench_result *results,
                              const bench_caches *caches, bool first_device)
{
    printf("%s\n    {\"selector\": ", first_device ? "" : ",");
    bench_print_json_string(selector);
    printf(", \"name\": ");
    bench_print_json_string(info->name);
    printf(", \"backend\": ");
    bench_print_json_string(posenc_backend_name(info->backend));
    printf(", \"driver\": ");
    bench_print_json_string(info->driver);
    if (variant) {
        printf(", \"cpu_variant\": ");
        bench_print_json_string(variant);
        printf(", \"threads\": %u", options->threads ? options->threads : info->compute_units);
    }
    printf(",\n     \"first_call\": {\"ok\": %s", first->status == POSENC_OK ? "true" : "false");
    if (first->status == POSENC_OK) {
        printf(", \"context_ms\": %.4f, \"first_rope_ms\": %.4f", first->context_seconds * 1e3,
               first->first_op_seconds * 1e3);
        if (first->has_warm)
            printf(", \"warm_cache\": {\"context_ms\": %.4f, \"first_rope_ms\": %.4f}",
                   first->warm_context_seconds * 1e3, first->warm_first_op_seconds * 1e3);
        if (first->has_prepared)
            printf(", \"prepared\": {\"prepare_ms\": %.4f, \"first_rope_ms\": %.4f, "
                   "\"later_rope_ms\": %.4f}",
                   first->prepare_seconds * 1e3, first->prepared_first_op_seconds * 1e3,
                   first->later_op_seconds * 1e3);
        if (first->has_engine)
            printf(", \"engine\": {\"call\": \"%s\", \"context_ms\": %.4f, "
                   "\"prepare_ms\": %.4f, \"first_call_ms\": %.4f, \"later_call_ms\": %.4f, "
                   "\"kernels_built_by_calls\": %llu}",
                   first->engine.call, first->engine.context_seconds * 1e3,
                   first->engine.prepare_seconds * 1e3, first->engine.first_seconds * 1e3,
                   first->engine.later_seconds * 1e3,
                   (unsigned long long)first->engine.built_by_calls);
        bench_fresh_process_print_json(&first->fresh);
    } else {
        printf(", \"error\": ");
        bench_print_json_string(first->error);
    }
    printf("},\n     \"rows\": [");
    for (size_t i = 0; i < BENCH_CASE_COUNT; i++) {
        const bench_case *c = &bench_cases[i];
        const bench_result *r = &results[i];
        char shape[48];
        bench_case_shape(c, shape, sizeof shape);
        printf("%s\n      {\"operation\": ", i ? "," : "");
        bench_print_json_string(c->name);
        printf(", \"dtype\": ");
        bench_print_json_string(posenc_dtype_name(c->dtype));
        printf(", \"style\": ");
        bench_print_json_string(c->kind == BENCH_ROPE ? posenc_rope_style_name(c->style) : "");
        printf(", \"shape\": ");
        bench_print_json_string(shape);
        printf(", \"bytes\": %llu, \"footprint_bytes\": %llu, \"cache\": ",
               (unsigned long long)r->bytes, (unsigned long long)r->footprint);
        bench_print_json_string(bench_regime(caches, info, r->footprint));
        printf(", \"ok\": %s", r->status == POSENC_OK ? "true" : "false");
        if (r->status != POSENC_OK) {
            printf(", \"error\": ");
            bench_print_json_string(r->error);
            printf("}");
            continue;
        }
        printf(", \"runs\": %u, \"calls_per_run\": %u, \"median_us\": %.4f, \"p10_us\": %.4f, "
               "\"p90_us\": %.4f, \"gb_per_s\": %.3f",
               r->runs, r->repeats, r->median * 1e6, r->p10 * 1e6, r->p90 * 1e6,
               (double)r->bytes / r->median * 1e-9);
        if (r->has_copy) {
            printf(", \"copy\": \"%s\", \"copy_median_us\": %.4f, \"copy_p10_us\": %.4f, "
                   "\"copy_p90_us\": %.4f, \"copy_gb_per_s\": %.3f, \"ratio_to_copy\": %.4f, "
                   "\"ratio_p10\": %.4f, \"ratio_p90\": %.4f",
                   r->shaped_copy ? "shaped like the operation" : "the tensors' bytes",
                   r->copy_median * 1e6, r->copy_p10 * 1e6, r->copy_p90 * 1e6,
                   (double)r->bytes / r->copy_median * 1e-9, r->ratio, r->ratio_p10,
                   r->ratio_p90);
        } else {
            printf(", \"copy_gb_per_s\": null, \"ratio_to_copy\": null, \"copy_note\": ");
            bench_print_json_string(r->copy_note);
        }
        printf("}");
    }
    printf("]");
}

void bench_report_start(const bench_options *options, uint32_t device_count,
                        const bench_caches *caches)
{
    if (options->json) {
        printf("{\"version\": \"%s\", \"quick\": %s, \"runs\": %u, \"warmup_runs\": %u, "
               "\"caches\": {\"l1d_bytes\": %llu, \"l2_bytes\": %llu, \"l3_bytes\": %llu},\n "
               "\"devices\": [",
               posenc_version(), options->quick ? "true" : "false", options->runs, options->warmup,
               (unsigned long long)caches->l1d, (unsigned long long)caches->l2,
               (unsigned long long)caches->l3);
    } else {
        char l2[32] = "?", l3[32] = "?";
        if (caches->l2)
            bench_format_bytes(caches->l2, l2, sizeof l2);
        if (caches->l3)
            bench_format_bytes(caches->l3, l3, sizeof l3);
        printf("posenc bench: %u device%s, %s%u timed runs per row after %u warm-up run%s\n",
               device_count, device_count == 1 ? "" : "s",
               options->runs_given || options->quick ? "" : "at least ", options->runs,
               options->warmup, options->warmup == 1 ? "" : "s");
        printf("median time per call, spread = half the 10th-90th percentile range; GB/s = bytes "
               "read + written / median;\n'vs copy' = copy time / operation time (median of the "
               "runs, and its p10-p90), the copy moving\nthe same elements the same way on the "
               "same device next to each run; 'cache' = where the tensors live\n(this CPU: L2 %s "
               "per core, L3 %s; L3+DRAM: up to twice L3, partly cached)\n",
               l2, l3);
    }
}

void bench_report_device(const bench_options *options, const bench_caches *caches,
                         const bench_device_figures *f, bool first_device)
{
    if (options->json) {
        print_json_device(f->info, f->selector, f->variant, options, &f->first, f->results,
                          caches, first_device);
        if (f->has_memory)
            bench_memory_print_json(f->memory);
        if (f->has_kv_cache)
            bench_kv_cache_print_json(f->kv_cache);
        if (f->has_conversion)
            bench_conversion_print_json(f->conversion);
        if (f->has_norm)
            bench_norm_print_json(f->norm);
        if (f->has_apart)
            bench_apart_print_json(f->apart);
        printf("}");
    } else {
        print_device_header(f->info, f->selector, f->variant, options);
        print_first_call(f->info, &f->first);
        for (size_t i = 0; i < BENCH_CASE_COUNT; i++)
            print_row(&bench_cases[i], &f->results[i],
                      bench_regime(caches, f->info, f->results[i].footprint));
        bool missing_copy = false;
        for (size_t i = 0; i < BENCH_CASE_COUNT; i++)
            if (f->results[i].status == POSENC_OK && !f->results[i].has_copy && !missing_copy) {
                printf("  no copy figures: %s\n", f->results[i].copy_note);
                missing_copy = true;
            }
        if (f->has_memory)
            bench_memory_print(f->memory);
        if (f->has_kv_cache)
            bench_kv_cache_print(f->kv_cache);
        if (f->has_conversion)
            bench_conversion_print(f->conversion);
        if (f->has_norm)
            bench_norm_print(f->norm);
        if (f->has_apart)
            bench_apart_print(f->apart);
    }
}

void bench_report_end(const bench_options *options, bool ok)
{
    if (options->json)
        printf("\n ],\n \"ok\": %s}\n", ok ? "true" : "false");
}
