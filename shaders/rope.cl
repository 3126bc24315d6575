/* SPDX-License-Identifier: MIT */
/* Rotary position embeddings (posenc_rope) for q and k of one layer in one launch:
 *   (x_a, x_b) -> (x_a c - x_b s, x_a s + x_b c),  s, c = attention_factor * sin, cos(t)
 * with t = +-position * inv_freq[j] reduced exactly (angle.cl). NeoX pairs dim j with
 * j + rotary_dim/2, GPT-J dim 2j with 2j+1, counted from rotary_offset (0 but for a rotary
 * part inside the head). The other dims are copied unchanged when a tensor is rotated out of
 * place (and left alone in place).
 * With POSENC_ROPE_FLAG_K_CACHE the same launch also writes the paged KV cache: each k head of
 * token (b, t), rotated exactly as for k_out, is stored in row slot_mapping[b, t] of k_cache,
 * and each v head is copied bit for bit into the same row of v_cache; a slot outside
 * [0, num_slots) writes nothing. One launch for the whole call, as a decode step is mostly
 * launch latency.
 *
 * Work: one unit per (batch, token, head chunk, lane). Lanes 0..rotary_dim/2-1 are the pairs:
 * a lane computes sin/cos once and rotates that pair in every head of its chunk. Lanes from
 * rotary_dim/2 on copy one pass-through dim each. Heads 0..q_heads-1 are q's, then k_heads of
 * k's, then v_heads of v's (a pair lane copies its two dims of a v head, a pass-through lane its
 * one). Adjacent lanes touch adjacent dims, so memory accesses coalesce.
 *
 * Variants (build options): -DPOSENC_OUT_F32, -DPOSENC_OUT_F16 or -DPOSENC_OUT_BF16, the type
 * of q, q_out, k, k_out, k_cache, v and v_cache.
 *
 * Arguments:
 *   0..3   q, q_out, k, k_out   global elements (in place: q_out is q; no k: any buffer, and
 *                               k_heads 0; k_out not written (POSENC_ROPE_FLAG_K_CACHE_ONLY):
 *                               any buffer)
 *   4      positions  global i32 or f32 elements as uint; read only with POSITIONS_I32/F32
 *   5..8   slot_mapping (global i32), k_cache, v, v_cache (global elements): used only with
 *          POSENC_ROPE_FLAG_K_CACHE (v and v_cache with v_heads > 0), else any buffer
 *   9      freqs      global uint triplets (int_turns, frac_hi, frac_lo), rotary_dim/2 of them,
 *                     then rotary_dim/2 uints: the position component each frequency uses
 *   10..65 POSENC_ROPE_ARGS of posenc_kernel_params.h: offsets and strides of the tensors, the
 *          positions' layout, the sizes, the chunk size (heads_per_unit), the lanes
 *          (rotary_dim/2, plus head_dim - rotary_dim when a copy is needed), position_offset
 *          (positions absent: position = position_offset + token, every component), the
 *          POSENC_ROPE_FLAG_* flags, attention_factor, then the caches' layout
 * Every element index, and batch * tokens * chunks * lanes, fits in 32 bits.
 * Global size: any; one dimension (the kernel loops over the rest).
 */
#include "angle.cl"
#include "dtype.cl"
#include "kv_cache.cl"
#include "posenc_kernel_params.h"

/* Pass-through dims are copied as bits, so NaN payloads and signed zeros survive. */
#if defined(POSENC_OUT_F32)
#define POSENC_BITS_TYPE uint
#else
#define POSENC_BITS_TYPE ushort
#endif

/* Element index of (a, b, c, d) in a tensor of that offset and those strides. */
uint posenc_rope_at(uint offset, uint stride_a, uint a, uint stride_b, uint b, uint stride_c,
                    uint c, uint stride_d, uint d)
{
    return offset + a * stride_a + b * stride_b + c * stride_c + d * stride_d;
}

kernel void posenc_rope(global POSENC_OUT_TYPE *q, global POSENC_OUT_TYPE *q_out,
                        global POSENC_OUT_TYPE *k, global POSENC_OUT_TYPE *k_out,
                        const global uint *positions, const global int *slot_mapping,
                        global POSENC_OUT_TYPE *k_cache, const global POSENC_OUT_TYPE *v,
                        global POSENC_OUT_TYPE *v_cache,
                        const global uint *freqs POSENC_ROPE_ARGS(POSENC_PARAM_ARGUMENT))
{
    uint half_count = rotary_dim >> 1;
    uint qk_heads = q_heads + k_heads;
    uint total_heads = qk_heads + v_heads;
    uint chunks = (total_heads + heads_per_unit - 1u) / heads_per_unit;
    uint per_row = chunks * lanes;
    uint total = per_row * batch * tokens;
    uint stride = (uint)get_global_size(0);
    uint positions_kind = (flags >> POSENC_ROPE_FLAG_POSITIONS_SHIFT) & 3u;
    uint style = flags & POSENC_ROPE_FLAG_STYLE_MASK;
    int q_copied = (flags & POSENC_ROPE_FLAG_IN_PLACE) == 0u;
    int k_written = (flags & POSENC_ROPE_FLAG_K_CACHE_ONLY) == 0u;
    int k_copied = k_written && (flags & POSENC_ROPE_FLAG_K_IN_PLACE) == 0u;

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

        /* The cache row of this token, if it has one: the slot's block and row in the block.
         * Out of range, the caches are not written at all. */
        uint block = 0u, in_block = 0u;
        int cached = (flags & POSENC_ROPE_FLAG_K_CACHE) != 0u &&
                     posenc_cache_row(slot_mapping[slots_offset + b * slots_stride_batch +
                                                   t * slots_stride_token],
                                      num_slots, block_size, &block, &in_block);

        if (lane >= half_count) { /* a pass-through dim */
            /* Copied as bits, so NaN payloads and signed zeros survive. */
            const global POSENC_BITS_TYPE *q_bits = (const global POSENC_BITS_TYPE *)q;
            const global POSENC_BITS_TYPE *k_bits = (const global POSENC_BITS_TYPE *)k;
            const global POSENC_BITS_TYPE *v_bits = (const global POSENC_BITS_TYPE *)v;
            /* Those before rotary_offset, then those after the rotated dims. */
            uint d = lane - half_count;
            if (d >= rotary_offset)
                d += rotary_dim;
            for (uint h = head_begin; h < head_end; h++) {
                if (h < q_heads) {
                    if (q_copied)
                        ((global POSENC_BITS_TYPE *)q_out)[posenc_rope_at(
                            qo_offset, qo_stride_batch, b, qo_stride_token, t, qo_stride_head,
                            h, qo_stride_dim, d)] =
                            q_bits[posenc_rope_at(q_offset, q_stride_batch, b, q_stride_token, t,
                                                  q_stride_head, h, q_stride_dim, d)];
                } else if (h < qk_heads) {
                    uint hh = h - q_heads;
                    POSENC_BITS_TYPE x =
                        k_bits[posenc_rope_at(k_offset, k_stride_batch, b, k_stride_token, t,
                                              k_stride_head, hh, k_stride_dim, d)];
                    if (k_copied)
                        ((global POSENC_BITS_TYPE *)k_out)[posenc_rope_at(
                            ko_offset, ko_stride_batch, b, ko_stride_token, t, ko_stride_head,
                            hh, ko_stride_dim, d)] = x;
                    if (cached)
                        ((global POSENC_BITS_TYPE *)k_cache)[posenc_rope_at(
                            kc_offset, kc_stride_block, block, kc_stride_row, in_block,
                            kc_stride_head, hh, kc_stride_dim, d)] = x;
                } else if (cached) {
                    uint hh = h - qk_heads;
                    ((global POSENC_BITS_TYPE *)v_cache)[posenc_rope_at(
                        vc_offset, vc_stride_block, block, vc_stride_row, in_block,
                        vc_stride_head, hh, vc_stride_dim, d)] =
                        v_bits[posenc_rope_at(v_offset, v_stride_batch, b, v_stride_token, t,
                                              v_stride_head, hh, v_stride_dim, d)];
                }
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

        uint dim_a = rotary_offset + POSENC_ROPE_PAIR_FIRST(style, lane, half_count);
        uint dim_b = rotary_offset + POSENC_ROPE_PAIR_SECOND(style, lane, half_count);
        for (uint h = head_begin; h < head_end; h++) {
            if (h >= qk_heads) { /* v: its two dims copied as bits into the cache row */
                if (!cached)
                    continue;
                const global POSENC_BITS_TYPE *in = (const global POSENC_BITS_TYPE *)v;
                global POSENC_BITS_TYPE *out = (global POSENC_BITS_TYPE *)v_cache;
                uint hh = h - qk_heads;
                uint src = posenc_rope_at(v_offset, v_stride_batch, b, v_stride_token, t,
                                          v_stride_head, hh, 0u, 0u);
                uint dst = posenc_rope_at(vc_offset, vc_stride_block, block, vc_stride_row,
                                          in_block, vc_stride_head, hh, 0u, 0u);
                out[dst + dim_a * vc_stride_dim] = in[src + dim_a * v_stride_dim];
                out[dst + dim_b * vc_stride_dim] = in[src + dim_b * v_stride_dim];
                continue;
            }
            int is_q = h < q_heads;
            uint hh = is_q ? h : h - q_heads;
            uint src = is_q ? posenc_rope_at(q_offset, q_stride_batch, b, q_stride_token, t,
                                             q_stride_head, hh, 0u, 0u)
                            : posenc_rope_at(k_offset, k_stride_batch, b, k_stride_token, t,
                                             k_stride_head, hh, 0u, 0u);
            uint src_dim = is_q ? q_stride_dim : k_stride_dim;
            const global POSENC_OUT_TYPE *in = is_q ? q : k;
            float xa = posenc_load_out(in, src + dim_a * src_dim);
            float xb = posenc_load_out(in, src + dim_b * src_dim);
            /* Computed once, so the cache row holds the very bits k_out does. */
            float ra = xa * c - xb * s;
            float rb = xa * s + xb * c;
            if (is_q || k_written) {
                uint dst = is_q ? posenc_rope_at(qo_offset, qo_stride_batch, b, qo_stride_token,
                                                 t, qo_stride_head, hh, 0u, 0u)
                                : posenc_rope_at(ko_offset, ko_stride_batch, b, ko_stride_token,
                                                 t, ko_stride_head, hh, 0u, 0u);
                uint dst_dim = is_q ? qo_stride_dim : ko_stride_dim;
                global POSENC_OUT_TYPE *out = is_q ? q_out : k_out;
                posenc_store_out(out, dst + dim_a * dst_dim, ra);
                posenc_store_out(out, dst + dim_b * dst_dim, rb);
            }
            if (!is_q && cached) {
                uint dst = posenc_rope_at(kc_offset, kc_stride_block, block, kc_stride_row,
                                          in_block, kc_stride_head, hh, 0u, 0u);
                posenc_store_out(k_cache, dst + dim_a * kc_stride_dim, ra);
                posenc_store_out(k_cache, dst + dim_b * kc_stride_dim, rb);
            }
        }
    }
}
