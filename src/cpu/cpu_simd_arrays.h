/* SPDX-License-Identifier: MIT */
/* The CPU kernel template's whole-array kernels (cpu_simd.h): conversions from and to f32, the
 * copy yardsticks (an f32 copy and a 16-bit conversion in place) and a fill. */
#ifndef POSENC_CPU_SIMD_ARRAYS_H
#define POSENC_CPU_SIMD_ARRAYS_H

#include "cpu/cpu_simd_access.h"
#include "cpu/cpu_simd_bf16.h"

#include <string.h>

/* ---- conversions from and to f32 ---- */

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

/* ---- a copy between arrays ---- */

/* `bytes` from `in` to `out` (apart), four vectors per step, the rest by memcpy. The KV cache
 * write copies a token's v heads (4 KiB for 8 heads of 128 f32) once per call: the C
 * library's memmove took half again as long, its size and overlap checks paid for every
 * call. */
static void k_copy(const void *in, void *out, size_t bytes)
{
    const uint8_t *i = in;
    uint8_t *o = out;
    const size_t step = LANES * 4;
    size_t n = 0;
    for (; n + 4 * step <= bytes; n += 4 * step) {
        vi a = i_load(i + n), b = i_load(i + n + step);
        vi c = i_load(i + n + 2 * step), d = i_load(i + n + 3 * step);
        i_store(o + n, a);
        i_store(o + n + step, b);
        i_store(o + n + 2 * step, c);
        i_store(o + n + 3 * step, d);
    }
    for (; n + step <= bytes; n += step)
        i_store(o + n, i_load(i + n));
    if (n < bytes)
        memcpy(o + n, i + n, bytes - n);
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

#endif
