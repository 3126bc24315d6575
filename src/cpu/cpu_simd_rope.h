/* SPDX-License-Identifier: MIT */
/* The CPU kernel template's RoPE (cpu_simd.h): NeoX and GPT-J heads with the table in memory,
 * the GPT-J table, and k_rope_heads, which picks these or cpu_simd_rope_held.h's. */
#ifndef POSENC_CPU_SIMD_ROPE_H
#define POSENC_CPU_SIMD_ROPE_H

#include "cpu/cpu_simd_access.h"
#include "cpu/cpu_simd_bf16.h"
#include "cpu/cpu_simd_norm.h"
#include "cpu/cpu_simd_rope_held.h"
#include "cpu/cpu_simd_rope_norm.h"

#include <string.h>

/* ---- RoPE ---- */

/* Software prefetch only where the variant asks for it (PREFETCH_AHEAD): the heads are read in
 * address order, which the hardware prefetchers follow on their own, and prefetching 4 KiB
 * ahead (one prefetch per line of every head) made prefill RoPE slower with AVX-512 on Zen 4,
 * f32 from 0.89 to 0.63 of the copy's speed on one core. With AVX2 on Zen 3 the same prefetch
 * keeps more lines in flight while the core converts and rotates, and made it faster; only for
 * tensors that stream from L3 or memory (a->streaming): from L1 (a decode step) the prefetches
 * only cost instructions. */
CPU_INLINE void prefetch_ahead(const posenc_cpu_rope_heads *a, const uint8_t *head,
                               size_t bytes)
{
#if defined(PREFETCH_AHEAD)
    if (a->streaming)
        for (size_t b = 0; b < bytes; b += 64)
            prefetch_line(head + PREFETCH_AHEAD + b);
#else
    (void)a;
    (void)head;
    (void)bytes;
#endif
}

/* One NeoX vector of a head: values at j of both halves (`half_bytes` apart), table c, s; the
 * head's norm `n` where `normed`. */
CPU_INLINE void neox_vector(posenc_dtype dt, const uint8_t *in, uint8_t *out, size_t half_bytes,
                            vf c, vf s, unsigned *nan, bool normed, const head_norm *n, size_t j,
                            size_t half)
{
    vf x0 = load_normed(dt, in, normed, n, j);
    vf x1 = load_normed(dt, in + half_bytes, normed, n, j + half);
    store_dt2_deferred(dt, out, f_fms(x0, c, f_mul(x1, s)), out + half_bytes,
                       f_fma(x0, s, f_mul(x1, c)), nan);
}

/* The rest of a NeoX head after its `full` full vectors: their NaNs, the partial vector, and the
 * dims after rotary_dim (head_rest). */
CPU_INLINE void neox_head_end(const posenc_cpu_rope_heads *a, posenc_dtype dt, const uint8_t *in,
                              uint8_t *out, uint32_t full, unsigned nan, bool normed,
                              const head_norm *nh)
{
    const size_t es = dt_size(dt);
    const uint32_t half = a->rotary_dim / 2;
    const float *ct = a->table, *st = a->table + half;
    fix_nans_dt(dt, out, full, nan);
    fix_nans_dt(dt, out + half * es, full, nan);
    if (full < half) {
        size_t n = half - full;
        const uint8_t *i0 = in + full * es, *i1 = i0 + half * es;
        vf x0 = load_normed_part(dt, i0, n, normed, nh, full);
        vf x1 = load_normed_part(dt, i1, n, normed, nh, half + full);
        vf c = f_load_part(ct + full, n), s = f_load_part(st + full, n);
        store_dt_part(dt, out + full * es, f_fms(x0, c, f_mul(x1, s)), n);
        store_dt_part(dt, out + (half + full) * es, f_fma(x0, s, f_mul(x1, c)), n);
    }
    head_rest(a, dt, in, out, normed, nh);
}

/* Two heads at a time, so that each table vector loaded serves both. */
CPU_INLINE void rope_neox(const posenc_cpu_rope_heads *a, posenc_dtype dt, bool normed)
{
    const size_t es = dt_size(dt);
    const uint32_t half = a->rotary_dim / 2, full = half - half % LANES;
    const size_t half_bytes = half * es;
    const float *const ct = a->table, *const st = a->table + half;
    const uint8_t *const in0 = a->in;
    uint8_t *const out0 = a->out;
    const int64_t in_stride = a->in_head_stride, out_stride = a->out_head_stride;
    const int64_t heads = a->heads;
    int64_t h = 0;
    for (; h + 2 <= heads; h += 2) {
        const uint8_t *in = in0 + h * in_stride, *in1 = in + in_stride;
        uint8_t *out = out0 + h * out_stride, *out1 = out + out_stride;
        unsigned nan = 0, nan1 = 0;
        const head_norm n0 = head_norm_at(a, normed, h), n1 = head_norm_at(a, normed, h + 1);
        prefetch_ahead(a, in, 2 * half_bytes);
        prefetch_ahead(a, in1, 2 * half_bytes);
        for (uint32_t j = 0; j < full; j += LANES) {
            vf c = f_load(ct + j), s = f_load(st + j);
            neox_vector(dt, in + j * es, out + j * es, half_bytes, c, s, &nan, normed, &n0, j,
                        half);
            neox_vector(dt, in1 + j * es, out1 + j * es, half_bytes, c, s, &nan1, normed, &n1,
                        j, half);
        }
        neox_head_end(a, dt, in, out, full, nan, normed, &n0);
        neox_head_end(a, dt, in1, out1, full, nan1, normed, &n1);
    }
    if (h < heads) {
        const uint8_t *in = in0 + h * in_stride;
        uint8_t *out = out0 + h * out_stride;
        unsigned nan = 0;
        const head_norm n0 = head_norm_at(a, normed, h);
        prefetch_ahead(a, in, 2 * half_bytes);
        for (uint32_t j = 0; j < full; j += LANES)
            neox_vector(dt, in + j * es, out + j * es, half_bytes, f_load(ct + j),
                        f_load(st + j), &nan, normed, &n0, j, half);
        neox_head_end(a, dt, in, out, full, nan, normed, &n0);
    }
}

/* Two GPT-J vectors of a head from `in` (values i .. i + 2 LANES), table vectors c0, s0 and
 * c1, s1; the head's norm `n` where `normed`. */
CPU_INLINE void gptj_vectors(posenc_dtype dt, const uint8_t *in, uint8_t *out, vf c0, vf s0,
                             vf c1, vf s1, unsigned *nan, bool normed, const head_norm *n,
                             size_t i)
{
    const size_t bytes = LANES * dt_size(dt);
    vf x = load_normed(dt, in, normed, n, i), y = load_normed(dt, in + bytes, normed, n, i + LANES);
    store_dt2_deferred(dt, out, f_fma(f_swap_pairs(x), s0, f_mul(x, c0)), out + bytes,
                       f_fma(f_swap_pairs(y), s1, f_mul(y, c1)), nan);
}

/* The rest of a GPT-J head after its first `done` values (a multiple of 2 LANES): their NaNs,
 * the last vectors, and the dims after rotary_dim (head_rest). */
CPU_INLINE void gptj_head_end(const posenc_cpu_rope_heads *a, posenc_dtype dt, const uint8_t *in,
                              uint8_t *out, uint32_t done, unsigned nan, bool normed,
                              const head_norm *nh)
{
    const size_t es = dt_size(dt);
    const uint32_t rot = a->rotary_dim;
    const float *ct = a->table, *st = a->table + rot;
    uint32_t i = done;
    fix_nans_dt(dt, out, done, nan);
    for (; i + LANES <= rot; i += LANES) {
        vf x = load_normed(dt, in + i * es, normed, nh, i);
        store_dt(dt, out + i * es,
                 f_fma(f_swap_pairs(x), f_load(st + i), f_mul(x, f_load(ct + i))));
    }
    if (i < rot) { /* an even count: pairs never straddle the tail */
        size_t n = rot - i;
        vf x = load_normed_part(dt, in + i * es, n, normed, nh, i);
        store_dt_part(dt, out + i * es,
                      f_fma(f_swap_pairs(x), f_load_part(st + i, n),
                            f_mul(x, f_load_part(ct + i, n))),
                      n);
    }
    head_rest(a, dt, in, out, normed, nh);
}

/* One head at a time: two heads per table load as in rope_neox made in-place prefill slower
 * from DRAM (f32 at 0.68 of the copy's speed where one head runs at 0.9 on AVX2 Zen 3), the
 * core time saved going to a worse access pattern. */
CPU_INLINE void rope_gptj(const posenc_cpu_rope_heads *a, posenc_dtype dt, bool normed)
{
    const size_t es = dt_size(dt);
    const uint32_t rot = a->rotary_dim, done = rot - rot % (2 * LANES);
    const float *const ct = a->table, *const st = a->table + rot;
    const uint8_t *const in0 = a->in;
    uint8_t *const out0 = a->out;
    const int64_t in_stride = a->in_head_stride, out_stride = a->out_head_stride;
    const int64_t heads = a->heads;
    for (int64_t h = 0; h < heads; h++) {
        const uint8_t *in = in0 + h * in_stride;
        uint8_t *out = out0 + h * out_stride;
        unsigned nan = 0;
        const head_norm n = head_norm_at(a, normed, h);
        prefetch_ahead(a, in, rot * es);
        for (uint32_t i = 0; i < done; i += 2 * LANES)
            gptj_vectors(dt, in + i * es, out + i * es, f_load(ct + i), f_load(st + i),
                         f_load(ct + i + LANES), f_load(st + i + LANES), &nan, normed, &n, i);
        gptj_head_end(a, dt, in, out, done, nan, normed, &n);
    }
}

/* Two zips per vector where a scalar loop takes a dozen instructions per pair: for f16 GPT-J
 * with rotary_dim 128, the scalar table took about a tenth of a token's time. */
static void k_gptj_table(const float *sin_values, const float *cos_values, uint32_t pairs,
                         float *table)
{
    const size_t rot = 2 * (size_t)pairs;
    const vi sign = i_set(0x80000000u);
    uint32_t j = 0;
    for (; j + LANES <= pairs; j += LANES) {
        vf c = f_load(cos_values + j), s = f_load(sin_values + j), lo, hi;
        f_zip(c, c, &lo, &hi);
        f_store(table + 2 * (size_t)j, lo);
        f_store(table + 2 * (size_t)j + LANES, hi);
        f_zip(f_xor_bits(s, sign), s, &lo, &hi);
        f_store(table + rot + 2 * (size_t)j, lo);
        f_store(table + rot + 2 * (size_t)j + LANES, hi);
    }
    for (; j < pairs; j++) {
        table[2 * (size_t)j] = table[2 * (size_t)j + 1] = cos_values[j];
        table[rot + 2 * (size_t)j] = -sin_values[j];
        table[rot + 2 * (size_t)j + 1] = sin_values[j];
    }
}

/* ---- bf16 heads as 32-bit words, and the choice among the kernels ---- */

/* GPT-J pairs of bf16 are 32-bit words, so each lane holds a whole pair: its two values are a
 * shift and a mask away, and the results go back the same way. No shuffle, and the table is
 * one cos and one sin per pair. */
/* `n` GPT-J bf16 pairs (n == LANES: a full vector, a constant after inlining). */
CPU_INLINE void gptj_bf16_vector(const uint8_t *in, uint8_t *out, const float *pc,
                                 const float *ps, size_t n)
{
    const vi high = i_set(0xffff0000u);
    vi w = n == LANES ? i_load(in) : i_load_part(in, n);
    vf x0 = i_bits(i_shl(w, 16)), x1 = i_bits(i_and(w, high));
    vf c = n == LANES ? f_load(pc) : f_load_part(pc, n);
    vf s = n == LANES ? f_load(ps) : f_load_part(ps, n);
    vi r = bf16_pairs(f_fms(x0, c, f_mul(x1, s)), f_fma(x0, s, f_mul(x1, c)));
    if (n == LANES)
        i_store(out, r);
    else
        i_store_part(out, r, n);
}

CPU_INLINE void rope_gptj_bf16(const posenc_cpu_rope_heads *a)
{
    const uint32_t pairs = a->rotary_dim / 2, full = pairs - pairs % LANES;
    const float *const pc = a->pair_cos, *const ps = a->pair_sin;
    const uint8_t *const in0 = a->in;
    uint8_t *const out0 = a->out;
    const int64_t in_stride = a->in_head_stride, out_stride = a->out_head_stride;
    const int64_t heads = a->heads;
    for (int64_t h = 0; h < heads; h++) {
        const uint8_t *in = in0 + h * in_stride;
        uint8_t *out = out0 + h * out_stride;
        prefetch_ahead(a, in, 4 * (size_t)pairs);
        for (uint32_t j = 0; j < full; j += LANES)
            gptj_bf16_vector(in + 4 * (size_t)j, out + 4 * (size_t)j, pc + j, ps + j, LANES);
        if (full < pairs)
            gptj_bf16_vector(in + 4 * (size_t)full, out + 4 * (size_t)full, pc + full,
                             ps + full, pairs - full);
        if (a->copy_rest)
            memcpy(out + a->rotary_dim * 2, in + a->rotary_dim * 2,
                   (a->head_dim - a->rotary_dim) * 2);
    }
}

/* rope_neox_bf16_held with its split table in memory, for tables too large for registers:
 * split once per call into `split`, block k's even cos, odd cos, even sin and odd sin
 * vectors side by side. False (nothing done) where the table is larger than the array or
 * rotary_dim not a multiple of 4 LANES. */
#define NEOX_BF16_MAX_ROTARY 512
CPU_INLINE bool rope_neox_bf16(const posenc_cpu_rope_heads *a)
{
    const uint32_t rot = a->rotary_dim, half = rot / 2, blocks = rot / (4 * LANES);
    if (rot % (4 * LANES) || rot > NEOX_BF16_MAX_ROTARY)
        return false;
    union { /* vectors' alignment for the floats */
        vf vectors[NEOX_BF16_MAX_ROTARY / LANES];
        float values[NEOX_BF16_MAX_ROTARY];
    } split;
    for (uint32_t k = 0; k < blocks; k++) {
        const float *c = a->table + 2 * LANES * k, *s = a->table + half + 2 * LANES * k;
        f_unzip(f_load(c), f_load(c + LANES), &split.vectors[4 * k], &split.vectors[4 * k + 1]);
        f_unzip(f_load(s), f_load(s + LANES), &split.vectors[4 * k + 2],
                &split.vectors[4 * k + 3]);
    }
    const float *const t = split.values;
    const uint8_t *const in0 = a->in;
    uint8_t *const out0 = a->out;
    const int64_t in_stride = a->in_head_stride, out_stride = a->out_head_stride;
    const int64_t heads = a->heads;
    const size_t head_bytes = rot * 2;
    const vi high = i_set(0xffff0000u);
    for (int64_t h = 0; h < heads; h++) {
        const uint8_t *in = in0 + h * in_stride;
        uint8_t *out = out0 + h * out_stride;
        prefetch_ahead(a, in, head_bytes);
        for (uint32_t k = 0; k < blocks; k++) {
            const float *tk = t + 4 * LANES * (size_t)k;
            const vf ce = f_load(tk), co = f_load(tk + LANES);
            const vf se = f_load(tk + 2 * LANES), so = f_load(tk + 3 * LANES);
            size_t at = 4 * LANES * (size_t)k, bt = at + 2 * (size_t)half;
            vi w0 = i_load(in + at), w1 = i_load(in + bt);
            vf e0 = i_bits(i_shl(w0, 16)), o0 = i_bits(i_and(w0, high));
            vf e1 = i_bits(i_shl(w1, 16)), o1 = i_bits(i_and(w1, high));
            i_store(out + at,
                    bf16_pairs(f_fms(e0, ce, f_mul(e1, se)), f_fms(o0, co, f_mul(o1, so))));
            i_store(out + bt,
                    bf16_pairs(f_fma(e0, se, f_mul(e1, ce)), f_fma(o0, so, f_mul(o1, co))));
        }
        if (a->copy_rest)
            memcpy(out + head_bytes, in + head_bytes, (a->head_dim - rot) * 2);
    }
    return true;
}

/* The heads with the QK norm, their factors given: the kernels above in their normed
 * instances. bf16 takes the widening loads with the others, not the 32-bit words: the weights
 * are per dim, and a word holds two dims. */
static void rope_heads_normed(const posenc_cpu_rope_heads *a)
{
#if defined(TABLE_REGS) && TABLE_REGS > 0
    switch (a->dtype) {
    case DT_F16:
        if (rope_held_dt(a, DT_F16, true))
            return;
        break;
    case DT_BF16:
        if (rope_held_dt(a, DT_BF16, true))
            return;
        break;
    default:
        if (rope_held_dt(a, DT_F32, true))
            return;
        break;
    }
#endif
    switch (a->dtype) {
    case DT_F16:
        a->style == POSENC_ROPE_GPTJ ? rope_gptj(a, DT_F16, true) : rope_neox(a, DT_F16, true);
        break;
    case DT_BF16:
        a->style == POSENC_ROPE_GPTJ ? rope_gptj(a, DT_BF16, true) : rope_neox(a, DT_BF16, true);
        break;
    default:
        a->style == POSENC_ROPE_GPTJ ? rope_gptj(a, DT_F32, true) : rope_neox(a, DT_F32, true);
        break;
    }
}

/* The heads with the QK norm, their factors not given: LANES heads at a time, the factors of
 * the next ones taken before these rotate. A head's factor waits on its sum, a reduction
 * across lanes, a square root and a division, some 100 cycles on AVX-512; taken for all the
 * heads first, they cost a pass of their own over the values, and taken head by head just
 * before its rotation, the wait, where here the rotation of LANES heads covers it. */
static void rope_heads_norm_blocks(const posenc_cpu_rope_heads *a)
{
    float factors[2][LANES];
    const int64_t heads = a->heads;
    k_norm_factors(a->dtype, a->in, a->in_head_stride, heads < LANES ? heads : LANES,
                   a->head_dim, a->norm_eps, factors[0]);
    for (int64_t h0 = 0, block = 0; h0 < heads; h0 += LANES, block++) {
        int64_t next = h0 + LANES;
        if (next < heads)
            k_norm_factors(a->dtype, a->in + next * a->in_head_stride, a->in_head_stride,
                           heads - next < LANES ? heads - next : LANES, a->head_dim, a->norm_eps,
                           factors[(block + 1) % 2]);
        posenc_cpu_rope_heads part = *a;
        part.in = a->in + h0 * a->in_head_stride;
        part.out = a->out + h0 * a->out_head_stride;
        part.heads = heads - h0 < LANES ? heads - h0 : LANES;
        part.norm_weights = a->norm_weights + h0 * a->norm_weight_stride;
        part.norm_factors = factors[block % 2];
        rope_heads_normed(&part);
    }
}

static void k_rope_heads(const posenc_cpu_rope_heads *a)
{
    if (a->norm_weights) {
        if (a->norm_factors)
            rope_heads_normed(a);
        else if (!rope_heads_norm_fused(a))
            rope_heads_norm_blocks(a);
        return;
    }
#if defined(TABLE_REGS) && TABLE_REGS > 0
    switch (a->dtype) {
    case DT_F16:
        if (rope_held_dt(a, DT_F16, false))
            return;
        break;
    case DT_BF16:
        if (rope_held_dt(a, DT_BF16, false))
            return;
        break;
    default:
        if (rope_held_dt(a, DT_F32, false))
            return;
        break;
    }
#endif
    if (a->style == POSENC_ROPE_GPTJ) {
        switch (a->dtype) {
        case DT_F16: rope_gptj(a, DT_F16, false); break;
        case DT_BF16: rope_gptj_bf16(a); break; /* no shuffle at all */
        default: rope_gptj(a, DT_F32, false); break;
        }
    } else {
        switch (a->dtype) {
        case DT_F16: rope_neox(a, DT_F16, false); break;
        case DT_BF16:
            if (!rope_neox_bf16(a))
                rope_neox(a, DT_BF16, false);
            break;
        default: rope_neox(a, DT_F32, false); break;
        }
    }
}

#endif
