/* SPDX-License-Identifier: MIT */
/* Sinusoidal position encodings (posenc_sinusoidal), one work-item per frequency and row:
 *   out[b, r, c] = x[b, r, c] * input_scale + output_scale * PE(p)[c]   (add mode)
 *   out[b, r, c] = output_scale * PE(p)[c]                               (table)
 * with p the position of row r, PE(p) = sin and cos of p * f_i in the chosen layout, and one
 * zero column at the end when d_model is odd. Angles follow angle.cl (exact reduction); the
 * GLSL twin is sinusoidal.comp, with the same parameters in the same order.
 *
 * Variants (build options): -DPOSENC_OUT_F32, -DPOSENC_OUT_F16 or -DPOSENC_OUT_BF16, the type
 * of out and x.
 *
 * Arguments:
 *   0  out        global f32, f16 or bf16 elements
 *   1  x          same type; read only in add mode without X_IN_OUT (may be NULL otherwise)
 *   2  positions  global i32 or f32 elements, as uint; read only with POSITIONS_I32/F32
 *   3  freqs      global uint triplets (int_turns, frac_hi, frac_lo) per frequency, d_model/2
 *                 of them; the host folds position_scale into them
 *   4..21         POSENC_SINUSOIDAL_PARAMS of posenc_kernel_params.h, the words of
 *                 sinusoidal.comp's push constants, with the POSENC_SINUSOIDAL_* flags: offsets
 *                 and strides in elements, not bytes; every element index, and
 *                 batch * rows * (d_model/2 + d_model%2), fits in 32 bits.
 * Global size: any; one dimension (the kernel loops over the rest).
 */
#include "angle.cl"
#include "dtype.cl"
#include "posenc_kernel_params.h"

kernel void posenc_sinusoidal(global POSENC_OUT_TYPE *out,
                              const global POSENC_OUT_TYPE *x,
                              const global uint *positions,
                              const global uint *freqs
                                  POSENC_SINUSOIDAL_PARAMS(POSENC_PARAM_ARGUMENT))
{
    uint half_count = d_model >> 1;
    uint units = half_count + (d_model & 1u);
    uint total = units * batch * rows;
    uint stride = (uint)get_global_size(0);
    uint layout_kind = flags & POSENC_SINUSOIDAL_FLAG_LAYOUT_MASK;
    uint positions_kind = (flags >> POSENC_SINUSOIDAL_FLAG_POSITIONS_SHIFT) & 3u;
    int add = (flags & POSENC_SINUSOIDAL_FLAG_ADD) != 0u;
    const global POSENC_OUT_TYPE *x_source =
        (flags & POSENC_SINUSOIDAL_FLAG_X_IN_OUT) != 0u ? (const global POSENC_OUT_TYPE *)out : x;

    /* The step stops at `total` rather than wrap around 2^32. */
    for (uint i = (uint)get_global_id(0); i < total; i = total - i <= stride ? total : i + stride) {
        uint row = i / units;
        uint k = i - row * units;
        uint b = row / rows;
        uint r = row - b * rows;
        uint out_base = out_offset + b * out_stride_batch + r * out_stride_row;
        uint x_base = x_offset + b * x_stride_batch + r * x_stride_row;

        if (k == half_count) { /* the zero column of an odd d_model */
            uint col = d_model - 1u;
            posenc_put_out(out, out_base + col * out_stride_col, x_source,
                           x_base + col * x_stride_col, add, input_scale, output_scale * 0.0f);
            continue;
        }

        float s = as_float(0x7fc00000u), c = s; /* NaN for an invalid float position */
        uint2 position = (uint2)(0u, (uint)position_offset + r);
        int valid = 1;
        if (positions_kind != POSENC_POSITIONS_NONE)
            valid = posenc_position_from_word(positions_kind,
                                              positions[positions_offset +
                                                        b * positions_stride_batch +
                                                        r * positions_stride_row],
                                              &position);
        if (valid) {
            uint3 freq = (uint3)(freqs[3u * k], freqs[3u * k + 1u], freqs[3u * k + 2u]);
            posenc_sincos_turns(posenc_turns(position, freq), &s, &c);
        }

        uint col_sin = half_count + k, col_cos = k;
        if (layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED) {
            col_sin = 2u * k;
            col_cos = 2u * k + 1u;
        } else if (layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS) {
            col_sin = k;
            col_cos = half_count + k;
        }
        posenc_put_out(out, out_base + col_sin * out_stride_col, x_source,
                       x_base + col_sin * x_stride_col, add, input_scale, output_scale * s);
        posenc_put_out(out, out_base + col_cos * out_stride_col, x_source,
                       x_base + col_cos * x_stride_col, add, input_scale, output_scale * c);
    }
}
