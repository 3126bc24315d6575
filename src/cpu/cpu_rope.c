/* SPDX-License-Identifier: MIT */
/* RoPE on the CPU. Per token, the rotation table (sin and cos of every frequency, with the
 * attention factor and direction folded in) is computed once with the vector sincos and reused
 * by every q and k head of that token. Work is split over tokens, and over heads when there are
 * fewer tokens than threads; a small job (a decode step) runs on the calling thread alone.
 * With a paged KV cache, the k heads of a token go to its cache row in the same unit of work:
 * rotated straight into the row, or copied there from k_out while still in L1. */
#include "cpu/cpu_internal.h"
#include "core/rope_cache.h"
#include "core/rope_tables.h"

#include "posenc_kernel_params.h"

#include <math.h>
#include <stdlib.h>

/* What a call runs: the operation, or one of the benchmark's yardsticks over its elements. */
typedef enum rope_run {
    ROPE_ROTATE,
    ROPE_COPY,    /* the copy: the elements read and written unchanged, no table, no arithmetic */
    ROPE_CONVERT, /* the 16-bit floor: the copy with each element widened to f32 and back */
} rope_run;

/* The QK norm of one tensor of the call (q or k): its weights, or NULL for none. */
typedef struct tensor_norm {
    const uint8_t *weights;
    const float *scaled; /* the weights in f32 with the offset added, for the vector kernels */
    const posenc__view *view;
    bool per_token; /* one factor over the token's `heads` heads */
    int64_t heads;
} tensor_norm;

/* The norm of the heads of one kernel call: the tensor's f32 weights from the heads' first dim
 * and their factors, or NULL weights for none (posenc_cpu_rope_heads.norm_*). */
typedef struct heads_norm {
    const float *weights;
    const float *factors; /* NULL: the kernels take them */
    float eps;
    int64_t weight_stride; /* floats between heads' weights: 0 or head_dim */
} heads_norm;

typedef struct rope_job {
    const posenc__rope_op *op;
    const posenc_cpu_context *state;
    posenc_cpu_freq_parts freqs; /* op->freqs split (NULLs for the yardsticks) */
    const uint8_t *q_in, *k_in, *positions, *slots, *v_in;
    const uint8_t *cos, *sin; /* caller tables, or NULL */
    tensor_norm q_norm, k_norm;
    uint8_t *q_out, *k_out, *k_cache, *v_cache;
    int64_t rows;   /* batch * tokens */
    int64_t heads;  /* q heads, then k heads */
    int64_t chunk;  /* heads per unit of work */
    int64_t chunks; /* units per row */
    float sin_scale, cos_scale;
    rope_run run;
    bool streaming; /* posenc_cpu_rope_heads.streaming */
    /* The context's kept tables of rows [0, kept_rows) (keep_tables): a key per row, and a
     * table every kept_stride floats. */
    posenc_cpu_kept_row *kept_keys;
    float *kept_tables;
    int64_t kept_rows;
    size_t kept_stride;
} rope_job;

/* How each pairing style sits on the CPU: the layout of its token table (cpu_kernels.h: pairs'
 * cos then sin for a half table, each value twice with the sin signed for an interleaved one)
 * and whether the vector kernels (rope_heads) were written for it. A style they do not cover
 * takes the element-by-element path, which reads its dims from POSENC_ROPE_PAIR_FIRST/SECOND. */
typedef struct rope_style_traits {
    bool interleaved_table;
    bool vector_kernels;
} rope_style_traits;

static const rope_style_traits rope_styles[] = {
    [POSENC_ROPE_NEOX] = {.interleaved_table = false, .vector_kernels = true},
    [POSENC_ROPE_GPTJ] = {.interleaved_table = true, .vector_kernels = true},
};
#define ROPE_STYLE_COUNT_(name, value, text) +1
_Static_assert(sizeof rope_styles / sizeof rope_styles[0] ==
                   0 POSENC_ROPE_STYLE_LIST(ROPE_STYLE_COUNT_),
               "every pairing style of posenc.h needs its line in rope_styles");
#undef ROPE_STYLE_COUNT_

/* Tensors (read and written) above this many bytes stream from L3 or memory: the kernels'
 * software prefetch pays there and only costs instructions in L1 and L2 (a decode step). */
#define STREAMING_BYTES ((uint64_t)4 << 20)

/* Batch b and token t of row `row`: without a 64-bit division where there is one token (a
 * decode step) or one sequence, as the division is a good part of a small call's fixed cost. */
static inline void row_token(const posenc__rope_op *op, int64_t row, int64_t *b, int64_t *t)
{
    if (op->tokens == 1) {
        *b = row;
        *t = 0;
    } else if (op->batch == 1) {
        *b = 0;
        *t = row;
    } else {
        *b = row / op->tokens;
        *t = row % op->tokens;
    }
}

/* The caller's cos and sin of every pair of token (b, t), from its row of the tables, with
 * the direction folded in (sin_scale is -1 for the inverse). */
static void token_table_row(const rope_job *job, int64_t b, int64_t t, float *sin_out,
                            float *cos_out)
{
    const posenc__rope_op *op = job->op;
    int64_t position = 0;
    if (!op->tables_by_token) {
        posenc_cpu_position(job->positions, &op->positions, op->has_positions,
                            op->positions_per_batch, op->position_offset, b, t, &position);
        position >>= 32; /* an i32 position, checked within the tables by the core */
    }
    for (uint32_t j = 0; j < op->rotary_dim / 2; j++) {
        uint32_t column = posenc__rope_table_column(op, j);
        const uint8_t *c = job->cos + posenc__rope_table_offset(op, &op->cos, b, t, position,
                                                                column);
        const uint8_t *s = job->sin + posenc__rope_table_offset(op, &op->sin, b, t, position,
                                                                column);
        cos_out[j] = posenc_cpu_load(c, op->cos.dtype) * job->cos_scale;
        sin_out[j] = posenc_cpu_load(s, op->sin.dtype) * job->sin_scale;
    }
}

/* sin and cos of every frequency at token (b, t), each frequency at the position component
 * it uses (freqs[j].component); a frequency whose component is an invalid float position gets
 * NaN, as the plain path gives a whole row of them. */
static void token_sincos(const rope_job *job, int64_t b, int64_t t, uint32_t *turns_hi,
                         float *sin_out, float *cos_out)
{
    const posenc__rope_op *op = job->op;
    const uint32_t pairs = op->rotary_dim / 2;
    if (job->cos) {
        token_table_row(job, b, t, sin_out, cos_out);
        return;
    }
    int64_t position[POSENC__MAX_COMPONENTS] = {0};
    bool valid[POSENC__MAX_COMPONENTS] = {false};
    bool same = true; /* every component equal: the plain row (text tokens of M-RoPE) */
    for (uint32_t c = 0; c < op->components && c < POSENC__MAX_COMPONENTS; c++) {
        const uint8_t *base = job->positions ? job->positions + c * op->component_stride : NULL;
        valid[c] = posenc_cpu_position(base, &op->positions, op->has_positions,
                                       op->positions_per_batch, op->position_offset, b, t,
                                       &position[c]);
        same = same && valid[c] == valid[0] && position[c] == position[0];
    }
    if (same) {
        posenc_cpu_sincos_row(job->state->kernels, &job->freqs, pairs, position[0], valid[0],
                              job->sin_scale, job->cos_scale, turns_hi, sin_out, cos_out);
        return;
    }
    for (uint32_t j = 0; j < pairs; j++) {
        uint32_t c = op->freqs[j].component;
        int64_t p = position[c];
        if (!valid[c])
            turns_hi[j] = 0;
        else if ((p & 0xffffffff) == 0) /* an integer position: one multiply */
            turns_hi[j] = posenc_cpu_turns_hi_int((int32_t)(p / ((int64_t)1 << 32)),
                                                  op->freqs[j].frac);
        else
            turns_hi[j] = posenc_cpu_turns_hi(p, op->freqs[j]);
    }
    job->state->kernels->sincos(turns_hi, pairs, job->sin_scale, job->cos_scale, sin_out,
                                cos_out);
    for (uint32_t j = 0; j < pairs; j++) {
        if (!valid[op->freqs[j].component])
            sin_out[j] = cos_out[j] = NAN;
    }
}

/* Whether a call's kept GPT-J tables are kept spread, in the kernels' layout whole: in a
 * single-row call (a decode step). Elsewhere cos and sin alone (row_table). */
static bool kept_spread(const rope_job *job)
{
    return rope_styles[job->op->style].interleaved_table && job->rows == 1;
}

/* The rotation table of row `row` in the kernels' layout (cpu_kernels.h), for GPT-J's with the
 * pairs' sin and cos after it (posenc_cpu_rope_heads.pair_sin). A row with a kept table takes
 * its sin and cos from there, computed first unless they were at this row's position already.
 * A kept NeoX table is the row's table itself. A kept GPT-J one is the table whole where the
 * call has one row (a decode step), else cos and sin only, spread into the part's `scratch`:
 * a few instructions a token, where spread tables would add a third to a prefill's reads of
 * them. Other rows' tables are computed in `scratch`. */
static const float *row_table(const rope_job *job, int64_t row, float *scratch,
                              uint32_t *turns_hi)
{
    const posenc__rope_op *op = job->op;
    const uint32_t pairs = op->rotary_dim / 2;
    const bool interleaved = rope_styles[op->style].interleaved_table;
    int64_t b, t;
    row_token(op, row, &b, &t);
    const bool kept = row < job->kept_rows;
    float *kept_table = kept ? job->kept_tables + (size_t)row * job->kept_stride : NULL;
    float *table = kept && (!interleaved || kept_spread(job)) ? kept_table : scratch;
    float *sin_out = interleaved ? table + 2 * (size_t)op->rotary_dim : table + pairs;
    float *cos_out = interleaved ? sin_out + pairs : table;
    if (!kept) {
        token_sincos(job, b, t, turns_hi, sin_out, cos_out);
    } else {
        posenc_cpu_kept_row *key = &job->kept_keys[row];
        /* At position_offset + t here rather than in a call: a decode step's usual way. */
        int64_t position = posenc__position_from_i32((int32_t)(op->position_offset + t));
        bool valid = !op->has_positions ||
                     posenc_cpu_position(job->positions, &op->positions, true,
                                         op->positions_per_batch, 0, b, t, &position);
        if (!valid)
            position = 0;
        bool built = key->built && key->position == position && key->valid == (uint32_t)valid;
        if (built && table == kept_table)
            return table;
        /* A kept table not spread: cos of every pair, then sin. */
        float *kept_sin = table == kept_table ? sin_out : kept_table + pairs;
        float *kept_cos = table == kept_table ? cos_out : kept_table;
        if (!built) {
            posenc_cpu_sincos_row(job->state->kernels, &job->freqs, pairs, position, valid,
                                  job->sin_scale, job->cos_scale, turns_hi, kept_sin, kept_cos);
            key->position = position;
            key->valid = valid;
            key->built = 1;
        }
        if (table != kept_table) {
            memcpy(sin_out, kept_sin, pairs * sizeof(float));
            memcpy(cos_out, kept_cos, pairs * sizeof(float));
        }
    }
    if (interleaved)
        job->state->kernels->gptj_table(sin_out, cos_out, pairs, table);
    return table;
}

/* One head through a strided innermost dim, element by element. */
static void rotate_head_strided(const posenc__rope_op *op, const float *table, const uint8_t *in,
                                int64_t in_stride, uint8_t *out, int64_t out_stride,
                                bool copy_rest)
{
    const uint32_t rot = op->rotary_dim, pairs = rot / 2, first = op->rotary_offset;
    const posenc_dtype dtype = op->q.dtype;
    size_t element = posenc__dtype_size(dtype);
    if (copy_rest)
        for (uint32_t d = 0; d < first; d++)
            memcpy(out + d * out_stride, in + d * in_stride, element);
    in += first * in_stride;
    out += first * out_stride;
    const bool interleaved = rope_styles[op->style].interleaved_table;
    for (uint32_t j = 0; j < pairs; j++) {
        /* The pair's dims as every kernel reads them; its factors where this style's table
         * (row_table) holds them. */
        uint32_t ia = POSENC_ROPE_PAIR_FIRST((uint32_t)op->style, j, pairs);
        uint32_t ib = POSENC_ROPE_PAIR_SECOND((uint32_t)op->style, j, pairs);
        float c = interleaved ? table[2 * j] : table[j];
        float s = interleaved ? table[rot + 2 * j + 1] : table[pairs + j];
        float a = posenc_cpu_load(in + ia * in_stride, dtype);
        float b = posenc_cpu_load(in + ib * in_stride, dtype);
        posenc_cpu_store(out + ia * out_stride, dtype, a * c - b * s);
        posenc_cpu_store(out + ib * out_stride, dtype, a * s + b * c);
    }
    if (!copy_rest)
        return;
    for (int64_t d = rot; d < op->head_dim - first; d++)
        memcpy(out + d * out_stride, in + d * in_stride, element);
}

/* Heads [first, end) of one token with the tensor's norm: `in` and `out` at the token's head 0. A
 * per-token factor reads every head of the token before any is written (its heads are never
 * split between units of work: run_rope). */
static void rotate_heads_normed(const rope_job *job, const float *table, const tensor_norm *norm,
                                const posenc__view *in_view, const uint8_t *in,
                                const posenc__view *out_view, uint8_t *out, int64_t first,
                                int64_t end)
{
    const posenc__rope_op *op = job->op;
    posenc_cpu_norm n = {
        .weight_stride = norm->view->strides[3],
        .weight_dtype = norm->view->dtype,
        .offset = op->norm_weight_offset,
    };
    if (norm->per_token)
        n.factor = posenc_cpu_rms_factor(in, in_view->dtype, in_view->strides[2],
                                         in_view->strides[3], norm->heads, op->head_dim,
                                         op->norm_eps);
    for (int64_t h = first; h < end; h++) {
        const uint8_t *x = in + h * in_view->strides[2];
        if (!norm->per_token)
            n.factor = posenc_cpu_rms_factor(x, in_view->dtype, 0, in_view->strides[3], 1,
                                             op->head_dim, op->norm_eps);
        n.weights = norm->weights + (norm->per_token ? h * op->head_dim : 0) * n.weight_stride;
        posenc_cpu_rope_head_normed(op, rope_styles[op->style].interleaved_table, table, x,
                                    in_view->strides[3], out + h * out_view->strides[2],
                                    out_view->strides[3], &n);
    }
}

/* Whether the vector kernels take heads of these views: contiguous dims, a style they cover. */
static bool vector_heads(const posenc__rope_op *op, const posenc__view *in_view,
                         const posenc__view *out_view)
{
    int64_t element = (int64_t)posenc__dtype_size(in_view->dtype);
    return in_view->strides[3] == element && out_view->strides[3] == element &&
           rope_styles[op->style].vector_kernels;
}

/* `heads` heads from `in` (its head `first` at token (b, t)) to `out`, laid out as the views
 * say in their dims 2 and 3; normalized by `norm` where its weights are set (contiguous dims
 * and a vector style only). */
static void rotate_heads_at(const rope_job *job, const float *table, const posenc__view *in_view,
                            const uint8_t *in, const posenc__view *out_view, uint8_t *out,
                            bool in_place, int64_t heads, const heads_norm *norm)
{
    const posenc__rope_op *op = job->op;
    int64_t element = (int64_t)posenc__dtype_size(in_view->dtype);
    if (vector_heads(op, in_view, out_view)) {
        const uint32_t pairs = op->rotary_dim / 2, first = op->rotary_offset;
        if (norm->weights && first) /* the dims before the rotated ones are normalized too (the
                                     * factors given: the kernels see the heads from `first`) */
            for (int64_t h = 0; h < heads; h++)
                posenc_cpu_norm_dims(in + h * in_view->strides[2], out + h * out_view->strides[2],
                                     in_view->dtype, norm->weights + h * norm->weight_stride,
                                     norm->factors[h], first);
        else if (!in_place && first) /* the dims before the rotated ones pass through */
            for (int64_t h = 0; h < heads; h++)
                memcpy(out + h * out_view->strides[2], in + h * in_view->strides[2],
                       (size_t)(first * element));
        /* The kernels rotate from a head's first dim: they see the head from rotary_offset. */
        posenc_cpu_rope_heads args = {
            .table = table,
            .pair_sin = table + 2 * (size_t)op->rotary_dim,
            .pair_cos = table + 2 * (size_t)op->rotary_dim + pairs,
            .in = in + first * element,
            .out = out + first * element,
            .in_head_stride = in_view->strides[2],
            .out_head_stride = out_view->strides[2],
            .heads = heads,
            .rotary_dim = op->rotary_dim,
            .head_dim = (uint32_t)op->head_dim - first,
            .dtype = in_view->dtype,
            .style = op->style,
            /* Out of place, the dims after the rotated ones pass through: a memcpy per head,
             * of nothing where every dim is rotated, was a tenth of a fused KV decode step. */
            .copy_rest = !in_place && op->head_dim > (int64_t)(first + op->rotary_dim),
            .streaming = job->streaming,
            .norm_weights = norm->weights ? norm->weights + first : NULL,
            .norm_factors = norm->factors,
            .norm_eps = norm->eps,
            .norm_weight_stride = norm->weight_stride,
        };
        job->state->kernels->rope_heads(&args);
        return;
    }
    for (int64_t h = 0; h < heads; h++)
        rotate_head_strided(op, table, in + h * in_view->strides[2], in_view->strides[3],
                            out + h * out_view->strides[2], out_view->strides[3], !in_place);
}

/* Heads [first, end) of one token normalized by `norm` and rotated: `in` and `out` at the
 * token's head 0; `factors` the unit of work's scratch for one per head. The vector kernels
 * where they take the views, else element by element. */
static void rotate_heads_normed_at(const rope_job *job, const float *table,
                                   const tensor_norm *norm, const posenc__view *in_view,
                                   const uint8_t *in, const posenc__view *out_view, uint8_t *out,
                                   int64_t first, int64_t end, float *factors)
{
    const posenc__rope_op *op = job->op;
    if (!vector_heads(op, in_view, out_view)) {
        rotate_heads_normed(job, table, norm, in_view, in, out_view, out, first, end);
        return;
    }
    /* A norm per head over what the kernels see: they take its factors themselves, a block of
     * heads ahead of the rotation (cpu_simd_rope.h). */
    bool kernels_factor = !norm->per_token && op->rotary_offset == 0;
    if (!kernels_factor)
        posenc_cpu_norm_factors(job->state->kernels, in_view->dtype, in, in_view->strides[2],
                                norm->heads, (uint32_t)op->head_dim, norm->per_token,
                                op->norm_eps, first, end, factors);
    heads_norm heads = {
        .weights = norm->scaled + (norm->per_token ? first * op->head_dim : 0),
        .factors = kernels_factor ? NULL : factors + first,
        .eps = (float)op->norm_eps,
        .weight_stride = norm->per_token ? op->head_dim : 0,
    };
    /* In place, the kernels write what they have read: a per-token factor was taken above,
     * from every head, before any is written. */
    rotate_heads_at(job, table, in_view, in + first * in_view->strides[2], out_view,
                    out + first * out_view->strides[2], in == out, end - first, &heads);
}

/* Heads [first, end) of one tensor at one token. */
static void rotate_heads(const rope_job *job, const float *table, const tensor_norm *norm,
                         const posenc__view *in_view, const uint8_t *in_base,
                         const posenc__view *out_view, uint8_t *out_base, bool in_place,
                         int64_t row, int64_t first, int64_t end, float *factors)
{
    const posenc__rope_op *op = job->op;
    int64_t b, t;
    row_token(op, row, &b, &t);
    if (norm->weights) {
        rotate_heads_normed_at(job, table, norm, in_view,
                               posenc_cpu_element((uint8_t *)in_base, in_view, b, t, 0, 0),
                               out_view, posenc_cpu_element(out_base, out_view, b, t, 0, 0),
                               first, end, factors);
        return;
    }
    static const heads_norm no_norm = {NULL, NULL, 0.0f, 0};
    rotate_heads_at(job, table, in_view,
                    posenc_cpu_element((uint8_t *)in_base, in_view, b, t, first, 0), out_view,
                    posenc_cpu_element(out_base, out_view, b, t, first, 0), in_place,
                    end - first, &no_norm);
}

/* Copies `heads` whole heads bit for bit between two views' layouts: one run through the
 * variant's copy where the heads are contiguous in both. */
static void copy_heads_at(const rope_job *job, const posenc__view *in_view, const uint8_t *in,
                          const posenc__view *out_view, uint8_t *out, int64_t heads)
{
    const int64_t element = (int64_t)posenc__dtype_size(in_view->dtype);
    const int64_t head_bytes = job->op->head_dim * element;
    const bool dims = in_view->strides[3] == element && out_view->strides[3] == element;
    if (dims && in_view->strides[2] == head_bytes && out_view->strides[2] == head_bytes) {
        job->state->kernels->copy(in, out, (size_t)(heads * head_bytes));
        return;
    }
    for (int64_t h = 0; h < heads; h++) {
        const uint8_t *i = in + h * in_view->strides[2];
        uint8_t *o = out + h * out_view->strides[2];
        if (dims) {
            memcpy(o, i, (size_t)head_bytes);
            continue;
        }
        for (int64_t d = 0; d < job->op->head_dim; d++)
            memcpy(o + d * out_view->strides[3], i + d * in_view->strides[3], (size_t)element);
    }
}

/* The cache rows of k heads [first, end) of one token, and of v's, when its slot is one. */
static void write_cache(const rope_job *job, const float *table, int64_t row, int64_t first,
                        int64_t end, float *factors)
{
    const posenc__rope_op *op = job->op;
    int64_t b, t, block, slot_row;
    row_token(op, row, &b, &t);
    int32_t slot;
    memcpy(&slot, posenc_cpu_element((uint8_t *)job->slots, &op->slots, 0, 0, b, t),
           sizeof slot);
    if (!posenc__cache_slot(op, slot, &block, &slot_row))
        return;
    uint8_t *k_row = posenc_cpu_element(job->k_cache, &op->k_cache, block, slot_row, first, 0);
    if (op->k_out_written) /* just written, still in L1: copy it rather than rotate again */
        copy_heads_at(job, &op->k_out,
                      posenc_cpu_element(job->k_out, &op->k_out, b, t, first, 0), &op->k_cache,
                      k_row, end - first);
    else if (job->k_norm.weights)
        rotate_heads_normed_at(
            job, table, &job->k_norm, &op->k,
            posenc_cpu_element((uint8_t *)job->k_in, &op->k, b, t, 0, 0), &op->k_cache,
            posenc_cpu_element(job->k_cache, &op->k_cache, block, slot_row, 0, 0), first, end,
            factors);
    else {
        static const heads_norm no_norm = {NULL, NULL, 0.0f, 0};
        rotate_heads_at(job, table, &op->k,
                        posenc_cpu_element((uint8_t *)job->k_in, &op->k, b, t, first, 0),
                        &op->k_cache, k_row, false, end - first, &no_norm);
    }
    if (op->has_v)
        copy_heads_at(job, &op->v,
                      posenc_cpu_element((uint8_t *)job->v_in, &op->v, b, t, first, 0),
                      &op->v_cache,
                      posenc_cpu_element(job->v_cache, &op->v_cache, block, slot_row, first, 0),
                      end - first);
}

/* The yardsticks' counterpart of rotate_heads: the same elements read and written back (in
 * place) or copied to the output, in the same order, with the copy kernel of the variant; or,
 * for the 16-bit floor (in place, contiguous dims: posenc_cpu_rope_conversion_floor checks),
 * converted to f32 and back. */
static void copy_heads(const rope_job *job, const posenc__view *in_view, const uint8_t *in_base,
                       const posenc__view *out_view, uint8_t *out_base, bool in_place,
                       int64_t row, int64_t first, int64_t end)
{
    const posenc__rope_op *op = job->op;
    int64_t b, t;
    row_token(op, row, &b, &t);
    const uint8_t *in = posenc_cpu_element((uint8_t *)in_base, in_view, b, t, first, 0);
    uint8_t *out = posenc_cpu_element(out_base, out_view, b, t, first, 0);
    int64_t element = (int64_t)posenc__dtype_size(in_view->dtype);
    int64_t bytes = (int64_t)op->rotary_dim * element; /* even rotary_dim: whole floats */
    if (job->run == ROPE_CONVERT) {
        void (*convert)(posenc_dtype, void *, size_t) = job->state->kernels->convert_in_place;
        if (out_view->strides[2] == bytes) { /* the heads are one run */
            convert(out_view->dtype, out, (size_t)((end - first) * op->rotary_dim));
            return;
        }
        for (int64_t h = 0; h < end - first; h++)
            convert(out_view->dtype, out + h * out_view->strides[2], op->rotary_dim);
        return;
    }
    bool packed = in_place && out_view->strides[3] == element && (uintptr_t)out % 4 == 0 &&
                  out_view->strides[2] % 4 == 0;
    if (packed && out_view->strides[2] == bytes) { /* the heads are one run */
        job->state->kernels->copy_in_place((float *)(void *)out,
                                           (size_t)((end - first) * bytes / 4));
        return;
    }
    for (int64_t h = 0; h < end - first; h++) {
        uint8_t *o = out + h * out_view->strides[2];
        const uint8_t *i = in + h * in_view->strides[2];
        if (packed) {
            job->state->kernels->copy_in_place((float *)(void *)o, (size_t)bytes / 4);
            continue;
        }
        for (uint32_t d = 0; d < op->rotary_dim; d++)
            memmove(o + d * out_view->strides[3], i + d * in_view->strides[3], (size_t)element);
    }
}

static void rope_part(void *arg, uint32_t part, uint32_t parts)
{
    const rope_job *job = arg;
    const posenc__rope_op *op = job->op;
    const uint32_t rot = op->rotary_dim;
    /* A table (2 rotary_dim), the pairs' sin and cos (rotary_dim), their turns
     * (rotary_dim / 2), then the QK norm's factors, one per head. */
    float *scratch = job->state->scratch[part];
    uint32_t *turns_hi = (uint32_t *)(scratch + 3 * (size_t)rot);
    float *factors = scratch + 4 * (size_t)rot + 16;
    const float *table = scratch;

    uint64_t first, end;
    posenc_cpu_part_range((uint64_t)(job->rows * job->chunks), part, parts, &first, &end);
    int64_t built = -1;
    for (uint64_t unit = first; unit < end; unit++) {
        /* Whole rows need no division (a 64-bit one is a good part of a decode step's fixed
         * cost). */
        int64_t row = (int64_t)unit, h0 = 0;
        if (job->chunks > 1) {
            row = (int64_t)(unit / (uint64_t)job->chunks);
            h0 = (int64_t)(unit % (uint64_t)job->chunks) * job->chunk;
        }
        int64_t h1 = h0 + job->chunk < job->heads ? h0 + job->chunk : job->heads;
        if (job->run != ROPE_ROTATE) {
            if (h0 < op->q_heads)
                copy_heads(job, &op->q, job->q_in, &op->q_out, job->q_out, op->q_in_place, row,
                           h0, h1 < op->q_heads ? h1 : op->q_heads);
            if (h1 > op->q_heads)
                copy_heads(job, &op->k, job->k_in, &op->k_out, job->k_out, op->k_in_place, row,
                           (h0 > op->q_heads ? h0 : op->q_heads) - op->q_heads,
                           h1 - op->q_heads);
            continue;
        }
        if (row != built) {
            table = row_table(job, row, scratch, turns_hi);
            built = row;
        }
        if (h0 < op->q_heads)
            rotate_heads(job, table, &job->q_norm, &op->q, job->q_in, &op->q_out, job->q_out,
                         op->q_in_place, row, h0, h1 < op->q_heads ? h1 : op->q_heads, factors);
        if (h1 > op->q_heads) {
            int64_t k0 = (h0 > op->q_heads ? h0 : op->q_heads) - op->q_heads;
            if (op->k_out_written)
                rotate_heads(job, table, &job->k_norm, &op->k, job->k_in, &op->k_out,
                             job->k_out, op->k_in_place, row, k0, h1 - op->q_heads, factors);
            if (op->has_k_cache)
                write_cache(job, table, row, k0, h1 - op->q_heads, factors);
        }
    }
}

/* Rounded up to whole 64-byte lines. */
static size_t whole_lines(int64_t floats) { return ((size_t)floats + 15) & ~(size_t)15; }

/* The f32 weights (with the offset) of `norm`, into `out`; their floats. */
static size_t scale_weights(const rope_job *job, tensor_norm *norm, float *out)
{
    if (!norm->weights)
        return 0;
    const posenc__view *view = norm->view;
    posenc_cpu_norm_weights(job->state->kernels, norm->weights, view->dtype, view->strides[3],
                            view->shape[3], job->op->norm_weight_offset, out);
    norm->scaled = out;
    return whole_lines(view->shape[3]);
}

/* The most memory the kept tables take: 16,384 rows of 128-dim NeoX tables. */
#define KEPT_MAX_BYTES ((size_t)8 << 20)

/* The kept tables' layout for a row of `stride` floats: the rows' keys, then their tables
 * from the next whole line. */
static void kept_layout(posenc_cpu_context *state, size_t stride)
{
    size_t rows = state->kept ? (state->kept_bytes - 64) /
                                    (stride * sizeof(float) + sizeof(posenc_cpu_kept_row))
                              : 0;
    size_t keys_bytes = (rows * sizeof(posenc_cpu_kept_row) + 63) & ~(size_t)63;
    state->kept_stride = stride;
    state->kept_rows = rows;
    state->kept_tables = state->kept ? (float *)(void *)((uint8_t *)state->kept + keys_bytes)
                                     : NULL;
}

/* A model rotates q and k at the same positions in every layer, one call each: a prefill's
 * tokens, or a decode step's. The tables of a call's rows are kept in the context, and a later
 * call whose tables depend on the same things (the frequency table, scales, direction and
 * layout: posenc_cpu_kept_key) takes a row's table as it is where the row's position is the
 * one it was built at (row_table), sparing the turns and the sincos of every frequency: a
 * sixth of an f32 decode step with rotary_dim 128, and 5-9 % of a 16-bit prefill on an
 * AVX-512 Xeon (an f32 prefill there waits on memory either way). Kept for tables of plain
 * positions (one component, no caller tables, a frequency table with an id), for the rows
 * that fit in KEPT_MAX_BYTES, and only where no row is split between parts (each row's table
 * is written by one thread). Without memory for them, nothing is kept. */
static void keep_tables(posenc_cpu_context *state, rope_job *job, uint32_t parts)
{
    const posenc__rope_op *op = job->op;
    job->kept_rows = 0;
    if (job->run != ROPE_ROTATE || op->has_tables || op->components != 1 ||
        op->freqs_id == 0 || (parts > 1 && job->chunks > 1))
        return;
    const bool interleaved = rope_styles[op->style].interleaved_table;
    const bool spread = kept_spread(job);
    /* Compared from registers: a key struct written just before would make the compare wait
     * on its stores. */
    const uint32_t flags =
        1u | (interleaved ? 2u : 0u) | (op->inverse ? 4u : 0u) | (spread ? 8u : 0u);
    uint32_t scale;
    memcpy(&scale, &op->attention_factor, sizeof scale);
    posenc_cpu_kept_key *kept = &state->kept_key;
    if (kept->flags != flags || kept->rotary_dim != op->rotary_dim ||
        kept->freqs_id != op->freqs_id || kept->scale != scale) {
        if (state->kept)
            memset(state->kept, 0, state->kept_used * sizeof(posenc_cpu_kept_row));
        state->kept_used = 0;
        kept->flags = flags;
        kept->rotary_dim = op->rotary_dim;
        kept->freqs_id = op->freqs_id;
        kept->scale = scale;
        /* The spread table and the pairs' sin and cos, or cos and sin alone. */
        kept_layout(state, whole_lines((spread ? 3 : 1) * (int64_t)op->rotary_dim));
    }
    if ((size_t)job->rows > state->kept_rows && state->kept_bytes < KEPT_MAX_BYTES) {
        size_t row_bytes = state->kept_stride * sizeof(float) + sizeof(posenc_cpu_kept_row);
        size_t bytes = 2 * state->kept_bytes;
        if (bytes < (size_t)job->rows * row_bytes + 64)
            bytes = (size_t)job->rows * row_bytes + 64;
        if (bytes > KEPT_MAX_BYTES)
            bytes = KEPT_MAX_BYTES;
        posenc__aligned_free(state->kept);
        state->kept = posenc__aligned_alloc(64, bytes);
        state->kept_bytes = state->kept ? bytes : 0;
        state->kept_used = 0;
        /* Every key any layout may place (the shortest rows: a line of table each). */
        if (state->kept)
            memset(state->kept, 0,
                   bytes / (64 + sizeof(posenc_cpu_kept_row)) * sizeof(posenc_cpu_kept_row));
        kept_layout(state, state->kept_stride);
    }
    job->kept_keys = state->kept;
    job->kept_tables = state->kept_tables;
    job->kept_stride = state->kept_stride;
    job->kept_rows = job->rows < (int64_t)state->kept_rows ? job->rows
                                                           : (int64_t)state->kept_rows;
    if ((size_t)job->kept_rows > state->kept_used)
        state->kept_used = (size_t)job->kept_rows;
}

static posenc_status run_rope(posenc_context *ctx, const posenc__rope_op *op, rope_run run)
{
    posenc_cpu_context *state = ctx->backend_state;
    /* Table (2 rotary_dim), sin and cos (rotary_dim), turns (rotary_dim / 2); with the QK norm,
     * a factor per head, and the weights in f32 (read by every part from part 0's block). */
    bool normed = run == ROPE_ROTATE && (op->has_q_norm || op->has_k_norm);
    size_t scratch = 4 * (size_t)op->rotary_dim + 16;
    if (normed)
        scratch += whole_lines(op->q_heads > op->k_heads ? op->q_heads : op->k_heads) +
                   (op->has_q_norm ? whole_lines(op->q_norm_weight.shape[3]) : 0) +
                   (op->has_k_norm ? whole_lines(op->k_norm_weight.shape[3]) : 0);
    posenc_status status = posenc_cpu_reserve_scratch(ctx, scratch);
    posenc_cpu_freq_parts freqs = {NULL, NULL}; /* the yardsticks compute no angle */
    if (status == POSENC_OK && run == ROPE_ROTATE && !op->has_tables)
        status = posenc_cpu_split_freqs(ctx, op->freqs, op->rotary_dim / 2, op->freqs_id,
                                        &freqs);
    if (status != POSENC_OK)
        return status;

    /* Every field is set one by one: an initializer zeroes the whole struct first, which GCC
     * does with `rep stos`, whose start-up was a tenth of a small call's fixed cost on Zen 3. */
    rope_job job;
    job.op = op;
    job.state = state;
    job.freqs = freqs;
    job.q_in = posenc__view_host_base(ctx, &op->q);
    job.q_out = posenc__view_host_base(ctx, &op->q_out);
    job.k_in = op->has_k ? posenc__view_host_base(ctx, &op->k) : NULL;
    job.k_out = op->has_k ? posenc__view_host_base(ctx, &op->k_out) : NULL;
    job.positions = op->has_positions ? posenc__view_host_base(ctx, &op->positions) : NULL;
    job.slots = op->has_k_cache ? posenc__view_host_base(ctx, &op->slots) : NULL;
    job.k_cache = op->has_k_cache ? posenc__view_host_base(ctx, &op->k_cache) : NULL;
    job.v_in = op->has_v ? posenc__view_host_base(ctx, &op->v) : NULL;
    job.v_cache = op->has_v ? posenc__view_host_base(ctx, &op->v_cache) : NULL;
    job.cos = op->has_tables ? posenc__view_host_base(ctx, &op->cos) : NULL;
    job.sin = op->has_tables ? posenc__view_host_base(ctx, &op->sin) : NULL;
    job.q_norm = (tensor_norm){
        op->has_q_norm ? posenc__view_host_base(ctx, &op->q_norm_weight) : NULL, NULL,
        &op->q_norm_weight, op->q_norm_per_token, op->q_heads};
    job.k_norm = (tensor_norm){
        op->has_k_norm ? posenc__view_host_base(ctx, &op->k_norm_weight) : NULL, NULL,
        &op->k_norm_weight, op->k_norm_per_token, op->k_heads};
    job.rows = op->batch * op->tokens;
    job.heads = op->q_heads + (op->has_k ? op->k_heads : 0);
    job.sin_scale = op->inverse ? -op->attention_factor : op->attention_factor;
    job.cos_scale = op->attention_factor;
    job.run = run;
    if (normed) {
        float *weights = state->scratch[0] + 4 * (size_t)op->rotary_dim + 16 +
                         whole_lines(op->q_heads > op->k_heads ? op->q_heads : op->k_heads);
        weights += scale_weights(&job, &job.q_norm, weights);
        scale_weights(&job, &job.k_norm, weights);
    }

    uint64_t elements = (uint64_t)(job.rows * job.heads * op->head_dim);
    uint64_t bytes = elements * posenc__dtype_size(op->q.dtype) * 2;
    job.streaming = bytes > STREAMING_BYTES;
    uint32_t parts = posenc_cpu_parts_for(state, bytes, (uint64_t)(job.rows * job.heads));
    /* Few tokens for many threads: split each token's heads too (whole rows otherwise, with
     * no division). */
    job.chunk = job.heads;
    job.chunks = 1;
    bool per_token_norm = op->q_norm_per_token || op->k_norm_per_token;
    if (parts > 1 && job.rows < 4 * (int64_t)parts && !per_token_norm) {
        int64_t chunks = (4 * (int64_t)parts + job.rows - 1) / job.rows;
        if (chunks > job.heads)
            chunks = job.heads;
        job.chunk = (job.heads + chunks - 1) / chunks;
        job.chunks = (job.heads + job.chunk - 1) / job.chunk;
    }
    keep_tables(state, &job, parts);
    posenc_cpu_pool_run(state->pool, parts, bytes, rope_part, &job);
    return POSENC_OK;
}

posenc_status posenc_cpu_rope(posenc_context *ctx, const posenc__rope_op *op)
{
    return run_rope(ctx, op, ROPE_ROTATE);
}

posenc_status posenc_cpu_rope_roofline(posenc_context *ctx, const posenc__rope_op *op)
{
    return run_rope(ctx, op, ROPE_COPY);
}

posenc_status posenc_cpu_rope_conversion_floor(posenc_context *ctx, const posenc__rope_op *op)
{
    int64_t element = (int64_t)posenc__dtype_size(op->q.dtype);
    if (op->q.dtype == POSENC_DTYPE_F32)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "q.dtype: the 16-bit floor converts f16 or bf16, not f32");
    bool q_fits = op->q_in_place && op->q_out.strides[3] == element;
    bool k_fits = !op->has_k || (op->k_in_place && op->k_out.strides[3] == element);
    if (!q_fits || !k_fits)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "%s: the 16-bit floor takes tensors rotated in place with contiguous "
                            "dims",
                            q_fits ? "k" : "q");
    if (op->rotary_dim != op->head_dim || op->has_k_cache)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "%s: the 16-bit floor takes whole heads and no KV cache",
                            op->has_k_cache ? "k_cache" : "rotary_dim");
    return run_rope(ctx, op, ROPE_CONVERT);
}
