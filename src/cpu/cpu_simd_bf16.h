/* SPDX-License-Identifier: MIT */
/* The CPU kernel template's bf16 pairs (cpu_simd.h): two f32 vectors to bf16 on 32-bit words,
 * rounded as core/half.c rounds, for RoPE's bf16 kernels and the 16-bit yardstick. */
#ifndef POSENC_CPU_SIMD_BF16_H
#define POSENC_CPU_SIMD_BF16_H

#include "cpu/cpu_simd_access.h"

/* ---- bf16 pairs on 32-bit words ---- */

/* The bits of a non-NaN f32 with the rounding increment to bf16 added: rounded to nearest
 * even (core/half.c) in the high half of each 32-bit lane, the low half to be dropped. */
CPU_INLINE vi bf16_rounded(vf v)
{
    vi u = f_bits(v);
    return i_add(u, i_add(i_and(i_shr(u, 16), i_set(1)), i_set(0x7fff)));
}

/* f32 -> bf16 rounded to nearest even on the bits (core/half.c), left in the high half of
 * each 32-bit lane with the low half zero; NaN keeps its top bits and becomes quiet. */
CPU_INLINE vi bf16_high(vf v)
{
    vi r = i_select_nan(v, i_or(f_bits(v), i_set(0x00400000)), bf16_rounded(v));
    return i_and(r, i_set(0xffff0000u));
}

/* Two vectors to bf16 pairs: even[i] in the low half of lane i, odd[i] in the high half.
 * Where the variant tests two vectors for NaN at once, vectors without one (nearly all) take
 * the rounding alone, without a select per vector (on AVX2, 13 instructions where the exact
 * path takes 18). */
CPU_INLINE vi bf16_pairs(vf even, vf odd)
{
#if defined(HAVE_B_PACK_PAIRS)
    return b_pack_pairs(even, odd);
#else
#  if defined(HAVE_F_UNORDERED)
    if (!f_unordered(even, odd))
        return i_or(i_shr(bf16_rounded(even), 16),
                    i_and(bf16_rounded(odd), i_set(0xffff0000u)));
#  endif
    return i_or(i_shr(bf16_high(even), 16), bf16_high(odd));
#endif
}

#endif
