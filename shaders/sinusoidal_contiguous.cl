/* SPDX-License-Identifier: MIT */
/* posenc_sinusoidal for CPU-type OpenCL devices when the columns are contiguous: sinusoidal.cl's
 * arguments. A work-item takes sixteen frequencies (two blocks of eight; the last block of a
 * row may be alone) of a block of rows, or eight of one row at given positions. Their angles
 * are computed as vectors (angle.cl's 8-wide steps) and rotated, written, and x read, 16 wide
 * (PoCL keeps float16 in AVX-512 registers), where sinusoidal.cl's one frequency per work-item
 * runs as scalar code on CPU implementations (PoCL).
 *
 * Rows at given positions take a block of one: sinusoidal.cl's results, bit for bit. Rows at
 * the row index (no positions) come in blocks of POSENC_SINUSOIDAL_BLOCK_ROWS, as on the native
 * CPU path: the block's anchor row, in its middle, gets its sin and cos from the exact angle
 * (posenc_turns8), and row anchor + k (|k| <= POSENC_SINUSOIDAL_STEPS - 1) is the anchor
 * rotated by the step k of the table, sin/cos(k f) computed exactly on the host:
 *   sin(a + kf) = fma(sin a, cos kf, cos a sin kf)
 *   cos(a + kf) = fma(cos a, cos kf, -sin a sin kf)
 * (sin kf negated for k < 0), each limited to [-1, 1]. Every row is one rotation away from
 * exact values, within the promise however long the table (the bound is in src/cpu/cpu_simd.h),
 * and a row costs a rotation where it cost a sin and cos of every frequency, which PoCL spent
 * most of its time on (4096 x 1024 f32: 3.1 ms, 0.77 ms with the steps). tests/test_kernels.c
 * follows these steps in C, bit for bit too.
 *
 * The host chooses this kernel only when it applies (cl_sinusoidal.c): d_model/2 a multiple of
 * 8 and a column stride of 1 in out and in x; with the steps in the frequency table for rows at
 * the row index. An odd d_model's zero column is written by the row's last work-item.
 *
 * Variants (build options): -DPOSENC_OUT_F32, -DPOSENC_OUT_F16 or -DPOSENC_OUT_BF16.
 * Arguments: those of sinusoidal.cl; freqs with POSENC_SINUSOIDAL_STEPS steps after its words
 * for rows at the row index (posenc_kernel_params.h). Work: batch * blocks of rows *
 * ceil(d_model/32) units, or batch * rows * d_model/16 at given positions.
 * Global size: any; one dimension (the kernel loops over the rest).
 */
#include "angle.cl"
#include "dtype.cl"
#include "posenc_kernel_params.h"

/* 16 values at `col` of a row, or the first 8 of them where `two` is 0: output_scale * pe,
 * plus x * input_scale in add mode. */
POSENC_INLINE void posenc_put16(global POSENC_OUT_TYPE *out, uint out_base,
                                const global POSENC_OUT_TYPE *x, uint x_base, int add,
                                float input_scale, uint col, int two, float16 value)
{
    if (!two) {
        float8 low = value.lo;
        if (add)
            low = posenc_load8_out(x, x_base + col) * input_scale + low;
        posenc_store8_out(out, out_base + col, low);
        return;
    }
    if (add)
        value = posenc_load16_out(x, x_base + col) * input_scale + value;
    posenc_store16_out(out, out_base + col, value);
}

/* A row's values of one block, 8 sin and 8 cos from frequency k, placed by the layout. */
POSENC_INLINE void posenc_put_row8(global POSENC_OUT_TYPE *out, uint out_base,
                                   const global POSENC_OUT_TYPE *x, uint x_base, int add,
                                   float input_scale, uint layout_kind, uint half_count, uint k,
                                   float8 value_sin, float8 value_cos)
{
    if (layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED) {
        float16 both = (float16)(value_sin, value_cos).s08192a3b4c5d6e7f;
        posenc_put16(out, out_base, x, x_base, add, input_scale, 2u * k, 1, both);
    } else {
        int sin_first = layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS;
        posenc_put16(out, out_base, x, x_base, add, input_scale, k, 0,
                     (float16)(sin_first ? value_sin : value_cos, (float8)0.0f));
        posenc_put16(out, out_base, x, x_base, add, input_scale, half_count + k, 0,
                     (float16)(sin_first ? value_cos : value_sin, (float8)0.0f));
    }
}

/* The same for the unit's two blocks (16 frequencies from k), or its first alone where `two` is
 * 0. */
POSENC_INLINE void posenc_put_row16(global POSENC_OUT_TYPE *out, uint out_base,
                                    const global POSENC_OUT_TYPE *x, uint x_base, int add,
                                    float input_scale, uint layout_kind, uint half_count,
                                    uint k, int two, float16 value_sin, float16 value_cos)
{
    if (layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED) {
        /* The first block's 16 values, then the second's. */
        float16 low = (float16)(value_sin.lo, value_cos.lo).s08192a3b4c5d6e7f;
        float16 high = (float16)(value_sin.hi, value_cos.hi).s08192a3b4c5d6e7f;
        posenc_put16(out, out_base, x, x_base, add, input_scale, 2u * k, 1, low);
        if (two)
            posenc_put16(out, out_base, x, x_base, add, input_scale, 2u * k + 16u, 1, high);
    } else {
        int sin_first = layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS;
        posenc_put16(out, out_base, x, x_base, add, input_scale, k, two,
                     sin_first ? value_sin : value_cos);
        posenc_put16(out, out_base, x, x_base, add, input_scale, half_count + k, two,
                     sin_first ? value_cos : value_sin);
    }
}

/* An odd d_model's last column, zero (plus x in add mode), written by the row's last unit. */
POSENC_INLINE void posenc_zero_column(global POSENC_OUT_TYPE *out, uint out_base,
                                      const global POSENC_OUT_TYPE *x, uint x_base, int add,
                                      float input_scale, uint d_model, int last_unit,
                                      float output_scale)
{
    if ((d_model & 1u) == 0u || !last_unit)
        return;
    uint col = d_model - 1u;
    posenc_put_out(out, out_base + col, x, x_base + col, add, input_scale, output_scale * 0.0f);
}

/* The steps |step| of the unit's 16 frequencies from `at` (the first 8 twice where `two` is
 * 0). */
POSENC_INLINE float16 posenc_step16(const global uint *at, int two)
{
    return two ? as_float16(vload16(0, at)) : as_float16((uint16)(vload8(0, at), vload8(0, at)));
}

POSENC_WIDE_KERNEL
kernel void posenc_sinusoidal_contiguous(global POSENC_OUT_TYPE *out,
                                         const global POSENC_OUT_TYPE *x,
                                         const global uint *positions,
                                         const global uint *freqs
                                             POSENC_SINUSOIDAL_PARAMS(POSENC_PARAM_ARGUMENT))
{
    (void)out_stride_col, (void)x_stride_col; /* both 1 */
    uint half_count = d_model >> 1;
    uint blocks = half_count >> 3;
    uint positions_kind = (flags >> POSENC_SINUSOIDAL_FLAG_POSITIONS_SHIFT) & 3u;
    /* Rows at the row index: two blocks a unit, the last maybe one. Rows at given positions:
     * one block (a row is a unit's whole work there, and twice as many units ran faster). */
    int stepped = positions_kind == POSENC_POSITIONS_NONE;
    uint unit_blocks = stepped ? 2u : 1u;
    uint units = (blocks + unit_blocks - 1u) / unit_blocks; /* of a row */
    uint stride = (uint)get_global_size(0);
    uint layout_kind = flags & POSENC_SINUSOIDAL_FLAG_LAYOUT_MASK;
    int add = (flags & POSENC_SINUSOIDAL_FLAG_ADD) != 0u;
    const global POSENC_OUT_TYPE *x_source =
        (flags & POSENC_SINUSOIDAL_FLAG_X_IN_OUT) != 0u ? (const global POSENC_OUT_TYPE *)out : x;

    /* Rows at the row index: blocks of POSENC_SINUSOIDAL_BLOCK_ROWS, the last one shorter. */
    uint run = stepped ? POSENC_SINUSOIDAL_BLOCK_ROWS : 1u;
    uint runs = rows / run + (rows % run != 0u ? 1u : 0u);
    uint total = units * batch * runs;
    const global uint *steps = freqs + 4u * half_count; /* after the triplets and components */

    /* The step stops at `total` rather than wrap around 2^32. */
    for (uint i = (uint)get_global_id(0); i < total; i = total - i <= stride ? total : i + stride) {
        uint row_run = i / units;
        uint unit = i - row_run * units;
        uint b = row_run / runs;
        uint first = (row_run - b * runs) * run;
        uint end = rows - first < run ? rows : first + run;
        uint k = (unit * unit_blocks) << 3;
        int two = stepped && k + 8u < half_count; /* the unit's second block */
        uint anchor = first + (end - first) / 2u; /* first, for a block of one */

        uint2 position = (uint2)(0u, (uint)position_offset + anchor);
        int valid = 1;
        if (positions_kind != POSENC_POSITIONS_NONE)
            valid = posenc_position_from_word(positions_kind,
                                              positions[positions_offset +
                                                        b * positions_stride_batch +
                                                        first * positions_stride_row],
                                              &position);
        int last_unit = unit == units - 1u;
        if (!stepped) { /* one row, one block */
            float8 sin_low, cos_low;
            posenc_sincos8((uint8)position.x, (uint8)position.y, freqs + 3u * k, &sin_low,
                           &cos_low);
            if (!valid) /* NaN for an invalid float position */
                sin_low = cos_low = as_float8((uint8)0x7fc00000u);
            uint out_base = out_offset + b * out_stride_batch + first * out_stride_row;
            uint x_base = x_offset + b * x_stride_batch + first * x_stride_row;
            posenc_put_row8(out, out_base, x_source, x_base, add, input_scale, layout_kind,
                            half_count, k, output_scale * sin_low, output_scale * cos_low);
            posenc_zero_column(out, out_base, x_source, x_base, add, input_scale, d_model,
                               last_unit, output_scale);
            continue;
        }
        float16 anchor_sin, anchor_cos; /* the second block's, or the first's again */
        posenc_sincos16((uint16)position.x, (uint16)position.y, freqs + 3u * k,
                        freqs + 3u * (two ? k + 8u : k), &anchor_sin, &anchor_cos);

        for (uint r = first; r < end; r++) {
            uint out_base = out_offset + b * out_stride_batch + r * out_stride_row;
            uint x_base = x_offset + b * x_stride_batch + r * x_stride_row;
            int step = (int)(r - anchor);
            const global uint *at = steps + 2u * half_count * (uint)abs(step) + k;
            float16 step_cos = posenc_step16(at, two);
            float16 step_sin = posenc_step16(at + half_count, two);
            if (step < 0)
                step_sin = -step_sin;
            /* Limited to [-1, 1], as the CPU path's: rounding may take a value of magnitude 1
             * just past it. */
            float16 s = clamp(fma(anchor_sin, step_cos, anchor_cos * step_sin), -1.0f, 1.0f);
            float16 c = clamp(fma(anchor_cos, step_cos, -(anchor_sin * step_sin)), -1.0f, 1.0f);
            posenc_put_row16(out, out_base, x_source, x_base, add, input_scale, layout_kind,
                             half_count, k, two, output_scale * s, output_scale * c);
            posenc_zero_column(out, out_base, x_source, x_base, add, input_scale, d_model,
                               last_unit, output_scale);
        }
    }
}
