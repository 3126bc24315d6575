/* SPDX-License-Identifier: MIT */
/* The CPU kernel template's RoPE with the token's table held in vector registers (cpu_simd.h),
 * for the variants that set TABLE_REGS. */
#ifndef POSENC_CPU_SIMD_ROPE_HELD_H
#define POSENC_CPU_SIMD_ROPE_HELD_H

#include "cpu/cpu_simd_access.h"
#include "cpu/cpu_simd_bf16.h"
#include "cpu/cpu_simd_norm.h"

#include <stdbool.h>
#include <string.h>

/* ---- RoPE with the token's table held in registers ----
 *
 * The loops of cpu_simd_rope.h read the table from memory for every vector: the cos and sin of a
 * NeoX pair twice each, as operands of two instructions. With the data, that is three loads per
 * vector where a copy makes one, and AVX-512 on AMD's Zen 4 loads one 64-byte vector per cycle:
 * the loads, not the arithmetic, set the pace in cache. When the table fits in TABLE_REGS
 * registers (rotary_dim 128 on AVX-512: 8 for NeoX, 16 for GPT-J), it is loaded once per call
 * and each head costs its own loads and stores only. A larger table is held a chunk at a time,
 * each chunk rotating its dims in every head before the next is loaded: each line of a head is
 * still touched once, but the heads are walked once per chunk, which the hardware prefetchers
 * follow poorly, so only for tensors in cache (not a->streaming). On AVX2 on Zen 3 that made a
 * decode step (rotary_dim 128) 10-20 % faster for f32 and f16, NeoX and GPT-J alike, and
 * in-place prefill from memory 25-60 % slower. `nv` (vectors per half table for NeoX, per table
 * for GPT-J, in the chunk from vector `first` on) is a constant in each instance, so the loops
 * over it unroll and the arrays stay in registers; `normed` too (the QK norm on load, which
 * the kernels on bf16 words do not take). */
#if defined(TABLE_REGS) && TABLE_REGS > 0

#if TABLE_REGS != 8 && TABLE_REGS != 16
#  error "TABLE_REGS: 8 or 16 (the chunk sizes below)"
#endif

CPU_INLINE_ALWAYS void rope_neox_held(const posenc_cpu_rope_heads *a, posenc_dtype dt,
                                      const uint32_t nv, const uint32_t first, const bool normed)
{
    const size_t es = dt_size(dt);
    const uint32_t half = a->rotary_dim / 2;
    const size_t first_bytes = (size_t)first * LANES * es;
    const bool last = first + nv == half / LANES;
    const uint8_t *const in0 = a->in + first_bytes;
    uint8_t *const out0 = a->out + first_bytes;
    const int64_t in_stride = a->in_head_stride, out_stride = a->out_head_stride;
    const int64_t heads = a->heads;
    vf c[TABLE_REGS / 2], s[TABLE_REGS / 2];
    UNROLL_ALL
    for (uint32_t k = 0; k < nv; k++) {
        c[k] = f_load(a->table + (first + k) * LANES);
        s[k] = f_load(a->table + half + (first + k) * LANES);
    }
    for (int64_t h = 0; h < heads; h++) {
        const uint8_t *in = in0 + h * in_stride;
        uint8_t *out = out0 + h * out_stride;
        unsigned nan = 0;
        const head_norm n = head_norm_at(a, normed, h);
        UNROLL_ALL
        for (uint32_t k = 0; k < nv; k++) {
            size_t at = k * LANES * es, bt = at + half * es, d = (first + k) * (size_t)LANES;
            vf x0 = load_normed(dt, in + at, normed, &n, d);
            vf x1 = load_normed(dt, in + bt, normed, &n, d + half);
            KEEP_IN_REGISTER(x0);
            KEEP_IN_REGISTER(x1);
            store_dt2_deferred(dt, out + at, f_fms(x0, c[k], f_mul(x1, s[k])), out + bt,
                               f_fma(x0, s[k], f_mul(x1, c[k])), &nan);
        }
        fix_nans_dt(dt, out, nv * LANES, nan);
        fix_nans_dt(dt, out + half * es, nv * LANES, nan);
        if (last)
            head_rest(a, dt, in - first_bytes, out - first_bytes, normed, &n);
    }
}

CPU_INLINE_ALWAYS void rope_gptj_held(const posenc_cpu_rope_heads *a, posenc_dtype dt,
                                      const uint32_t nv, const uint32_t first, const bool normed)
{
    const size_t es = dt_size(dt);
    const uint32_t rot = a->rotary_dim;
    const size_t first_bytes = (size_t)first * LANES * es;
    const bool last = first + nv == rot / LANES;
    const uint8_t *const in0 = a->in + first_bytes;
    uint8_t *const out0 = a->out + first_bytes;
    const int64_t in_stride = a->in_head_stride, out_stride = a->out_head_stride;
    const int64_t heads = a->heads;
    vf c[TABLE_REGS / 2], s[TABLE_REGS / 2];
    UNROLL_ALL
    for (uint32_t k = 0; k < nv; k++) {
        c[k] = f_load(a->table + (first + k) * LANES);
        s[k] = f_load(a->table + rot + (first + k) * LANES);
    }
    for (int64_t h = 0; h < heads; h++) {
        const uint8_t *in = in0 + h * in_stride;
        uint8_t *out = out0 + h * out_stride;
        unsigned nan = 0;
        const head_norm n = head_norm_at(a, normed, h);
        UNROLL_ALL
        for (uint32_t k = 0; k + 1 < nv; k += 2) {
            size_t at = k * LANES * es, bt = at + LANES * es, d = (first + k) * (size_t)LANES;
            vf x = load_normed(dt, in + at, normed, &n, d);
            vf y = load_normed(dt, in + bt, normed, &n, d + LANES);
            KEEP_IN_REGISTER(x);
            KEEP_IN_REGISTER(y);
            store_dt2_deferred(dt, out + at, f_fma(f_swap_pairs(x), s[k], f_mul(x, c[k])),
                               out + bt, f_fma(f_swap_pairs(y), s[k + 1], f_mul(y, c[k + 1])),
                               &nan);
        }
        if (nv % 2) {
            size_t at = (nv - 1) * LANES * es;
            vf x = load_normed(dt, in + at, normed, &n, (first + nv - 1) * (size_t)LANES);
            store_dt(dt, out + at, f_fma(f_swap_pairs(x), s[nv - 1], f_mul(x, c[nv - 1])));
        }
        fix_nans_dt(dt, out, (size_t)(nv - nv % 2) * LANES, nan);
        if (last)
            head_rest(a, dt, in - first_bytes, out - first_bytes, normed, &n);
    }
}

/* rope_gptj_bf16 (cpu_simd_rope.h) with its pair table in registers: `nv` vectors of cos and
 * of sin. */
CPU_INLINE_ALWAYS void rope_gptj_bf16_held(const posenc_cpu_rope_heads *a, posenc_dtype dt,
                                           const uint32_t nv, const uint32_t first,
                                           const bool normed)
{
    (void)dt;
    (void)normed;
    const size_t head_bytes = a->rotary_dim * 2, first_bytes = 4 * LANES * (size_t)first;
    const bool last = first + nv == a->rotary_dim / 2 / LANES;
    const uint8_t *const in0 = a->in + first_bytes;
    uint8_t *const out0 = a->out + first_bytes;
    const int64_t in_stride = a->in_head_stride, out_stride = a->out_head_stride;
    const int64_t heads = a->heads;
    const vi high = i_set(0xffff0000u);
    vf c[TABLE_REGS / 2], s[TABLE_REGS / 2];
    UNROLL_ALL
    for (uint32_t k = 0; k < nv; k++) {
        c[k] = f_load(a->pair_cos + (first + k) * LANES);
        s[k] = f_load(a->pair_sin + (first + k) * LANES);
    }
    for (int64_t h = 0; h < heads; h++) {
        const uint8_t *in = in0 + h * in_stride;
        uint8_t *out = out0 + h * out_stride;
        UNROLL_ALL
        for (uint32_t k = 0; k < nv; k++) {
            vi w = i_load(in + 4 * LANES * (size_t)k);
            vf x0 = i_bits(i_shl(w, 16)), x1 = i_bits(i_and(w, high));
            i_store(out + 4 * LANES * (size_t)k,
                    bf16_pairs(f_fms(x0, c[k], f_mul(x1, s[k])), f_fma(x0, s[k], f_mul(x1, c[k]))));
        }
        if (last && a->copy_rest)
            memcpy(out - first_bytes + head_bytes, in - first_bytes + head_bytes,
                   (a->head_dim - a->rotary_dim) * 2);
    }
}

/* bf16 NeoX on 32-bit words, as GPT-J's pairs: a word holds elements 2i and 2i + 1, which a
 * shift and a mask widen, and the rotation runs on the even elements and on the odd ones with
 * the table split the same way (in registers: `nv` blocks of 2 LANES values, four vectors
 * each, from block `first` on). Two loads and two stores per 2 LANES pairs, no widening
 * instruction, one conversion of two vectors at a time. */
CPU_INLINE_ALWAYS void rope_neox_bf16_held(const posenc_cpu_rope_heads *a, posenc_dtype dt,
                                           const uint32_t nv, const uint32_t first,
                                           const bool normed)
{
    (void)dt;
    (void)normed;
    const uint32_t half = a->rotary_dim / 2;
    const size_t head_bytes = a->rotary_dim * 2, first_bytes = 4 * LANES * (size_t)first;
    const bool last = first + nv == a->rotary_dim / (4 * LANES);
    const uint8_t *const in0 = a->in + first_bytes;
    uint8_t *const out0 = a->out + first_bytes;
    const int64_t in_stride = a->in_head_stride, out_stride = a->out_head_stride;
    const int64_t heads = a->heads;
    const vi high = i_set(0xffff0000u);
    vf ce[TABLE_REGS / 4], co[TABLE_REGS / 4], se[TABLE_REGS / 4], so[TABLE_REGS / 4];
    UNROLL_ALL
    for (uint32_t k = 0; k < nv; k++) {
        const float *c = a->table + 2 * LANES * (first + k), *s = c + half;
        f_unzip(f_load(c), f_load(c + LANES), &ce[k], &co[k]);
        f_unzip(f_load(s), f_load(s + LANES), &se[k], &so[k]);
    }
    for (int64_t h = 0; h < heads; h++) {
        const uint8_t *in = in0 + h * in_stride;
        uint8_t *out = out0 + h * out_stride;
        UNROLL_ALL
        for (uint32_t k = 0; k < nv; k++) {
            size_t at = 4 * LANES * (size_t)k, bt = at + 2 * (size_t)half;
            vi w0 = i_load(in + at), w1 = i_load(in + bt);
            vf e0 = i_bits(i_shl(w0, 16)), o0 = i_bits(i_and(w0, high));
            vf e1 = i_bits(i_shl(w1, 16)), o1 = i_bits(i_and(w1, high));
            i_store(out + at, bf16_pairs(f_fms(e0, ce[k], f_mul(e1, se[k])),
                                         f_fms(o0, co[k], f_mul(o1, so[k]))));
            i_store(out + bt, bf16_pairs(f_fma(e0, se[k], f_mul(e1, ce[k])),
                                         f_fma(o0, so[k], f_mul(o1, co[k]))));
        }
        if (last && a->copy_rest)
            memcpy(out - first_bytes + head_bytes, in - first_bytes + head_bytes,
                   (a->head_dim - a->rotary_dim) * 2);
    }
}

/* The table's `count` vectors (blocks for bf16 NeoX) a chunk of `most` at a time, each chunk
 * through the instance of `held` for its size: 1 .. TABLE_REGS / 2 vectors (HELD_HALF), or
 * 1 .. TABLE_REGS / 4 blocks (HELD_QUARTER). */
#define HELD_CASE(held, n)                                                                   \
    case n: held(a, dt, n, first, normed); break;
#define HELD_UP_TO_2(held) HELD_CASE(held, 1) HELD_CASE(held, 2)
#define HELD_UP_TO_4(held) HELD_UP_TO_2(held) HELD_CASE(held, 3) HELD_CASE(held, 4)
#define HELD_UP_TO_8(held)                                                                   \
    HELD_UP_TO_4(held) HELD_CASE(held, 5) HELD_CASE(held, 6) HELD_CASE(held, 7) HELD_CASE(held, 8)
#if TABLE_REGS == 16
#  define HELD_HALF HELD_UP_TO_8
#  define HELD_QUARTER HELD_UP_TO_4
#else
#  define HELD_HALF HELD_UP_TO_4
#  define HELD_QUARTER HELD_UP_TO_2
#endif
#define HELD_CHUNKS(held, cases, count, most)                                                \
    for (uint32_t first = 0; first < (count); first += (most)) {                             \
        switch ((count) - first < (most) ? (count) - first : (most)) {                       \
        cases(held)                                                                          \
        default: break;                                                                      \
        }                                                                                    \
    }

/* False (nothing done) where the table has a partial vector, or is larger than the registers
 * on streaming tensors. */
CPU_INLINE bool rope_held_dt(const posenc_cpu_rope_heads *a, posenc_dtype dt, const bool normed)
{
    const bool neox = a->style == POSENC_ROPE_NEOX;
    if (neox && dt == DT_BF16 && !normed && a->rotary_dim % (4 * LANES) == 0) {
        const uint32_t blocks = a->rotary_dim / (4 * LANES);
        if (blocks > TABLE_REGS / 4 && a->streaming)
            return false;
        HELD_CHUNKS(rope_neox_bf16_held, HELD_QUARTER, blocks, TABLE_REGS / 4)
        return true;
    }
    const bool pairs = !neox && dt == DT_BF16 && !normed; /* one cos and one sin per pair */
    const uint32_t values = neox || pairs ? a->rotary_dim / 2 : a->rotary_dim;
    const uint32_t nv = values / LANES;
    if (nv == 0 || values % LANES || (nv > TABLE_REGS / 2 && a->streaming))
        return false;
    if (pairs) {
        HELD_CHUNKS(rope_gptj_bf16_held, HELD_HALF, nv, TABLE_REGS / 2)
    } else if (neox) {
        HELD_CHUNKS(rope_neox_held, HELD_HALF, nv, TABLE_REGS / 2)
    } else {
        HELD_CHUNKS(rope_gptj_held, HELD_HALF, nv, TABLE_REGS / 2)
    }
    return true;
}
#undef HELD_CHUNKS
#undef HELD_QUARTER
#undef HELD_HALF
#undef HELD_UP_TO_8
#undef HELD_UP_TO_4
#undef HELD_UP_TO_2
#undef HELD_CASE

#endif

#endif
