/* SPDX-License-Identifier: MIT */
/* Private to the CPU backend: its context state (kernel variant, thread pool, per-thread
 * scratch), exact turn computation, and scalar element access for layouts the vector kernels do
 * not take (a strided innermost dim). */
#ifndef POSENC_CPU_INTERNAL_H
#define POSENC_CPU_INTERNAL_H

#include "core/half.h"
#include "core/internal.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_pool.h"

#include <string.h>

/* A job is split into parts of at least this many bytes of memory traffic: waking a worker
 * costs about as much as moving this much memory, so smaller jobs (a decode step) stay on the
 * calling thread. */
#define POSENC_CPU_MIN_BYTES_PER_PART ((uint64_t)192 * 1024)

/* The most threads a context may ask for (posenc_context_desc.num_threads). */
#define POSENC_CPU_MAX_THREADS 1024u

/* What the rotation tables that RoPE keeps (cpu_rope.c) depend on besides each row's position:
 * the same for every row of a call. Flags 0 matches nothing. */
typedef struct posenc_cpu_kept_key {
    uint32_t flags; /* kept, the table's layout, the inverse, spread (cpu_rope.c) */
    uint32_t rotary_dim;
    uint64_t freqs_id;
    uint32_t scale; /* the attention factor's f32 bits */
} posenc_cpu_kept_key;

/* What one kept row's table holds: built (0: nothing) at this position. */
typedef struct posenc_cpu_kept_row {
    int64_t position; /* Q31.32 */
    uint32_t valid;   /* the position was a valid one (the table NaN otherwise) */
    uint32_t built;
} posenc_cpu_kept_row;

typedef struct posenc_cpu_context {
    posenc_cpu_variant variant;
    const posenc_cpu_kernels *kernels;
    posenc_cpu_pool *pool;    /* its workers: num_threads - 1 */
    uint32_t parts;           /* most parts a job runs as: the pool's size */
    float **scratch;          /* one 64-byte aligned block per part, reused across calls */
    size_t scratch_floats;    /* capacity of each block */
    /* Sinusoidal step table (cpu_sinusoidal.c), valid for the frequency table whose id is
     * step_freqs_id (0: none) and step_half frequencies. */
    float *steps;
    size_t steps_floats;
    uint64_t step_freqs_id;
    uint32_t step_half;
    /* The frequency table whose id is split_id (0: none) split into its parts
     * (posenc_cpu_split_freqs). */
    uint64_t *fracs;
    uint32_t *int_turns;
    uint32_t split_count;
    uint32_t split_capacity;
    uint64_t split_id;
    /* The rotation tables of the rows of the last RoPE calls (cpu_rope.c): one block, the rows'
     * keys first, then their tables; kept_used keys from the first may be set. */
    void *kept;
    size_t kept_bytes;
    size_t kept_used;
    posenc_cpu_kept_key kept_key;
    /* Their layout for kept_key: rows of kept_stride floats from kept_tables, kept_rows of
     * them. */
    float *kept_tables;
    size_t kept_stride;
    size_t kept_rows;
} posenc_cpu_context;

/* A frequency table's parts side by side, as the kernels' turns_int and turns_fixed read them. */
typedef struct posenc_cpu_freq_parts {
    const uint64_t *fracs;
    const uint32_t *int_turns;
} posenc_cpu_freq_parts;

/* The operations (cpu_rope.c, cpu_sinusoidal.c). */
posenc_status posenc_cpu_rope(posenc_context *ctx, const posenc__rope_op *op);
posenc_status posenc_cpu_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op);
/* Their yardsticks for `posenc bench`: the same split and order, copying instead; and for
 * 16-bit RoPE in place, the conversion floor: each element converted to f32 and back. */
posenc_status posenc_cpu_rope_roofline(posenc_context *ctx, const posenc__rope_op *op);
posenc_status posenc_cpu_rope_conversion_floor(posenc_context *ctx, const posenc__rope_op *op);
posenc_status posenc_cpu_sinusoidal_roofline(posenc_context *ctx,
                                             const posenc__sinusoidal_op *op);

/* Grows every part's scratch to `floats` entries (before a job starts, so a failure leaves the
 * outputs untouched); OUT_OF_MEMORY with the context error set. */
posenc_status posenc_cpu_reserve_scratch(posenc_context *ctx, size_t floats);

/* How many parts a job moving `bytes` of memory runs as, and which units [first, end) of
 * `units` part `part` of `parts` takes. */
uint32_t posenc_cpu_parts_for(const posenc_cpu_context *state, uint64_t bytes, uint64_t units);
static inline void posenc_cpu_part_range(uint64_t units, uint32_t part, uint32_t parts,
                                         uint64_t *first, uint64_t *end)
{
    if (parts == 1) { /* a small job on the calling thread: no 64-bit division */
        *first = 0;
        *end = units;
        return;
    }
    *first = units * part / parts;
    *end = units * (part + 1) / parts;
}

/* The top 32 bits of the turns of position * freq (core/angle.h), rounded: what the kernels'
 * sincos takes. The same value as posenc__turns, in fewer operations: an int32 position p is
 * p * 2^32 in Q31.32, so its turns are simply p * frac modulo 2^64. */
static inline uint32_t posenc_cpu_turns_hi_int(int32_t position, uint64_t frac)
{
    uint64_t turns = (uint64_t)(int64_t)position * frac;
    return (uint32_t)((turns + (UINT64_C(1) << 31)) >> 32);
}

static inline uint32_t posenc_cpu_turns_hi(int64_t position_fixed, posenc__freq freq)
{
#if defined(__SIZEOF_INT128__)
    /* Bits 32..95 of the signed 128-bit product P * frac, plus the whole turns of the
     * fractional position bits: the same modular sum as posenc__turns. */
    __int128 product = (__int128)position_fixed * (__int128)freq.frac;
    uint64_t turns = (uint64_t)(product >> 32) +
                     ((uint64_t)((uint32_t)(uint64_t)position_fixed * freq.int_turns) << 32);
#else
    uint64_t turns = posenc__turns(position_fixed, freq);
#endif
    return (uint32_t)((turns + (UINT64_C(1) << 31)) >> 32);
}

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
bool posenc_cpu_position(const uint8_t *positions_base, const posenc__view *positions,
                         bool has_positions, bool per_batch, int32_t offset, int64_t batch,
                         int64_t row, int64_t *fixed);

/* The QK RMSNorm of one head (cpu_rope_norm.c): its weights from the head's dim 0, and the
 * factor 1 / sqrt(mean(x^2) + eps) of the head or of its token's whole tensor. */
typedef struct posenc_cpu_norm {
    const uint8_t *weights;
    int64_t weight_stride; /* bytes */
    posenc_dtype weight_dtype;
    double offset; /* added to every weight */
    double factor;
} posenc_cpu_norm;

/* 1 / sqrt(mean(x^2) + eps) over `heads` heads of `dims` elements (strides in bytes), the sum
 * accumulated in float64. */
double posenc_cpu_rms_factor(const uint8_t *x, posenc_dtype dtype, int64_t head_stride,
                             int64_t dim_stride, int64_t heads, int64_t dims, double eps);

/* One head of `op` normalized by `norm` and rotated by the token's `table` (the GPT-J layout
 * when `interleaved_table`), element by element, every dim written; in and out may be one. */
void posenc_cpu_rope_head_normed(const posenc__rope_op *op, bool interleaved_table,
                                 const float *table, const uint8_t *in, int64_t in_stride,
                                 uint8_t *out, int64_t out_stride, const posenc_cpu_norm *norm);

/* For the vector kernels: the `count` weights of a norm (f32, f16 or bf16 at `stride` bytes)
 * with `offset` added, each rounded once to f32, into `out`. */
void posenc_cpu_norm_weights(const posenc_cpu_kernels *kernels, const uint8_t *weights,
                             posenc_dtype dtype, int64_t stride, int64_t count, double offset,
                             float *out);

/* The factors 1 / sqrt(mean(x^2) + eps) of heads [first, end) of one token, into
 * factors[first .. end): `heads` heads of `dims` contiguous values from `in`, `head_stride`
 * bytes apart, each normalized over itself, or (per_token) all over the token's `heads`, whose
 * factor every head takes: in f32 lanes (kernels->norm_factors), or from the heads' sums in f32
 * lanes (kernels->sum_squares) added and taken to the factor in float64. */
void posenc_cpu_norm_factors(const posenc_cpu_kernels *kernels, posenc_dtype dtype,
                             const uint8_t *in, int64_t head_stride, int64_t heads,
                             uint32_t dims, bool per_token, double eps, int64_t first,
                             int64_t end, float *factors);

/* `count` contiguous values of a head outside the rotated ones, scaled as the vector kernels
 * scale theirs, x (w r), each product rounded to f32; in and out may be one. */
void posenc_cpu_norm_dims(const uint8_t *in, uint8_t *out, posenc_dtype dtype,
                          const float *weights, float factor, int64_t count);

/* The `count` frequencies of the table `freqs_id` (0: not kept) split into their parts, kept in
 * the context until another table is split: a decode step or the next table finds them ready. */
posenc_status posenc_cpu_split_freqs(posenc_context *ctx, const posenc__freq *freqs,
                                     uint32_t count, uint64_t freqs_id,
                                     posenc_cpu_freq_parts *parts);

/* sin and cos of position * freqs[j], j < count (split into `parts`), into sin_out/cos_out,
 * times the scales; NaN for an invalid position. `turns_hi` is scratch of `count` entries. */
void posenc_cpu_sincos_row(const posenc_cpu_kernels *kernels, const posenc_cpu_freq_parts *parts,
                           uint32_t count, int64_t position, bool valid, float sin_scale,
                           float cos_scale, uint32_t *turns_hi, float *sin_out, float *cos_out);

#endif
