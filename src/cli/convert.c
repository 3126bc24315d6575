/* SPDX-License-Identifier: MIT */
/* f16 and bf16 <-> f32 conversions (bit manipulation, round to nearest even, NaN and infinity
 * kept), and element access to .npy arrays of any dtype as double. */
#include "convert.h"

#include <math.h>
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

float cli_f16_to_f32(uint16_t h)
{
    float sign = (h & 0x8000u) ? -1.0f : 1.0f;
    unsigned exponent = (h >> 10) & 0x1fu;
    unsigned mantissa = h & 0x3ffu;
    if (exponent == 0x1f) {
        return mantissa ? NAN : sign * INFINITY;
    }
    if (exponent == 0) {
        return sign * (float)mantissa * 0x1p-24f; /* zero or subnormal, exact */
    }
    return float_of((uint32_t)(h & 0x8000u) << 16 | (exponent + 112u) << 23 | mantissa << 13);
}

uint16_t cli_f32_to_f16(float f)
{
    uint32_t u = bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t magnitude = u & 0x7fffffffu;
    if (magnitude > 0x7f800000u) {
        return (uint16_t)(sign | 0x7e00u);
    }
    if (magnitude >= 0x477ff000u) { /* rounds to 65520 or more: infinity */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (magnitude < 0x38800000u) {
        /* Subnormal result m * 2^-24: scaling by 2^24 and rounding with rintf (nearest even in
         * the default rounding mode) gives m. */
        return (uint16_t)(sign | (uint16_t)rintf(float_of(magnitude) * 0x1p24f));
    }
    uint32_t odd = (magnitude >> 13) & 1u;
    magnitude += 0xfffu + odd;   /* round the 13 dropped bits to nearest even */
    magnitude -= 112u << 23;     /* rebias the exponent from 127 to 15 */
    return (uint16_t)(sign | (uint16_t)(magnitude >> 13));
}

float cli_bf16_to_f32(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

uint16_t cli_f32_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((u >> 16) | 0x40u); /* a quiet NaN */
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

double cli_npy_element(const cli_npy_array *array, uint64_t index)
{
    const unsigned char *p = (const unsigned char *)array->data;
    switch (array->dtype) {
    case CLI_NPY_F32: {
        float v;
        memcpy(&v, p + index * 4, 4);
        return v;
    }
    case CLI_NPY_F16: {
        uint16_t v;
        memcpy(&v, p + index * 2, 2);
        return cli_f16_to_f32(v);
    }
    case CLI_NPY_BF16: {
        uint16_t v;
        memcpy(&v, p + index * 2, 2);
        return cli_bf16_to_f32(v);
    }
    case CLI_NPY_I32: {
        int32_t v;
        memcpy(&v, p + index * 4, 4);
        return v;
    }
    case CLI_NPY_I64: {
        int64_t v;
        memcpy(&v, p + index * 8, 8);
        return (double)v;
    }
    case CLI_NPY_F64: {
        double v;
        memcpy(&v, p + index * 8, 8);
        return v;
    }
    }
    return NAN;
}
