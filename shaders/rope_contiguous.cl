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

/* A unit's group of pairs in every head: where it lies, as posenc_rotate_head takes it. */
typedef struct posenc_head_group {
    uint first;       /* the group's first dim in a head */
    uint count;       /* blocks of 8 pairs */
    uint step;        /* dims from a block to the next */
    uint second;      /* dims from a block's first run to its second */
    uint wide_second; /* the same for two blocks at once (posenc_rotate_wide) */
    uint word_blocks; /* the blocks from the first rotated on words (bf16: rope_runs.cl) */
    int gptj;
} posenc_head_group;

/* One head's group rotated from `in` (the head at `src`, the next ones `in_stride` on) into
 * `out` at `dst` where `to_out`, and into `cache` at `cache_at` where `to_cache`: its first
 * word_blocks blocks as word units by their factors in `words`, then blocks two at a time by
 * theirs in `wide` (block j's pair at j / 2), then the odd one left by its own in `angles`.
 * Computed once, so that a cache row holds the very bits k_out does. */
POSENC_INLINE void posenc_rotate_head(const posenc_head_group *g, const float16 words[][4],
                                      const float16 wide[][4], const float8 angles[][4],
                                      const global POSENC_OUT_TYPE *in, uint src,
                                      uint in_stride, global POSENC_OUT_TYPE *out, uint dst,
                                      int to_out, global POSENC_OUT_TYPE *cache, uint cache_at,
                                      int to_cache)
{
    /* The head POSENC_PREFETCH_HEADS on (past a token's last heads, the next token's: the
     * next unit's, on this work-item) asked for ahead. */
    posenc_prefetch(in + src + g->first + POSENC_PREFETCH_HEADS * in_stride,
                    g->count * g->step * (uint)sizeof(POSENC_OUT_TYPE));
    /* A head's runs of 16 are 32 bytes aligned if its first is and the second run is 16
     * elements on (the runs step by 16 or 32). */
    int seconds_aligned = (g->wide_second & 15u) == 0u;
    int in_aligned = seconds_aligned && posenc_aligned32(in, src + g->first);
    int out_aligned = seconds_aligned && posenc_aligned32(out, dst + g->first);
    int cache_aligned = seconds_aligned && posenc_aligned32(cache, cache_at + g->first);
    uint at = g->first;
#if defined(POSENC_BF16_WORDS)
    uint unit_blocks = posenc_word_unit_blocks(g->gptj);
    for (uint u = 0u; u < g->word_blocks / unit_blocks; u++, at += unit_blocks * g->step) {
        uint16 r0, r1;
        posenc_rotate_words(in, src + at, g->wide_second, g->gptj, words[u], &r0, &r1);
        if (to_out) {
            posenc_store_words(out, dst + at, r0);
            if (!g->gptj)
                posenc_store_words(out, dst + at + g->wide_second, r1);
        }
        if (to_cache) {
            posenc_store_words(cache, cache_at + at, r0);
            if (!g->gptj)
                posenc_store_words(cache, cache_at + at + g->wide_second, r1);
        }
    }
#else
    (void)words;
#endif
    for (uint w = g->word_blocks >> 1; w < (g->count >> 1); w++, at += 2u * g->step) {
        float16 r0, r1;
        posenc_rotate_wide(in, src + at, g->wide_second, in_aligned, g->gptj, wide[w], &r0,
                           &r1);
        if (to_out) {
            posenc_store16_out_at(out, dst + at, out_aligned, r0);
            posenc_store16_out_at(out, dst + at + g->wide_second, out_aligned, r1);
        }
        if (to_cache) {
            posenc_store16_out_at(cache, cache_at + at, cache_aligned, r0);
            posenc_store16_out_at(cache, cache_at + at + g->wide_second, cache_aligned, r1);
        }
    }
    if ((g->count & 1u) == 0u)
        return;
    float8 r0, r1;
    posenc_rotate_block(in, src + at, g->second, g->gptj, angles[g->count - 1u], &r0, &r1);
    if (to_out)
        posenc_store_block(out, dst + at, g->second, r0, r1);
    if (to_cache)
        posenc_store_block(cache, cache_at + at, g->second, r0, r1);
}

POSENC_WIDE_KERNEL
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

        /* sin and cos of the group's pairs, two blocks at a time, and of an odd block left;
         * then the factors of the word units (bf16), of the pairs of blocks after them and of
         * the odd block (the last of `angles`, which posenc_rotate_head takes alone). */
        float8 angles[POSENC_GROUP_BLOCKS][4];     /* posenc_rotate_block's */
        float16 wide[POSENC_GROUP_BLOCKS / 2u][4]; /* posenc_rotate_wide's */
        float16 words[POSENC_GROUP_BLOCKS / 2u][4]; /* posenc_rotate_words' */
        float16 s[POSENC_GROUP_BLOCKS / 2u], c[POSENC_GROUP_BLOCKS / 2u];
        uint wide_count = count >> 1;
        for (uint w = 0u; w < wide_count; w++)
            posenc_unit_angles(qp, freqs, positions, b, t, (first_block + 2u * w) << 3, 1,
                               &s[w], &c[w]);
        uint word_blocks = 0u;
#if defined(POSENC_BF16_WORDS)
        uint unit_blocks = posenc_word_unit_blocks(gptj);
        word_blocks = count / unit_blocks * unit_blocks;
        for (uint u = 0u; u < word_blocks / unit_blocks; u++) {
            uint w = u * unit_blocks / 2u;
            posenc_word_factors(gptj, s[w], c[w], s[w + (gptj ? 0u : 1u)],
                                c[w + (gptj ? 0u : 1u)], words[u]);
        }
#endif
        for (uint w = word_blocks >> 1; w < wide_count; w++)
            posenc_wide_factors(gptj, s[w], c[w], wide[w]);
        if ((count & 1u) != 0u) {
            float16 odd_s, odd_c;
            posenc_unit_angles(qp, freqs, positions, b, t, (first_block + count - 1u) << 3, 0,
                               &odd_s, &odd_c);
            posenc_block_factors(gptj, odd_s.lo, odd_c.lo, angles[count - 1u]);
        }

        /* Head by head, so that each head's run of dims is read and written in order. */
        posenc_head_group g = {
            .first = qp->rotary_offset + (first_block << 3) * dims_per_pair,
            .count = count,
            .step = 8u * dims_per_pair,
            .second = second,
            .wide_second = gptj ? 16u : half_count,
            .word_blocks = word_blocks,
            .gptj = gptj,
        };
        for (uint h = 0u; h < qp->heads; h++)
            posenc_rotate_head(&g, words, wide, angles, q, posenc_rope_in_row(qp, b, t, h),
                               qp->in_stride_head, q_out, posenc_rope_out_row(qp, b, t, h), 1,
                               q_out, 0u, 0);
        for (uint h = 0u; h < k_in->heads; h++)
            posenc_rotate_head(&g, words, wide, angles, k, posenc_rope_in_row(k_in, b, t, h),
                               k_in->in_stride_head, k_out, posenc_rope_out_row(kp, b, t, h),
                               k_written, k_cache,
                               posenc_rope_out_row(kcp, cache_block, in_block, h), cached);
        if (!cached)
            continue;
        posenc_copy_v_row(v, v_cache, vcp, b, t, cache_block, in_block, g.first, count, g.step,
                          second);
    }
}
