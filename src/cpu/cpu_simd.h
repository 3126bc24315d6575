/* SPDX-License-Identifier: MIT */
/* The CPU kernels, written once over a small vector vocabulary that each variant's translation
 * unit (cpu_kernels_*.c) defines before including this file, with its own target flags; the
 * kernels themselves are in the cpu_simd_*.h parts included below. The vocabulary:
 *
 *   LANES                       f32 lanes per vector
 *   vf, vi                      LANES floats, LANES 32-bit integers
 *   f_load, f_store             unaligned f32 vectors; *_part(p, [v,] n) for n < LANES lanes
 *   h_load, h_store, b_load, b_store (+ _part)   f16 / bf16 memory <-> f32 lanes, stores
 *                               rounding to nearest even exactly as core/half.c
 *   i_load, i_load_part         u32 vectors
 *   f_set, i_set, f_add, f_mul, f_div, f_sqrt (both correctly rounded), f_fma(a,b,c) = a*b+c,
 *   f_fms(a,b,c) = a*b-c,
 *   f_fnma(a,b,c) = c-a*b, f_clamp1(v): v limited to [-1, 1]
 *   i_add, i_sub, i_and, i_shl(v,n), i_shr(v,n) (logical; n a constant), f_xor_bits(v, bits)
 *   f_from_i (int32 -> float, to nearest)
 *   i_from_f (integral float -> int32), f_select_odd(q, a, b): a where q is odd, else b;
 *                               for the template's quadrant sin/cos only
 *   SINCOS_TABLE_BITS, sincos_table_pick(sin_of_32ths, k, &s, &c)   optional: sin and cos
 *                               from a table of 2^SINCOS_TABLE_BITS angles (5: 32nds, 4:
 *                               16ths), whose entries k (low bits) the variant picks per lane
 *                               from SIN_OF_32THS (cpu_simd_angles.h), in place of the
 *                               quadrant steps
 *   f_swap_pairs(v): [v1 v0 v3 v2 ...]; f_zip(a, b, &lo, &hi): [a0 b0 a1 b1 ...];
 *   f_unzip(a, b, &even, &odd), the inverse of f_zip
 *   f_bits, i_bits (reinterpretations), i_or, i_store(_part), i_select_nan(v, a, b): a where
 *   v is NaN, else b
 *   h_store2(p, v, q, w)        optional (HAVE_H_STORE2): h_store of two vectors, sharing
 *                               the NaN test
 *   h_store_zip_raw(p, s, c)    optional (HAVE_H_STORE_ZIP): f_zip(s, c) stored as f16 with
 *                               h_store_raw (values known not to be NaN)
 *   h_store_raw, h_unordered, h_fix_nans   optional (HAVE_H_FIX_NANS): f16 stores whose NaN
 *                               rewrite is deferred to the end of a head (the variant's file
 *                               says how)
 *   f_unordered(v, w)           optional (HAVE_F_UNORDERED): nonzero when a lane of v or w is
 *                               NaN, for a branch around the NaN handling of conversions
 *   TABLE_REGS                  optional: vector registers RoPE may give to its table (0 or
 *                               undefined: the table stays in memory)
 *   PREFETCH_AHEAD, prefetch_line(p)   optional: RoPE prefetches the lines of each head this
 *                               many bytes ahead of it (undefined: no software prefetch)
 *   NORM_PREFETCH_AHEAD         optional, with prefetch_line: the QK norm's one-pass kernels
 *                               prefetch each group of heads this many bytes ahead on
 *                               streaming tensors (cpu_simd_rope_norm.h)
 *   KERNEL_TABLE, KERNEL_NAME   the exported table and its POSENC_CPU_VARIANT name
 *   NATIVE_BF16                 defined where b_store is a hardware conversion
 *   b_pack_pairs(even, odd)     optional (HAVE_B_PACK_PAIRS): two vectors to bf16 as
 *                               32-bit lanes, even[i] low and odd[i] high
 *
 * sin/cos (sincos_vec) are the steps of core/angle.c on vectors: the nearest quarter turn and
 * the remainder from the top 32 bits of the exact fixed-point turn, radians as a float-float
 * product, then the same minimax polynomials, evaluated with fused multiply-adds where the
 * variant has them.
 *
 * The AVX-512 and AVX2 variants take sin and cos from a table of 32nds or 16ths of a turn
 * instead (SINCOS_TABLE_BITS).
 *
 * Error bound. Checked over every one of the 2^30 remainders (quadrants are exact symmetries),
 * sin and cos are each within E = 2 * 2^-24 of exact: 1.92 * 2^-24 for portable C (the same as
 * core/angle.c), 1.58 * 2^-24 with FMA; the tables, checked over all 2^32 turns, 1.10 * 2^-24
 * (AVX-512) and 1.29 * 2^-24 (AVX2) (tests/test_cpu.c keeps a sample of 2^20 angles and the
 * octant edges). Rounding the turn to 32 bits adds at most 2^-33 turn (0.02 * 2^-24). In units
 * of 2^-24, for values of magnitude <= 1 (half an ulp <= 0.5 unit):
 *   - RoPE, out = (a c - b s) * f with the attention factor f folded into c and s (0.5 unit
 *     each): |error| <= |pair| f (sqrt(2) (E + 0.5) + 3 roundings) = 6.6 |rotated pair|;
 *   - a sinusoidal row from an exact anchor a and an exact step b (rotate, or step_values):
 *     sin(a +- b) = sin a cos b +- cos a sin b, whose input errors weigh |cos b| + |sin b| <=
 *     sqrt(2) each: |error| <= 2 sqrt(2) E + 1.5 (roundings) + 0.5 (output_scale) = 7.7
 *     |output_scale|;
 *     every row is one rotation away from exact values, so the bound does not grow along the
 *     table;
 *   - values computed directly (given positions): E + 0.5 = 2.5 |output_scale|;
 * all within the promise of 8; f16/bf16 outputs add their own rounding, as the promise allows.
 */
#ifndef POSENC_CPU_SIMD_H
#define POSENC_CPU_SIMD_H

/* The template by concern, each part on the vocabulary and the parts before it. The functions
 * are static (or inline), so every variant gets its own copy compiled with its own flags. */
#include "cpu/cpu_simd_access.h"     /* CPU_INLINE; loads and stores by dtype */
#include "cpu/cpu_simd_angles.h"     /* turns, sin and cos, angle addition */
#include "cpu/cpu_simd_bf16.h"       /* f32 to bf16 pairs */
#include "cpu/cpu_simd_norm.h"       /* the QK norm: sums of squares, scaling on load */
#include "cpu/cpu_simd_rope_held.h"  /* RoPE with the table in registers (TABLE_REGS) */
#include "cpu/cpu_simd_rope_norm.h"  /* RoPE with the QK norm over each head, in one pass */
#include "cpu/cpu_simd_rope.h"       /* RoPE with the table in memory; k_rope_heads */
#include "cpu/cpu_simd_sinusoidal.h" /* sinusoidal rows */
#include "cpu/cpu_simd_arrays.h"     /* f32 conversions, the copy yardsticks, the fill */

const posenc_cpu_kernels KERNEL_TABLE = {
    .name = KERNEL_NAME,
    .lanes = LANES,
    .sincos = k_sincos,
    .turns_int = k_turns_int,
    .turns_fixed = k_turns_fixed,
    .rotate = k_rotate,
    .rope_heads = k_rope_heads,
    .gptj_table = k_gptj_table,
    .sinusoidal_rows = k_sinusoidal_rows,
    .sum_squares = k_sum_squares,
    .norm_factors = k_norm_factors,
    .from_f32 = k_from_f32,
    .to_f32 = k_to_f32,
    .copy = k_copy,
    .copy_in_place = k_copy_in_place,
    .convert_in_place = k_convert_in_place,
    .fill = k_fill,
};

#endif
