// SPDX-License-Identifier: MIT
// RoPE (posenc_rope) as rope.comp computes it, bit for bit, for the common layout: every head of
// in and out a run of whole, aligned 16-byte blocks (consecutive dims, 4 f32 or 8 f16/bf16
// elements a block) and the rotated dims whole blocks too. The host picks this kernel when it
// can (src/vulkan/vk_rope.c), rope.comp otherwise.
//
// One invocation per (row, unit) rotates one unit of E consecutive pairs (E = elements per
// block) in a run of `heads_per_unit` heads: it computes those pairs' sin and cos once,
// then per head loads two blocks, rotates and stores them, whole (no 16-bit access, no
// atomics). A NeoX unit is a block of first elements and the block of their partners `pairs`
// further on; a GPT-J unit two adjacent blocks of interleaved pairs. Out of place, the units
// past the rotated ones copy one pass-through block each.
//
// Variants (-D): POSENC_OUT_F32, POSENC_OUT_F16 or POSENC_OUT_BF16, the tensor type.
//
// Bindings as rope.comp's, with in and out read as 16-byte blocks (in place, through out).
// Push constants: POSENC_ROPE_PASS, as rope.comp, where pairs, head_dim, rotary_offset and every
// offset and stride of in and out (those of dims with more than one index) are multiples of E.
// Dispatch: local size 64; any number of work groups in x (the kernel loops over the rest).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require

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
layout(std430, set = 0, binding = 1) readonly buffer In { uvec4 in_blocks[]; };
layout(std430, set = 0, binding = 2) readonly buffer Positions { uint positions[]; };
// The same table as rope.comp's, four words at a time: a unit's E triplets start at word 3 * E
// * unit and its E components at 3 * pairs + E * unit, both multiples of 4.
layout(std430, set = 0, binding = 3) readonly buffer Freqs { uvec4 freq_words[]; };
layout(std430, set = 0, binding = 4) readonly buffer Slots { uint slots[]; };

layout(push_constant) uniform Params { POSENC_ROPE_PASS(POSENC_PARAM_FIELD) } params;

#include "rope_rows.glsl"

uvec4 load_block(uint index, bool in_place)
{
    if (in_place)
        return out_blocks[index];
    return in_blocks[index];
}

// The E values of a block, in element order.
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

// The scaled sin and cos of the unit's pairs for token (b, t): rope.comp's values.
void unit_angles(uint b, uint t, uint unit, out float s[BLOCK_ELEMENTS],
                 out float c[BLOCK_ELEMENTS])
{
    const uint quads = 3u * BLOCK_ELEMENTS / 4u;
    uint words[3 * BLOCK_ELEMENTS];
    for (uint q = 0u; q < quads; q++) {
        uvec4 quad = freq_words[quads * unit + q];
        for (uint w = 0u; w < 4u; w++)
            words[4u * q + w] = quad[w];
    }
    uint components[BLOCK_ELEMENTS];
    for (uint q = 0u; q < BLOCK_ELEMENTS / 4u; q++) {
        uvec4 quad = freq_words[(3u * params.pairs + BLOCK_ELEMENTS * unit) / 4u + q];
        for (uint w = 0u; w < 4u; w++)
            components[4u * q + w] = quad[w];
    }
    bool inverse = (params.flags & POSENC_ROPE_FLAG_INVERSE) != 0u;
    // Rolled: once per invocation, against every head's work; unrolled it only multiplies the
    // code (lavapipe took twice as long to compile the 16-bit variants).
    [[dont_unroll]] for (uint k = 0u; k < BLOCK_ELEMENTS; k++) {
        float sin_t = uintBitsToFloat(0x7fc00000u); // NaN
        float cos_t = sin_t;
        uvec2 position;
        if (token_position(b, t, components[k], position)) {
            uvec3 freq = uvec3(words[3u * k], words[3u * k + 1u], words[3u * k + 2u]);
            posenc_sincos_turns(posenc_turns(position, freq), sin_t, cos_t);
        }
        if (inverse)
            sin_t = -sin_t;
        precise float scaled_s = sin_t * params.attention_factor;
        precise float scaled_c = cos_t * params.attention_factor;
        s[k] = scaled_s;
        c[k] = scaled_c;
    }
}

void main()
{
    bool in_place = (params.flags & POSENC_ROPE_FLAG_IN_PLACE) != 0u;
    bool gptj = (params.flags & POSENC_ROPE_FLAG_STYLE_MASK) == POSENC_ROPE_STYLE_GPTJ;
    uint pairs = params.pairs;
    uint rotated_units = pairs >> BLOCK_SHIFT;
    uint pass_units = in_place ? 0u : (params.head_dim - 2u * pairs) >> BLOCK_SHIFT;
    uint per_row = rotated_units + pass_units;
    uint rows = params.batch * params.tokens;
    uint chunks = (params.heads + params.heads_per_unit - 1u) / params.heads_per_unit;
    uint total = per_row * rows * chunks;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint in_head_step = params.in_stride_head >> BLOCK_SHIFT;
    uint out_head_step = params.out_stride_head >> BLOCK_SHIFT;
    // The step stops at `total` rather than wrap around 2^32.
    for (uint i = gl_GlobalInvocationID.x; i < total;
         i = total - i <= stride ? total : i + stride) {
        uint unit = i % per_row;
        uint rest = i / per_row;
        uint row = rest % rows;
        uint first_head = (rest / rows) * params.heads_per_unit;
        uint heads = min(params.heads_per_unit, params.heads - first_head);
        uint b = row / params.tokens;
        uint t = row - b * params.tokens;
        uint out_row;
        if (!output_row(b, t, out_row))
            continue;
        uint in_row = in_place ? out_row
                               : params.in_offset + b * params.in_stride_batch +
                                     t * params.in_stride_token;
        uint in_head = (in_row >> BLOCK_SHIFT) + first_head * in_head_step;
        uint out_head = (out_row >> BLOCK_SHIFT) + first_head * out_head_step;

        if (unit >= rotated_units) {
            // A pass-through block: before rotary_offset, or after the rotated dims.
            uint d = (unit - rotated_units) << BLOCK_SHIFT;
            if (d >= params.rotary_offset)
                d += 2u * pairs;
            uint in_block = in_head + (d >> BLOCK_SHIFT);
            uint out_block = out_head + (d >> BLOCK_SHIFT);
            for (uint h = 0u; h < heads; h++)
                out_blocks[out_block + h * out_head_step] = in_blocks[in_block + h * in_head_step];
            continue;
        }

        float s[BLOCK_ELEMENTS], c[BLOCK_ELEMENTS];
        unit_angles(b, t, unit, s, c);

        // The unit's two blocks: NeoX, first elements then their partners; GPT-J, the unit's
        // 2E interleaved elements.
        uint first = params.rotary_offset + (gptj ? 2u : 1u) * (unit << BLOCK_SHIFT);
        uint second = first + (gptj ? BLOCK_ELEMENTS : pairs);
        uint in_a = in_head + (first >> BLOCK_SHIFT), in_b = in_head + (second >> BLOCK_SHIFT);
        uint out_a = out_head + (first >> BLOCK_SHIFT);
        uint out_b = out_head + (second >> BLOCK_SHIFT);
        for (uint h = 0u; h < heads; h++) {
            float va[BLOCK_ELEMENTS], vb[BLOCK_ELEMENTS];
            block_values(load_block(in_a + h * in_head_step, in_place), va);
            block_values(load_block(in_b + h * in_head_step, in_place), vb);
            float ra[BLOCK_ELEMENTS], rb[BLOCK_ELEMENTS];
            for (uint k = 0u; k < BLOCK_ELEMENTS; k++) {
                // Pair k of the unit: NeoX (va[k], vb[k]); GPT-J elements 2k and 2k + 1 of
                // va then vb.
                uint e = 2u * k;
                float x_a = gptj ? (e < BLOCK_ELEMENTS ? va[e] : vb[e - BLOCK_ELEMENTS]) : va[k];
                float x_b = gptj ? (e < BLOCK_ELEMENTS ? va[e + 1u] : vb[e + 1u - BLOCK_ELEMENTS])
                                 : vb[k];
                precise float y_a = x_a * c[k] - x_b * s[k];
                precise float y_b = x_a * s[k] + x_b * c[k];
                if (gptj) {
                    if (e < BLOCK_ELEMENTS) {
                        ra[e] = y_a;
                        ra[e + 1u] = y_b;
                    } else {
                        rb[e - BLOCK_ELEMENTS] = y_a;
                        rb[e + 1u - BLOCK_ELEMENTS] = y_b;
                    }
                } else {
                    ra[k] = y_a;
                    rb[k] = y_b;
                }
            }
            out_blocks[out_a + h * out_head_step] = block_of_values(ra);
            out_blocks[out_b + h * out_head_step] = block_of_values(rb);
        }
    }
}
