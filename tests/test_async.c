/* SPDX-License-Identifier: MIT */
/* posenc_rope_submit / posenc_sinusoidal_submit and events, on every device: submitted work
 * gives the same bits as the synchronous call, runs in submission order even when each submit
 * uses a different frequency table, a refused submit writes nothing, and destroying a buffer
 * waits for the submitted work that uses it. */
#include "test_common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { TOKENS = 37, HEADS = 3, HEAD_DIM = 64, ROWS = 29, D_MODEL = 48, SUBMITS = 6 };

static void fill_random(float *values, size_t count, uint64_t seed)
{
    test_rng rng = {seed};
    for (size_t i = 0; i < count; i++)
        values[i] = (float)test_rng_uniform(&rng, -2.0, 2.0);
}

static posenc_rope_desc rope_desc(posenc_tensor q, int submit)
{
    posenc_rope_desc desc = {0};
    desc.q = q;
    desc.position_offset = 1000 * submit;
    desc.theta = 10000.0 + 500.0 * submit; /* a different frequency table for every submit */
    return desc;
}

/* The reference of a submit: the same descriptor run synchronously on host memory. */
static void rope_expected(posenc_context *ctx, const float *input, float *expected, int submit)
{
    int64_t shape[3] = {TOKENS, HEADS, HEAD_DIM};
    memcpy(expected, input, sizeof(float) * TOKENS * HEADS * HEAD_DIM);
    posenc_rope_desc desc =
        rope_desc(posenc_tensor_of_host(expected, POSENC_DTYPE_F32, 3, shape), submit);
    CHECK_OK(posenc_rope(ctx, &desc));
}

static void test_rope_submits(posenc_context *ctx)
{
    const size_t count = (size_t)TOKENS * HEADS * HEAD_DIM, bytes = count * sizeof(float);
    int64_t shape[3] = {TOKENS, HEADS, HEAD_DIM};
    float *input = malloc(bytes), *result = malloc(bytes), *expected = malloc(bytes);
    posenc_buffer *buffers[SUBMITS] = {0};
    posenc_event *events[SUBMITS] = {0};
    CHECK(input && result && expected);
    if (!input || !result || !expected)
        goto done;
    fill_random(input, count, 11);

    /* Several submits in flight at once, each with its own frequency table: a backend that
     * kept only the context's latest table would rotate the early ones wrongly. */
    for (int i = 0; i < SUBMITS; i++) {
        posenc_buffer_desc buffer_desc = {.size = bytes, .initial_data = input};
        CHECK_OK(posenc_buffer_create(ctx, &buffer_desc, &buffers[i]));
        if (!buffers[i])
            goto done;
        posenc_rope_desc desc =
            rope_desc(posenc_tensor_of_buffer(buffers[i], POSENC_DTYPE_F32, 3, shape), i);
        /* Every other submit without an event: finish still waits for it. */
        CHECK_OK(posenc_rope_submit(ctx, &desc, i % 2 ? NULL : &events[i]));
    }
    for (int i = 0; i < SUBMITS; i += 2) {
        posenc_status polled = posenc_event_wait(events[i], 0);
        CHECK(polled == POSENC_OK || polled == POSENC_TIMEOUT);
        CHECK_OK(posenc_event_wait(events[i], UINT64_MAX));
        CHECK_OK(posenc_event_wait(events[i], 0)); /* waiting again is fine */
    }
    CHECK_OK(posenc_context_finish(ctx));
    for (int i = 0; i < SUBMITS; i++) {
        rope_expected(ctx, input, expected, i);
        CHECK_OK(posenc_buffer_download(buffers[i], 0, result, bytes));
        if (memcmp(result, expected, bytes) != 0) {
            fprintf(stderr, "  submit %d differs from the synchronous call\n", i);
            test_failures++;
        }
    }

    /* More work on a buffer whose previous work may still be queued, and a download right
     * after: everything in submission order. Buffer 0 holds R(input); R, then R^-1 twice
     * brings it back to the input, within a few roundings (values are below 2 in magnitude). */
    posenc_rope_desc forward =
        rope_desc(posenc_tensor_of_buffer(buffers[0], POSENC_DTYPE_F32, 3, shape), 0);
    posenc_rope_desc backward = forward;
    backward.inverse = true;
    CHECK_OK(posenc_rope_submit(ctx, &forward, NULL));
    CHECK_OK(posenc_rope_submit(ctx, &backward, NULL));
    CHECK_OK(posenc_rope_submit(ctx, &backward, NULL));
    CHECK_OK(posenc_buffer_download(buffers[0], 0, result, bytes));
    float max_error = 0.0f;
    for (size_t i = 0; i < count; i++) {
        float error = result[i] > input[i] ? result[i] - input[i] : input[i] - result[i];
        max_error = error > max_error ? error : max_error;
    }
    if (!(max_error < 1e-5f)) {
        fprintf(stderr, "  forward, inverse, inverse: off the input by %g\n", max_error);
        test_failures++;
    }

done:
    for (int i = 0; i < SUBMITS; i++) {
        posenc_event_destroy(events[i]);
        posenc_buffer_destroy(buffers[i]);
    }
    free(input);
    free(result);
    free(expected);
}

static void test_sinusoidal_submit(posenc_context *ctx)
{
    const size_t bytes = sizeof(float) * ROWS * D_MODEL;
    int64_t shape[2] = {ROWS, D_MODEL};
    float *result = malloc(bytes), *expected = calloc(1, bytes);
    posenc_buffer *buffer = NULL;
    posenc_event *event = NULL;
    CHECK(result && expected);
    if (!result || !expected)
        goto done;
    posenc_buffer_desc buffer_desc = {.size = bytes};
    CHECK_OK(posenc_buffer_create(ctx, &buffer_desc, &buffer));
    if (!buffer)
        goto done;

    posenc_sinusoidal_desc desc = {0};
    desc.out = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2, shape);
    desc.position_offset = 123456;
    desc.layout = POSENC_SINUSOIDAL_SIN_COS;
    CHECK_OK(posenc_sinusoidal_submit(ctx, &desc, &event));
    CHECK_OK(posenc_event_wait(event, UINT64_MAX));
    CHECK_OK(posenc_buffer_download(buffer, 0, result, bytes));

    desc.out = posenc_tensor_of_host(expected, POSENC_DTYPE_F32, 2, shape);
    CHECK_OK(posenc_sinusoidal(ctx, &desc));
    CHECK(memcmp(result, expected, bytes) == 0);

done:
    posenc_event_destroy(event);
    posenc_buffer_destroy(buffer);
    free(result);
    free(expected);
}

/* Host views are refused by name, with nothing written and no event handed out. */
static void test_submit_errors(posenc_context *ctx)
{
    float host[4 * 8];
    for (int i = 0; i < 4 * 8; i++)
        host[i] = (float)i;
    int64_t shape[2] = {4, 8};
    posenc_event *event = (posenc_event *)&host; /* must stay untouched */
    posenc_rope_desc desc = {0};
    desc.q = posenc_tensor_of_host(host, POSENC_DTYPE_F32, 2, shape);
    CHECK_STATUS(posenc_rope_submit(ctx, &desc, &event), POSENC_INVALID_ARGUMENT);
    CHECK(strstr(posenc_context_last_error(ctx), "q.host") != NULL);
    CHECK(event == (posenc_event *)&host);
    for (int i = 0; i < 4 * 8; i++)
        CHECK(host[i] == (float)i);

    posenc_sinusoidal_desc table = {0};
    table.out = posenc_tensor_of_host(host, POSENC_DTYPE_F32, 2, shape);
    CHECK_STATUS(posenc_sinusoidal_submit(ctx, &table, &event), POSENC_INVALID_ARGUMENT);
    CHECK(strstr(posenc_context_last_error(ctx), "out.host") != NULL);
    CHECK(event == (posenc_event *)&host);
    for (int i = 0; i < 4 * 8; i++)
        CHECK(host[i] == (float)i);

    CHECK_STATUS(posenc_rope_submit(NULL, &desc, &event), POSENC_INVALID_ARGUMENT);
    CHECK_STATUS(posenc_event_wait(NULL, 0), POSENC_INVALID_ARGUMENT);
    CHECK_STATUS(posenc_context_finish(NULL), POSENC_INVALID_ARGUMENT);
    posenc_event_destroy(NULL);
}

/* posenc_buffer_destroy right after a submit that uses the buffer waits for that work: its event
 * is done when the destroy returns. The work is large enough to be still running then on the
 * software devices of CI (the output says whether it was); under AddressSanitizer, memory
 * freed under running work would also be reported as used after free. */
static void test_destroy_waits(posenc_context *ctx)
{
    enum { BIG_TOKENS = 1024, BIG_HEADS = 32, BIG_DIM = 128 }; /* 16 MiB of f32 */
    int64_t shape[3] = {BIG_TOKENS, BIG_HEADS, BIG_DIM};
    posenc_buffer *buffer = NULL;
    posenc_buffer_desc buffer_desc = {.size = sizeof(float) * BIG_TOKENS * BIG_HEADS * BIG_DIM};
    CHECK_OK(posenc_buffer_create(ctx, &buffer_desc, &buffer));
    if (!buffer)
        return;
    posenc_rope_desc desc = {0};
    desc.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, shape);
    posenc_event *event = NULL;
    CHECK_OK(posenc_rope_submit(ctx, &desc, &event));
    if (!event) {
        posenc_buffer_destroy(buffer);
        return;
    }
    posenc_status before = posenc_event_wait(event, 0);
    CHECK(before == POSENC_OK || before == POSENC_TIMEOUT);
    posenc_buffer_destroy(buffer);
    CHECK_STATUS(posenc_event_wait(event, 0), POSENC_OK);
    posenc_event_destroy(event);
    printf("    posenc_buffer_destroy after a submit: %s\n",
           before == POSENC_TIMEOUT ? "waited for the running work" : "the work had ended");
}

/* Events still alive when the context goes are freed with it (the leak checker watches). */
static void test_events_outlived(const posenc_device_info *info)
{
    uint32_t index = test_device_index(info);
    posenc_context *ctx = index != UINT32_MAX ? test_context_for_device(index) : NULL;
    if (!ctx)
        return;
    posenc_buffer *buffer = NULL;
    int64_t shape[2] = {16, 32};
    posenc_buffer_desc buffer_desc = {.size = sizeof(float) * 16 * 32};
    CHECK_OK(posenc_buffer_create(ctx, &buffer_desc, &buffer));
    posenc_event *event = NULL;
    posenc_rope_desc desc = {0};
    desc.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2, shape);
    CHECK_OK(posenc_rope_submit(ctx, &desc, &event));
    posenc_context_destroy(ctx); /* waits, then frees the buffer and the event */
}

static void run_device(posenc_context *ctx, const posenc_device_info *info)
{
    test_rope_submits(ctx);
    test_sinusoidal_submit(ctx);
    test_submit_errors(ctx);
    test_destroy_waits(ctx);
    test_events_outlived(info);
}

int main(void)
{
    test_for_each_device(run_device);
    return test_finish("test_async");
}
