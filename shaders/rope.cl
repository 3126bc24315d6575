/* SPDX-License-Identifier: MIT */
/* Rotary position embeddings (posenc_rope) for q and k of one layer in one launch:
 *   (x_a, x_b) -> (x_a c - x_b s, x_a s + x_b c),  s, c = attention_factor * sin, cos(t)
 * with t = +-position * inv_freq[j] reduced exactly (angle.cl). NeoX pairs dim j with
 * j + rotary_dim/2, GPT-J dim 2j with 2j+1, counted from rotary_offset (0 but for a rotary
 * part inside the head). The other dims are copied unchanged when a tensor is rotated out of
 * place (and left alone in place).
 * With the cache passes the same launch also writes the paged KV cache: each k head of token
 * (b, t), rotated exactly as for k_out, is stored in row slot_mapping[b, t] of k_cache, and each
 * v head is copied bit for bit into the same row of v_cache; a slot outside [0, num_slots)
 * writes nothing. One launch for every pass of the call, as a decode step is mostly launch
 * latency.
 *
 * Work: one unit per (batch, token, head chunk, lane). Lanes 0..rotary_dim/2-1 are the pairs:
 * a lane computes sin/cos once and rotates that pair in every head of its chunk. Lanes from
 * rotary_dim/2 on copy one pass-through dim each. Heads 0..q_heads-1 are q's, then k_heads of
 * k's, then v_heads of v's (a pair lane copies its two dims of a v head, a pass-through lane its
 * one). Adjacent lanes touch adjacent dims, so memory accesses coalesce.
 *
 * With POSENC_ROPE_FLAG_TABLES each pair takes its cos and sin from the caller's tables instead
 * (times the direction's sign): the token's row gathered for it, or picked by its position, and
 * a token whose position picks no row writes nothing (freqs then holds the tables' layout).
 *
 * With POSENC_ROPE_FLAG_NORM in q's or k's block the work is split as rope_norm.cl says.
 *
 * Variants (build options): -DPOSENC_OUT_F32, -DPOSENC_OUT_F16 or -DPOSENC_OUT_BF16, the type
 * of q, q_out, k, k_out, k_cache, v and v_cache.
 *
 * Arguments:
 *   0..3   q, q_out, k, k_out   global elements (in place: q_out is q, k_out is k; no k pass
 *                               (no k, or k_out not written): any buffer)
 *   4      positions  global i32 or f32 elements as uint; read only with POSITIONS_I32/F32
 *   5..8   slot_mapping (global i32), k_cache, v, v_cache (global elements): used only with the
 *          cache passes, else any buffer
 *   9, 10  cos, sin   global f32, f16 or bf16 table elements (as their layout says), read only
 *                     with POSENC_ROPE_FLAG_TABLES, else any buffer
 *   11, 12 q_norm_weight, k_norm_weight  global f32, f16 or bf16 weights, read only with
 *                     POSENC_ROPE_FLAG_NORM in q's block (in k's), else any buffer
 *   13     freqs      global uint triplets (int_turns, frac_hi, frac_lo), rotary_dim/2 of them,
 *                     then rotary_dim/2 uints: the position component each frequency uses; with
 *                     POSENC_ROPE_FLAG_TABLES the POSENC_ROPE_TABLE_* words instead; then with a
 *                     norm its POSENC_ROPE_NORM_* words
 *   14..17 the passes' POSENC_ROPE_PASS blocks of posenc_kernel_params.h, in POSENC_ROPE_PASS_*
 *          order: q into q_out, k into k_cache (POSENC_ROPE_FLAG_SLOTS), v into v_cache, k into
 *          k_out; an absent pass's block has no heads. The q block gives what every pass
 *          shares: the positions, the sizes, the chunk size (heads_per_unit), the pairs
 *          (rotary_dim/2), head_dim, rotary_offset, position_offset, the style and direction
 *          flags, attention_factor and the tables' offsets; the k_cache block the slots and the
 *          caches' size.
 * Lanes: rotary_dim/2, plus head_dim - rotary_dim when a pass copies pass-through dims (one
 * that writes out of place; core/gpu_rope.c counts them alike to size the launch).
 * Every element index, and batch * tokens * chunks * lanes, fits in 32 bits.
 * Global size: any; one dimension (the kernel loops over the rest).
 */
#include "angle.cl"
#include "dtype.cl"
#include "kv_cache.cl"
#include "posenc_kernel_params.h"
#include "rope_passes.cl"
#include "table_values.cl"

/* Pass-through dims are copied as bits, so NaN payloads and signed zeros survive. */
#if defined(POSENC_OUT_F32)
#define POSENC_BITS_TYPE uint
#else
#define POSENC_BITS_TYPE ushort
#endif

/* Element index of (b, t, h, d) in a pass's input, and in its output (with
 * POSENC_ROPE_FLAG_SLOTS, b and t are the cache block and the row in it). */
POSENC_INLINE uint posenc_rope_in_at(const posenc_rope_pass *pass, uint b, uint t, uint h,
                                     uint d)
{
    return pass->in_offset + b * pass->in_stride_batch + t * pass->in_stride_token +
           h * pass->in_stride_head + d * pass->in_stride_dim;
}

POSENC_INLINE uint posenc_rope_out_at(const posenc_rope_pass *pass, uint b, uint t, uint h,
                                      uint d)
{
    return pass->out_offset + b * pass->out_stride_batch + t * pass->out_stride_token +
           h * pass->out_stride_head + d * pass->out_stride_dim;
}

/* The first elements of token (b, t)'s rows of cos and sin: the row gathered for it, or the row
 * of its position; false when the position picks no row (the token is then left unwritten). */
POSENC_INLINE int posenc_rope_table_rows(const posenc_rope_pass *qp, const global uint *layout,
                                         const global uint *positions, uint b, uint t,
                                         uint *cos_row, uint *sin_row)
{
    uint row = t;
    if ((layout[POSENC_ROPE_TABLE_FORM] & POSENC_ROPE_TABLE_BY_TOKEN) == 0u) {
        row = (uint)qp->position_offset + t;
        if (((qp->flags >> POSENC_ROPE_FLAG_POSITIONS_SHIFT) & 3u) != POSENC_POSITIONS_NONE)
            row = positions[qp->positions_offset + b * qp->positions_stride_batch +
                            t * qp->positions_stride_token];
        if ((int)row < 0 || row >= layout[POSENC_ROPE_TABLE_ROWS])
            return 0;
    }
    *cos_row = qp->cos_offset + b * layout[POSENC_ROPE_TABLE_COS_STRIDE_BATCH] +
               row * layout[POSENC_ROPE_TABLE_COS_STRIDE_ROW];
    *sin_row = qp->sin_offset + b * layout[POSENC_ROPE_TABLE_SIN_STRIDE_BATCH] +
               row * layout[POSENC_ROPE_TABLE_SIN_STRIDE_ROW];
    return 1;
}

/* The sine and cosine that rotate pair `lane` of token (b, t), signed by the direction and
 * scaled by attention_factor: from the caller's tables (their rows given) or the exact angle. */
POSENC_INLINE void posenc_rope_pair_factors(const posenc_rope_pass *qp, const global uint *freqs,
                                            const global uint *positions,
                                            const global uint *cos_table,
                                            const global uint *sin_table, uint b, uint t,
                                            uint lane, uint cos_row, uint sin_row, float *s_out,
                                            float *c_out)
{
    uint flags = qp->flags, half_count = qp->pairs;
    uint positions_kind = (flags >> POSENC_ROPE_FLAG_POSITIONS_SHIFT) & 3u;
    int tables = (flags & POSENC_ROPE_FLAG_TABLES) != 0u;
    float s = as_float(0x7fc00000u), c = s; /* NaN for an invalid float position */
    uint2 position = (uint2)(0u, (uint)qp->position_offset + t);
    int valid = !tables;
    if (tables) {
        uint column = (freqs[POSENC_ROPE_TABLE_FORM] & POSENC_ROPE_TABLE_FULL_WIDTH) != 0u
                          ? POSENC_ROPE_PAIR_FIRST(flags & POSENC_ROPE_FLAG_STYLE_MASK, lane,
                                                   half_count)
                          : lane;
        c = posenc_rope_table_value(cos_table,
                                    cos_row + column * freqs[POSENC_ROPE_TABLE_COS_STRIDE_COLUMN],
                                    freqs[POSENC_ROPE_TABLE_COS_DTYPE]);
        s = posenc_rope_table_value(sin_table,
                                    sin_row + column * freqs[POSENC_ROPE_TABLE_SIN_STRIDE_COLUMN],
                                    freqs[POSENC_ROPE_TABLE_SIN_DTYPE]);
    } else if (positions_kind != POSENC_POSITIONS_NONE)
        valid = posenc_position_from_word(positions_kind,
                                          positions[qp->positions_offset +
                                                    b * qp->positions_stride_batch +
                                                    t * qp->positions_stride_token +
                                                    freqs[3u * half_count + lane] *
                                                        qp->positions_stride_component],
                                          &position);
    if (valid) {
        uint3 freq = (uint3)(freqs[3u * lane], freqs[3u * lane + 1u], freqs[3u * lane + 2u]);
        posenc_sincos_turns(posenc_turns(position, freq), &s, &c);
    }
    if ((flags & POSENC_ROPE_FLAG_INVERSE) != 0u)
        s = -s;
    *s_out = s * qp->attention_factor;
    *c_out = c * qp->attention_factor;
}

#include "rope_norm.cl"

kernel void posenc_rope(global POSENC_OUT_TYPE *q, global POSENC_OUT_TYPE *q_out,
                        global POSENC_OUT_TYPE *k, global POSENC_OUT_TYPE *k_out,
                        const global uint *positions, const global int *slot_mapping,
                        global POSENC_OUT_TYPE *k_cache, const global POSENC_OUT_TYPE *v,
                        global POSENC_OUT_TYPE *v_cache, const global uint *cos_table,
                        const global uint *sin_table, const global uint *q_norm_weight,
                        const global uint *k_norm_weight, const global uint *freqs,
                        posenc_rope_pass q_pass, posenc_rope_pass k_cache_pass,
                        posenc_rope_pass v_cache_pass, posenc_rope_pass k_pass)
{
    POSENC_ROPE_PRIVATE_PASSES(q_pass, k_cache_pass, v_cache_pass, k_pass);
    uint flags = qp->flags;
    uint half_count = qp->pairs;
    uint rotary_dim = 2u * half_count;
    uint rotary_offset = qp->rotary_offset;
    uint heads_per_unit = qp->heads_per_unit;
    uint q_heads = qp->heads;
    uint qk_heads = q_heads + k_in->heads;
    uint total_heads = qk_heads + vcp->heads;
    int q_copied = (flags & POSENC_ROPE_FLAG_IN_PLACE) == 0u;
    int k_written = kp->heads != 0u;
    int k_copied = k_written && (kp->flags & POSENC_ROPE_FLAG_IN_PLACE) == 0u;
    uint lanes = half_count + (q_copied || k_copied || cache ? qp->head_dim - rotary_dim : 0u);
    uint chunks = (total_heads + heads_per_unit - 1u) / heads_per_unit;
    uint per_row = chunks * lanes;
    uint tokens = qp->tokens;
    uint total = per_row * qp->batch * tokens;
    uint stride = (uint)get_global_size(0);
    uint style = flags & POSENC_ROPE_FLAG_STYLE_MASK;
    int tables = (flags & POSENC_ROPE_FLAG_TABLES) != 0u;
    if (((qp->flags | k_in->flags) & POSENC_ROPE_FLAG_NORM) != 0u) {
        posenc_rope_normed(q, q_out, k, k_out, positions, slot_mapping, k_cache, v, v_cache,
                           cos_table, sin_table, q_norm_weight, k_norm_weight, freqs, passes);
        return;
    }

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
        uint cos_row = 0u, sin_row = 0u;
        if (tables && !posenc_rope_table_rows(qp, freqs, positions, b, t, &cos_row, &sin_row))
            continue;

        /* The cache row of this token, if it has one: the slot's block and row in the block.
         * Out of range, the caches are not written at all. */
        uint block = 0u, in_block = 0u;
        int cached = cache && posenc_cache_row(slot_mapping[kcp->slots_offset +
                                                            b * kcp->slots_stride_batch +
                                                            t * kcp->slots_stride_token],
                                               kcp->num_slots, kcp->block_size, &block,
                                               &in_block);

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
                        ((global POSENC_BITS_TYPE *)q_out)[posenc_rope_out_at(qp, b, t, h, d)] =
                            q_bits[posenc_rope_in_at(qp, b, t, h, d)];
                } else if (h < qk_heads) {
                    uint hh = h - q_heads;
                    POSENC_BITS_TYPE x = k_bits[posenc_rope_in_at(k_in, b, t, hh, d)];
                    if (k_copied)
                        ((global POSENC_BITS_TYPE *)k_out)[posenc_rope_out_at(kp, b, t, hh, d)] =
                            x;
                    if (cached)
                        ((global POSENC_BITS_TYPE *)
                             k_cache)[posenc_rope_out_at(kcp, block, in_block, hh, d)] = x;
                } else if (cached) {
                    uint hh = h - qk_heads;
                    ((global POSENC_BITS_TYPE *)
                         v_cache)[posenc_rope_out_at(vcp, block, in_block, hh, d)] =
                        v_bits[posenc_rope_in_at(vcp, b, t, hh, d)];
                }
            }
            continue;
        }

        float s, c;
        posenc_rope_pair_factors(qp, freqs, positions, cos_table, sin_table, b, t, lane, cos_row,
                                 sin_row, &s, &c);

        uint dim_a = rotary_offset + POSENC_ROPE_PAIR_FIRST(style, lane, half_count);
        uint dim_b = rotary_offset + POSENC_ROPE_PAIR_SECOND(style, lane, half_count);
        for (uint h = head_begin; h < head_end; h++) {
            if (h >= qk_heads) { /* v: its two dims copied as bits into the cache row */
                if (!cached)
                    continue;
                const global POSENC_BITS_TYPE *in = (const global POSENC_BITS_TYPE *)v;
                global POSENC_BITS_TYPE *out = (global POSENC_BITS_TYPE *)v_cache;
                uint hh = h - qk_heads;
                out[posenc_rope_out_at(vcp, block, in_block, hh, dim_a)] =
                    in[posenc_rope_in_at(vcp, b, t, hh, dim_a)];
                out[posenc_rope_out_at(vcp, block, in_block, hh, dim_b)] =
                    in[posenc_rope_in_at(vcp, b, t, hh, dim_b)];
                continue;
            }
            int is_q = h < q_heads;
            uint hh = is_q ? h : h - q_heads;
            const posenc_rope_pass *src = is_q ? qp : k_in;
            const global POSENC_OUT_TYPE *in = is_q ? q : k;
            float xa = posenc_load_out(in, posenc_rope_in_at(src, b, t, hh, dim_a));
            float xb = posenc_load_out(in, posenc_rope_in_at(src, b, t, hh, dim_b));
            /* Computed once, so the cache row holds the very bits k_out does. */
            float ra = xa * c - xb * s;
            float rb = xa * s + xb * c;
            if (is_q || k_written) {
                const posenc_rope_pass *dst = is_q ? qp : kp;
                global POSENC_OUT_TYPE *out = is_q ? q_out : k_out;
                posenc_store_out(out, posenc_rope_out_at(dst, b, t, hh, dim_a), ra);
                posenc_store_out(out, posenc_rope_out_at(dst, b, t, hh, dim_b), rb);
            }
            if (!is_q && cached) {
                posenc_store_out(k_cache, posenc_rope_out_at(kcp, block, in_block, hh, dim_a),
                                 ra);
                posenc_store_out(k_cache, posenc_rope_out_at(kcp, block, in_block, hh, dim_b),
                                 rb);
            }
        }
    }
}
