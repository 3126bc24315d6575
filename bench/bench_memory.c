/* SPDX-License-Identifier: MIT */
/* `posenc bench` memory rows (bench_memory.h): in-place f32 NeoX RoPE of q [T, 32, 128] and
 * k [T, 8, 128] in one allocation, on a device buffer, a page-aligned host tensor and a buffer
 * wrapping page-aligned host memory, for a decode step, a short chunk and a prefill. */
#include "bench_memory.h"
#include "bench_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define Q_HEADS 32
#define K_HEADS 8
#define HEAD_DIM 128
#define PAGE 4096
#define MAX_RUNS 1000

enum { DEVICE_BUFFER, HOST_TENSOR, WRAPPED_HOST };
static const char *const form_names[BENCH_MEMORY_FORMS] = {"device buffer", "host tensor",
                                                           "wrapped host"};
static const struct {
    const char *name;
    int64_t tokens;
} shapes[BENCH_MEMORY_ROWS] = {{"rope decode", 1}, {"rope chunk", 64}, {"rope prefill", 4096}};

bool bench_memory_applies(const posenc_device_info *info)
{
    return info->unified_memory &&
           (info->backend == POSENC_BACKEND_VULKAN || info->backend == POSENC_BACKEND_OPENCL);
}

typedef struct memory_forms {
    posenc_rope_desc rope[BENCH_MEMORY_FORMS];
    posenc_buffer *device, *wrapped;
    void *host, *wrapped_memory;
} memory_forms;

static void forms_free(memory_forms *f)
{
    posenc_buffer_destroy(f->device);
    posenc_buffer_destroy(f->wrapped);
    support_aligned_free(f->host);
    support_aligned_free(f->wrapped_memory);
}

static void rope_views(posenc_rope_desc *desc, posenc_tensor q, posenc_tensor k, int64_t tokens)
{
    memset(desc, 0, sizeof *desc);
    desc->q = q;
    desc->k = k;
    desc->theta = 500000.0;
    desc->position_offset = tokens == 1 ? 4095 : 0;
}

static posenc_status forms_make(posenc_context *context, int64_t tokens, memory_forms *f)
{
    memset(f, 0, sizeof *f);
    int64_t q_shape[3] = {tokens, Q_HEADS, HEAD_DIM}, k_shape[3] = {tokens, K_HEADS, HEAD_DIM};
    size_t q_bytes = (size_t)tokens * Q_HEADS * HEAD_DIM * 4;
    size_t bytes = q_bytes + (size_t)tokens * K_HEADS * HEAD_DIM * 4;
    f->host = support_aligned_alloc(PAGE, bytes);
    f->wrapped_memory = support_aligned_alloc(PAGE, bytes);
    if (!f->host || !f->wrapped_memory)
        return POSENC_OUT_OF_MEMORY;
    float *values = f->host;
    uint32_t state = 12345u;
    for (size_t i = 0; i < bytes / 4; i++) {
        state = state * 1664525u + 1013904223u;
        values[i] = (float)(state >> 8) * 0x1p-23f - 1.0f;
    }
    memcpy(f->wrapped_memory, f->host, bytes);
    posenc_buffer_desc device_desc = {.size = bytes, .initial_data = f->host};
    posenc_status status = posenc_buffer_create(context, &device_desc, &f->device);
    posenc_buffer_desc wrapped_desc = {.size = bytes, .host_memory = f->wrapped_memory};
    if (status == POSENC_OK)
        status = posenc_buffer_create(context, &wrapped_desc, &f->wrapped);
    if (status != POSENC_OK)
        return status;
    posenc_tensor q = posenc_tensor_of_buffer(f->device, POSENC_DTYPE_F32, 3, q_shape);
    posenc_tensor k = posenc_tensor_of_buffer(f->device, POSENC_DTYPE_F32, 3, k_shape);
    k.offset = q_bytes;
    rope_views(&f->rope[DEVICE_BUFFER], q, k, tokens);
    q.buffer = k.buffer = f->wrapped;
    rope_views(&f->rope[WRAPPED_HOST], q, k, tokens);
    rope_views(&f->rope[HOST_TENSOR],
               posenc_tensor_of_host(f->host, POSENC_DTYPE_F32, 3, q_shape),
               posenc_tensor_of_host((uint8_t *)f->host + q_bytes, POSENC_DTYPE_F32, 3, k_shape),
               tokens);
    return POSENC_OK;
}

static double time_batch(posenc_context *context, const posenc_rope_desc *desc, uint32_t repeats,
                         posenc_status *status)
{
    double start = support_seconds_now();
    for (uint32_t r = 0; r < repeats && *status == POSENC_OK; r++)
        *status = posenc_rope(context, desc);
    return (support_seconds_now() - start) / repeats;
}

static void run_row(posenc_context *context, uint32_t runs, double sample_seconds,
                    bench_memory_row *row)
{
    memory_forms f;
    posenc_status status = forms_make(context, row->tokens, &f);
    /* Warm-up: kernels built, tables cached, every page touched. */
    for (int form = 0; form < BENCH_MEMORY_FORMS && status == POSENC_OK; form++)
        for (int i = 0; i < 3 && status == POSENC_OK; i++)
            status = posenc_rope(context, &f.rope[form]);
    double single = 0.0;
    if (status == POSENC_OK)
        single = time_batch(context, &f.rope[DEVICE_BUFFER], 1, &status);
    uint32_t repeats = bench_calls_per_run(single, sample_seconds);
    runs = runs > MAX_RUNS ? MAX_RUNS : runs;
    double times[BENCH_MEMORY_FORMS][MAX_RUNS], ratios[MAX_RUNS];
    uint32_t run = 0;
    for (; run < runs && status == POSENC_OK; run++) {
        /* Each form leads in turn: none always finds the caches as another left them. */
        for (uint32_t i = 0; i < BENCH_MEMORY_FORMS && status == POSENC_OK; i++) {
            uint32_t form = (run + i) % BENCH_MEMORY_FORMS;
            times[form][run] = time_batch(context, &f.rope[form], repeats, &status);
        }
    }
    row->status = status;
    if (status != POSENC_OK) {
        bench_format_error(context, status, row->error, sizeof row->error);
        forms_free(&f);
        return;
    }
    row->runs = run;
    row->repeats = repeats;
    for (int form = 0; form < BENCH_MEMORY_FORMS; form++) {
        for (uint32_t i = 0; i < run; i++)
            ratios[i] = times[DEVICE_BUFFER][i] / times[form][i];
        bench_spread(ratios, run, &row->ratio[form], &row->ratio_p10[form],
                     &row->ratio_p90[form]);
    }
    for (int form = 0; form < BENCH_MEMORY_FORMS; form++)
        bench_spread(times[form], run, &row->median[form], NULL, NULL);
    forms_free(&f);
}

void bench_memory_run(posenc_context *context, uint32_t runs, double sample_seconds,
                      bench_memory_row rows[BENCH_MEMORY_ROWS])
{
    for (int r = 0; r < BENCH_MEMORY_ROWS; r++) {
        memset(&rows[r], 0, sizeof rows[r]);
        rows[r].name = shapes[r].name;
        rows[r].tokens = shapes[r].tokens;
        rows[r].bytes = (uint64_t)shapes[r].tokens * (Q_HEADS + K_HEADS) * HEAD_DIM * 4;
        run_row(context, runs, sample_seconds, &rows[r]);
    }
}

void bench_memory_print(const bench_memory_row rows[BENCH_MEMORY_ROWS])
{
    printf("  where the tensors live (f32 neox, in place; 'vs buffer' = device-buffer time / this "
           "time, median and p10-p90 of the runs):\n");
    printf("  %-13s %-10s %-13s %10s %9s %-11s\n", "operation", "tokens", "memory", "median",
           "vs buffer", "p10-p90");
    for (int r = 0; r < BENCH_MEMORY_ROWS; r++) {
        const bench_memory_row *row = &rows[r];
        if (row->status != POSENC_OK) {
            printf("  %-13s %-10lld failed: %s\n", row->name, (long long)row->tokens,
                   row->error);
            continue;
        }
        for (int form = 0; form < BENCH_MEMORY_FORMS; form++) {
            char median[32], range[32];
            bench_format_time(row->median[form], median, sizeof median);
            snprintf(range, sizeof range, "%.2f-%.2f", row->ratio_p10[form],
                     row->ratio_p90[form]);
            printf("  %-13s %-10lld %-13s %10s %9.2f %-11s\n", form ? "" : row->name,
                   (long long)row->tokens, form_names[form], median, row->ratio[form], range);
        }
    }
}

void bench_memory_print_json(const bench_memory_row rows[BENCH_MEMORY_ROWS])
{
    static const char *const keys[BENCH_MEMORY_FORMS] = {"device_buffer", "host_tensor",
                                                         "wrapped_host"};
    printf(",\n     \"memory_rows\": [");
    for (int r = 0; r < BENCH_MEMORY_ROWS; r++) {
        const bench_memory_row *row = &rows[r];
        printf("%s\n      {\"operation\": \"%s\", \"tokens\": %lld, \"bytes\": %llu, \"ok\": %s",
               r ? "," : "", row->name, (long long)row->tokens, (unsigned long long)row->bytes,
               row->status == POSENC_OK ? "true" : "false");
        if (row->status != POSENC_OK) {
            /* The message may hold quotes or backslashes: only safe characters are kept. */
            printf(", \"error\": \"");
            for (const char *c = row->error; *c; c++)
                putchar(*c == '"' || *c == '\\' || (unsigned char)*c < 0x20 ? ' ' : *c);
            printf("\"}");
            continue;
        }
        printf(", \"runs\": %u, \"calls_per_run\": %u", row->runs, row->repeats);
        for (int form = 0; form < BENCH_MEMORY_FORMS; form++)
            printf(", \"%s\": {\"median_us\": %.4f, \"ratio_to_device_buffer\": %.4f, "
                   "\"ratio_p10\": %.4f, \"ratio_p90\": %.4f}",
                   keys[form], row->median[form] * 1e6, row->ratio[form], row->ratio_p10[form],
                   row->ratio_p90[form]);
        printf("}");
    }
    printf("]");
}
