/* SPDX-License-Identifier: MIT */
/* The CPU kernel template's RoPE with the QK norm over each head (cpu_simd.h), for the shape the
 * models with the norm have (Qwen3, Gemma 3: NeoX pairs over whole heads of 64 to 256 dims, f32
 * or bf16), in one pass over the heads: the weights folded into the token's table once per
 * call, the factors of a group of heads taken while the group before it rotates, bf16 read and
 * written as 32-bit words as RoPE's own bf16 kernels do. Other shapes take cpu_simd_rope.h's
 * rope_heads_norm_blocks. */
#ifndef POSENC_CPU_SIMD_ROPE_NORM_H
#define POSENC_CPU_SIMD_ROPE_NORM_H

#include "cpu/cpu_simd_access.h"
#include "cpu/cpu_simd_bf16.h"
#include "cpu/cpu_simd_norm.h"

#include <stdbool.h>

/* ---- the table with the weights in it ----
 *
 * The rotation of a normalized pair, out_a = r (w_a x_a c - w_b x_b s) and out_b = r (w_a x_a s
 * + w_b x_b c), takes its weights from the table: vector k of a half as four vectors, c w_a,
 * s w_b, s w_a and c w_b, side by side. Per vector of a head, that leaves the scaling by r and
 * the rotation's own arithmetic, where load_normed (cpu_simd_norm.h) multiplied by the weights
 * and by r on every load. Each value of the table rounds once more, where load_normed rounded
 * w r: a value read stays within D / 2 + 6.5 units. */

#define NORM_FOLD_VECTORS 8 /* a half's vectors at most: the instances' largest */

typedef struct folded_table {
    vf vectors[4 * NORM_FOLD_VECTORS];
} folded_table;

CPU_INLINE_ALWAYS void fold_weights(const posenc_cpu_rope_heads *a, const uint32_t nv,
                                    folded_table *t)
{
    const uint32_t half = nv * LANES;
    const float *c = a->table, *s = a->table + half, *w = a->norm_weights;
    UNROLL_ALL
    for (uint32_t k = 0; k < nv; k++) {
        const size_t j = (size_t)k * LANES;
        vf wa = f_load(w + j), wb = f_load(w + half + j);
        vf cj = f_load(c + j), sj = f_load(s + j);
        t->vectors[4 * k] = f_mul(cj, wa);
        t->vectors[4 * k + 1] = f_mul(sj, wb);
        t->vectors[4 * k + 2] = f_mul(sj, wa);
        t->vectors[4 * k + 3] = f_mul(cj, wb);
    }
}

/* bf16 heads as 32-bit words (cpu_simd_rope_held.h's rope_neox_bf16_held): a word holds dims 2i
 * and 2i + 1 of a half, so block k (2 LANES dims of each half) takes the four vectors of
 * fold_weights split into their even and odd dims, eight in all. */
CPU_INLINE_ALWAYS void fold_weights_words(const posenc_cpu_rope_heads *a, const uint32_t nb,
                                          folded_table *t)
{
    const uint32_t half = 2 * nb * LANES;
    const float *c = a->table, *s = a->table + half, *w = a->norm_weights;
    UNROLL_ALL
    for (uint32_t k = 0; k < nb; k++) {
        const size_t j = 2 * (size_t)k * LANES;
        vf ce, co, se, so, wae, wao, wbe, wbo;
        f_unzip(f_load(c + j), f_load(c + j + LANES), &ce, &co);
        f_unzip(f_load(s + j), f_load(s + j + LANES), &se, &so);
        f_unzip(f_load(w + j), f_load(w + j + LANES), &wae, &wao);
        f_unzip(f_load(w + half + j), f_load(w + half + j + LANES), &wbe, &wbo);
        vf *v = t->vectors + 8 * k;
        v[0] = f_mul(ce, wae);
        v[1] = f_mul(co, wao);
        v[2] = f_mul(se, wbe);
        v[3] = f_mul(so, wbo);
        v[4] = f_mul(se, wae);
        v[5] = f_mul(so, wao);
        v[6] = f_mul(ce, wbe);
        v[7] = f_mul(co, wbo);
    }
}

/* ---- the factors of a group of heads ----
 *
 * NORM_GROUP heads' sums of squares, added across lanes in the rounds of head_sums
 * (cpu_simd_norm.h) with the same pairs, so each sum and its bound are head_sums': the vectors
 * of heads past `count` are zero, and adding zero is exact. The factors are head_sums' too, in
 * the same lanes. Groups of four: the heads of a group are read for their sums while the group
 * before it rotates, and with tensors streaming from L3 a group of LANES heads (AVX-512: 8 KiB
 * of f32) stalled the rotation behind its loads. */

#define NORM_GROUP 4 /* at most LANES: every variant has 4 or more */

/* head_squares of a bf16 head read as words: the even dims' squares and the odd dims' go to
 * accumulators of their own, so that each of the four takes as many values per lane as in
 * head_squares (dims a multiple of 4 LANES), and the sum keeps head_squares' bound. */
CPU_INLINE_ALWAYS vf head_squares_words(const uint8_t *in, const uint32_t dims)
{
    const vi high = i_set(0xffff0000u);
    vf acc[NORM_ACCUMULATORS] = {f_set(0.0f), f_set(0.0f), f_set(0.0f), f_set(0.0f)};
    UNROLL_ALL
    for (uint32_t k = 0; k < dims / (2 * LANES); k++) {
        vi w = i_load(in + 4 * LANES * (size_t)k);
        vf even = i_bits(i_shl(w, 16)), odd = i_bits(i_and(w, high));
        acc[(2 * k) % NORM_ACCUMULATORS] = f_fma(even, even, acc[(2 * k) % NORM_ACCUMULATORS]);
        acc[(2 * k + 1) % NORM_ACCUMULATORS] =
            f_fma(odd, odd, acc[(2 * k + 1) % NORM_ACCUMULATORS]);
    }
    return f_add(f_add(acc[0], acc[1]), f_add(acc[2], acc[3]));
}

CPU_INLINE_ALWAYS void group_factors(posenc_dtype dt, const bool words, const uint8_t *in,
                                     int64_t head_stride, int64_t count, const uint32_t dims,
                                     float eps, float *factors)
{
    vf sums[NORM_GROUP];
    UNROLL_ALL
    for (int i = 0; i < NORM_GROUP; i++)
        sums[i] = i >= count ? f_set(0.0f)
                  : words    ? head_squares_words(in + i * head_stride, dims)
                             : head_squares(dt, in + i * head_stride, dims);
    vf even, odd;
    int width = LANES;
    for (int live = NORM_GROUP; live > 1; live /= 2, width /= 2) {
        for (int i = 0; i < live / 2; i++) {
            f_unzip(sums[2 * i], sums[2 * i + 1], &even, &odd);
            sums[i] = f_add(even, odd);
        }
    }
    vf v = sums[0];
    for (; width > 1; width /= 2) {
        f_unzip(v, f_set(0.0f), &even, &odd);
        v = f_add(even, odd);
    }
    v = f_div(f_set(1.0f), f_sqrt(f_add(f_mul(v, f_set(1.0f / (float)dims)), f_set(eps))));
    f_store(factors, v); /* LANES floats, those past the group unused */
}

/* Software prefetch where the variant asks for it (NORM_PREFETCH_AHEAD): the lines of the group
 * after `group` (its heads' first `bytes` each), while the sums read `group` and the rotation
 * the one before. The hardware prefetchers alone left the sums waiting on L3: on the AVX-512
 * Xeon, with 4096 tokens of q and k in L3, the fused call took 1.3 times RoPE's time, and as
 * long as RoPE with the lines 2 KiB ahead (1 and 8 KiB did about as well, 4 KiB worse). */
CPU_INLINE void prefetch_group(const posenc_cpu_rope_heads *a, const uint8_t *group,
                               size_t bytes)
{
#if defined(NORM_PREFETCH_AHEAD)
    if (a->streaming)
        for (int i = 0; i < NORM_GROUP; i++)
            for (size_t b = 0; b < bytes; b += 64)
                prefetch_line(group + i * a->in_head_stride + b + NORM_PREFETCH_AHEAD);
#else
    (void)a;
    (void)group;
    (void)bytes;
#endif
}

/* ---- the heads ----
 *
 * `nv`, a half's vectors, is a constant in each instance: the loops unroll, the table's offsets
 * are immediate, and on AVX-512 (nv 4 for head_dim 128) the folded table stays in registers. */

CPU_INLINE_ALWAYS void neox_norm_head(posenc_dtype dt, const uint32_t nv, const folded_table *t,
                                      const uint8_t *in, uint8_t *out, float r)
{
    const size_t es = dt_size(dt), half_bytes = (size_t)nv * LANES * es;
    const vf factor = f_set(r);
    unsigned nan = 0;
    UNROLL_ALL
    for (uint32_t k = 0; k < nv; k++) {
        const vf *tk = t->vectors + 4 * k;
        const size_t at = (size_t)k * LANES * es;
        vf xa = f_mul(load_dt(dt, in + at), factor);
        vf xb = f_mul(load_dt(dt, in + at + half_bytes), factor);
        store_dt2_deferred(dt, out + at, f_fms(xa, tk[0], f_mul(xb, tk[1])),
                           out + at + half_bytes, f_fma(xa, tk[2], f_mul(xb, tk[3])), &nan);
    }
    fix_nans_dt(dt, out, (size_t)nv * LANES, nan);
    fix_nans_dt(dt, out + half_bytes, (size_t)nv * LANES, nan);
}

/* neox_norm_head on bf16 words: `nb` blocks of 2 LANES dims a half. */
CPU_INLINE_ALWAYS void neox_norm_head_words(const uint32_t nb, const folded_table *t,
                                            const uint8_t *in, uint8_t *out, float r)
{
    const size_t half_bytes = 4 * (size_t)nb * LANES;
    const vi high = i_set(0xffff0000u);
    const vf factor = f_set(r);
    UNROLL_ALL
    for (uint32_t k = 0; k < nb; k++) {
        const vf *v = t->vectors + 8 * k;
        const size_t at = 4 * (size_t)k * LANES, bt = at + half_bytes;
        vi w0 = i_load(in + at), w1 = i_load(in + bt);
        vf e0 = f_mul(i_bits(i_shl(w0, 16)), factor), o0 = f_mul(i_bits(i_and(w0, high)), factor);
        vf e1 = f_mul(i_bits(i_shl(w1, 16)), factor), o1 = f_mul(i_bits(i_and(w1, high)), factor);
        i_store(out + at, bf16_pairs(f_fms(e0, v[0], f_mul(e1, v[2])),
                                     f_fms(o0, v[1], f_mul(o1, v[3]))));
        i_store(out + bt, bf16_pairs(f_fma(e0, v[4], f_mul(e1, v[6])),
                                     f_fma(o0, v[5], f_mul(o1, v[7]))));
    }
}

CPU_INLINE_ALWAYS void rope_norm_neox(const posenc_cpu_rope_heads *a, posenc_dtype dt,
                                      const uint32_t nv, const bool words)
{
    const int64_t heads = a->heads, in_stride = a->in_head_stride;
    const uint32_t dims = 2 * nv * LANES;
    folded_table t;
    if (words)
        fold_weights_words(a, nv / 2, &t);
    else
        fold_weights(a, nv, &t);
    float factors[2][LANES], *r = factors[0], *next_r = factors[1];
    /* Group `next`'s factors, then the rotation of the group before it (h0). */
    for (int64_t next = 0, h0 = -NORM_GROUP; h0 < heads; h0 = next, next += NORM_GROUP) {
        if (next < heads) {
            prefetch_group(a, a->in + next * in_stride, dims * dt_size(dt));
            group_factors(dt, words, a->in + next * in_stride, in_stride,
                          heads - next < NORM_GROUP ? heads - next : NORM_GROUP, dims,
                          a->norm_eps, next_r);
        }
        const int64_t end = heads - h0 < NORM_GROUP ? heads : h0 + NORM_GROUP;
        for (int64_t h = h0 < 0 ? end : h0; h < end; h++) {
            const uint8_t *in = a->in + h * in_stride;
            uint8_t *out = a->out + h * a->out_head_stride;
            if (words)
                neox_norm_head_words(nv / 2, &t, in, out, r[h - h0]);
            else
                neox_norm_head(dt, nv, &t, in, out, r[h - h0]);
        }
        float *done = r;
        r = next_r;
        next_r = done;
    }
}

/* The heads with a norm over each (its factors not given, one set of weights for all), NeoX,
 * whole heads of 2, 4 or 8 vectors a half, f32 or bf16. False (nothing done) for any other. */
static bool rope_heads_norm_fused(const posenc_cpu_rope_heads *a)
{
    if (a->norm_factors || a->norm_weight_stride || a->style == POSENC_ROPE_GPTJ ||
        a->head_dim != a->rotary_dim || a->rotary_dim % (2 * LANES) || a->dtype == DT_F16)
        return false;
    /* bf16 on 32-bit words (every instance's half is whole blocks of 2 LANES dims). */
    const bool bf16 = a->dtype == DT_BF16;
    switch (a->rotary_dim / (2 * LANES)) {
    case 2: bf16 ? rope_norm_neox(a, DT_BF16, 2, true) : rope_norm_neox(a, DT_F32, 2, false); break;
    case 4: bf16 ? rope_norm_neox(a, DT_BF16, 4, true) : rope_norm_neox(a, DT_F32, 4, false); break;
    case 8: bf16 ? rope_norm_neox(a, DT_BF16, 8, true) : rope_norm_neox(a, DT_F32, 8, false); break;
    default: return false;
    }
    return true;
}

#endif
