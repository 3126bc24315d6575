/* SPDX-License-Identifier: MIT */
/* Buffers: creation and its errors, uploads and downloads with their bounds, initial data,
 * wrapped host memory, ops on buffer views, and the buffers' lifetime (context destroy, many
 * create/destroy cycles). */
#include "test_common.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TWO_PI 6.283185307179586476925287
/* Values are in [-1, 1] and positions below 1000: the library promises 4.8e-7 relative to the
 * rotated pair, so 1e-5 only catches real mistakes (a wrong angle or element). */
#define TOLERANCE 1e-5

static void fill_random(void *data, size_t size, uint64_t seed)
{
    test_rng rng = {seed * 0x9e3779b97f4a7c15ull + 3};
    unsigned char *bytes = data;
    for (size_t i = 0; i < size; i++)
        bytes[i] = (unsigned char)test_rng_u32(&rng);
}

static void fill_floats(float *data, size_t n, uint64_t seed)
{
    test_rng rng = {seed * 0x9e3779b97f4a7c15ull + 5};
    for (size_t i = 0; i < n; i++)
        data[i] = (float)test_rng_uniform(&rng, -1.0, 1.0);
}

/* NeoX RoPE over rows of head_dim f32 values, row r at position offset + r / heads. */
static void rope_reference(const float *in, float *out, int rows, int heads, int head_dim,
                           int32_t offset)
{
    for (int r = 0; r < rows; r++) {
        const float *x = in + (size_t)r * head_dim;
        float *y = out + (size_t)r * head_dim;
        double p = (double)offset + r / heads;
        for (int j = 0; j < head_dim / 2; j++) {
            double angle = fmod(p * pow(10000.0, -2.0 * j / head_dim), TWO_PI);
            double a = x[j], b = x[j + head_dim / 2];
            y[j] = (float)(a * cos(angle) - b * sin(angle));
            y[j + head_dim / 2] = (float)(a * sin(angle) + b * cos(angle));
        }
    }
}

static int close_to(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - (double)b[i]) <= TOLERANCE))
            return 0;
    return 1;
}

static posenc_buffer *make_buffer(posenc_context *ctx, uint64_t size, void *host_memory,
                                  const void *initial_data)
{
    posenc_buffer_desc desc = {.size = size, .host_memory = host_memory,
                               .initial_data = initial_data};
    posenc_buffer *buffer = NULL;
    posenc_status status = posenc_buffer_create(ctx, &desc, &buffer);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "buffer of %llu bytes: %s: %s\n", (unsigned long long)size,
                posenc_status_name(status), posenc_context_last_error(ctx));
        return NULL;
    }
    CHECK(buffer != NULL);
    return buffer;
}

/* ------------------------------------------------------------------------------------------ */

static void test_create_errors(posenc_context *ctx, const posenc_device_info *info)
{
    posenc_buffer *const sentinel = (posenc_buffer *)(uintptr_t)0x5e5e5e50u;
    posenc_buffer *buffer = sentinel;

    posenc_buffer_desc desc = {.size = 0};
    CHECK_STATUS(posenc_buffer_create(ctx, &desc, &buffer), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "size");
    CHECK(buffer == sentinel);

    CHECK_STATUS(posenc_buffer_create(ctx, NULL, &buffer), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "desc");
    CHECK(buffer == sentinel);

    /* Larger than the device can hold: refused before any allocation is tried. */
    uint64_t too_big[2] = {UINT64_MAX, info->max_buffer_bytes + 1};
    for (int i = 0; i < 2; i++) {
        if (too_big[i] == 0)
            continue;
        desc.size = too_big[i];
        posenc_status status = posenc_buffer_create(ctx, &desc, &buffer);
        CHECK(status == POSENC_OUT_OF_DEVICE_MEMORY || status == POSENC_OUT_OF_MEMORY ||
              status == POSENC_INVALID_ARGUMENT || status == POSENC_UNSUPPORTED);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "size");
        CHECK(buffer == sentinel);
        if (buffer != sentinel && status == POSENC_OK)
            posenc_buffer_destroy(buffer);
        buffer = sentinel;
    }

    posenc_buffer_destroy(NULL);
    CHECK(posenc_buffer_size(NULL) == 0);
}

static void test_round_trips(posenc_context *ctx)
{
    const uint64_t sizes[] = {1, 3, 4, 1000, 65536 + 3};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const uint64_t size = sizes[s];
        unsigned char *data = malloc(size), *back = malloc(size), *initial = malloc(size);
        CHECK(data && back && initial);
        if (!data || !back || !initial) {
            free(data), free(back), free(initial);
            continue;
        }
        fill_random(initial, size, s);
        posenc_buffer *buffer = make_buffer(ctx, size, NULL, initial);
        if (!buffer) {
            free(data), free(back), free(initial);
            continue;
        }
        CHECK(posenc_buffer_size(buffer) == size);

        /* initial_data arrives. */
        memset(back, 0xa5, size);
        CHECK_OK(posenc_buffer_download(buffer, 0, back, size));
        CHECK(memcmp(back, initial, size) == 0);

        /* Whole buffer. */
        fill_random(data, size, 100 + s);
        CHECK_OK(posenc_buffer_upload(buffer, 0, data, size));
        memset(back, 0xa5, size);
        CHECK_OK(posenc_buffer_download(buffer, 0, back, size));
        CHECK(memcmp(back, data, size) == 0);

        /* Pieces at odd offsets and sizes: bytes outside each piece keep their values. */
        if (size >= 24) {
            unsigned char piece[17];
            fill_random(piece, sizeof piece, 200 + s);
            CHECK_OK(posenc_buffer_upload(buffer, 3, piece, sizeof piece));
            memcpy(data + 3, piece, sizeof piece);
            memset(back, 0xa5, size);
            CHECK_OK(posenc_buffer_download(buffer, 0, back, size));
            CHECK(memcmp(back, data, size) == 0);
            unsigned char part[7];
            CHECK_OK(posenc_buffer_download(buffer, 5, part, sizeof part));
            CHECK(memcmp(part, data + 5, sizeof part) == 0);
            /* The last byte. */
            unsigned char last = (unsigned char)~data[size - 1];
            CHECK_OK(posenc_buffer_upload(buffer, size - 1, &last, 1));
            unsigned char last_back = 0;
            CHECK_OK(posenc_buffer_download(buffer, size - 1, &last_back, 1));
            CHECK(last_back == last);
            data[size - 1] = last;
        }

        /* Nothing to copy is fine anywhere inside the buffer, the end included. */
        CHECK_OK(posenc_buffer_upload(buffer, size, data, 0));
        CHECK_OK(posenc_buffer_download(buffer, 0, back, 0));

        /* Past the end: refused, the destination untouched, the buffer unchanged. */
        const struct {
            uint64_t offset, size;
        } bad[] = {
            {0, size + 1},
            {size, 1},
            {size - 1, 2},
            {size + 1, 0},
            {UINT64_MAX, 1},
            {UINT64_MAX - 1, 4}, /* offset + size wraps around */
            {1, UINT64_MAX},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            /* The byte count is never used to touch memory when the range is refused, so a
             * small destination suffices for the huge counts. */
            unsigned char guard[8];
            memset(guard, 0xa5, sizeof guard);
            unsigned char *dst = bad[i].size <= size ? back : guard;
            if (dst == back)
                memset(back, 0xa5, size);
            CHECK_STATUS(posenc_buffer_download(buffer, bad[i].offset, dst, bad[i].size),
                         POSENC_OUT_OF_BOUNDS);
            CHECK_MESSAGE(posenc_context_last_error(ctx), "offset|size");
            if (dst == back) {
                for (uint64_t b = 0; b < size; b++)
                    if (back[b] != 0xa5) {
                        CHECK(!"failed download wrote into the destination");
                        break;
                    }
            } else {
                for (size_t b = 0; b < sizeof guard; b++)
                    CHECK(guard[b] == 0xa5);
            }
            const unsigned char *src = bad[i].size <= size ? data : guard;
            CHECK_STATUS(posenc_buffer_upload(buffer, bad[i].offset, src, bad[i].size),
                         POSENC_OUT_OF_BOUNDS);
            CHECK_MESSAGE(posenc_context_last_error(ctx), "offset|size");
        }
        memset(back, 0xa5, size);
        CHECK_OK(posenc_buffer_download(buffer, 0, back, size));
        CHECK(memcmp(back, data, size) == 0);

        posenc_buffer_destroy(buffer);
        free(data), free(back), free(initial);
    }
}

/* A buffer wrapping caller memory. */
static void test_host_memory(posenc_context *ctx, const posenc_device_info *info)
{
    enum { TOKENS = 4, HEADS = 2, HEAD_DIM = 16, N = TOKENS * HEADS * HEAD_DIM };
    static float host[N], input[N], expect[N], back[N];
    fill_floats(input, N, 7);
    memcpy(host, input, sizeof host);
    rope_reference(input, expect, TOKENS * HEADS, HEADS, HEAD_DIM, 0);

    posenc_buffer *buffer = make_buffer(ctx, sizeof host, host, NULL);
    if (!buffer)
        return;
    CHECK(posenc_buffer_size(buffer) == sizeof host);
    /* Wrapping does not change the memory. */
    CHECK(memcmp(host, input, sizeof host) == 0);
    CHECK_OK(posenc_buffer_download(buffer, 0, back, sizeof back));
    CHECK(memcmp(back, input, sizeof back) == 0);

    posenc_rope_desc rope = {0};
    rope.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3,
                                     (const int64_t[]){TOKENS, HEADS, HEAD_DIM});
    CHECK_OK(posenc_rope(ctx, &rope));
    memset(back, 0, sizeof back);
    CHECK_OK(posenc_buffer_download(buffer, 0, back, sizeof back));
    CHECK(close_to(back, expect, N));
    /* The CPU path (and any unified-memory device) works in the caller's memory itself. */
    if (info->native_cpu || info->unified_memory) {
        CHECK(close_to(host, expect, N));
        CHECK(memcmp(host, back, sizeof host) == 0);
    } else if (memcmp(host, back, sizeof host) != 0) {
        printf("  note: %s leaves wrapped host memory stale after an op\n", info->name);
    }

    if (info->native_cpu) {
        /* Uploads land in the caller's memory, and its writes are what downloads see. */
        float v = 1234.5f;
        CHECK_OK(posenc_buffer_upload(buffer, 4 * sizeof(float), &v, sizeof v));
        CHECK(host[4] == v);
        host[5] = -7.25f;
        float w = 0;
        CHECK_OK(posenc_buffer_download(buffer, 5 * sizeof(float), &w, sizeof w));
        CHECK(w == -7.25f);
    }

    /* Destroying the buffer leaves the borrowed memory to its owner (ASan would see a free). */
    posenc_buffer_destroy(buffer);
    host[0] = 1.0f;
    CHECK(host[0] == 1.0f);

    /* initial_data into wrapped memory: copied into it, or refused as contradictory. */
    static float initial[N];
    fill_floats(initial, N, 8);
    memcpy(host, input, sizeof host);
    posenc_buffer_desc desc = {.size = sizeof host, .host_memory = host, .initial_data = initial};
    posenc_buffer *both = NULL;
    posenc_status status = posenc_buffer_create(ctx, &desc, &both);
    CHECK(status == POSENC_OK || status == POSENC_INVALID_ARGUMENT);
    if (status == POSENC_OK) {
        CHECK_OK(posenc_buffer_download(both, 0, back, sizeof back));
        CHECK(memcmp(back, initial, sizeof back) == 0);
        if (info->native_cpu)
            CHECK(memcmp(host, initial, sizeof host) == 0);
        posenc_buffer_destroy(both);
    } else {
        CHECK(both == NULL);
        CHECK(memcmp(host, input, sizeof host) == 0);
    }
}

/* Wrapped memory is the caller's memory: a host tensor or another buffer over the same bytes
 * aliases it, and overlapping an output with it is refused as for any two views. */
static void test_wrapped_aliasing(posenc_context *ctx)
{
    enum { TOKENS = 4, HEADS = 2, HEAD_DIM = 8, N = TOKENS * HEADS * HEAD_DIM };
    static float mem[2 * N], before[2 * N], expect[N];
    fill_floats(mem, 2 * N, 21);
    memcpy(before, mem, sizeof mem);
    const int64_t shape[3] = {TOKENS, HEADS, HEAD_DIM};
    posenc_buffer *first = make_buffer(ctx, sizeof mem, mem, NULL);
    posenc_buffer *second = make_buffer(ctx, sizeof mem, mem, NULL);
    if (!first || !second) {
        posenc_buffer_destroy(first);
        posenc_buffer_destroy(second);
        return;
    }
    posenc_rope_desc rope = {0};
    rope.q = posenc_tensor_of_buffer(first, POSENC_DTYPE_F32, 3, shape);
    rope.q_out = posenc_tensor_of_host(mem + 8, POSENC_DTYPE_F32, 3, shape);
    CHECK_STATUS(posenc_rope(ctx, &rope), POSENC_INVALID_LAYOUT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "q_out|q");
    CHECK(memcmp(mem, before, sizeof mem) == 0);

    rope.q_out = posenc_tensor_of_buffer(second, POSENC_DTYPE_F32, 3, shape);
    rope.q_out.offset = 32;
    CHECK_STATUS(posenc_rope(ctx, &rope), POSENC_INVALID_LAYOUT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "q_out|q");
    CHECK(memcmp(mem, before, sizeof mem) == 0);

    /* Disjoint halves of the same memory through two buffers are fine. */
    rope.q_out.offset = N * sizeof(float);
    CHECK_OK(posenc_rope(ctx, &rope));
    rope_reference(before, expect, TOKENS * HEADS, HEADS, HEAD_DIM, 0);
    float out[N];
    CHECK_OK(posenc_buffer_download(second, N * sizeof(float), out, sizeof out));
    CHECK(close_to(out, expect, N));
    CHECK_OK(posenc_buffer_download(first, 0, out, sizeof out));
    CHECK(memcmp(out, before, sizeof out) == 0);

    posenc_buffer_destroy(first);
    posenc_buffer_destroy(second);
}

/* Ops on views inside buffers: only the view's bytes change. */
static void test_views(posenc_context *ctx)
{
    enum { TOKENS = 4, HEADS = 2, HEAD_DIM = 8, N = TOKENS * HEADS * HEAD_DIM };
    enum { SIZE = 4096, AT = 256 };
    static unsigned char before[SIZE], after[SIZE];
    static float input[N], expect[N], out[N];
    fill_random(before, SIZE, 11);
    fill_floats(input, N, 12);
    memcpy(before + AT, input, sizeof input);
    rope_reference(input, expect, TOKENS * HEADS, HEADS, HEAD_DIM, 3);
    const int64_t shape[3] = {TOKENS, HEADS, HEAD_DIM};

    posenc_buffer *buffer = make_buffer(ctx, SIZE, NULL, before);
    if (!buffer)
        return;
    posenc_rope_desc rope = {0};
    rope.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, shape);
    rope.q.offset = AT;
    rope.position_offset = 3;
    CHECK_OK(posenc_rope(ctx, &rope));
    CHECK_OK(posenc_buffer_download(buffer, 0, after, SIZE));
    CHECK(memcmp(after, before, AT) == 0);
    CHECK(memcmp(after + AT + sizeof input, before + AT + sizeof input,
                 SIZE - AT - sizeof input) == 0);
    memcpy(out, after + AT, sizeof out);
    CHECK(close_to(out, expect, N));

    /* Buffer in, host out: the buffer is only read. */
    CHECK_OK(posenc_buffer_upload(buffer, 0, before, SIZE));
    memset(out, 0, sizeof out);
    rope.q_out = posenc_tensor_of_host(out, POSENC_DTYPE_F32, 3, shape);
    CHECK_OK(posenc_rope(ctx, &rope));
    CHECK(close_to(out, expect, N));
    CHECK_OK(posenc_buffer_download(buffer, 0, after, SIZE));
    CHECK(memcmp(after, before, SIZE) == 0);

    /* Host in, buffer out. */
    rope.q = posenc_tensor_of_host(input, POSENC_DTYPE_F32, 3, shape);
    rope.q_out = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, shape);
    rope.q_out.offset = 2 * AT;
    CHECK_OK(posenc_rope(ctx, &rope));
    CHECK_OK(posenc_buffer_download(buffer, 0, after, SIZE));
    CHECK(memcmp(after, before, 2 * AT) == 0);
    CHECK(memcmp(after + 2 * AT + sizeof input, before + 2 * AT + sizeof input,
                 SIZE - 2 * AT - sizeof input) == 0);
    memcpy(out, after + 2 * AT, sizeof out);
    CHECK(close_to(out, expect, N));

    /* A sinusoidal table into a buffer view; positions from a buffer too. */
    enum { ROWS = 3, D_MODEL = 6 };
    const int32_t positions[ROWS] = {0, 1, 40};
    posenc_buffer *pos_buffer = make_buffer(ctx, sizeof positions, NULL, positions);
    if (pos_buffer) {
        CHECK_OK(posenc_buffer_upload(buffer, 0, before, SIZE));
        posenc_sinusoidal_desc sin_desc = {0};
        sin_desc.out = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2,
                                               (const int64_t[]){ROWS, D_MODEL});
        sin_desc.out.offset = 4;
        sin_desc.positions = posenc_tensor_of_buffer(pos_buffer, POSENC_DTYPE_I32, 1,
                                                     (const int64_t[]){ROWS});
        CHECK_OK(posenc_sinusoidal(ctx, &sin_desc));
        CHECK_OK(posenc_buffer_download(buffer, 0, after, SIZE));
        CHECK(memcmp(after, before, 4) == 0);
        CHECK(memcmp(after + 4 + ROWS * D_MODEL * 4, before + 4 + ROWS * D_MODEL * 4,
                     SIZE - 4 - ROWS * D_MODEL * 4) == 0);
        float table[ROWS * D_MODEL];
        memcpy(table, after + 4, sizeof table);
        for (int r = 0; r < ROWS; r++) {
            for (int i = 0; i < D_MODEL / 2; i++) {
                double angle = positions[r] * pow(10000.0, -(double)i / (D_MODEL / 2));
                CHECK(fabs(table[r * D_MODEL + 2 * i] - sin(angle)) <= TOLERANCE);
                CHECK(fabs(table[r * D_MODEL + 2 * i + 1] - cos(angle)) <= TOLERANCE);
            }
        }
        posenc_buffer_destroy(pos_buffer);
    }
    posenc_buffer_destroy(buffer);
}

/* Buffers still alive when their context goes are freed with it (the sanitize preset's leak
 * checker watches this). */
static void test_context_owns_buffers(const posenc_device_info *info)
{
    uint32_t index = test_device_index(info);
    CHECK(index != UINT32_MAX);
    static float wrapped[256];
    for (int round = 0; round < 3; round++) {
        posenc_context *ctx = test_context_for_device(index);
        CHECK(ctx != NULL);
        if (!ctx)
            return;
        unsigned char data[300];
        fill_random(data, sizeof data, 31);
        make_buffer(ctx, 64, NULL, NULL);
        posenc_buffer *b = make_buffer(ctx, sizeof data, NULL, data);
        make_buffer(ctx, sizeof wrapped, wrapped, NULL);
        if (round == 1 && b)
            posenc_buffer_destroy(b); /* one destroyed early, the rest left to the context */
        if (round == 2) {
            /* used by an op, then abandoned */
            posenc_buffer *q = make_buffer(ctx, 4 * 8 * 4, NULL, NULL);
            if (q) {
                posenc_rope_desc rope = {0};
                rope.q = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 2,
                                                 (const int64_t[]){4, 8});
                CHECK_OK(posenc_rope(ctx, &rope));
            }
        }
        posenc_context_destroy(ctx);
    }
    wrapped[0] = 2.0f; /* the borrowed memory is still the caller's */
    CHECK(wrapped[0] == 2.0f);
}

static void test_many_cycles(posenc_context *ctx, const posenc_device_info *info)
{
    const int cycles = info->native_cpu ? 2000 : 200;
    unsigned char data[512], back[512];
    test_rng rng = {77};
    for (int i = 0; i < cycles; i++) {
        uint64_t size = 1 + test_rng_u32(&rng) % sizeof data;
        posenc_buffer_desc desc = {.size = size};
        posenc_buffer *buffer = NULL;
        posenc_status status = posenc_buffer_create(ctx, &desc, &buffer);
        if (status != POSENC_OK) {
            test_failures++;
            fprintf(stderr, "cycle %d: %s: %s\n", i, posenc_status_name(status),
                    posenc_context_last_error(ctx));
            break;
        }
        if (i % 16 == 0) {
            fill_random(data, (size_t)size, (uint64_t)i);
            CHECK_OK(posenc_buffer_upload(buffer, 0, data, size));
            CHECK_OK(posenc_buffer_download(buffer, 0, back, size));
            CHECK(memcmp(back, data, (size_t)size) == 0);
        }
        posenc_buffer_destroy(buffer);
    }
    /* Many alive at once, freed in a different order than created. */
    posenc_buffer *alive[64] = {0};
    for (int i = 0; i < 64; i++) {
        posenc_buffer_desc desc = {.size = (uint64_t)(i + 1) * 8};
        CHECK_OK(posenc_buffer_create(ctx, &desc, &alive[i]));
    }
    for (int i = 0; i < 64; i += 2)
        posenc_buffer_destroy(alive[i]);
    for (int i = 63; i > 0; i -= 2) {
        CHECK(posenc_buffer_size(alive[i]) == (uint64_t)(i + 1) * 8);
        posenc_buffer_destroy(alive[i]);
    }
}

static void run_device(posenc_context *ctx, const posenc_device_info *info)
{
    test_create_errors(ctx, info);
    test_round_trips(ctx);
    test_host_memory(ctx, info);
    test_wrapped_aliasing(ctx);
    test_views(ctx);
    test_context_owns_buffers(info);
    test_many_cycles(ctx, info);
}

int main(void)
{
    test_for_each_device(run_device);
    return test_finish("test_buffers");
}
