/* Private to the CPU backend: its context state and element access for every dtype. */
#ifndef POSENC_CPU_INTERNAL_H
#define POSENC_CPU_INTERNAL_H

#include "core/half.h"
#include "core/internal.h"

#include <string.h>

typedef struct posenc_cpu_context {
    float *sincos;          /* per-row sin/cos scratch, reused across calls */
    size_t sincos_capacity; /* floats */
} posenc_cpu_context;

/* The operations (cpu_rope.c, cpu_sinusoidal.c). */
posenc_status posenc_cpu_rope(posenc_context *ctx, const posenc__rope_op *op);
posenc_status posenc_cpu_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op);

/* Grows the scratch to `floats` entries; NULL (and the context error) when out of memory. */
float *posenc_cpu_scratch(posenc_context *ctx, size_t floats);

/* Address of element [i0, i1, i2, i3] of a resolved view whose memory is host-visible. */
static inline uint8_t *posenc_cpu_element(uint8_t *base, const posenc__view *v, int64_t i0,
                                          int64_t i1, int64_t i2, int64_t i3)
{
    return base + i0 * v->strides[0] + i1 * v->strides[1] + i2 * v->strides[2] +
           i3 * v->strides[3];
}

static inline float posenc_cpu_load(const uint8_t *p, posenc_dtype dtype)
{
    uint16_t h;
    float f;
    switch (dtype) {
    case POSENC_DTYPE_F16:
        memcpy(&h, p, sizeof h);
        return posenc__f16_to_f32(h);
    case POSENC_DTYPE_BF16:
        memcpy(&h, p, sizeof h);
        return posenc__bf16_to_f32(h);
    default:
        memcpy(&f, p, sizeof f);
        return f;
    }
}

static inline void posenc_cpu_store(uint8_t *p, posenc_dtype dtype, float value)
{
    uint16_t h;
    switch (dtype) {
    case POSENC_DTYPE_F16:
        h = posenc__f32_to_f16(value);
        memcpy(p, &h, sizeof h);
        break;
    case POSENC_DTYPE_BF16:
        h = posenc__f32_to_bf16(value);
        memcpy(p, &h, sizeof h);
        break;
    default:
        memcpy(p, &value, sizeof value);
        break;
    }
}

/* The Q31.32 position of row `row` of batch `batch`; false for a float position out of range
 * (the row is then written as NaN). */
bool posenc_cpu_position(posenc_context *ctx, const posenc__view *positions, bool has_positions,
                         bool per_batch, int32_t offset, int64_t batch, int64_t row,
                         int64_t *fixed);

/* sin/cos of position * freqs[j] for j < count, into sincos[2j] (sin) and sincos[2j+1] (cos);
 * NaN for an invalid position. */
void posenc_cpu_sincos_row(const posenc__freq *freqs, uint32_t count, int64_t position,
                           bool valid, float *sincos);

#endif
