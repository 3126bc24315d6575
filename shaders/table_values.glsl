// SPDX-License-Identifier: MIT
// Elements of 1-D tables the host passes as they are (the caller's cos and sin, the QK norm's
// weights): f32, or 16-bit elements two to a 32-bit word, read as words so that 16-bit tables
// need no 16-bit storage. The including shader includes posenc_kernel_params.h first.
#ifndef POSENC_TABLE_VALUES_GLSL
#define POSENC_TABLE_VALUES_GLSL

// Element `index` of a table of `dtype` (POSENC_TABLE_*), given the word holding it (word
// `index`, or `index` / 2 for 16-bit elements, the even element in the low half).
float table_value(uint word, uint index, uint dtype)
{
    if (dtype == POSENC_TABLE_F32)
        return uintBitsToFloat(word);
    uint bits = (index & 1u) != 0u ? word >> 16 : word & 0xffffu;
    return dtype == POSENC_TABLE_F16 ? unpackHalf2x16(bits).x : posenc_bf16_to_f32(bits);
}
#define TABLE_VALUE(table, index, dtype)                                                          \
    table_value(table[(dtype) == POSENC_TABLE_F32 ? (index) : (index) >> 1], index, dtype)

#endif
