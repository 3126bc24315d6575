// SPDX-License-Identifier: MIT
// Element access for kernels that read `in_data` and read/write `out_data`, in every storage
// form, chosen by the dtype define of dtype.glsl and POSENC_STORAGE16:
//   f32                     one element per uint word;
//   f16/bf16, STORAGE16     one element per uint16_t (needs the device's 16-bit storage);
//   f16/bf16 otherwise      two elements per uint word, element 2i in the low half (Vulkan memory
//                           is little-endian); a store changes only its half, with atomics, since
//                           another invocation may be writing the other half.
// The including shader declares `in_data` (readonly) and `out_data` with the element type
// POSENC_ELEMENT_T before including this file. Elements travel as their raw bits (the low 16 for
// 16-bit types), so that copies are exact.
#ifndef POSENC_ELEMENTS_GLSL
#define POSENC_ELEMENTS_GLSL

#if !defined(POSENC_STORAGE16)
#define POSENC_STORAGE16 0
#endif
#if POSENC_STORAGE16 && !POSENC_OUT_16BIT
#error "POSENC_STORAGE16 is for f16 and bf16 variants"
#endif
// Two 16-bit elements per word: the only form with shared words.
#define POSENC_PACKED_WORDS (POSENC_OUT_16BIT && !POSENC_STORAGE16)

float posenc_value_of_bits(uint bits)
{
#if !POSENC_OUT_16BIT
    return uintBitsToFloat(bits);
#else
    return posenc_out_value(bits);
#endif
}

uint posenc_bits_of_value(float value)
{
#if !POSENC_OUT_16BIT
    return floatBitsToUint(value);
#else
    return posenc_out_bits(value);
#endif
}

uint posenc_in_bits(uint index)
{
#if POSENC_PACKED_WORDS
    return (in_data[index >> 1] >> ((index & 1u) * 16u)) & 0xffffu;
#else
    return uint(in_data[index]);
#endif
}

// Reads an element of `out_data` that this invocation owns while others may write the other
// half of its word: atomically, so that the read is not a data race.
uint posenc_out_bits_of(uint index)
{
#if POSENC_PACKED_WORDS
    return (atomicOr(out_data[index >> 1], 0u) >> ((index & 1u) * 16u)) & 0xffffu;
#else
    return uint(out_data[index]);
#endif
}

void posenc_store_bits(uint index, uint bits)
{
#if POSENC_PACKED_WORDS
    uint shift = (index & 1u) * 16u;
    atomicAnd(out_data[index >> 1], ~(0xffffu << shift));
    atomicOr(out_data[index >> 1], bits << shift);
#else
    out_data[index] = POSENC_ELEMENT_T(bits);
#endif
}

// Whether elements `first` and `first + 1` are exactly one word, which one invocation may then
// read and write whole without atomics.
bool posenc_whole_word(uint first, uint second)
{
#if POSENC_PACKED_WORDS
    return second == first + 1u && (first & 1u) == 0u;
#else
    return false;
#endif
}

#endif
