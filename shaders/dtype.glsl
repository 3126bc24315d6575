// SPDX-License-Identifier: MIT
// Output element types of the GLSL kernels, chosen by one define per variant:
//   POSENC_OUT_F32, POSENC_OUT_F16 or POSENC_OUT_BF16.
// 16-bit values are stored two to a 32-bit word (element 2i in the low half: Vulkan memory is
// little-endian), so no 16-bit storage feature is needed. Conversions to 16 bits match
// src/core/half.c bit for bit (round to nearest even, NaN kept quiet): f16 by integer steps
// rather than packHalf2x16, whose rounding Vulkan leaves to the device and which lavapipe
// emulates slowly (the integer steps make its f16 RoPE about a tenth faster).
#ifndef POSENC_DTYPE_GLSL
#define POSENC_DTYPE_GLSL

#if defined(POSENC_OUT_F32) && !defined(POSENC_OUT_F16) && !defined(POSENC_OUT_BF16)
#define POSENC_OUT_16BIT 0
#elif defined(POSENC_OUT_F16) && !defined(POSENC_OUT_F32) && !defined(POSENC_OUT_BF16)
#define POSENC_OUT_16BIT 1
#elif defined(POSENC_OUT_BF16) && !defined(POSENC_OUT_F32) && !defined(POSENC_OUT_F16)
#define POSENC_OUT_16BIT 1
#else
#error "define exactly one of POSENC_OUT_F32, POSENC_OUT_F16, POSENC_OUT_BF16"
#endif

uint posenc_bf16_from_f32(float value)
{
    uint u = floatBitsToUint(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a (quiet) NaN
        return (u >> 16) | 0x40u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}

// f32 to f16 bits, rounded to nearest even as src/core/half.c (NaN kept quiet, overflow to
// infinity), from integer steps and one float add.
uint posenc_f16_from_f32(float value)
{
    uint u = floatBitsToUint(value);
    uint sign = (u >> 16) & 0x8000u;
    uint magnitude = u & 0x7fffffffu;
    // Below 2^-14 (subnormal result): adding 0.5 rounds the mantissa to a multiple of 2^-24.
    precise float scaled = uintBitsToFloat(magnitude) + 0.5;
    uint subnormal = floatBitsToUint(scaled) - 0x3f000000u;
    // Normal: rebias the exponent, round the 13 dropped bits to nearest even.
    uint normal = (magnitude + 0xc8000fffu + ((magnitude >> 13) & 1u)) >> 13;
    uint bits = magnitude < 0x38800000u ? subnormal : normal;
    // From 65520 on (infinity and NaN too) `normal` is 0x7c00 or more: infinity.
    bits = min(bits, 0x7c00u);
    bits = magnitude > 0x7f800000u ? 0x7e00u : bits; // NaN
    return sign | bits;
}

float posenc_bf16_to_f32(uint bits)
{
    return uintBitsToFloat(bits << 16);
}

#if POSENC_OUT_16BIT
// The 16 bits of the output type holding `value`.
uint posenc_out_bits(float value)
{
#if defined(POSENC_OUT_F16)
    return posenc_f16_from_f32(value);
#else
    return posenc_bf16_from_f32(value);
#endif
}

// Two values packed as one word, `low` the even element.
uint posenc_out_pair_bits(float low, float high)
{
#if defined(POSENC_OUT_F16)
    return posenc_f16_from_f32(low) | (posenc_f16_from_f32(high) << 16);
#else
    return posenc_bf16_from_f32(low) | (posenc_bf16_from_f32(high) << 16);
#endif
}

float posenc_out_value(uint bits)
{
#if defined(POSENC_OUT_F16)
    return unpackHalf2x16(bits & 0xffffu).x;
#else
    return posenc_bf16_to_f32(bits & 0xffffu);
#endif
}

// The two values of a packed word, the even element first: posenc_out_value of each half.
vec2 posenc_out_pair_values(uint word)
{
#if defined(POSENC_OUT_F16)
    return unpackHalf2x16(word);
#else
    return vec2(posenc_bf16_to_f32(word & 0xffffu), uintBitsToFloat(word & 0xffff0000u));
#endif
}
#endif

#endif
