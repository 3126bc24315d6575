/* SPDX-License-Identifier: MIT */
/* The CPU kernels for AVX2 + FMA + F16C: 8 lanes, masked f32 tails, 16-bit tails through a
 * small buffer. Compiled with -mavx2 -mfma -mf16c for this file only; run only where
 * cpu_variant.c found the features. */
#include "cpu/cpu_kernels.h"

#if defined(__x86_64__) || defined(_M_X64)

#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#define LANES 8
#define TABLE_REGS 8 /* of 16: a rotary_dim of 64 keeps its NeoX table in registers */
/* RoPE prefetches each head's lines this far ahead (cpu_simd.h). Measured on Zen 3, in place
 * from DRAM with two threads: f16 NeoX from 0.73 to 0.92 of the copy's speed, f32 from 0.8 to
 * 1.0; 1 KiB helped less, 16 KiB as much. */
#define PREFETCH_AHEAD 4096
/* The QK norm's sums (cpu_simd_rope_norm.h) as far ahead: on the AVX-512 Xeon, this variant's
 * fused prefill from L3 went from 0.73 to 0.82-0.84 of RoPE's speed (2 KiB did as well). */
#define NORM_PREFETCH_AHEAD PREFETCH_AHEAD
#if defined(__GNUC__) || defined(__clang__)
/* The builtin: GCC 12 drops a loop of _mm_prefetch calls as if it did nothing. */
#  define prefetch_line(p) __builtin_prefetch((p), 0, 3)
#else
#  define prefetch_line(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#endif
typedef __m256 vf;
typedef __m256i vi;

#define KERNEL_TABLE posenc_cpu_kernels_avx2
#define KERNEL_NAME "avx2"

static inline __m256i lanes_mask(size_t n)
{
    static const int32_t ones_then_zeros[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
    return _mm256_loadu_si256((const __m256i *)(ones_then_zeros + 8 - n));
}

static inline vf f_load(const void *p) { return _mm256_loadu_ps(p); }
static inline void f_store(void *p, vf v) { _mm256_storeu_ps(p, v); }
static inline vf f_load_part(const void *p, size_t n) { return _mm256_maskload_ps(p, lanes_mask(n)); }
static inline void f_store_part(void *p, vf v, size_t n)
{
    _mm256_maskstore_ps(p, lanes_mask(n), v);
}

static inline __m128i load16_part(const void *p, size_t n)
{
    uint16_t lanes[8] = {0};
    memcpy(lanes, p, n * sizeof lanes[0]);
    return _mm_loadu_si128((const __m128i *)lanes);
}
static inline void store16_part(void *p, __m128i v, size_t n)
{
    uint16_t lanes[8];
    _mm_storeu_si128((__m128i *)lanes, v);
    memcpy(p, lanes, n * sizeof lanes[0]);
}

static inline vf h_load(const void *p) { return _mm256_cvtph_ps(_mm_loadu_si128(p)); }
static inline vf h_load_part(const void *p, size_t n) { return _mm256_cvtph_ps(load16_part(p, n)); }
/* NaNs become sign | quiet NaN without payload first, as core/half.c writes them. */
static inline __m128i h_convert(vf v)
{
    vf nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    vf quiet = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)),
                            _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
    return _mm256_cvtps_ph(_mm256_blendv_ps(v, quiet, nan),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline void h_store(void *p, vf v) { _mm_storeu_si128(p, h_convert(v)); }
/* Runs of f16 stores with the NaN rewrite deferred or shared (cpu_simd.h): h_store_raw
 * converts as the hardware does (a NaN keeps its payload's top bits), h_unordered says whether
 * a lane of two vectors is NaN, and h_fix_nans rewrites the NaNs among `n` stored values (a
 * multiple of LANES) afterwards as core/half.c writes them: the hardware's sign | 0x7e00 | top
 * bits, masked with 0xfe00. Without NaNs a store is the conversion alone, where h_convert
 * spends four more instructions per vector on them. */
static inline void h_store_raw(void *p, vf v)
{
    _mm_storeu_si128(p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
static inline unsigned f_unordered(vf v, vf w)
{
    return (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, w, _CMP_UNORD_Q));
}
#define HAVE_F_UNORDERED 1
static inline unsigned h_unordered(vf v, vf w) { return f_unordered(v, w); }
static inline void h_fix_nans(void *p, size_t n)
{
    for (size_t i = 0; i < n; i += LANES) {
        __m128i *at = (__m128i *)((uint16_t *)p + i);
        __m128i h = _mm_loadu_si128(at);
        /* (h & 0x7fff) > 0x7c00 as signed 16-bit lanes: both sides are non-negative. */
        __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7fff)),
                                      _mm_set1_epi16(0x7c00));
        h = _mm_blendv_epi8(h, _mm_and_si128(h, _mm_set1_epi16((short)0xfe00)), nan);
        _mm_storeu_si128(at, h);
    }
}
#define HAVE_H_FIX_NANS 1
/* s and c to f16 interleaved, [s0 c0 s1 c1 ...], converted as h_store_raw: the zip runs on
 * the 16-bit values, two unpacks within 128 bits where zipping the f32 vectors takes four
 * shuffles, two of them across lanes. */
static inline void h_store_zip_raw(void *p, vf s, vf c)
{
    __m128i hs = _mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m128i hc = _mm256_cvtps_ph(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(p, _mm_unpacklo_epi16(hs, hc));
    _mm_storeu_si128((__m128i *)p + 1, _mm_unpackhi_epi16(hs, hc));
}
#define HAVE_H_STORE_ZIP 1
/* Two vectors, one NaN test. */
static inline void h_store2(void *p, vf v, void *q, vf w)
{
    if (h_unordered(v, w)) {
        h_store(p, v);
        h_store(q, w);
        return;
    }
    h_store_raw(p, v);
    h_store_raw(q, w);
}
#define HAVE_H_STORE2 1
static inline void h_store_part(void *p, vf v, size_t n) { store16_part(p, h_convert(v), n); }

static inline vf b_widen(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
static inline vf b_load(const void *p) { return b_widen(_mm_loadu_si128(p)); }
static inline vf b_load_part(const void *p, size_t n) { return b_widen(load16_part(p, n)); }
/* Round to nearest even on the bits; NaN keeps its top bits and becomes quiet. */
static inline __m128i b_convert(vf v)
{
    vi u = _mm256_castps_si256(v);
    vi odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    vi rounded = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
    vi quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    vi nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    rounded = _mm256_blendv_epi8(rounded, quiet, nan);
    /* Every lane is <= 0xffff, so the saturating pack is exact. */
    return _mm_packus_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
}
static inline void b_store(void *p, vf v) { _mm_storeu_si128(p, b_convert(v)); }
static inline void b_store_part(void *p, vf v, size_t n) { store16_part(p, b_convert(v), n); }

static inline vi i_load(const void *p) { return _mm256_loadu_si256(p); }
static inline vi i_load_part(const void *p, size_t n) { return _mm256_maskload_epi32(p, lanes_mask(n)); }
static inline vf f_set(float x) { return _mm256_set1_ps(x); }
static inline vi i_set(uint32_t x) { return _mm256_set1_epi32((int)x); }
static inline vf f_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf f_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf f_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf f_sqrt(vf v) { return _mm256_sqrt_ps(v); }
static inline vf f_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf f_fms(vf a, vf b, vf c) { return _mm256_fmsub_ps(a, b, c); }
static inline vf f_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
static inline vf f_clamp1(vf v)
{
    return _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(1.0f)), _mm256_set1_ps(-1.0f));
}
static inline vi i_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
static inline vi i_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
static inline vi i_and(vi a, vi b) { return _mm256_and_si256(a, b); }
#define i_shl(v, n) _mm256_slli_epi32((v), (n))
#define i_shr(v, n) _mm256_srli_epi32((v), (n))
static inline vf f_from_i(vi v) { return _mm256_cvtepi32_ps(v); }
static inline vf f_xor_bits(vf v, vi bits)
{
    return _mm256_castsi256_ps(_mm256_xor_si256(_mm256_castps_si256(v), bits));
}
static inline vf f_swap_pairs(vf v) { return _mm256_permute_ps(v, 0xb1); }
static inline void f_zip(vf a, vf b, vf *lo, vf *hi)
{
    vf l = _mm256_unpacklo_ps(a, b), h = _mm256_unpackhi_ps(a, b);
    *lo = _mm256_permute2f128_ps(l, h, 0x20);
    *hi = _mm256_permute2f128_ps(l, h, 0x31);
}

/* [a0 a2 b0 b2 | a4 a6 b4 b6] (and the odd ones), then its 64-bit quarters in order 0 2 1 3. */
static inline void f_unzip(vf a, vf b, vf *even, vf *odd)
{
    *even = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
    *odd = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
}

static inline vi f_bits(vf v) { return _mm256_castps_si256(v); }
static inline vf i_bits(vi v) { return _mm256_castsi256_ps(v); }
static inline vi i_or(vi a, vi b) { return _mm256_or_si256(a, b); }
static inline void i_store(void *p, vi v) { _mm256_storeu_si256(p, v); }
static inline void i_store_part(void *p, vi v, size_t n)
{
    _mm256_maskstore_epi32(p, lanes_mask(n), v);
}
static inline vi i_select_nan(vf v, vi a, vi b)
{
    return _mm256_blendv_epi8(b, a, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}

/* Eight turns_hi at once (k_turns_int): the low 64 bits of position * frac from 32-bit
 * products, four lanes per vector. With the position p sign-extended to 64 bits as
 * pl + 2^32 ph (ph = -1 or 0) and frac = fl + 2^32 fh, the product modulo 2^64 is
 * pl fl + 2^32 (pl fh + ph fl): the second term wants only its low 32 bits, pl fh - fl
 * for a negative p. */
static inline __m256i turns_int4(__m256i position, bool negative, __m256i fracs)
{
    __m256i low = _mm256_mul_epu32(position, fracs);
    __m256i cross = _mm256_mul_epu32(position, _mm256_srli_epi64(fracs, 32));
    if (negative)
        cross = _mm256_sub_epi64(cross, fracs);
    __m256i turns = _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
    return _mm256_add_epi64(turns, _mm256_set1_epi64x((int64_t)1 << 31));
}
/* The high halves of the eight 64-bit lanes of a and b, in order. */
static inline void store_high_halves(__m256i a, __m256i b, uint32_t *turns_hi)
{
    /* [a0 a1 b0 b1 | a2 a3 b2 b3], then its 64-bit quarters in order 0 2 1 3. */
    __m256 high = _mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), 0xdd);
    high = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(high), 0xd8));
    _mm256_storeu_ps((float *)(void *)turns_hi, high);
}
static inline void turns_int8(int32_t position, const uint64_t *fracs, uint32_t *turns_hi)
{
    const __m256i p = _mm256_set1_epi64x((int64_t)(uint32_t)position);
    __m256i a = turns_int4(p, position < 0, _mm256_loadu_si256((const __m256i *)fracs));
    __m256i b = turns_int4(p, position < 0, _mm256_loadu_si256((const __m256i *)fracs + 1));
    store_high_halves(a, b, turns_hi);
}
#define HAVE_TURNS_INT8 1

/* Four turns of a Q31.32 position (k_turns_fixed): the integer part's as turns_int4 (with the
 * rounding increment), plus pl * fh, the top half of pl * fl, and pl * int_turns times 2^32. */
static inline __m256i turns_fixed4(__m256i ph, bool negative, __m256i pl, __m256i fracs,
                                   __m256i int_turns)
{
    __m256i turns = turns_int4(ph, negative, fracs);
    turns = _mm256_add_epi64(turns, _mm256_mul_epu32(pl, _mm256_srli_epi64(fracs, 32)));
    turns = _mm256_add_epi64(turns, _mm256_srli_epi64(_mm256_mul_epu32(pl, fracs), 32));
    return _mm256_add_epi64(turns, _mm256_slli_epi64(_mm256_mul_epu32(pl, int_turns), 32));
}
static inline void turns_fixed8(int32_t ph, uint32_t pl, const uint64_t *fracs,
                                const uint32_t *int_turns, uint32_t *turns_hi)
{
    const __m256i h = _mm256_set1_epi64x((int64_t)(uint32_t)ph);
    const __m256i l = _mm256_set1_epi64x((int64_t)pl);
    __m256i a = turns_fixed4(h, ph < 0, l, _mm256_loadu_si256((const __m256i *)fracs),
                             _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)int_turns)));
    __m256i b =
        turns_fixed4(h, ph < 0, l, _mm256_loadu_si256((const __m256i *)fracs + 1),
                     _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)int_turns + 1)));
    store_high_halves(a, b, turns_hi);
}
#define HAVE_TURNS_FIXED8 1

/* Eight turns of a position P = m 2^s with 0 <= m < 2^31 and s <= 32, as the AVX-512
 * turns_scaled (see there): two 32x32-bit products per frequency where turns_fixed4 takes
 * five, and none for whole turns in blocks without them. */
static inline __m256i turns_scaled4(__m256i m, __m256i round, __m128i shift, const uint64_t *fracs,
                                    const uint32_t *int_turns, bool whole_turns)
{
    const __m256i f = _mm256_loadu_si256((const __m256i *)(const void *)fracs);
    __m256i a = _mm256_mul_epu32(m, _mm256_srli_epi64(f, 32));
    if (whole_turns) {
        const __m256i whole =
            _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(const void *)int_turns));
        a = _mm256_add_epi64(a, _mm256_slli_epi64(_mm256_mul_epu32(m, whole), 32));
    }
    const __m256i c = _mm256_add_epi64(_mm256_mul_epu32(m, f), round);
    return _mm256_srl_epi64(_mm256_add_epi64(a, _mm256_srli_epi64(c, 32)), shift);
}
static inline void turns_scaled(uint32_t m, uint32_t s, const uint64_t *fracs,
                                const uint32_t *int_turns, uint32_t *turns_hi)
{
    const __m256i mv = _mm256_set1_epi64x((int64_t)m);
    const __m256i round = _mm256_set1_epi64x((int64_t)(UINT64_C(1) << (63 - s)));
    const __m128i shift = _mm_cvtsi32_si128((int)(32 - s));
    const __m256i whole = _mm256_loadu_si256((const __m256i *)(const void *)int_turns);
    const bool whole_turns = !_mm256_testz_si256(whole, whole);
    const __m256i a = turns_scaled4(mv, round, shift, fracs, int_turns, whole_turns);
    const __m256i b = turns_scaled4(mv, round, shift, fracs + 4, int_turns + 4, whole_turns);
    /* The low halves of the eight 64-bit lanes, in order ([a0 a1 b0 b1 | a2 a3 b2 b3] first). */
    __m256 low = _mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), 0x88);
    low = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(low), 0xd8));
    _mm256_storeu_ps((float *)(void *)turns_hi, low);
}
#define TURNS_SCALED_LANES 8

/* sin and cos from a table of 16ths of a turn (SINCOS_TABLE_BITS, cpu_simd_angles.h), the
 * even entries of the 32nds: VPERMPS picks among 8 values, so each value is two picks and a
 * blend on the index's fourth bit. */
#define SINCOS_TABLE_BITS 4
static inline __m256 pick16(const float *sin_of_32ths, int first, __m256i k, __m256 upper)
{
    const float *t = sin_of_32ths + first;
    const __m256 lo = _mm256_setr_ps(t[0], t[2], t[4], t[6], t[8], t[10], t[12], t[14]);
    const __m256 hi = _mm256_setr_ps(t[16], t[18], t[20], t[22], t[24], t[26], t[28], t[30]);
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, k), _mm256_permutevar8x32_ps(hi, k),
                            upper);
}
static inline void sincos_table_pick(const float *sin_of_32ths, vi k, vf *sin_a, vf *cos_a)
{
    const __m256 upper = _mm256_castsi256_ps(_mm256_slli_epi32(k, 28));
    *sin_a = pick16(sin_of_32ths, 0, k, upper);
    *cos_a = pick16(sin_of_32ths, 8, k, upper);
}

#include "cpu/cpu_simd.h"

#endif
