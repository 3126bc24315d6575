/* SPDX-License-Identifier: MIT */
/* The CPU kernels for aarch64 Advanced SIMD (NEON, part of the base architecture): 4 lanes,
 * fused multiply-adds, hardware f16 conversions, bf16 on the bits, tails through a small
 * buffer. */
#include "cpu/cpu_kernels.h"

#if defined(__aarch64__) || defined(_M_ARM64)

#include <arm_neon.h>
#include <string.h>

#define LANES 4
typedef float32x4_t vf;
typedef uint32x4_t vi;

#define KERNEL_TABLE posenc_cpu_kernels_neon
#define KERNEL_NAME "neon"

static inline vf f_load(const void *p) { return vld1q_f32(p); }
static inline void f_store(void *p, vf v) { vst1q_f32(p, v); }
static inline vf f_load_part(const void *p, size_t n)
{
    float lanes[LANES] = {0};
    memcpy(lanes, p, n * sizeof lanes[0]);
    return vld1q_f32(lanes);
}
static inline void f_store_part(void *p, vf v, size_t n)
{
    float lanes[LANES];
    vst1q_f32(lanes, v);
    memcpy(p, lanes, n * sizeof lanes[0]);
}

static inline uint16x4_t load16_part(const void *p, size_t n)
{
    uint16_t lanes[LANES] = {0};
    memcpy(lanes, p, n * sizeof lanes[0]);
    return vld1_u16(lanes);
}
static inline void store16_part(void *p, uint16x4_t v, size_t n)
{
    uint16_t lanes[LANES];
    vst1_u16(lanes, v);
    memcpy(p, lanes, n * sizeof lanes[0]);
}

static inline vf h_widen(uint16x4_t h) { return vcvt_f32_f16(vreinterpret_f16_u16(h)); }
static inline vf h_load(const void *p) { return h_widen(vld1_u16(p)); }
static inline vf h_load_part(const void *p, size_t n) { return h_widen(load16_part(p, n)); }
/* NaNs become sign | quiet NaN without payload first, as core/half.c writes them. */
static inline uint16x4_t h_convert(vf v)
{
    uint32x4_t quiet = vorrq_u32(vandq_u32(vreinterpretq_u32_f32(v), vdupq_n_u32(0x80000000u)),
                                 vdupq_n_u32(0x7fc00000u));
    v = vbslq_f32(vceqq_f32(v, v), v, vreinterpretq_f32_u32(quiet));
    return vreinterpret_u16_f16(vcvt_f16_f32(v));
}
static inline void h_store(void *p, vf v) { vst1_u16(p, h_convert(v)); }
static inline void h_store_part(void *p, vf v, size_t n) { store16_part(p, h_convert(v), n); }

static inline vf b_widen(uint16x4_t h) { return vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(h), 16)); }
static inline vf b_load(const void *p) { return b_widen(vld1_u16(p)); }
static inline vf b_load_part(const void *p, size_t n) { return b_widen(load16_part(p, n)); }
static inline uint16x4_t b_convert(vf v)
{
    uint32x4_t u = vreinterpretq_u32_f32(v);
    uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    uint32x4_t rounded = vshrq_n_u32(vaddq_u32(u, vaddq_u32(odd, vdupq_n_u32(0x7fff))), 16);
    uint32x4_t quiet = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40));
    rounded = vbslq_u32(vceqq_f32(v, v), rounded, quiet);
    return vmovn_u32(rounded);
}
static inline void b_store(void *p, vf v) { vst1_u16(p, b_convert(v)); }
static inline void b_store_part(void *p, vf v, size_t n) { store16_part(p, b_convert(v), n); }

static inline vi i_load(const void *p) { return vld1q_u32(p); }
static inline vi i_load_part(const void *p, size_t n)
{
    uint32_t lanes[LANES] = {0};
    memcpy(lanes, p, n * sizeof lanes[0]);
    return vld1q_u32(lanes);
}
static inline vf f_set(float x) { return vdupq_n_f32(x); }
static inline vi i_set(uint32_t x) { return vdupq_n_u32(x); }
static inline vf f_add(vf a, vf b) { return vaddq_f32(a, b); }
static inline vf f_mul(vf a, vf b) { return vmulq_f32(a, b); }
static inline vf f_div(vf a, vf b) { return vdivq_f32(a, b); }
static inline vf f_sqrt(vf v) { return vsqrtq_f32(v); }
static inline vf f_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
static inline vf f_fms(vf a, vf b, vf c) { return vfmaq_f32(vnegq_f32(c), a, b); }
static inline vf f_fnma(vf a, vf b, vf c) { return vfmsq_f32(c, a, b); }
static inline vf f_clamp1(vf v)
{
    return vmaxq_f32(vminq_f32(v, vdupq_n_f32(1.0f)), vdupq_n_f32(-1.0f));
}
static inline vi i_add(vi a, vi b) { return vaddq_u32(a, b); }
static inline vi i_sub(vi a, vi b) { return vsubq_u32(a, b); }
static inline vi i_and(vi a, vi b) { return vandq_u32(a, b); }
#define i_shl(v, n) vshlq_n_u32((v), (n))
#define i_shr(v, n) vshrq_n_u32((v), (n))
static inline vf f_from_i(vi v) { return vcvtq_f32_s32(vreinterpretq_s32_u32(v)); }
static inline vi i_from_f(vf v) { return vreinterpretq_u32_s32(vcvtq_s32_f32(v)); }
static inline vf f_xor_bits(vf v, vi bits)
{
    return vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(v), bits));
}
static inline vf f_select_odd(vi q, vf a, vf b) { return vbslq_f32(vtstq_u32(q, vdupq_n_u32(1)), a, b); }
static inline vf f_swap_pairs(vf v) { return vrev64q_f32(v); }
static inline void f_zip(vf a, vf b, vf *lo, vf *hi)
{
    *lo = vzip1q_f32(a, b);
    *hi = vzip2q_f32(a, b);
}
static inline void f_unzip(vf a, vf b, vf *even, vf *odd)
{
    *even = vuzp1q_f32(a, b);
    *odd = vuzp2q_f32(a, b);
}
/* Nonzero when a lane of v or w is NaN. */
static inline unsigned f_unordered(vf v, vf w)
{
    return vminvq_u32(vandq_u32(vceqq_f32(v, v), vceqq_f32(w, w))) == 0;
}
#define HAVE_F_UNORDERED 1

static inline vi f_bits(vf v) { return vreinterpretq_u32_f32(v); }
static inline vf i_bits(vi v) { return vreinterpretq_f32_u32(v); }
static inline vi i_or(vi a, vi b) { return vorrq_u32(a, b); }
static inline void i_store(void *p, vi v) { vst1q_u32(p, v); }
static inline void i_store_part(void *p, vi v, size_t n)
{
    uint32_t lanes[LANES];
    vst1q_u32(lanes, v);
    memcpy(p, lanes, n * sizeof lanes[0]);
}
static inline vi i_select_nan(vf v, vi a, vi b) { return vbslq_u32(vceqq_f32(v, v), b, a); }

/* Four turns_hi of a Q31.32 position P = ph 2^32 + pl (k_turns_fixed, pl = 0 for k_turns_int)
 * with 32x32-bit products: the frequencies' 64-bit fractions are loaded as their low words fl
 * and high words fh (LD2), and turns_hi is the high word of the 64-bit part
 *   ph * fl + pl * fh + (pl * fl) / 2^32 + 2^31
 * (two lanes a register, the last product's top half shift-accumulated and the sum's top half
 * narrowed with the rounding added: VSRA, VADDHN) plus the part that only reaches the high word
 *   ph * fh + pl * int_turns - fl (for ph < 0, as int64 ph * frac subtracts frac * 2^32),
 * modulo 2^32: the scalar loops' modular sums, lane by lane. */
static inline void turns4(uint32_t ph, bool negative, uint32_t pl, const uint64_t *fracs,
                          const uint32_t *int_turns, uint32_t *turns_hi)
{
    const uint32x4x2_t f = vld2q_u32((const uint32_t *)(const void *)fracs);
    const uint32x4_t fl = f.val[0], fh = f.val[1];
    const uint32x2_t h = vdup_n_u32(ph), l = vdup_n_u32(pl);
    const uint64x2_t round = vdupq_n_u64(UINT64_C(1) << 31);
    uint64x2_t low = vmull_u32(vget_low_u32(fl), h);
    uint64x2_t high = vmull_high_u32(fl, vdupq_n_u32(ph));
    uint32x4_t upper = vmulq_n_u32(fh, ph);
    if (pl) {
        low = vmlal_u32(low, vget_low_u32(fh), l);
        high = vmlal_high_u32(high, fh, vdupq_n_u32(pl));
        low = vsraq_n_u64(low, vmull_u32(vget_low_u32(fl), l), 32);
        high = vsraq_n_u64(high, vmull_high_u32(fl, vdupq_n_u32(pl)), 32);
        upper = vmlaq_n_u32(upper, vld1q_u32(int_turns), pl);
    }
    if (negative)
        upper = vsubq_u32(upper, fl);
    uint32x4_t rounded = vaddhn_high_u64(vaddhn_u64(low, round), high, round);
    vst1q_u32(turns_hi, vaddq_u32(rounded, upper));
}
static inline void turns_int8(int32_t position, const uint64_t *fracs, uint32_t *turns_hi)
{
    turns4((uint32_t)position, position < 0, 0, fracs, NULL, turns_hi);
    turns4((uint32_t)position, position < 0, 0, fracs + 4, NULL, turns_hi + 4);
}
#define HAVE_TURNS_INT8 1
static inline void turns_fixed8(int32_t ph, uint32_t pl, const uint64_t *fracs,
                                const uint32_t *int_turns, uint32_t *turns_hi)
{
    turns4((uint32_t)ph, ph < 0, pl, fracs, int_turns, turns_hi);
    turns4((uint32_t)ph, ph < 0, pl, fracs + 4, int_turns + 4, turns_hi + 4);
}
#define HAVE_TURNS_FIXED8 1

#include "cpu/cpu_simd.h"

#endif
