/* SPDX-License-Identifier: MIT */
/* The CPU backend's instruction-set variants: one table of kernels per variant (portable C,
 * AVX2+FMA+F16C, AVX-512, AVX-512 with BF16, NEON), each compiled in its own translation unit
 * with its own target flags from the one template in cpu_simd.h, and the run-time choice
 * between them (cpu_variant.c). Every kernel works on contiguous rows; the drivers
 * (cpu_rope.c, cpu_sinusoidal.c) handle layouts, positions and threads.
 */
#ifndef POSENC_CPU_KERNELS_H
#define POSENC_CPU_KERNELS_H

#include <posenc/posenc.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum posenc_cpu_variant {
    POSENC_CPU_PORTABLE = 0,
    POSENC_CPU_AVX2 = 1,       /* AVX2 + FMA + F16C */
    POSENC_CPU_AVX512 = 2,     /* AVX-512 F/BW/VL/DQ (+ FMA, F16C) */
    POSENC_CPU_AVX512BF16 = 3, /* the above plus AVX512_BF16 conversions */
    POSENC_CPU_NEON = 4,       /* aarch64 Advanced SIMD */
    POSENC_CPU_VARIANT_COUNT = 5,
} posenc_cpu_variant;

/* One head group of one token for RoPE. `table` holds the token's rotation, with the attention
 * factor and the direction already folded in:
 *   NEOX: cos[0 .. rotary_dim/2), then sin[0 .. rotary_dim/2);
 *   GPTJ: cos[j] at 2j and 2j+1 (rotary_dim entries), then -sin[j] at 2j and +sin[j] at 2j+1.
 * The heads' innermost dim is contiguous in `in` and `out`. */
typedef struct posenc_cpu_rope_heads {
    const float *table;
    const float *pair_cos, *pair_sin; /* GPTJ: the same cos[j] and sin[j], one per pair */
    const uint8_t *in;
    uint8_t *out;          /* == in when rotating in place */
    int64_t in_head_stride; /* bytes between heads */
    int64_t out_head_stride;
    int64_t heads;
    uint32_t rotary_dim;
    uint32_t head_dim;
    posenc_dtype dtype;
    posenc_rope_style style;
    bool copy_rest;        /* out of place: copy dims rotary_dim .. head_dim unchanged */
    bool streaming;        /* the call's tensors exceed the caches: prefetch heads ahead where
                            * the variant does (PREFETCH_AHEAD, cpu_simd_rope.h) */
    /* The QK norm, or NULL: dim d of head h (from the kernels' dim 0) is read as x * (w * r),
     * w = norm_weights[h * norm_weight_stride + d] (the weights with their offset, f32) and
     * r = norm_factors[h], and the dims after rotary_dim are scaled and written in place too.
     * norm_factors NULL: a norm over each head's head_dim values (the kernels see the whole
     * head), whose factors the kernels take, 1 / sqrt(mean(x^2) + norm_eps). */
    const float *norm_weights;
    const float *norm_factors;
    float norm_eps;
    int64_t norm_weight_stride; /* floats: 0 (one norm per head) or the head's dims (per token) */
} posenc_cpu_rope_heads;

/* Output rows of a sinusoidal encoding: out = output_scale * PE (+ input_scale * x), sin/cos
 * values placed by `layout`, an odd d_model ending in a zero column. Either one row from its own
 * values (`steps` NULL, rows 1, at `out`), or for each of `rows` steps k = first_step + r the
 * rows at the anchor's angle plus and minus k (angle addition, with two rounded products and a
 * rounded sum or difference per value):
 *   sin = sin_a cos_k +- cos_a sin_k,  cos = cos_a cos_k -+ sin_a sin_k,
 * the row a + k at out + r * out_row_stride (out NULL: none), the row a - k at
 * back_out - r * out_row_stride (back_out NULL: none); step k being cos(k f_i) at
 * steps + k * step_stride and sin(k f_i) step_sin_offset floats further. The anchor's values
 * stay in registers for all the rows. The innermost dim of out and x is contiguous. */
typedef struct posenc_cpu_sinusoidal_rows {
    const float *sin, *cos; /* `half` each: the row's, or the anchor's */
    const float *steps;     /* NULL: direct values */
    size_t step_stride;     /* floats */
    size_t step_sin_offset; /* floats */
    uint32_t first_step;
    uint32_t rows;
    uint32_t half;          /* frequencies */
    int64_t d_model;        /* 2 * half, or 2 * half + 1 */
    posenc_sinusoidal_layout layout;
    posenc_dtype dtype;
    uint8_t *out;
    uint8_t *back_out;
    int64_t out_row_stride; /* bytes */
    const uint8_t *x;       /* NULL: write the table */
    const uint8_t *back_x;  /* x of the rows at back_out */
    int64_t x_row_stride;
    float input_scale;
    float output_scale;
} posenc_cpu_sinusoidal_rows;

typedef struct posenc_cpu_kernels {
    const char *name;      /* "avx2": the POSENC_CPU_VARIANT value */
    uint32_t lanes;        /* f32 lanes per vector */

    /* sin and cos of the angles whose turns, rounded to the top 32 bits (turns_hi in
     * cpu_internal.h), are `turns_hi[i]`, times `sin_scale` and `cos_scale`. */
    void (*sincos)(const uint32_t *turns_hi, size_t count, float sin_scale, float cos_scale,
                   float *sin_out, float *cos_out);
    /* turns_hi of the integer position `position` at each of `count` frequencies whose
     * fractional turns are `fracs` (posenc_cpu_turns_hi_int in cpu_internal.h). */
    void (*turns_int)(int32_t position, const uint64_t *fracs, uint32_t count,
                      uint32_t *turns_hi);
    /* turns_hi of the Q31.32 position `position` (core/angle.h) at each of `count`
     * frequencies of fractional turns `fracs` and whole turns `int_turns` (posenc_cpu_turns_hi
     * in cpu_internal.h): positions with a fraction, such as diffusion timesteps. */
    void (*turns_fixed)(int64_t position, const uint64_t *fracs, const uint32_t *int_turns,
                        uint32_t count, uint32_t *turns_hi);
    /* Angle addition: sin/cos(a + b) from sin/cos(a) and sin/cos(b), elementwise. */
    void (*rotate)(const float *sin_a, const float *cos_a, const float *sin_b, const float *cos_b,
                   size_t count, float *sin_out, float *cos_out);
    /* NEOX and GPTJ only: cpu_rope.c's rope_styles says which styles the kernels cover. */
    void (*rope_heads)(const posenc_cpu_rope_heads *args);
    /* The GPT-J table of posenc_cpu_rope_heads from `pairs` sin and cos values: cos[j] at 2j
     * and 2j + 1, then -sin[j] and sin[j] from 2 pairs on. */
    void (*gptj_table)(const float *sin_values, const float *cos_values, uint32_t pairs,
                       float *table);
    void (*sinusoidal_rows)(const posenc_cpu_sinusoidal_rows *args);
    /* The QK norm's sums of squares: of the first `dims` (contiguous) values of each of `heads`
     * heads `head_stride` bytes apart, into sums[h], in f32 lanes (cpu_simd_norm.h bounds the
     * error). */
    void (*sum_squares)(posenc_dtype dtype, const uint8_t *in, int64_t head_stride,
                        int64_t heads, uint32_t dims, float *sums);
    /* The same heads' factors 1 / sqrt(sum / dims + eps), in f32 lanes, into factors[h]. */
    void (*norm_factors)(posenc_dtype dtype, const uint8_t *in, int64_t head_stride,
                         int64_t heads, uint32_t dims, float eps, float *factors);

    /* f32 <-> f16/bf16 arrays, bit for bit as core/half.c. */
    void (*from_f32)(posenc_dtype dtype, const float *in, size_t count, void *out);
    void (*to_f32)(posenc_dtype dtype, const void *in, size_t count, float *out);

    /* `bytes` from `in` to `out`, which do not overlap. */
    void (*copy)(const void *in, void *out, size_t bytes);
    /* The benchmark's yardstick: read and write every float in place, or only write. */
    void (*copy_in_place)(float *data, size_t count);
    void (*fill)(float *data, size_t count, float value);
    /* The benchmark's 16-bit floor: `count` f16 or bf16 elements widened to f32 and narrowed
     * back in place with the conversions the kernels use, and nothing else. Values come back
     * unchanged, NaNs as core/half.c writes them. */
    void (*convert_in_place)(posenc_dtype dtype, void *data, size_t count);
} posenc_cpu_kernels;

/* The kernels of `variant`, or NULL when it is not compiled in or this CPU (and OS) cannot run
 * it. Feature detection runs once per process. */
const posenc_cpu_kernels *posenc_cpu_kernels_for(posenc_cpu_variant variant);
/* The best variant this CPU runs. */
posenc_cpu_variant posenc_cpu_best_variant(void);
/* "avx512"; NULL for an unknown value. */
const char *posenc_cpu_variant_name(posenc_cpu_variant variant);
/* Parses a POSENC_CPU_VARIANT value; false when unknown. */
bool posenc_cpu_variant_parse(const char *name, posenc_cpu_variant *variant);
/* Whether the variant was compiled into this build (it may still not run on this CPU). */
bool posenc_cpu_variant_compiled(posenc_cpu_variant variant);

/* The variant a CPU context runs ("avx2"), or NULL when `ctx` is not a CPU context. */
const char *posenc_cpu_context_variant(const posenc_context *ctx);

/* The tables, one per translation unit; absent ones are not compiled in. */
extern const posenc_cpu_kernels posenc_cpu_kernels_portable;
extern const posenc_cpu_kernels posenc_cpu_kernels_avx2;
extern const posenc_cpu_kernels posenc_cpu_kernels_avx512;
extern const posenc_cpu_kernels posenc_cpu_kernels_avx512bf16;
extern const posenc_cpu_kernels posenc_cpu_kernels_neon;

#endif
