/* SPDX-License-Identifier: MIT */
/* posenc_sinusoidal on OpenCL: one launch of shaders/sinusoidal.cl (its header documents the
 * arguments). */
#include "opencl/cl_internal.h"

#include "posenc_kernel_params.h"

#include "core/op_views.h"

/* The layout bits of the flags are posenc_sinusoidal_layout's values. */
_Static_assert(POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED == POSENC_SINUSOIDAL_INTERLEAVED &&
                   POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS == POSENC_SINUSOIDAL_SIN_COS,
               "sinusoidal layouts");

/* Frequencies a work-item of sinusoidal_contiguous.cl takes (its vector width). */
#define CONTIGUOUS_FREQUENCIES 8

/* Whether sinusoidal_contiguous.cl applies: a CPU-type device (GPUs keep sinusoidal.cl's one
 * frequency per work-item), whole blocks of frequencies, columns one element apart in out and
 * x. */
static bool contiguous_applies(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    if (ctx->device->info.type != POSENC_DEVICE_CPU)
        return false;
    if (op->half == 0 || op->half % CONTIGUOUS_FREQUENCIES != 0)
        return false;
    const posenc__view *views[POSENC__SINUSOIDAL_VIEWS];
    posenc__sinusoidal_views(ctx, op, views);
    enum { OUT, X };
    for (int i = OUT; i <= X; i++) {
        if (views[i] && views[i]->strides[3] != (int64_t)posenc_dtype_size(views[i]->dtype))
            return false;
    }
    return true;
}

posenc__cl_id posenc_cl_sinusoidal_kernel_id(posenc_context *ctx,
                                             const posenc__sinusoidal_op *op)
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

posenc_status posenc_cl_sinusoidal_run(posenc_context *ctx, const posenc__sinusoidal_op *op,
                                       cl_uint wait_count, const cl_event *wait_list,
                                       cl_event *event)
{
    const posenc_cl_kernel *kernel = NULL;
    bool contiguous = contiguous_applies(ctx, op);
    posenc_status status =
        posenc_cl_kernel_get(ctx, posenc_cl_sinusoidal_kernel_id(ctx, op), &kernel);
    if (status != POSENC_OK)
        return status;

    uint64_t units = ((uint64_t)op->half + (uint64_t)(op->d_model % 2)) * (uint64_t)op->batch *
                     (uint64_t)op->rows;
    /* The limit is sinusoidal.cl's; the contiguous kernel takes a block of frequencies of a
     * run of rows (of one row at given positions) a unit. */
    uint64_t run = op->has_positions ? 1 : POSENC_SINUSOIDAL_ROW_RUN;
    uint64_t runs = ((uint64_t)op->rows + run - 1) / run;
    uint64_t launched = contiguous ? (uint64_t)op->half / CONTIGUOUS_FREQUENCIES *
                                         (uint64_t)op->batch * runs
                                   : units;
    if (units > UINT32_MAX || (uint64_t)op->d_model > UINT32_MAX)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "out.shape: %lld x %lld x %lld is more work than one OpenCL launch "
                            "indexes (2^32 units)",
                            (long long)op->batch, (long long)op->rows, (long long)op->d_model);

    const posenc__view *views[POSENC__SINUSOIDAL_VIEWS];
    unsigned access[POSENC__SINUSOIDAL_VIEWS];
    posenc__sinusoidal_views(ctx, op, views);
    posenc__sinusoidal_view_access(op, views, access);
    enum { OUT, X, POSITIONS };
    posenc_cl_binding b[POSENC__SINUSOIDAL_VIEWS];
    posenc_cl_staging staging = {0};
    posenc_cl_stage_views(&staging, views, access, posenc__sinusoidal_view_names,
                          POSENC__SINUSOIDAL_VIEWS, b);
    status = posenc_cl_stage_in(ctx, &staging);
    if (status == POSENC_OK && event && posenc__gpu_stage_has_host(&staging.plan))
        status = posenc__fail(ctx, POSENC_INTERNAL,
                              "sinusoidal: host memory in work left running");
    cl_mem freqs = NULL;
    if (status == POSENC_OK)
        status = posenc_cl_freqs_get(ctx, op->freqs, op->half, op->freqs_id, "sinusoidal",
                                     &freqs);
    if (status != POSENC_OK) {
        posenc_cl_stage_release(ctx, &staging);
        return status;
    }
    /* x added into out itself is out; unused arguments still need a buffer. */
    if (!views[X])
        b[X] = b[OUT];
    if (!op->has_positions)
        b[POSITIONS] = (posenc_cl_binding){.mem = freqs};

    /* Views of [1, batch, rows, d_model]: offset, then the batch, row and column strides. */
    posenc__sinusoidal_params params = {
        .out_offset = b[OUT].offset,
        .out_stride_batch = b[OUT].strides[1],
        .out_stride_row = b[OUT].strides[2],
        .out_stride_col = b[OUT].strides[3],
        .x_offset = b[X].offset,
        .x_stride_batch = b[X].strides[1],
        .x_stride_row = b[X].strides[2],
        .x_stride_col = b[X].strides[3],
        .positions_offset = b[POSITIONS].offset,
        .positions_stride_batch = op->positions_per_batch ? b[POSITIONS].strides[2] : 0,
        .positions_stride_row = b[POSITIONS].strides[3],
        .batch = (uint32_t)op->batch,
        .rows = (uint32_t)op->rows,
        .d_model = (uint32_t)op->d_model,
        .position_offset = op->position_offset,
        .flags = (uint32_t)op->layout | (op->has_x ? POSENC_SINUSOIDAL_FLAG_ADD : 0u),
        .input_scale = op->input_scale,
        .output_scale = op->output_scale,
    };
    if (op->has_positions)
        params.flags |= (op->positions.dtype == POSENC_DTYPE_I32 ? POSENC_POSITIONS_I32
                                                                 : POSENC_POSITIONS_F32)
                        << POSENC_SINUSOIDAL_FLAG_POSITIONS_SHIFT;

    return posenc_cl_run(ctx, kernel, launched, "sinusoidal", b, POSENC__SINUSOIDAL_VIEWS, freqs,
                         &params, sizeof params, &staging, wait_count, wait_list, event);
}
