/* SPDX-License-Identifier: MIT */
/* `posenc bench` 16-bit floor rows (bench_conversion.h): q [T, 32, 128] and k [T, 8, 128] of
 * one buffer, in place, for a decode step (T = 1, position 4095) and a 4096-token prefill, as
 * the main rows. Each run times a batch of each of the four passes, in an order that turns from
 * run to run, so that none always finds the caches as another left them. */
#include "bench_conversion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_stats.h"
#include "support.h"
#include <posenc/posenc_diagnostics.h>

#define Q_HEADS 32
#define K_HEADS 8
#define HEAD_DIM 128
#define MAX_RUNS 1000

enum { COPY, FLOOR, NEOX, GPTJ, PASSES };

static const struct {
    const char *name;
    posenc_dtype dtype;
    int64_t tokens;
} shapes[BENCH_CONVERSION_ROWS] = {
    {"rope decode", POSENC_DTYPE_F16, 1},
    {"rope decode", POSENC_DTYPE_BF16, 1},
    {"rope prefill", POSENC_DTYPE_F16, 4096},
    {"rope prefill", POSENC_DTYPE_BF16, 4096},
};

bool bench_conversion_applies(const posenc_device_info *info)
{
    return info->backend == POSENC_BACKEND_CPU;
}

/* Values in [1, 2) with a random sign, as the main rows fill 16-bit tensors. */
static void fill_values(uint16_t *h, size_t count, posenc_dtype dtype)
{
    uint32_t state = 2024u;
    uint16_t base = dtype == POSENC_DTYPE_F16 ? 0x3c00 : 0x3f80;
    uint16_t span = dtype == POSENC_DTYPE_F16 ? 0x400 : 0x80;
    for (size_t i = 0; i < count; i++) {
        state = state * 1664525u + 1013904223u;
        h[i] = (uint16_t)((state >> 31 ? 0x8000u : 0u) | (base + (state >> 8) % span));
    }
}

static posenc_status run_pass(posenc_context *context, int pass, const posenc_rope_desc *desc)
{
    switch (pass) {
    case COPY: return posenc_diagnostics_roofline_rope(context, &desc[0]);
    case FLOOR: return posenc_diagnostics_conversion_floor_rope(context, &desc[0]);
    case NEOX: return posenc_rope(context, &desc[0]);
    default: return posenc_rope(context, &desc[1]);
    }
}

static double time_batch(posenc_context *context, int pass, const posenc_rope_desc *desc,
                         uint32_t repeats, posenc_status *status)
{
    double start = support_seconds_now();
    for (uint32_t r = 0; r < repeats && *status == POSENC_OK; r++)
        *status = run_pass(context, pass, desc);
    return (support_seconds_now() - start) / repeats;
}

static void run_row(posenc_context *context, uint32_t runs, double sample_seconds,
                    bench_conversion_row *row)
{
    size_t q_count = (size_t)row->tokens * Q_HEADS * HEAD_DIM;
    size_t count = q_count + (size_t)row->tokens * K_HEADS * HEAD_DIM;
    posenc_buffer *buffer = NULL;
    posenc_status status = POSENC_OUT_OF_MEMORY;
    uint16_t *host = malloc(count * 2);
    if (host) {
        fill_values(host, count, row->dtype);
        posenc_buffer_desc buffer_desc = {.size = count * 2, .initial_data = host};
        status = posenc_buffer_create(context, &buffer_desc, &buffer);
        free(host);
    }
    posenc_rope_desc desc[2];
    if (status == POSENC_OK) {
        int64_t q_shape[3] = {row->tokens, Q_HEADS, HEAD_DIM};
        int64_t k_shape[3] = {row->tokens, K_HEADS, HEAD_DIM};
        desc[0] = (posenc_rope_desc){
            .q = posenc_tensor_of_buffer(buffer, row->dtype, 3, q_shape),
            .k = posenc_tensor_of_buffer(buffer, row->dtype, 3, k_shape),
            .style = POSENC_ROPE_NEOX,
            .theta = 500000.0,
            .position_offset = row->tokens == 1 ? 4095 : 0,
        };
        desc[0].k.offset = q_count * 2;
        desc[1] = desc[0];
        desc[1].style = POSENC_ROPE_GPTJ;
    }
    for (int i = 0; i < 3 && status == POSENC_OK; i++) /* every page touched, tables cached */
        for (int pass = 0; pass < PASSES && status == POSENC_OK; pass++)
            time_batch(context, pass, desc, 1, &status);
    double single = status == POSENC_OK ? time_batch(context, NEOX, desc, 1, &status) : 0.0;
    uint32_t repeats = bench_calls_per_run(single, sample_seconds);
    runs = runs > MAX_RUNS ? MAX_RUNS : runs;
    static double times[PASSES][MAX_RUNS], floor_ratios[MAX_RUNS], op_ratios[2][MAX_RUNS];
    uint32_t run = 0;
    for (; run < runs && status == POSENC_OK; run++) {
        for (int i = 0; i < PASSES; i++) {
            int pass = (int)((run + (uint32_t)i) % PASSES);
            times[pass][run] = time_batch(context, pass, desc, repeats, &status);
        }
        floor_ratios[run] = times[COPY][run] / times[FLOOR][run];
        op_ratios[0][run] = times[FLOOR][run] / times[NEOX][run];
        op_ratios[1][run] = times[FLOOR][run] / times[GPTJ][run];
    }
    row->status = status;
    if (status != POSENC_OK) {
        bench_format_error(context, status, row->error, sizeof row->error);
    } else {
        row->runs = run;
        row->repeats = repeats;
        bench_spread(floor_ratios, run, &row->floor_ratio, &row->floor_p10, &row->floor_p90);
        bench_spread(op_ratios[0], run, &row->neox_ratio, NULL, NULL);
        bench_spread(op_ratios[1], run, &row->gptj_ratio, NULL, NULL);
        double *medians[PASSES] = {&row->copy, &row->floor, &row->neox, &row->gptj};
        for (int pass = 0; pass < PASSES; pass++)
            bench_spread(times[pass], run, medians[pass], NULL, NULL);
    }
    posenc_buffer_destroy(buffer);
}

void bench_conversion_run(posenc_context *context, uint32_t runs, double sample_seconds,
                          bench_conversion_row rows[BENCH_CONVERSION_ROWS])
{
    for (int r = 0; r < BENCH_CONVERSION_ROWS; r++) {
        memset(&rows[r], 0, sizeof rows[r]);
        rows[r].name = shapes[r].name;
        rows[r].dtype = shapes[r].dtype;
        rows[r].tokens = shapes[r].tokens;
        run_row(context, runs, sample_seconds, &rows[r]);
    }
}

void bench_conversion_print(const bench_conversion_row rows[BENCH_CONVERSION_ROWS])
{
    printf("  16-bit floor (q [T, 32, 128] and k [T, 8, 128] in place; 'floor' = the copy with "
           "each element converted to f32 and back; per run, copy time / floor time, median and "
           "p10-p90, and floor time / RoPE time):\n");
    printf("  %-13s %-5s %-7s %11s %11s %7s %-11s %7s %7s\n", "operation", "dtype", "tokens",
           "copy", "floor", "vs copy", "p10-p90", posenc_rope_style_name(POSENC_ROPE_NEOX),
           posenc_rope_style_name(POSENC_ROPE_GPTJ));
    for (int r = 0; r < BENCH_CONVERSION_ROWS; r++) {
        const bench_conversion_row *row = &rows[r];
        const char *dtype = posenc_dtype_name(row->dtype);
        if (row->status != POSENC_OK) {
            printf("  %-13s %-5s %-7lld failed: %s\n", row->name, dtype, (long long)row->tokens,
                   row->error);
            continue;
        }
        char copy[32], floor[32], range[32];
        bench_format_time(row->copy, copy, sizeof copy);
        bench_format_time(row->floor, floor, sizeof floor);
        snprintf(range, sizeof range, "%.2f-%.2f", row->floor_p10, row->floor_p90);
        printf("  %-13s %-5s %-7lld %11s %11s %7.2f %-11s %7.2f %7.2f\n", row->name, dtype,
               (long long)row->tokens, copy, floor, row->floor_ratio, range, row->neox_ratio,
               row->gptj_ratio);
    }
}

void bench_conversion_print_json(const bench_conversion_row rows[BENCH_CONVERSION_ROWS])
{
    printf(",\n     \"conversion_floor_rows\": [");
    for (int r = 0; r < BENCH_CONVERSION_ROWS; r++) {
        const bench_conversion_row *row = &rows[r];
        printf("%s\n      {\"operation\": \"%s\", \"dtype\": \"%s\", \"tokens\": %lld, \"ok\": %s",
               r ? "," : "", row->name, posenc_dtype_name(row->dtype), (long long)row->tokens,
               row->status == POSENC_OK ? "true" : "false");
        if (row->status != POSENC_OK) {
            printf(", \"error\": ");
            bench_print_json_string(row->error);
        } else {
            printf(", \"runs\": %u, \"calls_per_run\": %u, \"copy_us\": %.4f, \"floor_us\": %.4f, "
                   "\"neox_us\": %.4f, \"gptj_us\": %.4f, \"copy_over_floor\": %.4f, "
                   "\"ratio_p10\": %.4f, \"ratio_p90\": %.4f, \"floor_over_neox\": %.4f, "
                   "\"floor_over_gptj\": %.4f",
                   row->runs, row->repeats, row->copy * 1e6, row->floor * 1e6, row->neox * 1e6,
                   row->gptj * 1e6, row->floor_ratio, row->floor_p10, row->floor_p90,
                   row->neox_ratio, row->gptj_ratio);
        }
        printf("}");
    }
    printf("]");
}
