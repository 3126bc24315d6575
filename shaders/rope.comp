// SPDX-License-Identifier: MIT
// RoPE (posenc_rope) on one tensor, q or k, over a box of [batch, tokens, heads]:
//   (x_a, x_b) -> (x_a c - x_b s, x_a s + x_b c),  s = +-attention_factor * sin(t),
//   c = attention_factor * cos(t),  t = position * inv_freq[j]
// with (a, b) = (j, j + pairs) in the NeoX style and (2j, 2j + 1) in the GPT-J style, counted
// from rotary_offset (0 but for a rotary part inside the head). Out of place, the other dims are
// copied unchanged. Angles follow angle.glsl.
//
// One invocation per (row, pair j) computes sin and cos once and rotates pair j of a run of
// `heads_per_unit` heads; consecutive invocations take consecutive pairs, so each head's
// loads and stores are contiguous across a work group. Invocations past the pairs of a row copy
// two pass-through dims each instead (out of place only). This kernel takes any layout;
// rope_blocks.comp computes the same bits faster where heads are whole 16-byte blocks.
//
// With POSENC_ROPE_FLAG_SLOTS the output is a paged KV cache: token (b, t) writes the row of its
// slot (binding 4) and nothing when the slot is outside [0, num_slots). The host runs k into
// k_cache this way, and v into v_cache with pairs = 0 (every dim copied).
//
// With POSENC_ROPE_FLAG_TABLES each pair takes its cos and sin from the caller's tables (bindings
// 5 and 6) instead, times the direction's sign: the token's row gathered for it, or picked by its
// position; a token whose position picks no row writes nothing, in every pass (binding 3 then
// holds the tables' layout, POSENC_ROPE_TABLE_*). The tables are read as words, so that 16-bit
// tables need no 16-bit storage.
//
// With POSENC_ROPE_FLAG_NORM the pass normalizes its input first (the QK RMSNorm, binding 7 the
// weights, the norm's words after binding 3's table): one invocation per run of heads_per_unit
// heads of a row (every head of it for a norm per token, at most POSENC_ROPE_NORM_UNIT_HEADS
// for a norm per head) sums each head's squares, then normalizes, rotates and writes every dim
// of them, so that no invocation reads an element another has written in place; each pair's
// sine and cosine are taken once for all of the run's heads. The sum is compensated (Kahan) in
// f32.
//
// Variants (-D): POSENC_OUT_F32, POSENC_OUT_F16 or POSENC_OUT_BF16, the tensor type;
// POSENC_STORAGE16=1 for 16-bit types on devices with 16-bit storage (else two per word, see
// elements.glsl); POSENC_NORM=1 for the passes with the QK norm, which run nothing else.
//
// Bindings (descriptor set 0, all storage buffers):
//   0  out        the output elements (also the input when rotating in place)
//   1  in         the input elements; read only when not in place (bind any buffer otherwise)
//   2  positions  i32 or f32 elements, as uint words; read only with POSITIONS_I32/F32
//   3  freqs      uint triplets (int_turns, frac_hi, frac_lo) per pair: turns per position;
//                 then one uint per pair: the position component it uses (multimodal kinds)
//   4  slots      i32 cache slot of each token, as uint words; read only with FLAG_SLOTS
//   5  cos        f32, or 16-bit elements two to a word; read only with FLAG_TABLES
//   6  sin        the same
//   7  norm       the pass's norm weights, f32 or 16-bit elements as cos; read only with FLAG_NORM
// Push constants: the pass's POSENC_ROPE_PASS block, with POSENC_ROPE_FLAG_* flags
// (posenc_kernel_params.h).
// Offsets and strides are in elements from the start of each binding (bound at a multiple of 4
// bytes, so that 16-bit elements keep their place in a word). The host splits larger work into
// several dispatches, so that every element index and the invocation count below fit in 32 bits.
// Dispatch: local size 64; any number of work groups in x (the kernel loops over the rest).
#version 450
#extension GL_GOOGLE_include_directive : require
#if defined(POSENC_STORAGE16) && POSENC_STORAGE16
#extension GL_EXT_shader_16bit_storage : require
#define POSENC_ELEMENT_T uint16_t
#else
#define POSENC_ELEMENT_T uint
#endif

#ifndef POSENC_NORM
#define POSENC_NORM 0
#endif

#include "angle.glsl"
#include "dtype.glsl"
#include "posenc_kernel_params.h"

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) buffer Out { POSENC_ELEMENT_T out_data[]; };
layout(std430, set = 0, binding = 1) readonly buffer In { POSENC_ELEMENT_T in_data[]; };
layout(std430, set = 0, binding = 2) readonly buffer Positions { uint positions[]; };
layout(std430, set = 0, binding = 3) readonly buffer Freqs { uint freqs[]; };
layout(std430, set = 0, binding = 4) readonly buffer Slots { uint slots[]; };
layout(std430, set = 0, binding = 5) readonly buffer Cos { uint cos_table[]; };
layout(std430, set = 0, binding = 6) readonly buffer Sin { uint sin_table[]; };
layout(std430, set = 0, binding = 7) readonly buffer Norm { uint norm_weights[]; };

#include "elements.glsl"

layout(push_constant) uniform Params { POSENC_ROPE_PASS(POSENC_PARAM_FIELD) } params;

#include "rope_rows.glsl"
#include "table_values.glsl"

// The first elements of token (b, t)'s rows of cos and sin: the row gathered for it, or the row
// of its i32 position; false when the position picks no row (the token is left unwritten).
bool table_rows(uint b, uint t, out uint cos_row, out uint sin_row)
{
    uint row = t;
    cos_row = sin_row = 0u;
    if ((freqs[POSENC_ROPE_TABLE_FORM] & POSENC_ROPE_TABLE_BY_TOKEN) == 0u) {
        uvec2 position;
        token_position(b, t, 0u, position); // i32 positions: always a position
        row = position.y;
        if (int(row) < 0 || row >= freqs[POSENC_ROPE_TABLE_ROWS])
            return false;
    }
    cos_row = params.cos_offset + b * freqs[POSENC_ROPE_TABLE_COS_STRIDE_BATCH] +
              row * freqs[POSENC_ROPE_TABLE_COS_STRIDE_ROW];
    sin_row = params.sin_offset + b * freqs[POSENC_ROPE_TABLE_SIN_STRIDE_BATCH] +
              row * freqs[POSENC_ROPE_TABLE_SIN_STRIDE_ROW];
    return true;
}

// The sine and cosine that rotate pair j of token (b, t), signed by the direction and scaled by
// attention_factor: from the caller's tables (their rows given) or the exact angle.
void pair_factors(uint b, uint t, uint j, uint cos_row, uint sin_row, out float scaled_s,
                  out float scaled_c)
{
    uint style = params.flags & POSENC_ROPE_FLAG_STYLE_MASK;
    uint pairs = params.pairs;
    float s = uintBitsToFloat(0x7fc00000u); // NaN
    float c = s;
    uvec2 position;
    if ((params.flags & POSENC_ROPE_FLAG_TABLES) != 0u) {
        uint column = (freqs[POSENC_ROPE_TABLE_FORM] & POSENC_ROPE_TABLE_FULL_WIDTH) != 0u
                          ? POSENC_ROPE_PAIR_FIRST(style, j, pairs)
                          : j;
        uint ci = cos_row + column * freqs[POSENC_ROPE_TABLE_COS_STRIDE_COLUMN];
        uint si = sin_row + column * freqs[POSENC_ROPE_TABLE_SIN_STRIDE_COLUMN];
        c = TABLE_VALUE(cos_table, ci, freqs[POSENC_ROPE_TABLE_COS_DTYPE]);
        s = TABLE_VALUE(sin_table, si, freqs[POSENC_ROPE_TABLE_SIN_DTYPE]);
    } else if (token_position(b, t, freqs[3u * pairs + j], position)) {
        uvec3 freq = uvec3(freqs[3u * j], freqs[3u * j + 1u], freqs[3u * j + 2u]);
        posenc_sincos_turns(posenc_turns(position, freq), s, c);
    }
    if ((params.flags & POSENC_ROPE_FLAG_INVERSE) != 0u)
        s = -s;
    precise float ps = s * params.attention_factor;
    precise float pc = c * params.attention_factor;
    scaled_s = ps;
    scaled_c = pc;
}

// Rotates the pair at input elements (ia, ib) into output elements (oa, ob).
void rotate(uint ia, uint ib, uint oa, uint ob, float s, float c, bool in_place)
{
    uint bits_a, bits_b;
#if POSENC_PACKED_WORDS
    if (posenc_whole_word(ia, ib)) {
        uint word = in_place ? out_data[ia >> 1] : in_data[ia >> 1];
        bits_a = word & 0xffffu;
        bits_b = word >> 16;
    } else
#endif
    {
        bits_a = in_place ? posenc_out_bits_of(ia) : posenc_in_bits(ia);
        bits_b = in_place ? posenc_out_bits_of(ib) : posenc_in_bits(ib);
    }
    float a = posenc_value_of_bits(bits_a);
    float b = posenc_value_of_bits(bits_b);
    precise float out_a = a * c - b * s;
    precise float out_b = a * s + b * c;
#if POSENC_PACKED_WORDS
    if (posenc_whole_word(oa, ob)) {
        out_data[oa >> 1] = posenc_out_pair_bits(out_a, out_b);
        return;
    }
#endif
    posenc_store_bits(oa, posenc_bits_of_value(out_a));
    posenc_store_bits(ob, posenc_bits_of_value(out_b));
}

// Copies pass-through dims d and d + 1 (when below head_dim) of one head, bit for bit.
void copy_dims(uint in_head, uint out_head, uint d)
{
    uint ia = in_head + d * params.in_stride_dim;
    uint oa = out_head + d * params.out_stride_dim;
    bool second = d + 1u < params.head_dim;
    uint ib = ia + params.in_stride_dim;
    uint ob = oa + params.out_stride_dim;
#if POSENC_PACKED_WORDS
    if (second && posenc_whole_word(ia, ib) && posenc_whole_word(oa, ob)) {
        out_data[oa >> 1] = in_data[ia >> 1];
        return;
    }
#endif
    posenc_store_bits(oa, posenc_in_bits(ia));
    if (second)
        posenc_store_bits(ob, posenc_in_bits(ib));
}

// ---- The QK norm (POSENC_ROPE_FLAG_NORM): the rope_*_norm variants only ---------------------
// Kept out of the other variants: on lavapipe the norm's code in the same shader made a call's
// dispatch cost 15 us more (the one-pair call of `posenc bench`, 70 us before), norm or not.
#if POSENC_NORM

float input_value(uint index, bool in_place)
{
    return posenc_value_of_bits(in_place ? posenc_out_bits_of(index) : posenc_in_bits(index));
}

// The sum of the squares of heads [first, end) of the row at `in_row`, compensated (Kahan):
// within 2 units of 2^-24 of the sum of the rounded squares, whatever the count.
float square_sum(uint in_row, uint first, uint end, uint stride_head, uint stride_dim,
                 bool in_place)
{
    precise float sum = 0.0;
    precise float carry = 0.0;
    for (uint h = first; h < end; h++) {
        for (uint d = 0u; d < params.head_dim; d++) {
            float x = input_value(in_row + h * stride_head + d * stride_dim, in_place);
            precise float y = x * x - carry;
            precise float next = sum + y;
            carry = (next - sum) - y;
            sum = next;
        }
    }
    return sum;
}

// Normalizes, rotates and writes each head of each unit (heads_per_unit heads of a row).
void main_normed(bool in_place, bool tables)
{
    uint style = params.flags & POSENC_ROPE_FLAG_STYLE_MASK;
    uint pairs = params.pairs;
    bool per_token = (params.flags & POSENC_ROPE_FLAG_NORM_PER_TOKEN) != 0u;
    uint weight_dtype = (params.flags >> POSENC_ROPE_FLAG_NORM_DTYPE_SHIFT) & 3u;
    uint words = POSENC_ROPE_NORM_WORDS_AT(tables, pairs);
    uint weight_stride = freqs[words + ((params.flags & POSENC_ROPE_FLAG_NORM_K) != 0u
                                            ? POSENC_ROPE_NORM_K_STRIDE
                                            : POSENC_ROPE_NORM_Q_STRIDE)];
    float eps = uintBitsToFloat(freqs[words + POSENC_ROPE_NORM_EPS]);
    float weight_offset = uintBitsToFloat(freqs[words + POSENC_ROPE_NORM_OFFSET]);
    uint in_stride_dim = in_place ? params.out_stride_dim : params.in_stride_dim;
    uint in_stride_head = in_place ? params.out_stride_head : params.in_stride_head;
    uint rows = params.batch * params.tokens;
    uint chunks = (params.heads + params.heads_per_unit - 1u) / params.heads_per_unit;
    uint total = rows * chunks;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < total;
         i = total - i <= stride ? total : i + stride) {
        uint row = i % rows;
        uint first_head = (i / rows) * params.heads_per_unit;
        uint end_head = min(first_head + params.heads_per_unit, params.heads);
        uint b = row / params.tokens;
        uint t = row - b * params.tokens;
        uint in_row = params.in_offset + b * params.in_stride_batch + t * params.in_stride_token;
        uint out_row;
        if (!output_row(b, t, out_row))
            continue;
        uint cos_row, sin_row;
        if (tables && !table_rows(b, t, cos_row, sin_row))
            continue;
        if (in_place)
            in_row = out_row;
        // Per token, one factor for the unit, which holds every head of the row; per head, one
        // for each of the unit's heads (POSENC_ROPE_NORM_UNIT_HEADS at most: the host sees to
        // both).
        float token_factor = per_token ? inversesqrt(square_sum(in_row, first_head, end_head,
                                                                in_stride_head, in_stride_dim,
                                                                in_place) /
                                                         float(params.heads * params.head_dim) +
                                                     eps)
                                       : 0.0;
        float factors[POSENC_ROPE_NORM_UNIT_HEADS];
        for (uint h = first_head; h < end_head && !per_token; h++)
            factors[h - first_head] =
                inversesqrt(square_sum(in_row + h * in_stride_head, 0u, 1u, 0u, in_stride_dim,
                                       in_place) /
                                float(params.head_dim) +
                            eps);
        // Every dim is read (once, by this invocation) before it is written: first the dims
        // outside the rotated ones, head by head.
        for (uint h = first_head; h < end_head; h++) {
            uint in_head = in_row + h * in_stride_head;
            uint out_head = out_row + h * params.out_stride_head;
            float factor = per_token ? token_factor : factors[h - first_head];
            uint weights = params.norm_offset + (per_token ? h * params.head_dim : 0u) *
                                                    weight_stride;
            for (uint d = 0u; d < params.head_dim; d++) {
                if (d >= params.rotary_offset && d < params.rotary_offset + 2u * pairs)
                    continue;
                float w = TABLE_VALUE(norm_weights, weights + d * weight_stride, weight_dtype);
                precise float value =
                    input_value(in_head + d * in_stride_dim, in_place) * factor *
                    (w + weight_offset);
                posenc_store_bits(out_head + d * params.out_stride_dim,
                                  posenc_bits_of_value(value));
            }
        }
        // Then the pairs, each pair's sine and cosine taken once for all of the unit's heads.
        for (uint j = 0u; j < pairs; j++) {
            float s, c;
            pair_factors(b, t, j, cos_row, sin_row, s, c);
            uint da = params.rotary_offset + POSENC_ROPE_PAIR_FIRST(style, j, pairs);
            uint db = params.rotary_offset + POSENC_ROPE_PAIR_SECOND(style, j, pairs);
            for (uint h = first_head; h < end_head; h++) {
                uint in_head = in_row + h * in_stride_head;
                uint out_head = out_row + h * params.out_stride_head;
                float factor = per_token ? token_factor : factors[h - first_head];
                uint weights = params.norm_offset + (per_token ? h * params.head_dim : 0u) *
                                                        weight_stride;
                float wa = TABLE_VALUE(norm_weights, weights + da * weight_stride, weight_dtype);
                float wb = TABLE_VALUE(norm_weights, weights + db * weight_stride, weight_dtype);
                precise float xa =
                    input_value(in_head + da * in_stride_dim, in_place) * factor *
                    (wa + weight_offset);
                precise float xb =
                    input_value(in_head + db * in_stride_dim, in_place) * factor *
                    (wb + weight_offset);
                precise float out_a = xa * c - xb * s;
                precise float out_b = xa * s + xb * c;
                posenc_store_bits(out_head + da * params.out_stride_dim,
                                  posenc_bits_of_value(out_a));
                posenc_store_bits(out_head + db * params.out_stride_dim,
                                  posenc_bits_of_value(out_b));
            }
        }
    }
}

#endif

void main()
{
    bool in_place = (params.flags & POSENC_ROPE_FLAG_IN_PLACE) != 0u;
    bool tables = (params.flags & POSENC_ROPE_FLAG_TABLES) != 0u;
#if POSENC_NORM
    // The host runs this variant for the passes that normalize, and only those.
    main_normed(in_place, tables);
#else
    uint style = params.flags & POSENC_ROPE_FLAG_STYLE_MASK;
    uint pairs = params.pairs;
    uint pass_units = in_place ? 0u : (params.head_dim - 2u * pairs + 1u) >> 1;
    uint per_row = pairs + pass_units;
    uint rows = params.batch * params.tokens;
    uint chunks = (params.heads + params.heads_per_unit - 1u) / params.heads_per_unit;
    uint total = per_row * rows * chunks;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    // The step stops at `total` rather than wrap around 2^32.
    for (uint i = gl_GlobalInvocationID.x; i < total;
         i = total - i <= stride ? total : i + stride) {
        uint j = i % per_row;
        uint rest = i / per_row;
        uint row = rest % rows;
        uint first_head = (rest / rows) * params.heads_per_unit;
        uint end_head = min(first_head + params.heads_per_unit, params.heads);
        uint b = row / params.tokens;
        uint t = row - b * params.tokens;
        uint in_row = params.in_offset + b * params.in_stride_batch + t * params.in_stride_token;
        uint out_row;
        if (!output_row(b, t, out_row))
            continue;
        uint cos_row, sin_row;
        if (tables && !table_rows(b, t, cos_row, sin_row))
            continue;
        if (in_place)
            in_row = out_row;

        if (j >= pairs) {
            // The pass-through dims: those before rotary_offset, then those after the rotated
            // ones (rotary_offset is even, so a unit's two dims never straddle them).
            uint d = 2u * (j - pairs);
            if (d >= params.rotary_offset)
                d += 2u * pairs;
            for (uint h = first_head; h < end_head; h++)
                copy_dims(in_row + h * params.in_stride_head, out_row + h * params.out_stride_head,
                          d);
            continue;
        }

        float scaled_s, scaled_c;
        pair_factors(b, t, j, cos_row, sin_row, scaled_s, scaled_c);

        uint da = params.rotary_offset + POSENC_ROPE_PAIR_FIRST(style, j, pairs);
        uint db = params.rotary_offset + POSENC_ROPE_PAIR_SECOND(style, j, pairs);
        uint in_stride_dim = in_place ? params.out_stride_dim : params.in_stride_dim;
        uint in_stride_head = in_place ? params.out_stride_head : params.in_stride_head;
        for (uint h = first_head; h < end_head; h++) {
            uint in_head = in_row + h * in_stride_head;
            uint out_head = out_row + h * params.out_stride_head;
            rotate(in_head + da * in_stride_dim, in_head + db * in_stride_dim,
                   out_head + da * params.out_stride_dim, out_head + db * params.out_stride_dim,
                   scaled_s, scaled_c, in_place);
        }
    }
#endif
}
