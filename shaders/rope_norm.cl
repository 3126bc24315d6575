/* SPDX-License-Identifier: MIT */
/* rope.cl's work when q's or k's block has POSENC_ROPE_FLAG_NORM (the QK RMSNorm before the
 * rotation): per (batch, token), one unit per run of heads_per_unit heads of q and of k (the
 * host's, at most POSENC_ROPE_NORM_UNIT_HEADS), or one for all of a token's q (or k) heads where
 * that tensor's norm is per token, and one per head of v. A unit sums its heads' squares, then
 * normalizes, rotates and writes every dim of them, x (w + offset) / sqrt(mean(x^2) + eps), so
 * that no work-item reads an element another has written in place; each pair's sine and cosine
 * are taken once for all of the unit's heads. A tensor without a norm is rotated as rope.cl does
 * (its pass-through dims copied as bits, or left alone in place); a v unit copies its head into
 * the cache row. The sum is compensated (Kahan) in f32. Included by rope.cl after its helpers. */
#ifndef POSENC_ROPE_NORM_CL
#define POSENC_ROPE_NORM_CL

/* The sum of the squares of heads [first, end) of token (b, t) in `x` as `pass` reads it,
 * compensated: within 2 units of 2^-24 of the sum of the rounded squares, whatever the count. */
POSENC_INLINE float posenc_rope_square_sum(const global POSENC_OUT_TYPE *x,
                                           const posenc_rope_pass *pass, uint b, uint t,
                                           uint first, uint end)
{
    float sum = 0.0f, carry = 0.0f;
    for (uint h = first; h < end; h++) {
        for (uint d = 0u; d < pass->head_dim; d++) {
            float value = posenc_load_out(x, posenc_rope_in_at(pass, b, t, h, d));
            float y = value * value - carry;
            float next = sum + y;
            carry = (next - sum) - y;
            sum = next;
        }
    }
    return sum;
}

/* How one head is normalized: the weights of its dim 0 (at `at` elements, `stride` apart, of
 * POSENC_TABLE_* `dtype`), the weight offset and the head's 1 / sqrt(mean(x^2) + eps). */
typedef struct posenc_rope_norm {
    int normed; /* 0: the tensor has no norm, its values are taken as they are */
    const global uint *weights;
    uint at, stride, dtype;
    float offset, factor;
} posenc_rope_norm;

/* Dim d of head h, normalized where the tensor is. */
POSENC_INLINE float posenc_rope_normed_value(const global POSENC_OUT_TYPE *x,
                                             const posenc_rope_pass *pass, uint b, uint t, uint h,
                                             uint d, const posenc_rope_norm *norm)
{
    float value = posenc_load_out(x, posenc_rope_in_at(pass, b, t, h, d));
    if (!norm->normed)
        return value;
    float w = posenc_rope_table_value(norm->weights, norm->at + d * norm->stride, norm->dtype);
    return value * norm->factor * (w + norm->offset);
}

POSENC_INLINE void posenc_rope_normed(
    global POSENC_OUT_TYPE *q, global POSENC_OUT_TYPE *q_out, global POSENC_OUT_TYPE *k,
    global POSENC_OUT_TYPE *k_out, const global uint *positions, const global int *slot_mapping,
    global POSENC_OUT_TYPE *k_cache, const global POSENC_OUT_TYPE *v,
    global POSENC_OUT_TYPE *v_cache, const global uint *cos_table, const global uint *sin_table,
    const global uint *q_norm_weight, const global uint *k_norm_weight, const global uint *freqs,
    const posenc_rope_pass *passes)
{
    POSENC_ROPE_PASS_POINTERS(passes);
    uint pairs = qp->pairs, rotary_offset = qp->rotary_offset, head_dim = qp->head_dim;
    uint style = qp->flags & POSENC_ROPE_FLAG_STYLE_MASK;
    int tables = (qp->flags & POSENC_ROPE_FLAG_TABLES) != 0u;
    int k_written = kp->heads != 0u;
    const global uint *words = freqs + POSENC_ROPE_NORM_WORDS_AT(tables, pairs);
    float eps = as_float(words[POSENC_ROPE_NORM_EPS]);
    /* Heads of a unit where its tensor's norm is per head (or it has none): the host's
     * heads_per_unit, at most POSENC_ROPE_NORM_UNIT_HEADS (posenc__gpu_rope_normed_units). */
    uint unit_heads = max(qp->heads_per_unit, 1u);
    uint q_units = (qp->flags & POSENC_ROPE_FLAG_NORM_PER_TOKEN) != 0u
                       ? 1u
                       : (qp->heads + unit_heads - 1u) / unit_heads;
    uint k_units = (k_in->flags & POSENC_ROPE_FLAG_NORM_PER_TOKEN) != 0u
                       ? 1u
                       : (k_in->heads + unit_heads - 1u) / unit_heads;
    uint per_row = q_units + k_units + vcp->heads;
    uint total = per_row * qp->batch * qp->tokens;
    uint stride = (uint)get_global_size(0);
    for (uint i = (uint)get_global_id(0); i < total; i = total - i <= stride ? total : i + stride) {
        uint row = i / per_row;
        uint unit = i - row * per_row;
        uint b = row / qp->tokens;
        uint t = row - b * qp->tokens;
        uint cos_row = 0u, sin_row = 0u;
        if (tables && !posenc_rope_table_rows(qp, freqs, positions, b, t, &cos_row, &sin_row))
            continue;
        uint block = 0u, in_block = 0u;
        int cached = cache && posenc_cache_row(slot_mapping[kcp->slots_offset +
                                                            b * kcp->slots_stride_batch +
                                                            t * kcp->slots_stride_token],
                                               kcp->num_slots, kcp->block_size, &block,
                                               &in_block);
        if (unit >= q_units + k_units) { /* v: its head copied as bits into the cache row */
            uint h = unit - q_units - k_units;
            const global POSENC_BITS_TYPE *in = (const global POSENC_BITS_TYPE *)v;
            global POSENC_BITS_TYPE *out = (global POSENC_BITS_TYPE *)v_cache;
            for (uint d = 0u; cached && d < head_dim; d++)
                out[posenc_rope_out_at(vcp, block, in_block, h, d)] =
                    in[posenc_rope_in_at(vcp, b, t, h, d)];
            continue;
        }
        int is_q = unit < q_units;
        const posenc_rope_pass *src = is_q ? qp : k_in;
        const posenc_rope_pass *dst = is_q ? qp : kp;
        const global POSENC_OUT_TYPE *in = is_q ? q : k;
        global POSENC_OUT_TYPE *out = is_q ? q_out : k_out;
        int written = is_q || k_written;
        int to_cache = !is_q && cached;
        /* Pass-through dims: copied where the tensor is not normalized and written elsewhere. */
        int copied = written && (dst->flags & POSENC_ROPE_FLAG_IN_PLACE) == 0u;
        int normed = (src->flags & POSENC_ROPE_FLAG_NORM) != 0u;
        int per_token = (src->flags & POSENC_ROPE_FLAG_NORM_PER_TOKEN) != 0u;
        uint first = per_token ? 0u : (is_q ? unit : unit - q_units) * unit_heads;
        uint end = per_token ? src->heads : min(first + unit_heads, src->heads);
        posenc_rope_norm norm = {
            .normed = normed,
            .weights = is_q ? q_norm_weight : k_norm_weight,
            .stride = words[is_q ? POSENC_ROPE_NORM_Q_STRIDE : POSENC_ROPE_NORM_K_STRIDE],
            .dtype = (src->flags >> POSENC_ROPE_FLAG_NORM_DTYPE_SHIFT) & 3u,
            .offset = as_float(words[POSENC_ROPE_NORM_OFFSET]),
        };
        /* Per token one factor for the unit's heads, per head one for each. */
        float token_factor = 0.0f;
        float factors[POSENC_ROPE_NORM_UNIT_HEADS];
        if (normed && per_token)
            token_factor = rsqrt(posenc_rope_square_sum(in, src, b, t, first, end) /
                                     (float)(src->heads * head_dim) +
                                 eps);
        for (uint h = first; normed && !per_token && h < end; h++)
            factors[h - first] =
                rsqrt(posenc_rope_square_sum(in, src, b, t, h, h + 1u) / (float)head_dim + eps);
        /* Every dim is read before it is written: first the dims outside the rotated ones,
         * head by head. */
        for (uint h = first; h < end; h++) {
            norm.factor = per_token || !normed ? token_factor : factors[h - first];
            norm.at = src->norm_offset + (per_token ? h * head_dim : 0u) * norm.stride;
            for (uint d = 0u; d < head_dim; d++) {
                if (d >= rotary_offset && d < rotary_offset + 2u * pairs)
                    continue;
                if (!normed) { /* bits, so NaN payloads and signed zeros survive */
                    POSENC_BITS_TYPE x =
                        ((const global POSENC_BITS_TYPE *)in)[posenc_rope_in_at(src, b, t, h, d)];
                    if (copied)
                        ((global POSENC_BITS_TYPE *)out)[posenc_rope_out_at(dst, b, t, h, d)] = x;
                    if (to_cache)
                        ((global POSENC_BITS_TYPE *)
                             k_cache)[posenc_rope_out_at(kcp, block, in_block, h, d)] = x;
                    continue;
                }
                float x = posenc_rope_normed_value(in, src, b, t, h, d, &norm);
                if (written)
                    posenc_store_out(out, posenc_rope_out_at(dst, b, t, h, d), x);
                if (to_cache)
                    posenc_store_out(k_cache, posenc_rope_out_at(kcp, block, in_block, h, d), x);
            }
        }
        /* Then the pairs, each pair's sine and cosine taken once for all of the unit's heads. */
        for (uint j = 0u; j < pairs; j++) {
            uint da = rotary_offset + POSENC_ROPE_PAIR_FIRST(style, j, pairs);
            uint db = rotary_offset + POSENC_ROPE_PAIR_SECOND(style, j, pairs);
            float s, c;
            posenc_rope_pair_factors(qp, freqs, positions, cos_table, sin_table, b, t, j, cos_row,
                                     sin_row, &s, &c);
            for (uint h = first; h < end; h++) {
                norm.factor = per_token || !normed ? token_factor : factors[h - first];
                norm.at = src->norm_offset + (per_token ? h * head_dim : 0u) * norm.stride;
                float xa = posenc_rope_normed_value(in, src, b, t, h, da, &norm);
                float xb = posenc_rope_normed_value(in, src, b, t, h, db, &norm);
                float ra = xa * c - xb * s;
                float rb = xa * s + xb * c;
                if (written) {
                    posenc_store_out(out, posenc_rope_out_at(dst, b, t, h, da), ra);
                    posenc_store_out(out, posenc_rope_out_at(dst, b, t, h, db), rb);
                }
                if (to_cache) {
                    posenc_store_out(k_cache, posenc_rope_out_at(kcp, block, in_block, h, da),
                                     ra);
                    posenc_store_out(k_cache, posenc_rope_out_at(kcp, block, in_block, h, db),
                                     rb);
                }
            }
        }
    }
}

#endif
