/* SPDX-License-Identifier: MIT */
/* posenc_sinusoidal on OpenCL: one launch of shaders/sinusoidal.cl (its header documents the
 * arguments). */
#include "opencl/cl_internal.h"

#include "core/gpu_sinusoidal.h"

/* sinusoidal_contiguous.cl's vector width in frequencies (half_count a multiple of it), and the
 * most a work-item takes (for rows at the row index; one width for rows at given positions). */
#define CONTIGUOUS_FREQUENCIES 8
#define CONTIGUOUS_UNIT_FREQUENCIES 16

/* Whether sinusoidal_contiguous.cl applies: a CPU-type device (GPUs keep sinusoidal.cl's one
 * frequency per work-item) and a layout it takes. */
static bool contiguous_applies(const posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    return ctx->device->info.type == POSENC_DEVICE_CPU &&
           posenc__gpu_sinusoidal_contiguous(op, CONTIGUOUS_FREQUENCIES);
}

static posenc_status sinusoidal_launch(posenc_context *ctx, const posenc_cl_op *run,
                                       const posenc_cl_kernel *kernel, cl_uint wait_count,
                                       const cl_event *wait_list, cl_event *event)
{
    const posenc__sinusoidal_op *op = run->op;
    /* The contiguous kernel takes a block of frequencies of a block of rows (of one row at given
     * positions) a unit. */
    uint64_t row_run = op->has_positions ? 1 : POSENC_SINUSOIDAL_BLOCK_ROWS;
    uint64_t runs = ((uint64_t)op->rows + row_run - 1) / row_run;
    uint64_t unit_frequencies = op->has_positions ? CONTIGUOUS_FREQUENCIES
                                                  : CONTIGUOUS_UNIT_FREQUENCIES;
    uint64_t launched = contiguous_applies(ctx, op)
                            ? ((uint64_t)op->half + unit_frequencies - 1) / unit_frequencies *
                                  (uint64_t)op->batch * runs
                            : posenc__gpu_sinusoidal_units(op, op->batch * op->rows);
    enum { OUT, X, POSITIONS };
    posenc_cl_binding b[POSENC__SINUSOIDAL_VIEWS];
    posenc_cl_staging staging = {0};
    cl_mem freqs = NULL;
    posenc_status status = posenc__gpu_sinusoidal_check_launch(ctx, "OpenCL", op);
    if (status == POSENC_OK)
        status = posenc_cl_stage_op(ctx, run, event != NULL, b, &staging, &freqs);
    if (status != POSENC_OK)
        return status;
    posenc__gpu_box box = {.count = {op->batch, op->rows, 1}};
    uint32_t first[POSENC__SINUSOIDAL_VIEWS] = {b[OUT].offset, b[X].offset, b[POSITIONS].offset};
    posenc__sinusoidal_params params;
    posenc__gpu_sinusoidal_params(op, op->has_x && !run->gpu.views[X], &box, first, &params);

    return posenc_cl_run(ctx, kernel, launched, "sinusoidal", b, POSENC__SINUSOIDAL_VIEWS, freqs,
                         &params, sizeof params, 4, &staging, wait_count, wait_list, event);
}

/* The kernel: by out's dtype, and on CPU-type devices the contiguous variant where the layout
 * allows it. */
static posenc__cl_id sinusoidal_kernel(const posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    bool contiguous = contiguous_applies(ctx, op);
    switch (op->out.dtype) {
    case POSENC_DTYPE_F16:
        return contiguous ? POSENC__CL_SINUSOIDAL_CONTIGUOUS_F16 : POSENC__CL_SINUSOIDAL_F16;
    case POSENC_DTYPE_BF16:
        return contiguous ? POSENC__CL_SINUSOIDAL_CONTIGUOUS_BF16 : POSENC__CL_SINUSOIDAL_BF16;
    default: return contiguous ? POSENC__CL_SINUSOIDAL_CONTIGUOUS_F32 : POSENC__CL_SINUSOIDAL_F32;
    }
}

posenc_cl_op posenc_cl_sinusoidal_op(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    posenc_cl_op run = {
        .kernel = sinusoidal_kernel(ctx, op), .launch = sinusoidal_launch, .op = op};
    posenc__gpu_sinusoidal_op(ctx, op, &run.gpu);
    /* Rows at the row index come from anchors and the table's steps there: a CPU device's
     * work-item took most of its time on the sin/cos of every element, where the native CPU
     * path takes one per block of rows. */
    if (contiguous_applies(ctx, op) && !op->has_positions)
        run.gpu.table.steps = POSENC_SINUSOIDAL_STEPS;
    return run;
}
