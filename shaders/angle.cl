/* SPDX-License-Identifier: MIT */
/* Exact angle reduction and float-only sin/cos in OpenCL C 1.2: the steps of src/core/angle.c
 * on 32-bit words, as shaders/angle.glsl does them (see src/core/angle.h for the design). Keep
 * the three in step: tests compare them.
 *
 * Positions are Q31.32 fixed point as uint2 (x: low word, y: high word). Frequencies are uint3
 * (int_turns, frac_hi, frac_lo): turns per position, an integer part and a Q0.64 fraction.
 * Turns are Q0.64 fractions of a turn as uint2 (low word, high word).
 *
 * No double, no 64-bit integers (optional in the embedded profile) and no built-in sin/cos.
 * Float contraction is off, so every device rounds each step as the C code does; do not build
 * with -cl-fast-relaxed-math, -cl-mad-enable or -cl-unsafe-math-optimizations.
 */
#ifndef POSENC_ANGLE_CL
#define POSENC_ANGLE_CL

#pragma OPENCL FP_CONTRACT OFF

/* 2*pi/2^32 (radians per unit of the high word of a turn) as a float-float. */
#define POSENC_RADIANS_PER_UNIT_HI 0x1.921fb6p-30f
#define POSENC_RADIANS_PER_UNIT_LO -0x1.777a5cp-55f

/* Minimax coefficients on [-pi/4, pi/4] (Cephes sinf/cosf), bit for bit those of angle.c. */
#define POSENC_SIN_1 -0x1.555546p-3f  /* -1.6666654611e-1 */
#define POSENC_SIN_2 0x1.11073cp-7f   /*  8.3321608736e-3 */
#define POSENC_SIN_3 -0x1.9943f2p-13f /* -1.9515295891e-4 */
#define POSENC_COS_1 0x1.55554ap-5f   /*  4.166664568298827e-2 */
#define POSENC_COS_2 -0x1.6c0c34p-10f /* -1.388731625493765e-3 */
#define POSENC_COS_3 0x1.99eb9cp-16f  /*  2.443315711809948e-5 */

uint2 posenc_position_from_i32(int position)
{
    return (uint2)(0u, (uint)position);
}

/* round(position * 2^32), ties to even (as llrint in angle.c), from the float's bits so that
 * no float arithmetic (and no flushing of subnormals) is involved. Returns 0 for NaN and for
 * magnitudes >= 2^31: the caller then writes NaN. */
int posenc_position_from_f32(uint bits, uint2 *fixed_position)
{
    *fixed_position = (uint2)(0u, 0u);
    uint magnitude_bits = bits & 0x7fffffffu;
    if (magnitude_bits >= 0x4f000000u) /* 2^31, infinity, NaN */
        return 0;
    uint exponent = magnitude_bits >> 23;
    uint mantissa = (bits & 0x7fffffu) | (exponent != 0u ? 0x800000u : 0u);
    /* value = mantissa * 2^(max(exponent, 1) - 150); fixed = mantissa * 2^shift. */
    int shift = (int)max(exponent, 1u) - 118;
    uint2 m = (uint2)(0u, 0u);
    if (shift >= 32) {
        m = (uint2)(0u, mantissa << (uint)(shift - 32));
    } else if (shift > 0) {
        m = (uint2)(mantissa << (uint)shift, mantissa >> (uint)(32 - shift));
    } else if (shift == 0) {
        m = (uint2)(mantissa, 0u);
    } else if (shift > -25) {
        uint drop = (uint)(-shift);
        uint kept = mantissa >> drop;
        uint rest = mantissa & ((1u << drop) - 1u);
        uint half_unit = 1u << (drop - 1u);
        if (rest > half_unit || (rest == half_unit && (kept & 1u) != 0u))
            kept += 1u;
        m = (uint2)(kept, 0u);
    } /* else below 2^-33: rounds to zero */
    if ((bits & 0x80000000u) != 0u) { /* two's complement negation of the 64-bit value */
        uint low = ~m.x + 1u;
        m = (uint2)(low, ~m.y + (low == 0u ? 1u : 0u));
    }
    *fixed_position = m;
    return 1;
}

/* The kinds of positions the kernels take: POSENC_POSITIONS_* (a field of their flags). */
#include "posenc_kernel_params.h"

/* The Q31.32 position in a positions word of `kind` (I32 or F32); 0 for a float position that
 * gives NaN. */
int posenc_position_from_word(uint kind, uint word, uint2 *fixed_position)
{
    if (kind == POSENC_POSITIONS_I32) {
        *fixed_position = posenc_position_from_i32((int)word);
        return 1;
    }
    return posenc_position_from_f32(word, fixed_position);
}

/* frac(position * frequency) in Q0.64: ((P * F) >> 32) + ((P * I) << 32) mod 2^64. */
uint2 posenc_turns(uint2 position, uint3 freq)
{
    uint u0 = position.x, u1 = position.y;
    uint int_turns = freq.x, f1 = freq.y, f0 = freq.z;

    /* Bits 32..95 of the unsigned 64x64 product u * frac, from four 32x32 products. */
    uint h00 = mul_hi(u0, f0);
    uint h01 = mul_hi(u0, f1), l01 = u0 * f1;
    uint h10 = mul_hi(u1, f0), l10 = u1 * f0;
    uint l11 = u1 * f1;
    uint middle = h00 + l01;
    uint carry = middle < l01 ? 1u : 0u;
    uint sum = middle + l10;
    carry += sum < l10 ? 1u : 0u;
    middle = sum;
    uint upper = h01 + h10 + l11 + carry;

    /* u is position + 2^64 for a negative position: remove the 2^64 * frac it added. */
    if ((int)u1 < 0)
        upper -= f0;
    /* Fractional position bits times the integer turns; the integer bits give whole turns. */
    upper += u0 * int_turns;
    return (uint2)(middle, upper);
}

/* sin and cos of 2*pi*turns/2^64. */
void posenc_sincos_turns(uint2 turns, float *sin_out, float *cos_out)
{
    /* Nearest quarter turn, and the remainder in [-1/8, 1/8) turn. */
    uint quadrant = (turns.y + 0x20000000u) >> 30;
    uint remainder_high = turns.y - (quadrant << 30);
    /* The high word rounded (2^-33 turn at most); |top| <= 2^29. */
    int top = (int)(remainder_high + (turns.x >> 31));

    /* Radians as float-float: top = hi + lo exactly, times the float-float constant. */
    float hi = (float)top;
    float lo = (float)(top - (int)hi);
    float x = hi * POSENC_RADIANS_PER_UNIT_HI +
              (hi * POSENC_RADIANS_PER_UNIT_LO + lo * POSENC_RADIANS_PER_UNIT_HI);

    float z = x * x;
    float s = x + x * z * (POSENC_SIN_1 + z * (POSENC_SIN_2 + z * POSENC_SIN_3));
    float c = 1.0f - 0.5f * z + z * z * (POSENC_COS_1 + z * (POSENC_COS_2 + z * POSENC_COS_3));
    switch (quadrant & 3u) {
    case 0u: *sin_out = s; *cos_out = c; break;
    case 1u: *sin_out = c; *cos_out = -s; break;
    case 2u: *sin_out = -s; *cos_out = -c; break;
    default: *sin_out = -c; *cos_out = s; break;
    }
}

/* Eight or sixteen lanes at once, for the kernels that work on runs of a row
 * (rope_contiguous.cl, sinusoidal_contiguous.cl): posenc_turns and posenc_sincos_turns on
 * vectors, the same steps lane by lane, so the results are bit for bit the scalar ones.
 * Positions (low and high words) and frequencies (int_turns, frac_hi, frac_lo) come as vectors
 * of their words; turns return as their low and high words. One body for both widths:
 * posenc_turns8/16 and posenc_sincos_turns8/16. */
#define POSENC_VECTOR_ANGLE_STEPS(N)                                                             \
    void posenc_turns##N(uint##N position_low, uint##N position_high, uint##N int_turns,       \
                         uint##N f1, uint##N f0, uint##N *turns_low, uint##N *turns_high)      \
    {                                                                                          \
        uint##N u0 = position_low, u1 = position_high;                                         \
        uint##N h00 = mul_hi(u0, f0);                                                          \
        uint##N h01 = mul_hi(u0, f1), l01 = u0 * f1;                                           \
        uint##N h10 = mul_hi(u1, f0), l10 = u1 * f0;                                           \
        uint##N l11 = u1 * f1;                                                                 \
        uint##N middle = h00 + l01;                                                            \
        uint##N carry = as_uint##N(middle < l01) & 1u;                                         \
        uint##N sum = middle + l10;                                                            \
        carry += as_uint##N(sum < l10) & 1u;                                                   \
        middle = sum;                                                                          \
        uint##N upper = h01 + h10 + l11 + carry;                                               \
        upper -= f0 & as_uint##N(as_int##N(u1) >> 31); /* a negative position */               \
        upper += u0 * int_turns;                                                               \
        *turns_low = middle;                                                                   \
        *turns_high = upper;                                                                   \
    }                                                                                          \
                                                                                               \
    void posenc_sincos_turns##N(uint##N turns_low, uint##N turns_high, float##N *sin_out,      \
                                float##N *cos_out)                                             \
    {                                                                                          \
        uint##N quadrant = (turns_high + 0x20000000u) >> 30;                                   \
        uint##N remainder_high = turns_high - (quadrant << 30);                                \
        int##N top = as_int##N(remainder_high + (turns_low >> 31));                            \
                                                                                               \
        float##N hi = convert_float##N(top);                                                   \
        float##N lo = convert_float##N(top - convert_int##N(hi));                              \
        float##N x = hi * POSENC_RADIANS_PER_UNIT_HI +                                         \
                     (hi * POSENC_RADIANS_PER_UNIT_LO + lo * POSENC_RADIANS_PER_UNIT_HI);      \
                                                                                               \
        float##N z = x * x;                                                                    \
        float##N s = x + x * z * (POSENC_SIN_1 + z * (POSENC_SIN_2 + z * POSENC_SIN_3));       \
        float##N c = 1.0f - 0.5f * z +                                                         \
                     z * z * (POSENC_COS_1 + z * (POSENC_COS_2 + z * POSENC_COS_3));           \
        /* Quadrants 1 and 3 swap sin and cos; the sign flips of the scalar switch are         \
         * sign-bit flips: sin in quadrants 2 and 3, cos in quadrants 1 and 2. */              \
        int##N swap = as_int##N((quadrant & 1u) != 0u);                                        \
        float##N sin_base = select(s, c, swap);                                                \
        float##N cos_base = select(c, s, swap);                                                \
        uint##N sin_sign = (quadrant & 2u) << 30;                                              \
        uint##N cos_sign = ((quadrant + 1u) & 2u) << 30;                                       \
        *sin_out = as_float##N(as_uint##N(sin_base) ^ sin_sign);                               \
        *cos_out = as_float##N(as_uint##N(cos_base) ^ cos_sign);                               \
    }

POSENC_VECTOR_ANGLE_STEPS(8)
POSENC_VECTOR_ANGLE_STEPS(16)

/* Eight consecutive frequencies as the host lays them out: 24 words of (int_turns, frac_hi,
 * frac_lo) triplets from `freqs`. */
void posenc_freqs8(const global uint *freqs, uint8 *int_turns, uint8 *frac_hi, uint8 *frac_lo)
{
    uint8 w0 = vload8(0, freqs), w1 = vload8(1, freqs), w2 = vload8(2, freqs);
    *int_turns = (uint8)(w0.s0, w0.s3, w0.s6, w1.s1, w1.s4, w1.s7, w2.s2, w2.s5);
    *frac_hi = (uint8)(w0.s1, w0.s4, w0.s7, w1.s2, w1.s5, w2.s0, w2.s3, w2.s6);
    *frac_lo = (uint8)(w0.s2, w0.s5, w1.s0, w1.s3, w1.s6, w2.s1, w2.s4, w2.s7);
}

/* sin and cos of eight consecutive frequencies (posenc_freqs8) at eight positions. */
void posenc_sincos8(uint8 position_low, uint8 position_high, const global uint *freqs,
                    float8 *sin_out, float8 *cos_out)
{
    uint8 int_turns, frac_hi, frac_lo;
    posenc_freqs8(freqs, &int_turns, &frac_hi, &frac_lo);
    uint8 turns_low, turns_high;
    posenc_turns8(position_low, position_high, int_turns, frac_hi, frac_lo, &turns_low,
                  &turns_high);
    posenc_sincos_turns8(turns_low, turns_high, sin_out, cos_out);
}

/* The same for sixteen lanes: the eight frequencies from `freqs` in lanes 0-7 and the eight
 * from `next` in lanes 8-15 (`next` may be `freqs`). Half the instructions of two calls of
 * posenc_sincos8 where the device has 16-wide registers (AVX-512 in PoCL). */
void posenc_sincos16(uint16 position_low, uint16 position_high, const global uint *freqs,
                     const global uint *next, float16 *sin_out, float16 *cos_out)
{
    uint8 int_turns, frac_hi, frac_lo, next_int_turns, next_frac_hi, next_frac_lo;
    posenc_freqs8(freqs, &int_turns, &frac_hi, &frac_lo);
    posenc_freqs8(next, &next_int_turns, &next_frac_hi, &next_frac_lo);
    uint16 turns_low, turns_high;
    posenc_turns16(position_low, position_high, (uint16)(int_turns, next_int_turns),
                   (uint16)(frac_hi, next_frac_hi), (uint16)(frac_lo, next_frac_lo), &turns_low,
                   &turns_high);
    posenc_sincos_turns16(turns_low, turns_high, sin_out, cos_out);
}

#endif
