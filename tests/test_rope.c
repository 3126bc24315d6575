/* SPDX-License-Identifier: MIT */
/* RoPE against the float64 reference on every device: styles, partial rotary dims, q/k with
 * grouped heads, positions, strided and fused layouts, dtypes, frequencies and scalings, and the
 * three kinds of memory. Bytes outside the outputs must stay untouched.
 *
 * Tolerance (reference.h): |out - ref| <= 8 * 2^-24 * |ref pair| for f32, the header's promise;
 * f16/bf16 add one ulp of the output type. Pass-through dims must be bit-exact copies. */
#include "reference.h"
#include "test_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum positions_kind {
    POS_ABSENT = 0,    /* position_offset + token index */
    POS_I32 = 1,       /* i32 [tokens], shared by every batch */
    POS_I32_BATCH = 2, /* i32 [batch, tokens] */
    POS_F32 = 3,       /* f32 [tokens] */
    POS_F32_BATCH = 4, /* f32 [batch, tokens] */
} positions_kind;

typedef enum layout_kind {
    LAYOUT_PACKED = 0,      /* row-major [batch, tokens, heads, dim], strides left 0 */
    LAYOUT_HEADS_FIRST = 1, /* stored [batch, heads, tokens, dim], passed with swapped strides */
    LAYOUT_PADDED = 2,      /* gaps after each head, token and batch, and a leading offset */
    LAYOUT_SPREAD = 3,      /* every other element: innermost stride of two elements */
    LAYOUT_FUSED_QKV = 4,   /* q and k are slices of one [batch, tokens, q+k+v heads, dim] */
} layout_kind;

typedef struct rope_case {
    const char *name;
    posenc_dtype dtype;
    int64_t batch, tokens, q_heads, k_heads; /* k_heads 0: q only */
    uint32_t head_dim, rotary_dim;           /* rotary_dim 0: the default, head_dim */
    uint32_t ndim;                           /* view rank; 3 needs batch 1, 2 also heads 1 */
    posenc_rope_style style;
    double theta, attention_factor;
    bool inverse;
    const double *inv_freq;
    posenc_rope_scaling scaling;
    positions_kind positions;
    int32_t position_offset;
    double position_min, position_max; /* random positions in this range; default [0, 4096) */
    layout_kind layout;                /* of q and k */
    bool out_of_place;                 /* q_out and k_out: packed, in their own memory */
    test_memory_kind memory;
} rope_case;

static const double caller_inv_freq[8] = {1.0, 0.75, 0.3, 0.1, 0.031, 0.01, 1e-3, 1.5e-5};
static const double freq_factors[8] = {1.0, 1.0, 1.5, 2.0, 4.0, 8.0, 8.0, 32.0};
static const double freq_factors_32[32] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 8, 8, 8, 8, 8, 8, 8,
};

#define F32 POSENC_DTYPE_F32
#define F16 POSENC_DTYPE_F16
#define BF16 POSENC_DTYPE_BF16
#define NEOX POSENC_ROPE_NEOX
#define GPTJ POSENC_ROPE_GPTJ

static const rope_case cases[] = {
    /* styles, full and partial rotary dims, odd and tiny head dims */
    {.name = "neox full", .dtype = F32, .batch = 2, .tokens = 7, .q_heads = 4, .head_dim = 64,
     .style = NEOX, .positions = POS_I32},
    {.name = "gptj full", .dtype = F32, .batch = 2, .tokens = 7, .q_heads = 4, .head_dim = 64,
     .style = GPTJ, .positions = POS_I32},
    {.name = "neox 64 of 128", .dtype = F32, .batch = 1, .tokens = 9, .q_heads = 3,
     .head_dim = 128, .rotary_dim = 64, .style = NEOX, .positions = POS_I32},
    {.name = "gptj 64 of 128", .dtype = F32, .batch = 1, .tokens = 9, .q_heads = 3,
     .head_dim = 128, .rotary_dim = 64, .style = GPTJ, .positions = POS_I32},
    {.name = "neox 2 of 6", .dtype = F32, .batch = 2, .tokens = 5, .q_heads = 3, .k_heads = 1,
     .head_dim = 6, .rotary_dim = 2, .style = NEOX, .positions = POS_I32},
    {.name = "gptj 2 of 6", .dtype = F32, .batch = 2, .tokens = 5, .q_heads = 3, .k_heads = 1,
     .head_dim = 6, .rotary_dim = 2, .style = GPTJ, .positions = POS_I32},
    {.name = "neox 16 of 17 out of place", .dtype = F32, .batch = 1, .tokens = 5, .q_heads = 3,
     .k_heads = 1, .head_dim = 17, .rotary_dim = 16, .style = NEOX, .positions = POS_I32,
     .out_of_place = true}, /* one dim passes through */
    {.name = "neox dim 6", .dtype = F32, .batch = 1, .tokens = 11, .q_heads = 2, .k_heads = 2,
     .head_dim = 6, .style = NEOX, .positions = POS_ABSENT},
    {.name = "gptj 8 of 10", .dtype = F32, .batch = 1, .tokens = 11, .q_heads = 2,
     .head_dim = 10, .rotary_dim = 8, .style = GPTJ, .positions = POS_ABSENT},
    {.name = "neox dim 10", .dtype = F32, .batch = 1, .tokens = 11, .q_heads = 2,
     .head_dim = 10, .style = NEOX, .positions = POS_ABSENT, .out_of_place = true},
    {.name = "neox dim 2", .dtype = F32, .batch = 3, .tokens = 4, .q_heads = 5, .k_heads = 1,
     .head_dim = 2, .style = NEOX, .positions = POS_I32_BATCH},
    {.name = "gptj dim 2", .dtype = F32, .batch = 3, .tokens = 4, .q_heads = 5, .k_heads = 1,
     .head_dim = 2, .style = GPTJ, .positions = POS_I32_BATCH},

    /* in place / out of place, q only / q+k with grouped heads, right-aligned views */
    {.name = "gqa 4:1 in place", .dtype = F32, .batch = 2, .tokens = 6, .q_heads = 8,
     .k_heads = 2, .head_dim = 64, .style = NEOX, .positions = POS_I32},
    {.name = "gqa 4:1 out of place", .dtype = F32, .batch = 2, .tokens = 6, .q_heads = 8,
     .k_heads = 2, .head_dim = 64, .style = GPTJ, .positions = POS_I32, .out_of_place = true},
    {.name = "3-d view", .dtype = F32, .batch = 1, .tokens = 13, .q_heads = 4, .k_heads = 1,
     .head_dim = 32, .ndim = 3, .style = NEOX, .positions = POS_I32},
    {.name = "2-d view", .dtype = F32, .batch = 1, .tokens = 13, .q_heads = 1, .k_heads = 1,
     .head_dim = 32, .ndim = 2, .style = GPTJ, .positions = POS_ABSENT, .position_offset = 100,
     .out_of_place = true},

    /* positions */
    {.name = "offset positions", .dtype = F32, .batch = 2, .tokens = 8, .q_heads = 2,
     .k_heads = 1, .head_dim = 32, .style = NEOX, .positions = POS_ABSENT,
     .position_offset = 12345},
    {.name = "negative offset", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2,
     .head_dim = 32, .style = GPTJ, .positions = POS_ABSENT, .position_offset = -5},
    {.name = "i32 per batch", .dtype = F32, .batch = 3, .tokens = 5, .q_heads = 4, .k_heads = 2,
     .head_dim = 32, .style = NEOX, .positions = POS_I32_BATCH, .position_min = -1000,
     .position_max = 100000},
    {.name = "f32 fractional", .dtype = F32, .batch = 2, .tokens = 6, .q_heads = 2, .k_heads = 1,
     .head_dim = 32, .style = NEOX, .positions = POS_F32, .position_min = -50,
     .position_max = 5000},
    {.name = "f32 per batch", .dtype = F32, .batch = 2, .tokens = 6, .q_heads = 2, .k_heads = 1,
     .head_dim = 32, .style = GPTJ, .positions = POS_F32_BATCH, .position_min = 0,
     .position_max = 3},

    /* strided layouts */
    {.name = "heads-first strides", .dtype = F32, .batch = 2, .tokens = 5, .q_heads = 4,
     .k_heads = 2, .head_dim = 32, .style = NEOX, .positions = POS_I32_BATCH,
     .layout = LAYOUT_HEADS_FIRST},
    {.name = "heads-first to packed", .dtype = F32, .batch = 2, .tokens = 5, .q_heads = 4,
     .k_heads = 2, .head_dim = 32, .style = GPTJ, .positions = POS_I32,
     .layout = LAYOUT_HEADS_FIRST, .out_of_place = true},
    {.name = "padded strides", .dtype = F32, .batch = 2, .tokens = 5, .q_heads = 3, .k_heads = 1,
     .head_dim = 16, .rotary_dim = 8, .style = NEOX, .positions = POS_I32,
     .layout = LAYOUT_PADDED},
    {.name = "padded strides f16", .dtype = F16, .batch = 2, .tokens = 5, .q_heads = 3,
     .k_heads = 1, .head_dim = 10, .style = GPTJ, .positions = POS_ABSENT,
     .layout = LAYOUT_PADDED, .out_of_place = true},
    {.name = "element stride 2", .dtype = F32, .batch = 1, .tokens = 5, .q_heads = 2,
     .k_heads = 1, .head_dim = 16, .style = NEOX, .positions = POS_I32,
     .layout = LAYOUT_SPREAD},
    {.name = "fused qkv", .dtype = F32, .batch = 2, .tokens = 5, .q_heads = 8, .k_heads = 2,
     .head_dim = 32, .style = NEOX, .positions = POS_I32_BATCH, .layout = LAYOUT_FUSED_QKV},
    {.name = "fused qkv partial bf16", .dtype = BF16, .batch = 1, .tokens = 7, .q_heads = 4,
     .k_heads = 4, .head_dim = 64, .rotary_dim = 32, .style = GPTJ, .positions = POS_ABSENT,
     .position_offset = 7, .layout = LAYOUT_FUSED_QKV},
    {.name = "fused qkv to packed", .dtype = F16, .batch = 2, .tokens = 3, .q_heads = 4,
     .k_heads = 1, .head_dim = 16, .style = NEOX, .positions = POS_I32,
     .layout = LAYOUT_FUSED_QKV, .out_of_place = true},

    /* dtypes */
    {.name = "f16 neox", .dtype = F16, .batch = 2, .tokens = 6, .q_heads = 4, .k_heads = 2,
     .head_dim = 64, .style = NEOX, .positions = POS_I32, .position_max = 30000},
    {.name = "f16 gptj partial", .dtype = F16, .batch = 1, .tokens = 6, .q_heads = 2,
     .k_heads = 1, .head_dim = 6, .rotary_dim = 4, .style = GPTJ, .positions = POS_F32,
     .out_of_place = true},
    {.name = "bf16 neox", .dtype = BF16, .batch = 2, .tokens = 6, .q_heads = 4, .k_heads = 2,
     .head_dim = 64, .style = NEOX, .positions = POS_I32, .position_max = 30000},
    {.name = "bf16 gptj out of place", .dtype = BF16, .batch = 2, .tokens = 6, .q_heads = 2,
     .k_heads = 2, .head_dim = 10, .style = GPTJ, .positions = POS_I32_BATCH,
     .out_of_place = true},

    /* frequencies, scalings, attention factor, inverse */
    {.name = "theta 500000", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2, .k_heads = 1,
     .head_dim = 128, .style = NEOX, .theta = 500000.0, .positions = POS_I32,
     .position_max = 131072},
    {.name = "theta 100", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2, .head_dim = 32,
     .style = GPTJ, .theta = 100.0, .positions = POS_I32},
    {.name = "theta 1e6 partial", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2,
     .head_dim = 96, .rotary_dim = 32, .style = NEOX, .theta = 1e6, .positions = POS_I32},
    {.name = "attention factor 0.5", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2,
     .k_heads = 1, .head_dim = 32, .style = NEOX, .attention_factor = 0.5,
     .positions = POS_I32},
    {.name = "attention factor 1.7 f16", .dtype = F16, .batch = 1, .tokens = 8, .q_heads = 2,
     .k_heads = 1, .head_dim = 32, .style = GPTJ, .attention_factor = 1.7,
     .positions = POS_I32, .out_of_place = true},
    {.name = "inverse", .dtype = F32, .batch = 2, .tokens = 8, .q_heads = 2, .k_heads = 1,
     .head_dim = 32, .style = NEOX, .inverse = true, .positions = POS_I32_BATCH},
    {.name = "inverse gptj partial", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2,
     .head_dim = 24, .rotary_dim = 16, .style = GPTJ, .inverse = true, .positions = POS_F32,
     .out_of_place = true},
    {.name = "caller inv_freq", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2,
     .k_heads = 1, .head_dim = 20, .rotary_dim = 16, .style = NEOX,
     .inv_freq = caller_inv_freq, .positions = POS_I32, .position_min = -100000,
     .position_max = 100000},
    {.name = "caller inv_freq gptj", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2,
     .head_dim = 16, .style = GPTJ, .inv_freq = caller_inv_freq, .positions = POS_F32},
    {.name = "caller inv_freq + freq_factors", .dtype = F32, .batch = 1, .tokens = 8,
     .q_heads = 2, .head_dim = 16, .style = NEOX, .inv_freq = caller_inv_freq,
     .scaling = {.freq_factors = freq_factors}, .positions = POS_I32},
    {.name = "freq_factors", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2, .k_heads = 1,
     .head_dim = 64, .style = NEOX, .theta = 500000.0,
     .scaling = {.freq_factors = freq_factors_32}, .positions = POS_I32},
    {.name = "linear x4", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2, .k_heads = 1,
     .head_dim = 64, .style = NEOX, .scaling = {.type = POSENC_ROPE_SCALING_LINEAR, .factor = 4},
     .positions = POS_I32, .position_max = 16384},
    {.name = "linear x2.5 gptj", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2,
     .head_dim = 32, .rotary_dim = 16, .style = GPTJ,
     .scaling = {.type = POSENC_ROPE_SCALING_LINEAR, .factor = 2.5}, .positions = POS_F32},
    {.name = "ntk x8", .dtype = F32, .batch = 1, .tokens = 8, .q_heads = 2, .k_heads = 1,
     .head_dim = 64, .style = NEOX, .scaling = {.type = POSENC_ROPE_SCALING_NTK, .factor = 8},
     .positions = POS_I32, .position_max = 32768},
    {.name = "ntk x3 theta 1e6 partial", .dtype = BF16, .batch = 1, .tokens = 8, .q_heads = 2,
     .head_dim = 128, .rotary_dim = 64, .style = GPTJ, .theta = 1e6,
     .scaling = {.type = POSENC_ROPE_SCALING_NTK, .factor = 3}, .positions = POS_I32},

    /* memory kinds */
    {.name = "buffers", .dtype = F32, .batch = 2, .tokens = 6, .q_heads = 4, .k_heads = 2,
     .head_dim = 32, .style = NEOX, .positions = POS_I32_BATCH, .memory = TEST_MEMORY_BUFFER},
    {.name = "buffers out of place", .dtype = F16, .batch = 2, .tokens = 6, .q_heads = 4,
     .k_heads = 2, .head_dim = 32, .style = GPTJ, .positions = POS_F32,
     .memory = TEST_MEMORY_BUFFER, .out_of_place = true},
    {.name = "buffers fused qkv", .dtype = F32, .batch = 1, .tokens = 6, .q_heads = 4,
     .k_heads = 2, .head_dim = 16, .style = NEOX, .positions = POS_ABSENT,
     .memory = TEST_MEMORY_BUFFER, .layout = LAYOUT_FUSED_QKV},
    {.name = "wrapped host memory", .dtype = F32, .batch = 2, .tokens = 6, .q_heads = 4,
     .k_heads = 2, .head_dim = 32, .style = NEOX, .positions = POS_I32,
     .memory = TEST_MEMORY_WRAPPED},
    {.name = "wrapped heads-first out of place", .dtype = BF16, .batch = 2, .tokens = 6,
     .q_heads = 4, .k_heads = 2, .head_dim = 32, .rotary_dim = 16, .style = GPTJ,
     .positions = POS_I32, .layout = LAYOUT_HEADS_FIRST, .memory = TEST_MEMORY_WRAPPED,
     .out_of_place = true},

    /* one large shape: enough work items to split across threads and work-groups */
    {.name = "large 2x512x(16+4)x128", .dtype = F32, .batch = 2, .tokens = 512, .q_heads = 16,
     .k_heads = 4, .head_dim = 128, .style = NEOX, .positions = POS_I32_BATCH,
     .position_max = 1 << 20},
};

/* A tensor as the test sees it: which memory, where, and byte strides. */
typedef struct view {
    int memory; /* index into the case's memories */
    uint64_t offset;
    int64_t shape[4];   /* batch, tokens, heads, dim */
    int64_t strides[4]; /* bytes */
    bool packed;        /* pass strides as 0 */
} view;

static uint64_t view_at(const view *v, int64_t b, int64_t t, int64_t h, int64_t d)
{
    return v->offset + (uint64_t)(b * v->strides[0] + t * v->strides[1] + h * v->strides[2] +
                                  d * v->strides[3]);
}

/* Strides and the bytes needed for a [b, t, h, d] tensor in one of the separate layouts. */
static size_t make_view(view *v, layout_kind layout, int64_t b, int64_t t, int64_t h, int64_t d,
                        int64_t e)
{
    v->shape[0] = b, v->shape[1] = t, v->shape[2] = h, v->shape[3] = d;
    v->offset = 0;
    v->packed = false;
    switch (layout) {
    case LAYOUT_HEADS_FIRST:
        v->strides[3] = e;
        v->strides[1] = d * e;
        v->strides[2] = t * d * e;
        v->strides[0] = h * t * d * e;
        return (size_t)(b * h * t * d * e);
    case LAYOUT_PADDED:
        v->offset = (uint64_t)(3 * e);
        v->strides[3] = e;
        v->strides[2] = (d + 3) * e;
        v->strides[1] = h * v->strides[2] + 2 * e;
        v->strides[0] = t * v->strides[1] + 5 * e;
        return (size_t)(v->offset + (uint64_t)(b * v->strides[0]) + (uint64_t)(4 * e));
    case LAYOUT_SPREAD:
        v->offset = (uint64_t)e;
        v->strides[3] = 2 * e;
        v->strides[2] = 2 * d * e + e;
        v->strides[1] = h * v->strides[2];
        v->strides[0] = t * v->strides[1];
        return (size_t)(v->offset + (uint64_t)(b * v->strides[0]) + (uint64_t)e);
    default:
        v->packed = true;
        v->strides[3] = e;
        v->strides[2] = d * e;
        v->strides[1] = h * d * e;
        v->strides[0] = t * h * d * e;
        return (size_t)(b * t * h * d * e);
    }
}

/* The library's view of `v`: rank 4, 3 ([tokens, heads, dim]) or 2 ([tokens, dim]). */
static posenc_tensor view_tensor(const view *v, const test_memory *memories, posenc_dtype dtype,
                                 uint32_t ndim)
{
    static const int kept[3][4] = {{1, 3}, {1, 2, 3}, {0, 1, 2, 3}};
    int64_t shape[4], strides[4];
    for (uint32_t i = 0; i < ndim; i++) {
        shape[i] = v->shape[kept[ndim - 2][i]];
        strides[i] = v->strides[kept[ndim - 2][i]];
    }
    return test_memory_tensor(&memories[v->memory], dtype, v->offset, ndim, shape,
                              v->packed ? NULL : strides);
}

/* Marks the bytes of every element of `v` in `mask`. */
static void mark_view(unsigned char *mask, const view *v, int64_t e)
{
    for (int64_t b = 0; b < v->shape[0]; b++)
        for (int64_t t = 0; t < v->shape[1]; t++)
            for (int64_t h = 0; h < v->shape[2]; h++)
                for (int64_t d = 0; d < v->shape[3]; d++)
                    memset(mask + view_at(v, b, t, h, d), 1, (size_t)e);
}

static void fill_noise(unsigned char *bytes, size_t size, test_rng *rng)
{
    for (size_t i = 0; i < size; i++)
        bytes[i] = (unsigned char)(test_rng_u32(rng) >> 24);
}

#define MAX_REPORTS 6

typedef struct case_run {
    const rope_case *rc;
    size_t case_index;
    int reports;
} case_run;

/* Compares one output tensor with the reference of its input values. */
static void check_tensor(case_run *run, const char *which, const view *in_view,
                         const view *out_view, const unsigned char *in_bytes,
                         const unsigned char *out_bytes, const double *values,
                         const double *positions, const double *inv_freq, double attention_factor,
                         uint32_t rotary_dim, ref_stats *stats)
{
    const rope_case *rc = run->rc;
    uint32_t head_dim = rc->head_dim;
    double x[256], ref[256], norm[256];
    for (int64_t b = 0; b < in_view->shape[0]; b++) {
        for (int64_t t = 0; t < in_view->shape[1]; t++) {
            double position = positions[b * in_view->shape[1] + t];
            for (int64_t h = 0; h < in_view->shape[2]; h++) {
                const double *head =
                    values + ((b * in_view->shape[1] + t) * in_view->shape[2] + h) * head_dim;
                memcpy(x, head, head_dim * sizeof *x);
                ref_rope_head(x, ref, head_dim, rotary_dim, rc->style, inv_freq, position,
                              attention_factor, rc->inverse);
                for (uint32_t j = 0; j < rotary_dim / 2; j++) {
                    uint32_t ia, ib;
                    ref_rope_pair(rc->style, rotary_dim, j, &ia, &ib);
                    norm[ia] = norm[ib] = hypot(ref[ia], ref[ib]);
                }
                for (uint32_t d = 0; d < head_dim; d++) {
                    uint64_t at = view_at(out_view, b, t, h, d);
                    size_t e = posenc_dtype_size(rc->dtype);
                    bool ok;
                    double out = ref_load(rc->dtype, out_bytes + at);
                    if (d < rotary_dim) {
                        ok = ref_check(stats, rc->dtype, out, ref[d], norm[d], 0.0);
                    } else {
                        /* pass-through: the very bits of the input */
                        ok = memcmp(out_bytes + at, in_bytes + view_at(in_view, b, t, h, d), e) ==
                             0;
                    }
                    if (!ok) {
                        test_failures++;
                        if (run->reports++ < MAX_REPORTS)
                            fprintf(stderr,
                                    "  case %zu '%s' %s[%lld,%lld,%lld,%u] position %.9g: "
                                    "got %.9g, expected %.9g (tolerance %.3g)%s\n",
                                    run->case_index, rc->name, which, (long long)b, (long long)t,
                                    (long long)h, d, position, out, ref[d],
                                    d < rotary_dim
                                        ? ref_tolerance(rc->dtype, ref[d], norm[d], 0.0)
                                        : 0.0,
                                    d < rotary_dim ? "" : " (pass-through not bit-exact)");
                    }
                }
            }
        }
    }
}

/* Every byte of `now` outside `mask` must equal `before`. */
static void check_untouched(case_run *run, const char *which, const unsigned char *before,
                            const unsigned char *now, const unsigned char *mask, size_t size)
{
    size_t changed = 0, first = 0;
    for (size_t i = 0; i < size; i++) {
        if ((!mask || !mask[i]) && before[i] != now[i]) {
            if (!changed)
                first = i;
            changed++;
        }
    }
    if (changed) {
        test_failures++;
        if (run->reports++ < MAX_REPORTS)
            fprintf(stderr, "  case %zu '%s': %zu bytes of %s outside the outputs changed "
                            "(first at byte %zu)\n",
                    run->case_index, run->rc->name, changed, which, first);
    }
}

enum { MEM_Q, MEM_K, MEM_Q_OUT, MEM_K_OUT, MEM_POSITIONS, MEM_COUNT };

static void run_case(posenc_context *context, size_t case_index, ref_stats *device_stats)
{
    const rope_case *rc = &cases[case_index];
    case_run run = {.rc = rc, .case_index = case_index};
    test_rng rng = {.state = 0x1234567ull + case_index * 7919ull};
    const int64_t e = (int64_t)posenc_dtype_size(rc->dtype);
    const uint32_t ndim = rc->ndim ? rc->ndim : 4;
    const uint32_t rotary_dim = rc->rotary_dim ? rc->rotary_dim : rc->head_dim;
    const int64_t B = rc->batch, T = rc->tokens, D = rc->head_dim;
    const bool has_k = rc->k_heads > 0;

    /* Tensors and their memories. */
    view q_view = {0}, k_view = {0}, q_out_view = {0}, k_out_view = {0};
    size_t sizes[MEM_COUNT] = {0};
    if (rc->layout == LAYOUT_FUSED_QKV) {
        int64_t row = (rc->q_heads + 2 * rc->k_heads) * D * e + 3 * e; /* 3 elements of gap */
        view base = {.memory = MEM_Q, .offset = (uint64_t)(2 * e)};
        base.shape[0] = B, base.shape[1] = T, base.shape[3] = D;
        base.strides[0] = T * row, base.strides[1] = row, base.strides[2] = D * e,
        base.strides[3] = e;
        q_view = base;
        q_view.shape[2] = rc->q_heads;
        k_view = base;
        k_view.shape[2] = rc->k_heads;
        k_view.offset += (uint64_t)(rc->q_heads * D * e);
        sizes[MEM_Q] = (size_t)(2 * e + B * T * row + 2 * e);
    } else {
        sizes[MEM_Q] = make_view(&q_view, rc->layout, B, T, rc->q_heads, D, e);
        q_view.memory = MEM_Q;
        if (has_k) {
            sizes[MEM_K] = make_view(&k_view, rc->layout, B, T, rc->k_heads, D, e);
            k_view.memory = MEM_K;
        }
    }
    if (rc->out_of_place) {
        sizes[MEM_Q_OUT] = make_view(&q_out_view, LAYOUT_PACKED, B, T, rc->q_heads, D, e);
        q_out_view.memory = MEM_Q_OUT;
        if (has_k) {
            sizes[MEM_K_OUT] = make_view(&k_out_view, LAYOUT_PACKED, B, T, rc->k_heads, D, e);
            k_out_view.memory = MEM_K_OUT;
        }
    } else {
        q_out_view = q_view;
        k_out_view = k_view;
    }
    bool float_positions = rc->positions == POS_F32 || rc->positions == POS_F32_BATCH;
    bool batch_positions = rc->positions == POS_I32_BATCH || rc->positions == POS_F32_BATCH;
    int64_t position_count = batch_positions ? B * T : T;
    if (rc->positions != POS_ABSENT)
        sizes[MEM_POSITIONS] = (size_t)position_count * 4;

    test_memory memories[MEM_COUNT];
    unsigned char *before[MEM_COUNT] = {0};
    memset(memories, 0, sizeof memories);
    bool ok = true;
    for (int m = 0; m < MEM_COUNT && ok; m++)
        if (sizes[m])
            ok = test_memory_create(&memories[m], context, rc->memory, sizes[m]);

    /* Values: exact in the dtype, in [-1, 1]; everything else random bytes. */
    double *q_values = malloc((size_t)(B * T * rc->q_heads * D) * sizeof(double));
    double *k_values = malloc((size_t)(B * T * (has_k ? rc->k_heads : 1) * D) * sizeof(double));
    double *positions = malloc((size_t)(B * T) * sizeof(double));
    if (!q_values || !k_values || !positions)
        ok = false;
    if (!ok) {
        test_failures++;
        goto done;
    }
    for (int m = 0; m < MEM_COUNT; m++)
        if (sizes[m])
            fill_noise(memories[m].bytes, sizes[m], &rng);
    for (int which = 0; which < (has_k ? 2 : 1); which++) {
        const view *v = which ? &k_view : &q_view;
        double *values = which ? k_values : q_values;
        int64_t i = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t h = 0; h < v->shape[2]; h++)
                    for (int64_t d = 0; d < D; d++, i++) {
                        values[i] = ref_round_to(rc->dtype,
                                                 (float)test_rng_uniform(&rng, -1.0, 1.0));
                        ref_store(rc->dtype, memories[v->memory].bytes + view_at(v, b, t, h, d),
                                  values[i]);
                    }
    }
    double lo = rc->position_min, hi = rc->position_max;
    if (lo == 0 && hi == 0)
        hi = 4096;
    for (int64_t i = 0; i < position_count && sizes[MEM_POSITIONS]; i++) {
        double p = test_rng_uniform(&rng, lo, hi);
        p = float_positions ? (double)(float)p : floor(p);
        ref_store(float_positions ? POSENC_DTYPE_F32 : POSENC_DTYPE_I32,
                  memories[MEM_POSITIONS].bytes + i * 4, p);
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            double *p = &positions[b * T + t];
            if (rc->positions == POS_ABSENT)
                *p = (double)rc->position_offset + (double)t;
            else
                *p = ref_load(float_positions ? POSENC_DTYPE_F32 : POSENC_DTYPE_I32,
                              memories[MEM_POSITIONS].bytes + (batch_positions ? b * T + t : t) * 4);
        }
    for (int m = 0; m < MEM_COUNT; m++) {
        if (!sizes[m])
            continue;
        before[m] = malloc(sizes[m]);
        if (!before[m] || !test_memory_upload(&memories[m])) {
            test_failures++;
            goto done;
        }
        memcpy(before[m], memories[m].bytes, sizes[m]);
    }

    posenc_rope_desc desc = {
        .q = view_tensor(&q_view, memories, rc->dtype, ndim),
        .position_offset = rc->position_offset,
        .rotary_dim = rc->rotary_dim,
        .style = rc->style,
        .theta = rc->theta,
        .attention_factor = rc->attention_factor,
        .inverse = rc->inverse,
        .inv_freq = rc->inv_freq,
        .scaling = rc->scaling,
    };
    uint32_t pairs = (rc->rotary_dim ? rc->rotary_dim : (uint32_t)rc->head_dim) / 2;
    if (desc.inv_freq)
        desc.inv_freq_count = pairs;
    if (desc.scaling.freq_factors)
        desc.scaling.factor_count = pairs;
    if (has_k)
        desc.k = view_tensor(&k_view, memories, rc->dtype, ndim);
    if (rc->out_of_place) {
        desc.q_out = view_tensor(&q_out_view, memories, rc->dtype, ndim);
        if (has_k)
            desc.k_out = view_tensor(&k_out_view, memories, rc->dtype, ndim);
    }
    if (rc->positions != POS_ABSENT) {
        int64_t shape[2] = {B, T};
        desc.positions = test_memory_tensor(
            &memories[MEM_POSITIONS], float_positions ? POSENC_DTYPE_F32 : POSENC_DTYPE_I32, 0,
            batch_positions ? 2 : 1, batch_positions ? shape : shape + 1, NULL);
    }
    posenc_status status = posenc_rope(context, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  case %zu '%s': posenc_rope returned %s: %s\n", case_index, rc->name,
                posenc_status_name(status), posenc_context_last_error(context));
        goto done;
    }
    for (int m = 0; m < MEM_COUNT; m++)
        if (sizes[m] && !test_memory_download(&memories[m]))
            goto done;

    double inv_freq[128];
    double attention_factor = ref_rope_frequencies(&desc, rotary_dim, inv_freq);
    ref_stats stats = {0};
    check_tensor(&run, "q", &q_view, &q_out_view, before[q_view.memory],
                 memories[q_out_view.memory].bytes, q_values, positions, inv_freq,
                 attention_factor, rotary_dim, &stats);
    if (has_k)
        check_tensor(&run, "k", &k_view, &k_out_view, before[k_view.memory],
                     memories[k_out_view.memory].bytes, k_values, positions, inv_freq,
                     attention_factor, rotary_dim, &stats);

    /* Nothing else may change: inputs of an out-of-place call, gaps, the v slice, positions. */
    static const char *const names[MEM_COUNT] = {"q memory", "k memory", "q_out memory",
                                                 "k_out memory", "positions"};
    for (int m = 0; m < MEM_COUNT; m++) {
        if (!sizes[m])
            continue;
        unsigned char *mask = calloc(sizes[m], 1);
        if (!mask) {
            test_failures++;
            continue;
        }
        if (q_out_view.memory == m)
            mark_view(mask, &q_out_view, e);
        if (has_k && k_out_view.memory == m)
            mark_view(mask, &k_out_view, e);
        check_untouched(&run, names[m], before[m], memories[m].bytes, mask, sizes[m]);
        free(mask);
    }

    if (rc->dtype == POSENC_DTYPE_F32)
        printf("    %-34s %-4s %-7s max error %5.2f x 2^-24 |pair|\n", rc->name,
               posenc_dtype_name(rc->dtype), test_memory_kind_name(rc->memory), stats.max_units);
    else
        printf("    %-34s %-4s %-7s max error %5.3f of tolerance\n", rc->name,
               posenc_dtype_name(rc->dtype), test_memory_kind_name(rc->memory), stats.max_ratio);
    ref_stats_merge(device_stats, &stats);

done:
    for (int m = 0; m < MEM_COUNT; m++) {
        if (sizes[m])
            test_memory_destroy(&memories[m]);
        free(before[m]);
    }
    free(q_values);
    free(k_values);
    free(positions);
}

static void run_device(posenc_context *context, const posenc_device_info *info)
{
    ref_stats stats = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(context, i, &stats);
    printf("    worst f32 error %.2f x 2^-24 |pair| (promise: 8); worst of tolerance %.3f over "
           "%llu values\n",
           stats.max_units, stats.max_ratio, stats.values);
}

int main(void)
{
    printf("test_rope: %zu cases per device\n", sizeof cases / sizeof cases[0]);
    test_for_each_device(run_device);
    return test_finish("test_rope");
}
