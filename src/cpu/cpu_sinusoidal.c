/* Sinusoidal tables and their addition into embeddings on the CPU.
 *
 * Rows at consecutive positions (no positions tensor) come from exact values by one angle
 * addition: row r = a + k (k = r mod STEP_ROWS) is the anchor row PE(a) rotated by the step k,
 * with PE(a) and sin/cos(k f_i) (the step table, kept in the context until the frequencies
 * change) both computed exactly. No row is more than one rotation away from exact values, so
 * the error stays within the promise (cpu_simd.h) however long the table, and a table costs
 * STEP_ROWS times fewer sin/cos evaluations. The kernel keeps the anchor in registers while it
 * writes GROUP_ROWS rows. Rows at given positions are computed exactly, one by one. A row's
 * values are shared by every batch unless positions differ per batch. Work is split over rows.
 */
#include "core/platform.h"
#include "cpu/cpu_internal.h"

#include <math.h>

#define STEP_ROWS 64
/* Rows computed together from one anchor, its values kept in registers. */
#define GROUP_ROWS 4

/* Arrays read next to each other start 64 bytes (16 floats) apart modulo 4 KiB, so that their
 * loads are not taken for loads of a just-stored address (a d_model of 1024 makes every row,
 * step and half a multiple of 4 KiB otherwise). */
static size_t padded(uint32_t half) { return (((size_t)half + 15) & ~(size_t)15) + 16; }
static size_t step_stride(uint32_t half) { return 2 * padded(half) + 16; }

typedef struct sinusoidal_job {
    const posenc__sinusoidal_op *op;
    const posenc_cpu_context *state;
    uint8_t *out;
    const uint8_t *x, *positions;
    bool shared;   /* PE depends on the row only: computed once, written to every batch */
    bool stepped;  /* rows from anchors and the step table */
    int64_t units; /* rows (shared) or batch * rows */
    bool copy;     /* the yardstick: write (or read and write back) the rows, no values */
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
    int64_t element = (int64_t)posenc_dtype_size(op->out.dtype);
    return op->out.strides[3] == element && (!op->has_x || op->x.strides[3] == element);
}

/* Rows r .. r + count of batch b, from their own values (steps NULL, count 1) or from the
 * anchor's rotated by steps first_step .. first_step + count. `scratch`: 2 * half floats. */
static void emit_rows(const sinusoidal_job *job, int64_t b, int64_t r, uint32_t count,
                      const float *sin_row, const float *cos_row, const float *steps,
                      uint32_t first_step, float *scratch)
{
    const posenc__sinusoidal_op *op = job->op;
    const uint32_t half = op->half;
    if (!contiguous(op)) {
        for (uint32_t k = 0; k < count; k++) {
            const float *s = sin_row, *c = cos_row;
            if (steps) {
                const float *step = steps + (first_step + k) * step_stride(half);
                job->state->kernels->rotate(sin_row, cos_row, step + padded(half), step, half,
                                            scratch, scratch + half);
                s = scratch;
                c = scratch + half;
            }
            emit_strided(job, b, r + k, s, c);
        }
        return;
    }
    posenc_cpu_sinusoidal_rows args = {
        .sin = sin_row,
        .cos = cos_row,
        .steps = steps,
        .step_stride = step_stride(half),
        .step_sin_offset = padded(half),
        .first_step = first_step,
        .rows = count,
        .half = half,
        .d_model = op->d_model,
        .layout = op->layout,
        .dtype = op->out.dtype,
        .out = posenc_cpu_element(job->out, &op->out, 0, b, r, 0),
        .out_row_stride = op->out.strides[2],
        .x = op->has_x ? posenc_cpu_element((uint8_t *)job->x, &op->x, 0, b, r, 0) : NULL,
        .x_row_stride = op->has_x ? op->x.strides[2] : 0,
        .input_scale = op->input_scale,
        .output_scale = op->output_scale,
    };
    job->state->kernels->sinusoidal_rows(&args);
}

/* The yardstick's counterpart of emit_rows: row r of batch b written with the copy kernel of
 * the variant (read and written back where the encoding is added into `out` in place). */
static void copy_row(const sinusoidal_job *job, int64_t b, int64_t r)
{
    const posenc__sinusoidal_op *op = job->op;
    const posenc_cpu_kernels *kernels = job->state->kernels;
    uint8_t *out = posenc_cpu_element(job->out, &op->out, 0, b, r, 0);
    size_t element = posenc_dtype_size(op->out.dtype), bytes = (size_t)op->d_model * element;
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

static void sinusoidal_part(void *arg, uint32_t part, uint32_t parts)
{
    const sinusoidal_job *job = arg;
    const posenc__sinusoidal_op *op = job->op;
    const posenc_cpu_kernels *kernels = job->state->kernels;
    const uint32_t half = op->half;
    /* Scratch: sin and cos by frequency, a strided row's rotated values, the turns. */
    float *sin_row = job->state->scratch[part], *cos_row = sin_row + padded(half);
    float *rotated = cos_row + padded(half);
    uint32_t *turns_hi = (uint32_t *)(rotated + 2 * (size_t)half);

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
        int64_t anchor = -1;
        for (int64_t r = (int64_t)first; r < (int64_t)end;) {
            int64_t k = r % STEP_ROWS;
            int64_t group_end = r - k + STEP_ROWS;
            if (group_end > r + GROUP_ROWS)
                group_end = r + GROUP_ROWS;
            if (group_end > (int64_t)end)
                group_end = (int64_t)end;
            if (r - k != anchor) {
                anchor = r - k;
                posenc_cpu_sincos_row(kernels, op->freqs, half,
                                      posenc__position_from_i32(
                                          (int32_t)(op->position_offset + anchor)),
                                      true, 1.0f, 1.0f, turns_hi, sin_row, cos_row);
            }
            for (int64_t b = 0; b < op->batch; b++)
                emit_rows(job, b, r, (uint32_t)(group_end - r), sin_row, cos_row,
                          job->state->steps, (uint32_t)k, rotated);
            r = group_end;
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
        posenc_cpu_sincos_row(kernels, op->freqs, half, position, valid, 1.0f, 1.0f, turns_hi,
                              sin_row, cos_row);
        if (job->shared) {
            for (int64_t bb = 0; bb < op->batch; bb++)
                emit_rows(job, bb, r, 1, sin_row, cos_row, NULL, 0, rotated);
        } else {
            emit_rows(job, b, r, 1, sin_row, cos_row, NULL, 0, rotated);
        }
    }
}

/* sin/cos(k f_i) for k < STEP_ROWS: step k is cos(k f_i) then sin(k f_i), `half` each. Kept
 * until the frequencies change. */
static posenc_status prepare_steps(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    posenc_cpu_context *state = ctx->backend_state;
    if (op->freqs_id && state->step_freqs_id == op->freqs_id && state->step_half == op->half)
        return POSENC_OK;
    const uint32_t half = op->half;
    size_t floats = STEP_ROWS * step_stride(half);
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
    for (uint32_t k = 0; k < STEP_ROWS; k++) {
        float *step = state->steps + k * step_stride(half);
        posenc_cpu_sincos_row(state->kernels, op->freqs, half,
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
    posenc_status status = posenc_cpu_reserve_scratch(ctx, 2 * padded(op->half) + 3 * (size_t)op->half);
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
    job.stepped = !op->has_positions && op->rows >= STEP_ROWS && op->half > 0;
    if (job.stepped) {
        status = prepare_steps(ctx, op);
        if (status != POSENC_OK)
            return status;
    }

    /* Memory traffic, plus the sin/cos evaluated exactly (about 32 bytes' worth each). */
    uint64_t elements = (uint64_t)(op->batch * op->rows * op->d_model);
    uint64_t bytes = elements * posenc_dtype_size(op->out.dtype) * (op->has_x ? 2 : 1);
    if (!job.stepped)
        bytes += (uint64_t)job.units * op->half * 32;
    uint32_t parts = posenc_cpu_parts_for(state, bytes, (uint64_t)job.units);
    posenc_cpu_pool_run(state->pool, parts, sinusoidal_part, &job);
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
