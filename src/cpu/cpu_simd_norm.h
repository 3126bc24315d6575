/* SPDX-License-Identifier: MIT */
/* The CPU kernel template's QK norm (cpu_simd.h): the sums of squares of heads, and the values
 * of a head scaled by its norm as RoPE's kernels load them (posenc_cpu_rope_heads.norm_*). */
#ifndef POSENC_CPU_SIMD_NORM_H
#define POSENC_CPU_SIMD_NORM_H

#include "cpu/cpu_simd_access.h"

#include <stdbool.h>
#include <string.h>

/* ---- sums of squares and factors ----
 *
 * Each head's squares go into four accumulators of LANES lanes, vector k of the head into
 * accumulator k mod 4 by a fused multiply-add, the four are added pairwise, and the LANES lanes
 * of LANES heads at once in log2(LANES) rounds of unzip and add (the sum of head i ends in lane
 * i). Every value's path to its head's sum is at most D = ceil(dims / (4 LANES)) + 2 +
 * log2(LANES) rounded additions of non-negative terms, so a sum is within D units of 2^-24 of
 * its exact value, relatively (to first order): 12 for dims 128 on 4 lanes, 8 on 16.
 *
 * The factor r = 1 / sqrt(sum / dims + eps) follows in the same lanes: sum times 1 / dims
 * (2 roundings, 1 where dims is a power of two), eps rounded to f32 and added (with the sum's
 * error, D + 3 units), the square root (half that, plus one rounding) and the division (one
 * more): r within D / 2 + 3.5 units. A scalar float64 tail per head took a fifth of a decode
 * step's time on AVX-512 (a division and a square root each, on one divider), where the
 * vector's pair serves LANES heads. */

#define NORM_ACCUMULATORS 4

/* The squares of one head, as a vector whose lanes add up to their sum. */
CPU_INLINE vf head_squares(posenc_dtype dt, const uint8_t *in, uint32_t dims)
{
    const size_t es = dt_size(dt);
    vf a0 = f_set(0.0f), a1 = a0, a2 = a0, a3 = a0;
    uint32_t d = 0;
    for (; d + NORM_ACCUMULATORS * LANES <= dims; d += NORM_ACCUMULATORS * LANES) {
        vf x0 = load_dt(dt, in + d * es), x1 = load_dt(dt, in + (d + LANES) * es);
        vf x2 = load_dt(dt, in + (d + 2 * LANES) * es), x3 = load_dt(dt, in + (d + 3 * LANES) * es);
        a0 = f_fma(x0, x0, a0);
        a1 = f_fma(x1, x1, a1);
        a2 = f_fma(x2, x2, a2);
        a3 = f_fma(x3, x3, a3);
    }
    /* Up to three full vectors and a partial one (its missing lanes load as 0), one each. */
    vf *const rest[NORM_ACCUMULATORS] = {&a0, &a1, &a2, &a3};
    for (int k = 0; k < NORM_ACCUMULATORS && d < dims; k++, d += LANES) {
        vf x = d + LANES <= dims ? load_dt(dt, in + d * es)
                                 : load_dt_part(dt, in + d * es, dims - d);
        *rest[k] = f_fma(x, x, *rest[k]);
    }
    return f_add(f_add(a0, a1), f_add(a2, a3));
}

/* Per head, its sum of squares, or (`factors`) 1 / sqrt(sum / dims + eps). */
CPU_INLINE void head_sums(posenc_dtype dt, const uint8_t *in, int64_t head_stride,
                          int64_t heads, uint32_t dims, bool factors, float eps, float *out)
{
    for (int64_t h0 = 0; h0 < heads; h0 += LANES) {
        const int group = heads - h0 < LANES ? (int)(heads - h0) : LANES;
        vf lanes[LANES];
        for (int i = 0; i < group; i++)
            lanes[i] = head_squares(dt, in + (h0 + i) * head_stride, dims);
        /* Each round halves the vectors, lanes 2j and 2j + 1 of [a b] added into lane j; the
         * heads past the group count as zero vectors, without their unzips. */
        for (int width = LANES, live = group; width > 1; width /= 2, live = (live + 1) / 2) {
            for (int i = 0; i < (live + 1) / 2; i++) {
                vf even, odd;
                f_unzip(lanes[2 * i], 2 * i + 1 < live ? lanes[2 * i + 1] : f_set(0.0f), &even,
                        &odd);
                lanes[i] = f_add(even, odd);
            }
        }
        vf v = lanes[0];
        if (factors)
            v = f_div(f_set(1.0f),
                      f_sqrt(f_add(f_mul(v, f_set(1.0f / (float)dims)), f_set(eps))));
        if (group == LANES)
            f_store(out + h0, v);
        else
            f_store_part(out + h0, v, (size_t)group);
    }
}

static void k_sum_squares(posenc_dtype dtype, const uint8_t *in, int64_t head_stride,
                          int64_t heads, uint32_t dims, float *sums)
{
    switch (dtype) {
    case DT_F16: head_sums(DT_F16, in, head_stride, heads, dims, false, 0.0f, sums); break;
    case DT_BF16: head_sums(DT_BF16, in, head_stride, heads, dims, false, 0.0f, sums); break;
    default: head_sums(DT_F32, in, head_stride, heads, dims, false, 0.0f, sums); break;
    }
}

static void k_norm_factors(posenc_dtype dtype, const uint8_t *in, int64_t head_stride,
                           int64_t heads, uint32_t dims, float eps, float *factors)
{
    switch (dtype) {
    case DT_F16: head_sums(DT_F16, in, head_stride, heads, dims, true, eps, factors); break;
    case DT_BF16: head_sums(DT_BF16, in, head_stride, heads, dims, true, eps, factors); break;
    default: head_sums(DT_F32, in, head_stride, heads, dims, true, eps, factors); break;
    }
}

/* ---- a head scaled on load ----
 *
 * RoPE's kernels take `normed` as a constant (true only from their normed instances), so the
 * instances without the norm keep their code as it was. x (w r) rounds twice: with r's error
 * and the rounding of w + offset, a value read is within D / 2 + 6.5 units of 2^-24 of exact
 * (D / 2 + 4 with a per-token factor, taken in float64 from the heads' sums: cpu_rope_norm.c). */

typedef struct head_norm {
    const float *weights; /* of the head, from the kernels' dim 0 */
    vf factor;
} head_norm;

CPU_INLINE head_norm head_norm_at(const posenc_cpu_rope_heads *a, bool normed, int64_t h)
{
    head_norm n;
    n.weights = normed ? a->norm_weights + h * a->norm_weight_stride : NULL;
    n.factor = f_set(normed ? a->norm_factors[h] : 1.0f);
    return n;
}

/* A full vector of the head at dim d. */
CPU_INLINE vf load_normed(posenc_dtype dt, const uint8_t *p, bool normed, const head_norm *n,
                          size_t d)
{
    vf x = load_dt(dt, p);
    return normed ? f_mul(x, f_mul(f_load(n->weights + d), n->factor)) : x;
}

/* `count` values of the head from dim d. */
CPU_INLINE vf load_normed_part(posenc_dtype dt, const uint8_t *p, size_t count, bool normed,
                               const head_norm *n, size_t d)
{
    vf x = load_dt_part(dt, p, count);
    return normed ? f_mul(x, f_mul(f_load_part(n->weights + d, count), n->factor)) : x;
}

/* The dims after rotary_dim of a head at `in` and `out` (from the kernels' dim 0): copied out of
 * place, and with the norm scaled and written in place too. */
CPU_INLINE void head_rest(const posenc_cpu_rope_heads *a, posenc_dtype dt, const uint8_t *in,
                          uint8_t *out, bool normed, const head_norm *n)
{
    const size_t es = dt_size(dt);
    if (!normed) {
        if (a->copy_rest)
            memcpy(out + a->rotary_dim * es, in + a->rotary_dim * es,
                   (a->head_dim - a->rotary_dim) * es);
        return;
    }
    size_t d = a->rotary_dim;
    for (; d + LANES <= a->head_dim; d += LANES)
        store_dt(dt, out + d * es, load_normed(dt, in + d * es, true, n, d));
    if (d < a->head_dim)
        store_dt_part(dt, out + d * es,
                      load_normed_part(dt, in + d * es, a->head_dim - d, true, n, d),
                      a->head_dim - d);
}

#endif
