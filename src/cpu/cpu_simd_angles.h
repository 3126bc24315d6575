/* SPDX-License-Identifier: MIT */
/* The CPU kernel template's angles (cpu_simd.h): fixed-point turns from positions, sin and cos
 * of them as core/angle.c computes them, and angle addition (the error bound is in cpu_simd.h). */
#ifndef POSENC_CPU_SIMD_ANGLES_H
#define POSENC_CPU_SIMD_ANGLES_H

#include "cpu/cpu_simd_access.h"

/* 2*pi/2^32 as a float-float (core/angle.c). */
#define RADIANS_PER_UNIT_HI 0x1.921fb6p-30f
#define RADIANS_PER_UNIT_LO -0x1.777a5cp-55f
/* The minimax coefficients of core/angle.c (Cephes sinf/cosf on [-pi/4, pi/4]). */
#define SIN_C1 -1.6666654611e-1f
#define SIN_C2 8.3321608736e-3f
#define SIN_C3 -1.9515295891e-4f
#define COS_C1 4.166664568298827e-2f
#define COS_C2 -1.388731625493765e-3f
#define COS_C3 2.443315711809948e-5f

/* ---- sin and cos ---- */

#if !defined(HAVE_SINCOS_VEC)
CPU_INLINE void sincos_vec(vi turns_hi, vf *sin_out, vf *cos_out)
{
    /* Nearest quarter turn q, and the remainder in [-2^29, 2^29) units of 2^-32 turn. */
    vi q = i_shr(i_add(turns_hi, i_set(1u << 29)), 30);
    vi top = i_sub(turns_hi, i_shl(q, 30));
    vf hi = f_from_i(top);
    vf lo = f_from_i(i_sub(top, i_from_f(hi))); /* exact: top = hi + lo */
    vf x = f_fma(hi, f_set(RADIANS_PER_UNIT_HI),
                 f_fma(hi, f_set(RADIANS_PER_UNIT_LO), f_mul(lo, f_set(RADIANS_PER_UNIT_HI))));
    vf z = f_mul(x, x);
    vf ps = f_fma(z, f_set(SIN_C3), f_set(SIN_C2));
    ps = f_fma(z, ps, f_set(SIN_C1));
    vf s = f_fma(f_mul(x, z), ps, x);
    vf pc = f_fma(z, f_set(COS_C3), f_set(COS_C2));
    pc = f_fma(z, pc, f_set(COS_C1));
    vf c = f_fma(f_mul(z, z), pc, f_fma(z, f_set(-0.5f), f_set(1.0f)));
    /* Quadrant q: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s). */
    vi sign = i_set(0x80000000u);
    *sin_out = f_xor_bits(f_select_odd(q, c, s), i_and(i_shl(q, 30), sign));
    *cos_out = f_xor_bits(f_select_odd(q, s, c), i_and(i_shl(i_add(q, i_set(1)), 30), sign));
}
#endif

static void k_sincos(const uint32_t *turns_hi, size_t count, float sin_scale, float cos_scale,
                     float *sin_out, float *cos_out)
{
    vf ss = f_set(sin_scale), cs = f_set(cos_scale);
    size_t i = 0;
    for (; i + LANES <= count; i += LANES) {
        vf s, c;
        sincos_vec(i_load(turns_hi + i), &s, &c);
        f_store(sin_out + i, f_mul(s, ss));
        f_store(cos_out + i, f_mul(c, cs));
    }
    if (i < count) {
        vf s, c;
        sincos_vec(i_load_part(turns_hi + i, count - i), &s, &c);
        f_store_part(sin_out + i, f_mul(s, ss), count - i);
        f_store_part(cos_out + i, f_mul(c, cs), count - i);
    }
}

/* posenc_cpu_turns_hi_int (cpu_internal.h), which this file does not include: p * frac
 * modulo 2^64, rounded to its top 32 bits. Where the variant multiplies 64-bit lanes
 * (HAVE_TURNS_INT8: eight at a time), a few vector instructions per eight frequencies where
 * the scalar loop takes six per frequency: RoPE runs it once per token, and for f16 with
 * rotary_dim 128 it was about a third of the time a token spends outside rope_heads. */
static void k_turns_int(int32_t position, const uint64_t *fracs, uint32_t count,
                        uint32_t *turns_hi)
{
    uint32_t j = 0;
#if defined(HAVE_TURNS_INT8)
    for (; j + 8 <= count; j += 8)
        turns_int8(position, fracs + j, turns_hi + j);
#endif
    for (; j < count; j++) {
        uint64_t turns = (uint64_t)(int64_t)position * fracs[j];
        turns_hi[j] = (uint32_t)((turns + (UINT64_C(1) << 31)) >> 32);
    }
}

#if defined(TURNS_SCALED_LANES)
#  if defined(_MSC_VER) && !defined(__clang__)
#    include <intrin.h> /* _BitScanForward64 */
#  endif
/* The number of trailing zero bits of a nonzero position. */
static inline uint32_t trailing_zeros(int64_t position)
{
#  if defined(__GNUC__) || defined(__clang__)
    return (uint32_t)__builtin_ctzll((unsigned long long)position);
#  elif defined(_MSC_VER)
    unsigned long index;
    _BitScanForward64(&index, (unsigned __int64)position);
    return (uint32_t)index;
#  else
    uint32_t s = 0;
    while (!(((uint64_t)position >> s) & 1))
        s++;
    return s;
#  endif
}
#endif

/* posenc_cpu_turns_hi (cpu_internal.h) with 32x32-bit products only: with the position
 * P = ph 2^32 + pl (ph signed, pl unsigned) and frac = fh 2^32 + fl, bits 32..95 of P * frac are
 * ph * frac + pl * fh + (pl * fl) / 2^32 modulo 2^64, the first term's low 32 bits zero, so
 * nothing carries across. The whole turns add pl * int_turns, times 2^32. Where the variant
 * has it (HAVE_TURNS_FIXED8), eight frequencies at a time: the scalar loop takes four
 * multiplies per frequency, and a table of float positions (diffusion timesteps) spent most of
 * its time there. */
static void k_turns_fixed(int64_t position, const uint64_t *fracs, const uint32_t *int_turns,
                          uint32_t count, uint32_t *turns_hi)
{
    const int32_t ph = (int32_t)(uint32_t)((uint64_t)position >> 32);
    const uint32_t pl = (uint32_t)(uint64_t)position;
    uint32_t j = 0;
#if defined(TURNS_SCALED_LANES)
    /* A positive position as m 2^s with m < 2^31 (s at most 32): TURNS_SCALED_LANES at a time
     * with 32x32-bit products (turns_scaled), the same bits. */
    if (position > 0) {
        uint32_t s = trailing_zeros(position);
        s = s < 32 ? s : 32;
        if (((uint64_t)position >> s) < (UINT64_C(1) << 31))
            for (; j + TURNS_SCALED_LANES <= count; j += TURNS_SCALED_LANES)
                turns_scaled((uint32_t)((uint64_t)position >> s), s, fracs + j,
                               int_turns + j, turns_hi + j);
    }
#endif
#if defined(HAVE_TURNS_FIXED8)
    for (; j + 8 <= count; j += 8)
        turns_fixed8(ph, pl, fracs + j, int_turns + j, turns_hi + j);
#endif
    for (; j < count; j++) {
        const uint64_t f = fracs[j];
        uint64_t turns = (uint64_t)(int64_t)ph * f + (uint64_t)pl * (f >> 32) +
                         (((uint64_t)pl * (uint32_t)f) >> 32) +
                         ((uint64_t)(pl * int_turns[j]) << 32);
        turns_hi[j] = (uint32_t)((turns + (UINT64_C(1) << 31)) >> 32);
    }
}

CPU_INLINE void rotate_vec(vf sa, vf ca, vf sb, vf cb, vf *s, vf *c)
{
    *s = f_fma(sa, cb, f_mul(ca, sb));
    *c = f_fms(ca, cb, f_mul(sa, sb));
}

static void k_rotate(const float *sin_a, const float *cos_a, const float *sin_b,
                     const float *cos_b, size_t count, float *sin_out, float *cos_out)
{
    size_t i = 0;
    vf s, c;
    for (; i + LANES <= count; i += LANES) {
        rotate_vec(f_load(sin_a + i), f_load(cos_a + i), f_load(sin_b + i), f_load(cos_b + i), &s,
                   &c);
        f_store(sin_out + i, s);
        f_store(cos_out + i, c);
    }
    if (i < count) {
        size_t n = count - i;
        rotate_vec(f_load_part(sin_a + i, n), f_load_part(cos_a + i, n),
                   f_load_part(sin_b + i, n), f_load_part(cos_b + i, n), &s, &c);
        f_store_part(sin_out + i, s, n);
        f_store_part(cos_out + i, c, n);
    }
}

#endif
