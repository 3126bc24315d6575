// SPDX-License-Identifier: MIT
// Sinusoidal position encodings (posenc_sinusoidal) as sinusoidal.comp computes them, bit for
// bit, for the common layout: consecutive columns, every row of out (and of x in add mode) a
// run of whole, aligned 16-byte blocks (4 f32 or 8 f16/bf16 elements a block), an even d_model
// and d_model/2 frequencies a multiple of E (elements per block). The host picks this kernel
// when it can (src/vulkan/vk_sinusoidal.c), sinusoidal.comp otherwise.
//
// One invocation per (unit, run of rows): a unit is E consecutive frequencies, two blocks of a
// row (interleaved: the 2E columns of its sin and cos; sin|cos and cos|sin: E sin columns and
// their E cos columns). The invocation reads the unit's frequencies once, then for each of its
// rows computes E sin and cos and stores two whole blocks. Without a positions binding the
// position steps by one from row to row, so the turns do too: frac((p + 1) f) = frac(p f) +
// frac(f) exactly in the Q0.64 fixed point of angle.glsl, and one 64-bit add replaces the
// product of the next row.
//
// Variants (-D): POSENC_OUT_F32, POSENC_OUT_F16 or POSENC_OUT_BF16, the type of out and x.
//
// Bindings as sinusoidal.comp's, with out and x read and written as 16-byte blocks.
// Push constants: POSENC_SINUSOIDAL_PARAMS, as sinusoidal.comp, where every offset and stride of
// out and x (those of dims with more than one index) is a multiple of E and out_stride_col (and
// x_stride_col) is 1.
// Dispatch: local size 64. The rows are shared out over the invocations dispatched: with N
// invocations, each unit's rows go in runs to N / units of them (at least one; past N the kernel
// loops over the units), so the dispatch size sets how many rows an invocation takes.
#version 450
#extension GL_GOOGLE_include_directive : require

#include "angle.glsl"
#include "dtype.glsl"
#include "posenc_kernel_params.h"

#if POSENC_OUT_16BIT
#define BLOCK_ELEMENTS 8
#define BLOCK_SHIFT 3u
#else
#define BLOCK_ELEMENTS 4
#define BLOCK_SHIFT 2u
#endif

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) buffer Out { uvec4 out_blocks[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { uvec4 x_blocks[]; };
layout(std430, set = 0, binding = 2) readonly buffer Positions { uint positions[]; };
// The same table as sinusoidal.comp's, four words at a time: a unit's E triplets start at word
// 3 * E * unit, a multiple of 4.
layout(std430, set = 0, binding = 3) readonly buffer Freqs { uvec4 freq_words[]; };

layout(push_constant) uniform Params { POSENC_SINUSOIDAL_PARAMS(POSENC_PARAM_FIELD) } params;

void block_values(uvec4 block, out float values[BLOCK_ELEMENTS])
{
    for (int w = 0; w < 4; w++) {
#if POSENC_OUT_16BIT
        vec2 pair = posenc_out_pair_values(block[w]);
        values[2 * w] = pair.x;
        values[2 * w + 1] = pair.y;
#else
        values[w] = uintBitsToFloat(block[w]);
#endif
    }
}

uvec4 block_of_values(float values[BLOCK_ELEMENTS])
{
    uvec4 block;
    for (int w = 0; w < 4; w++) {
#if POSENC_OUT_16BIT
        block[w] = posenc_out_pair_bits(values[2 * w], values[2 * w + 1]);
#else
        block[w] = floatBitsToUint(values[w]);
#endif
    }
    return block;
}

uvec4 load_x(uint index, bool in_out)
{
    if (in_out)
        return out_blocks[index];
    return x_blocks[index];
}

// A block's values as stored: output_scale * pe, plus x * input_scale in add mode (the block
// of x at `x_index`), with sinusoidal.comp's products and sum.
uvec4 output_block(float pe[BLOCK_ELEMENTS], bool add, bool in_out, uint x_index)
{
    float x[BLOCK_ELEMENTS];
    if (add)
        block_values(load_x(x_index, in_out), x);
    float values[BLOCK_ELEMENTS];
    for (uint k = 0u; k < BLOCK_ELEMENTS; k++) {
        precise float value = params.output_scale * pe[k];
        if (add) {
            precise float scaled_x = x[k] * params.input_scale;
            value = scaled_x + value;
        }
        values[k] = value;
    }
    return block_of_values(values);
}

void main()
{
    uint half_count = params.d_model >> 1;
    uint units = half_count >> BLOCK_SHIFT;
    uint all_rows = params.batch * params.rows;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint runs = clamp(stride / units, 1u, all_rows);
    uint run_rows = (all_rows + runs - 1u) / runs;
    uint total = units * runs;
    uint layout_kind = params.flags & POSENC_SINUSOIDAL_FLAG_LAYOUT_MASK;
    bool interleaved = layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED;
    bool sin_first = layout_kind == POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS; // else cos|sin
    uint positions_kind = (params.flags >> POSENC_SINUSOIDAL_FLAG_POSITIONS_SHIFT) & 3u;
    bool add = (params.flags & POSENC_SINUSOIDAL_FLAG_ADD) != 0u;
    bool in_out = (params.flags & POSENC_SINUSOIDAL_FLAG_X_IN_OUT) != 0u;
    uint x_offset = in_out ? params.out_offset : params.x_offset;
    uint x_stride_batch = in_out ? params.out_stride_batch : params.x_stride_batch;
    uint x_stride_row = in_out ? params.out_stride_row : params.x_stride_row;
    // The step stops at `total` rather than wrap around 2^32.
    for (uint i = gl_GlobalInvocationID.x; i < total;
         i = total - i <= stride ? total : i + stride) {
        uint unit = i % units;
        uint first_row = (i / units) * run_rows;
        uint end_row = min(first_row + run_rows, all_rows);

        const uint quads = 3u * BLOCK_ELEMENTS / 4u;
        uint words[3 * BLOCK_ELEMENTS];
        for (uint q = 0u; q < quads; q++) {
            uvec4 quad = freq_words[quads * unit + q];
            for (uint w = 0u; w < 4u; w++)
                words[4u * q + w] = quad[w];
        }
        // The unit's two blocks in a row: their first columns.
        uint column = interleaved ? (unit << BLOCK_SHIFT) * 2u : unit << BLOCK_SHIFT;
        uint second_column = column + (interleaved ? BLOCK_ELEMENTS : half_count);

        uint b = first_row / params.rows;
        uint r = first_row - b * params.rows;
        uvec2 turns[BLOCK_ELEMENTS];
        bool stepped = false; // turns hold the previous row's, one position below
        for (uint row = first_row; row < end_row; row++) {
            bool valid = true;
            if (stepped) {
                for (uint k = 0u; k < BLOCK_ELEMENTS; k++) {
                    uint carry;
                    turns[k].x = uaddCarry(turns[k].x, words[3u * k + 2u], carry);
                    turns[k].y += words[3u * k + 1u] + carry;
                }
            } else {
                uvec2 position = uvec2(0u, uint(params.position_offset) + r);
                if (positions_kind != POSENC_POSITIONS_NONE) {
                    uint word = positions[params.positions_offset +
                                          b * params.positions_stride_batch +
                                          r * params.positions_stride_row];
                    valid = posenc_position_from_word(positions_kind, word, position);
                }
                for (uint k = 0u; k < BLOCK_ELEMENTS; k++) {
                    uvec3 freq = uvec3(words[3u * k], words[3u * k + 1u], words[3u * k + 2u]);
                    turns[k] = posenc_turns(position, freq);
                }
            }
            float s[BLOCK_ELEMENTS], c[BLOCK_ELEMENTS];
            for (uint k = 0u; k < BLOCK_ELEMENTS; k++) {
                s[k] = uintBitsToFloat(0x7fc00000u); // NaN
                c[k] = s[k];
                if (valid)
                    posenc_sincos_turns(turns[k], s[k], c[k]);
            }
            // The two blocks' encodings: interleaved, sin and cos of the unit's first and
            // second halves; else the sins and the coss, in the layout's order.
            float first[BLOCK_ELEMENTS], second[BLOCK_ELEMENTS];
            for (uint k = 0u; k < BLOCK_ELEMENTS; k++) {
                uint pair = k >> 1;
                bool is_sin = (k & 1u) == 0u;
                first[k] = interleaved ? (is_sin ? s[pair] : c[pair]) : sin_first ? s[k] : c[k];
                second[k] = interleaved ? (is_sin ? s[pair + BLOCK_ELEMENTS / 2u]
                                                  : c[pair + BLOCK_ELEMENTS / 2u])
                            : sin_first ? c[k]
                                        : s[k];
            }
            uint out_row = params.out_offset + b * params.out_stride_batch +
                           r * params.out_stride_row;
            uint x_row = x_offset + b * x_stride_batch + r * x_stride_row;
            out_blocks[(out_row + column) >> BLOCK_SHIFT] =
                output_block(first, add, in_out, (x_row + column) >> BLOCK_SHIFT);
            out_blocks[(out_row + second_column) >> BLOCK_SHIFT] =
                output_block(second, add, in_out, (x_row + second_column) >> BLOCK_SHIFT);

            r++;
            stepped = positions_kind == POSENC_POSITIONS_NONE && r < params.rows;
            if (r == params.rows) {
                r = 0u;
                b++;
            }
        }
    }
}
