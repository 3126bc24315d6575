/* SPDX-License-Identifier: MIT */
/* Caller host memory used in place on GPU devices that can import it (host_memory_import):
 * page-aligned host tensors and wrapped buffers are imported, not staged (the log says which),
 * misaligned and small memory falls back to staging with the reason logged, results match the
 * float64 reference either way, bytes outside the outputs are never written, memory freed and
 * reused between calls is seen afresh, and submits take wrapped buffers only where imported.
 * POSENC_VULKAN_DISABLE / POSENC_OPENCL_DISABLE=host_import run the same checks staged. */
#include "reference.h"
#include "required_devices.h"
#include "test_common.h"

#include "core/gpu_devices.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 192 KiB of f32 per tensor: above the sizes from which the backends import (128 KiB). */
enum { TOKENS = 96, HEADS = 8, HEAD_DIM = 64, N = TOKENS * HEADS * HEAD_DIM };
enum { PAGE = 4096, GUARD = 0x5a };
static const int64_t shape[3] = {TOKENS, HEADS, HEAD_DIM};

/* What the context logged about host memory, from its log callback. */
typedef struct import_log {
    unsigned imported, staged;
    char last_staged[512];
} import_log;

static void record(posenc_log_level level, const char *message, void *user_data)
{
    import_log *log = user_data;
    if (strstr(message, "imported") && !strstr(message, "not imported"))
        log->imported++;
    if (strstr(message, "staged, not imported")) {
        log->staged++;
        snprintf(log->last_staged, sizeof log->last_staged, "%s", message);
    }
    test_count_warnings(level, message, NULL);
}

static void fill(float *data, size_t count, uint64_t seed)
{
    test_rng rng = {seed * 0x9e3779b97f4a7c15ull + 7};
    for (size_t i = 0; i < count; i++)
        data[i] = (float)test_rng_uniform(&rng, -1.0, 1.0);
}

static bool untouched(const unsigned char *bytes, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        if (bytes[i] != GUARD) {
            fprintf(stderr, "  byte %zu outside the output was written\n", i);
            return false;
        }
    }
    return true;
}

static bool disabled_by_env(posenc_backend backend)
{
    const char *variable = backend == POSENC_BACKEND_VULKAN ? "POSENC_VULKAN_DISABLE"
                                                            : "POSENC_OPENCL_DISABLE";
    /* Without unified memory posenc treats the device as discrete: nothing is imported. */
    return posenc__gpu_feature_disabled(variable, "host_import") ||
           posenc__gpu_feature_disabled(variable, "unified_memory");
}

static posenc_context *context_with_log(const posenc_device_info *info, import_log *log)
{
    char selector[16];
    snprintf(selector, sizeof selector, "%u", info->backend_index);
    posenc_context_desc desc = {
        .backend = info->backend,
        .device = selector,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_VALIDATION,
        .log = record,
        .log_user_data = log,
    };
    posenc_context *ctx = NULL;
    CHECK_OK(posenc_context_create(&desc, &ctx));
    return ctx;
}

/* An out-of-place host-tensor call from `lead` bytes past a page boundary, the output followed
 * by guard bytes (odd-sized memory: the call's last page is partly someone else's). The data
 * goes in and out through memcpy: at an odd lead it is off its float boundary. Returns whether
 * anything was imported, or -1 when the call failed. */
static int host_call(posenc_context *ctx, import_log *log, size_t lead)
{
    size_t bytes = (size_t)N * sizeof(float);
    unsigned char *in_memory = posenc__aligned_alloc(PAGE, lead + bytes + PAGE);
    unsigned char *out_memory = posenc__aligned_alloc(PAGE, lead + bytes + PAGE);
    float *in = malloc(bytes), *out = malloc(bytes);
    if (!in_memory || !out_memory || !in || !out) {
        CHECK(!"out of memory");
        posenc__aligned_free(in_memory);
        posenc__aligned_free(out_memory);
        free(in);
        free(out);
        return -1;
    }
    memset(in_memory, GUARD, lead + bytes + PAGE);
    memset(out_memory, GUARD, lead + bytes + PAGE);
    fill(in, N, lead + 1);
    memcpy(in_memory + lead, in, bytes);
    posenc_rope_desc desc = {.position_offset = 3};
    desc.q = posenc_tensor_of_host(in_memory + lead, POSENC_DTYPE_F32, 3, shape);
    desc.q_out = posenc_tensor_of_host(out_memory + lead, POSENC_DTYPE_F32, 3, shape);
    unsigned before = log->imported;
    posenc_status status = posenc_rope(ctx, &desc);
    CHECK_OK(status);
    if (status == POSENC_OK) {
        memcpy(out, out_memory + lead, bytes);
        CHECK(ref_rope_rows_f32_ok(in, out, HEAD_DIM, TOKENS, HEADS, HEAD_DIM, 3));
        CHECK(memcmp(in_memory + lead, in, bytes) == 0); /* the input is only read */
        CHECK(untouched(out_memory, lead));
        CHECK(untouched(out_memory + lead + bytes, PAGE));
    }
    int imported = status == POSENC_OK ? log->imported > before : -1;
    free(in);
    free(out);
    posenc__aligned_free(in_memory);
    posenc__aligned_free(out_memory);
    return imported;
}

/* A fused qkv array [TOKENS, 3 * HEADS, HEAD_DIM] rotated in place through its q and k slices:
 * one imported region whose v slice the kernels must leave alone. */
static void fused_qkv(posenc_context *ctx)
{
    size_t count = (size_t)TOKENS * 3 * HEADS * HEAD_DIM;
    float *qkv = posenc__aligned_alloc(PAGE, count * sizeof(float));
    float *copy = malloc(count * sizeof(float));
    if (!qkv || !copy) {
        CHECK(!"out of memory");
        posenc__aligned_free(qkv);
        free(copy);
        return;
    }
    fill(qkv, count, 99);
    memcpy(copy, qkv, count * sizeof(float));
    const int64_t strides[3] = {3 * HEADS * HEAD_DIM * 4, HEAD_DIM * 4, 4};
    posenc_rope_desc desc = {.position_offset = 3};
    desc.q = posenc_tensor_of_host(qkv, POSENC_DTYPE_F32, 3, shape);
    desc.k = posenc_tensor_of_host(qkv + HEADS * HEAD_DIM, POSENC_DTYPE_F32, 3, shape);
    memcpy(desc.q.strides, strides, sizeof strides);
    memcpy(desc.k.strides, strides, sizeof strides);
    CHECK_OK(posenc_rope(ctx, &desc));
    /* Each slice checked through packed copies of its rows. */
    float *in = malloc((size_t)N * sizeof(float)), *out = malloc((size_t)N * sizeof(float));
    for (int slice = 0; slice < 2 && in && out; slice++) {
        for (int t = 0; t < TOKENS; t++) {
            size_t at = (size_t)t * 3 * HEADS * HEAD_DIM + (size_t)slice * HEADS * HEAD_DIM;
            memcpy(in + (size_t)t * HEADS * HEAD_DIM, copy + at, HEADS * HEAD_DIM * 4);
            memcpy(out + (size_t)t * HEADS * HEAD_DIM, qkv + at, HEADS * HEAD_DIM * 4);
        }
        CHECK(ref_rope_rows_f32_ok(in, out, HEAD_DIM, TOKENS, HEADS, HEAD_DIM, 3));
    }
    for (int t = 0; t < TOKENS; t++) {
        size_t v = (size_t)t * 3 * HEADS * HEAD_DIM + 2 * HEADS * HEAD_DIM;
        CHECK(memcmp(qkv + v, copy + v, HEADS * HEAD_DIM * 4) == 0);
    }
    free(in);
    free(out);
    free(copy);
    posenc__aligned_free(qkv);
}

/* Memory freed after a call and allocated again (likely at the same address, other contents)
 * is read afresh: nothing imported outlives its call. */
static void reused_memory(posenc_context *ctx)
{
    for (uint64_t round = 0; round < 3; round++) {
        float *q = posenc__aligned_alloc(PAGE, (size_t)N * sizeof(float));
        float *copy = malloc((size_t)N * sizeof(float));
        if (!q || !copy) {
            CHECK(!"out of memory");
            posenc__aligned_free(q);
            free(copy);
            return;
        }
        fill(q, N, 1000 + round);
        memcpy(copy, q, (size_t)N * sizeof(float));
        posenc_rope_desc desc = {.position_offset = 3};
        desc.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, shape);
        CHECK_OK(posenc_rope(ctx, &desc));
        CHECK(ref_rope_rows_f32_ok(copy, q, HEAD_DIM, TOKENS, HEADS, HEAD_DIM, 3));
        free(copy);
        posenc__aligned_free(q);
    }
}

/* A wrapped host buffer `lead` bytes into a page: synchronous calls and downloads see the
 * caller's memory; a submit is accepted exactly when the buffer was imported, and a refused
 * one leaves the memory alone. */
static void wrapped(posenc_context *ctx, import_log *log, bool import_expected, size_t lead)
{
    size_t bytes = (size_t)N * sizeof(float);
    unsigned char *memory = posenc__aligned_alloc(PAGE, lead + bytes);
    float *copy = malloc(bytes), *read = malloc(bytes);
    if (!memory || !copy || !read) {
        CHECK(!"out of memory");
        posenc__aligned_free(memory);
        free(copy);
        free(read);
        return;
    }
    unsigned char *q = memory + lead; /* off its float boundary at odd leads: memcpy only */
    fill(copy, N, 7 + lead);
    memcpy(q, copy, bytes);
    unsigned imported_before = log->imported;
    posenc_buffer *buffer = NULL;
    posenc_buffer_desc buffer_desc = {.size = bytes, .host_memory = q};
    CHECK_OK(posenc_buffer_create(ctx, &buffer_desc, &buffer));
    bool imported = log->imported > imported_before;
    CHECK(imported == import_expected);
    posenc_rope_desc desc = {.position_offset = 3};
    desc.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, shape);
    CHECK_OK(posenc_rope(ctx, &desc));
    memcpy(read, q, bytes);
    CHECK(ref_rope_rows_f32_ok(copy, read, HEAD_DIM, TOKENS, HEADS, HEAD_DIM, 3));

    /* Back to the input, then the same rotation submitted. */
    memcpy(q, copy, bytes);
    posenc_event *event = NULL;
    posenc_status status = posenc_rope_submit(ctx, &desc, &event);
    if (imported) {
        CHECK_OK(status);
        CHECK_OK(posenc_event_wait(event, UINT64_MAX));
        posenc_event_destroy(event);
        CHECK_OK(posenc_buffer_download(buffer, 0, read, bytes));
        CHECK(ref_rope_rows_f32_ok(copy, read, HEAD_DIM, TOKENS, HEADS, HEAD_DIM, 3));
        CHECK(memcmp(read, q, bytes) == 0);
    } else {
        CHECK_STATUS(status, POSENC_UNSUPPORTED);
        const char *message = posenc_context_last_error(ctx);
        CHECK(message && strstr(message, "q.buffer"));
        CHECK(event == NULL);
        CHECK(memcmp(q, copy, bytes) == 0);
    }

    /* Bad input is refused before any device work, the memory untouched. */
    memcpy(q, copy, bytes);
    desc.rotary_dim = 3;
    CHECK_STATUS(posenc_rope(ctx, &desc), POSENC_INVALID_SHAPE);
    const char *message = posenc_context_last_error(ctx);
    CHECK(message && strstr(message, "rotary_dim"));
    CHECK(memcmp(q, copy, bytes) == 0);
    posenc_buffer_destroy(buffer);
    free(copy);
    free(read);
    posenc__aligned_free(memory);
}

static void test_device(const posenc_device_info *info)
{
    if (info->backend != POSENC_BACKEND_VULKAN && info->backend != POSENC_BACKEND_OPENCL)
        return;
    import_log log = {0};
    posenc_context *ctx = context_with_log(info, &log);
    if (!ctx)
        return;
    bool importing = info->host_memory_import && !disabled_by_env(info->backend);
    printf("%s (%s): host memory %s\n", info->name, posenc_backend_name(info->backend),
           importing ? "imported" : "staged");

    /* Page-aligned: imported wherever the device can. */
    int imported = host_call(ctx, &log, 0);
    CHECK(imported == (importing ? 1 : 0));
    if (importing)
        CHECK(log.staged == 0);
    /* 4 bytes into a page: Vulkan imports the pages around it; OpenCL needs the buffer to start
     * on CL_DEVICE_MEM_BASE_ADDR_ALIGN, which the region's start aligned down to it gives. */
    imported = host_call(ctx, &log, 4);
    CHECK(imported == (importing ? 1 : 0));
    /* 2 bytes into a page: off the f32 element boundary, so staged (and realigned there). */
    imported = host_call(ctx, &log, 2);
    CHECK(imported == 0);
    /* Small: copied, as importing would cost more than the copy. */
    unsigned before = log.imported;
    float small[2 * HEAD_DIM], small_copy[2 * HEAD_DIM];
    fill(small, 2 * HEAD_DIM, 5);
    memcpy(small_copy, small, sizeof small);
    posenc_rope_desc desc = {0};
    desc.q = posenc_tensor_of_host(small, POSENC_DTYPE_F32, 3, (int64_t[]){2, 1, HEAD_DIM});
    CHECK_OK(posenc_rope(ctx, &desc));
    CHECK(log.imported == before);
    CHECK(fabsf(small[0] - small_copy[0]) == 0.0f); /* position 0: no rotation */
    fused_qkv(ctx);
    reused_memory(ctx);

    wrapped(ctx, &log, importing, 0);
    /* Not on CL_DEVICE_MEM_BASE_ADDR_ALIGN: OpenCL stages it (with the reason logged); Vulkan
     * imports the pages around it. */
    unsigned staged = log.staged;
    wrapped(ctx, &log, importing && info->backend == POSENC_BACKEND_VULKAN, 4);
    if (importing && info->backend == POSENC_BACKEND_OPENCL) {
        CHECK(log.staged > staged);
        CHECK(strstr(log.last_staged, "CL_DEVICE_MEM_BASE_ADDR_ALIGN") != NULL);
    }
    /* Off every element boundary: staged everywhere, the reason logged. */
    staged = log.staged;
    wrapped(ctx, &log, false, 2);
    if (importing)
        CHECK(log.staged > staged);
    posenc_context_destroy(ctx);
}

int main(void)
{
    uint32_t count = 0;
    CHECK_OK(posenc_device_count(&count));
    const char *only = posenc__env_get("POSENC_TEST_BACKEND");
    unsigned vulkan = 0, opencl = 0;
    for (uint32_t i = 0; i < count; i++) {
        posenc_device_info info;
        CHECK_OK(posenc_device_get(i, &info));
        if (only && *only && strcmp(only, posenc_backend_name(info.backend)) != 0)
            continue;
        vulkan += info.backend == POSENC_BACKEND_VULKAN;
        opencl += info.backend == POSENC_BACKEND_OPENCL;
        test_device(&info);
    }
    bool want_vulkan = !only || !*only || strcmp(only, "vulkan") == 0;
    bool want_opencl = !only || !*only || strcmp(only, "opencl") == 0;
    if (want_vulkan && vulkan == 0 && (test_device_required("vulkan") || opencl == 0))
        return test_device_absent("test_host_import", "vulkan", "no Vulkan device");
    if (want_opencl && opencl == 0 && (test_device_required("opencl") || vulkan == 0))
        return test_device_absent("test_host_import", "opencl", "no OpenCL device");
    return test_finish("test_host_import");
}
