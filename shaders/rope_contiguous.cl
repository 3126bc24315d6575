/* SPDX-License-Identifier: MIT */
/* posenc_rope for CPU-type OpenCL devices when every tensor's dims are contiguous: rope.cl's
 * arguments and results, bit for bit, with the work cut the other way round. A work-item takes
 * up to 64 pairs of one token (8 blocks of 8), computes their sin/cos once as float8 and
 * rotates them in every q and k head of the token, head after head (and copies v's dims into
 * the cache row), with 8-wide loads and stores. CPU implementations run a work-group's
 * work-items one after another and vectorize across them only in simple straight-line
 * kernels; rope.cl's per-dim lanes, runtime strides and scalar 16-bit conversions leave PoCL at
 * a few percent of memory speed, and repeat the angle for every head chunk.
 *
 * The host chooses this kernel only when it applies (cl_rope.c): rotary_dim/2 a multiple of 8,
 * a dim stride of 1 in q, q_out, k, k_out, k_cache, v and v_cache, and no pass-through dims to
 * copy (full rotary, or partial in place with no cache). heads_per_unit is unused.
 *
 * Variants (build options): -DPOSENC_OUT_F32, -DPOSENC_OUT_F16 or -DPOSENC_OUT_BF16.
 * Arguments: those of rope.cl (cos, sin and the norm weights unused: those take rope.cl). Work:
 * batch * tokens * ceil(rotary_dim/128) units.
 * Global size: any; one dimension (the kernel loops over the rest).
 */
#include "angle.cl"
#include "dtype.cl"
#include "kv_cache.cl"
#include "posenc_kernel_params.h"
#include "rope_passes.cl"
#include "rope_runs.cl"

/* Blocks of 8 pairs a work-item takes: 64 pairs, a 128-dim head's. */
#define POSENC_GROUP_BLOCKS 8u

kernel void posenc_rope_contiguous(global POSENC_OUT_TYPE *q, global POSENC_OUT_TYPE *q_out,
                                   global POSENC_OUT_TYPE *k, global POSENC_OUT_TYPE *k_out,
                                   const global uint *positions, const global int *slot_mapping,
                                   global POSENC_OUT_TYPE *k_cache,
                                   const global POSENC_OUT_TYPE *v,
                                   global POSENC_OUT_TYPE *v_cache, const global uint *cos_table,
                                   const global uint *sin_table,
                                   const global uint *q_norm_weight,
                                   const global uint *k_norm_weight, const global uint *freqs,
                                   posenc_rope_pass q_pass, posenc_rope_pass k_cache_pass,
                                   posenc_rope_pass v_cache_pass, posenc_rope_pass k_pass)
{
    /* rope.cl's arguments, for caller tables and the QK norm only */
    (void)cos_table, (void)sin_table, (void)q_norm_weight, (void)k_norm_weight;
    POSENC_ROPE_PRIVATE_PASSES(q_pass, k_cache_pass, v_cache_pass, k_pass);
    uint flags = qp->flags;
    uint half_count = qp->pairs;
    uint tokens = qp->tokens;
    uint blocks = half_count >> 3;
    uint groups = (blocks + POSENC_GROUP_BLOCKS - 1u) / POSENC_GROUP_BLOCKS;
    uint total = groups * qp->batch * tokens;
    uint stride = (uint)get_global_size(0);
    int gptj = (flags & POSENC_ROPE_FLAG_STYLE_MASK) == POSENC_ROPE_STYLE_GPTJ;
    /* Dims per pair in a run of pairs (GPT-J's are adjacent), and a block's second run. */
    uint dims_per_pair = gptj ? 2u : 1u;
    uint second = gptj ? 8u : half_count;
    int k_written = kp->heads != 0u;

    /* The step stops at `total` rather than wrap around 2^32. */
    for (uint i = (uint)get_global_id(0); i < total; i = total - i <= stride ? total : i + stride) {
        uint row = i / groups;
        uint group = i - row * groups;
        uint b = row / tokens;
        uint t = row - b * tokens;
        uint first_block = group * POSENC_GROUP_BLOCKS;
        uint count = min(blocks - first_block, (uint)POSENC_GROUP_BLOCKS);

        uint cache_block = 0u, in_block = 0u;
        int cached = cache && posenc_cache_row(slot_mapping[kcp->slots_offset +
                                                            b * kcp->slots_stride_batch +
                                                            t * kcp->slots_stride_token],
                                               kcp->num_slots, kcp->block_size, &cache_block,
                                               &in_block);

        /* sin and cos of the group's pairs, 8 a block, and two blocks at a time. */
        float8 angles[POSENC_GROUP_BLOCKS][4]; /* posenc_rotate_block's */
        float16 wide[POSENC_GROUP_BLOCKS / 2u][4]; /* posenc_rotate_wide's */
        uint wide_count = count >> 1;
        for (uint j = 0u; j < count; j++)
            posenc_block_angles(qp, freqs, positions, b, t, (first_block + j) << 3, gptj,
                                angles[j]);
        for (uint w = 0u; w < wide_count; w++)
            posenc_wide_angles(gptj, angles[2u * w], angles[2u * w + 1u], wide[w]);

        /* Head by head, so that each head's run of dims is read and written in order: blocks
         * two at a time, then the odd one left. */
        uint first = qp->rotary_offset + (first_block << 3) * dims_per_pair;
        uint step = 8u * dims_per_pair;
        uint wide_second = gptj ? 16u : half_count;
        uint last = first + (count - 1u) * step;
        /* The group's dims of a head, which the head POSENC_PREFETCH_HEADS on (in the next
         * token's row past the last: the next unit's, on this work-item) brings in ahead. */
        uint group_bytes = count * step * (uint)sizeof(POSENC_OUT_TYPE);
        /* A head's runs of 16 are 32 bytes aligned if its first is and the second run is 16
         * elements on (the runs step by 16 or 32). */
        int seconds_aligned = (wide_second & 15u) == 0u;
        for (uint h = 0u; h < qp->heads; h++) {
            uint src = posenc_rope_in_row(qp, b, t, h);
            uint dst = posenc_rope_out_row(qp, b, t, h);
            posenc_prefetch(q + src + first + POSENC_PREFETCH_HEADS * qp->in_stride_head,
                            group_bytes);
            int in_aligned = seconds_aligned && posenc_aligned32(q, src + first);
            int out_aligned = seconds_aligned && posenc_aligned32(q_out, dst + first);
            for (uint w = 0u, at = first; w < wide_count; w++, at += 2u * step) {
                float16 r0, r1;
                posenc_rotate_wide(q, src + at, wide_second, in_aligned, gptj, wide[w], &r0,
                                   &r1);
                posenc_store16_out_at(q_out, dst + at, out_aligned, r0);
                posenc_store16_out_at(q_out, dst + at + wide_second, out_aligned, r1);
            }
            if ((count & 1u) != 0u) {
                float8 r0, r1;
                posenc_rotate_block(q, src + last, second, gptj, angles[count - 1u], &r0, &r1);
                posenc_store_block(q_out, dst + last, second, r0, r1);
            }
        }
        for (uint h = 0u; h < k_in->heads; h++) {
            uint src = posenc_rope_in_row(k_in, b, t, h);
            uint dst = posenc_rope_out_row(kp, b, t, h);
            uint row_at = posenc_rope_out_row(kcp, cache_block, in_block, h);
            posenc_prefetch(k + src + first + POSENC_PREFETCH_HEADS * k_in->in_stride_head,
                            group_bytes);
            int in_aligned = seconds_aligned && posenc_aligned32(k, src + first);
            int out_aligned = seconds_aligned && posenc_aligned32(k_out, dst + first);
            int cache_aligned = seconds_aligned && posenc_aligned32(k_cache, row_at + first);
            /* Computed once, so the cache row holds the very bits k_out does. */
            for (uint w = 0u, at = first; w < wide_count; w++, at += 2u * step) {
                float16 r0, r1;
                posenc_rotate_wide(k, src + at, wide_second, in_aligned, gptj, wide[w], &r0,
                                   &r1);
                if (k_written) {
                    posenc_store16_out_at(k_out, dst + at, out_aligned, r0);
                    posenc_store16_out_at(k_out, dst + at + wide_second, out_aligned, r1);
                }
                if (cached) {
                    posenc_store16_out_at(k_cache, row_at + at, cache_aligned, r0);
                    posenc_store16_out_at(k_cache, row_at + at + wide_second, cache_aligned,
                                          r1);
                }
            }
            if ((count & 1u) != 0u) {
                float8 r0, r1;
                posenc_rotate_block(k, src + last, second, gptj, angles[count - 1u], &r0, &r1);
                if (k_written)
                    posenc_store_block(k_out, dst + last, second, r0, r1);
                if (cached)
                    posenc_store_block(k_cache, row_at + last, second, r0, r1);
            }
        }
        if (!cached)
            continue;
        posenc_copy_v_row(v, v_cache, vcp, b, t, cache_block, in_block, first, count, step,
                          second);
    }
}
