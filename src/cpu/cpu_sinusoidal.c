/* SPDX-License-Identifier: MIT */
/* Sinusoidal tables and their addition into embeddings on the CPU.
 *
 * Rows at consecutive positions (no positions tensor, contiguous rows) come from exact values
 * by one angle addition: each block of BLOCK_ROWS rows has an anchor row a in its middle, and
 * row a + k or a - k (|k| <= MAX_STEP) is PE(a) rotated by the step +-k, with PE(a) and
 * sin/cos(k f_i) (the step table, kept in the context until the frequencies change) both
 * computed exactly. No row is more than one rotation away from exact values, so the error stays
 * within the promise (cpu_simd.h) however long the table, and a table costs BLOCK_ROWS times
 * fewer sin/cos evaluations. The rows a + k and a - k share the products of their rotation, so
 * the kernel writes both from one set of multiplications, with the anchor in registers, for
 * GROUP_STEPS steps at a time. Rows at given positions (or strided rows) are computed exactly,
 * one by one. A row's values are shared by every batch unless positions differ per batch. Work
 * is split over rows.
 */
#include "core/platform.h"
#include "cpu/cpu_internal.h"

#include <math.h>

#define BLOCK_ROWS 64
#define MAX_STEP (BLOCK_ROWS / 2) /* steps 0 .. MAX_STEP */
/* Steps given to the kernel in one call: each writes a row after the anchor and one before.
 * The kernel runs through them two at a time (four rows side by side, cpu_simd_sinusoidal.h);
 * more per call only spares calls (one core, 4096 x 1024 f32 in L2: 60 GB/s with 16, 55 with
 * 2). */
#define GROUP_STEPS 16

/* Arrays read next to each other start 64 bytes (16 floats) apart modulo 4 KiB, so that their
 * loads are not taken for loads of a just-stored address (a d_model of 1024 makes every row,
 * step and half a multiple of 4 KiB otherwise). */
static size_t padded(uint32_t half) { return (((size_t)half + 15) & ~(size_t)15) + 16; }
static size_t step_stride(uint32_t half) { return 2 * padded(half) + 16; }

typedef struct sinusoidal_job {
    const posenc__sinusoidal_op *op;
    const posenc_cpu_context *state;
    posenc_cpu_freq_parts freqs; /* op->freqs split (NULLs for the yardstick) */
    uint8_t *out;
    const uint8_t *x, *positions;
    bool shared;   /* PE depends on the row only: computed once, written to every batch */
    bool stepped;  /* rows from anchors and the step table */
    int64_t units; /* rows (shared) or batch * rows */
    bool copy;     /* the yardstick: write (or read and write back) the rows, no values */
    bool direct;   /* rows the sin/cos kernel writes itself where aligned (direct_row) */
} sinusoidal_job;

/* The columns of frequency i's sin and cos in each layout. */
static void columns(posenc_sinusoidal_layout layout, uint32_t half, uint32_t i, int64_t *sin_col,
                    int64_t *cos_col)
{
    switch (layout) {
    case POSENC_SINUSOIDAL_SIN_COS:
        *sin_col = i;
        *cos_col = (int64_t)half + i;
        break;
    case POSENC_SINUSOIDAL_COS_SIN:
        *cos_col = i;
        *sin_col = (int64_t)half + i;
        break;
    default:
        *sin_col = 2 * (int64_t)i;
        *cos_col = 2 * (int64_t)i + 1;
        break;
    }
}

static void emit_value(const sinusoidal_job *job, int64_t b, int64_t r, int64_t col, float pe)
{
    const posenc__sinusoidal_op *op = job->op;
    float value = op->output_scale * pe;
    if (op->has_x)
        value += posenc_cpu_load(posenc_cpu_element((uint8_t *)job->x, &op->x, 0, b, r, col),
                                 op->x.dtype) *
                 op->input_scale;
    posenc_cpu_store(posenc_cpu_element(job->out, &op->out, 0, b, r, col), op->out.dtype, value);
}

/* One row through a strided innermost dim, from its values by frequency. */
static void emit_strided(const sinusoidal_job *job, int64_t b, int64_t r, const float *sin_row,
                         const float *cos_row)
{
    const posenc__sinusoidal_op *op = job->op;
    for (uint32_t i = 0; i < op->half; i++) {
        int64_t sin_col, cos_col;
        columns(op->layout, op->half, i, &sin_col, &cos_col);
        emit_value(job, b, r, sin_col, sin_row[i]);
        emit_value(job, b, r, cos_col, cos_row[i]);
    }
    if (op->d_model % 2) /* an odd d_model ends in a zero column */
        emit_value(job, b, r, op->d_model - 1, 0.0f);
}

static bool contiguous(const posenc__sinusoidal_op *op)
{
    int64_t element = (int64_t)posenc__dtype_size(op->out.dtype);
    return op->out.strides[3] == element && (!op->has_x || op->x.strides[3] == element);
}

/* Row `row` of batch b from its own values (steps NULL, count 1), or from the anchor's values
 * rotated by steps first_step .. first_step + count: rows row, row + 1, ... by +step (row < 0:
 * none) and rows back_row, back_row - 1, ... by -step (back_row < 0: none). Only contiguous
 * rows are stepped. */
static void emit_rows(const sinusoidal_job *job, int64_t b, int64_t row, int64_t back_row,
                      uint32_t count, const float *sin_row, const float *cos_row,
                      const float *steps, uint32_t first_step)
{
    const posenc__sinusoidal_op *op = job->op;
    if (!contiguous(op)) {
        emit_strided(job, b, row, sin_row, cos_row);
        return;
    }
    posenc_cpu_sinusoidal_rows args = {
        .sin = sin_row,
        .cos = cos_row,
        .steps = steps,
        .step_stride = step_stride(op->half),
        .step_sin_offset = padded(op->half),
        .first_step = first_step,
        .rows = count,
        .half = op->half,
        .d_model = op->d_model,
        .layout = op->layout,
        .dtype = op->out.dtype,
        .out = row >= 0 ? posenc_cpu_element(job->out, &op->out, 0, b, row, 0) : NULL,
        .back_out = back_row >= 0 ? posenc_cpu_element(job->out, &op->out, 0, b, back_row, 0)
                                  : NULL,
        .out_row_stride = op->out.strides[2],
        .x = op->has_x && row >= 0 ? posenc_cpu_element((uint8_t *)job->x, &op->x, 0, b, row, 0)
                                   : NULL,
        .back_x = op->has_x && back_row >= 0
                      ? posenc_cpu_element((uint8_t *)job->x, &op->x, 0, b, back_row, 0)
                      : NULL,
        .x_row_stride = op->has_x ? op->x.strides[2] : 0,
        .input_scale = op->input_scale,
        .output_scale = op->output_scale,
    };
    job->state->kernels->sinusoidal_rows(&args);
}

/* The rows [lo, hi) of the block starting at `block`, of every batch, from the block's anchor
 * (whose values are in sin_row, cos_row). */
static void emit_block(const sinusoidal_job *job, int64_t anchor, int64_t lo, int64_t hi,
                       const float *sin_row, const float *cos_row)
{
    const posenc__sinusoidal_op *op = job->op;
    /* Steps k of the rows anchor + k in [lo, hi), k in [f0, f1), and of the rows anchor - k,
     * k >= 1, in [b0, b1): empty ranges have their ends equal. */
    int64_t f0 = lo > anchor ? lo - anchor : 0, f1 = hi > anchor ? hi - anchor : 0;
    int64_t b0 = anchor - hi + 1 > 1 ? anchor - hi + 1 : 1, b1 = anchor - lo + 1;
    if (f1 < f0)
        f1 = f0;
    if (b1 < b0)
        b1 = b0;
    int64_t k = f0 < f1 ? f0 : b0, end = f1 > b1 ? f1 : b1;
    if (b0 < b1 && b0 < k)
        k = b0;
    const int64_t edges[4] = {f0, f1, b0, b1};
    while (k < end) {
        bool forward = k >= f0 && k < f1, back = k >= b0 && k < b1;
        int64_t next = k + GROUP_STEPS < end ? k + GROUP_STEPS : end;
        for (int e = 0; e < 4; e++) /* a group is all pairs or all single rows */
            if (edges[e] > k && edges[e] < next)
                next = edges[e];
        if (forward || back) {
            for (int64_t b = 0; b < op->batch; b++)
                emit_rows(job, b, forward ? anchor + k : -1, back ? anchor - k : -1,
                          (uint32_t)(next - k), sin_row, cos_row, job->state->steps,
                          (uint32_t)k);
        }
        k = next;
    }
}

/* The yardstick's counterpart of emit_rows: row r of batch b written with the copy kernel of
 * the variant (read and written back where the encoding is added into `out` in place). */
static void copy_row(const sinusoidal_job *job, int64_t b, int64_t r)
{
    const posenc__sinusoidal_op *op = job->op;
    const posenc_cpu_kernels *kernels = job->state->kernels;
    uint8_t *out = posenc_cpu_element(job->out, &op->out, 0, b, r, 0);
    size_t element = posenc__dtype_size(op->out.dtype), bytes = (size_t)op->d_model * element;
    bool in_place = op->has_x && job->x == job->out &&
                    !memcmp(op->x.strides, op->out.strides, sizeof op->x.strides);
    if (!contiguous(op) || (uintptr_t)out % 4) {
        for (int64_t d = 0; d < op->d_model; d++) {
            uint8_t *p = out + d * op->out.strides[3];
            posenc_cpu_store(p, op->out.dtype, in_place ? posenc_cpu_load(p, op->out.dtype) : 0.0f);
        }
        return;
    }
    if (in_place)
        kernels->copy_in_place((float *)(void *)out, bytes / 4);
    else
        kernels->fill((float *)(void *)out, bytes / 4, 0.0f);
    if (bytes % 4) /* an odd d_model of 16-bit values: the last one */
        memset(out + bytes - 2, 0, 2);
}

/* Whether the sin/cos kernel can write the rows itself: f32 rows, contiguous, sin and cos in
 * halves, nothing added, written to one batch only. Rows at given positions (diffusion
 * timesteps) then skip a pass over the row through the scratch: the same values, as the kernel
 * scales by output_scale as emit does. */
static bool direct_rows(const sinusoidal_job *job)
{
    const posenc__sinusoidal_op *op = job->op;
    return op->out.dtype == POSENC_DTYPE_F32 && !op->has_x && contiguous(op) &&
           op->layout != POSENC_SINUSOIDAL_INTERLEAVED && !(job->shared && op->batch > 1);
}

/* Row r of batch b as a place the sin/cos kernel writes itself (job->direct), or NULL: the row
 * must be aligned too. */
static float *direct_row(const sinusoidal_job *job, int64_t b, int64_t r)
{
    if (!job->direct)
        return NULL;
    uint8_t *row = posenc_cpu_element(job->out, &job->op->out, 0, b, r, 0);
    return (uintptr_t)row % sizeof(float) ? NULL : (float *)(void *)row;
}

static void sinusoidal_part(void *arg, uint32_t part, uint32_t parts)
{
    const sinusoidal_job *job = arg;
    const posenc__sinusoidal_op *op = job->op;
    const posenc_cpu_kernels *kernels = job->state->kernels;
    const uint32_t half = op->half;
    /* Scratch: sin and cos by frequency, then the turns. */
    float *sin_row = job->state->scratch[part], *cos_row = sin_row + padded(half);
    uint32_t *turns_hi = (uint32_t *)(cos_row + padded(half));

    uint64_t first, end;
    posenc_cpu_part_range((uint64_t)job->units, part, parts, &first, &end);
    if (job->copy) {
        for (uint64_t unit = first; unit < end; unit++) {
            int64_t r = job->shared ? (int64_t)unit : (int64_t)unit % op->rows;
            int64_t b = job->shared ? 0 : (int64_t)unit / op->rows;
            int64_t b_end = job->shared ? op->batch : b + 1;
            for (; b < b_end; b++)
                copy_row(job, b, r);
        }
        return;
    }
    if (job->stepped) { /* rows first .. end, shared by every batch */
        for (int64_t block = (int64_t)first / BLOCK_ROWS * BLOCK_ROWS; block < (int64_t)end;
             block += BLOCK_ROWS) {
            /* The anchor in the middle of the block (of the table's rows, not the part's, so
             * every row is computed the same way however the rows are split). */
            int64_t length = op->rows - block < BLOCK_ROWS ? op->rows - block : BLOCK_ROWS;
            int64_t anchor = block + length / 2;
            posenc_cpu_sincos_row(kernels, &job->freqs, half,
                                  posenc__position_from_i32(
                                      (int32_t)(op->position_offset + anchor)),
                                  true, 1.0f, 1.0f, turns_hi, sin_row, cos_row);
            emit_block(job, anchor, block > (int64_t)first ? block : (int64_t)first,
                       block + length < (int64_t)end ? block + length : (int64_t)end, sin_row,
                       cos_row);
        }
        return;
    }
    for (uint64_t unit = first; unit < end; unit++) {
        int64_t b = job->shared ? 0 : (int64_t)unit / op->rows;
        int64_t r = job->shared ? (int64_t)unit : (int64_t)unit % op->rows;
        int64_t position;
        bool valid = posenc_cpu_position(job->positions, &op->positions, op->has_positions,
                                         op->positions_per_batch, op->position_offset, b, r,
                                         &position);
        float *row = direct_row(job, b, r);
        if (row) {
            bool sin_first = op->layout == POSENC_SINUSOIDAL_SIN_COS;
            float scale = op->output_scale;
            posenc_cpu_sincos_row(kernels, &job->freqs, half, position, valid, scale, scale,
                                  turns_hi, sin_first ? row : row + half,
                                  sin_first ? row + half : row);
            if (op->d_model > 2 * (int64_t)half) /* odd d_model: the zero column */
                row[2 * half] = 0.0f * scale;
            continue;
        }
        posenc_cpu_sincos_row(kernels, &job->freqs, half, position, valid, 1.0f, 1.0f,
                              turns_hi, sin_row, cos_row);
        if (job->shared) {
            for (int64_t bb = 0; bb < op->batch; bb++)
                emit_rows(job, bb, r, -1, 1, sin_row, cos_row, NULL, 0);
        } else {
            emit_rows(job, b, r, -1, 1, sin_row, cos_row, NULL, 0);
        }
    }
}

/* sin/cos(k f_i) for k <= MAX_STEP: step k is cos(k f_i) then sin(k f_i), `half` each. Kept
 * until the frequencies change. */
static posenc_status prepare_steps(posenc_context *ctx, const posenc__sinusoidal_op *op,
                                   const posenc_cpu_freq_parts *freqs)
{
    posenc_cpu_context *state = ctx->backend_state;
    if (op->freqs_id && state->step_freqs_id == op->freqs_id && state->step_half == op->half)
        return POSENC_OK;
    const uint32_t half = op->half;
    size_t floats = (MAX_STEP + 1) * step_stride(half);
    if (floats > state->steps_floats) {
        float *grown = posenc__aligned_alloc(64, floats * sizeof *grown);
        if (!grown)
            return posenc__fail(ctx, POSENC_OUT_OF_MEMORY,
                                "scratch: cannot allocate %zu bytes", floats * sizeof *grown);
        posenc__aligned_free(state->steps);
        state->steps = grown;
        state->steps_floats = floats;
    }
    uint32_t *turns_hi = (uint32_t *)state->scratch[0];
    for (uint32_t k = 0; k <= MAX_STEP; k++) {
        float *step = state->steps + k * step_stride(half);
        posenc_cpu_sincos_row(state->kernels, freqs, half,
                              posenc__position_from_i32((int32_t)k), true, 1.0f, 1.0f, turns_hi,
                              step + padded(half), step);
    }
    state->step_freqs_id = op->freqs_id;
    state->step_half = half;
    return POSENC_OK;
}

static posenc_status run_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op,
                                    bool copy)
{
    posenc_cpu_context *state = ctx->backend_state;
    posenc_status status = posenc_cpu_reserve_scratch(ctx, 2 * padded(op->half) + op->half);
    if (status != POSENC_OK)
        return status;

    sinusoidal_job job = {
        .op = op,
        .state = state,
        .out = posenc__view_host_base(ctx, &op->out),
        .x = op->has_x ? posenc__view_host_base(ctx, &op->x) : NULL,
        .positions = op->has_positions ? posenc__view_host_base(ctx, &op->positions) : NULL,
        .shared = !op->positions_per_batch,
        .copy = copy,
    };
    job.units = job.shared ? op->rows : op->batch * op->rows;
    job.stepped = !op->has_positions && op->rows >= BLOCK_ROWS && op->half > 0 && contiguous(op);
    job.direct = direct_rows(&job);
    if (!copy) {
        status = posenc_cpu_split_freqs(ctx, op->freqs, op->half, op->freqs_id, &job.freqs);
        if (status == POSENC_OK && job.stepped)
            status = prepare_steps(ctx, op, &job.freqs);
        if (status != POSENC_OK)
            return status;
    }

    /* Memory traffic, plus the sin/cos evaluated exactly (about 32 bytes' worth each). */
    uint64_t elements = (uint64_t)(op->batch * op->rows * op->d_model);
    uint64_t bytes = elements * posenc__dtype_size(op->out.dtype) * (op->has_x ? 2 : 1);
    if (!job.stepped)
        bytes += (uint64_t)job.units * op->half * 32;
    uint32_t parts = posenc_cpu_parts_for(state, bytes, (uint64_t)job.units);
    posenc_cpu_pool_run(state->pool, parts, bytes, sinusoidal_part, &job);
    return POSENC_OK;
}

posenc_status posenc_cpu_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    return run_sinusoidal(ctx, op, false);
}

posenc_status posenc_cpu_sinusoidal_roofline(posenc_context *ctx,
                                             const posenc__sinusoidal_op *op)
{
    return run_sinusoidal(ctx, op, true);
}
