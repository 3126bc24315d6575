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

#if defined(SINCOS_TABLE_BITS)
/* sin of k/32 turn for k = 0 .. 39, rounded to float: the sines of the 32nds, then (8 on)
 * their cosines. */
static const float SIN_OF_32THS[40] = {
    0.0f,            0x1.8f8b84p-3f,  0x1.87de2ap-2f,  0x1.1c73b4p-1f,  0x1.6a09e6p-1f,
    0x1.a9b662p-1f,  0x1.d906bcp-1f,  0x1.f6297cp-1f,  1.0f,            0x1.f6297cp-1f,
    0x1.d906bcp-1f,  0x1.a9b662p-1f,  0x1.6a09e6p-1f,  0x1.1c73b4p-1f,  0x1.87de2ap-2f,
    0x1.8f8b84p-3f,  0.0f,            -0x1.8f8b84p-3f, -0x1.87de2ap-2f, -0x1.1c73b4p-1f,
    -0x1.6a09e6p-1f, -0x1.a9b662p-1f, -0x1.d906bcp-1f, -0x1.f6297cp-1f, -1.0f,
    -0x1.f6297cp-1f, -0x1.d906bcp-1f, -0x1.a9b662p-1f, -0x1.6a09e6p-1f, -0x1.1c73b4p-1f,
    -0x1.87de2ap-2f, -0x1.8f8b84p-3f, 0.0f,            0x1.8f8b84p-3f,  0x1.87de2ap-2f,
    0x1.1c73b4p-1f,  0x1.6a09e6p-1f,  0x1.a9b662p-1f,  0x1.d906bcp-1f,  0x1.f6297cp-1f};

/* The variants that can pick table entries per lane in registers (sincos_table_pick) take sin
 * and cos of the nearest 2^-SINCOS_TABLE_BITS turn k from the table and add the remainder r,
 * |r| <= pi / 2^SINCOS_TABLE_BITS, by a short polynomial: sin(a + r) = sin a + (sin a
 * (cos r - 1) + cos a sin r), cos likewise, each rounded once at the end. No quadrant to fold
 * and no float-float radians: about two thirds of the instructions of the steps below with
 * 32nds (AVX-512), four fifths with 16ths (AVX2). Error over every one of the 2^32 turns: see
 * cpu_simd.h. */
CPU_INLINE void sincos_vec(vi turns_hi, vf *sin_out, vf *cos_out)
{
    enum { SHIFT = 32 - SINCOS_TABLE_BITS };
    /* k (the pick reads its low bits) and the remainder in [-2^(SHIFT-1), 2^(SHIFT-1)) units
     * of 2^-32 turn, converted with an error of at most 2^(SHIFT-26) units. */
    const vi u = i_add(turns_hi, i_set(1u << (SHIFT - 1)));
    const vi k = i_shr(u, SHIFT);
    const vi rest = i_sub(i_and(u, i_set((1u << SHIFT) - 1u)), i_set(1u << (SHIFT - 1)));
    const vf r = f_mul(f_from_i(rest), f_set(RADIANS_PER_UNIT_HI));
    const vf z = f_mul(r, r);
    /* Taylor to r^5 for sin; to r^4 for cos with 32nds, r^6 with 16ths: the next terms are
     * below 2^-28 for |r| <= pi/16. */
    const vf sin_r = f_fma(f_mul(r, z), f_fma(z, f_set(1.0f / 120.0f), f_set(-1.0f / 6.0f)), r);
#  if SINCOS_TABLE_BITS >= 5
    const vf cos_c2 = f_set(1.0f / 24.0f);
#  else
    const vf cos_c2 = f_fma(z, f_set(-1.0f / 720.0f), f_set(1.0f / 24.0f));
#  endif
    const vf cos_r1 = f_mul(z, f_fma(z, cos_c2, f_set(-0.5f)));
    vf sin_a, cos_a;
    sincos_table_pick(SIN_OF_32THS, k, &sin_a, &cos_a);
    *sin_out = f_add(sin_a, f_fma(sin_a, cos_r1, f_mul(cos_a, sin_r)));
    *cos_out = f_add(cos_a, f_fms(cos_a, cos_r1, f_mul(sin_a, sin_r)));
}
#else
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
