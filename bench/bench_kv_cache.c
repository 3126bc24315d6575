/* SPDX-License-Identifier: MIT */
/* `posenc bench` KV cache rows (bench_kv_cache.h): f32 NeoX RoPE of q [T, 32, 128] in place
 * and of k [T, 8, 128] into a paged cache [4096 slots, 8, 128], v [T, 8, 128] copied into its
 * own, slots in scattered blocks of 16 as a paged allocator hands them out. "fused" is one
 * posenc_rope with k_cache and v_cache; "separate" rotates q and k in place and then copies
 * each token's k and v rows into the caches. */
#include "bench_kv_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_stats.h"
#include "support.h"

#define Q_HEADS 32
#define K_HEADS 8
#define HEAD_DIM 128
#define SLOTS 4096
#define BLOCK 16
#define MAX_RUNS 1000

static const struct {
    const char *name;
    int64_t tokens;
} shapes[BENCH_KV_CACHE_ROWS] = {{"kv cache decode", 1}, {"kv cache prefill", 4096}};

bool bench_kv_cache_applies(const posenc_device_info *info)
{
    return info->backend == POSENC_BACKEND_CPU;
}

typedef struct kv_tensors {
    float *q, *k, *v, *k_cache, *v_cache;
    int32_t *slots;
    posenc_rope_desc fused, rope;
} kv_tensors;

static void tensors_free(kv_tensors *t)
{
    float *all[] = {t->q, t->k, t->v, t->k_cache, t->v_cache};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        support_aligned_free(all[i]);
    support_aligned_free(t->slots);
}

static bool tensors_make(int64_t tokens, kv_tensors *t)
{
    memset(t, 0, sizeof *t);
    size_t q_count = (size_t)tokens * Q_HEADS * HEAD_DIM, k_count = q_count / Q_HEADS * K_HEADS;
    size_t cache_count = (size_t)SLOTS * K_HEADS * HEAD_DIM;
    t->q = support_aligned_alloc(64, q_count * 4);
    t->k = support_aligned_alloc(64, k_count * 4);
    t->v = support_aligned_alloc(64, k_count * 4);
    t->k_cache = support_aligned_alloc(64, cache_count * 4);
    t->v_cache = support_aligned_alloc(64, cache_count * 4);
    t->slots = support_aligned_alloc(64, (size_t)tokens * 4);
    if (!t->q || !t->k || !t->v || !t->k_cache || !t->v_cache || !t->slots)
        return false;
    uint32_t state = 12345u;
    float *inputs[] = {t->q, t->k, t->v};
    size_t counts[] = {q_count, k_count, k_count};
    for (size_t a = 0; a < 3; a++)
        for (size_t i = 0; i < counts[a]; i++) {
            state = state * 1664525u + 1013904223u;
            inputs[a][i] = (float)(state >> 8) * 0x1p-23f - 1.0f;
        }
    memset(t->k_cache, 0, cache_count * 4);
    memset(t->v_cache, 0, cache_count * 4);
    /* Block b of the sequence lands in cache block 37 b mod 256: distinct, scattered. */
    for (int64_t i = 0; i < tokens; i++)
        t->slots[i] = (int32_t)((i / BLOCK * 37) % (SLOTS / BLOCK) * BLOCK + i % BLOCK);

    int64_t q_shape[3] = {tokens, Q_HEADS, HEAD_DIM}, k_shape[3] = {tokens, K_HEADS, HEAD_DIM};
    int64_t cache_shape[3] = {SLOTS, K_HEADS, HEAD_DIM};
    posenc_rope_desc rope = {
        .q = posenc_tensor_of_host(t->q, POSENC_DTYPE_F32, 3, q_shape),
        .k = posenc_tensor_of_host(t->k, POSENC_DTYPE_F32, 3, k_shape),
        .theta = 500000.0,
        .position_offset = tokens == 1 ? 4095 : 0,
    };
    t->rope = rope;
    t->fused = rope;
    t->fused.k_cache = posenc_tensor_of_host(t->k_cache, POSENC_DTYPE_F32, 3, cache_shape);
    t->fused.v_cache = posenc_tensor_of_host(t->v_cache, POSENC_DTYPE_F32, 3, cache_shape);
    t->fused.v = posenc_tensor_of_host(t->v, POSENC_DTYPE_F32, 3, k_shape);
    t->fused.slot_mapping = posenc_tensor_of_host(t->slots, POSENC_DTYPE_I32, 1, &tokens);
    return true;
}

/* What an engine does without the fused call: RoPE in place, then each token's rows copied. */
static posenc_status separate_call(posenc_context *context, const kv_tensors *t, int64_t tokens)
{
    posenc_status status = posenc_rope(context, &t->rope);
    const size_t row = (size_t)K_HEADS * HEAD_DIM;
    for (int64_t i = 0; i < tokens && status == POSENC_OK; i++) {
        size_t slot = (size_t)t->slots[i];
        memcpy(t->k_cache + slot * row, t->k + (size_t)i * row, row * 4);
        memcpy(t->v_cache + slot * row, t->v + (size_t)i * row, row * 4);
    }
    return status;
}

static double time_batch(posenc_context *context, const kv_tensors *t, int64_t tokens,
                         bool fused, uint32_t repeats, posenc_status *status)
{
    double start = support_seconds_now();
    for (uint32_t r = 0; r < repeats && *status == POSENC_OK; r++)
        *status = fused ? posenc_rope(context, &t->fused) : separate_call(context, t, tokens);
    return (support_seconds_now() - start) / repeats;
}

static void run_row(posenc_context *context, uint32_t runs, double sample_seconds,
                    bench_kv_cache_row *row)
{
    kv_tensors t;
    posenc_status status = tensors_make(row->tokens, &t) ? POSENC_OK : POSENC_OUT_OF_MEMORY;
    for (int i = 0; i < 3 && status == POSENC_OK; i++) { /* every page touched, tables cached */
        time_batch(context, &t, row->tokens, true, 1, &status);
        time_batch(context, &t, row->tokens, false, 1, &status);
    }
    double single = status == POSENC_OK ? time_batch(context, &t, row->tokens, true, 1, &status)
                                        : 0.0;
    uint32_t repeats = bench_calls_per_run(single, sample_seconds);
    runs = runs > MAX_RUNS ? MAX_RUNS : runs;
    double fused[MAX_RUNS], separate[MAX_RUNS], ratios[MAX_RUNS];
    uint32_t run = 0;
    for (; run < runs && status == POSENC_OK; run++) {
        bool fused_first = run % 2 == 0; /* neither always finds the caches as the other left */
        for (int i = 0; i < 2; i++) {
            bool is_fused = (i == 0) == fused_first;
            double seconds = time_batch(context, &t, row->tokens, is_fused, repeats, &status);
            *(is_fused ? &fused[run] : &separate[run]) = seconds;
        }
        ratios[run] = separate[run] / fused[run];
    }
    row->status = status;
    if (status != POSENC_OK) {
        bench_format_error(context, status, row->error, sizeof row->error);
    } else {
        row->runs = run;
        row->repeats = repeats;
        bench_spread(ratios, run, &row->ratio, &row->ratio_p10, &row->ratio_p90);
        bench_spread(fused, run, &row->fused, NULL, NULL);
        bench_spread(separate, run, &row->separate, NULL, NULL);
    }
    tensors_free(&t);
}

void bench_kv_cache_run(posenc_context *context, uint32_t runs, double sample_seconds,
                        bench_kv_cache_row rows[BENCH_KV_CACHE_ROWS])
{
    for (int r = 0; r < BENCH_KV_CACHE_ROWS; r++) {
        memset(&rows[r], 0, sizeof rows[r]);
        rows[r].name = shapes[r].name;
        rows[r].tokens = shapes[r].tokens;
        run_row(context, runs, sample_seconds, &rows[r]);
    }
}

void bench_kv_cache_print(const bench_kv_cache_row rows[BENCH_KV_CACHE_ROWS])
{
    printf("  paged KV cache (f32 neox, q [T, 32, 128] in place, k and v [T, 8, 128] into caches "
           "of 4096 slots; 'saves' = separate time / fused time, median and p10-p90):\n");
    printf("  %-17s %-7s %11s %14s %6s %-11s\n", "operation", "tokens", "fused",
           "rope + copy", "saves", "p10-p90");
    for (int r = 0; r < BENCH_KV_CACHE_ROWS; r++) {
        const bench_kv_cache_row *row = &rows[r];
        if (row->status != POSENC_OK) {
            printf("  %-17s %-7lld failed: %s\n", row->name, (long long)row->tokens, row->error);
            continue;
        }
        char fused[32], separate[32], range[32];
        bench_format_time(row->fused, fused, sizeof fused);
        bench_format_time(row->separate, separate, sizeof separate);
        snprintf(range, sizeof range, "%.2f-%.2f", row->ratio_p10, row->ratio_p90);
        printf("  %-17s %-7lld %11s %14s %6.2f %-11s\n", row->name, (long long)row->tokens,
               fused, separate, row->ratio, range);
    }
}

void bench_kv_cache_print_json(const bench_kv_cache_row rows[BENCH_KV_CACHE_ROWS])
{
    printf(",\n     \"kv_cache_rows\": [");
    for (int r = 0; r < BENCH_KV_CACHE_ROWS; r++) {
        const bench_kv_cache_row *row = &rows[r];
        printf("%s\n      {\"operation\": \"%s\", \"tokens\": %lld, \"ok\": %s", r ? "," : "",
               row->name, (long long)row->tokens, row->status == POSENC_OK ? "true" : "false");
        if (row->status != POSENC_OK)
            printf(", \"error\": \"%s\"", posenc_status_name(row->status));
        else
            printf(", \"runs\": %u, \"calls_per_run\": %u, \"fused_us\": %.4f, "
                   "\"separate_us\": %.4f, \"separate_over_fused\": %.4f, \"ratio_p10\": %.4f, "
                   "\"ratio_p90\": %.4f",
                   row->runs, row->repeats, row->fused * 1e6, row->separate * 1e6, row->ratio,
                   row->ratio_p10, row->ratio_p90);
        printf("}");
    }
    printf("]");
}
