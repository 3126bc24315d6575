/* SPDX-License-Identifier: MIT */
/* posenc_sinusoidal for CPU-type OpenCL devices when the columns are contiguous: sinusoidal.cl's
 * arguments and results, bit for bit, eight frequencies of a run of rows per work-item. Their
 * angles are computed as vectors (angle.cl's 8-wide steps) and written, and x read, with 8-wide
 * loads and stores, where sinusoidal.cl's one frequency per work-item runs as scalar code on CPU
 * implementations (PoCL).
 *
 * Rows at the row index (no positions) come in runs of POSENC_SINUSOIDAL_ROW_RUN: the angle of
 * the run's first row is the exact product position * frequency (posenc_turns8), and each next
 * row's is the one before plus the frequency's fraction, one 64-bit addition that gives the
 * same exact angle (the position grows by one whole unit, so the product grows by the
 * frequency, and whole turns drop out). sin and cos are then evaluated from the angle as
 * everywhere. Rows at given positions take a run of one.
 *
 * The host chooses this kernel only when it applies (cl_sinusoidal.c): d_model/2 a multiple of
 * 8 and a column stride of 1 in out and in x. An odd d_model's zero column is written by the
 * row's last work-item.
 *
 * Variants (build options): -DPOSENC_OUT_F32, -DPOSENC_OUT_F16 or -DPOSENC_OUT_BF16.
 * Arguments: those of sinusoidal.cl. Work: batch * runs of rows * d_model/16 units.
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

    /* Rows at the row index: runs of POSENC_SINUSOIDAL_ROW_RUN, the last one shorter. */
    uint run = positions_kind == POSENC_POSITIONS_NONE ? POSENC_SINUSOIDAL_ROW_RUN : 1u;
    uint runs = rows / run + (rows % run != 0u ? 1u : 0u);
    uint total = blocks * batch * runs;

    /* The step stops at `total` rather than wrap around 2^32. */
    for (uint i = (uint)get_global_id(0); i < total; i = total - i <= stride ? total : i + stride) {
        uint row_run = i / blocks;
        uint block = i - row_run * blocks;
        uint b = row_run / runs;
        uint first = (row_run - b * runs) * run;
        uint end = rows - first < run ? rows : first + run;
        uint k = block << 3;

        uint2 position = (uint2)(0u, (uint)position_offset + first);
        int valid = 1;
        if (positions_kind != POSENC_POSITIONS_NONE)
            valid = posenc_position_from_word(positions_kind,
                                              positions[positions_offset +
                                                        b * positions_stride_batch +
                                                        first * positions_stride_row],
                                              &position);
        uint8 int_turns, frac_hi, frac_lo, turns_low, turns_high;
        posenc_freqs8(freqs + 3u * k, &int_turns, &frac_hi, &frac_lo);
        posenc_turns8((uint8)position.x, (uint8)position.y, int_turns, frac_hi, frac_lo,
                      &turns_low, &turns_high);

        for (uint r = first; r < end; r++) {
            uint out_base = out_offset + b * out_stride_batch + r * out_stride_row;
            uint x_base = x_offset + b * x_stride_batch + r * x_stride_row;
            float8 s, c;
            posenc_sincos_turns8(turns_low, turns_high, &s, &c);
            if (!valid) /* NaN for an invalid float position */
                s = c = as_float8((uint8)0x7fc00000u);
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

            /* The next row's angle: + frac, carried from the low word into the high. */
            uint8 low = turns_low + frac_lo;
            turns_high += frac_hi + (as_uint8(low < turns_low) & 1u);
            turns_low = low;
        }
    }
}
