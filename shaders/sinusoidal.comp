// SPDX-License-Identifier: MIT
// Sinusoidal position encodings (posenc_sinusoidal), one invocation per frequency and row:
//   out[b, r, c] = x[b, r, c] * input_scale + output_scale * PE(p)[c]   (add mode)
//   out[b, r, c] = output_scale * PE(p)[c]                               (table)
// with p the position of row r, PE(p) = sin and cos of p * f_i in the chosen layout, and one
// zero column at the end when d_model is odd. Angles follow angle.glsl (exact reduction).
// This kernel takes any layout; sinusoidal_blocks.comp computes the same bits faster where rows
// are whole 16-byte blocks.
//
// Variants (-D): POSENC_OUT_F32, POSENC_OUT_F16 or POSENC_OUT_BF16, the type of out and x;
// POSENC_STORAGE16=1 with a 16-bit type stores one element per uint16_t (for devices with 16-bit
// storage) instead of two per word.
//
// Bindings (descriptor set 0, all storage buffers):
//   0  out        f32 elements, or 16-bit elements two to a uint word (one per uint16_t with
//                 POSENC_STORAGE16)
//   1  x          same type as out; read only in add mode without X_IN_OUT (bind any buffer
//                 otherwise)
//   2  positions  i32 or f32 elements, as uint words; read only with POSITIONS_I32/F32
//   3  freqs      uint triplets (int_turns, frac_hi, frac_lo) per frequency, d_model/2 of them;
//                 the host folds position_scale into them
// Push constants: POSENC_SINUSOIDAL_PARAMS and the POSENC_SINUSOIDAL_* flags of
// posenc_kernel_params.h (sinusoidal.cl takes the same words as arguments). Offsets and strides
// are in elements, not bytes, from the start of each binding (bind at a multiple of 4 bytes, so
// that 16-bit elements keep their place in a word); every element index, and
// batch * rows * (d_model/2 + d_model%2), fits in 32 bits.
// Dispatch: local size 64; any number of work groups in x (the kernel loops over the rest).
#version 450
#extension GL_GOOGLE_include_directive : require
#if defined(POSENC_STORAGE16) && POSENC_STORAGE16
#extension GL_EXT_shader_16bit_storage : require
#define SIN_STORAGE16 1
#else
#define SIN_STORAGE16 0
#endif

#include "angle.glsl"
#include "dtype.glsl"
#include "posenc_kernel_params.h"

layout(local_size_x = 64) in;

#if SIN_STORAGE16
layout(std430, set = 0, binding = 0) buffer Out { uint16_t out_halves[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { uint16_t x_halves[]; };
#elif POSENC_OUT_16BIT
layout(std430, set = 0, binding = 0) buffer Out { uint out_words[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { uint x_words[]; };
#else
layout(std430, set = 0, binding = 0) buffer Out { float out_values[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { float x_values[]; };
#endif
layout(std430, set = 0, binding = 2) readonly buffer Positions { uint positions[]; };
layout(std430, set = 0, binding = 3) readonly buffer Freqs { uint freqs[]; };

layout(push_constant) uniform Params { POSENC_SINUSOIDAL_PARAMS(POSENC_PARAM_FIELD) } params;

// The Q31.32 position of row r of batch b; false for a float position that gives NaN.
bool row_position(uint b, uint r, out uvec2 position)
{
    uint kind = (params.flags >> POSENC_SINUSOIDAL_FLAG_POSITIONS_SHIFT) & 3u;
    position = uvec2(0u, uint(params.position_offset) + r);
    if (kind == POSENC_POSITIONS_NONE)
        return true;
    uint word = positions[params.positions_offset + b * params.positions_stride_batch +
                          r * params.positions_stride_row];
    return posenc_position_from_word(kind, word, position);
}

float load_x(uint index)
{
    bool in_out = (params.flags & POSENC_SINUSOIDAL_FLAG_X_IN_OUT) != 0u;
#if SIN_STORAGE16
    // Widened before the choice: selecting between 16-bit values would need Int16.
    return posenc_out_value(in_out ? uint(out_halves[index]) : uint(x_halves[index]));
#elif POSENC_OUT_16BIT
    // Another invocation may be writing the other half of the word: read it atomically.
    uint word = in_out ? atomicOr(out_words[index >> 1], 0u) : x_words[index >> 1];
    return posenc_out_value(word >> ((index & 1u) * 16u));
#else
    return in_out ? out_values[index] : x_values[index];
#endif
}

// The value stored at column `col`: the encoding `pe` scaled, plus x in add mode. `precise`
// keeps the two products unfused, as in the C code.
float column_value(uint b, uint r, uint col, float pe)
{
    precise float value = params.output_scale * pe;
    if ((params.flags & POSENC_SINUSOIDAL_FLAG_ADD) != 0u) {
        uint index = params.x_offset + b * params.x_stride_batch + r * params.x_stride_row +
                     col * params.x_stride_col;
        precise float scaled_x = load_x(index) * params.input_scale;
        value = scaled_x + value;
    }
    return value;
}

uint out_index(uint b, uint r, uint col)
{
    return params.out_offset + b * params.out_stride_batch + r * params.out_stride_row +
           col * params.out_stride_col;
}

void store(uint index, float value)
{
#if SIN_STORAGE16
    out_halves[index] = uint16_t(posenc_out_bits(value));
#elif POSENC_OUT_16BIT
    // Only this half of the word is ours: clear it, then set it, both atomically.
    uint shift = (index & 1u) * 16u;
    atomicAnd(out_words[index >> 1], ~(0xffffu << shift));
    atomicOr(out_words[index >> 1], posenc_out_bits(value) << shift);
#else
    out_values[index] = value;
#endif
}

// Frequency k of row r, batch b: its sin and cos columns; k == d_model/2 is the zero column
// of an odd d_model.
void encode(uint b, uint r, uint k)
{
    uint half_count = params.d_model >> 1;
    if (k == half_count) {
        uint col = params.d_model - 1u;
        store(out_index(b, r, col), column_value(b, r, col, 0.0));
        return;
    }
    float s = uintBitsToFloat(0x7fc00000u); // NaN
    float c = s;
    uvec2 position;
    if (row_position(b, r, position)) {
        uvec3 freq = uvec3(freqs[3u * k], freqs[3u * k + 1u], freqs[3u * k + 2u]);
        posenc_sincos_turns(posenc_turns(position, freq), s, c);
    }

    uint layout_kind = params.flags & POSENC_SINUSOIDAL_FLAG_LAYOUT_MASK;
    uint col_sin = half_count + k;
    uint col_cos = k;
    if (layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED) {
        col_sin = 2u * k;
        col_cos = 2u * k + 1u;
    } else if (layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS) {
        col_sin = k;
        col_cos = half_count + k;
    }
    float value_sin = column_value(b, r, col_sin, s);
    float value_cos = column_value(b, r, col_cos, c);
    uint index_sin = out_index(b, r, col_sin);
    uint index_cos = out_index(b, r, col_cos);
#if POSENC_OUT_16BIT && !SIN_STORAGE16
    // sin and cos filling one whole word: a plain store.
    if (layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED && params.out_stride_col == 1u &&
        (index_sin & 1u) == 0u) {
        out_words[index_sin >> 1] = posenc_out_pair_bits(value_sin, value_cos);
        return;
    }
#endif
    store(index_sin, value_sin);
    store(index_cos, value_cos);
}

void main()
{
    uint units = (params.d_model >> 1) + (params.d_model & 1u);
    uint total = units * params.batch * params.rows;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    // The step stops at `total` rather than wrap around 2^32.
    for (uint i = gl_GlobalInvocationID.x; i < total;
         i = total - i <= stride ? total : i + stride) {
        uint row = i / units;
        uint k = i - row * units;
        uint b = row / params.rows;
        encode(b, row - b * params.rows, k);
    }
}
