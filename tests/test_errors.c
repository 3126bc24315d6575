/* SPDX-License-Identifier: MIT */
/* Error handling: every invalid input is rejected with its status and a message naming the bad
 * field, a failed call writes nothing, and valid calls keep working after failed ones. */
#include "test_common.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Host memory that every host tensor of these tests lives in. It is refilled with fresh values
 * before each case, so that after a failed call a byte-for-byte comparison shows nothing was
 * written. */
enum {
    ARENA_BYTES = 16384,
    Q_AT = 0,        /* q: [1, 4, 2, 8] f32, 256 bytes */
    K_AT = 1024,     /* k: [1, 4, 1, 8] f32, 128 bytes */
    Q_OUT_AT = 2048, /* q_out, and the sinusoidal out [4, 8] */
    K_OUT_AT = 3072, /* k_out, and the sinusoidal x */
    POS_AT = 4096,   /* i32 positions [8] */
    POSF_AT = 4352,  /* f32 positions [8] */
    MM_POS_AT = 5120, /* multimodal positions: i32 [4 tokens, 3] or [4, 2], 48 bytes */
    QKV_AT = 8192,   /* fused qkv [4 tokens, 3, 2 heads, 8] f32, 384 bytes */
};
enum { BATCH = 1, TOKENS = 4, Q_HEADS = 2, K_HEADS = 1, HEAD_DIM = 8, D_MODEL = 8 };

static _Alignas(16) unsigned char arena[ARENA_BYTES];
static unsigned char arena_before[ARENA_BYTES];
static const int32_t test_positions[8] = {5, 0, 7, 2, 100000, -3, 11, 12};

static void fill_arena(uint64_t seed)
{
    test_rng rng = {seed * 0x9e3779b97f4a7c15ull + 1};
    for (size_t i = 0; i < ARENA_BYTES / sizeof(float); i++) {
        float v = (float)test_rng_uniform(&rng, -1.0, 1.0);
        memcpy(arena + i * sizeof v, &v, sizeof v);
    }
    memcpy(arena + POS_AT, test_positions, sizeof test_positions);
    for (int i = 0; i < 8; i++) {
        float p = (float)test_positions[i] + 0.25f;
        memcpy(arena + POSF_AT + i * sizeof p, &p, sizeof p);
    }
}

static float arena_f32(size_t at, size_t index)
{
    float v;
    memcpy(&v, arena + at + index * sizeof v, sizeof v);
    return v;
}

static float before_f32(size_t at, size_t index)
{
    float v;
    memcpy(&v, arena_before + at + index * sizeof v, sizeof v);
    return v;
}

#define SHAPE_ARGS(...)                                                                          \
    (uint32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                        \
        (const int64_t[]){__VA_ARGS__}
#define HOST_VIEW(at, dtype, ...) \
    posenc_tensor_of_host(arena + (at), (dtype), SHAPE_ARGS(__VA_ARGS__))
#define ABSENT ((posenc_tensor){0})

/* A copy of every buffer a descriptor's tensors use, to show a failed call left them alone. */
typedef struct buffer_snapshot {
    posenc_buffer *buffer[5];
    unsigned char *bytes[5];
    int count;
} buffer_snapshot;

static void snapshot_take(buffer_snapshot *s, const posenc_tensor *const *tensors, int n)
{
    s->count = 0;
    for (int i = 0; i < n; i++) {
        posenc_buffer *b = tensors[i]->buffer;
        uint64_t size = posenc_buffer_size(b);
        if (!b || !size)
            continue;
        s->buffer[s->count] = b;
        s->bytes[s->count] = malloc((size_t)size);
        CHECK(s->bytes[s->count] != NULL);
        if (!s->bytes[s->count])
            continue;
        CHECK_OK(posenc_buffer_download(b, 0, s->bytes[s->count], size));
        s->count++;
    }
}

static int snapshot_unchanged(buffer_snapshot *s)
{
    int same = 1;
    for (int i = 0; i < s->count; i++) {
        uint64_t size = posenc_buffer_size(s->buffer[i]);
        unsigned char *now = malloc((size_t)size);
        CHECK(now != NULL);
        if (now) {
            CHECK_OK(posenc_buffer_download(s->buffer[i], 0, now, size));
            if (memcmp(now, s->bytes[i], (size_t)size) != 0)
                same = 0;
            free(now);
        }
        free(s->bytes[i]);
    }
    s->count = 0;
    return same;
}

/* Checks one call's outcome: the status is `want` or `also` (pass `want` twice when only one
 * is right); on failure the message names `fields` and the arena and buffers are untouched. */
static void check_outcome(posenc_status got, posenc_status want, posenc_status also,
                          const char *message, const char *fields, buffer_snapshot *snapshot,
                          int line)
{
    if (got != want && got != also) {
        test_failures++;
        fprintf(stderr, "%s:%d: returned %s, expected %s (message: \"%s\")\n", __FILE__, line,
                posenc_status_name(got), posenc_status_name(want), message ? message : "(null)");
    }
    if (got != POSENC_OK) {
        test_check_message(message, fields, __FILE__, line);
        if (memcmp(arena, arena_before, ARENA_BYTES) != 0) {
            test_failures++;
            fprintf(stderr, "%s:%d: failed call wrote into host memory\n", __FILE__, line);
        }
        if (!snapshot_unchanged(snapshot)) {
            test_failures++;
            fprintf(stderr, "%s:%d: failed call wrote into a buffer\n", __FILE__, line);
        }
    } else {
        snapshot_unchanged(snapshot);
    }
}

static posenc_status rope_checked(posenc_context *ctx, const posenc_rope_desc *desc,
                                  posenc_status want, posenc_status also, const char *fields,
                                  int line)
{
    buffer_snapshot snapshot = {0};
    if (desc) {
        const posenc_tensor *tensors[] = {&desc->q, &desc->q_out, &desc->k, &desc->k_out,
                                          &desc->positions};
        snapshot_take(&snapshot, tensors, 5);
    }
    memcpy(arena_before, arena, ARENA_BYTES);
    posenc_status got = posenc_rope(ctx, desc);
    const char *message = ctx ? posenc_context_last_error(ctx) : posenc_thread_last_error();
    check_outcome(got, want, also, message, fields, &snapshot, line);
    return got;
}
#define EXPECT_ROPE(ctx, desc, want, fields) \
    rope_checked((ctx), (desc), (want), (want), (fields), __LINE__)
#define EXPECT_ROPE2(ctx, desc, want, also, fields) \
    rope_checked((ctx), (desc), (want), (also), (fields), __LINE__)

static posenc_status sinusoidal_checked(posenc_context *ctx, const posenc_sinusoidal_desc *desc,
                                        posenc_status want, posenc_status also,
                                        const char *fields, int line)
{
    buffer_snapshot snapshot = {0};
    if (desc) {
        const posenc_tensor *tensors[] = {&desc->out, &desc->x, &desc->positions};
        snapshot_take(&snapshot, tensors, 3);
    }
    memcpy(arena_before, arena, ARENA_BYTES);
    posenc_status got = posenc_sinusoidal(ctx, desc);
    const char *message = ctx ? posenc_context_last_error(ctx) : posenc_thread_last_error();
    check_outcome(got, want, also, message, fields, &snapshot, line);
    return got;
}
#define EXPECT_SINUSOIDAL(ctx, desc, want, fields) \
    sinusoidal_checked((ctx), (desc), (want), (want), (fields), __LINE__)

/* ------------------------------------------------------------------------------------------ */
/* Float64 references for the few successful calls checked here (the op tests cover the rest). */

#define TWO_PI 6.283185307179586476925287

/* NeoX RoPE of one packed [tokens, heads, head_dim] f32 tensor. `positions` NULL: offset + t. */
static void rope_reference(const unsigned char *in, unsigned char *out, int tokens, int heads,
                           int head_dim, int rotary_dim, double theta, const double *inv_freq,
                           const int32_t *positions, int32_t offset)
{
    for (int t = 0; t < tokens; t++) {
        double p = positions ? positions[t] : (double)offset + t;
        for (int h = 0; h < heads; h++) {
            const unsigned char *x = in + ((size_t)t * heads + h) * head_dim * sizeof(float);
            unsigned char *y = out + ((size_t)t * heads + h) * head_dim * sizeof(float);
            float xv[64], yv[64];
            memcpy(xv, x, head_dim * sizeof(float));
            memcpy(yv, xv, head_dim * sizeof(float));
            for (int j = 0; j < rotary_dim / 2; j++) {
                double f = inv_freq ? inv_freq[j] : pow(theta, -2.0 * j / rotary_dim);
                double a = xv[j], b = xv[j + rotary_dim / 2];
                double angle = fmod(p * f, TWO_PI);
                yv[j] = (float)(a * cos(angle) - b * sin(angle));
                yv[j + rotary_dim / 2] = (float)(a * sin(angle) + b * cos(angle));
            }
            memcpy(y, yv, head_dim * sizeof(float));
        }
    }
}

/* Largest |a - b| over `n` f32 values. Values here are in [-1.5, 1.5]; the library promises a
 * relative error of 4.8e-7 of the rotated pair, and fmod(p * f) in float64 loses about 1e-11 at
 * position 1e5, so 1e-5 only catches real mistakes (a wrong angle, a wrong element). */
static double max_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        float x, y;
        memcpy(&x, a + i * sizeof x, sizeof x);
        memcpy(&y, b + i * sizeof y, sizeof y);
        double d = fabs((double)x - (double)y);
        if (!(d <= worst))
            worst = d; /* NaN propagates */
    }
    return worst;
}
#define TOLERANCE 1e-5

static posenc_rope_desc base_rope(void)
{
    posenc_rope_desc d = {0};
    d.q = HOST_VIEW(Q_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    d.k = HOST_VIEW(K_AT, POSENC_DTYPE_F32, BATCH, TOKENS, K_HEADS, HEAD_DIM);
    return d;
}

static posenc_sinusoidal_desc base_sinusoidal(void)
{
    posenc_sinusoidal_desc d = {0};
    d.out = HOST_VIEW(Q_OUT_AT, POSENC_DTYPE_F32, TOKENS, D_MODEL);
    return d;
}

/* The base rope (q and k in place) succeeds and is right. */
static void check_rope_works(posenc_context *ctx, uint64_t seed, int line)
{
    fill_arena(seed);
    memcpy(arena_before, arena, ARENA_BYTES);
    posenc_rope_desc d = base_rope();
    posenc_status st = posenc_rope(ctx, &d);
    if (st != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "%s:%d: valid rope failed: %s: %s\n", __FILE__, line,
                posenc_status_name(st), posenc_context_last_error(ctx));
        return;
    }
    static unsigned char expect[ARENA_BYTES];
    rope_reference(arena_before + Q_AT, expect + Q_AT, TOKENS, Q_HEADS, HEAD_DIM, HEAD_DIM, 10000,
                   NULL, NULL, 0);
    rope_reference(arena_before + K_AT, expect + K_AT, TOKENS, K_HEADS, HEAD_DIM, HEAD_DIM, 10000,
                   NULL, NULL, 0);
    double dq = max_diff(arena + Q_AT, expect + Q_AT, TOKENS * Q_HEADS * HEAD_DIM);
    double dk = max_diff(arena + K_AT, expect + K_AT, TOKENS * K_HEADS * HEAD_DIM);
    if (!(dq <= TOLERANCE && dk <= TOLERANCE)) {
        test_failures++;
        fprintf(stderr, "%s:%d: valid rope wrong: q off by %g, k by %g\n", __FILE__, line, dq, dk);
    }
}

/* The base sinusoidal table (interleaved, base 10000, rows 0..3) succeeds and is right. */
static void check_sinusoidal_works(posenc_context *ctx, int line)
{
    fill_arena(99);
    posenc_sinusoidal_desc d = base_sinusoidal();
    posenc_status st = posenc_sinusoidal(ctx, &d);
    if (st != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "%s:%d: valid sinusoidal failed: %s: %s\n", __FILE__, line,
                posenc_status_name(st), posenc_context_last_error(ctx));
        return;
    }
    double worst = 0;
    for (int r = 0; r < TOKENS; r++) {
        for (int i = 0; i < D_MODEL / 2; i++) {
            double angle = r * pow(10000.0, -(double)i / (D_MODEL / 2));
            double ds = fabs(arena_f32(Q_OUT_AT, (size_t)r * D_MODEL + 2 * i) - sin(angle));
            double dc = fabs(arena_f32(Q_OUT_AT, (size_t)r * D_MODEL + 2 * i + 1) - cos(angle));
            if (!(ds <= worst))
                worst = ds;
            if (!(dc <= worst))
                worst = dc;
        }
    }
    if (!(worst <= TOLERANCE)) {
        test_failures++;
        fprintf(stderr, "%s:%d: valid sinusoidal wrong by %g\n", __FILE__, line, worst);
    }
}

/* ------------------------------------------------------------------------------------------ */

static void test_names(void)
{
    static const struct {
        posenc_status status;
        const char *name;
        const char *message;
    } statuses[] = {
#define STATUS_ROW(name, value, message) {POSENC_##name, "POSENC_" #name, message},
        POSENC_STATUS_LIST(STATUS_ROW)
#undef STATUS_ROW
    };
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        const char *name = posenc_status_name(statuses[i].status);
        const char *message = posenc_status_string(statuses[i].status);
        CHECK(name && strcmp(name, statuses[i].name) == 0);
        CHECK(message && strcmp(message, statuses[i].message) == 0);
    }
    const posenc_status unknown[] = {(posenc_status)2, (posenc_status)-1, (posenc_status)-150,
                                     (posenc_status)12345, (posenc_status)INT32_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *name = posenc_status_name(unknown[i]);
        const char *message = posenc_status_string(unknown[i]);
        CHECK(name && strcmp(name, "POSENC_UNKNOWN_STATUS") == 0);
        CHECK(message && message[0] != '\0');
    }

    CHECK(strcmp(posenc_dtype_name(POSENC_DTYPE_F32), "f32") == 0);
    CHECK(strcmp(posenc_dtype_name(POSENC_DTYPE_F16), "f16") == 0);
    CHECK(strcmp(posenc_dtype_name(POSENC_DTYPE_BF16), "bf16") == 0);
    CHECK(strcmp(posenc_dtype_name(POSENC_DTYPE_I32), "i32") == 0);
    CHECK(posenc_dtype_name(POSENC_DTYPE_DEFAULT) != NULL);
    CHECK(posenc_dtype_name((posenc_dtype)99) != NULL);
    CHECK(posenc_dtype_name((posenc_dtype)-1) != NULL);
    CHECK(posenc_dtype_size(POSENC_DTYPE_F32) == 4);
    CHECK(posenc_dtype_size(POSENC_DTYPE_F16) == 2);
    CHECK(posenc_dtype_size(POSENC_DTYPE_BF16) == 2);
    CHECK(posenc_dtype_size(POSENC_DTYPE_I32) == 4);
    CHECK(posenc_dtype_size(POSENC_DTYPE_DEFAULT) == 0);
    CHECK(posenc_dtype_size((posenc_dtype)99) == 0);
    CHECK(posenc_dtype_size((posenc_dtype)-1) == 0);

    CHECK(strcmp(posenc_backend_name(POSENC_BACKEND_AUTO), "auto") == 0);
    CHECK(strcmp(posenc_backend_name(POSENC_BACKEND_CPU), "cpu") == 0);
    CHECK(strcmp(posenc_backend_name(POSENC_BACKEND_VULKAN), "vulkan") == 0);
    CHECK(strcmp(posenc_backend_name(POSENC_BACKEND_OPENCL), "opencl") == 0);
    CHECK(posenc_backend_name((posenc_backend)99) != NULL);
    CHECK(posenc_backend_name((posenc_backend)-1) != NULL);
    /* The first value past the list of backends is no backend. */
    CHECK(strcmp(posenc_backend_name((posenc_backend)(POSENC_BACKEND_OPENCL + 1)), "unknown") == 0);

    CHECK(strcmp(posenc_device_type_name(POSENC_DEVICE_DISCRETE_GPU), "discrete GPU") == 0);
    CHECK(strcmp(posenc_device_type_name(POSENC_DEVICE_INTEGRATED_GPU), "integrated GPU") == 0);
    CHECK(strcmp(posenc_device_type_name(POSENC_DEVICE_VIRTUAL_GPU), "virtual GPU") == 0);
    CHECK(strcmp(posenc_device_type_name(POSENC_DEVICE_CPU), "CPU") == 0);
    CHECK(strcmp(posenc_device_type_name(POSENC_DEVICE_SOFTWARE), "software") == 0);
    CHECK(strcmp(posenc_device_type_name(POSENC_DEVICE_OTHER), "other") == 0);
    CHECK(posenc_device_type_name((posenc_device_type)99) != NULL);
    CHECK(posenc_device_type_name((posenc_device_type)-1) != NULL);
}

/* Calls without a context: NULL out-parameters and bad descriptors. */
static void test_context_free_calls(void)
{
    const char *reason = "sentinel";
    CHECK_OK(posenc_backend_status(POSENC_BACKEND_CPU, NULL));
    CHECK_OK(posenc_backend_status(POSENC_BACKEND_CPU, &reason));
    CHECK_STATUS(posenc_backend_status(POSENC_BACKEND_AUTO, &reason), POSENC_INVALID_ARGUMENT);
    CHECK(reason != NULL && reason[0] != '\0');
    CHECK_STATUS(posenc_backend_status((posenc_backend)99, &reason), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "backend");
    CHECK_STATUS(posenc_backend_status((posenc_backend)(POSENC_BACKEND_OPENCL + 1), &reason),
                 POSENC_INVALID_ARGUMENT);
    CHECK(strcmp(reason, "unknown backend") == 0);
    CHECK_STATUS(posenc_backend_status((posenc_backend)-1, &reason), POSENC_INVALID_ARGUMENT);

    CHECK_STATUS(posenc_device_count(NULL), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "count");
    CHECK_STATUS(posenc_device_get(0, NULL), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "info");

    posenc_context *const sentinel = (posenc_context *)(uintptr_t)0x5e5e5e50u;
    posenc_context *ctx = sentinel;
    CHECK_STATUS(posenc_context_create(NULL, NULL), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "context");

    posenc_context_desc desc = {.backend = (posenc_backend)99, .flags = POSENC_CONTEXT_IGNORE_ENV};
    CHECK_STATUS(posenc_context_create(&desc, &ctx), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "backend");
    CHECK(ctx == sentinel);

    desc = (posenc_context_desc){.backend = POSENC_BACKEND_CPU, .flags = 1u << 30};
    CHECK_STATUS(posenc_context_create(&desc, &ctx), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "flags");
    CHECK(ctx == sentinel);
    if (ctx != sentinel)
        posenc_context_destroy(ctx);
    ctx = sentinel;

    /* Bringing one's own Vulkan or OpenCL objects is not implemented yet. */
    static const int dummy = 0;
    desc = (posenc_context_desc){.flags = POSENC_CONTEXT_IGNORE_ENV};
    desc.vulkan.device = &dummy;
    /* With the Vulkan backend: a device without its instance, refused by name (test_vulkan_engine
     * checks every field); without it, UNSUPPORTED. */
    posenc_status vulkan_status = posenc_context_create(&desc, &ctx);
    CHECK(vulkan_status == POSENC_INVALID_ARGUMENT || vulkan_status == POSENC_UNSUPPORTED);
    CHECK_MESSAGE(posenc_thread_last_error(), "vulkan");
    CHECK(ctx == sentinel);
    desc = (posenc_context_desc){.flags = POSENC_CONTEXT_IGNORE_ENV};
    desc.opencl.context = &dummy;
    /* OpenCL handles are taken when the backend is built: the missing ones are named first
     * (tests/test_opencl_engine.c checks the rest). */
    posenc_status opencl = posenc_context_create(&desc, &ctx);
    CHECK(opencl == POSENC_INVALID_ARGUMENT || opencl == POSENC_UNSUPPORTED);
    CHECK_MESSAGE(posenc_thread_last_error(),
                  opencl == POSENC_INVALID_ARGUMENT ? "opencl.device: is NULL" : "opencl");
    CHECK(ctx == sentinel);

    uint32_t index = 0x5e5e5e5e;
    desc = (posenc_context_desc){.flags = POSENC_CONTEXT_IGNORE_ENV};
    CHECK_STATUS(posenc_device_choose(&desc, NULL, NULL), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "index");
    desc.backend = (posenc_backend)99;
    CHECK_STATUS(posenc_device_choose(&desc, &index, NULL), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "backend");
    CHECK(index == 0x5e5e5e5e);

    posenc_device_info info;
    memset(&info, 0x5e, sizeof info);
    posenc_device_info info_before = info;
    CHECK_STATUS(posenc_context_device(NULL, &info), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "context");
    CHECK(memcmp(&info, &info_before, sizeof info) == 0);
    CHECK(posenc_context_last_error(NULL) != NULL);

    posenc_buffer *const buffer_sentinel = (posenc_buffer *)(uintptr_t)0x5e5e5e50u;
    posenc_buffer *buffer = buffer_sentinel;
    posenc_buffer_desc bdesc = {.size = 64};
    CHECK_STATUS(posenc_buffer_create(NULL, &bdesc, &buffer), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "context");
    CHECK(buffer == buffer_sentinel);
    CHECK(posenc_buffer_size(NULL) == 0);
    unsigned char bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_STATUS(posenc_buffer_upload(NULL, 0, bytes, sizeof bytes), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "buffer");
    CHECK_STATUS(posenc_buffer_download(NULL, 0, bytes, sizeof bytes), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_thread_last_error(), "buffer");
    CHECK(bytes[0] == 1 && bytes[7] == 8);

    posenc_buffer_destroy(NULL);
    posenc_context_destroy(NULL);

    /* Ops without a context: the message goes to the thread. */
    fill_arena(1);
    posenc_rope_desc rope = base_rope();
    EXPECT_ROPE(NULL, &rope, POSENC_INVALID_ARGUMENT, "context");
    posenc_sinusoidal_desc sin_desc = base_sinusoidal();
    EXPECT_SINUSOIDAL(NULL, &sin_desc, POSENC_INVALID_ARGUMENT, "context");
}

/* Calls on a context with NULL arguments. */
static void test_null_arguments(posenc_context *ctx)
{
    CHECK(posenc_context_last_error(ctx) != NULL);

    posenc_buffer *const sentinel = (posenc_buffer *)(uintptr_t)0x5e5e5e50u;
    posenc_buffer *buffer = sentinel;
    posenc_buffer_desc bdesc = {.size = 64};
    CHECK_STATUS(posenc_buffer_create(ctx, NULL, &buffer), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "desc");
    CHECK(buffer == sentinel);
    CHECK_STATUS(posenc_buffer_create(ctx, &bdesc, NULL), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "buffer");

    CHECK_STATUS(posenc_context_device(ctx, NULL), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "info");

    buffer = NULL;
    CHECK_OK(posenc_buffer_create(ctx, &bdesc, &buffer));
    if (buffer) {
        CHECK_STATUS(posenc_buffer_upload(buffer, 0, NULL, 4), POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "data");
        CHECK_STATUS(posenc_buffer_download(buffer, 0, NULL, 4), POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "data");
        posenc_buffer_destroy(buffer);
    }

    fill_arena(2);
    EXPECT_ROPE(ctx, NULL, POSENC_INVALID_ARGUMENT, "desc");
    EXPECT_SINUSOIDAL(ctx, NULL, POSENC_INVALID_ARGUMENT, "desc");
}

static void test_rope_tensors(posenc_context *ctx)
{
    posenc_rope_desc d;
    uint64_t seed = 100;
#define CASE() (fill_arena(seed++), d = base_rope())

    CASE();
    d.q = ABSENT;
    EXPECT_ROPE2(ctx, &d, POSENC_INVALID_ARGUMENT, POSENC_INVALID_SHAPE, "q");
    CASE();
    d.q.host = NULL; /* a shape but no memory */
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "q");
    CASE();
    d.q.ndim = 0; /* memory but no shape */
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "q");
    CASE(); /* the convenience constructor without a shape gives sizes of 0 */
    d.k = ABSENT;
    d.q = posenc_tensor_of_host(arena + Q_AT, POSENC_DTYPE_F32, 2, NULL);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "q.shape");
    CASE();
    d.q.ndim = 5;
    d.q.shape[0] = 1;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "q.ndim");

    /* Sizes: k is left out so that only q can be blamed. */
    const int64_t bad_sizes[] = {0, -1, -8, INT64_MIN};
    for (int dim = 0; dim < 4; dim++) {
        for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
            CASE();
            d.k = ABSENT;
            d.q.shape[dim] = bad_sizes[i];
            char field[16];
            snprintf(field, sizeof field, "q.shape[%d]", dim);
            EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, field);
        }
    }

    /* rotary_dim: odd, larger than head_dim, and an odd head_dim as the default. */
    CASE();
    d.rotary_dim = 7;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "rotary_dim");
    CASE();
    d.rotary_dim = HEAD_DIM + 2;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "rotary_dim");
    CASE();
    d.k = ABSENT;
    d.q = HOST_VIEW(Q_AT, POSENC_DTYPE_F32, 1, TOKENS, 2, 7);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "rotary_dim|q.shape[3]");
    CASE();
    d.k = ABSENT;
    d.q = HOST_VIEW(Q_AT, POSENC_DTYPE_F32, 1, TOKENS, 2, 7);
    d.rotary_dim = 6; /* the seventh dim passes through */
    if (EXPECT_ROPE(ctx, &d, POSENC_OK, "") == POSENC_OK) {
        for (size_t row = 0; row < TOKENS * 2; row++)
            CHECK(arena_f32(Q_AT, row * 7 + 6) == before_f32(Q_AT, row * 7 + 6));
    }

    /* q_out: shape and dtype must equal q's. */
    CASE();
    d.q_out = HOST_VIEW(Q_OUT_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS + 1, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "q_out.shape");
    CASE();
    d.q_out = HOST_VIEW(Q_OUT_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM / 2);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "q_out.shape");
    CASE();
    d.q_out = HOST_VIEW(Q_OUT_AT, POSENC_DTYPE_F16, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_DTYPE, "q_out.dtype");
    CASE();
    d.k = ABSENT;
    d.q.dtype = POSENC_DTYPE_F16;
    d.q_out = HOST_VIEW(Q_OUT_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_DTYPE, "q_out.dtype|q.dtype");
    CASE();
    d.k = ABSENT;
    d.q.dtype = POSENC_DTYPE_I32;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_DTYPE, "q.dtype");
    CASE();
    d.k = ABSENT;
    d.q.dtype = (posenc_dtype)99;
    EXPECT_ROPE2(ctx, &d, POSENC_INVALID_DTYPE, POSENC_INVALID_ARGUMENT, "q.dtype");

    /* k: batch, tokens and head_dim must match q's; k_heads may differ. */
    CASE();
    d.k = HOST_VIEW(K_AT, POSENC_DTYPE_F32, BATCH + 1, TOKENS, K_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "k.shape[0]");
    CASE();
    d.k = HOST_VIEW(K_AT, POSENC_DTYPE_F32, BATCH, TOKENS - 1, K_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "k.shape[1]");
    CASE();
    d.k = HOST_VIEW(K_AT, POSENC_DTYPE_F32, BATCH, TOKENS, K_HEADS, HEAD_DIM * 2);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "k.shape[3]");
    CASE();
    d.k = HOST_VIEW(K_AT, POSENC_DTYPE_F32, BATCH, TOKENS, K_HEADS, HEAD_DIM);
    d.k.shape[2] = 0;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "k.shape[2]");
    CASE();
    d.k.dtype = POSENC_DTYPE_I32;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_DTYPE, "k.dtype");
    CASE();
    d.k = ABSENT;
    d.k_out = HOST_VIEW(K_OUT_AT, POSENC_DTYPE_F32, BATCH, TOKENS, K_HEADS, HEAD_DIM);
    EXPECT_ROPE2(ctx, &d, POSENC_INVALID_ARGUMENT, POSENC_INVALID_SHAPE, "k_out");
    CASE();
    d.k_out = HOST_VIEW(K_OUT_AT, POSENC_DTYPE_F32, BATCH, TOKENS, K_HEADS + 1, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "k_out.shape");
    CASE();
    d.k_out = HOST_VIEW(K_OUT_AT, POSENC_DTYPE_BF16, BATCH, TOKENS, K_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_DTYPE, "k_out.dtype");
    CASE(); /* grouped-query attention: 2 q heads, 1 k head */
    EXPECT_ROPE(ctx, &d, POSENC_OK, "");

    /* positions: [tokens] or [batch, tokens], i32 or f32. */
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, TOKENS + 1);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, TOKENS - 1);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, BATCH + 1, TOKENS);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, TOKENS);
    d.positions.ndim = 0;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_F16, TOKENS);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_DTYPE, "positions.dtype");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_BF16, TOKENS);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_DTYPE, "positions.dtype");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, TOKENS);
    if (EXPECT_ROPE(ctx, &d, POSENC_OK, "") == POSENC_OK) {
        static unsigned char expect[ARENA_BYTES];
        rope_reference(arena_before + Q_AT, expect, TOKENS, Q_HEADS, HEAD_DIM, HEAD_DIM, 10000,
                       NULL, test_positions, 0);
        double diff = max_diff(arena + Q_AT, expect, TOKENS * Q_HEADS * HEAD_DIM);
        CHECK(diff <= TOLERANCE);
    }
    CASE();
    d.positions = HOST_VIEW(POSF_AT, POSENC_DTYPE_F32, BATCH, TOKENS);
    EXPECT_ROPE(ctx, &d, POSENC_OK, "");
    CASE(); /* an offset is only for positions the library counts itself */
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, TOKENS);
    d.position_offset = 1;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "position_offset");
#undef CASE
}

static void test_rope_scalars(posenc_context *ctx)
{
    posenc_rope_desc d;
    uint64_t seed = 200;
#define CASE() (fill_arena(seed++), d = base_rope())

    /* position_offset + token index must stay an int32. */
    CASE();
    d.position_offset = INT32_MAX - (TOKENS - 2);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "position_offset");
    CASE();
    d.position_offset = INT32_MAX;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "position_offset");
    CASE();
    d.position_offset = INT32_MAX - (TOKENS - 1);
    EXPECT_ROPE(ctx, &d, POSENC_OK, "");
    CASE();
    d.position_offset = INT32_MIN;
    EXPECT_ROPE(ctx, &d, POSENC_OK, "");

    const double bad_theta[] = {-1.0, -10000.0, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad_theta / sizeof bad_theta[0]; i++) {
        CASE();
        d.theta = bad_theta[i];
        EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "theta");
    }
    /* A frequency base so small that theta^(-2j/rotary_dim) is no longer a usable frequency. */
    CASE();
    d.theta = 1e-300;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "theta");
    /* theta 0 means the default, 10000. */
    CASE();
    d.theta = 0;
    if (EXPECT_ROPE(ctx, &d, POSENC_OK, "") == POSENC_OK) {
        static unsigned char with_zero[ARENA_BYTES];
        memcpy(with_zero, arena, ARENA_BYTES);
        seed--;
        CASE();
        d.theta = 10000;
        EXPECT_ROPE(ctx, &d, POSENC_OK, "");
        CHECK(memcmp(with_zero + Q_AT, arena + Q_AT, TOKENS * Q_HEADS * HEAD_DIM * 4) == 0);
    }

    const double bad_factor[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad_factor / sizeof bad_factor[0]; i++) {
        CASE();
        d.attention_factor = bad_factor[i];
        EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "attention_factor");
    }

    /* Caller frequencies: rotary_dim / 2 = 4 entries, each finite and >= 0. */
    const double bad_inv_freq[][4] = {
        {1.0, -0.5, 0.1, 0.01},
        {1.0, 0.5, NAN, 0.01},
        {1.0, 0.5, 0.1, INFINITY},
        {-INFINITY, 0.5, 0.1, 0.01},
    };
    for (size_t i = 0; i < sizeof bad_inv_freq / sizeof bad_inv_freq[0]; i++) {
        CASE();
        d.inv_freq = bad_inv_freq[i];
        d.inv_freq_count = 4;
        EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "inv_freq");
    }
    static const double good_inv_freq[4] = {1.5, 0.25, 0.0, 1e-3};
    const uint32_t bad_count[] = {0, 3, 5, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad_count / sizeof bad_count[0]; i++) {
        CASE();
        d.inv_freq = good_inv_freq;
        d.inv_freq_count = bad_count[i];
        EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "inv_freq_count");
    }
    /* A count without its array: the pointer was forgotten, not meant to be absent. */
    CASE();
    d.inv_freq_count = 4;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "inv_freq");
    CASE();
    d.scaling.factor_count = 4;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "scaling.factor_count");
    CASE();
    d.inv_freq = good_inv_freq;
    d.inv_freq_count = 4;
    d.k = ABSENT;
    if (EXPECT_ROPE(ctx, &d, POSENC_OK, "") == POSENC_OK) {
        static unsigned char expect[ARENA_BYTES];
        rope_reference(arena_before + Q_AT, expect, TOKENS, Q_HEADS, HEAD_DIM, HEAD_DIM, 0,
                       good_inv_freq, NULL, 0);
        double diff = max_diff(arena + Q_AT, expect, TOKENS * Q_HEADS * HEAD_DIM);
        CHECK(diff <= TOLERANCE);
    }
    /* A finite but enormous frequency must not break the fixed-point angle: rejected, or
     * finite results. */
    static const double huge_inv_freq[4] = {1e75, 1e20, 1e10, 1.0};
    CASE();
    d.inv_freq = huge_inv_freq;
    d.inv_freq_count = 4;
    if (EXPECT_ROPE2(ctx, &d, POSENC_OK, POSENC_INVALID_ARGUMENT, "inv_freq") == POSENC_OK) {
        for (size_t i = 0; i < TOKENS * Q_HEADS * HEAD_DIM; i++)
            CHECK(isfinite(arena_f32(Q_AT, i)));
    }

    CASE();
    d.style = (posenc_rope_style)2;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "style");
    CASE();
    d.style = (posenc_rope_style)-1;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "style");
    CASE();
    d.style = POSENC_ROPE_GPTJ;
    EXPECT_ROPE(ctx, &d, POSENC_OK, "");
#undef CASE
}

static void test_rope_scaling(posenc_context *ctx)
{
    posenc_rope_desc d;
    uint64_t seed = 300;
#define CASE() (fill_arena(seed++), d = base_rope())

    const double bad_factor[] = {0.5, -2.0, NAN, INFINITY};
    const posenc_rope_scaling_type factor_types[] = {POSENC_ROPE_SCALING_LINEAR,
                                                     POSENC_ROPE_SCALING_NTK};
    for (size_t t = 0; t < 2; t++) {
        for (size_t i = 0; i < sizeof bad_factor / sizeof bad_factor[0]; i++) {
            CASE();
            d.scaling.type = factor_types[t];
            d.scaling.factor = bad_factor[i];
            EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "scaling.factor");
        }
        CASE();
        d.scaling.type = factor_types[t];
        d.scaling.factor = 4;
        EXPECT_ROPE(ctx, &d, POSENC_OK, "");
    }
    CASE();
    d.scaling.type = (posenc_rope_scaling_type)99;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "scaling.type");
    CASE();
    d.scaling.type = (posenc_rope_scaling_type)-1;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "scaling.type");

    /* Fields the type does not use must stay zero: a value there is a mistake, not ignored. */
    CASE();
    d.scaling.factor = 2;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "scaling.factor");
    CASE();
    d.scaling.beta_fast = 32;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "scaling.beta_fast");
    CASE();
    d.scaling.type = POSENC_ROPE_SCALING_LINEAR;
    d.scaling.factor = 2;
    d.scaling.low_freq_factor = 1;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "scaling.low_freq_factor");

    const double bad_freq_factors[][4] = {
        {1, 0, 1, 1},
        {1, 1, -2, 1},
        {NAN, 1, 1, 1},
        {1, 1, 1, INFINITY},
    };
    for (size_t i = 0; i < sizeof bad_freq_factors / sizeof bad_freq_factors[0]; i++) {
        CASE();
        d.scaling.freq_factors = bad_freq_factors[i];
        d.scaling.factor_count = 4;
        EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "scaling.freq_factors");
    }

    static const double good_freq_factors[4] = {1, 2, 4, 8};
    CASE();
    d.scaling.freq_factors = good_freq_factors;
    d.scaling.factor_count = 3;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "scaling.factor_count");
    CASE();
    d.scaling.freq_factors = good_freq_factors;
    d.scaling.factor_count = 4;
    EXPECT_ROPE(ctx, &d, POSENC_OK, "");

    /* Types that may not be implemented yet: either they work, or UNSUPPORTED names the type. */
    static const double long_factors[4] = {1.0, 1.5, 2.0, 4.0};
    posenc_rope_scaling later[4] = {
        {.type = POSENC_ROPE_SCALING_DYNAMIC_NTK, .factor = 2, .original_max_positions = 2},
        {.type = POSENC_ROPE_SCALING_YARN, .factor = 4, .original_max_positions = 4096},
        {.type = POSENC_ROPE_SCALING_LLAMA3, .factor = 8, .original_max_positions = 8192},
        {.type = POSENC_ROPE_SCALING_LONGROPE, .factor = 4, .original_max_positions = 4096,
         .short_factor = long_factors, .long_factor = long_factors, .factor_count = 4},
    };
    for (size_t i = 0; i < 4; i++) {
        CASE();
        d.scaling = later[i];
        EXPECT_ROPE2(ctx, &d, POSENC_OK, POSENC_UNSUPPORTED, "scaling.type");
    }
#undef CASE
}

/* Multimodal kinds: the kind, mrope_section, what the vision kinds refuse, and the component
 * dim of the positions. */
static void test_rope_multimodal(posenc_context *ctx)
{
    posenc_rope_desc d;
    uint64_t seed = 400;
#define CASE() (fill_arena(seed++), d = base_rope())
#define MROPE(s0, s1, s2)                                                                       \
    (d.multimodal = POSENC_ROPE_MROPE, d.mrope_section[0] = (s0), d.mrope_section[1] = (s1),  \
     d.mrope_section[2] = (s2))

    CASE();
    d.multimodal = (posenc_rope_multimodal)6;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "multimodal");
    CASE();
    d.multimodal = (posenc_rope_multimodal)-1;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "multimodal");

    /* mrope_section: required and summing to rotary_dim/2 (4 here) for the M-RoPE kinds, zero
     * for the others. */
    CASE();
    MROPE(0, 0, 0);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "mrope_section");
    CASE();
    MROPE(1, 1, 1);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "mrope_section");
    CASE();
    MROPE(2, 2, 2);
    d.multimodal = POSENC_ROPE_MROPE_INTERLEAVED;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "mrope_section");
    CASE();
    MROPE(UINT32_MAX, 3, 2); /* wraps to 4 in 32 bits */
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "mrope_section");
    CASE();
    d.mrope_section[1] = 4;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "mrope_section");
    CASE();
    d.multimodal = POSENC_ROPE_VISION_2D;
    d.mrope_section[0] = 4;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "mrope_section");
    CASE();
    MROPE(2, 1, 1);
    d.rotary_dim = 6; /* now the sum must be 3 */
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "mrope_section");

    /* The vision kinds: rotary_dim a multiple of 4, no scaling type. */
    CASE();
    d.multimodal = POSENC_ROPE_VISION_2D;
    d.rotary_dim = 6;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "rotary_dim");
    CASE();
    d.multimodal = POSENC_ROPE_VISION_2D_PIXTRAL;
    d.scaling.type = POSENC_ROPE_SCALING_LINEAR;
    d.scaling.factor = 2;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "scaling.type");

    /* POSITIONS_MAP: 1 to 4 components, a map entry per frequency below them, and the map on
     * that kind only. */
    static const uint8_t good_map[4] = {0, 3, 1, 2}, bad_map[4] = {0, 1, 4, 2};
    CASE();
    d.multimodal = POSENC_ROPE_POSITIONS_MAP;
    d.components = 4;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "component_map");
    CASE();
    d.multimodal = POSENC_ROPE_POSITIONS_MAP;
    d.component_map = good_map;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "components");
    CASE();
    d.multimodal = POSENC_ROPE_POSITIONS_MAP;
    d.component_map = good_map;
    d.components = 5;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "components");
    CASE();
    d.multimodal = POSENC_ROPE_POSITIONS_MAP;
    d.component_map = bad_map;
    d.components = 4;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "component_map[2]");
    CASE();
    MROPE(2, 1, 1);
    d.component_map = good_map;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "component_map");
    CASE();
    d.components = 2;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "components");
    CASE();
    d.multimodal = POSENC_ROPE_POSITIONS_MAP;
    d.component_map = good_map;
    d.components = 4;
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_I32, TOKENS, 3);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape[1]");

    /* Positions: [tokens, C] or [batch, tokens, C], C the kind's components. */
    CASE();
    MROPE(2, 1, 1);
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_I32, TOKENS);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions.ndim");
    CASE();
    MROPE(2, 1, 1);
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_I32, 1, 1, TOKENS, 3);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions.ndim");
    CASE();
    MROPE(2, 1, 1);
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_I32, TOKENS, 2);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape[1]");
    CASE();
    d.multimodal = POSENC_ROPE_VISION_2D;
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_I32, BATCH, TOKENS, 3);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape[2]");
    CASE();
    MROPE(2, 1, 1);
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_I32, TOKENS - 1, 3);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape[0]");
    CASE();
    MROPE(2, 1, 1);
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_I32, 2, 2, 3); /* batch is 1 */
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape");
    CASE();
    MROPE(2, 1, 1);
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_F16, TOKENS, 3);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_DTYPE, "positions.dtype");
    CASE();
    MROPE(2, 1, 1);
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_I32, TOKENS, 3);
    d.position_offset = 5;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "position_offset");
    /* Only the last component lies inside k, which is rotated in place: every component is
     * checked against the outputs, not only the first. */
    CASE();
    MROPE(2, 1, 1);
    d.positions = HOST_VIEW(K_AT - 2 * 256, POSENC_DTYPE_I32, TOKENS, 3);
    d.positions.strides[0] = 4;
    d.positions.strides[1] = 256;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "positions");

    /* And the valid forms: packed, HF's [3, batch, tokens] with permuted strides, vision. */
    CASE();
    MROPE(2, 1, 1);
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_I32, TOKENS, 3);
    EXPECT_ROPE(ctx, &d, POSENC_OK, "");
    CASE();
    MROPE(2, 1, 1);
    d.multimodal = POSENC_ROPE_MROPE_INTERLEAVED;
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_F32, BATCH, TOKENS, 3);
    d.positions.strides[0] = TOKENS * 4;
    d.positions.strides[1] = 4;
    d.positions.strides[2] = BATCH * TOKENS * 4;
    for (int i = 0; i < 3 * TOKENS; i++) { /* finite floats: the arena's noise may be NaN */
        float p = (float)i;
        memcpy(arena + MM_POS_AT + 4 * i, &p, sizeof p);
    }
    EXPECT_ROPE(ctx, &d, POSENC_OK, "");
    CASE();
    d.multimodal = POSENC_ROPE_VISION_2D_PIXTRAL;
    d.positions = HOST_VIEW(MM_POS_AT, POSENC_DTYPE_I32, BATCH, TOKENS, 2);
    EXPECT_ROPE(ctx, &d, POSENC_OK, "");
#undef MROPE
#undef CASE
}

static void test_rope_layouts(posenc_context *ctx)
{
    posenc_rope_desc d;
    uint64_t seed = 400;
#define CASE() (fill_arena(seed++), d = base_rope())
    const int64_t row = HEAD_DIM * 4;

    /* Outputs whose elements overlap: heads 16 bytes apart but 32 bytes long. */
    CASE();
    d.q.strides[2] = row / 2;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q.strides");
    CASE();
    d.q_out = HOST_VIEW(Q_OUT_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    d.q_out.strides[2] = row / 2;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q_out.strides");
    CASE();
    d.k.strides[1] = 4; /* tokens one element apart */
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "k.strides");
    /* An input that is only read may overlap itself. */
    CASE();
    d.k = ABSENT;
    d.q.strides[2] = row / 2;
    d.q_out = HOST_VIEW(Q_OUT_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    if (EXPECT_ROPE(ctx, &d, POSENC_OK, "") == POSENC_OK)
        CHECK(memcmp(arena + Q_AT, arena_before + Q_AT, 1024) == 0);

    /* Alignment and sign. */
    CASE();
    d.q.host = arena + Q_AT;
    d.q.offset = 2;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q.offset");
    CASE();
    d.q_out = HOST_VIEW(Q_OUT_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    d.q_out.offset = 1;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q_out.offset");
    CASE();
    d.q.strides[3] = 6;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q.strides");
    CASE();
    d.q.strides[1] = Q_HEADS * row + 2;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q.strides");
    CASE();
    d.q.strides[2] = -row;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q.strides");
    CASE();
    d.q.strides[3] = -4;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q.strides");

    /* Extents that overflow int64: the library must not wrap around and touch memory. */
    CASE();
    d.k = ABSENT;
    d.q.shape[0] = 8;
    d.q.strides[0] = INT64_C(1) << 61;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q.strides");
    CASE();
    d.k = ABSENT;
    d.q.strides[1] = INT64_MAX - 3;
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q.strides");
    CASE();
    d.k = ABSENT;
    d.q.shape[2] = INT64_C(1) << 60; /* packed: heads * 32 bytes overflows */
    EXPECT_ROPE2(ctx, &d, POSENC_INVALID_LAYOUT, POSENC_INVALID_SHAPE, "q.s");

    /* Out-of-place outputs against inputs. */
    CASE();
    d.q_out = HOST_VIEW(Q_AT + 4, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q_out");
    CASE();
    d.q_out = HOST_VIEW(Q_AT + 128, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q_out");
    CASE(); /* the very same view as q: in place */
    d.q_out = d.q;
    if (EXPECT_ROPE(ctx, &d, POSENC_OK, "") == POSENC_OK) {
        static unsigned char in_place[ARENA_BYTES];
        memcpy(in_place, arena, ARENA_BYTES);
        seed--;
        CASE();
        d.q_out = ABSENT;
        EXPECT_ROPE(ctx, &d, POSENC_OK, "");
        CHECK(memcmp(in_place, arena, ARENA_BYTES) == 0);
    }
    CASE(); /* q_out writes over k, which is rotated in place */
    d.q_out = HOST_VIEW(K_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q_out|k");
    CASE(); /* q_out writes over k, which is only read */
    d.q_out = HOST_VIEW(K_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    d.k_out = HOST_VIEW(K_OUT_AT, POSENC_DTYPE_F32, BATCH, TOKENS, K_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "q_out|k");
    CASE(); /* k_out writes over q, which is rotated in place */
    d.k_out = HOST_VIEW(Q_AT, POSENC_DTYPE_F32, BATCH, TOKENS, K_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "k_out|q");
    CASE(); /* both outputs on the same memory */
    d.q_out = HOST_VIEW(Q_OUT_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    d.k_out = HOST_VIEW(Q_OUT_AT + 64, POSENC_DTYPE_F32, BATCH, TOKENS, K_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "k_out|q_out");
    CASE(); /* q and k are one tensor, both rotated in place */
    d.k = HOST_VIEW(Q_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "k|q");
    CASE(); /* positions read from memory that q's rotation writes */
    d.positions = HOST_VIEW(Q_AT + 16, POSENC_DTYPE_I32, TOKENS);
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_LAYOUT, "positions|q");

    /* A fused qkv buffer [tokens, 3, heads, head_dim]: q and k interleave without overlapping,
     * which must not be mistaken for an overlap; v stays untouched. */
    CASE();
    const int64_t qkv_row = 3 * Q_HEADS * row;
    d.q = HOST_VIEW(QKV_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    d.q.strides[1] = qkv_row;
    d.k = HOST_VIEW(QKV_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    d.k.offset = (uint64_t)(Q_HEADS * row);
    d.k.strides[1] = qkv_row;
    if (EXPECT_ROPE(ctx, &d, POSENC_OK, "") == POSENC_OK) {
        double worst = 0;
        for (int part = 0; part < 2; part++) {
            for (int t = 0; t < TOKENS; t++) {
                size_t at = QKV_AT + (size_t)(t * qkv_row + part * Q_HEADS * row);
                unsigned char expect[Q_HEADS * HEAD_DIM * 4];
                rope_reference(arena_before + at, expect, 1, Q_HEADS, HEAD_DIM, HEAD_DIM, 10000,
                               NULL, NULL, t);
                double diff = max_diff(arena + at, expect, Q_HEADS * HEAD_DIM);
                if (!(diff <= worst))
                    worst = diff;
            }
        }
        CHECK(worst <= TOLERANCE);
        for (int t = 0; t < TOKENS; t++) {
            size_t v_at = QKV_AT + (size_t)(t * qkv_row + 2 * Q_HEADS * row);
            CHECK(memcmp(arena + v_at, arena_before + v_at, (size_t)(Q_HEADS * row)) == 0);
        }
    }
#undef CASE
}

/* Views on buffers: bounds, and buffers from another context. */
static void test_rope_buffers(posenc_context *ctx)
{
    const uint64_t q_bytes = BATCH * TOKENS * Q_HEADS * HEAD_DIM * 4;
    posenc_buffer *q_buf = NULL, *pos_buf = NULL;
    posenc_buffer_desc bd = {.size = q_bytes};
    CHECK_OK(posenc_buffer_create(ctx, &bd, &q_buf));
    bd.size = TOKENS * 4;
    bd.initial_data = test_positions;
    CHECK_OK(posenc_buffer_create(ctx, &bd, &pos_buf));
    if (!q_buf || !pos_buf) {
        posenc_buffer_destroy(q_buf);
        posenc_buffer_destroy(pos_buf);
        return;
    }
    fill_arena(500);
    CHECK_OK(posenc_buffer_upload(q_buf, 0, arena + Q_AT, q_bytes));
    const int64_t q_shape[4] = {BATCH, TOKENS, Q_HEADS, HEAD_DIM};

    posenc_rope_desc d = base_rope();
    d.q = posenc_tensor_of_buffer(q_buf, POSENC_DTYPE_F32, 4, q_shape);
    CHECK(d.q.buffer == q_buf && d.q.host == NULL && d.q.ndim == 4 && d.q.offset == 0);
    const posenc_rope_desc good = d;

    d.q.offset = 4;
    EXPECT_ROPE(ctx, &d, POSENC_OUT_OF_BOUNDS, "q");
    d = good;
    d.q.offset = q_bytes;
    EXPECT_ROPE(ctx, &d, POSENC_OUT_OF_BOUNDS, "q");
    d = good;
    d.q.offset = UINT64_MAX - 3; /* offset + extent wraps around */
    EXPECT_ROPE2(ctx, &d, POSENC_OUT_OF_BOUNDS, POSENC_INVALID_LAYOUT, "q");
    d = good;
    d.q.strides[1] = Q_HEADS * HEAD_DIM * 4 * 2;
    EXPECT_ROPE(ctx, &d, POSENC_OUT_OF_BOUNDS, "q");
    d = good;
    d.q.host = arena; /* memory given twice */
    EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "q");
    d = good;
    d.q_out = posenc_tensor_of_buffer(q_buf, POSENC_DTYPE_F32, 4, q_shape);
    d.q_out.offset = 4;
    d.q = HOST_VIEW(Q_AT, POSENC_DTYPE_F32, BATCH, TOKENS, Q_HEADS, HEAD_DIM);
    EXPECT_ROPE(ctx, &d, POSENC_OUT_OF_BOUNDS, "q_out");
    d = good;
    d.positions = posenc_tensor_of_buffer(pos_buf, POSENC_DTYPE_I32, 1, (const int64_t[]){TOKENS});
    d.positions.offset = 4;
    EXPECT_ROPE(ctx, &d, POSENC_OUT_OF_BOUNDS, "positions");
    d = good;
    d.positions = posenc_tensor_of_buffer(pos_buf, POSENC_DTYPE_I32, 1, (const int64_t[]){TOKENS});
    EXPECT_ROPE(ctx, &d, POSENC_OK, "");

    /* A buffer belongs to the context that created it. */
    posenc_context_desc other_desc = {.backend = POSENC_BACKEND_CPU,
                                      .flags = POSENC_CONTEXT_IGNORE_ENV};
    posenc_context *other = NULL;
    CHECK_OK(posenc_context_create(&other_desc, &other));
    posenc_buffer *foreign = NULL;
    bd = (posenc_buffer_desc){.size = q_bytes};
    if (other)
        CHECK_OK(posenc_buffer_create(other, &bd, &foreign));
    if (foreign) {
        fill_arena(501);
        CHECK_OK(posenc_buffer_upload(foreign, 0, arena + Q_AT, q_bytes));
        d = good;
        d.q = posenc_tensor_of_buffer(foreign, POSENC_DTYPE_F32, 4, q_shape);
        EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "q");
        d = good;
        d.q_out = posenc_tensor_of_buffer(foreign, POSENC_DTYPE_F32, 4, q_shape);
        EXPECT_ROPE(ctx, &d, POSENC_INVALID_ARGUMENT, "q_out");
    }
    posenc_context_destroy(other);

    posenc_buffer_destroy(q_buf);
    posenc_buffer_destroy(pos_buf);
}

static void test_sinusoidal_errors(posenc_context *ctx)
{
    posenc_sinusoidal_desc d;
    uint64_t seed = 600;
#define CASE() (fill_arena(seed++), d = base_sinusoidal())

    CASE();
    d.out = ABSENT;
    sinusoidal_checked(ctx, &d, POSENC_INVALID_ARGUMENT, POSENC_INVALID_SHAPE, "out", __LINE__);
    CASE();
    d.out.host = NULL;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "out");
    CASE();
    d.out.shape[1] = 0;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_SHAPE, "out.shape[1]");
    CASE();
    d.out.shape[0] = -1;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_SHAPE, "out.shape[0]");
    CASE();
    d.out.ndim = 5;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_SHAPE, "out");
    CASE();
    d.out.dtype = POSENC_DTYPE_I32;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_DTYPE, "out.dtype");

    CASE();
    d.x = HOST_VIEW(K_OUT_AT, POSENC_DTYPE_F32, TOKENS, D_MODEL - 2);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_SHAPE, "x.shape");
    CASE();
    d.x = HOST_VIEW(K_OUT_AT, POSENC_DTYPE_F32, TOKENS + 1, D_MODEL);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_SHAPE, "x.shape");
    CASE();
    d.x = HOST_VIEW(K_OUT_AT, POSENC_DTYPE_I32, TOKENS, D_MODEL);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_DTYPE, "x.dtype");
    CASE();
    d.x = HOST_VIEW(K_OUT_AT, POSENC_DTYPE_F32, TOKENS, D_MODEL);
    d.x.offset = 2;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_LAYOUT, "x.offset");

    CASE();
    d.layout = (posenc_sinusoidal_layout)3;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "layout");
    CASE();
    d.layout = (posenc_sinusoidal_layout)-1;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "layout");

    const double bad_base[] = {-1.0, NAN, INFINITY, 1e-300 /* frequencies far too large */};
    for (size_t i = 0; i < sizeof bad_base / sizeof bad_base[0]; i++) {
        CASE();
        d.base = bad_base[i];
        EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "base");
    }
    /* The exponent's denominator d_model/2 - freq_shift must stay positive. */
    const double bad_shift[] = {D_MODEL / 2, D_MODEL / 2 + 1, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad_shift / sizeof bad_shift[0]; i++) {
        CASE();
        d.freq_shift = bad_shift[i];
        EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "freq_shift");
    }
    CASE();
    d.freq_shift = D_MODEL / 2 - 0.5;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_OK, "");
    CASE();
    d.freq_shift = 1; /* diffusers' default for timestep embeddings */
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_OK, "");

    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, TOKENS + 1);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, TOKENS - 1);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, 2, TOKENS);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_SHAPE, "positions.shape");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_F16, TOKENS);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_DTYPE, "positions.dtype");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, TOKENS);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_OK, "");
    CASE();
    d.positions = HOST_VIEW(POS_AT, POSENC_DTYPE_I32, TOKENS);
    d.position_offset = -1;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "position_offset");

    CASE();
    d.position_offset = INT32_MAX - (TOKENS - 2);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "position_offset");
    CASE();
    d.position_offset = INT32_MAX - (TOKENS - 1);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_OK, "");

    CASE();
    d.position_scale = NAN;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "position_scale");
    CASE();
    d.position_scale = INFINITY;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "position_scale");
    CASE();
    d.position_scale = -1;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "position_scale");
    CASE();
    d.position_scale = 1e300;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "position_scale");
    CASE();
    d.x = HOST_VIEW(K_OUT_AT, POSENC_DTYPE_F32, TOKENS, D_MODEL);
    d.input_scale = NAN;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "input_scale");
    CASE();
    d.input_scale = 2; /* without x: it would scale nothing */
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "input_scale");
    CASE();
    d.output_scale = INFINITY;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_ARGUMENT, "output_scale");

    /* Layouts. */
    CASE();
    d.out.strides[0] = D_MODEL * 2; /* rows 16 bytes apart but 32 bytes long */
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_LAYOUT, "out.strides");
    CASE();
    d.out.strides[1] = -4;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_LAYOUT, "out.strides");
    CASE();
    d.out.offset = 2;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_LAYOUT, "out.offset");
    CASE();
    d.out.shape[0] = 8;
    d.out.strides[0] = INT64_C(1) << 61;
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_LAYOUT, "out.strides");
    CASE(); /* x one element ahead of out */
    d.x = HOST_VIEW(Q_OUT_AT + 4, POSENC_DTYPE_F32, TOKENS, D_MODEL);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_LAYOUT, "x|out");
    CASE(); /* positions inside out */
    d.positions = HOST_VIEW(Q_OUT_AT + 16, POSENC_DTYPE_I32, TOKENS);
    EXPECT_SINUSOIDAL(ctx, &d, POSENC_INVALID_LAYOUT, "positions|out");
    CASE(); /* x is out itself: adding in place */
    d.x = d.out;
    if (EXPECT_SINUSOIDAL(ctx, &d, POSENC_OK, "") == POSENC_OK) {
        /* row 0: sin 0 = 0 added to even entries, cos 0 = 1 to odd ones */
        for (int i = 0; i < D_MODEL; i++) {
            double expect = before_f32(Q_OUT_AT, (size_t)i) + (i % 2 ? 1.0 : 0.0);
            CHECK(fabs(arena_f32(Q_OUT_AT, (size_t)i) - expect) <= TOLERANCE);
        }
    }

    /* out on a buffer too small for it. */
    posenc_buffer *buffer = NULL;
    posenc_buffer_desc bd = {.size = TOKENS * D_MODEL * 4};
    CHECK_OK(posenc_buffer_create(ctx, &bd, &buffer));
    if (buffer) {
        CASE();
        CHECK_OK(posenc_buffer_upload(buffer, 0, arena, bd.size));
        d.out = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2,
                                        (const int64_t[]){TOKENS + 1, D_MODEL});
        EXPECT_SINUSOIDAL(ctx, &d, POSENC_OUT_OF_BOUNDS, "out");
        d.out = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2,
                                        (const int64_t[]){TOKENS, D_MODEL});
        d.out.offset = 4;
        EXPECT_SINUSOIDAL(ctx, &d, POSENC_OUT_OF_BOUNDS, "out");
        d.out.offset = 0;
        EXPECT_SINUSOIDAL(ctx, &d, POSENC_OK, "");
        posenc_buffer_destroy(buffer);
    }
#undef CASE
}

static void run_device(posenc_context *ctx, const posenc_device_info *info)
{
    (void)info;
    CHECK(posenc_context_last_error(ctx) != NULL);
    check_rope_works(ctx, 10, __LINE__);
    check_sinusoidal_works(ctx, __LINE__);

    test_null_arguments(ctx);
    test_rope_tensors(ctx);
    check_rope_works(ctx, 11, __LINE__);
    test_rope_scalars(ctx);
    test_rope_scaling(ctx);
    test_rope_multimodal(ctx);
    test_rope_layouts(ctx);
    test_rope_buffers(ctx);
    check_rope_works(ctx, 12, __LINE__);
    test_sinusoidal_errors(ctx);
    check_sinusoidal_works(ctx, __LINE__);
    /* A failed call right before a valid one leaves no state behind. */
    posenc_rope_desc bad = base_rope();
    bad.rotary_dim = 3;
    CHECK_STATUS(posenc_rope(ctx, &bad), POSENC_INVALID_SHAPE);
    check_rope_works(ctx, 13, __LINE__);
    CHECK_STATUS(posenc_sinusoidal(ctx, NULL), POSENC_INVALID_ARGUMENT);
    check_sinusoidal_works(ctx, __LINE__);
}

int main(void)
{
    test_names();
    test_context_free_calls();
    test_for_each_device(run_device);
    return test_finish("test_errors");
}
