/* SPDX-License-Identifier: MIT */
/* The CPU kernels, written once over a small vector vocabulary that each variant's translation
 * unit (cpu_kernels_*.c) defines before including this file, with its own target flags:
 *
 *   LANES                       f32 lanes per vector
 *   vf, vi                      LANES floats, LANES 32-bit integers
 *   f_load, f_store             unaligned f32 vectors; *_part(p, [v,] n) for n < LANES lanes
 *   h_load, h_store, b_load, b_store (+ _part)   f16 / bf16 memory <-> f32 lanes, stores
 *                               rounding to nearest even exactly as core/half.c
 *   i_load, i_load_part         u32 vectors
 *   f_set, i_set, f_add, f_mul, f_fma(a,b,c) = a*b+c, f_fms(a,b,c) = a*b-c,
 *   f_fnma(a,b,c) = c-a*b, f_clamp1(v): v limited to [-1, 1]
 *   i_add, i_sub, i_and, i_shl(v,n), i_shr(v,n) (logical; n a constant)
 *   f_from_i (int32 -> float, to nearest), i_from_f (integral float -> int32)
 *   f_xor_bits(v, bits), f_select_odd(q, a, b): a where q is odd, else b
 *   f_swap_pairs(v): [v1 v0 v3 v2 ...]; f_zip(a, b, &lo, &hi): [a0 b0 a1 b1 ...];
 *   f_unzip(a, b, &even, &odd), the inverse of f_zip
 *   f_bits, i_bits (reinterpretations), i_or, i_store(_part), i_select_nan(v, a, b): a where
 *   v is NaN, else b
 *   h_store2(p, v, q, w)        optional (HAVE_H_STORE2): h_store of two vectors, sharing
 *                               the NaN test
 *   h_store_zip_raw(p, s, c)    optional (HAVE_H_STORE_ZIP): f_zip(s, c) stored as f16 with
 *                               h_store_raw (values known not to be NaN)
 *   h_store_raw, h_unordered, h_fix_nans   optional (HAVE_H_FIX_NANS): f16 stores whose NaN
 *                               rewrite is deferred to the end of a head (the variant's file
 *                               says how)
 *   f_unordered(v, w)           optional (HAVE_F_UNORDERED): nonzero when a lane of v or w is
 *                               NaN, for a branch around the NaN handling of conversions
 *   TABLE_REGS                  optional: vector registers RoPE may give to its table (0 or
 *                               undefined: the table stays in memory)
 *   PREFETCH_AHEAD, prefetch_line(p)   optional: RoPE prefetches the lines of each head this
 *                               many bytes ahead of it (undefined: no software prefetch)
 *   KERNEL_TABLE, KERNEL_NAME   the exported table and its POSENC_CPU_VARIANT name
 *   NATIVE_BF16                 defined where b_store is a hardware conversion
 *   b_pack_pairs(even, odd)     optional (HAVE_B_PACK_PAIRS): two vectors to bf16 as
 *                               32-bit lanes, even[i] low and odd[i] high
 *
 * sin/cos (sincos_vec) are the steps of core/angle.c on vectors: the nearest quarter turn and
 * the remainder from the top 32 bits of the exact fixed-point turn, radians as a float-float
 * product, then the same minimax polynomials, evaluated with fused multiply-adds where the
 * variant has them.
 *
 * Error bound. Checked over every one of the 2^30 remainders (quadrants are exact symmetries),
 * sin and cos are each within E = 2 * 2^-24 of exact: 1.92 * 2^-24 for portable C (the same as
 * core/angle.c), 1.58 * 2^-24 with FMA (tests/test_cpu.c keeps a sample of 2^20 angles and the
 * octant edges). Rounding the turn to 32 bits adds at most 2^-33 turn (0.02 * 2^-24). In units
 * of 2^-24, for values of magnitude <= 1 (half an ulp <= 0.5 unit):
 *   - RoPE, out = (a c - b s) * f with the attention factor f folded into c and s (0.5 unit
 *     each): |error| <= |pair| f (sqrt(2) (E + 0.5) + 3 roundings) = 6.6 |rotated pair|;
 *   - a sinusoidal row from an exact anchor a and an exact step b (rotate, or step_values):
 *     sin(a +- b) = sin a cos b +- cos a sin b, whose input errors weigh |cos b| + |sin b| <=
 *     sqrt(2) each: |error| <= 2 sqrt(2) E + 1.5 (roundings) + 0.5 (output_scale) = 7.7
 *     |output_scale|;
 *     every row is one rotation away from exact values, so the bound does not grow along the
 *     table;
 *   - values computed directly (given positions): E + 0.5 = 2.5 |output_scale|;
 * all within the promise of 8; f16/bf16 outputs add their own rounding, as the promise allows.
 */
#ifndef POSENC_CPU_SIMD_H
#define POSENC_CPU_SIMD_H

#include "cpu/cpu_kernels.h"

#include <string.h>

/* The kernels are small functions that must inline into their loops to be fast: the lane
 * counts, dtypes and modes they take are constants there. Where the build does not optimize,
 * or instruments every access (ASan, TSan), forcing that only multiplies the code, and the
 * compiler is left to choose: GCC at -O0 made 5 MB of k_sinusoidal_rows from its 48 instances,
 * and each kernel file took 40-70 s to compile at -O0 and 75 s with ASan, against 21 s at -O3,
 * whose code this leaves as it was. */
#if defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define CPU_INSTRUMENTED 1
#  endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define CPU_INSTRUMENTED 1
#endif
#if defined(_MSC_VER) && !defined(__clang__)
#  define CPU_INLINE static __forceinline
#  define CPU_INLINE_ALWAYS static __forceinline
#else
#  define CPU_INLINE_ALWAYS static inline __attribute__((always_inline))
#  if !defined(__OPTIMIZE__) || defined(CPU_INSTRUMENTED)
#    define CPU_INLINE static inline
#  else
#    define CPU_INLINE CPU_INLINE_ALWAYS
#  endif
#endif
/* CPU_INLINE_ALWAYS is for the few whose arguments must be constants where they run in every
 * build: the held kernels' chunk sizes, which size their loops over arrays of registers (out
 * of line, GCC takes the arrays' unloaded entries for maybe-used uninitialized). */

/* 2*pi/2^32 as a float-float (core/angle.c). */
#define RADIANS_PER_UNIT_HI 0x1.921fb6p-30f
#define RADIANS_PER_UNIT_LO -0x1.777a5cp-55f
/* The minimax coefficients of core/angle.c (Cephes sinf/cosf on [-pi/4, pi/4]). */
#define SIN_C1 -1.6666654611e-1f
#define SIN_C2 8.3321608736e-3f
#define SIN_C3 -1.9515295891e-4f
#define COS_C1 4.166664568298827e-2f
#define COS_C2 -1.388731625493765e-3f
#define COS_C3 2.443315711809948e-5f

#define DT_F32 POSENC_DTYPE_F32
#define DT_F16 POSENC_DTYPE_F16
#define DT_BF16 POSENC_DTYPE_BF16

/* ---- element access by dtype; `dt` is a constant after inlining, so the branches fold ---- */

CPU_INLINE size_t dt_size(posenc_dtype dt) { return dt == DT_F32 ? 4 : 2; }

CPU_INLINE vf load_dt(posenc_dtype dt, const uint8_t *p)
{
    if (dt == DT_F16)
        return h_load(p);
    if (dt == DT_BF16)
        return b_load(p);
    return f_load(p);
}

CPU_INLINE vf load_dt_part(posenc_dtype dt, const uint8_t *p, size_t n)
{
    if (dt == DT_F16)
        return h_load_part(p, n);
    if (dt == DT_BF16)
        return b_load_part(p, n);
    return f_load_part(p, n);
}

CPU_INLINE void store_dt(posenc_dtype dt, uint8_t *p, vf v)
{
    if (dt == DT_F16)
        h_store(p, v);
    else if (dt == DT_BF16)
        b_store(p, v);
    else
        f_store(p, v);
}

/* Two full vectors. */
CPU_INLINE void store_dt2(posenc_dtype dt, uint8_t *p, vf v, uint8_t *q, vf w)
{
#if defined(HAVE_H_STORE2)
    if (dt == DT_F16) {
        h_store2(p, v, q, w);
        return;
    }
#endif
    store_dt(dt, p, v);
    store_dt(dt, q, w);
}

/* Two full vectors of a head whose f16 NaNs are rewritten at its end (fix_nans_dt), when the
 * variant can: a mask accumulated in `nan` instead of a test and branch per store. */
CPU_INLINE void store_dt2_deferred(posenc_dtype dt, uint8_t *p, vf v, uint8_t *q, vf w,
                                   unsigned *nan)
{
#if defined(HAVE_H_FIX_NANS)
    if (dt == DT_F16) {
        *nan |= h_unordered(v, w);
        h_store_raw(p, v);
        h_store_raw(q, w);
        return;
    }
#endif
    (void)nan;
    store_dt2(dt, p, v, q, w);
}

/* The end of a head written with store_dt2_deferred: `n` values (a multiple of LANES). */
CPU_INLINE void fix_nans_dt(posenc_dtype dt, uint8_t *p, size_t n, unsigned nan)
{
#if defined(HAVE_H_FIX_NANS)
    if (dt == DT_F16 && nan)
        h_fix_nans(p, n);
#else
    (void)dt;
    (void)p;
    (void)n;
    (void)nan;
#endif
}

CPU_INLINE void store_dt_part(posenc_dtype dt, uint8_t *p, vf v, size_t n)
{
    if (dt == DT_F16)
        h_store_part(p, v, n);
    else if (dt == DT_BF16)
        b_store_part(p, v, n);
    else
        f_store_part(p, v, n);
}

/* ---- sin and cos ---- */

CPU_INLINE void sincos_vec(vi turns_hi, vf *sin_out, vf *cos_out)
{
    /* Nearest quarter turn q, and the remainder in [-2^29, 2^29) units of 2^-32 turn. */
    vi q = i_shr(i_add(turns_hi, i_set(1u << 29)), 30);
    vi top = i_sub(turns_hi, i_shl(q, 30));
    vf hi = f_from_i(top);
    vf lo = f_from_i(i_sub(top, i_from_f(hi))); /* exact: top = hi + lo */
    vf x = f_fma(hi, f_set(RADIANS_PER_UNIT_HI),
                 f_fma(hi, f_set(RADIANS_PER_UNIT_LO), f_mul(lo, f_set(RADIANS_PER_UNIT_HI))));
    vf z = f_mul(x, x);
    vf ps = f_fma(z, f_set(SIN_C3), f_set(SIN_C2));
    ps = f_fma(z, ps, f_set(SIN_C1));
    vf s = f_fma(f_mul(x, z), ps, x);
    vf pc = f_fma(z, f_set(COS_C3), f_set(COS_C2));
    pc = f_fma(z, pc, f_set(COS_C1));
    vf c = f_fma(f_mul(z, z), pc, f_fma(z, f_set(-0.5f), f_set(1.0f)));
    /* Quadrant q: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s). */
    vi sign = i_set(0x80000000u);
    *sin_out = f_xor_bits(f_select_odd(q, c, s), i_and(i_shl(q, 30), sign));
    *cos_out = f_xor_bits(f_select_odd(q, s, c), i_and(i_shl(i_add(q, i_set(1)), 30), sign));
}

static void k_sincos(const uint32_t *turns_hi, size_t count, float sin_scale, float cos_scale,
                     float *sin_out, float *cos_out)
{
    vf ss = f_set(sin_scale), cs = f_set(cos_scale);
    size_t i = 0;
    for (; i + LANES <= count; i += LANES) {
        vf s, c;
        sincos_vec(i_load(turns_hi + i), &s, &c);
        f_store(sin_out + i, f_mul(s, ss));
        f_store(cos_out + i, f_mul(c, cs));
    }
    if (i < count) {
        vf s, c;
        sincos_vec(i_load_part(turns_hi + i, count - i), &s, &c);
        f_store_part(sin_out + i, f_mul(s, ss), count - i);
        f_store_part(cos_out + i, f_mul(c, cs), count - i);
    }
}

/* posenc_cpu_turns_hi_int (cpu_internal.h), which this file does not include: p * frac
 * modulo 2^64, rounded to its top 32 bits. Where the variant multiplies 64-bit lanes
 * (HAVE_TURNS_INT8: eight at a time), a few vector instructions per eight frequencies where
 * the scalar loop takes six per frequency: RoPE runs it once per token, and for f16 with
 * rotary_dim 128 it was about a third of the time a token spends outside rope_heads. */
static void k_turns_int(int32_t position, const uint64_t *fracs, uint32_t count,
                        uint32_t *turns_hi)
{
    uint32_t j = 0;
#if defined(HAVE_TURNS_INT8)
    for (; j + 8 <= count; j += 8)
        turns_int8(position, fracs + j, turns_hi + j);
#endif
    for (; j < count; j++) {
        uint64_t turns = (uint64_t)(int64_t)position * fracs[j];
        turns_hi[j] = (uint32_t)((turns + (UINT64_C(1) << 31)) >> 32);
    }
}

/* posenc_cpu_turns_hi (cpu_internal.h) with 32x32-bit products only: with the position
 * P = ph 2^32 + pl (ph signed, pl unsigned) and frac = fh 2^32 + fl, bits 32..95 of P * frac are
 * ph * frac + pl * fh + (pl * fl) / 2^32 modulo 2^64, the first term's low 32 bits zero, so
 * nothing carries across. The whole turns add pl * int_turns, times 2^32. Where the variant
 * has it (HAVE_TURNS_FIXED8), eight frequencies at a time: the scalar loop takes four
 * multiplies per frequency, and a table of float positions (diffusion timesteps) spent most of
 * its time there. */
static void k_turns_fixed(int64_t position, const uint64_t *fracs, const uint32_t *int_turns,
                          uint32_t count, uint32_t *turns_hi)
{
    const int32_t ph = (int32_t)(uint32_t)((uint64_t)position >> 32);
    const uint32_t pl = (uint32_t)(uint64_t)position;
    uint32_t j = 0;
#if defined(HAVE_TURNS_FIXED8)
    for (; j + 8 <= count; j += 8)
        turns_fixed8(ph, pl, fracs + j, int_turns + j, turns_hi + j);
#endif
    for (; j < count; j++) {
        const uint64_t f = fracs[j];
        uint64_t turns = (uint64_t)(int64_t)ph * f + (uint64_t)pl * (f >> 32) +
                         (((uint64_t)pl * (uint32_t)f) >> 32) +
                         ((uint64_t)(pl * int_turns[j]) << 32);
        turns_hi[j] = (uint32_t)((turns + (UINT64_C(1) << 31)) >> 32);
    }
}

CPU_INLINE void rotate_vec(vf sa, vf ca, vf sb, vf cb, vf *s, vf *c)
{
    *s = f_fma(sa, cb, f_mul(ca, sb));
    *c = f_fms(ca, cb, f_mul(sa, sb));
}

static void k_rotate(const float *sin_a, const float *cos_a, const float *sin_b,
                     const float *cos_b, size_t count, float *sin_out, float *cos_out)
{
    size_t i = 0;
    vf s, c;
    for (; i + LANES <= count; i += LANES) {
        rotate_vec(f_load(sin_a + i), f_load(cos_a + i), f_load(sin_b + i), f_load(cos_b + i), &s,
                   &c);
        f_store(sin_out + i, s);
        f_store(cos_out + i, c);
    }
    if (i < count) {
        size_t n = count - i;
        rotate_vec(f_load_part(sin_a + i, n), f_load_part(cos_a + i, n),
                   f_load_part(sin_b + i, n), f_load_part(cos_b + i, n), &s, &c);
        f_store_part(sin_out + i, s, n);
        f_store_part(cos_out + i, c, n);
    }
}

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

/* One NeoX vector of a head: values at j of both halves (`half_bytes` apart), table c, s. */
CPU_INLINE void neox_vector(posenc_dtype dt, const uint8_t *in, uint8_t *out, size_t half_bytes,
                            vf c, vf s, unsigned *nan)
{
    vf x0 = load_dt(dt, in), x1 = load_dt(dt, in + half_bytes);
    store_dt2_deferred(dt, out, f_fms(x0, c, f_mul(x1, s)), out + half_bytes,
                       f_fma(x0, s, f_mul(x1, c)), nan);
}

/* The rest of a NeoX head after its `full` full vectors: their NaNs, the partial vector, and the
 * dims after rotary_dim when out of place. */
CPU_INLINE void neox_head_end(const posenc_cpu_rope_heads *a, posenc_dtype dt, const uint8_t *in,
                              uint8_t *out, uint32_t full, unsigned nan)
{
    const size_t es = dt_size(dt);
    const uint32_t half = a->rotary_dim / 2;
    const float *ct = a->table, *st = a->table + half;
    fix_nans_dt(dt, out, full, nan);
    fix_nans_dt(dt, out + half * es, full, nan);
    if (full < half) {
        size_t n = half - full;
        const uint8_t *i0 = in + full * es, *i1 = i0 + half * es;
        vf x0 = load_dt_part(dt, i0, n), x1 = load_dt_part(dt, i1, n);
        vf c = f_load_part(ct + full, n), s = f_load_part(st + full, n);
        store_dt_part(dt, out + full * es, f_fms(x0, c, f_mul(x1, s)), n);
        store_dt_part(dt, out + (half + full) * es, f_fma(x0, s, f_mul(x1, c)), n);
    }
    if (a->copy_rest)
        memcpy(out + a->rotary_dim * es, in + a->rotary_dim * es,
               (a->head_dim - a->rotary_dim) * es);
}

/* Two heads at a time, so that each table vector loaded serves both. */
CPU_INLINE void rope_neox(const posenc_cpu_rope_heads *a, posenc_dtype dt)
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
        prefetch_ahead(a, in, 2 * half_bytes);
        prefetch_ahead(a, in1, 2 * half_bytes);
        for (uint32_t j = 0; j < full; j += LANES) {
            vf c = f_load(ct + j), s = f_load(st + j);
            neox_vector(dt, in + j * es, out + j * es, half_bytes, c, s, &nan);
            neox_vector(dt, in1 + j * es, out1 + j * es, half_bytes, c, s, &nan1);
        }
        neox_head_end(a, dt, in, out, full, nan);
        neox_head_end(a, dt, in1, out1, full, nan1);
    }
    if (h < heads) {
        const uint8_t *in = in0 + h * in_stride;
        uint8_t *out = out0 + h * out_stride;
        unsigned nan = 0;
        prefetch_ahead(a, in, 2 * half_bytes);
        for (uint32_t j = 0; j < full; j += LANES)
            neox_vector(dt, in + j * es, out + j * es, half_bytes, f_load(ct + j),
                        f_load(st + j), &nan);
        neox_head_end(a, dt, in, out, full, nan);
    }
}

/* Two GPT-J vectors of a head from `in` (values i .. i + 2 LANES), table vectors c0, s0 and
 * c1, s1. */
CPU_INLINE void gptj_vectors(posenc_dtype dt, const uint8_t *in, uint8_t *out, vf c0, vf s0,
                             vf c1, vf s1, unsigned *nan)
{
    const size_t bytes = LANES * dt_size(dt);
    vf x = load_dt(dt, in), y = load_dt(dt, in + bytes);
    store_dt2_deferred(dt, out, f_fma(f_swap_pairs(x), s0, f_mul(x, c0)), out + bytes,
                       f_fma(f_swap_pairs(y), s1, f_mul(y, c1)), nan);
}

/* The rest of a GPT-J head after its first `done` values (a multiple of 2 LANES): their NaNs,
 * the last vectors, and the dims after rotary_dim when out of place. */
CPU_INLINE void gptj_head_end(const posenc_cpu_rope_heads *a, posenc_dtype dt, const uint8_t *in,
                              uint8_t *out, uint32_t done, unsigned nan)
{
    const size_t es = dt_size(dt);
    const uint32_t rot = a->rotary_dim;
    const float *ct = a->table, *st = a->table + rot;
    uint32_t i = done;
    fix_nans_dt(dt, out, done, nan);
    for (; i + LANES <= rot; i += LANES) {
        vf x = load_dt(dt, in + i * es);
        store_dt(dt, out + i * es,
                 f_fma(f_swap_pairs(x), f_load(st + i), f_mul(x, f_load(ct + i))));
    }
    if (i < rot) { /* an even count: pairs never straddle the tail */
        size_t n = rot - i;
        vf x = load_dt_part(dt, in + i * es, n);
        store_dt_part(dt, out + i * es,
                      f_fma(f_swap_pairs(x), f_load_part(st + i, n),
                            f_mul(x, f_load_part(ct + i, n))),
                      n);
    }
    if (a->copy_rest)
        memcpy(out + rot * es, in + rot * es, (a->head_dim - rot) * es);
}

/* One head at a time: two heads per table load as in rope_neox made in-place prefill slower
 * from DRAM (f32 at 0.68 of the copy's speed where one head runs at 0.9 on AVX2 Zen 3), the
 * core time saved going to a worse access pattern. */
CPU_INLINE void rope_gptj(const posenc_cpu_rope_heads *a, posenc_dtype dt)
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
        prefetch_ahead(a, in, rot * es);
        for (uint32_t i = 0; i < done; i += 2 * LANES)
            gptj_vectors(dt, in + i * es, out + i * es, f_load(ct + i), f_load(st + i),
                         f_load(ct + i + LANES), f_load(st + i + LANES), &nan);
        gptj_head_end(a, dt, in, out, done, nan);
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

/* The bits of a non-NaN f32 with the rounding increment to bf16 added: rounded to nearest
 * even (core/half.c) in the high half of each 32-bit lane, the low half to be dropped. */
CPU_INLINE vi bf16_rounded(vf v)
{
    vi u = f_bits(v);
    return i_add(u, i_add(i_and(i_shr(u, 16), i_set(1)), i_set(0x7fff)));
}

/* f32 -> bf16 rounded to nearest even on the bits (core/half.c), left in the high half of
 * each 32-bit lane with the low half zero; NaN keeps its top bits and becomes quiet. */
CPU_INLINE vi bf16_high(vf v)
{
    vi r = i_select_nan(v, i_or(f_bits(v), i_set(0x00400000)), bf16_rounded(v));
    return i_and(r, i_set(0xffff0000u));
}

/* Two vectors to bf16 pairs: even[i] in the low half of lane i, odd[i] in the high half.
 * Where the variant tests two vectors for NaN at once, vectors without one (nearly all) take
 * the rounding alone, without a select per vector (on AVX2, 13 instructions where the exact
 * path takes 18). */
CPU_INLINE vi bf16_pairs(vf even, vf odd)
{
#if defined(HAVE_B_PACK_PAIRS)
    return b_pack_pairs(even, odd);
#else
#  if defined(HAVE_F_UNORDERED)
    if (!f_unordered(even, odd))
        return i_or(i_shr(bf16_rounded(even), 16),
                    i_and(bf16_rounded(odd), i_set(0xffff0000u)));
#  endif
    return i_or(i_shr(bf16_high(even), 16), bf16_high(odd));
#endif
}

/* ---- RoPE with the token's table held in registers ----
 *
 * The loops above read the table from memory for every vector: the cos and sin of a NeoX pair
 * twice each, as operands of two instructions. With the data, that is three loads per vector
 * where a copy makes one, and AVX-512 on AMD's Zen 4 loads one 64-byte vector per cycle: the
 * loads, not the arithmetic, set the pace in cache. When the table fits in TABLE_REGS
 * registers (rotary_dim 128 on AVX-512: 8 for NeoX, 16 for GPT-J), it is loaded once per call
 * and each head costs its own loads and stores only. A larger table is held a chunk at a time,
 * each chunk rotating its dims in every head before the next is loaded: each line of a head is
 * still touched once, but the heads are walked once per chunk, which the hardware prefetchers
 * follow poorly, so only for tensors in cache (not a->streaming). On AVX2 on Zen 3 that made a
 * decode step (rotary_dim 128) 10-20 % faster for f32 and f16, NeoX and GPT-J alike, and
 * in-place prefill from memory 25-60 % slower. `nv` (vectors per half table for NeoX, per
 * table for GPT-J, in the chunk from vector `first` on) is a constant in each instance, so the
 * loops over it unroll and the arrays stay in registers. */
#if defined(TABLE_REGS) && TABLE_REGS > 0

#if TABLE_REGS != 8 && TABLE_REGS != 16
#  error "TABLE_REGS: 8 or 16 (the chunk sizes below)"
#endif

#if defined(__GNUC__) || defined(__clang__)
#  define UNROLL_ALL _Pragma("GCC unroll 16")
#else
#  define UNROLL_ALL
#endif

CPU_INLINE_ALWAYS void rope_neox_held(const posenc_cpu_rope_heads *a, posenc_dtype dt,
                                      const uint32_t nv, const uint32_t first)
{
    const size_t es = dt_size(dt);
    const uint32_t half = a->rotary_dim / 2;
    const size_t head_bytes = a->rotary_dim * es, first_bytes = (size_t)first * LANES * es;
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
        UNROLL_ALL
        for (uint32_t k = 0; k < nv; k++) {
            size_t at = k * LANES * es, bt = at + half * es;
            vf x0 = load_dt(dt, in + at), x1 = load_dt(dt, in + bt);
            store_dt2_deferred(dt, out + at, f_fms(x0, c[k], f_mul(x1, s[k])), out + bt,
                               f_fma(x0, s[k], f_mul(x1, c[k])), &nan);
        }
        fix_nans_dt(dt, out, nv * LANES, nan);
        fix_nans_dt(dt, out + half * es, nv * LANES, nan);
        if (last && a->copy_rest)
            memcpy(out - first_bytes + head_bytes, in - first_bytes + head_bytes,
                   (a->head_dim - a->rotary_dim) * es);
    }
}

CPU_INLINE_ALWAYS void rope_gptj_held(const posenc_cpu_rope_heads *a, posenc_dtype dt,
                                      const uint32_t nv, const uint32_t first)
{
    const size_t es = dt_size(dt);
    const uint32_t rot = a->rotary_dim;
    const size_t head_bytes = rot * es, first_bytes = (size_t)first * LANES * es;
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
        UNROLL_ALL
        for (uint32_t k = 0; k + 1 < nv; k += 2) {
            size_t at = k * LANES * es, bt = at + LANES * es;
            vf x = load_dt(dt, in + at), y = load_dt(dt, in + bt);
            store_dt2_deferred(dt, out + at, f_fma(f_swap_pairs(x), s[k], f_mul(x, c[k])),
                               out + bt, f_fma(f_swap_pairs(y), s[k + 1], f_mul(y, c[k + 1])),
                               &nan);
        }
        if (nv % 2) {
            size_t at = (nv - 1) * LANES * es;
            vf x = load_dt(dt, in + at);
            store_dt(dt, out + at, f_fma(f_swap_pairs(x), s[nv - 1], f_mul(x, c[nv - 1])));
        }
        fix_nans_dt(dt, out, (size_t)(nv - nv % 2) * LANES, nan);
        if (last && a->copy_rest)
            memcpy(out - first_bytes + head_bytes, in - first_bytes + head_bytes,
                   (a->head_dim - rot) * es);
    }
}

/* rope_gptj_bf16 (below) with its pair table in registers: `nv` vectors of cos and of sin. */
CPU_INLINE_ALWAYS void rope_gptj_bf16_held(const posenc_cpu_rope_heads *a, posenc_dtype dt,
                                           const uint32_t nv, const uint32_t first)
{
    (void)dt;
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
                                           const uint32_t nv, const uint32_t first)
{
    (void)dt;
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
    case n: held(a, dt, n, first); break;
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
CPU_INLINE bool rope_held_dt(const posenc_cpu_rope_heads *a, posenc_dtype dt)
{
    const bool neox = a->style == POSENC_ROPE_NEOX;
    if (neox && dt == DT_BF16 && a->rotary_dim % (4 * LANES) == 0) {
        const uint32_t blocks = a->rotary_dim / (4 * LANES);
        if (blocks > TABLE_REGS / 4 && a->streaming)
            return false;
        HELD_CHUNKS(rope_neox_bf16_held, HELD_QUARTER, blocks, TABLE_REGS / 4)
        return true;
    }
    const bool pairs = !neox && dt == DT_BF16; /* one cos and one sin per pair */
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

static void k_rope_heads(const posenc_cpu_rope_heads *a)
{
#if defined(TABLE_REGS) && TABLE_REGS > 0
    switch (a->dtype) {
    case DT_F16:
        if (rope_held_dt(a, DT_F16))
            return;
        break;
    case DT_BF16:
        if (rope_held_dt(a, DT_BF16))
            return;
        break;
    default:
        if (rope_held_dt(a, DT_F32))
            return;
        break;
    }
#endif
    if (a->style == POSENC_ROPE_GPTJ) {
        switch (a->dtype) {
        case DT_F16: rope_gptj(a, DT_F16); break;
        case DT_BF16: rope_gptj_bf16(a); break; /* no shuffle at all */
        default: rope_gptj(a, DT_F32); break;
        }
    } else {
        switch (a->dtype) {
        case DT_F16: rope_neox(a, DT_F16); break;
        case DT_BF16:
            if (!rope_neox_bf16(a))
                rope_neox(a, DT_BF16);
            break;
        default: rope_neox(a, DT_F32); break;
        }
    }
}

/* ---- sinusoidal rows ---- */

/* output_scale * pe (+ input_scale * x at element `at`), for n lanes (n == LANES: full);
 * `finite`: the caller knows the values are not NaN. */
CPU_INLINE void emit(posenc_dtype dt, bool add, bool scaled, bool finite, uint8_t *out,
                     const uint8_t *x, size_t at, vf pe, vf os, vf is, size_t n)
{
    const size_t es = dt_size(dt);
    vf v = scaled ? f_mul(pe, os) : pe;
    (void)finite;
    if (n == LANES) {
        if (add)
            v = f_fma(load_dt(dt, x + at * es), is, v);
#if defined(HAVE_H_FIX_NANS)
        /* `finite`: no NaN to rewrite (stepped rows without x: finite sin/cos times a finite
         * scale; rows at given positions may be NaN). */
        if (dt == DT_F16 && finite) {
            h_store_raw(out + at * es, v);
            return;
        }
#endif
        store_dt(dt, out + at * es, v);
    } else {
        if (add)
            v = f_fma(load_dt_part(dt, x + at * es, n), is, v);
        store_dt_part(dt, out + at * es, v, n);
    }
}

/* Angle addition at frequencies i .. i + n (n lanes) for step k shares two rounded products
 * between the rows a + k and a - k: with p = sin_a cos_k and q = cos_a cos_k,
 *   sin/cos(a + k) = p + cos_a sin_k, q - sin_a sin_k;  sin/cos(a - k) = p - cos_a sin_k,
 *   q + sin_a sin_k,
 * each one fused multiply-add, so both rows cost six operations where two rotations cost
 * eight. A row is computed the same way whether its mirror is written or not, so its values do
 * not depend on how the rows were grouped or split over threads. */
CPU_INLINE void step_values(vf sa, vf ca, const float *step_cos, const float *step_sin, size_t n,
                            vf *sb, vf *p, vf *q)
{
    vf cb = n == LANES ? f_load(step_cos) : f_load_part(step_cos, n);
    *sb = n == LANES ? f_load(step_sin) : f_load_part(step_sin, n);
    *p = f_mul(sa, cb);
    *q = f_mul(ca, cb);
}

/* A stepped value limited to [-1, 1]: rounding may take a value of magnitude 1 (cos 0, for a
 * row one step from its anchor) just past 1, by at most the error bound (8 * 2^-24), which
 * the limit only brings closer. A table written as f16 or bf16 without scale or input needs
 * no limit: such a value rounds to +-1 in either type (half an ulp above 1 is 2^-11 for f16),
 * the same bits as the limited value. */
CPU_INLINE vf limit1(posenc_dtype dt, bool add, bool scaled, vf v)
{
    return dt == DT_F32 || add || scaled ? f_clamp1(v) : v;
}

/* Writes frequencies i .. i + n of one row from its values, placed by the layout. */
CPU_INLINE void place_values(posenc_dtype dt, bool add, bool scaled, bool finite, bool interleaved,
                             bool sin_first, uint32_t half, uint8_t *out, const uint8_t *x,
                             uint32_t i, size_t n, vf s, vf c, vf os, vf is)
{
    if (interleaved) {
#if defined(HAVE_H_STORE_ZIP)
        if (dt == DT_F16 && finite && !add && n == LANES) { /* finite: see emit */
            if (scaled) { /* the same products as emit's, taken before the zip */
                s = f_mul(s, os);
                c = f_mul(c, os);
            }
            h_store_zip_raw(out + 4 * (size_t)i, s, c);
            return;
        }
#endif
        vf lo, hi;
        f_zip(s, c, &lo, &hi);
        size_t values = 2 * n;
        emit(dt, add, scaled, finite, out, x, 2 * (size_t)i, lo, os, is,
             values < LANES ? values : LANES);
        if (values > LANES)
            emit(dt, add, scaled, finite, out, x, 2 * (size_t)i + LANES, hi, os, is,
                 values - LANES);
    } else {
        emit(dt, add, scaled, finite, out, x, i, sin_first ? s : c, os, is, n);
        emit(dt, add, scaled, finite, out, x, (size_t)half + i, sin_first ? c : s, os, is, n);
    }
}

/* What a call writes: one row from its own values, or for each step the row after the anchor,
 * the row before it, or both. A constant in each instance of the loops below. */
#define ROWS_DIRECT 0
#define ROWS_AFTER 1
#define ROWS_BEFORE 2
#define ROWS_BOTH 3

/* Frequencies i .. i + n of every row (n == LANES: a full vector, a constant after inlining, so
 * the full-vector loop tests no lane count): the anchor's own values (ROWS_DIRECT), or for each
 * step its row after the anchor (at out) and/or its row before (at back_out). */
CPU_INLINE void sinusoidal_column(posenc_dtype dt, bool add, bool scaled, int mode,
                                  bool interleaved, bool sin_first, uint32_t half, uint32_t rows,
                                  const float *sin_a, const float *cos_a, const float *steps,
                                  size_t step_stride, size_t step_sin_offset, uint8_t *out,
                                  uint8_t *back_out, int64_t out_stride, const uint8_t *x,
                                  const uint8_t *back_x, int64_t x_stride, uint32_t i, size_t n,
                                  vf os, vf is)
{
    vf sa, ca;
    if (n == LANES) {
        sa = f_load(sin_a + i);
        ca = f_load(cos_a + i);
    } else {
        sa = f_load_part(sin_a + i, n);
        ca = f_load_part(cos_a + i, n);
    }
    if (mode == ROWS_DIRECT) {
        place_values(dt, add, scaled, false, interleaved, sin_first, half, out, x, i, n, sa, ca,
                     os, is);
        return;
    }
    for (uint32_t r = 0; r < rows; r++) {
        const float *step_cos = steps + r * step_stride + i;
        vf sb, p, q;
        step_values(sa, ca, step_cos, step_cos + step_sin_offset, n, &sb, &p, &q);
        if (mode & ROWS_AFTER)
            place_values(dt, add, scaled, !add, interleaved, sin_first, half, out + r * out_stride,
                         add ? x + r * x_stride : NULL, i, n,
                         limit1(dt, add, scaled, f_fma(ca, sb, p)),
                         limit1(dt, add, scaled, f_fnma(sa, sb, q)), os, is);
        if (mode & ROWS_BEFORE)
            place_values(dt, add, scaled, !add, interleaved, sin_first, half,
                         back_out - r * out_stride, add ? back_x - r * x_stride : NULL, i, n,
                         limit1(dt, add, scaled, f_fnma(ca, sb, p)),
                         limit1(dt, add, scaled, f_fma(sa, sb, q)), os, is);
    }
}

/* One step k at frequencies i .. i + LANES: the rows a + k at `out` and a - k at `back` (x and
 * back_x: their inputs, when adding). */
CPU_INLINE void step_both(posenc_dtype dt, bool add, bool scaled, bool interleaved,
                          bool sin_first, uint32_t half, vf sa, vf ca, const float *step_cos,
                          const float *step_sin, uint8_t *out, uint8_t *back, const uint8_t *x,
                          const uint8_t *back_x, vf os, vf is)
{
    vf sb, p, q;
    step_values(sa, ca, step_cos, step_sin, LANES, &sb, &p, &q);
    place_values(dt, add, scaled, !add, interleaved, sin_first, half, out, x, 0, LANES,
                 limit1(dt, add, scaled, f_fma(ca, sb, p)),
                 limit1(dt, add, scaled, f_fnma(sa, sb, q)), os, is);
    place_values(dt, add, scaled, !add, interleaved, sin_first, half, back, back_x, 0, LANES,
                 limit1(dt, add, scaled, f_fnma(ca, sb, p)),
                 limit1(dt, add, scaled, f_fma(sa, sb, q)), os, is);
}

/* Steps written after and before the anchor, two at a time: every group of a table's block but
 * those at its edges (cpu_sinusoidal.c). For each pair of steps, a loop over the frequencies
 * with the layout a constant and ten pointers, where sinusoidal_column loops over the steps
 * inside the loop over frequencies with the layout tested in it, and runs out of general
 * registers for its pointers (spilled to vector registers and the stack, reloaded in the
 * loop). Two steps make four rows written side by side: in L3 the stores of four rows at once
 * keep more lines in flight than two (one core, 4096 x 1024 f32: 0.75 of the copy's speed
 * with four, 0.63 with two), and the anchor's values are loaded once for both. Returns the
 * frequencies done (the full vectors); the values are those of sinusoidal_column. */
CPU_INLINE uint32_t sinusoidal_steps_both(const posenc_cpu_sinusoidal_rows *a, posenc_dtype dt,
                                          bool add, bool scaled, bool interleaved, vf os, vf is)
{
    const uint32_t half = a->half, rows = a->rows, full = half - half % LANES;
    const size_t es = dt_size(dt);
    const bool sin_first = a->layout == POSENC_SINUSOIDAL_SIN_COS;
    const float *const sin_a = a->sin, *const cos_a = a->cos;
    const size_t step_stride = a->step_stride, step_sin_offset = a->step_sin_offset;
    const float *const steps = a->steps + a->first_step * step_stride;
    const int64_t out_stride = a->out_row_stride, x_stride = a->x_row_stride;
    uint32_t r = 0;
    for (; r + 2 <= rows; r += 2) {
        const float *const c0 = steps + r * step_stride, *const s0 = c0 + step_sin_offset;
        const float *const c1 = c0 + step_stride, *const s1 = s0 + step_stride;
        uint8_t *const o0 = a->out + r * out_stride, *const o1 = o0 + out_stride;
        uint8_t *const b0 = a->back_out - r * out_stride, *const b1 = b0 - out_stride;
        const uint8_t *const x0 = add ? a->x + r * x_stride : NULL;
        const uint8_t *const x1 = add ? x0 + x_stride : NULL;
        const uint8_t *const bx0 = add ? a->back_x - r * x_stride : NULL;
        const uint8_t *const bx1 = add ? bx0 - x_stride : NULL;
        for (size_t i = 0; i < full; i += LANES) {
            const vf sa = f_load(sin_a + i), ca = f_load(cos_a + i);
            const size_t at = (interleaved ? 2 : 1) * i * es; /* bytes */
            step_both(dt, add, scaled, interleaved, sin_first, half, sa, ca, c0 + i, s0 + i,
                      o0 + at, b0 + at, add ? x0 + at : NULL, add ? bx0 + at : NULL, os, is);
            step_both(dt, add, scaled, interleaved, sin_first, half, sa, ca, c1 + i, s1 + i,
                      o1 + at, b1 + at, add ? x1 + at : NULL, add ? bx1 + at : NULL, os, is);
        }
    }
    if (r < rows) {
        const float *const c = steps + r * step_stride, *const s = c + step_sin_offset;
        uint8_t *const o = a->out + r * out_stride, *const b = a->back_out - r * out_stride;
        const uint8_t *const x = add ? a->x + r * x_stride : NULL;
        const uint8_t *const bx = add ? a->back_x - r * x_stride : NULL;
        for (size_t i = 0; i < full; i += LANES) {
            const size_t at = (interleaved ? 2 : 1) * i * es;
            step_both(dt, add, scaled, interleaved, sin_first, half, f_load(sin_a + i),
                      f_load(cos_a + i), c + i, s + i, o + at, b + at, add ? x + at : NULL,
                      add ? bx + at : NULL, os, is);
        }
    }
    return full;
}

/* Every field is copied into a local first: the vector stores may alias anything, which would
 * make the compiler reload the fields after each store. */
CPU_INLINE void sinusoidal_rows(const posenc_cpu_sinusoidal_rows *a, posenc_dtype dt, bool add,
                                bool scaled, int mode)
{
    const uint32_t half = a->half, rows = mode == ROWS_DIRECT ? 1 : a->rows;
    const vf os = f_set(a->output_scale), is = f_set(a->input_scale);
    const bool interleaved = a->layout == POSENC_SINUSOIDAL_INTERLEAVED;
    const bool sin_first = a->layout == POSENC_SINUSOIDAL_SIN_COS;
    const float *const sin_a = a->sin, *const cos_a = a->cos;
    const size_t step_stride = a->step_stride, step_sin_offset = a->step_sin_offset;
    const float *const steps = mode != ROWS_DIRECT ? a->steps + a->first_step * step_stride : NULL;
    uint8_t *const out = a->out, *const back_out = a->back_out;
    const uint8_t *const x = a->x, *const back_x = a->back_x;
    const int64_t out_stride = a->out_row_stride, x_stride = a->x_row_stride;
    uint32_t i = 0;
    if (mode == ROWS_BOTH)
        i = interleaved ? sinusoidal_steps_both(a, dt, add, scaled, true, os, is)
                        : sinusoidal_steps_both(a, dt, add, scaled, false, os, is);
    for (; i + LANES <= half; i += LANES)
        sinusoidal_column(dt, add, scaled, mode, interleaved, sin_first, half, rows, sin_a, cos_a,
                          steps, step_stride, step_sin_offset, out, back_out, out_stride, x,
                          back_x, x_stride, i, LANES, os, is);
    if (i < half)
        sinusoidal_column(dt, add, scaled, mode, interleaved, sin_first, half, rows, sin_a, cos_a,
                          steps, step_stride, step_sin_offset, out, back_out, out_stride, x,
                          back_x, x_stride, i, half - i, os, is);
    if (a->d_model > 2 * (int64_t)half) { /* odd d_model: a zero column */
        for (uint32_t r = 0; r < rows; r++) {
            if (mode == ROWS_DIRECT || (mode & ROWS_AFTER))
                emit(dt, add, scaled, !add, out + r * out_stride, add ? x + r * x_stride : NULL,
                     2 * (size_t)half, f_set(0.0f), os, is, 1);
            if (mode & ROWS_BEFORE)
                emit(dt, add, scaled, !add, back_out - r * out_stride,
                     add ? back_x - r * x_stride : NULL, 2 * (size_t)half, f_set(0.0f), os, is,
                     1);
        }
    }
}

/* One instance per combination, so that the loops test none of them. */
#define ROWS_CASES(add, scaled)                                                               \
    switch (mode) {                                                                           \
    case ROWS_DIRECT: sinusoidal_rows(a, dt, add, scaled, ROWS_DIRECT); break;                \
    case ROWS_AFTER: sinusoidal_rows(a, dt, add, scaled, ROWS_AFTER); break;                  \
    case ROWS_BEFORE: sinusoidal_rows(a, dt, add, scaled, ROWS_BEFORE); break;                \
    default: sinusoidal_rows(a, dt, add, scaled, ROWS_BOTH); break;                           \
    }

CPU_INLINE void sinusoidal_rows_dt(const posenc_cpu_sinusoidal_rows *a, posenc_dtype dt)
{
    int mode = !a->steps ? ROWS_DIRECT
                         : (a->out ? ROWS_AFTER : 0) | (a->back_out ? ROWS_BEFORE : 0);
    bool add = a->x || a->back_x, scaled = a->output_scale != 1.0f;
    if (add && scaled)
        ROWS_CASES(true, true)
    else if (add)
        ROWS_CASES(true, false)
    else if (scaled)
        ROWS_CASES(false, true)
    else
        ROWS_CASES(false, false)
}
#undef ROWS_CASES

static void k_sinusoidal_rows(const posenc_cpu_sinusoidal_rows *a)
{
    switch (a->dtype) {
    case DT_F16: sinusoidal_rows_dt(a, DT_F16); break;
    case DT_BF16: sinusoidal_rows_dt(a, DT_BF16); break;
    default: sinusoidal_rows_dt(a, DT_F32); break;
    }
}

/* ---- conversions ---- */

CPU_INLINE void from_f32(posenc_dtype dt, const float *in, size_t count, uint8_t *out)
{
    size_t i = 0, es = dt_size(dt);
    for (; i + LANES <= count; i += LANES)
        store_dt(dt, out + i * es, f_load(in + i));
    if (i < count)
        store_dt_part(dt, out + i * es, f_load_part(in + i, count - i), count - i);
}

CPU_INLINE void to_f32(posenc_dtype dt, const uint8_t *in, size_t count, float *out)
{
    size_t i = 0, es = dt_size(dt);
    for (; i + LANES <= count; i += LANES)
        f_store(out + i, load_dt(dt, in + i * es));
    if (i < count)
        f_store_part(out + i, load_dt_part(dt, in + i * es, count - i), count - i);
}

static void k_from_f32(posenc_dtype dtype, const float *in, size_t count, void *out)
{
    switch (dtype) {
    case DT_F16: from_f32(DT_F16, in, count, out); break;
    case DT_BF16: from_f32(DT_BF16, in, count, out); break;
    default: from_f32(DT_F32, in, count, out); break;
    }
}

static void k_to_f32(posenc_dtype dtype, const void *in, size_t count, float *out)
{
    switch (dtype) {
    case DT_F16: to_f32(DT_F16, in, count, out); break;
    case DT_BF16: to_f32(DT_BF16, in, count, out); break;
    default: to_f32(DT_F32, in, count, out); break;
    }
}

/* ---- the copy yardstick: four vectors per step, as fast as this variant moves memory ---- */

static void k_copy_in_place(float *data, size_t count)
{
    /* x + 0 cannot be folded away, unlike a plain self-copy (x + -0 can, being x for every x);
     * only -0 (which comes back +0) and NaN (quieted) may change. */
    const vf zero = f_set(0.0f);
    size_t i = 0;
    for (; i + 4 * LANES <= count; i += 4 * LANES) {
        vf a = f_load(data + i), b = f_load(data + i + LANES);
        vf c = f_load(data + i + 2 * LANES), d = f_load(data + i + 3 * LANES);
        f_store(data + i, f_add(a, zero));
        f_store(data + i + LANES, f_add(b, zero));
        f_store(data + i + 2 * LANES, f_add(c, zero));
        f_store(data + i + 3 * LANES, f_add(d, zero));
    }
    for (; i + LANES <= count; i += LANES)
        f_store(data + i, f_add(f_load(data + i), zero));
    if (i < count)
        f_store_part(data + i, f_add(f_load_part(data + i, count - i), zero), count - i);
}

/* The 16-bit floor: two vectors per step, converted as the RoPE kernels convert them: f16
 * widened per vector and stored two at a time; bf16 on 32-bit words, each widened by a shift
 * and a mask into its even and odd elements and narrowed back as a pair (bf16_pairs). */
CPU_INLINE void convert_in_place(posenc_dtype dt, uint8_t *data, size_t count)
{
    size_t i = 0;
    const vi high = i_set(0xffff0000u);
    for (; i + 2 * LANES <= count; i += 2 * LANES) {
        uint8_t *p = data + 2 * i, *q = p + 2 * LANES;
        if (dt == DT_BF16) {
            vi w = i_load(p);
            i_store(p, bf16_pairs(i_bits(i_shl(w, 16)), i_bits(i_and(w, high))));
        } else {
            store_dt2(dt, p, load_dt(dt, p), q, load_dt(dt, q));
        }
    }
    if (i + LANES <= count) {
        store_dt(dt, data + 2 * i, load_dt(dt, data + 2 * i));
        i += LANES;
    }
    if (i < count)
        store_dt_part(dt, data + 2 * i, load_dt_part(dt, data + 2 * i, count - i), count - i);
}

static void k_convert_in_place(posenc_dtype dtype, void *data, size_t count)
{
    if (dtype == DT_F16)
        convert_in_place(DT_F16, data, count);
    else if (dtype == DT_BF16)
        convert_in_place(DT_BF16, data, count);
}

static void k_fill(float *data, size_t count, float value)
{
    const vf v = f_set(value);
    size_t i = 0;
    for (; i + 4 * LANES <= count; i += 4 * LANES) {
        f_store(data + i, v);
        f_store(data + i + LANES, v);
        f_store(data + i + 2 * LANES, v);
        f_store(data + i + 3 * LANES, v);
    }
    for (; i + LANES <= count; i += LANES)
        f_store(data + i, v);
    if (i < count)
        f_store_part(data + i, v, count - i);
}

const posenc_cpu_kernels KERNEL_TABLE = {
    .name = KERNEL_NAME,
    .lanes = LANES,
    .sincos = k_sincos,
    .turns_int = k_turns_int,
    .turns_fixed = k_turns_fixed,
    .rotate = k_rotate,
    .rope_heads = k_rope_heads,
    .gptj_table = k_gptj_table,
    .sinusoidal_rows = k_sinusoidal_rows,
    .from_f32 = k_from_f32,
    .to_f32 = k_to_f32,
    .copy_in_place = k_copy_in_place,
    .convert_in_place = k_convert_in_place,
    .fill = k_fill,
};

#endif
