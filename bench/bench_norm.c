/* SPDX-License-Identifier: MIT */
/* `posenc bench` QK norm rows (bench_norm.h): q [T, 32, 128] and k [T, 8, 128] of one buffer,
 * in place, NeoX, a decode step (T = 1, position 4095) and a 4096-token prefill as the main
 * rows, f32 and bf16, with Qwen3's weights ([128] for q and for k, of the tensors' dtype) in
 * a buffer of their own. Each run times a batch of the copy, of RoPE alone and of the fused
 * call, in an order that turns from run to run.
 *
 * The weights are all 1: the calls normalize the same tensors again and again, and weights that
 * differ from dim to dim would shrink the dims of the smaller ones call after call, into
 * subnormals whose arithmetic takes a hundred times as long (RoPE alone went from 0.34 us to
 * 29 us on such values). The work does not depend on the weights' values. */
#include "bench_norm.h"

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

enum { COPY, ROPE, NORMED, PASSES };

static const struct {
    const char *name;
    posenc_dtype dtype;
    int64_t tokens;
} shapes[BENCH_NORM_ROWS] = {
    {"decode", POSENC_DTYPE_F32, 1},
    {"decode", POSENC_DTYPE_BF16, 1},
    {"prefill", POSENC_DTYPE_F32, 4096},
    {"prefill", POSENC_DTYPE_BF16, 4096},
};

/* `count` values of `dtype` drawn from [lo, hi), rounded to the dtype. */
static void fill_values(void *data, size_t count, posenc_dtype dtype, float lo, float hi,
                        uint32_t seed)
{
    uint32_t state = seed;
    for (size_t i = 0; i < count; i++) {
        state = state * 1664525u + 1013904223u;
        float value = lo + (hi - lo) * (float)(state >> 8) * 0x1p-24f;
        if (dtype == POSENC_DTYPE_F32) {
            ((float *)data)[i] = value;
        } else { /* bf16: the top half of the f32, rounded to nearest even */
            uint32_t bits;
            memcpy(&bits, &value, sizeof bits);
            ((uint16_t *)data)[i] = (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
        }
    }
}

/* A buffer of `count` values of `dtype` from [lo, hi). */
static posenc_status make_buffer(posenc_context *context, size_t count, posenc_dtype dtype,
                                 float lo, float hi, uint32_t seed, posenc_buffer **buffer)
{
    size_t bytes = count * posenc_dtype_size(dtype);
    void *host = malloc(bytes);
    if (!host)
        return POSENC_OUT_OF_MEMORY;
    fill_values(host, count, dtype, lo, hi, seed);
    posenc_buffer_desc desc = {.size = bytes, .initial_data = host};
    posenc_status status = posenc_buffer_create(context, &desc, buffer);
    free(host);
    return status;
}

typedef struct norm_workload {
    posenc_buffer *data, *weights;
    uint64_t data_bytes;
    posenc_rope_desc rope, normed;
    bool shaped_copy; /* the backend's copy shaped like RoPE, until it says it has none */
} norm_workload;

static posenc_status prepare(posenc_context *context, const bench_norm_row *row,
                             norm_workload *w)
{
    memset(w, 0, sizeof *w);
    w->shaped_copy = true;
    size_t q_count = (size_t)row->tokens * Q_HEADS * HEAD_DIM;
    size_t count = q_count + (size_t)row->tokens * K_HEADS * HEAD_DIM;
    size_t element = posenc_dtype_size(row->dtype);
    w->data_bytes = count * element;
    posenc_status status = make_buffer(context, count, row->dtype, -1.0f, 1.0f, 2024u, &w->data);
    if (status == POSENC_OK)
        status = make_buffer(context, 2 * HEAD_DIM, row->dtype, 1.0f, 1.0f, 7u, &w->weights);
    if (status != POSENC_OK)
        return status;
    int64_t q_shape[3] = {row->tokens, Q_HEADS, HEAD_DIM};
    int64_t k_shape[3] = {row->tokens, K_HEADS, HEAD_DIM};
    int64_t weight_shape[1] = {HEAD_DIM};
    w->rope = (posenc_rope_desc){
        .q = posenc_tensor_of_buffer(w->data, row->dtype, 3, q_shape),
        .k = posenc_tensor_of_buffer(w->data, row->dtype, 3, k_shape),
        .style = POSENC_ROPE_NEOX,
        .theta = 1000000.0,
        .position_offset = row->tokens == 1 ? 4095 : 0,
    };
    w->rope.k.offset = q_count * element;
    w->normed = w->rope;
    w->normed.q_norm_weight = posenc_tensor_of_buffer(w->weights, row->dtype, 1, weight_shape);
    w->normed.k_norm_weight = posenc_tensor_of_buffer(w->weights, row->dtype, 1, weight_shape);
    w->normed.k_norm_weight.offset = HEAD_DIM * element;
    return POSENC_OK;
}

static posenc_status run_pass(posenc_context *context, int pass, norm_workload *w)
{
    if (pass == ROPE)
        return posenc_rope(context, &w->rope);
    if (pass == NORMED)
        return posenc_rope(context, &w->normed);
    if (w->shaped_copy) {
        posenc_status status = posenc_diagnostics_roofline_rope(context, &w->rope);
        if (status != POSENC_UNSUPPORTED)
            return status;
        w->shaped_copy = false;
    }
    return posenc_diagnostics_roofline(context, w->data, 0, w->data_bytes, false);
}

static double time_batch(posenc_context *context, int pass, norm_workload *w, uint32_t repeats,
                         posenc_status *status)
{
    double start = support_seconds_now();
    for (uint32_t r = 0; r < repeats && *status == POSENC_OK; r++)
        *status = run_pass(context, pass, w);
    return (support_seconds_now() - start) / repeats;
}

static void run_row(posenc_context *context, uint32_t runs, double sample_seconds,
                    bench_norm_row *row)
{
    norm_workload w;
    posenc_status status = prepare(context, row, &w);
    for (int i = 0; i < 3 && status == POSENC_OK; i++) /* every page touched, tables cached */
        for (int pass = 0; pass < PASSES && status == POSENC_OK; pass++)
            time_batch(context, pass, &w, 1, &status);
    double single = status == POSENC_OK ? time_batch(context, NORMED, &w, 1, &status) : 0.0;
    uint32_t repeats = bench_calls_per_run(single, sample_seconds);
    runs = runs > MAX_RUNS ? MAX_RUNS : runs;
    static double times[PASSES][MAX_RUNS], copy_ratios[MAX_RUNS], rope_ratios[MAX_RUNS];
    uint32_t run = 0;
    for (; run < runs && status == POSENC_OK; run++) {
        for (int i = 0; i < PASSES; i++) {
            int pass = (int)((run + (uint32_t)i) % PASSES);
            times[pass][run] = time_batch(context, pass, &w, repeats, &status);
        }
        copy_ratios[run] = times[COPY][run] / times[NORMED][run];
        rope_ratios[run] = times[ROPE][run] / times[NORMED][run];
    }
    row->status = status;
    if (status != POSENC_OK) {
        bench_format_error(context, status, row->error, sizeof row->error);
    } else {
        row->runs = run;
        row->repeats = repeats;
        bench_spread(copy_ratios, run, &row->copy_ratio, &row->copy_p10, &row->copy_p90);
        bench_spread(rope_ratios, run, &row->rope_ratio, &row->rope_p10, &row->rope_p90);
        double *medians[PASSES] = {&row->copy, &row->rope, &row->normed};
        for (int pass = 0; pass < PASSES; pass++)
            bench_spread(times[pass], run, medians[pass], NULL, NULL);
    }
    posenc_buffer_destroy(w.data);
    posenc_buffer_destroy(w.weights);
}

bool bench_norm_run(posenc_context *context, uint32_t runs, double sample_seconds,
                    bench_norm_row rows[BENCH_NORM_ROWS])
{
    for (int r = 0; r < BENCH_NORM_ROWS; r++) {
        memset(&rows[r], 0, sizeof rows[r]);
        rows[r].name = shapes[r].name;
        rows[r].dtype = shapes[r].dtype;
        rows[r].tokens = shapes[r].tokens;
    }
    /* Whether the device takes the fields at all: one small call, refused or not. */
    norm_workload probe;
    bench_norm_row one = rows[0];
    posenc_status status = prepare(context, &one, &probe);
    if (status == POSENC_OK)
        status = posenc_rope(context, &probe.normed);
    posenc_buffer_destroy(probe.data);
    posenc_buffer_destroy(probe.weights);
    if (status == POSENC_UNSUPPORTED)
        return false;
    for (int r = 0; r < BENCH_NORM_ROWS; r++)
        run_row(context, runs, sample_seconds, &rows[r]);
    return true;
}

void bench_norm_print(const bench_norm_row rows[BENCH_NORM_ROWS])
{
    printf("  QK norm fused into RoPE (Qwen3: RMSNorm of each head of q [T, 32, 128] and k "
           "[T, 8, 128], then NeoX, in place; per run, copy time / fused time and RoPE time / "
           "fused time, median and p10-p90):\n");
    printf("  %-15s %-5s %-7s %11s %11s %11s %7s %-11s %7s %-11s\n", "operation", "dtype",
           "tokens", "copy", "rope", "norm+rope", "vs copy", "p10-p90", "vs rope", "p10-p90");
    for (int r = 0; r < BENCH_NORM_ROWS; r++) {
        const bench_norm_row *row = &rows[r];
        char name[32];
        snprintf(name, sizeof name, "qk norm %s", row->name);
        const char *dtype = posenc_dtype_name(row->dtype);
        if (row->status != POSENC_OK) {
            printf("  %-15s %-5s %-7lld failed: %s\n", name, dtype, (long long)row->tokens,
                   row->error);
            continue;
        }
        char copy[32], rope[32], normed[32], copy_range[32], rope_range[32];
        bench_format_time(row->copy, copy, sizeof copy);
        bench_format_time(row->rope, rope, sizeof rope);
        bench_format_time(row->normed, normed, sizeof normed);
        snprintf(copy_range, sizeof copy_range, "%.2f-%.2f", row->copy_p10, row->copy_p90);
        snprintf(rope_range, sizeof rope_range, "%.2f-%.2f", row->rope_p10, row->rope_p90);
        printf("  %-15s %-5s %-7lld %11s %11s %11s %7.2f %-11s %7.2f %-11s\n", name, dtype,
               (long long)row->tokens, copy, rope, normed, row->copy_ratio, copy_range,
               row->rope_ratio, rope_range);
    }
}

void bench_norm_print_json(const bench_norm_row rows[BENCH_NORM_ROWS])
{
    printf(",\n     \"qk_norm_rows\": [");
    for (int r = 0; r < BENCH_NORM_ROWS; r++) {
        const bench_norm_row *row = &rows[r];
        printf("%s\n      {\"operation\": \"qk norm %s\", \"dtype\": \"%s\", \"tokens\": %lld, "
               "\"ok\": %s",
               r ? "," : "", row->name, posenc_dtype_name(row->dtype), (long long)row->tokens,
               row->status == POSENC_OK ? "true" : "false");
        if (row->status != POSENC_OK) {
            printf(", \"error\": ");
            bench_print_json_string(row->error);
        } else {
            printf(", \"runs\": %u, \"calls_per_run\": %u, \"copy_us\": %.4f, \"rope_us\": %.4f, "
                   "\"norm_rope_us\": %.4f, \"copy_over_norm_rope\": %.4f, \"ratio_p10\": %.4f, "
                   "\"ratio_p90\": %.4f, \"rope_over_norm_rope\": %.4f, \"rope_ratio_p10\": "
                   "%.4f, \"rope_ratio_p90\": %.4f",
                   row->runs, row->repeats, row->copy * 1e6, row->rope * 1e6, row->normed * 1e6,
                   row->copy_ratio, row->copy_p10, row->copy_p90, row->rope_ratio,
                   row->rope_p10, row->rope_p90);
        }
        printf("}");
    }
    printf("]");
}
