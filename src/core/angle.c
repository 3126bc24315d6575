/* SPDX-License-Identifier: MIT */
/* Exact angle reduction in fixed point and float-only sin/cos (see angle.h for the design).
 * The integer steps are written on 32-bit words exactly as the GPU kernels do them, so this file
 * is also the executable specification the shaders are tested against. */
#include "core/angle.h"

#include <math.h>

/* 1/(2*pi) as a double-double. */
#define INV_TWO_PI_HI 0x1.45f306dc9c883p-3
#define INV_TWO_PI_LO -0x1.6b01ec5417056p-57

/* 2*pi/2^32 (radians per unit of the top word of a turn) as a float-float. */
#define RADIANS_PER_UNIT_HI 0x1.921fb6p-30f
#define RADIANS_PER_UNIT_LO -0x1.777a5cp-55f

posenc__freq posenc__freq_from_radians(double radians_per_position)
{
    /* turns = w / (2 pi) as hi + lo, good to about 2^-104 relative. */
    double w = radians_per_position;
    double hi = w * INV_TWO_PI_HI;
    double lo = fma(w, INV_TWO_PI_HI, -hi) + w * INV_TWO_PI_LO;

    double whole = floor(hi);
    double frac_hi = hi - whole; /* exact */
    if (frac_hi + lo < 0.0) {    /* hi was an integer and lo pulls it below */
        whole -= 1.0;
        frac_hi += 1.0;
    }
    /* Q0.64: top word from frac_hi, the bottom word from what is left plus lo. */
    double top = floor(frac_hi * 0x1p32);
    double rest = (frac_hi * 0x1p32 - top + lo * 0x1p32) * 0x1p32; /* |rest| < 2^33 */
    int64_t bottom = (int64_t)floor(rest);
    uint64_t frac = ((uint64_t)top << 32) + (uint64_t)bottom; /* wraps correctly mod 2^64 */

    posenc__freq freq = {.frac = frac, .int_turns = (uint32_t)whole, .component = 0};
    return freq;
}

int64_t posenc__position_from_i32(int32_t position)
{
    return (int64_t)((uint64_t)(int64_t)position << 32);
}

bool posenc__position_from_f32(float position, int64_t *fixed)
{
    if (!(fabsf(position) < 0x1p31f)) {
        *fixed = 0;
        return false;
    }
    /* Exact in double; rounded to 2^-32 of a position only below 2^-9. */
    *fixed = (int64_t)llrint((double)position * 0x1p32);
    return true;
}

uint64_t posenc__turns(int64_t position_fixed, posenc__freq freq)
{
    const uint64_t low32 = 0xffffffffu;
    uint64_t u = (uint64_t)position_fixed;
    uint64_t u0 = u & low32, u1 = u >> 32;
    uint64_t f0 = freq.frac & low32, f1 = freq.frac >> 32;

    /* Bits 32..95 of the unsigned 64x64 product u * frac, from four 32x32 products. */
    uint64_t p00 = u0 * f0, p01 = u0 * f1, p10 = u1 * f0, p11 = u1 * f1;
    uint64_t middle = (p00 >> 32) + (p01 & low32) + (p10 & low32);
    uint64_t upper = ((p01 >> 32) + (p10 >> 32) + (p11 & low32) + (middle >> 32)) & low32;
    uint64_t turns = (upper << 32) | (middle & low32);

    /* u is position + 2^64 for a negative position: remove the 2^64 * frac it added. */
    if (position_fixed < 0)
        turns -= freq.frac << 32;
    /* Fractional position bits times the integer turns; the integer bits give whole turns. */
    turns += ((u0 * freq.int_turns) & low32) << 32;
    return turns;
}

void posenc__sincos_turns(uint64_t turns, float *sin_out, float *cos_out)
{
    /* Nearest quarter turn, and the remainder in [-1/8, 1/8) turn. */
    uint32_t quadrant = (uint32_t)((turns + (UINT64_C(1) << 61)) >> 62);
    int64_t remainder = (int64_t)(turns - ((uint64_t)quadrant << 62));
    /* Keep the top word, rounded (2^-33 turn at most); |top| <= 2^29. */
    int32_t top = (int32_t)((remainder + (INT64_C(1) << 31)) >> 32);

    /* Radians as float-float: top = hi + lo exactly, times the float-float constant. */
    float hi = (float)top;
    float lo = (float)(top - (int32_t)hi);
    float x = hi * RADIANS_PER_UNIT_HI + (hi * RADIANS_PER_UNIT_LO + lo * RADIANS_PER_UNIT_HI);

    /* Minimax polynomials on [-pi/4, pi/4] (Cephes sinf/cosf), about 1 ulp each. */
    float z = x * x;
    float s = x + x * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * -1.9515295891e-4f));
    float c = 1.0f - 0.5f * z +
              z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f +
                                                     z * 2.443315711809948e-5f));
    switch (quadrant & 3) {
    case 0: *sin_out = s; *cos_out = c; break;
    case 1: *sin_out = c; *cos_out = -s; break;
    case 2: *sin_out = -s; *cos_out = -c; break;
    default: *sin_out = -c; *cos_out = s; break;
    }
}
