/* SPDX-License-Identifier: MIT */
/* The portable CPU kernels: plain C on 4-lane arrays (which compilers map to whatever vector
 * unit the baseline target has), f16/bf16 through core/half.c. Runs everywhere; the reference
 * the other variants are tested against. */
#include "core/half.h"
#include "cpu/cpu_kernels.h"

#include <math.h>
#include <string.h>

#define LANES 4
typedef struct vf {
    float v[LANES];
} vf;
typedef struct vi {
    uint32_t v[LANES];
} vi;

#define KERNEL_TABLE posenc_cpu_kernels_portable
#define KERNEL_NAME "portable"

#define EACH(i) for (size_t i = 0; i < LANES; i++)

static inline vf f_load_part(const void *p, size_t n)
{
    vf r = {{0}};
    memcpy(r.v, p, n * sizeof(float));
    return r;
}
static inline vf f_load(const void *p) { return f_load_part(p, LANES); }
static inline void f_store_part(void *p, vf v, size_t n) { memcpy(p, v.v, n * sizeof(float)); }
static inline void f_store(void *p, vf v) { f_store_part(p, v, LANES); }

static inline vf h_load_part(const void *p, size_t n)
{
    uint16_t h[LANES] = {0};
    memcpy(h, p, n * sizeof h[0]);
    vf r;
    EACH(i) r.v[i] = posenc__f16_to_f32(h[i]);
    return r;
}
static inline vf h_load(const void *p) { return h_load_part(p, LANES); }
static inline void h_store_part(void *p, vf v, size_t n)
{
    uint16_t h[LANES];
    EACH(i) h[i] = posenc__f32_to_f16(v.v[i]);
    memcpy(p, h, n * sizeof h[0]);
}
static inline void h_store(void *p, vf v) { h_store_part(p, v, LANES); }

static inline vf b_load_part(const void *p, size_t n)
{
    uint16_t h[LANES] = {0};
    memcpy(h, p, n * sizeof h[0]);
    vf r;
    EACH(i) r.v[i] = posenc__bf16_to_f32(h[i]);
    return r;
}
static inline vf b_load(const void *p) { return b_load_part(p, LANES); }
static inline void b_store_part(void *p, vf v, size_t n)
{
    uint16_t h[LANES];
    EACH(i) h[i] = posenc__f32_to_bf16(v.v[i]);
    memcpy(p, h, n * sizeof h[0]);
}
static inline void b_store(void *p, vf v) { b_store_part(p, v, LANES); }

static inline vi i_load_part(const void *p, size_t n)
{
    vi r = {{0}};
    memcpy(r.v, p, n * sizeof(uint32_t));
    return r;
}
static inline vi i_load(const void *p) { return i_load_part(p, LANES); }

static inline vf f_set(float x)
{
    vf r;
    EACH(i) r.v[i] = x;
    return r;
}
static inline vi i_set(uint32_t x)
{
    vi r;
    EACH(i) r.v[i] = x;
    return r;
}
static inline vf f_add(vf a, vf b)
{
    EACH(i) a.v[i] += b.v[i];
    return a;
}
static inline vf f_mul(vf a, vf b)
{
    EACH(i) a.v[i] *= b.v[i];
    return a;
}
static inline vf f_div(vf a, vf b)
{
    EACH(i) a.v[i] /= b.v[i];
    return a;
}
static inline vf f_sqrt(vf a)
{
    EACH(i) a.v[i] = sqrtf(a.v[i]);
    return a;
}
/* Separate multiply and add: no fused instruction is assumed (and fmaf in software would be
 * slow); the error bounds in cpu_simd.h hold either way. */
static inline vf f_fma(vf a, vf b, vf c)
{
    EACH(i) a.v[i] = a.v[i] * b.v[i] + c.v[i];
    return a;
}
static inline vf f_fms(vf a, vf b, vf c)
{
    EACH(i) a.v[i] = a.v[i] * b.v[i] - c.v[i];
    return a;
}
static inline vf f_fnma(vf a, vf b, vf c)
{
    EACH(i) a.v[i] = c.v[i] - a.v[i] * b.v[i];
    return a;
}
static inline vf f_clamp1(vf v)
{
    EACH(i) v.v[i] = v.v[i] > 1.0f ? 1.0f : v.v[i] < -1.0f ? -1.0f : v.v[i];
    return v;
}
static inline vi i_add(vi a, vi b)
{
    EACH(i) a.v[i] += b.v[i];
    return a;
}
static inline vi i_sub(vi a, vi b)
{
    EACH(i) a.v[i] -= b.v[i];
    return a;
}
static inline vi i_and(vi a, vi b)
{
    EACH(i) a.v[i] &= b.v[i];
    return a;
}
static inline vi i_shl(vi a, unsigned n)
{
    EACH(i) a.v[i] <<= n;
    return a;
}
static inline vi i_shr(vi a, unsigned n)
{
    EACH(i) a.v[i] >>= n;
    return a;
}
/* Two's complement reinterpretation without implementation-defined conversions. */
static inline int32_t as_signed(uint32_t u)
{
    return u < 0x80000000u ? (int32_t)u : -(int32_t)(~u) - 1;
}
static inline vf f_from_i(vi a)
{
    vf r;
    EACH(i) r.v[i] = (float)as_signed(a.v[i]);
    return r;
}
static inline vi i_from_f(vf a)
{
    vi r;
    EACH(i) r.v[i] = (uint32_t)(int32_t)a.v[i];
    return r;
}
static inline vf f_xor_bits(vf a, vi bits)
{
    EACH(i)
    {
        uint32_t u;
        memcpy(&u, &a.v[i], sizeof u);
        u ^= bits.v[i];
        memcpy(&a.v[i], &u, sizeof u);
    }
    return a;
}
static inline vf f_select_odd(vi q, vf a, vf b)
{
    EACH(i) b.v[i] = (q.v[i] & 1u) ? a.v[i] : b.v[i];
    return b;
}
static inline vf f_swap_pairs(vf a)
{
    vf r;
    for (size_t i = 0; i < LANES; i += 2) {
        r.v[i] = a.v[i + 1];
        r.v[i + 1] = a.v[i];
    }
    return r;
}
static inline void f_zip(vf a, vf b, vf *lo, vf *hi)
{
    for (size_t i = 0; i < LANES / 2; i++) {
        lo->v[2 * i] = a.v[i];
        lo->v[2 * i + 1] = b.v[i];
        hi->v[2 * i] = a.v[LANES / 2 + i];
        hi->v[2 * i + 1] = b.v[LANES / 2 + i];
    }
}
static inline void f_unzip(vf a, vf b, vf *even, vf *odd)
{
    for (size_t i = 0; i < LANES / 2; i++) {
        even->v[i] = a.v[2 * i];
        odd->v[i] = a.v[2 * i + 1];
        even->v[LANES / 2 + i] = b.v[2 * i];
        odd->v[LANES / 2 + i] = b.v[2 * i + 1];
    }
}

static inline vi f_bits(vf v)
{
    vi r;
    memcpy(r.v, v.v, sizeof r.v);
    return r;
}
static inline vf i_bits(vi v)
{
    vf r;
    memcpy(r.v, v.v, sizeof r.v);
    return r;
}
static inline vi i_or(vi a, vi b)
{
    EACH(i) a.v[i] |= b.v[i];
    return a;
}
static inline void i_store_part(void *p, vi v, size_t n) { memcpy(p, v.v, n * sizeof(uint32_t)); }
static inline void i_store(void *p, vi v) { i_store_part(p, v, LANES); }
static inline vi i_select_nan(vf v, vi a, vi b)
{
    EACH(i) b.v[i] = v.v[i] != v.v[i] ? a.v[i] : b.v[i];
    return b;
}

#include "cpu/cpu_simd.h"
