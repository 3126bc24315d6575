/* SPDX-License-Identifier: MIT */
/* The CPU kernels for AVX-512 (F, BW, VL, DQ): 16 lanes, masked tails, F16C conversions. With
 * POSENC_CPU_BF16 defined (cpu_kernels_avx512bf16.c) bf16 stores use AVX512_BF16's
 * VCVTNEPS2BF16. Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c (and
 * -mavx512bf16) for this file only; run only where cpu_variant.c found the features. */
#include "cpu/cpu_kernels.h"

#if defined(__x86_64__) || defined(_M_X64)

#include <immintrin.h>

#define LANES 16
#define TABLE_REGS 16 /* of 32: a rotary_dim of 128 or 256 keeps its whole table in registers */
#define NORM_PREFETCH_AHEAD 2048 /* bytes: the QK norm's sums (cpu_simd_rope_norm.h) */
#if defined(__GNUC__) || defined(__clang__)
#  define prefetch_line(p) __builtin_prefetch((p), 0, 3)
#else
#  define prefetch_line(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#endif
typedef __m512 vf;
typedef __m512i vi;

#if defined(POSENC_CPU_BF16)
#  define KERNEL_TABLE posenc_cpu_kernels_avx512bf16
#  define KERNEL_NAME "avx512bf16"
#  define NATIVE_BF16 1
#else
#  define KERNEL_TABLE posenc_cpu_kernels_avx512
#  define KERNEL_NAME "avx512"
#endif

static inline __mmask16 lanes_mask(size_t n) { return (__mmask16)((1u << n) - 1u); }

static inline vf f_load(const void *p) { return _mm512_loadu_ps(p); }
static inline void f_store(void *p, vf v) { _mm512_storeu_ps(p, v); }
static inline vf f_load_part(const void *p, size_t n)
{
    return _mm512_maskz_loadu_ps(lanes_mask(n), p);
}
static inline void f_store_part(void *p, vf v, size_t n)
{
    _mm512_mask_storeu_ps(p, lanes_mask(n), v);
}

static inline vf h_load(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256(p)); }
static inline vf h_load_part(const void *p, size_t n)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes_mask(n), p));
}
/* NaNs become sign | quiet NaN without payload first, as core/half.c writes them (the
 * hardware would keep the payload's top bits); vectors without NaN skip that. */
static inline __m256i h_convert(vf v)
{
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    if (nan) {
        vi quiet = _mm512_ternarylogic_epi32(_mm512_castps_si512(v),
                                             _mm512_set1_epi32((int)0x80000000u),
                                             _mm512_set1_epi32(0x7fc00000), 0xea); /* a & b | c */
        v = _mm512_mask_mov_ps(v, nan, _mm512_castsi512_ps(quiet));
    }
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline void h_store(void *p, vf v) { _mm256_storeu_si256(p, h_convert(v)); }
/* Two vectors, one NaN test: UNORD(a, b) is set where either lane is NaN. */
static inline void h_store2(void *p, vf v, void *q, vf w)
{
    if (_mm512_cmp_ps_mask(v, w, _CMP_UNORD_Q)) {
        h_store(p, v);
        h_store(q, w);
        return;
    }
    _mm256_storeu_si256(p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm256_storeu_si256(q, _mm512_cvtps_ph(w, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
#define HAVE_H_STORE2 1
/* Runs of f16 stores with the NaN rewrite deferred: h_store_raw converts as the hardware does
 * (a NaN keeps its payload's top bits), h_unordered says whether a lane of two vectors is NaN,
 * and h_fix_nans rewrites the NaNs among `n` stored values (a multiple of LANES) afterwards as
 * core/half.c writes them: the hardware's sign | 0x7e00 | top bits, masked with 0xfe00. */
static inline void h_store_raw(void *p, vf v)
{
    _mm256_storeu_si256(p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
static inline unsigned f_unordered(vf v, vf w) { return _mm512_cmp_ps_mask(v, w, _CMP_UNORD_Q); }
#define HAVE_F_UNORDERED 1
static inline unsigned h_unordered(vf v, vf w) { return f_unordered(v, w); }
static inline void h_fix_nans(void *p, size_t n)
{
    for (size_t i = 0; i < n; i += LANES) {
        __m256i *at = (__m256i *)((uint16_t *)p + i);
        __m256i h = _mm256_loadu_si256(at);
        __mmask16 nan = _mm256_cmpgt_epi16_mask(_mm256_and_si256(h, _mm256_set1_epi16(0x7fff)),
                                                _mm256_set1_epi16(0x7c00));
        h = _mm256_mask_blend_epi16(nan, h,
                                    _mm256_and_si256(h, _mm256_set1_epi16((short)0xfe00)));
        _mm256_storeu_si256(at, h);
    }
}
#define HAVE_H_FIX_NANS 1
static inline void h_store_part(void *p, vf v, size_t n)
{
    _mm256_mask_storeu_epi16(p, lanes_mask(n), h_convert(v));
}

static inline vf b_widen(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
static inline vf b_load(const void *p) { return b_widen(_mm256_loadu_si256(p)); }
static inline vf b_load_part(const void *p, size_t n)
{
    return b_widen(_mm256_maskz_loadu_epi16(lanes_mask(n), p));
}
/* Round to nearest even on the bits; NaN keeps its top bits and becomes quiet. */
static inline __m256i b_convert_bits(vf v)
{
    vi u = _mm512_castps_si512(v);
    vi odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    vi rounded = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    rounded = _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(u, 16),
                                   _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(rounded);
}
#if defined(POSENC_CPU_BF16)
/* VCVTNEPS2BF16 rounds to nearest even and quiets NaNs the same way, but flushes subnormal
 * inputs to zero: those (rare) vectors take the bit path. */
static inline __m256i b_convert(vf v)
{
    if (_mm512_fpclass_ps_mask(v, 0x20)) /* any subnormal lane */
        return b_convert_bits(v);
    return (__m256i)_mm512_cvtneps_pbh(v);
}
/* Two vectors to bf16, interleaved: lane i of the result holds even[i] in its low half and
 * odd[i] in its high half (a GPT-J pair). One conversion of both and one word permute. */
static inline vi b_pack_pairs(vf even, vf odd)
{
    if (_mm512_fpclass_ps_mask(even, 0x20) | _mm512_fpclass_ps_mask(odd, 0x20))
        return _mm512_or_si512(_mm512_cvtepu16_epi32(b_convert_bits(even)),
                               _mm512_slli_epi32(_mm512_cvtepu16_epi32(b_convert_bits(odd)), 16));
    const vi interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                           24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
                                           1, 16, 0);
    return _mm512_permutexvar_epi16(interleave, (vi)_mm512_cvtne2ps_pbh(odd, even));
}
#define HAVE_B_PACK_PAIRS 1
#else
static inline __m256i b_convert(vf v) { return b_convert_bits(v); }
#endif
static inline void b_store(void *p, vf v) { _mm256_storeu_si256(p, b_convert(v)); }
static inline void b_store_part(void *p, vf v, size_t n)
{
    _mm256_mask_storeu_epi16(p, lanes_mask(n), b_convert(v));
}

static inline vi i_load(const void *p) { return _mm512_loadu_si512(p); }
static inline vi i_load_part(const void *p, size_t n)
{
    return _mm512_maskz_loadu_epi32(lanes_mask(n), p);
}
static inline vf f_set(float x) { return _mm512_set1_ps(x); }
static inline vi i_set(uint32_t x) { return _mm512_set1_epi32((int)x); }
static inline vf f_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf f_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf f_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf f_sqrt(vf v) { return _mm512_sqrt_ps(v); }
static inline vf f_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline vf f_fms(vf a, vf b, vf c) { return _mm512_fmsub_ps(a, b, c); }
static inline vf f_fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }
/* VRANGEPS, "smaller magnitude, sign of the first": one instruction for min(max(v, -1), 1). */
static inline vf f_clamp1(vf v) { return _mm512_range_ps(v, _mm512_set1_ps(1.0f), 0x02); }
static inline vi i_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
static inline vi i_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
static inline vi i_and(vi a, vi b) { return _mm512_and_si512(a, b); }
#define i_shl(v, n) _mm512_slli_epi32((v), (n))
#define i_shr(v, n) _mm512_srli_epi32((v), (n))
static inline vf f_from_i(vi v) { return _mm512_cvtepi32_ps(v); }
static inline vf f_xor_bits(vf v, vi bits)
{
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), bits));
}
static inline vf f_swap_pairs(vf v) { return _mm512_permute_ps(v, 0xb1); }
static inline void f_zip(vf a, vf b, vf *lo, vf *hi)
{
    const vi lo_index = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const vi hi_index =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    *lo = _mm512_permutex2var_ps(a, lo_index, b);
    *hi = _mm512_permutex2var_ps(a, hi_index, b);
}

/* The inverse of f_zip: the even lanes of [a b] and the odd ones. */
static inline void f_unzip(vf a, vf b, vf *even, vf *odd)
{
    const vi even_index =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const vi odd_index =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    *even = _mm512_permutex2var_ps(a, even_index, b);
    *odd = _mm512_permutex2var_ps(a, odd_index, b);
}

static inline vi f_bits(vf v) { return _mm512_castps_si512(v); }
static inline vf i_bits(vi v) { return _mm512_castsi512_ps(v); }
static inline vi i_or(vi a, vi b) { return _mm512_or_si512(a, b); }
static inline void i_store(void *p, vi v) { _mm512_storeu_si512(p, v); }
static inline void i_store_part(void *p, vi v, size_t n)
{
    _mm512_mask_storeu_epi32(p, lanes_mask(n), v);
}
static inline vi i_select_nan(vf v, vi a, vi b)
{
    return _mm512_mask_mov_epi32(b, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), a);
}

/* Eight turns_hi at once (k_turns_int): VPMULLQ gives the low 64 bits of the product, the
 * same for a signed position as for its two's complement. */
static inline void turns_int8(int32_t position, const uint64_t *fracs, uint32_t *turns_hi)
{
    __m512i turns = _mm512_mullo_epi64(_mm512_set1_epi64(position), _mm512_loadu_si512(fracs));
    turns = _mm512_srli_epi64(_mm512_add_epi64(turns, _mm512_set1_epi64((int64_t)1 << 31)), 32);
    _mm256_storeu_si256((__m256i *)(void *)turns_hi, _mm512_cvtepi64_epi32(turns));
}
#define HAVE_TURNS_INT8 1

/* Eight turns of a Q31.32 position (k_turns_fixed): ph * frac by VPMULLQ (its low 64 bits),
 * plus pl * fh, the top half of pl * fl, and pl * int_turns times 2^32 from 32x32-bit
 * products. A table of float positions (diffusion timesteps) spent a third of its time in the
 * scalar loop. */
static inline void turns_fixed8(int32_t ph, uint32_t pl, const uint64_t *fracs,
                                const uint32_t *int_turns, uint32_t *turns_hi)
{
    const __m512i f = _mm512_loadu_si512(fracs);
    const __m512i l = _mm512_set1_epi64((int64_t)pl);
    const __m512i whole =
        _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(const void *)int_turns));
    __m512i turns = _mm512_mullo_epi64(_mm512_set1_epi64(ph), f);
    turns = _mm512_add_epi64(turns, _mm512_mul_epu32(l, _mm512_srli_epi64(f, 32)));
    turns = _mm512_add_epi64(turns, _mm512_srli_epi64(_mm512_mul_epu32(l, f), 32));
    turns = _mm512_add_epi64(turns, _mm512_slli_epi64(_mm512_mul_epu32(l, whole), 32));
    turns = _mm512_srli_epi64(_mm512_add_epi64(turns, _mm512_set1_epi64((int64_t)1 << 31)), 32);
    _mm256_storeu_si256((__m256i *)(void *)turns_hi, _mm512_cvtepi64_epi32(turns));
}
#define HAVE_TURNS_FIXED8 1

/* Sixteen turns of a position P = m 2^s with 0 <= m < 2^31 and s <= 32 (k_turns_fixed; every
 * float position with a fraction is one), from 32x32-bit products only. With k = 64 - s, the
 * turn is bits k..k+31 of m * frac + 2^(k-1) plus m * int_turns * 2^s: A = m * fh and
 * C = m * fl + 2^(k-1) are exact in 64 bits, and since k >= 32 that is
 * (A + m * int_turns * 2^32 + C / 2^32) / 2^(k-32), modulo 2^32. 512-bit multiplies and
 * shifts share one port, so the halves move by shuffles on the other, and frequencies without
 * whole turns (all of them in most tables) skip their term: about two thirds of
 * turns_fixed8's time. */
static inline __m512i turns_scaled8(__m512i m, __m512i round, __m128i shift, const uint64_t *fracs,
                                    const uint32_t *int_turns, bool whole_turns)
{
    const __m512i f = _mm512_loadu_si512(fracs);
    __m512i a = _mm512_mul_epu32(m, _mm512_shuffle_epi32(f, _MM_PERM_CDAB));
    if (whole_turns) {
        const __m512i whole = _mm512_cvtepu32_epi64(
            _mm256_loadu_si256((const __m256i *)(const void *)int_turns));
        a = _mm512_add_epi64(a, _mm512_slli_epi64(_mm512_mul_epu32(m, whole), 32));
    }
    const __m512i c = _mm512_add_epi64(_mm512_mul_epu32(m, f), round);
    const __m512i c_hi = _mm512_maskz_shuffle_epi32(0x5555, c, _MM_PERM_CDAB); /* c >> 32 */
    return _mm512_srl_epi64(_mm512_add_epi64(a, c_hi), shift);
}

static inline void turns_scaled(uint32_t m, uint32_t s, const uint64_t *fracs,
                                const uint32_t *int_turns, uint32_t *turns_hi)
{
    const __m512i mv = _mm512_set1_epi64((int64_t)m);
    const __m512i round = _mm512_set1_epi64((int64_t)(UINT64_C(1) << (63 - s)));
    const __m128i shift = _mm_cvtsi32_si128((int)(32 - s));
    const __m512i whole = _mm512_loadu_si512(int_turns);
    const bool whole_turns = _mm512_test_epi32_mask(whole, whole) != 0;
    const __m512i lo = turns_scaled8(mv, round, shift, fracs, int_turns, whole_turns);
    const __m512i hi = turns_scaled8(mv, round, shift, fracs + 8, int_turns + 8, whole_turns);
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    _mm512_storeu_si512(turns_hi, _mm512_permutex2var_epi32(lo, even, hi));
}
#define TURNS_SCALED_LANES 16

/* sin and cos from a table of 32nds of a turn (SINCOS_TABLE_BITS, cpu_simd_angles.h): the
 * table's 32 sines and its cosines (the same values 8 on) stay in four registers, and
 * VPERMT2PS picks a lane's entry of 32 in one micro-op. */
#define SINCOS_TABLE_BITS 5
static inline void sincos_table_pick(const float *sin_of_32ths, vi k, vf *sin_a, vf *cos_a)
{
    *sin_a = _mm512_permutex2var_ps(_mm512_loadu_ps(sin_of_32ths), k,
                                    _mm512_loadu_ps(sin_of_32ths + 16));
    *cos_a = _mm512_permutex2var_ps(_mm512_loadu_ps(sin_of_32ths + 8), k,
                                    _mm512_loadu_ps(sin_of_32ths + 24));
}

#include "cpu/cpu_simd.h"

#endif
