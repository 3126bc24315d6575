/* SPDX-License-Identifier: MIT */
/* posenc_buffer_map / unmap on every device: the mapping shows the buffer's bytes, what the host
 * writes there is what the device reads, results of synchronous and submitted work are seen
 * through it (checked against the float64 reference), work on a mapped buffer is refused with
 * the buffer untouched, and devices whose memory the host cannot see say UNSUPPORTED. */
#include "reference.h"
#include "test_common.h"

#include "core/gpu_devices.h"

#include <stdint.h>
#include <string.h>

enum { TOKENS = 5, HEADS = 3, HEAD_DIM = 16, N = TOKENS * HEADS * HEAD_DIM };
static const int64_t shape[3] = {TOKENS, HEADS, HEAD_DIM};

static void fill(float *data, uint64_t seed)
{
    test_rng rng = {seed * 0x9e3779b97f4a7c15ull + 7};
    for (int i = 0; i < N; i++)
        data[i] = (float)test_rng_uniform(&rng, -1.0, 1.0);
}

static posenc_rope_desc rope_on(posenc_buffer *buffer, int32_t offset)
{
    posenc_rope_desc desc = {.position_offset = offset};
    desc.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, shape);
    return desc;
}

/* Whether this context's device buffers can be mapped: the CPU path, and unified memory unless
 * the Vulkan backend was told to stage instead (POSENC_VULKAN_DISABLE=unified_memory). */
static bool mappable(const posenc_device_info *info)
{
    if (info->backend == POSENC_BACKEND_CPU)
        return true;
    if (info->backend == POSENC_BACKEND_VULKAN &&
        posenc__gpu_feature_disabled("POSENC_VULKAN_DISABLE", "unified_memory"))
        return false;
    return info->unified_memory;
}

static void test_device_buffer(posenc_context *ctx, const posenc_device_info *info)
{
    static float initial[N], written[N], expect_untouched[N], result[N];
    fill(initial, 1);
    fill(written, 2);
    posenc_buffer_desc desc = {.size = sizeof initial, .initial_data = initial};
    posenc_buffer *buffer = NULL;
    CHECK_OK(posenc_buffer_create(ctx, &desc, &buffer));
    if (!buffer)
        return;

    void *const sentinel = (void *)(uintptr_t)0x5e5e5e50u;
    void *mapped = sentinel;
    posenc_status status = posenc_buffer_map(buffer, &mapped);
    if (!mappable(info)) {
        CHECK_STATUS(status, POSENC_UNSUPPORTED);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "buffer");
        CHECK(mapped == sentinel);
        /* Still an ordinary buffer: work and copies go on as before. */
        posenc_rope_desc rope = rope_on(buffer, 0);
        CHECK_OK(posenc_rope(ctx, &rope));
        CHECK_STATUS(posenc_buffer_unmap(buffer), POSENC_INVALID_ARGUMENT);
        posenc_buffer_destroy(buffer);
        return;
    }
    CHECK_OK(status);
    if (status != POSENC_OK) {
        fprintf(stderr, "  map: %s\n", posenc_context_last_error(ctx));
        posenc_buffer_destroy(buffer);
        return;
    }
    CHECK(mapped != sentinel && mapped != NULL);
    CHECK(memcmp(mapped, initial, sizeof initial) == 0);

    /* Mapped: work, copies and a second map are refused, and nothing changes. */
    memcpy(expect_untouched, mapped, sizeof expect_untouched);
    posenc_rope_desc rope = rope_on(buffer, 9);
    CHECK_STATUS(posenc_rope(ctx, &rope), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "q.buffer");
    posenc_event *event = NULL;
    CHECK_STATUS(posenc_rope_submit(ctx, &rope, &event), POSENC_INVALID_ARGUMENT);
    CHECK(event == NULL);
    CHECK_STATUS(posenc_buffer_upload(buffer, 0, written, 16), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "buffer");
    CHECK_STATUS(posenc_buffer_download(buffer, 0, result, 16), POSENC_INVALID_ARGUMENT);
    void *again = sentinel;
    CHECK_STATUS(posenc_buffer_map(buffer, &again), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "mapped");
    CHECK(again == sentinel);
    CHECK(memcmp(mapped, expect_untouched, sizeof expect_untouched) == 0);

    /* The host writes through the map; the device reads it; the host reads the result. */
    memcpy(mapped, written, sizeof written);
    CHECK_OK(posenc_buffer_unmap(buffer));
    CHECK_OK(posenc_rope(ctx, &rope));
    CHECK_OK(posenc_buffer_map(buffer, &mapped));
    memcpy(result, mapped, sizeof result);
    CHECK(ref_rope_rows_f32_ok(written, result, HEAD_DIM, TOKENS, HEADS, HEAD_DIM, 9));
    CHECK_OK(posenc_buffer_unmap(buffer));
    CHECK_STATUS(posenc_buffer_unmap(buffer), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "not mapped");

    /* Submitted work: the map waits for it. */
    CHECK_OK(posenc_buffer_upload(buffer, 0, initial, sizeof initial));
    rope = rope_on(buffer, 1000);
    CHECK_OK(posenc_rope_submit(ctx, &rope, NULL));
    CHECK_OK(posenc_buffer_map(buffer, &mapped));
    memcpy(result, mapped, sizeof result);
    CHECK(ref_rope_rows_f32_ok(initial, result, HEAD_DIM, TOKENS, HEADS, HEAD_DIM, 1000));
    CHECK_OK(posenc_buffer_unmap(buffer));
    CHECK_OK(posenc_buffer_download(buffer, 0, written, sizeof written));
    CHECK(memcmp(written, result, sizeof result) == 0);

    /* Destroyed while mapped: unmapped on the way (the leak checker watches). */
    CHECK_OK(posenc_buffer_map(buffer, &mapped));
    posenc_buffer_destroy(buffer);
}

static void test_wrapped_host_memory(posenc_context *ctx)
{
    static float memory[N], copy[N];
    fill(memory, 3);
    memcpy(copy, memory, sizeof copy);
    posenc_buffer_desc desc = {.size = sizeof memory, .host_memory = memory};
    posenc_buffer *buffer = NULL;
    CHECK_OK(posenc_buffer_create(ctx, &desc, &buffer));
    if (!buffer)
        return;
    void *mapped = NULL;
    CHECK_OK(posenc_buffer_map(buffer, &mapped));
    CHECK(mapped == (void *)memory);
    posenc_rope_desc rope = rope_on(buffer, 5);
    CHECK_STATUS(posenc_rope(ctx, &rope), POSENC_INVALID_ARGUMENT);
    CHECK(memcmp(memory, copy, sizeof copy) == 0);
    CHECK_OK(posenc_buffer_unmap(buffer));
    CHECK_OK(posenc_rope(ctx, &rope));
    CHECK(ref_rope_rows_f32_ok(copy, memory, HEAD_DIM, TOKENS, HEADS, HEAD_DIM, 5));
    posenc_buffer_destroy(buffer);
}

static void test_bad_arguments(posenc_context *ctx)
{
    void *mapped = NULL;
    CHECK_STATUS(posenc_buffer_map(NULL, &mapped), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "buffer");
    CHECK_STATUS(posenc_buffer_unmap(NULL), POSENC_INVALID_ARGUMENT);
    posenc_buffer_desc desc = {.size = 64};
    posenc_buffer *buffer = NULL;
    CHECK_OK(posenc_buffer_create(ctx, &desc, &buffer));
    if (!buffer)
        return;
    CHECK_STATUS(posenc_buffer_map(buffer, NULL), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "data");
    CHECK_STATUS(posenc_buffer_unmap(buffer), POSENC_INVALID_ARGUMENT);
    posenc_buffer_destroy(buffer);
}

static void run_device(posenc_context *ctx, const posenc_device_info *info)
{
    test_device_buffer(ctx, info);
    test_wrapped_host_memory(ctx);
    test_bad_arguments(ctx);
}

int main(void)
{
    test_for_each_device(run_device);
    return test_finish("test_buffer_map");
}
