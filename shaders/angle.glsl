// SPDX-License-Identifier: MIT
// Exact angle reduction and float-only sin/cos in GLSL: the steps of src/core/angle.c on 32-bit
// words (see src/core/angle.h for the design). Keep the two in step: tests compare them.
//
// Positions are Q31.32 fixed point as uvec2(low word, high word). Frequencies are uvec3
// (int_turns, frac_hi, frac_lo): turns per position, an integer part and a Q0.64 fraction.
// Turns are Q0.64 fractions of a turn as uvec2(low word, high word).
//
// No float64 and no built-in sin/cos (Vulkan promises only 2^-11 absolute for those). Float add
// and multiply are correctly rounded in Vulkan, and `precise` (NoContraction) asks that they be
// neither fused nor reordered, so a device computes the C code's values; some drivers fuse
// multiply-adds anyway (lavapipe does), which moves a result by an ulp or so, well within the
// accuracy promise. The integer steps are exact everywhere.
#ifndef POSENC_ANGLE_GLSL
#define POSENC_ANGLE_GLSL

// 2*pi/2^32 (radians per unit of the high word of a turn) as a float-float:
// 0x1.921fb6p-30 and -0x1.777a5cp-55.
#define POSENC_RADIANS_PER_UNIT_HI uintBitsToFloat(0x30c90fdbu)
#define POSENC_RADIANS_PER_UNIT_LO uintBitsToFloat(0xa43bbd2eu)

// Minimax coefficients on [-pi/4, pi/4] (Cephes sinf/cosf), bit for bit those of angle.c.
#define POSENC_SIN_1 uintBitsToFloat(0xbe2aaaa3u) // -1.6666654611e-1
#define POSENC_SIN_2 uintBitsToFloat(0x3c08839eu) //  8.3321608736e-3
#define POSENC_SIN_3 uintBitsToFloat(0xb94ca1f9u) // -1.9515295891e-4
#define POSENC_COS_1 uintBitsToFloat(0x3d2aaaa5u) //  4.166664568298827e-2
#define POSENC_COS_2 uintBitsToFloat(0xbab6061au) // -1.388731625493765e-3
#define POSENC_COS_3 uintBitsToFloat(0x37ccf5ceu) //  2.443315711809948e-5

uvec2 posenc_position_from_i32(int position)
{
    return uvec2(0u, uint(position));
}

// round(position * 2^32), ties to even (as llrint in angle.c), from the float's bits so that
// no float arithmetic (and no flushing of subnormals) is involved. False for NaN and for
// magnitudes >= 2^31: the caller then writes NaN.
bool posenc_position_from_f32(uint bits, out uvec2 fixed_position)
{
    fixed_position = uvec2(0u);
    uint magnitude_bits = bits & 0x7fffffffu;
    if (magnitude_bits >= 0x4f000000u) // 2^31, infinity, NaN
        return false;
    uint exponent = magnitude_bits >> 23;
    uint mantissa = (bits & 0x7fffffu) | (exponent != 0u ? 0x800000u : 0u);
    // value = mantissa * 2^(max(exponent, 1) - 150); fixed = mantissa * 2^shift.
    int shift = int(max(exponent, 1u)) - 118;
    uvec2 m = uvec2(0u);
    if (shift >= 32) {
        m = uvec2(0u, mantissa << uint(shift - 32));
    } else if (shift > 0) {
        m = uvec2(mantissa << uint(shift), mantissa >> uint(32 - shift));
    } else if (shift == 0) {
        m = uvec2(mantissa, 0u);
    } else if (shift > -25) {
        uint drop = uint(-shift);
        uint kept = mantissa >> drop;
        uint rest = mantissa & ((1u << drop) - 1u);
        uint half_unit = 1u << (drop - 1u);
        if (rest > half_unit || (rest == half_unit && (kept & 1u) != 0u))
            kept += 1u;
        m = uvec2(kept, 0u);
    } // else below 2^-33: rounds to zero
    if ((bits & 0x80000000u) != 0u) { // two's complement negation of the 64-bit value
        uint low = ~m.x + 1u;
        m = uvec2(low, ~m.y + (low == 0u ? 1u : 0u));
    }
    fixed_position = m;
    return true;
}

// The kinds of positions the kernels take: POSENC_POSITIONS_* (a field of their flags).
#include "posenc_kernel_params.h"

// The Q31.32 position in a positions word of `kind` (I32 or F32); false for a float position
// that gives NaN.
bool posenc_position_from_word(uint kind, uint word, out uvec2 fixed_position)
{
    if (kind == POSENC_POSITIONS_I32) {
        fixed_position = posenc_position_from_i32(int(word));
        return true;
    }
    return posenc_position_from_f32(word, fixed_position);
}

// frac(position * frequency) in Q0.64: ((P * F) >> 32) + ((P * I) << 32) mod 2^64.
uvec2 posenc_turns(uvec2 position, uvec3 freq)
{
    uint u0 = position.x, u1 = position.y;
    uint int_turns = freq.x, f1 = freq.y, f0 = freq.z;

    // Bits 32..95 of the unsigned 64x64 product u * frac, from four 32x32 products.
    uint h00, l00, h01, l01, h10, l10;
    umulExtended(u0, f0, h00, l00);
    umulExtended(u0, f1, h01, l01);
    umulExtended(u1, f0, h10, l10);
    uint l11 = u1 * f1;
    uint carry1, carry2;
    uint middle = uaddCarry(h00, l01, carry1);
    middle = uaddCarry(middle, l10, carry2);
    uint upper = h01 + h10 + l11 + carry1 + carry2;

    // u is position + 2^64 for a negative position: remove the 2^64 * frac it added.
    if (int(u1) < 0)
        upper -= f0;
    // Fractional position bits times the integer turns; the integer bits give whole turns.
    upper += u0 * int_turns;
    return uvec2(middle, upper);
}

// sin and cos of 2*pi*turns/2^64.
void posenc_sincos_turns(uvec2 turns, out float sin_out, out float cos_out)
{
    // Nearest quarter turn, and the remainder in [-1/8, 1/8) turn.
    uint quadrant = (turns.y + 0x20000000u) >> 30;
    uint remainder_high = turns.y - (quadrant << 30);
    // The high word rounded (2^-33 turn at most); |top| <= 2^29.
    int top = int(remainder_high + (turns.x >> 31));

    // Radians as float-float: top = hi + lo exactly, times the float-float constant.
    precise float hi = float(top);
    precise float lo = float(top - int(hi));
    precise float x = hi * POSENC_RADIANS_PER_UNIT_HI +
                      (hi * POSENC_RADIANS_PER_UNIT_LO + lo * POSENC_RADIANS_PER_UNIT_HI);

    precise float z = x * x;
    precise float s = x + x * z * (POSENC_SIN_1 + z * (POSENC_SIN_2 + z * POSENC_SIN_3));
    precise float c = 1.0 - 0.5 * z +
                      z * z * (POSENC_COS_1 + z * (POSENC_COS_2 + z * POSENC_COS_3));
    switch (quadrant & 3u) {
    case 0u: sin_out = s; cos_out = c; break;
    case 1u: sin_out = c; cos_out = -s; break;
    case 2u: sin_out = -s; cos_out = -c; break;
    default: sin_out = -c; cos_out = s; break;
    }
}

#endif
