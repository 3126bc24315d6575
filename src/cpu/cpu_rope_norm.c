/* SPDX-License-Identifier: MIT */
/* The QK RMSNorm fused into RoPE on the CPU: a head (or a token's whole q or k) is normalized on
 * read, x (w + offset) / sqrt(mean(x^2) + eps), and rotated by the token's table in the same
 * pass. The vector kernels take the weights in f32 (converted here once per call) and scale on
 * load; they take a norm per head's factors themselves, and are given those of a per-token norm
 * (or of a head whose dims before rotary_offset they do not see), computed here from their sums
 * of squares. A strided innermost dim, or a style they do not cover, runs element by element
 * with its sum of squares in float64. */
#include "cpu/cpu_internal.h"

#include "posenc_kernel_params.h"

#include <math.h>

double posenc_cpu_rms_factor(const uint8_t *x, posenc_dtype dtype, int64_t head_stride,
                             int64_t dim_stride, int64_t heads, int64_t dims, double eps)
{
    double sum = 0.0;
    for (int64_t h = 0; h < heads; h++) {
        for (int64_t d = 0; d < dims; d++) {
            double v = posenc_cpu_load(x + h * head_stride + d * dim_stride, dtype);
            sum += v * v;
        }
    }
    return 1.0 / sqrt(sum / (double)(heads * dims) + eps);
}

/* Element `d` of the head normalized, rounded once to f32. */
static float normalized(const uint8_t *in, int64_t in_stride, posenc_dtype dtype,
                        const posenc_cpu_norm *norm, int64_t d)
{
    double w = posenc_cpu_load(norm->weights + d * norm->weight_stride, norm->weight_dtype);
    return (float)(posenc_cpu_load(in + d * in_stride, dtype) * norm->factor *
                   (w + norm->offset));
}

void posenc_cpu_rope_head_normed(const posenc__rope_op *op, bool interleaved_table,
                                 const float *table, const uint8_t *in, int64_t in_stride,
                                 uint8_t *out, int64_t out_stride, const posenc_cpu_norm *norm)
{
    const uint32_t rot = op->rotary_dim, pairs = rot / 2, first = op->rotary_offset;
    const posenc_dtype dtype = op->q.dtype;
    /* The dims outside the rotated ones are normalized too: they are part of the head. */
    for (int64_t d = 0; d < op->head_dim; d++) {
        if (d < first || d >= first + rot)
            posenc_cpu_store(out + d * out_stride, dtype,
                             normalized(in, in_stride, dtype, norm, d));
    }
    for (uint32_t j = 0; j < pairs; j++) {
        /* The pair's factors where the style's table holds them (cpu_rope.c's row_table). */
        int64_t ia = first + POSENC_ROPE_PAIR_FIRST((uint32_t)op->style, j, pairs);
        int64_t ib = first + POSENC_ROPE_PAIR_SECOND((uint32_t)op->style, j, pairs);
        float c = interleaved_table ? table[2 * j] : table[j];
        float s = interleaved_table ? table[rot + 2 * j + 1] : table[pairs + j];
        float a = normalized(in, in_stride, dtype, norm, ia);
        float b = normalized(in, in_stride, dtype, norm, ib);
        posenc_cpu_store(out + ia * out_stride, dtype, a * c - b * s);
        posenc_cpu_store(out + ib * out_stride, dtype, a * s + b * c);
    }
}

void posenc_cpu_norm_weights(const posenc_cpu_kernels *kernels, const uint8_t *weights,
                             posenc_dtype dtype, int64_t stride, int64_t count, double offset,
                             float *out)
{
    if (stride == (int64_t)posenc__dtype_size(dtype) && offset == 0.0) {
        kernels->to_f32(dtype, weights, (size_t)count, out);
        return;
    }
    for (int64_t d = 0; d < count; d++)
        out[d] = (float)(posenc_cpu_load(weights + d * stride, dtype) + offset);
}

void posenc_cpu_norm_factors(const posenc_cpu_kernels *kernels, posenc_dtype dtype,
                             const uint8_t *in, int64_t head_stride, int64_t heads,
                             uint32_t dims, bool per_token, double eps, int64_t first,
                             int64_t end, float *factors)
{
    if (per_token) {
        kernels->sum_squares(dtype, in, head_stride, heads, dims, factors);
        double sum = 0.0;
        for (int64_t h = 0; h < heads; h++)
            sum += factors[h];
        float factor = (float)(1.0 / sqrt(sum / (double)(heads * dims) + eps));
        for (int64_t h = first; h < end; h++)
            factors[h] = factor;
        return;
    }
    kernels->norm_factors(dtype, in + first * head_stride, head_stride, end - first, dims,
                          (float)eps, factors + first);
}

void posenc_cpu_norm_dims(const uint8_t *in, uint8_t *out, posenc_dtype dtype,
                          const float *weights, float factor, int64_t count)
{
    size_t element = posenc__dtype_size(dtype);
    for (int64_t d = 0; d < count; d++) {
        float scale = weights[d] * factor;
        posenc_cpu_store(out + d * (int64_t)element, dtype,
                         posenc_cpu_load(in + d * (int64_t)element, dtype) * scale);
    }
}
