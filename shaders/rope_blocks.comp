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
// With POSENC_ROPE_FLAG_NORM (the POSENC_NORM=1 variants, which run nothing else) the pass
// normalizes its input first, as rope.comp does, with the head's sum from its units' sums
// (below, at main_normed).
//
// Variants (-D): POSENC_OUT_F32, POSENC_OUT_F16 or POSENC_OUT_BF16, the tensor type;
// POSENC_NORM=1 for the passes with the QK norm.
//
// Bindings as rope.comp's, with in and out read as 16-byte blocks (in place, through out); no
// cos and sin tables.
// Push constants: POSENC_ROPE_PASS, as rope.comp, where pairs, head_dim, rotary_offset and every
// offset and stride of in and out (those of dims with more than one index) are multiples of E.
// Dispatch: local size 64; any number of work groups in x (the kernel loops over the rest).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#if defined(POSENC_NORM) && POSENC_NORM
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

#ifndef POSENC_NORM
#define POSENC_NORM 0
#endif
#ifndef POSENC_NORM_PER_TOKEN
#define POSENC_NORM_PER_TOKEN 0
#endif

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
#if POSENC_NORM
layout(std430, set = 0, binding = 7) readonly buffer Norm { uint norm_weights[]; };
#endif

layout(push_constant) uniform Params { POSENC_ROPE_PASS(POSENC_PARAM_FIELD) } params;

#include "rope_rows.glsl"
#include "table_values.glsl"

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

// Rotates a unit's two blocks of values (va, vb) into (ra, rb). Pair k of the unit: NeoX
// (va[k], vb[k]); GPT-J elements 2k and 2k + 1 of va then vb.
void rotate_unit(float va[BLOCK_ELEMENTS], float vb[BLOCK_ELEMENTS], float s[BLOCK_ELEMENTS],
                 float c[BLOCK_ELEMENTS], bool gptj, out float ra[BLOCK_ELEMENTS],
                 out float rb[BLOCK_ELEMENTS])
{
    for (uint k = 0u; k < BLOCK_ELEMENTS; k++) {
        uint e = 2u * k;
        float x_a = gptj ? (e < BLOCK_ELEMENTS ? va[e] : vb[e - BLOCK_ELEMENTS]) : va[k];
        float x_b = gptj ? (e < BLOCK_ELEMENTS ? va[e + 1u] : vb[e + 1u - BLOCK_ELEMENTS]) : vb[k];
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
}

#if POSENC_NORM
// ---- The QK norm (POSENC_ROPE_FLAG_NORM): the rope_*_blocks_norm variants only -------------
// A head's units here are 8 pairs (two blocks of first elements and two of partners for f32,
// one and one for 16 bits), or 8 pass-through dims, which are normalized too, in place as
// well. A cluster of L consecutive invocations of a subgroup (L the units of a head rounded up
// to a power of two; the host sees that subgroups hold whole clusters) takes one row and a
// run of heads_per_unit heads, one unit an invocation. Per head each invocation loads its
// unit, sums its squares (a pairwise tree), and the cluster adds its sums across invocations
// (subgroupShuffleXor steps, each adding a pair of compensated sums: every invocation gets
// the same bits); then each normalizes, rotates and writes its own unit, which no other reads.
// With a norm per token the sums of every head come first (each invocation's compensated),
// then a second pass reads the heads again to write them.

// The norm's values are vectors of four: the 8 values of a unit's side (lo then hi). lavapipe
// keeps them in registers, where arrays (as main() has) go through memory.
struct side_values {
    vec4 lo;
    vec4 hi;
};

// The 8 values from block `index` on: two f32 blocks, or one of 16-bit elements.
side_values load_side(uint index, bool in_place)
{
    side_values v;
#if POSENC_OUT_16BIT
    uvec4 block = load_block(index, in_place);
    v.lo = vec4(posenc_out_pair_values(block.x), posenc_out_pair_values(block.y));
    v.hi = vec4(posenc_out_pair_values(block.z), posenc_out_pair_values(block.w));
#else
    v.lo = uintBitsToFloat(load_block(index, in_place));
    v.hi = uintBitsToFloat(load_block(index + 1u, in_place));
#endif
    return v;
}

void store_side(uint index, side_values v)
{
#if POSENC_OUT_16BIT
    out_blocks[index] =
        uvec4(posenc_out_pair_bits(v.lo.x, v.lo.y), posenc_out_pair_bits(v.lo.z, v.lo.w),
              posenc_out_pair_bits(v.hi.x, v.hi.y), posenc_out_pair_bits(v.hi.z, v.hi.w));
#else
    out_blocks[index] = floatBitsToUint(v.lo);
    out_blocks[index + 1u] = floatBitsToUint(v.hi);
#endif
}

// A unit's squares summed as a pairwise tree: 8 (a pass-through unit) or 16 of them, within
// 4 units of 2^-24 of the sum of the exact squares, relatively.
float side_squares(side_values a)
{
    precise vec4 sums = a.lo * a.lo + a.hi * a.hi;
    precise vec2 halves = sums.xy + sums.zw;
    precise float sum = halves.x + halves.y;
    return sum;
}

float unit_squares(side_values a, side_values b)
{
    precise vec4 sums = (a.lo * a.lo + a.hi * a.hi) + (b.lo * b.lo + b.hi * b.hi);
    precise vec2 halves = sums.xy + sums.zw;
    precise float sum = halves.x + halves.y;
    return sum;
}

// Kahan's step: adds `value` to (sum, carry), whose total is sum - carry.
void add_compensated(inout float sum, inout float carry, float value)
{
    precise float y = value - carry;
    precise float next = sum + y;
    precise float lost = (next - sum) - y;
    carry = lost;
    sum = next;
}

// (sum, carry), whose total is sum + carry, plus another such, the rounding error kept
// (Knuth's two-sum, exact whichever comes first): invocations adding each other's get the
// same bits.
void add_pair(inout float sum, inout float carry, float other_sum, float other_carry)
{
    precise float next = sum + other_sum;
    precise float other_part = next - sum;
    precise float error = (sum - (next - other_part)) + (other_sum - other_part);
    precise float carries = carry + other_carry;
    precise float next_carry = carries + error;
    sum = next;
    carry = next_carry;
}

// The total of a cluster of `lanes` invocations' sum + carry, in every one of them.
float cluster_sum(float sum, float carry, uint lanes)
{
    for (uint mask = 1u; mask < lanes; mask <<= 1) {
        float other_sum = subgroupShuffleXor(sum, mask);
        float other_carry = subgroupShuffleXor(carry, mask);
        add_pair(sum, carry, other_sum, other_carry);
    }
    precise float total = sum + carry;
    return total;
}

// Four weights from element `first` of binding 7 (`stride` apart), plus the offset.
vec4 weights_of(uint first, uint stride, uint dtype, float offset)
{
    vec4 w;
    for (uint k = 0u; k < 4u; k++)
        w[k] = TABLE_VALUE(norm_weights, first + k * stride, dtype);
    precise vec4 shifted = w + offset;
    return shifted;
}

side_values side_weights(uint first, uint stride, uint dtype, float offset)
{
    return side_values(weights_of(first, stride, dtype, offset),
                       weights_of(first + 4u * stride, stride, dtype, offset));
}

// x (w + offset) / sqrt(mean + eps), as rope.comp's norm: (x * factor) * (w + offset).
side_values normalized(side_values x, float factor, side_values w)
{
    precise vec4 lo = x.lo * factor * w.lo;
    precise vec4 hi = x.hi * factor * w.hi;
    return side_values(lo, hi);
}

// Four pairs (x_a[k], x_b[k]) rotated by (s[k], c[k]).
void rotate_four(inout vec4 x_a, inout vec4 x_b, vec4 s, vec4 c)
{
    precise vec4 a = x_a * c - x_b * s;
    precise vec4 b = x_a * s + x_b * c;
    x_a = a;
    x_b = b;
}

// The unit's 8 pairs rotated, pairs 0-3 by (s.lo, c.lo) and 4-7 by (s.hi, c.hi): NeoX's are a's
// and b's elements; GPT-J's interleaved, pairs 0-3 in a and 4-7 in b. A pass-through unit
// (rotated false) keeps its values. Chosen by selects, not branches: lavapipe runs both sides
// of a branch.
void rotate_unit_values(inout side_values a, inout side_values b, side_values s,
                        side_values c, bool gptj, bool rotated)
{
    vec4 first_lo = gptj ? vec4(a.lo.xz, a.hi.xz) : a.lo;
    vec4 second_lo = gptj ? vec4(a.lo.yw, a.hi.yw) : b.lo;
    vec4 first_hi = gptj ? vec4(b.lo.xz, b.hi.xz) : a.hi;
    vec4 second_hi = gptj ? vec4(b.lo.yw, b.hi.yw) : b.hi;
    rotate_four(first_lo, second_lo, s.lo, c.lo);
    rotate_four(first_hi, second_hi, s.hi, c.hi);
    side_values ra = gptj ? side_values(vec4(first_lo.x, second_lo.x, first_lo.y, second_lo.y),
                                        vec4(first_lo.z, second_lo.z, first_lo.w, second_lo.w))
                          : side_values(first_lo, first_hi);
    side_values rb = gptj ? side_values(vec4(first_hi.x, second_hi.x, first_hi.y, second_hi.y),
                                        vec4(first_hi.z, second_hi.z, first_hi.w, second_hi.w))
                          : side_values(second_lo, second_hi);
    a = rotated ? ra : a;
    b = rotated ? rb : b;
}

// The scaled sines and cosines of wide unit `unit` (8 pairs) of token (b, t).
void wide_unit_angles(uint b, uint t, uint unit, out side_values s, out side_values c)
{
    float sines[BLOCK_ELEMENTS], cosines[BLOCK_ELEMENTS];
#if POSENC_OUT_16BIT
    unit_angles(b, t, unit, sines, cosines);
    s = side_values(vec4(sines[0], sines[1], sines[2], sines[3]),
                    vec4(sines[4], sines[5], sines[6], sines[7]));
    c = side_values(vec4(cosines[0], cosines[1], cosines[2], cosines[3]),
                    vec4(cosines[4], cosines[5], cosines[6], cosines[7]));
#else
    unit_angles(b, t, 2u * unit, sines, cosines);
    s.lo = vec4(sines[0], sines[1], sines[2], sines[3]);
    c.lo = vec4(cosines[0], cosines[1], cosines[2], cosines[3]);
    unit_angles(b, t, 2u * unit + 1u, sines, cosines);
    s.hi = vec4(sines[0], sines[1], sines[2], sines[3]);
    c.hi = vec4(cosines[0], cosines[1], cosines[2], cosines[3]);
#endif
}

void main_normed(bool in_place)
{
    bool gptj = (params.flags & POSENC_ROPE_FLAG_STYLE_MASK) == POSENC_ROPE_STYLE_GPTJ;
    uint pairs = params.pairs;
    uint rotated_units = pairs / POSENC_ROPE_NORM_UNIT_PAIRS;
    uint units = rotated_units + (params.head_dim - 2u * pairs) / POSENC_ROPE_NORM_UNIT_PAIRS;
    uint lanes = units <= 1u ? 1u : 1u << (findMSB(units - 1u) + 1);
    uint rows = params.batch * params.tokens;
    uint chunks = (params.heads + params.heads_per_unit - 1u) / params.heads_per_unit;
    uint total = rows * chunks;
    uint in_head_step = (in_place ? params.out_stride_head : params.in_stride_head) >> BLOCK_SHIFT;
    uint out_head_step = params.out_stride_head >> BLOCK_SHIFT;

    uvec4 norm_words = freq_words[POSENC_ROPE_NORM_WORDS_AT(false, pairs) / 4u];
    uint weight_dtype = (params.flags >> POSENC_ROPE_FLAG_NORM_DTYPE_SHIFT) & 3u;
    uint weight_stride = norm_words[(params.flags & POSENC_ROPE_FLAG_NORM_K) != 0u
                                        ? POSENC_ROPE_NORM_K_STRIDE
                                        : POSENC_ROPE_NORM_Q_STRIDE];
    float eps = uintBitsToFloat(norm_words[POSENC_ROPE_NORM_EPS]);
    float weight_offset = uintBitsToFloat(norm_words[POSENC_ROPE_NORM_OFFSET]);
    float count = float(POSENC_NORM_PER_TOKEN != 0 ? params.heads * params.head_dim
                                                   : params.head_dim);

    // This invocation's unit, and its cluster among the dispatch's.
    uint lane = gl_SubgroupInvocationID;
    uint unit = lane % lanes;
    uint group_clusters = gl_WorkGroupSize.x / lanes;
    uint cluster = gl_WorkGroupID.x * group_clusters +
                   (gl_SubgroupID * gl_SubgroupSize + lane) / lanes;
    uint clusters = gl_NumWorkGroups.x * group_clusters;
    bool holds = unit < units; // the lanes past a head's units only add their zeros
    bool rotated = unit < rotated_units;
    uint first, second;
    if (rotated) {
        first = params.rotary_offset + (gptj ? 2u : 1u) * POSENC_ROPE_NORM_UNIT_PAIRS * unit;
        second = first + (gptj ? POSENC_ROPE_NORM_UNIT_PAIRS : pairs);
    } else {
        first = POSENC_ROPE_NORM_UNIT_PAIRS * (holds ? unit - rotated_units : 0u);
        if (first >= params.rotary_offset)
            first += 2u * pairs;
        second = first;
    }
    uint weights = params.norm_offset;
    side_values wa = side_weights(weights + first * weight_stride, weight_stride, weight_dtype,
                                  weight_offset);
    side_values wb = side_weights(weights + second * weight_stride, weight_stride, weight_dtype,
                                  weight_offset);

    // The step stops at `total` rather than wrap around 2^32; a cluster's invocations take the
    // same items, so that they shuffle together.
    for (uint i = cluster; i < total; i = total - i <= clusters ? total : i + clusters) {
        uint row = i % rows;
        uint first_head = (i / rows) * params.heads_per_unit;
        uint heads = min(params.heads_per_unit, params.heads - first_head);
        uint b = row / params.tokens;
        uint t = row - b * params.tokens;
        uint out_row;
        if (!output_row(b, t, out_row))
            continue; // the whole cluster
        uint in_row = in_place ? out_row
                               : params.in_offset + b * params.in_stride_batch +
                                     t * params.in_stride_token;
        uint in_a = (in_row >> BLOCK_SHIFT) + first_head * in_head_step + (first >> BLOCK_SHIFT);
        uint in_b = (in_row >> BLOCK_SHIFT) + first_head * in_head_step + (second >> BLOCK_SHIFT);
        uint out_a = (out_row >> BLOCK_SHIFT) + first_head * out_head_step +
                     (first >> BLOCK_SHIFT);
        uint out_b = (out_row >> BLOCK_SHIFT) + first_head * out_head_step +
                     (second >> BLOCK_SHIFT);
        side_values s = side_values(vec4(0.0), vec4(0.0)), c = s;
        if (rotated)
            wide_unit_angles(b, t, unit, s, c);
#if POSENC_NORM_PER_TOKEN
        // First the sums of every head, then the heads again.
        float token_sum = 0.0, token_carry = 0.0;
        for (uint h = 0u; h < heads && holds; h++) {
            side_values a = load_side(in_a + h * in_head_step, in_place);
            side_values v = load_side(in_b + h * in_head_step, in_place);
            add_compensated(token_sum, token_carry,
                            rotated ? unit_squares(a, v) : side_squares(a));
        }
        float factor = inversesqrt(cluster_sum(token_sum, -token_carry, lanes) / count + eps);
#endif
        for (uint h = 0u; h < heads; h++) {
#if POSENC_NORM_PER_TOKEN
            // Each head its own weights.
            uint head_weights = weights + (first_head + h) * params.head_dim * weight_stride;
            wa = side_weights(head_weights + first * weight_stride, weight_stride, weight_dtype,
                              weight_offset);
            wb = side_weights(head_weights + second * weight_stride, weight_stride,
                              weight_dtype, weight_offset);
#endif
            side_values a, v;
            float sum = 0.0;
            if (holds) {
                a = load_side(in_a + h * in_head_step, in_place);
                v = load_side(in_b + h * in_head_step, in_place);
                sum = rotated ? unit_squares(a, v) : side_squares(a);
            }
#if !POSENC_NORM_PER_TOKEN
            float factor = inversesqrt(cluster_sum(sum, 0.0, lanes) / count + eps);
#endif
            if (holds) {
                a = normalized(a, factor, wa);
                v = normalized(v, factor, wb);
                rotate_unit_values(a, v, s, c, gptj, rotated);
                // A pass-through unit's b is its a (second == first): written twice, the same.
                store_side(out_a + h * out_head_step, a);
                store_side(out_b + h * out_head_step, v);
            }
        }
    }
}

void main()
{
    main_normed((params.flags & POSENC_ROPE_FLAG_IN_PLACE) != 0u);
}

#else

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
            rotate_unit(va, vb, s, c, gptj, ra, rb);
            out_blocks[out_a + h * out_head_step] = block_of_values(ra);
            out_blocks[out_b + h * out_head_step] = block_of_values(rb);
        }
    }
}

#endif
