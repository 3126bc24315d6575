/* SPDX-License-Identifier: MIT */
/* What only the OpenCL backend has, on every OpenCL device present:
 * - a host tensor spanning more than the device's largest allocation is refused with
 *   POSENC_UNSUPPORTED and a message naming it, and its memory is not touched; so is a host
 *   KV cache, which is bound whole however few rows a call writes;
 * - host memory that is not aligned to its element size works (staging realigns it), and host
 *   tensors misaligned against each other in one memory are either handled or refused cleanly;
 * - the copy roofline, in place and write only, on a device buffer and on wrapped memory;
 * - RoPE on tensors with contiguous dims (the contiguous kernel, on CPU-type devices) gives
 *   the very bits RoPE gives on the same values with their elements two apart (the general
 *   kernel): styles, dtypes, partial rotary, out of place, inverse, positions kinds, M-RoPE
 *   and the paged KV cache with v.
 * The operations themselves are covered by the tests every device runs. Skipped without an
 * OpenCL device, unless POSENC_TEST_REQUIRE_DEVICES names opencl: then that is a failure.
 */
#include "required_devices.h"
#include "test_common.h"

#include <posenc/posenc_diagnostics.h>
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A view reaching past CL_DEVICE_MAX_MEM_ALLOC_SIZE, over reserved but never touched memory. */
static void test_larger_than_one_allocation(posenc_context *ctx, const posenc_device_info *info)
{
    uint64_t span = info->max_buffer_bytes + (UINT64_C(1) << 20);
    if (span > (UINT64_C(1) << 40) || span > SIZE_MAX)
        return;
    size_t bytes = (size_t)span + 4096;
    unsigned char *memory = support_memory_map(bytes);
    if (!memory) {
        printf("    (no address space for a %llu-byte view: not checked)\n",
               (unsigned long long)span);
        return;
    }
    float *first = (float *)memory, *last = (float *)(memory + span - 64);
    for (int i = 0; i < 16; i++)
        first[i] = last[i] = (float)i;

    /* Two tokens of one 16-dim head, the second just past the largest allocation. */
    posenc_rope_desc rope = {0};
    rope.q = posenc_tensor_of_host(memory, POSENC_DTYPE_F32, 3, (const int64_t[]){2, 1, 16});
    rope.q.strides[0] = (int64_t)(span - 64);
    CHECK_STATUS(posenc_rope(ctx, &rope), POSENC_UNSUPPORTED);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "q");
    CHECK_MESSAGE(posenc_context_last_error(ctx), "largest allocation");
    bool untouched = true;
    for (int i = 0; i < 16; i++)
        untouched &= first[i] == (float)i && last[i] == (float)i;
    CHECK(untouched);

    posenc_sinusoidal_desc table = {0};
    table.out = posenc_tensor_of_host(memory, POSENC_DTYPE_F32, 2, (const int64_t[]){2, 16});
    table.out.strides[0] = (int64_t)(span - 64);
    CHECK_STATUS(posenc_sinusoidal(ctx, &table), POSENC_UNSUPPORTED);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "out");
    printf("    a %llu-byte host view: %s\n", (unsigned long long)span,
           posenc_context_last_error(ctx));

    /* A KV cache is bound whole (any slot may be written), so it must fit one allocation
     * however few rows the call writes: refused, naming the cache. */
    float q_head[16], k_head[16], v_head[16], small_cache[2 * 16];
    int32_t slot = 1;
    for (int i = 0; i < 16; i++)
        q_head[i] = k_head[i] = v_head[i] = (float)i;
    const int64_t head_shape[3] = {1, 1, 16}, cache_shape[3] = {2, 1, 16};
    posenc_tensor big_cache = posenc_tensor_of_host(memory, POSENC_DTYPE_F32, 3, cache_shape);
    big_cache.strides[0] = (int64_t)(span - 64);
    const char *caches[2] = {"k_cache", "v_cache"};
    for (int which = 0; which < 2; which++) {
        posenc_rope_desc cached = {0};
        cached.q = posenc_tensor_of_host(q_head, POSENC_DTYPE_F32, 3, head_shape);
        cached.k = posenc_tensor_of_host(k_head, POSENC_DTYPE_F32, 3, head_shape);
        cached.slot_mapping = posenc_tensor_of_host(&slot, POSENC_DTYPE_I32, 1,
                                                    (const int64_t[]){1});
        cached.v = posenc_tensor_of_host(v_head, POSENC_DTYPE_F32, 3, head_shape);
        posenc_tensor small = posenc_tensor_of_host(small_cache, POSENC_DTYPE_F32, 3,
                                                    cache_shape);
        cached.k_cache = which == 0 ? big_cache : small;
        cached.v_cache = which == 0 ? small : big_cache;
        CHECK_STATUS(posenc_rope(ctx, &cached), POSENC_UNSUPPORTED);
        CHECK_MESSAGE(posenc_context_last_error(ctx), caches[which]);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "largest allocation");
    }
    untouched = q_head[15] == 15.0f && k_head[15] == 15.0f;
    for (int i = 0; i < 16; i++)
        untouched &= first[i] == (float)i && last[i] == (float)i;
    CHECK(untouched);
    printf("    a %llu-byte host KV cache: %s\n", (unsigned long long)span,
           posenc_context_last_error(ctx));
    support_memory_unmap(memory, bytes);

    /* The context still works afterwards. */
    float q[2][16];
    for (int i = 0; i < 32; i++)
        q[i / 16][i % 16] = 1.0f;
    rope.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, (const int64_t[]){2, 1, 16});
    CHECK_OK(posenc_rope(ctx, &rope));
}

/* RoPE of `count` tokens x one head of HEAD_DIM at positions 0.., checked against float64. */
enum { HEAD_DIM = 8 };
static bool rope_matches(const unsigned char *out, const float *input, int count,
                         posenc_dtype dtype)
{
    posenc_rope_desc desc = {0};
    double inv_freq[HEAD_DIM / 2];
    double af = ref_rope_frequencies(&desc, HEAD_DIM, inv_freq);
    ref_stats stats = {0};
    bool ok = true;
    size_t element = posenc_dtype_size(dtype);
    for (int t = 0; t < count; t++) {
        double x[HEAD_DIM], expect[HEAD_DIM];
        for (int d = 0; d < HEAD_DIM; d++)
            x[d] = input[t * HEAD_DIM + d];
        ref_rope_head(x, expect, HEAD_DIM, HEAD_DIM, POSENC_ROPE_NEOX, inv_freq, t, af, false);
        for (int j = 0; j < HEAD_DIM / 2; j++) {
            double pair = hypot(x[j], x[j + HEAD_DIM / 2]);
            for (int d = j; d < HEAD_DIM; d += HEAD_DIM / 2)
                ok &= ref_check(&stats, dtype,
                                ref_load(dtype, out + ((size_t)t * HEAD_DIM + d) * element),
                                expect[d], pair, 0);
        }
    }
    return ok;
}

static void test_misaligned_host_memory(posenc_context *ctx)
{
    enum { TOKENS = 6, N = TOKENS * HEAD_DIM };
    static float input[N];
    test_rng rng = {5};
    for (int i = 0; i < N; i++)
        input[i] = (float)test_rng_uniform(&rng, -2.0, 2.0);
    static unsigned char storage[4 * N * 4 + 64];
    const int64_t shape[3] = {TOKENS, 1, HEAD_DIM};

    /* f32 two bytes off, f16 one byte off: element-misaligned host pointers. */
    const posenc_dtype dtypes[] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    for (size_t d = 0; d < 3; d++) {
        posenc_dtype dtype = dtypes[d];
        size_t element = posenc_dtype_size(dtype);
        unsigned char *q = storage + (element == 4 ? 2 : 1);
        float rounded[N];
        for (int i = 0; i < N; i++) {
            rounded[i] = ref_round_to(dtype, input[i]);
            ref_store(dtype, q + (size_t)i * element, rounded[i]);
        }
        posenc_rope_desc rope = {0};
        rope.q = posenc_tensor_of_host(q, dtype, 3, shape);
        CHECK_OK(posenc_rope(ctx, &rope));
        if (!rope_matches(q, rounded, TOKENS, dtype)) {
            test_failures++;
            fprintf(stderr, "misaligned %s host tensor: wrong result\n", posenc_dtype_name(dtype));
        }
    }

    /* f32 q and i32 positions interleaved in one memory and misaligned against each other
     * (q rows 2 bytes off a 4-byte boundary, positions 3 bytes off): a right result or a clean
     * refusal, never a crash or a wrong answer. */
    enum { ROW = HEAD_DIM * 4 + 8, AT = HEAD_DIM * 4 + 1 };
    unsigned char *base = storage + 2;
    for (int t = 0; t < TOKENS; t++) {
        memcpy(base + (size_t)t * ROW, &input[t * HEAD_DIM], HEAD_DIM * 4);
        int32_t position = t;
        memcpy(base + (size_t)t * ROW + AT, &position, 4);
    }
    unsigned char before[TOKENS * ROW];
    memcpy(before, base, sizeof before);
    posenc_rope_desc mixed = {0};
    mixed.q = posenc_tensor_of_host(base, POSENC_DTYPE_F32, 3, shape);
    mixed.q.strides[0] = ROW;
    mixed.positions = posenc_tensor_of_host(base + AT, POSENC_DTYPE_I32, 1,
                                            (const int64_t[]){TOKENS});
    mixed.positions.strides[0] = ROW;
    posenc_status status = posenc_rope(ctx, &mixed);
    CHECK(status == POSENC_OK || status == POSENC_UNSUPPORTED);
    if (status == POSENC_UNSUPPORTED) {
        CHECK_MESSAGE(posenc_context_last_error(ctx), "misaligned");
        CHECK(memcmp(before, base, sizeof before) == 0);
        printf("    mutually misaligned host tensors: %s\n", posenc_context_last_error(ctx));
    } else if (status == POSENC_OK) {
        float rows[N];
        for (int t = 0; t < TOKENS; t++)
            memcpy(&rows[t * HEAD_DIM], base + (size_t)t * ROW, HEAD_DIM * 4);
        CHECK(rope_matches((const unsigned char *)rows, input, TOKENS, POSENC_DTYPE_F32));
    }
}

static void test_roofline(posenc_context *ctx)
{
    enum { WORDS = 4096 + 3 };
    static float host[WORDS + 8], back[WORDS + 8];
    for (int i = 0; i < WORDS + 8; i++)
        host[i] = (float)(i % 97) - 48.0f;
    for (int wrapped = 0; wrapped < 2; wrapped++) {
        float original[WORDS + 8];
        memcpy(original, host, sizeof original);
        posenc_buffer_desc desc = {.size = sizeof host};
        if (wrapped)
            desc.host_memory = host;
        else
            desc.initial_data = host;
        posenc_buffer *buffer = NULL;
        CHECK_OK(posenc_buffer_create(ctx, &desc, &buffer));
        if (!buffer)
            continue;
        /* In place from word 4: the values stay (x + 0). */
        CHECK_OK(posenc_diagnostics_roofline(ctx, buffer, 16, WORDS * 4, false));
        CHECK_OK(posenc_buffer_download(buffer, 0, back, sizeof back));
        CHECK(memcmp(back, original, sizeof back) == 0);
        /* Write only: word i of the range becomes i; the rest stays. */
        CHECK_OK(posenc_diagnostics_roofline(ctx, buffer, 16, WORDS * 4, true));
        CHECK_OK(posenc_buffer_download(buffer, 0, back, sizeof back));
        bool ok = true;
        for (int i = 0; i < WORDS + 8; i++) {
            float expect = i >= 4 && i < 4 + WORDS ? (float)(i - 4) : original[i];
            ok &= back[i] == expect;
        }
        CHECK(ok);
        posenc_buffer_destroy(buffer);
    }
}

/* ---------------------------------------------------------------------------------------------
 * The contiguous RoPE kernel against the general one, bit for bit
 */

enum { LT = 5, LQ = 4, LK = 2, LSLOTS = 8, LDIM_MAX = 112 };

typedef struct layout_case {
    const char *name;
    posenc_rope_style style;
    uint32_t head_dim, rotary_dim, rotary_offset;
    bool out_of_place, inverse, kv_cache, mrope, float_positions;
    double attention_factor;
} layout_case;

static const layout_case layout_cases[] = {
    {"neox q+k in place", POSENC_ROPE_NEOX, 32, 0, 0, false, false, false, false, false, 0},
    {"gptj out of place, inverse, factor", POSENC_ROPE_GPTJ, 32, 0, 0, true, true, false, false,
     false, 0.7},
    /* Rows from dim 2: 16-bit runs not 16-byte aligned, converted without the device's own
     * vector conversions. */
    {"neox 16 of 48 from dim 2 in place", POSENC_ROPE_NEOX, 48, 16, 2, false, false, false,
     false, false, 0},
    {"gptj f32 positions", POSENC_ROPE_GPTJ, 64, 0, 0, false, false, false, false, true, 0},
    /* Three blocks of 8 pairs: two as one run of 16, then one alone. */
    {"gptj 48", POSENC_ROPE_GPTJ, 48, 0, 0, false, false, false, false, false, 0},
    {"neox 48 of 56 from dim 2 in place", POSENC_ROPE_NEOX, 56, 48, 2, false, false, false,
     false, false, 0},
    /* 16-bit runs of 16 aligned to 16 bytes, not 32. */
    {"neox 32 of 48 from dim 8 in place", POSENC_ROPE_NEOX, 48, 32, 8, false, false, false,
     false, false, 0},
    {"neox M-RoPE", POSENC_ROPE_NEOX, 32, 0, 0, false, false, false, true, false, 0},
    /* Seven blocks: bf16 takes word units (four blocks NeoX, two GPT-J), then a pair of blocks
     * and one alone; and word units from dim 2. */
    {"neox 112", POSENC_ROPE_NEOX, 112, 0, 0, false, false, false, false, false, 0},
    {"gptj 112 out of place", POSENC_ROPE_GPTJ, 112, 0, 0, true, false, false, false, false, 0},
    {"neox 64 of 68 from dim 2", POSENC_ROPE_NEOX, 68, 64, 2, false, false, false, false, false,
     0},
    {"gptj 96 of 98 from dim 2 inverse", POSENC_ROPE_GPTJ, 98, 96, 2, false, true, false, false,
     false, 0},
    {"neox kv cache with v", POSENC_ROPE_NEOX, 32, 0, 0, false, false, true, false, false, 0},
    {"gptj kv cache and k_out", POSENC_ROPE_GPTJ, 64, 0, 0, true, false, true, false, false, 0},
};

/* A host tensor of `shape`, row-major with its elements `spread` apart. */
static posenc_tensor spread_tensor(void *base, posenc_dtype dtype, int ndim, const int64_t *shape,
                                   int spread)
{
    posenc_tensor tensor = posenc_tensor_of_host(base, dtype, ndim, shape);
    int64_t stride = (int64_t)posenc_dtype_size(dtype) * spread;
    for (int d = ndim - 1; d >= 0; d--) {
        tensor.strides[d] = stride;
        stride *= shape[d];
    }
    return tensor;
}

/* The tensors of one call, each as `count` elements `spread` apart. */
typedef struct layout_data {
    unsigned char q[LT * LQ * LDIM_MAX * 4 * 2], q_out[LT * LQ * LDIM_MAX * 4 * 2];
    unsigned char k[LT * LK * LDIM_MAX * 4 * 2], k_out[LT * LK * LDIM_MAX * 4 * 2];
    unsigned char v[LT * LK * LDIM_MAX * 4 * 2];
    unsigned char k_cache[LSLOTS * LK * LDIM_MAX * 4 * 2];
    unsigned char v_cache[LSLOTS * LK * LDIM_MAX * 4 * 2];
} layout_data;

/* Fills every tensor from one seed: the same element values whatever the spread. Some are
 * tiny and some huge, so that f16 results include subnormals and overflows to infinity; bf16
 * has NaNs too (f16 NaNs may keep more of their payload in one kernel than in the other). */
static void layout_fill(layout_data *data, posenc_dtype dtype, int spread)
{
    size_t element = posenc_dtype_size(dtype);
    memset(data, 0x5a, sizeof *data);
    unsigned char *tensors[] = {data->q, data->q_out, data->k, data->k_out, data->v,
                                data->k_cache, data->v_cache};
    size_t counts[] = {sizeof data->q, sizeof data->q_out, sizeof data->k, sizeof data->k_out,
                       sizeof data->v, sizeof data->k_cache, sizeof data->v_cache};
    test_rng rng = {99};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        size_t count = counts[i] / (element * 2);
        for (size_t e = 0; e < count; e++) {
            double value = test_rng_uniform(&rng, -3, 3);
            value *= e % 7 == 3 ? 1e-6 : e % 11 == 5 ? 21000.0 : 1.0;
            if (dtype == POSENC_DTYPE_BF16 && e % 13 == 6)
                value = NAN;
            ref_store(dtype, tensors[i] + e * spread * element, value);
        }
    }
}

static void layout_run(posenc_context *ctx, const layout_case *c, posenc_dtype dtype, int spread,
                       layout_data *data)
{
    static const int32_t positions_i32[LT] = {0, 7, -3, 123456789, 2147483647};
    static const float positions_f32[LT] = {0.5f, -1234.25f, 3.0f, 65536.75f, 1e6f};
    static const int32_t positions_mrope[LT * 3] = {0, 0, 0, 5, 1, 2, 5, 2, 1, 9, 40, 3,
                                                    100000, 7, 7};
    static const int32_t slots[LT] = {3, -1, 0, 7, LSLOTS + 2}; /* padding, past the end */
    layout_fill(data, dtype, spread);
    uint32_t dim = c->head_dim;
    posenc_rope_desc rope = {0};
    rope.q = spread_tensor(data->q, dtype, 3, (const int64_t[]){LT, LQ, dim}, spread);
    rope.k = spread_tensor(data->k, dtype, 3, (const int64_t[]){LT, LK, dim}, spread);
    if (c->out_of_place) {
        rope.q_out = spread_tensor(data->q_out, dtype, 3, (const int64_t[]){LT, LQ, dim}, spread);
        rope.k_out = spread_tensor(data->k_out, dtype, 3, (const int64_t[]){LT, LK, dim}, spread);
    }
    if (c->kv_cache) {
        const int64_t cache_shape[3] = {LSLOTS, LK, dim};
        rope.k_cache = spread_tensor(data->k_cache, dtype, 3, cache_shape, spread);
        rope.v_cache = spread_tensor(data->v_cache, dtype, 3, cache_shape, spread);
        rope.v = spread_tensor(data->v, dtype, 3, (const int64_t[]){LT, LK, dim}, spread);
        rope.slot_mapping = posenc_tensor_of_host((void *)slots, POSENC_DTYPE_I32, 1,
                                                  (const int64_t[]){LT});
    }
    if (c->mrope) {
        rope.multimodal = POSENC_ROPE_MROPE;
        rope.mrope_section[0] = 4, rope.mrope_section[1] = 6, rope.mrope_section[2] = 6;
        rope.positions = posenc_tensor_of_host((void *)positions_mrope, POSENC_DTYPE_I32, 2,
                                               (const int64_t[]){LT, 3});
    } else if (c->float_positions) {
        rope.positions = posenc_tensor_of_host((void *)positions_f32, POSENC_DTYPE_F32, 1,
                                               (const int64_t[]){LT});
    } else {
        rope.positions = posenc_tensor_of_host((void *)positions_i32, POSENC_DTYPE_I32, 1,
                                               (const int64_t[]){LT});
    }
    rope.rotary_dim = c->rotary_dim;
    rope.rotary_offset = c->rotary_offset;
    rope.style = c->style;
    rope.inverse = c->inverse;
    rope.attention_factor = c->attention_factor;
    rope.theta = 500000.0;
    CHECK_OK(posenc_rope(ctx, &rope));
}

/* Element by element, the packed call's outputs against the spread call's. */
static unsigned layout_compare(const unsigned char *packed, const unsigned char *spread,
                               size_t bytes, size_t element)
{
    unsigned mismatches = 0;
    for (size_t e = 0; e < bytes / (element * 2); e++)
        mismatches += memcmp(packed + e * element, spread + e * 2 * element, element) != 0;
    return mismatches;
}

static void test_contiguous_matches_general(posenc_context *ctx, const posenc_device_info *info)
{
    static layout_data packed, spread;
    const posenc_dtype dtypes[] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    for (size_t i = 0; i < sizeof layout_cases / sizeof layout_cases[0]; i++) {
        for (size_t d = 0; d < 3; d++) {
            const layout_case *c = &layout_cases[i];
            size_t element = posenc_dtype_size(dtypes[d]);
            layout_run(ctx, c, dtypes[d], 1, &packed);
            layout_run(ctx, c, dtypes[d], 2, &spread);
            unsigned mismatches =
                layout_compare(packed.q, spread.q, sizeof packed.q, element) +
                layout_compare(packed.q_out, spread.q_out, sizeof packed.q_out, element) +
                layout_compare(packed.k, spread.k, sizeof packed.k, element) +
                layout_compare(packed.k_out, spread.k_out, sizeof packed.k_out, element) +
                layout_compare(packed.k_cache, spread.k_cache, sizeof packed.k_cache, element) +
                layout_compare(packed.v_cache, spread.v_cache, sizeof packed.v_cache, element);
            if (mismatches) {
                test_failures++;
                fprintf(stderr, "%s: %s %s: %u elements differ between contiguous and strided "
                        "tensors\n", info->name, c->name, posenc_dtype_name(dtypes[d]),
                        mismatches);
            }
        }
    }
    if (info->type != POSENC_DEVICE_CPU)
        printf("    not a CPU-type device: both layouts ran the general kernel\n");
}

int main(void)
{
    const char *reason = "";
    if (posenc_backend_status(POSENC_BACKEND_OPENCL, &reason) != POSENC_OK) {
        return test_device_absent("test_opencl", "opencl", reason);
    }
    uint32_t count = 0, opencl_devices = 0;
    CHECK_OK(posenc_device_count(&count));
    for (uint32_t i = 0; i < count; i++) {
        posenc_device_info info;
        if (posenc_device_get(i, &info) != POSENC_OK || info.backend != POSENC_BACKEND_OPENCL)
            continue;
        posenc_context *ctx = test_context_for_device(i);
        CHECK(ctx != NULL);
        if (!ctx)
            continue;
        int before = test_failures;
        test_larger_than_one_allocation(ctx, &info);
        test_misaligned_host_memory(ctx);
        test_roofline(ctx);
        test_contiguous_matches_general(ctx, &info);
        printf("  opencl   %-40s %s\n", info.name, test_failures == before ? "ok" : "FAILED");
        posenc_context_destroy(ctx);
        opencl_devices++;
    }
    CHECK(opencl_devices > 0);
    return test_finish("test_opencl");
}
