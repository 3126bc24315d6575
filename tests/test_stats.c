/* SPDX-License-Identifier: MIT */
/* posenc_context_stats on every device: exact counts for a scripted sequence of calls (buffers,
 * uploads and downloads, operations on buffers and host tensors, frequency tables up to their
 * bound, kernels built or loaded), nothing staged for imported host memory, its bad input,
 * counts kept exact by threads at once, and the kernels and tables posenc_prepare makes ahead
 * of the calls (which then make none). */
#include "test_common.h"

#include "core/atomics.h"
#include "core/platform.h"
#include "posenc_kernel_params.h"

#include <stdlib.h>
#include <string.h>

/* RoPE on [tokens, heads, head_dim] f32 with the whole head rotated: head_dim / 2 frequencies. */
#define TOKENS 4
#define Q_HEADS 2
#define K_HEADS 1
#define HEAD_DIM 8
#define Q_BYTES (TOKENS * Q_HEADS * HEAD_DIM * 4)
#define K_BYTES (TOKENS * K_HEADS * HEAD_DIM * 4)
#define POSITION_BYTES (TOKENS * 4)
/* A GPU table of n frequencies is 4n words (core/gpu_tables.h). */
#define ROPE_TABLE_BYTES (4 * (HEAD_DIM / 2) * 4)
/* Sinusoidal [rows, d_model] f32. */
#define ROWS 3
#define D_MODEL 16
#define SINUSOIDAL_BYTES (ROWS * D_MODEL * 4)
/* Its GPU table: 4 words a frequency, and on a CPU-type OpenCL device (sinusoidal_contiguous.cl,
 * rows at the row index) a cos and a sin word a frequency for each step. */
static uint64_t sinusoidal_table_bytes(const posenc_device_info *info)
{
    bool steps = info->backend == POSENC_BACKEND_OPENCL && info->type == POSENC_DEVICE_CPU;
    return (4 + (steps ? 2 * POSENC_SINUSOIDAL_STEPS : 0)) * (D_MODEL / 2) * 4;
}
/* The GPU table cache's bound (POSENC__GPU_MAX_TABLES); its byte bound is far above 256 small
 * tables. */
#define MAX_TABLES 256

static posenc_stats read_stats(posenc_context *ctx)
{
    posenc_stats stats;
    memset(&stats, 0, sizeof stats);
    CHECK_OK(posenc_context_stats(ctx, &stats));
    CHECK(stats.device_bytes == stats.buffer_bytes + stats.staging_bytes + stats.table_bytes);
    return stats;
}

static void fill_floats(float *values, size_t count, float seed)
{
    for (size_t i = 0; i < count; i++)
        values[i] = (float)((double)((i * 37 + 11) % 101) / 50.0 - 1.0) * seed;
}

static posenc_status rope_on_buffer(posenc_context *ctx, posenc_buffer *buffer, double theta)
{
    int64_t shape[3] = {TOKENS, Q_HEADS, HEAD_DIM};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, shape),
        .theta = theta,
    };
    return posenc_rope(ctx, &desc);
}

static void check_bad_input(posenc_context *ctx)
{
    posenc_stats untouched, stats;
    memset(&untouched, 0xab, sizeof untouched);
    stats = untouched;
    CHECK_STATUS(posenc_context_stats(NULL, &stats), POSENC_INVALID_ARGUMENT);
    CHECK(memcmp(&stats, &untouched, sizeof stats) == 0);
    CHECK(strstr(posenc_thread_last_error(), "context") != NULL);
    CHECK_STATUS(posenc_context_stats(ctx, NULL), POSENC_INVALID_ARGUMENT);
    CHECK(strstr(posenc_context_last_error(ctx), "stats") != NULL);
}

/* The scripted sequence: each step's counts follow from the sizes it uses. */
static void check_sequence(posenc_context *ctx, const posenc_device_info *info)
{
    bool gpu = info->backend != POSENC_BACKEND_CPU;
    posenc_stats s = read_stats(ctx);
    CHECK(s.rope_calls == 0 && s.sinusoidal_calls == 0);
    CHECK(s.staged_bytes == 0 && s.uploaded_bytes == 0 && s.downloaded_bytes == 0);
    CHECK(s.freq_tables == 0 && s.table_bytes == 0 && s.buffer_bytes == 0);
    CHECK(s.staging_bytes == 0);
    uint64_t kernels_at_start = s.kernels_built + s.kernels_loaded;
    check_bad_input(ctx);

    /* Buffers: memory held rises by a buffer's size on create, falls on destroy; initial data
     * is uploaded bytes; wrapped host memory is the caller's. */
    posenc_buffer *buffer = NULL, *initialised = NULL, *wrapped = NULL, *refused = NULL;
    CHECK_OK(posenc_buffer_create(ctx, &(posenc_buffer_desc){.size = 4096}, &buffer));
    CHECK(read_stats(ctx).buffer_bytes == 4096);
    unsigned char initial[1000] = {1};
    CHECK_OK(posenc_buffer_create(
        ctx, &(posenc_buffer_desc){.size = sizeof initial, .initial_data = initial},
        &initialised));
    s = read_stats(ctx);
    CHECK(s.buffer_bytes == 4096 + sizeof initial && s.uploaded_bytes == sizeof initial);
    float *host_memory = calloc(512, sizeof(float));
    CHECK_OK(posenc_buffer_create(
        ctx, &(posenc_buffer_desc){.size = 512 * sizeof(float), .host_memory = host_memory},
        &wrapped));
    CHECK(read_stats(ctx).buffer_bytes == 4096 + sizeof initial);
    CHECK_STATUS(posenc_buffer_create(ctx, &(posenc_buffer_desc){.size = 0}, &refused),
                 POSENC_INVALID_ARGUMENT);
    posenc_buffer_destroy(initialised);
    posenc_buffer_destroy(wrapped);
    free(host_memory);
    s = read_stats(ctx);
    CHECK(s.buffer_bytes == 4096 && s.uploaded_bytes == sizeof initial);

    /* Uploads and downloads count what they copy; empty and refused ones nothing. */
    float q[TOKENS * Q_HEADS * HEAD_DIM], k[TOKENS * K_HEADS * HEAD_DIM];
    fill_floats(q, TOKENS * Q_HEADS * HEAD_DIM, 1.0f);
    fill_floats(k, TOKENS * K_HEADS * HEAD_DIM, -0.5f);
    CHECK_OK(posenc_buffer_upload(buffer, 0, q, Q_BYTES));
    CHECK_OK(posenc_buffer_upload(buffer, 0, q, 0));
    CHECK_STATUS(posenc_buffer_upload(buffer, 4000, q, Q_BYTES), POSENC_OUT_OF_BOUNDS);
    unsigned char back[100];
    CHECK_OK(posenc_buffer_download(buffer, 8, back, sizeof back));
    CHECK_STATUS(posenc_buffer_download(buffer, 4090, back, sizeof back), POSENC_OUT_OF_BOUNDS);
    s = read_stats(ctx);
    CHECK(s.uploaded_bytes == sizeof initial + Q_BYTES && s.downloaded_bytes == sizeof back);

    /* Five operations on device memory: five calls, nothing staged, one table, kernels made by
     * the first call only. */
    enum { CALLS = 5 };
    CHECK_OK(rope_on_buffer(ctx, buffer, 10000.0));
    uint64_t kernels_after_first = read_stats(ctx).kernels_built + read_stats(ctx).kernels_loaded;
    CHECK(gpu ? kernels_after_first > kernels_at_start : kernels_after_first == 0);
    for (int i = 1; i < CALLS; i++)
        CHECK_OK(rope_on_buffer(ctx, buffer, 10000.0));
    CHECK_STATUS(rope_on_buffer(ctx, buffer, -1.0), POSENC_INVALID_ARGUMENT); /* not counted */
    s = read_stats(ctx);
    CHECK(s.rope_calls == CALLS && s.sinusoidal_calls == 0 && s.staged_bytes == 0);
    CHECK(s.kernels_built + s.kernels_loaded == kernels_after_first);
    CHECK(s.freq_tables == 1);
    CHECK(s.table_bytes == (gpu ? ROPE_TABLE_BYTES : 0));

    /* Host tensors: q and k rotated in place are copied in and back, the positions in only
     * (tensors this small are never imported). The table is the same one. */
    int32_t positions[TOKENS] = {3, 1, 4, 1};
    int64_t q_shape[3] = {TOKENS, Q_HEADS, HEAD_DIM}, k_shape[3] = {TOKENS, K_HEADS, HEAD_DIM};
    int64_t p_shape[1] = {TOKENS};
    posenc_rope_desc host_rope = {
        .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, q_shape),
        .k = posenc_tensor_of_host(k, POSENC_DTYPE_F32, 3, k_shape),
        .positions = posenc_tensor_of_host(positions, POSENC_DTYPE_I32, 1, p_shape),
    };
    CHECK_OK(posenc_rope(ctx, &host_rope));
    s = read_stats(ctx);
    uint64_t staged = gpu ? 2 * Q_BYTES + 2 * K_BYTES + POSITION_BYTES : 0;
    CHECK(s.rope_calls == CALLS + 1 && s.staged_bytes == staged);
    CHECK(s.freq_tables == 1);
    /* Three regions, each starting on a 256-byte boundary (core/gpu_staging.h). */
    CHECK(gpu ? s.staging_bytes >= 2 * 256 + POSITION_BYTES : s.staging_bytes == 0);

    /* A packed host output written whole is only copied back. A second kind of table. */
    float table[ROWS * D_MODEL];
    int64_t t_shape[2] = {ROWS, D_MODEL};
    posenc_sinusoidal_desc host_sinusoidal = {
        .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, t_shape)};
    CHECK_OK(posenc_sinusoidal(ctx, &host_sinusoidal));
    s = read_stats(ctx);
    staged += gpu ? SINUSOIDAL_BYTES : 0;
    CHECK(s.sinusoidal_calls == 1 && s.staged_bytes == staged);
    CHECK(s.freq_tables == 2);
    CHECK(s.table_bytes == (gpu ? ROPE_TABLE_BYTES + sinusoidal_table_bytes(info) : 0));

    /* Distinct tables: a GPU cache grows by one each, up to its bound, the least recently used
     * going first; the CPU keeps only the last table of each kind. */
    for (int i = 0; i < MAX_TABLES + 20; i++) {
        CHECK_OK(rope_on_buffer(ctx, buffer, 500.0 + i));
        if (i == 9) {
            s = read_stats(ctx);
            CHECK(s.freq_tables == (gpu ? 12u : 2u));
            CHECK(s.table_bytes ==
                  (gpu ? 11 * ROPE_TABLE_BYTES + sinusoidal_table_bytes(info) : 0));
        }
    }
    s = read_stats(ctx);
    CHECK(s.freq_tables == (gpu ? MAX_TABLES : 2u));
    CHECK(s.table_bytes == (gpu ? MAX_TABLES * ROPE_TABLE_BYTES : 0));
    CHECK(s.rope_calls == CALLS + 1 + MAX_TABLES + 20);
    CHECK(s.staged_bytes == staged); /* buffer views are never staged */

    /* Submits count as operations too. */
    posenc_event *event = NULL;
    int64_t shape[3] = {TOKENS, Q_HEADS, HEAD_DIM};
    posenc_rope_desc submitted = {
        .q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, shape)};
    CHECK_OK(posenc_rope_submit(ctx, &submitted, &event));
    CHECK_OK(posenc_event_wait(event, UINT64_MAX));
    posenc_event_destroy(event);
    CHECK(read_stats(ctx).rope_calls == CALLS + 2 + MAX_TABLES + 20);

    posenc_buffer_destroy(buffer);
    s = read_stats(ctx);
    CHECK(s.buffer_bytes == 0);
    CHECK(s.device_bytes == s.staging_bytes + s.table_bytes);
}

/* Page-aligned host memory, large enough that both GPU backends import it rather than copy it
 * (vk_staging.c, cl_staging.c), is used in place where the device imports host memory: 0 bytes
 * staged, as a host tensor and as a wrapped buffer. Elsewhere it is copied in and back. */
enum { IMPORT_TOKENS = 1024, IMPORT_HEADS = 4, IMPORT_DIM = 16 };
#define IMPORT_BYTES ((size_t)IMPORT_TOKENS * IMPORT_HEADS * IMPORT_DIM * 4)
#define PAGE 4096

static void check_page_aligned(posenc_context *ctx, const posenc_device_info *info)
{
    bool in_place = info->backend == POSENC_BACKEND_CPU || info->host_memory_import;
    float *memory = posenc__aligned_alloc(PAGE, IMPORT_BYTES);
    if (!memory) {
        CHECK(!"page-aligned host memory");
        return;
    }
    fill_floats(memory, IMPORT_BYTES / 4, 1.0f);
    int64_t shape[3] = {IMPORT_TOKENS, IMPORT_HEADS, IMPORT_DIM};
    posenc_rope_desc rope = {.q = posenc_tensor_of_host(memory, POSENC_DTYPE_F32, 3, shape)};
    CHECK_OK(posenc_rope(ctx, &rope));
    posenc_stats s = read_stats(ctx);
    CHECK(s.staged_bytes == (in_place ? 0 : 2 * IMPORT_BYTES));
    uint64_t staged = s.staged_bytes;

    posenc_buffer *wrapped = NULL;
    CHECK_OK(posenc_buffer_create(
        ctx, &(posenc_buffer_desc){.size = IMPORT_BYTES, .host_memory = memory}, &wrapped));
    rope.q = posenc_tensor_of_buffer(wrapped, POSENC_DTYPE_F32, 3, shape);
    CHECK_OK(posenc_rope(ctx, &rope));
    s = read_stats(ctx);
    CHECK(s.staged_bytes - staged == (in_place ? 0 : 2 * IMPORT_BYTES));
    CHECK(s.buffer_bytes == 0); /* the memory is the caller's, imported or not */
    posenc_buffer_destroy(wrapped);
    posenc__aligned_free(memory);
}

/* Threads uploading, downloading, creating and destroying buffers on one context at once
 * (posenc.h, "Thread safety"), with one more reading the counters meanwhile. */
enum { THREADS = 4, ROUNDS = 40, UPLOAD = 64, DOWNLOAD = 24, CYCLE_BYTES = 1000 };

typedef struct worker {
    posenc_context *ctx;
    posenc_buffer *buffer;
    bool failed;
} worker;

static void work(void *arg)
{
    worker *w = arg;
    unsigned char data[UPLOAD] = {7};
    for (int i = 0; i < ROUNDS; i++) {
        posenc_buffer *made = NULL;
        w->failed |= posenc_buffer_upload(w->buffer, 0, data, UPLOAD) != POSENC_OK;
        w->failed |= posenc_buffer_download(w->buffer, 8, data, DOWNLOAD) != POSENC_OK;
        w->failed |= posenc_buffer_create(w->ctx, &(posenc_buffer_desc){.size = CYCLE_BYTES},
                                          &made) != POSENC_OK;
        posenc_buffer_destroy(made);
    }
}

typedef struct reader {
    posenc_context *ctx;
    posenc__atomic_u32 stop;
    bool failed;
    unsigned readings;
} reader;

static void read_meanwhile(void *arg)
{
    reader *r = arg;
    uint64_t uploaded = 0;
    while (!posenc__atomic_load_acquire(&r->stop)) {
        posenc_stats s;
        r->failed |= posenc_context_stats(r->ctx, &s) != POSENC_OK;
        /* Totals never go back; memory held stays within what the workers can hold. */
        r->failed |= s.uploaded_bytes < uploaded;
        r->failed |= s.buffer_bytes > (uint64_t)THREADS * (UPLOAD + CYCLE_BYTES);
        uploaded = s.uploaded_bytes;
        r->readings++;
    }
}

static void check_threads(posenc_context *ctx, const posenc_device_info *info)
{
    (void)info;
    worker workers[THREADS];
    posenc__thread threads[THREADS], reading;
    reader r = {.ctx = ctx};
    bool started = posenc__thread_start(&reading, read_meanwhile, &r);
    CHECK(started);
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (worker){.ctx = ctx};
        CHECK_OK(posenc_buffer_create(ctx, &(posenc_buffer_desc){.size = UPLOAD},
                                      &workers[t].buffer));
    }
    for (int t = 0; t < THREADS; t++)
        CHECK(posenc__thread_start(&threads[t], work, &workers[t]));
    for (int t = 0; t < THREADS; t++)
        posenc__thread_join(&threads[t]);
    posenc__atomic_store_release(&r.stop, 1);
    if (started)
        posenc__thread_join(&reading);
    CHECK(!r.failed);
    posenc_stats s = read_stats(ctx);
    CHECK(s.uploaded_bytes == (uint64_t)THREADS * ROUNDS * UPLOAD);
    CHECK(s.downloaded_bytes == (uint64_t)THREADS * ROUNDS * DOWNLOAD);
    CHECK(s.buffer_bytes == (uint64_t)THREADS * UPLOAD);
    for (int t = 0; t < THREADS; t++) {
        CHECK(!workers[t].failed);
        posenc_buffer_destroy(workers[t].buffer);
    }
    CHECK(read_stats(ctx).buffer_bytes == 0);
}

/* posenc_prepare makes the kernels and tables of the calls it is given (none on the CPU, where
 * it only validates, and only the host tables there), so that those calls make none; a bad
 * descriptor makes nothing, naming its place. */
static void check_prepare(posenc_context *ctx, const posenc_device_info *info)
{
    bool gpu = info->backend != POSENC_BACKEND_CPU;
    posenc_buffer *buffer = NULL;
    CHECK_OK(posenc_buffer_create(ctx, &(posenc_buffer_desc){.size = Q_BYTES}, &buffer));
    float table[ROWS * D_MODEL];
    int64_t q_shape[3] = {TOKENS, Q_HEADS, HEAD_DIM}, t_shape[2] = {ROWS, D_MODEL};
    posenc_rope_desc rope[2] = {
        {.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, q_shape)},
        {.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, q_shape), .theta = -1.0},
    };
    posenc_sinusoidal_desc sinusoidal = {
        .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, t_shape)};
    posenc_prepare_desc desc = {.rope = rope, .rope_count = 2, .sinusoidal = &sinusoidal,
                                .sinusoidal_count = 1};
    CHECK_STATUS(posenc_prepare(ctx, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "rope[1].theta");
    posenc_stats s = read_stats(ctx);
    CHECK(s.kernels_built + s.kernels_loaded == 0 && s.table_bytes == 0);

    desc.rope_count = 1;
    CHECK_OK(posenc_prepare(ctx, &desc));
    posenc_stats prepared = read_stats(ctx);
    /* One RoPE and one sinusoidal kernel; on Vulkan each also has its variant for whole
     * 16-byte blocks, which posenc_prepare builds as well (a call takes either). */
    uint64_t kernels = info->backend == POSENC_BACKEND_VULKAN ? 4u : gpu ? 2u : 0u;
    CHECK(prepared.kernels_built + prepared.kernels_loaded == kernels);
    CHECK(prepared.freq_tables == 2 && prepared.rope_calls == 0);
    CHECK(prepared.table_bytes ==
          (gpu ? ROPE_TABLE_BYTES + sinusoidal_table_bytes(info) : 0));

    CHECK_OK(posenc_rope(ctx, &rope[0]));
    CHECK_OK(posenc_sinusoidal(ctx, &sinusoidal));
    s = read_stats(ctx);
    CHECK(s.kernels_built == prepared.kernels_built);
    CHECK(s.kernels_loaded == prepared.kernels_loaded);
    CHECK(s.freq_tables == 2 && s.table_bytes == prepared.table_bytes);
    CHECK(s.rope_calls == 1 && s.sinusoidal_calls == 1);

    CHECK_OK(posenc_prepare(ctx, &(posenc_prepare_desc){0})); /* nothing to prepare */
    CHECK_STATUS(posenc_prepare(ctx, NULL), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "desc");
    desc.sinusoidal = NULL;
    CHECK_STATUS(posenc_prepare(ctx, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "sinusoidal");
    CHECK_STATUS(posenc_prepare(NULL, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "context");
    posenc_buffer_destroy(buffer);
}

/* OpenCL tells programs compiled from source from those loaded from the binary cache: a second
 * context on the same cache_dir loads every program the first one compiled. */
static posenc_stats rope_in_cache(const posenc_device_info *info, const char *dir)
{
    posenc_stats s = {0};
    char selector[16];
    snprintf(selector, sizeof selector, "%u", info->backend_index);
    posenc_context_desc desc = {
        .backend = info->backend,
        .device = selector,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV,
        .log = test_count_warnings,
        .cache_dir = dir,
    };
    posenc_context *ctx = NULL;
    CHECK_OK(posenc_context_create(&desc, &ctx));
    if (!ctx)
        return s;
    float q[TOKENS * Q_HEADS * HEAD_DIM];
    fill_floats(q, TOKENS * Q_HEADS * HEAD_DIM, 1.0f);
    int64_t shape[3] = {TOKENS, Q_HEADS, HEAD_DIM};
    posenc_rope_desc rope = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, shape)};
    CHECK_OK(posenc_rope(ctx, &rope));
    s = read_stats(ctx);
    posenc_context_destroy(ctx);
    return s;
}

static void check_kernel_cache(posenc_context *ctx, const posenc_device_info *info)
{
    (void)ctx;
    if (info->backend != POSENC_BACKEND_OPENCL)
        return;
    char dir[1024];
    if (!support_temp_directory_create("posenc-stats-", dir, sizeof dir)) {
        CHECK(!"a temporary directory");
        return;
    }
    posenc_stats first = rope_in_cache(info, dir);
    posenc_stats second = rope_in_cache(info, dir);
    CHECK(first.kernels_built > 0 && first.kernels_loaded == 0);
    CHECK(second.kernels_built == 0 && second.kernels_loaded == first.kernels_built);
    support_remove_tree(dir);
}

int main(void)
{
    CHECK(test_for_each_device(check_sequence) > 0);
    CHECK(test_for_each_device(check_threads) > 0);
    CHECK(test_for_each_device(check_page_aligned) > 0);
    CHECK(test_for_each_device(check_prepare) > 0);
    test_for_each_device(check_kernel_cache);
    return test_finish("test_stats");
}
