/* SPDX-License-Identifier: MIT */
/* rope_contiguous.cl's work with the QK RMSNorm (POSENC_ROPE_FLAG_NORM in q's or k's block)
 * before the rotation, for CPU-type OpenCL devices: the same arguments, layouts and cut of the
 * work, where heads are rotated whole (rotary_dim = head_dim) in at most
 * POSENC_ROPE_NORM_CONTIGUOUS_PAIRS pairs. A work-item takes every pair of one token: per head
 * (or per token, over all its heads first) it sums the squares of its blocks in float8 lanes,
 * compensated, and the lanes as a pairwise tree, then scales each block by 1 / sqrt(mean + eps)
 * and its weights (w + offset) before rotating it, x (w + offset) / sqrt(mean(x^2) + eps) as
 * rope.cl's norm computes it. Every element of a head is read by the one work-item that writes
 * it, so in place is safe. A tensor without a norm is rotated as rope_contiguous.cl does, and v
 * copied into its cache row.
 *
 * Variants (build options): -DPOSENC_OUT_F32, -DPOSENC_OUT_F16 or -DPOSENC_OUT_BF16.
 * Arguments: those of rope.cl (cos and sin unused). Work: batch * tokens units.
 * Global size: any; one dimension (the kernel loops over the rest).
 */
#include "angle.cl"
#include "dtype.cl"
#include "kv_cache.cl"
#include "posenc_kernel_params.h"
#include "rope_passes.cl"
#include "rope_runs.cl"
#include "table_values.cl"

/* Blocks of 8 pairs a work-item takes: every block of a row. */
#define POSENC_NORM_GROUP_BLOCKS (POSENC_ROPE_NORM_CONTIGUOUS_PAIRS / 8u)

/* How a tensor's heads are normalized: none, or its weights (POSENC_TABLE_* `dtype`, `stride`
 * elements apart from element `at`: dim 0 of head 0), their offset, eps, and per token or per
 * head. */
typedef struct posenc_norm_of {
    int normed, per_token;
    const global uint *weights;
    uint at, stride, dtype;
    float offset, eps;
} posenc_norm_of;

/* Adds x^2 + y^2 of a head's blocks of runs to compensated float8 lanes (Kahan's steps). */
POSENC_INLINE void posenc_add_squares(const global POSENC_OUT_TYPE *p, uint head, uint step,
                                      uint second, uint count, float8 *sum, float8 *carry)
{
    for (uint j = 0u, at = head; j < count; j++, at += step) {
        float8 x = posenc_load8_out(p, at), y = posenc_load8_out(p, at + second);
        float8 value = x * x + y * y - *carry;
        float8 next = *sum + value;
        *carry = (next - *sum) - value;
        *sum = next;
    }
}

/* 1 / sqrt(mean + eps) of compensated lanes summing `count` squares: the lanes' sums as a
 * pairwise tree (8 lanes: 3 additions a path). */
POSENC_INLINE float posenc_norm_factor(float8 sum, float8 carry, uint count, float eps)
{
    float8 lanes = sum - carry;
    float4 fours = lanes.lo + lanes.hi;
    float2 twos = fours.lo + fours.hi;
    return rsqrt((twos.x + twos.y) / (float)count + eps);
}

/* Eight weights (+ offset) from dim `d` of head `h`'s weights. */
POSENC_INLINE float8 posenc_norm_weights(const posenc_norm_of *norm, uint h, uint d,
                                         uint head_dim)
{
    float w[8];
    uint at = norm->at + ((norm->per_token ? h * head_dim : 0u) + d) * norm->stride;
    for (uint l = 0u; l < 8u; l++)
        w[l] = posenc_rope_table_value(norm->weights, at + l * norm->stride, norm->dtype);
    return vload8(0, w) + norm->offset;
}

POSENC_INLINE posenc_norm_of posenc_norm_of_pass(const posenc_rope_pass *pass,
                                                 const global uint *weights,
                                                 const global uint *words, int is_k)
{
    posenc_norm_of norm = {
        .normed = (pass->flags & POSENC_ROPE_FLAG_NORM) != 0u,
        .per_token = (pass->flags & POSENC_ROPE_FLAG_NORM_PER_TOKEN) != 0u,
        .weights = weights,
        .at = pass->norm_offset,
        .stride = words[is_k ? POSENC_ROPE_NORM_K_STRIDE : POSENC_ROPE_NORM_Q_STRIDE],
        .dtype = (pass->flags >> POSENC_ROPE_FLAG_NORM_DTYPE_SHIFT) & 3u,
        .offset = as_float(words[POSENC_ROPE_NORM_OFFSET]),
        .eps = as_float(words[POSENC_ROPE_NORM_EPS]),
    };
    return norm;
}

/* The heads of token (b, t) of one tensor (q, or k as `in_pass` reads it), normalized where
 * `norm` says (per head: `weights` by block) and rotated by `angles`: into `out` at
 * `out_pass`'s rows where `written`, and into the k cache row where `cached`, the same bits. */
POSENC_INLINE void posenc_norm_rotate_heads(
    const global POSENC_OUT_TYPE *in, const posenc_rope_pass *in_pass, global POSENC_OUT_TYPE *out,
    const posenc_rope_pass *out_pass, int written, global POSENC_OUT_TYPE *cache,
    const posenc_rope_pass *cache_pass, uint cache_block, uint in_block, int cached,
    const posenc_norm_of *norm, const float8 (*weights)[2], uint b, uint t, uint blocks,
    uint step, uint second, int gptj, const float8 (*angles)[4])
{
    uint head_dim = in_pass->head_dim;
    float factor = 0.0f;
    if (norm->normed && norm->per_token) { /* one factor for all the token's heads */
        float8 sum = (float8)0.0f, carry = (float8)0.0f;
        for (uint h = 0u; h < in_pass->heads; h++)
            posenc_add_squares(in, posenc_rope_in_row(in_pass, b, t, h), step, second, blocks,
                               &sum, &carry);
        factor = posenc_norm_factor(sum, carry, in_pass->heads * head_dim, norm->eps);
    }
    for (uint h = 0u; h < in_pass->heads; h++) {
        uint src = posenc_rope_in_row(in_pass, b, t, h);
        uint dst = posenc_rope_out_row(out_pass, b, t, h);
        uint row_at = posenc_rope_out_row(cache_pass, cache_block, in_block, h);
        if (norm->normed && !norm->per_token) {
            float8 sum = (float8)0.0f, carry = (float8)0.0f;
            posenc_add_squares(in, src, step, second, blocks, &sum, &carry);
            factor = posenc_norm_factor(sum, carry, head_dim, norm->eps);
        }
        for (uint j = 0u, at = 0u; j < blocks; j++, at += step) {
            float8 x = posenc_load8_out(in, src + at);
            float8 y = posenc_load8_out(in, src + at + second);
            if (norm->normed) {
                float8 wa = norm->per_token ? posenc_norm_weights(norm, h, at, head_dim)
                                            : weights[j][0];
                float8 wb = norm->per_token ? posenc_norm_weights(norm, h, at + second, head_dim)
                                            : weights[j][1];
                x = x * factor * wa;
                y = y * factor * wb;
            }
            float8 r0, r1;
            posenc_rotate_runs(x, y, gptj, angles[j], &r0, &r1);
            if (written)
                posenc_store_block(out, dst + at, second, r0, r1);
            if (cached)
                posenc_store_block(cache, row_at + at, second, r0, r1);
        }
    }
}

POSENC_WIDE_KERNEL
kernel void posenc_rope_contiguous_norm(
    global POSENC_OUT_TYPE *q, global POSENC_OUT_TYPE *q_out, global POSENC_OUT_TYPE *k,
    global POSENC_OUT_TYPE *k_out, const global uint *positions, const global int *slot_mapping,
    global POSENC_OUT_TYPE *k_cache, const global POSENC_OUT_TYPE *v,
    global POSENC_OUT_TYPE *v_cache, const global uint *cos_table, const global uint *sin_table,
    const global uint *q_norm_weight, const global uint *k_norm_weight, const global uint *freqs,
    posenc_rope_pass q_pass, posenc_rope_pass k_cache_pass, posenc_rope_pass v_cache_pass,
    posenc_rope_pass k_pass)
{
    /* rope.cl's arguments, for caller tables only */
    (void)cos_table, (void)sin_table;
    POSENC_ROPE_PRIVATE_PASSES(q_pass, k_cache_pass, v_cache_pass, k_pass);
    uint flags = qp->flags;
    uint half_count = qp->pairs;
    uint tokens = qp->tokens;
    uint blocks = half_count >> 3;
    const global uint *norm_words = freqs + POSENC_ROPE_NORM_WORDS_AT(0, half_count);
    posenc_norm_of q_norm = posenc_norm_of_pass(qp, q_norm_weight, norm_words, 0);
    posenc_norm_of k_norm = posenc_norm_of_pass(k_in, k_norm_weight, norm_words, 1);
    uint total = qp->batch * tokens;
    uint stride = (uint)get_global_size(0);
    int gptj = (flags & POSENC_ROPE_FLAG_STYLE_MASK) == POSENC_ROPE_STYLE_GPTJ;
    /* Dims per pair in a run of pairs (GPT-J's are adjacent), and a block's second run. */
    uint dims_per_pair = gptj ? 2u : 1u;
    uint second = gptj ? 8u : half_count;
    int k_written = kp->heads != 0u;
    uint head_dim = qp->head_dim;
    uint step = 8u * dims_per_pair;

    /* A norm per head: the weights of every block of the row, the same in every row. */
    float8 q_weights[POSENC_NORM_GROUP_BLOCKS][2], k_weights[POSENC_NORM_GROUP_BLOCKS][2];
    for (uint j = 0u; j < blocks && q_norm.normed && !q_norm.per_token; j++) {
        q_weights[j][0] = posenc_norm_weights(&q_norm, 0u, j * step, head_dim);
        q_weights[j][1] = posenc_norm_weights(&q_norm, 0u, j * step + second, head_dim);
    }
    for (uint j = 0u; j < blocks && k_norm.normed && !k_norm.per_token; j++) {
        k_weights[j][0] = posenc_norm_weights(&k_norm, 0u, j * step, head_dim);
        k_weights[j][1] = posenc_norm_weights(&k_norm, 0u, j * step + second, head_dim);
    }

    /* The step stops at `total` rather than wrap around 2^32. */
    for (uint i = (uint)get_global_id(0); i < total; i = total - i <= stride ? total : i + stride) {
        uint b = i / tokens;
        uint t = i - b * tokens;

        uint cache_block = 0u, in_block = 0u;
        int cached = cache && posenc_cache_row(slot_mapping[kcp->slots_offset +
                                                            b * kcp->slots_stride_batch +
                                                            t * kcp->slots_stride_token],
                                               kcp->num_slots, kcp->block_size, &cache_block,
                                               &in_block);

        /* sin and cos of the row's pairs, 8 a block, computed two blocks at a time. */
        float8 angles[POSENC_NORM_GROUP_BLOCKS][4]; /* posenc_rotate_runs' */
        for (uint j = 0u; j < blocks; j += 2u) {
            float16 s, c;
            int two = j + 1u < blocks;
            posenc_unit_angles(qp, freqs, positions, b, t, j << 3, two, &s, &c);
            posenc_block_factors(gptj, s.lo, c.lo, angles[j]);
            if (two)
                posenc_block_factors(gptj, s.hi, c.hi, angles[j + 1u]);
        }

        posenc_norm_rotate_heads(q, qp, q_out, qp, 1, k_cache, kcp, 0u, 0u, 0, &q_norm,
                                 q_weights, b, t, blocks, step, second, gptj, angles);
        posenc_norm_rotate_heads(k, k_in, k_out, kp, k_written, k_cache, kcp, cache_block,
                                 in_block, cached, &k_norm, k_weights, b, t, blocks, step, second,
                                 gptj, angles);
        if (!cached)
            continue;
        posenc_copy_v_row(v, v_cache, vcp, b, t, cache_block, in_block, 0u, blocks, step,
                          second);
    }
}
