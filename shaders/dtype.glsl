// SPDX-License-Identifier: MIT
// Output element types of the GLSL kernels, chosen by one define per variant:
//   POSENC_OUT_F32, POSENC_OUT_F16 or POSENC_OUT_BF16.
// 16-bit values are stored two to a 32-bit word (element 2i in the low half: Vulkan memory is
// little-endian), so no 16-bit storage feature is needed. Conversions match src/core/half.c
// (bf16: round to nearest even, NaN kept quiet); f16 uses packHalf2x16, whose rounding Vulkan
// leaves to the device (at worst one f16 ulp, within the accuracy promise).
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

float posenc_bf16_to_f32(uint bits)
{
    return uintBitsToFloat(bits << 16);
}

#if POSENC_OUT_16BIT
// The 16 bits of the output type holding `value`.
uint posenc_out_bits(float value)
{
#if defined(POSENC_OUT_F16)
    return packHalf2x16(vec2(value, 0.0)) & 0xffffu;
#else
    return posenc_bf16_from_f32(value);
#endif
}

// Two values packed as one word, `low` the even element.
uint posenc_out_pair_bits(float low, float high)
{
#if defined(POSENC_OUT_F16)
    return packHalf2x16(vec2(low, high));
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
#endif

#endif
