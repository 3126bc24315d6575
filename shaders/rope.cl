/* SPDX-License-Identifier: MIT */
/* Rotary position embeddings (posenc_rope) for q and k of one layer in one launch:
 *   (x_a, x_b) -> (x_a c - x_b s, x_a s + x_b c),  s, c = attention_factor * sin, cos(t)
 * with t = +-position * inv_freq[j] reduced exactly (angle.cl). NeoX pairs dim j with
 * j + rotary_dim/2, GPT-J dim 2j with 2j+1. Dims from rotary_dim to head_dim are copied
 * unchanged when a tensor is rotated out of place (and left alone in place).
 *
 * Work: one unit per (batch, token, head chunk, lane). Lanes 0..rotary_dim/2-1 are the pairs:
 * a lane computes sin/cos once and rotates that pair in every head of its chunk. Lanes from
 * rotary_dim/2 on copy one pass-through dim each. Heads 0..q_heads-1 are q's, the rest k's.
 * Adjacent lanes touch adjacent dims, so memory accesses coalesce.
 *
 * Variants (build options): -DPOSENC_OUT_F32, -DPOSENC_OUT_F16 or -DPOSENC_OUT_BF16, the type
 * of q, q_out, k and k_out.
 *
 * Arguments:
 *   0..3   q, q_out, k, k_out   global elements (in place: q_out is q; no k: any buffer, and
 *                               k_heads 0)
 *   4      positions  global i32 or f32 elements as uint; read only with POSITIONS_I32/F32
 *   5      freqs      global uint triplets (int_turns, frac_hi, frac_lo), rotary_dim/2 of them,
 *                     then rotary_dim/2 uints: the position component each frequency uses
 *   6..39  POSENC_ROPE_ARGS of posenc_kernel_params.h: offsets and strides of the four
 *          tensors, the positions' layout, the sizes, the chunk size (heads_per_unit), the lanes
 *          (rotary_dim/2, plus head_dim - rotary_dim when a copy is needed), position_offset
 *          (positions absent: position = position_offset + token, every component), the
 *          POSENC_ROPE_FLAG_* flags and attention_factor
 * Every element index, and batch * tokens * chunks * lanes, fits in 32 bits.
 * Global size: any; one dimension (the kernel loops over the rest).
 */
#include "angle.cl"
#include "dtype.cl"
#include "posenc_kernel_params.h"

/* Pass-through dims are copied as bits, so NaN payloads and signed zeros survive. */
#if defined(POSENC_OUT_F32)
#define POSENC_BITS_TYPE uint
#else
#define POSENC_BITS_TYPE ushort
#endif

kernel void posenc_rope(global POSENC_OUT_TYPE *q, global POSENC_OUT_TYPE *q_out,
                        global POSENC_OUT_TYPE *k, global POSENC_OUT_TYPE *k_out,
                        const global uint *positions,
                        const global uint *freqs POSENC_ROPE_ARGS(POSENC_PARAM_ARGUMENT))
{
    uint half_count = rotary_dim >> 1;
    uint total_heads = q_heads + k_heads;
    uint chunks = (total_heads + heads_per_unit - 1u) / heads_per_unit;
    uint per_row = chunks * lanes;
    uint total = per_row * batch * tokens;
    uint stride = (uint)get_global_size(0);
    uint positions_kind = (flags >> POSENC_ROPE_FLAG_POSITIONS_SHIFT) & 3u;
    uint first_step = (flags & POSENC_ROPE_FLAG_GPTJ) != 0u ? 2u : 1u;
    uint second = (flags & POSENC_ROPE_FLAG_GPTJ) != 0u ? 1u : half_count;

    /* The step stops at `total` rather than wrap around 2^32. */
    for (uint i = (uint)get_global_id(0); i < total; i = total - i <= stride ? total : i + stride) {
        uint row = i / per_row;
        uint rest = i - row * per_row;
        uint chunk = rest / lanes;
        uint lane = rest - chunk * lanes;
        uint b = row / tokens;
        uint t = row - b * tokens;
        uint head_begin = chunk * heads_per_unit;
        uint head_end = min(head_begin + heads_per_unit, total_heads);

        if (lane >= half_count) { /* a pass-through dim */
            uint d = rotary_dim + (lane - half_count);
            for (uint h = head_begin; h < head_end; h++) {
                int is_q = h < q_heads;
                uint in_place = is_q ? POSENC_ROPE_FLAG_IN_PLACE : POSENC_ROPE_FLAG_K_IN_PLACE;
                if ((flags & in_place) != 0u)
                    continue;
                uint hh = is_q ? h : h - q_heads;
                uint src = is_q ? q_offset + b * q_stride_batch + t * q_stride_token +
                                      hh * q_stride_head + d * q_stride_dim
                                : k_offset + b * k_stride_batch + t * k_stride_token +
                                      hh * k_stride_head + d * k_stride_dim;
                uint dst = is_q ? qo_offset + b * qo_stride_batch + t * qo_stride_token +
                                      hh * qo_stride_head + d * qo_stride_dim
                                : ko_offset + b * ko_stride_batch + t * ko_stride_token +
                                      hh * ko_stride_head + d * ko_stride_dim;
                const global POSENC_BITS_TYPE *in =
                    (const global POSENC_BITS_TYPE *)(is_q ? q : k);
                global POSENC_BITS_TYPE *out = (global POSENC_BITS_TYPE *)(is_q ? q_out : k_out);
                out[dst] = in[src];
            }
            continue;
        }

        float s = as_float(0x7fc00000u), c = s; /* NaN for an invalid float position */
        uint2 position = (uint2)(0u, (uint)position_offset + t);
        int valid = 1;
        if (positions_kind != POSENC_POSITIONS_NONE)
            valid = posenc_position_from_word(positions_kind,
                                              positions[positions_offset +
                                                        b * positions_stride_batch +
                                                        t * positions_stride_token +
                                                        freqs[3u * half_count + lane] *
                                                            positions_stride_component],
                                              &position);
        if (valid) {
            uint3 freq = (uint3)(freqs[3u * lane], freqs[3u * lane + 1u], freqs[3u * lane + 2u]);
            posenc_sincos_turns(posenc_turns(position, freq), &s, &c);
        }
        if ((flags & POSENC_ROPE_FLAG_INVERSE) != 0u)
            s = -s;
        s = s * attention_factor;
        c = c * attention_factor;

        uint dim_a = lane * first_step;
        uint dim_b = dim_a + second;
        for (uint h = head_begin; h < head_end; h++) {
            int is_q = h < q_heads;
            uint hh = is_q ? h : h - q_heads;
            uint src = is_q ? q_offset + b * q_stride_batch + t * q_stride_token +
                                  hh * q_stride_head
                            : k_offset + b * k_stride_batch + t * k_stride_token +
                                  hh * k_stride_head;
            uint dst = is_q ? qo_offset + b * qo_stride_batch + t * qo_stride_token +
                                  hh * qo_stride_head
                            : ko_offset + b * ko_stride_batch + t * ko_stride_token +
                                  hh * ko_stride_head;
            uint src_dim = is_q ? q_stride_dim : k_stride_dim;
            uint dst_dim = is_q ? qo_stride_dim : ko_stride_dim;
            const global POSENC_OUT_TYPE *in = is_q ? q : k;
            global POSENC_OUT_TYPE *out = is_q ? q_out : k_out;
            float xa = posenc_load_out(in, src + dim_a * src_dim);
            float xb = posenc_load_out(in, src + dim_b * src_dim);
            posenc_store_out(out, dst + dim_a * dst_dim, xa * c - xb * s);
            posenc_store_out(out, dst + dim_b * dst_dim, xa * s + xb * c);
        }
    }
}
