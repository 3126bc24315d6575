/* SPDX-License-Identifier: MIT */
/* f16 and bf16 <-> f32 conversions in portable C (bit manipulation, no hardware assumptions). */
#include "core/half.h"

#include <string.h>

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float posenc__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f) /* infinity or NaN (quiet the NaN, keep its payload) */
        return float_of(sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0));
    if (exponent == 0) /* zero or subnormal: mantissa * 2^-24, exact in float */
        return float_of(sign) + (sign ? -1.0f : 1.0f) * (float)mantissa * 0x1p-24f;
    return float_of(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t posenc__f32_to_f16(float f)
{
    uint32_t u = bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t magnitude = u & 0x7fffffffu;
    if (magnitude >= 0x7f800000u) /* infinity or NaN */
        return (uint16_t)(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0));
    if (magnitude >= 0x477ff000u) /* rounds to >= 65520: overflow to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (magnitude < 0x38800000u) {
        /* Below the smallest normal 2^-14: subnormal result, m * 2^-24. Adding 0.5 makes the
         * float hardware round the mantissa to the nearest even integer multiple of 2^-24. */
        float scaled = float_of(magnitude) + 0.5f;
        return (uint16_t)(sign | (uint16_t)(bits_of(scaled) - 0x3f000000u));
    }
    /* Normal: rebias the exponent and round the 13 dropped bits to nearest even. */
    uint32_t odd = (magnitude >> 13) & 1u;
    magnitude += 0xc8000fffu + odd; /* rebias (-112 << 23) plus the rounding increment */
    return (uint16_t)(sign | (uint16_t)(magnitude >> 13));
}

float posenc__bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }

uint16_t posenc__f32_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
