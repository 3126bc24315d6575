/* SPDX-License-Identifier: MIT */
/* posenc_sinusoidal for CPU-type OpenCL devices when the columns are contiguous: sinusoidal.cl's
 * arguments, eight frequencies of a block of rows per work-item. Their angles are computed as
 * vectors (angle.cl's 8-wide steps) and written, and x read, with 8-wide loads and stores,
 * where sinusoidal.cl's one frequency per work-item runs as scalar code on CPU implementations
 * (PoCL).
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
 * d_model/16 units.
 * Global size: any; one dimension (the kernel loops over the rest).
 */
#include "angle.cl"
#include "dtype.cl"
#include "posenc_kernel_params.h"

/* 8 values at `col` of a row: output_scale * pe, plus x * input_scale in add mode. */
POSENC_INLINE void posenc_put8(global POSENC_OUT_TYPE *out, uint out_base,
                               const global POSENC_OUT_TYPE *x, uint x_base, int add,
                               float input_scale, uint col, float8 value)
{
    if (add)
        value = posenc_load8_out(x, x_base + col) * input_scale + value;
    posenc_store8_out(out, out_base + col, value);
}

kernel void posenc_sinusoidal_contiguous(global POSENC_OUT_TYPE *out,
                                         const global POSENC_OUT_TYPE *x,
                                         const global uint *positions,
                                         const global uint *freqs
                                             POSENC_SINUSOIDAL_PARAMS(POSENC_PARAM_ARGUMENT))
{
    (void)out_stride_col, (void)x_stride_col; /* both 1 */
    uint half_count = d_model >> 1;
    uint blocks = half_count >> 3;
    uint stride = (uint)get_global_size(0);
    uint layout_kind = flags & POSENC_SINUSOIDAL_FLAG_LAYOUT_MASK;
    uint positions_kind = (flags >> POSENC_SINUSOIDAL_FLAG_POSITIONS_SHIFT) & 3u;
    int add = (flags & POSENC_SINUSOIDAL_FLAG_ADD) != 0u;
    const global POSENC_OUT_TYPE *x_source =
        (flags & POSENC_SINUSOIDAL_FLAG_X_IN_OUT) != 0u ? (const global POSENC_OUT_TYPE *)out : x;

    /* Rows at the row index: blocks of POSENC_SINUSOIDAL_BLOCK_ROWS, the last one shorter. */
    int stepped = positions_kind == POSENC_POSITIONS_NONE;
    uint run = stepped ? POSENC_SINUSOIDAL_BLOCK_ROWS : 1u;
    uint runs = rows / run + (rows % run != 0u ? 1u : 0u);
    uint total = blocks * batch * runs;
    const global uint *steps = freqs + 4u * half_count; /* after the triplets and components */

    /* The step stops at `total` rather than wrap around 2^32. */
    for (uint i = (uint)get_global_id(0); i < total; i = total - i <= stride ? total : i + stride) {
        uint row_run = i / blocks;
        uint block = i - row_run * blocks;
        uint b = row_run / runs;
        uint first = (row_run - b * runs) * run;
        uint end = rows - first < run ? rows : first + run;
        uint k = block << 3;
        uint anchor = first + (end - first) / 2u; /* first, for a block of one */

        uint2 position = (uint2)(0u, (uint)position_offset + anchor);
        int valid = 1;
        if (positions_kind != POSENC_POSITIONS_NONE)
            valid = posenc_position_from_word(positions_kind,
                                              positions[positions_offset +
                                                        b * positions_stride_batch +
                                                        first * positions_stride_row],
                                              &position);
        float8 anchor_sin, anchor_cos;
        posenc_sincos8((uint8)position.x, (uint8)position.y, freqs + 3u * k, &anchor_sin,
                       &anchor_cos);
        if (!valid) /* NaN for an invalid float position */
            anchor_sin = anchor_cos = as_float8((uint8)0x7fc00000u);

        for (uint r = first; r < end; r++) {
            uint out_base = out_offset + b * out_stride_batch + r * out_stride_row;
            uint x_base = x_offset + b * x_stride_batch + r * x_stride_row;
            float8 s = anchor_sin, c = anchor_cos;
            if (stepped) {
                int step = (int)(r - anchor);
                const global uint *at = steps + 2u * half_count * (uint)abs(step) + k;
                float8 step_cos = as_float8(vload8(0, at));
                float8 step_sin = as_float8(vload8(0, at + half_count));
                if (step < 0)
                    step_sin = -step_sin;
                /* Limited to [-1, 1], as the CPU path's: rounding may take a value of
                 * magnitude 1 just past it. */
                s = clamp(fma(anchor_sin, step_cos, anchor_cos * step_sin), -1.0f, 1.0f);
                c = clamp(fma(anchor_cos, step_cos, -(anchor_sin * step_sin)), -1.0f, 1.0f);
            }
            float8 value_sin = output_scale * s;
            float8 value_cos = output_scale * c;

            if (layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED) {
                float8 low = (float8)(value_sin.s0, value_cos.s0, value_sin.s1, value_cos.s1,
                                      value_sin.s2, value_cos.s2, value_sin.s3, value_cos.s3);
                float8 high = (float8)(value_sin.s4, value_cos.s4, value_sin.s5, value_cos.s5,
                                       value_sin.s6, value_cos.s6, value_sin.s7, value_cos.s7);
                posenc_put8(out, out_base, x_source, x_base, add, input_scale, 2u * k, low);
                posenc_put8(out, out_base, x_source, x_base, add, input_scale, 2u * k + 8u,
                            high);
            } else {
                int sin_first = layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS;
                posenc_put8(out, out_base, x_source, x_base, add, input_scale, k,
                            sin_first ? value_sin : value_cos);
                posenc_put8(out, out_base, x_source, x_base, add, input_scale, half_count + k,
                            sin_first ? value_cos : value_sin);
            }

            if ((d_model & 1u) != 0u && block == blocks - 1u) { /* the zero column */
                uint col = d_model - 1u;
                posenc_put_out(out, out_base + col, x_source, x_base + col, add, input_scale,
                               output_scale * 0.0f);
            }
        }
    }
}
