/* SPDX-License-Identifier: MIT */
/* The 8-wide pieces of rope_contiguous.cl and rope_contiguous_norm.cl: a block of 8 pairs of a
 * head (two runs of 8 dims), its factors, its rotation and its stores. Included after angle.cl,
 * dtype.cl and posenc_kernel_params.h. */
#ifndef POSENC_ROPE_RUNS_CL
#define POSENC_ROPE_RUNS_CL

/* Element pointers as bits, for v's dims copied into the cache (NaN payloads survive). */
#if defined(POSENC_OUT_F32)
#define POSENC_BITS8_TYPE uint8
#define POSENC_BITS_TYPE uint
#else
#define POSENC_BITS8_TYPE ushort8
#define POSENC_BITS_TYPE ushort
#endif

/* One block of 8 pairs of one head, rotated: the values x and y of its two runs of 8 dims, at
 * `at` and at + `second` (NeoX: the a dims, then the b dims rotary_dim/2 further; GPT-J: 16
 * adjacent dims, pairs interleaved). `angle` holds the block's factors: NeoX cos and sin;
 * GPT-J, for each run, cos and sin spread over the pairs' two dims, sin negated on the a dims,
 * so that the pairs rotate in place: a c + b (-s) = a c - b s and b c + a s, exactly rope.cl's
 * products and sums. */
POSENC_INLINE void posenc_rotate_runs(float8 x, float8 y, int gptj, const float8 *angle,
                                      float8 *first_run, float8 *second_run)
{
    if (gptj) {
        *first_run = x * angle[0] + x.s10325476 * angle[1];
        *second_run = y * angle[2] + y.s10325476 * angle[3];
    } else {
        *first_run = x * angle[0] - y * angle[1];
        *second_run = x * angle[1] + y * angle[0];
    }
}

/* The same on the block's runs loaded from `p` at `at` and at + `second`. */
POSENC_INLINE void posenc_rotate_block(const global POSENC_OUT_TYPE *p, uint at, uint second,
                                       int gptj, const float8 *angle, float8 *first_run,
                                       float8 *second_run)
{
    posenc_rotate_runs(posenc_load8_out(p, at), posenc_load8_out(p, at + second), gptj, angle,
                       first_run, second_run);
}

POSENC_INLINE void posenc_store_block(global POSENC_OUT_TYPE *p, uint at, uint second,
                                      float8 first_run, float8 second_run)
{
#if defined(POSENC_OUT_BF16)
    /* Both runs rounded together (the store is bf16's cost). `second` is a multiple of 8
     * elements, so both runs have the same alignment. */
    ushort16 bits = posenc_bf16_from_f32_16(first_run, second_run);
    global ushort *run = p + at;
    if (((uintptr_t)run & 3u) == 0u) {
        vstore4(as_uint4(bits.lo), 0, (global uint *)run);
        vstore4(as_uint4(bits.hi), 0, (global uint *)(run + second));
    } else {
        vstore8(bits.lo, 0, run);
        vstore8(bits.hi, 0, run + second);
    }
#else
    posenc_store8_out(p, at, first_run);
    posenc_store8_out(p, at + second, second_run);
#endif
}

/* Two blocks at once, 16 pairs as float16: half the instructions of two blocks in the 16-bit
 * conversions, the rotation and the loop (PoCL turns float16 into AVX-512 registers where the
 * CPU has them, and into pairs of 8-wide ones elsewhere). The same products and sums as the
 * blocks', element for element. */

/* Blocks j and j + 1 of one head rotated: the runs of 16 dims at `at` and at + `second` (NeoX:
 * both blocks' a dims, then their b dims; GPT-J: block j's 16 dims, then block j + 1's), both
 * 32 bytes aligned where `aligned`. */
POSENC_INLINE void posenc_rotate_wide(const global POSENC_OUT_TYPE *p, uint at, uint second,
                                      int aligned, int gptj, const float16 *angle,
                                      float16 *first_run, float16 *second_run)
{
    float16 x = posenc_load16_out_at(p, at, aligned);
    float16 y = posenc_load16_out_at(p, at + second, aligned);
    if (gptj) {
        *first_run = x * angle[0] + x.s1032547698badcfe * angle[1];
        *second_run = y * angle[2] + y.s1032547698badcfe * angle[3];
    } else {
        *first_run = x * angle[0] - y * angle[1];
        *second_run = x * angle[1] + y * angle[0];
    }
}

/* bf16 on 32-bit words: a word holds two adjacent elements, which a shift and a mask widen to
 * f32 and posenc_bf16_words narrows back together, where runs of 16 elements took a widening
 * each way per element and a pack to 16 bits (PoCL bf16 prefill on an AVX-512 Xeon, of the
 * copy: GPT-J 0.29-0.33, 0.37-0.43 on words; NeoX 0.34-0.36, 0.37-0.41). A word unit is two blocks
 * for GPT-J (16 pairs, a pair a word) and four for NeoX (32 pairs: a run of 32 first dims,
 * the even pairs in the low halves of its 16 words and the odd ones in the high halves, and
 * the run of their partners). The products and sums are the blocks', element for element, so
 * the bits are too. Where the compiler has vectors at any even address (clang). */
#if defined(POSENC_OUT_BF16) && defined(__clang__)
#define POSENC_BF16_WORDS 1
typedef uint posenc_u32x16_any __attribute__((ext_vector_type(16), aligned(2)));

POSENC_INLINE uint posenc_word_unit_blocks(int gptj) { return gptj ? 2u : 4u; }

/* A word unit's factors from its pairs' sin and cos (posenc_unit_angles: two blocks each,
 * `s1` and `c1` the next two blocks' for NeoX): GPT-J the 16 pairs' cos and sin; NeoX the even
 * pairs' cos and sin, then the odd pairs'. */
POSENC_INLINE void posenc_word_factors(int gptj, float16 s0, float16 c0, float16 s1, float16 c1,
                                       float16 *factor)
{
    if (gptj) {
        factor[0] = c0;
        factor[1] = s0;
        return;
    }
    factor[0] = (float16)(c0.s02468ace, c1.s02468ace);
    factor[1] = (float16)(s0.s02468ace, s1.s02468ace);
    factor[2] = (float16)(c0.s13579bdf, c1.s13579bdf);
    factor[3] = (float16)(s0.s13579bdf, s1.s13579bdf);
}

POSENC_INLINE uint16 posenc_load_words(const global ushort *p, uint at)
{
    return *(const global posenc_u32x16_any *)(p + at);
}

POSENC_INLINE void posenc_store_words(global ushort *p, uint at, uint16 words)
{
    *(global posenc_u32x16_any *)(p + at) = words;
}

/* One word unit of one head rotated: GPT-J the 32 dims at `at` into `first`; NeoX the 32 first
 * dims at `at` into `first` and their partners at + `second` into `second_words`. */
POSENC_INLINE void posenc_rotate_words(const global ushort *p, uint at, uint second, int gptj,
                                       const float16 *factor, uint16 *first,
                                       uint16 *second_words)
{
    const uint16 high = (uint16)0xffff0000u;
    uint16 x = posenc_load_words(p, at);
    float16 x_even = as_float16(x << 16), x_odd = as_float16(x & high);
    if (gptj) { /* a pair a word: (even, odd) = (a, b) */
        *first = posenc_bf16_words(x_even * factor[0] - x_odd * factor[1],
                                   x_even * factor[1] + x_odd * factor[0]);
        return;
    }
    uint16 y = posenc_load_words(p, at + second);
    float16 y_even = as_float16(y << 16), y_odd = as_float16(y & high);
    *first = posenc_bf16_words(x_even * factor[0] - y_even * factor[1],
                               x_odd * factor[2] - y_odd * factor[3]);
    *second_words = posenc_bf16_words(x_even * factor[1] + y_even * factor[0],
                                      x_odd * factor[3] + y_odd * factor[2]);
}
#endif

/* Heads a work-item asks the cache for ahead of the one it rotates: 8 of f32, 16 of 16-bit
 * elements, the same bytes ahead (4 KiB of 128-dim heads). f16 NeoX went from 0.60-0.62 of the
 * copy with 8 to 0.66 with 16; f32 was the same with 16. */
#define POSENC_PREFETCH_HEADS (32u / (uint)sizeof(POSENC_OUT_TYPE))

/* A hint to bring `bytes` from `p` into the cache, a line at a time: clang's
 * __builtin_prefetch, which PoCL compiles to prefetcht0 (OpenCL's own prefetch() does nothing
 * there); nothing where the compiler lacks it. A prefetch never faults, past a buffer's end
 * too. PoCL prefill f32 from L3 on an AVX-512 Xeon: 0.75-0.77 of the copy without, 0.82-0.85
 * with the head 8 ahead (NeoX). f16 converted by the CPU's own instructions
 * (POSENC_NATIVE_F16): GPT-J 0.49-0.53 without, 0.55-0.59 with, NeoX the same. The other
 * 16-bit variants, bound by their conversions, ran a few percent slower with it. */
POSENC_INLINE void posenc_prefetch(const global POSENC_OUT_TYPE *p, uint bytes)
{
#if (defined(POSENC_OUT_F32) || defined(POSENC_NATIVE_F16)) && defined(__clang__) && \
    defined(__has_builtin)
#if __has_builtin(__builtin_prefetch)
    const global char *at = (const global char *)p;
    for (uint line = 0u; line < bytes; line += 64u)
        __builtin_prefetch(at + line);
#endif
#endif
    (void)p, (void)bytes;
}

/* The first element of head h of token (b, t) in a pass's input, and in its output (with
 * POSENC_ROPE_FLAG_SLOTS, b and t are the cache block and the row in it). */
POSENC_INLINE uint posenc_rope_in_row(const posenc_rope_pass *pass, uint b, uint t, uint h)
{
    return pass->in_offset + b * pass->in_stride_batch + t * pass->in_stride_token +
           h * pass->in_stride_head;
}

POSENC_INLINE uint posenc_rope_out_row(const posenc_rope_pass *pass, uint b, uint t, uint h)
{
    return pass->out_offset + b * pass->out_stride_batch + t * pass->out_stride_token +
           h * pass->out_stride_head;
}

/* rope.cl's sin and cos of 16 pairs of token (b, t): block `lane` / 8 (8 pairs from pair
 * `lane`) in lanes 0-7, and in lanes 8-15 the next block where `two`, else the same one again.
 * The 16 lanes are computed together (half the instructions of two blocks' where the device
 * has 16-wide registers). */
POSENC_INLINE void posenc_unit_angles(const posenc_rope_pass *qp, const global uint *freqs,
                                      const global uint *positions, uint b, uint t, uint lane,
                                      int two, float16 *sin_out, float16 *cos_out)
{
    uint flags = qp->flags;
    uint half_count = qp->pairs;
    uint positions_kind = (flags >> POSENC_ROPE_FLAG_POSITIONS_SHIFT) & 3u;
    uint next = two ? lane + 8u : lane;
    /* The positions of the 16 pairs: one per token, or per pair's component (M-RoPE). */
    uint16 position_low = (uint16)0u;
    uint16 position_high = (uint16)((uint)qp->position_offset + t);
    int16 valid = (int16)(-1);
    if (positions_kind != POSENC_POSITIONS_NONE) {
        uint low[16], high[16];
        int ok[16];
        for (uint l = 0u; l < 16u; l++) {
            uint pair = (l < 8u ? lane : next) + (l & 7u);
            uint2 position;
            ok[l] = -posenc_position_from_word(
                positions_kind,
                positions[qp->positions_offset + b * qp->positions_stride_batch +
                          t * qp->positions_stride_token +
                          freqs[3u * half_count + pair] * qp->positions_stride_component],
                &position);
            low[l] = position.x;
            high[l] = position.y;
        }
        position_low = vload16(0, low);
        position_high = vload16(0, high);
        valid = vload16(0, ok);
    }
    float16 s, c;
    posenc_sincos16(position_low, position_high, freqs + 3u * lane, freqs + 3u * next, &s, &c);
    float16 nan = as_float16((uint16)0x7fc00000u); /* an invalid float position */
    s = select(nan, s, valid);
    c = select(nan, c, valid);
    if ((flags & POSENC_ROPE_FLAG_INVERSE) != 0u)
        s = -s;
    *sin_out = s * qp->attention_factor;
    *cos_out = c * qp->attention_factor;
}

/* One block's 8 sin and cos (posenc_unit_angles) as posenc_rotate_block takes them in
 * `angle`: NeoX cos and sin; GPT-J cos and sin spread over the block's 16 dims, the sin
 * negated on the first dim of each pair. */
POSENC_INLINE void posenc_block_factors(int gptj, float8 s, float8 c, float8 *angle)
{
    if (gptj) {
        uint8 negate_a = (uint8)(0x80000000u, 0u, 0x80000000u, 0u, 0x80000000u, 0u,
                                 0x80000000u, 0u);
        angle[0] = c.s00112233;
        angle[1] = as_float8(as_uint8(s.s00112233) ^ negate_a);
        angle[2] = c.s44556677;
        angle[3] = as_float8(as_uint8(s.s44556677) ^ negate_a);
    } else {
        angle[0] = c;
        angle[1] = s;
    }
}

/* Two blocks' sin and cos (posenc_unit_angles) as posenc_rotate_wide takes them: NeoX cos and
 * sin of the 16 pairs; GPT-J each block's as posenc_block_factors spreads them (16 adjacent
 * dims a block). */
POSENC_INLINE void posenc_wide_factors(int gptj, float16 s, float16 c, float16 *wide)
{
    if (gptj) {
        float8 first[4], next[4];
        posenc_block_factors(1, s.lo, c.lo, first);
        posenc_block_factors(1, s.hi, c.hi, next);
        wide[0] = (float16)(first[0], first[2]);
        wide[1] = (float16)(first[1], first[3]);
        wide[2] = (float16)(next[0], next[2]);
        wide[3] = (float16)(next[1], next[3]);
    } else {
        wide[0] = c;
        wide[1] = s;
    }
}

/* v's dims of token (b, t) copied as bits into its cache row (cache block, row in it): `count`
 * blocks of two runs from dim `first`, `step` apart. */
POSENC_INLINE void posenc_copy_v_row(const global POSENC_OUT_TYPE *v,
                                     global POSENC_OUT_TYPE *v_cache,
                                     const posenc_rope_pass *vcp, uint b, uint t,
                                     uint cache_block, uint in_block, uint first, uint count,
                                     uint step, uint second)
{
    const global POSENC_BITS_TYPE *v_bits = (const global POSENC_BITS_TYPE *)v;
    global POSENC_BITS_TYPE *vc_bits = (global POSENC_BITS_TYPE *)v_cache;
    for (uint h = 0u; h < vcp->heads; h++) {
        uint src = posenc_rope_in_row(vcp, b, t, h);
        uint dst = posenc_rope_out_row(vcp, cache_block, in_block, h);
        for (uint j = 0u, at = first; j < count; j++, at += step) {
            POSENC_BITS8_TYPE va = vload8(0, v_bits + src + at);
            POSENC_BITS8_TYPE vb = vload8(0, v_bits + src + at + second);
#if defined(POSENC_OUT_F32)
            vstore8(va, 0, vc_bits + dst + at);
            vstore8(vb, 0, vc_bits + dst + at + second);
#else
            posenc_store8_bits16(vc_bits, dst + at, va);
            posenc_store8_bits16(vc_bits, dst + at + second, vb);
#endif
        }
    }
}

#endif
