/* SPDX-License-Identifier: MIT */
/* posenc_sinusoidal on OpenCL: one launch of shaders/sinusoidal.cl (its header documents the
 * arguments). */
#include "opencl/cl_internal.h"

#include "posenc_kernel_params.h"

/* The layout bits of the flags are posenc_sinusoidal_layout's values. */
_Static_assert(POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED == POSENC_SINUSOIDAL_INTERLEAVED &&
                   POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS == POSENC_SINUSOIDAL_SIN_COS,
               "sinusoidal layouts");

posenc__cl_id posenc_cl_sinusoidal_kernel_id(posenc_dtype dtype)
{
    switch (dtype) {
    case POSENC_DTYPE_F16: return POSENC__CL_SINUSOIDAL_F16;
    case POSENC_DTYPE_BF16: return POSENC__CL_SINUSOIDAL_BF16;
    default: return POSENC__CL_SINUSOIDAL_F32;
    }
}

posenc_status posenc_cl_sinusoidal_run(posenc_context *ctx, const posenc__sinusoidal_op *op,
                                       cl_uint wait_count, const cl_event *wait_list,
                                       cl_event *event)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_kernel *kernel = NULL;
    posenc_status status =
        posenc_cl_kernel_get(ctx, posenc_cl_sinusoidal_kernel_id(op->out.dtype), &kernel);
    if (status != POSENC_OK)
        return status;

    uint64_t units = ((uint64_t)op->half + (uint64_t)(op->d_model % 2)) * (uint64_t)op->batch *
                     (uint64_t)op->rows;
    if (units > UINT32_MAX || (uint64_t)op->d_model > UINT32_MAX)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "out.shape: %lld x %lld x %lld is more work than one OpenCL launch "
                            "indexes (2^32 units)",
                            (long long)op->batch, (long long)op->rows, (long long)op->d_model);

    posenc_cl_binding out, x, positions;
    posenc_cl_staging staging = {0};
    posenc_cl_stage_add(&staging, &op->out, "out", POSENC__GPU_WRITE, &out);
    if (op->has_x) /* in place, x is out's own view: both land in the same memory */
        posenc_cl_stage_add(&staging, &op->x, "x", POSENC__GPU_READ, &x);
    if (op->has_positions)
        posenc_cl_stage_add(&staging, &op->positions, "positions", POSENC__GPU_READ, &positions);
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
    if (!op->has_x)
        x = out;
    if (!op->has_positions) /* an unused argument still needs a buffer */
        positions = (posenc_cl_binding){.mem = freqs};

    /* Views of [1, batch, rows, d_model]: offset, then the batch, row and column strides. */
    posenc__sinusoidal_params params = {
        .out_offset = out.offset,
        .out_stride_batch = out.strides[1],
        .out_stride_row = out.strides[2],
        .out_stride_col = out.strides[3],
        .x_offset = x.offset,
        .x_stride_batch = x.strides[1],
        .x_stride_row = x.strides[2],
        .x_stride_col = x.strides[3],
        .positions_offset = positions.offset,
        .positions_stride_batch = op->positions_per_batch ? positions.strides[2] : 0,
        .positions_stride_row = positions.strides[3],
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

    posenc_cl_args args = {.kernel = kernel->kernel};
    posenc_cl_arg_mem(&args, out.mem);
    posenc_cl_arg_mem(&args, x.mem);
    posenc_cl_arg_mem(&args, positions.mem);
    posenc_cl_arg_mem(&args, freqs);
    posenc_cl_arg_words(&args, &params, sizeof params);
    if (args.error != CL_SUCCESS) {
        posenc_cl_stage_release(ctx, &staging);
        return posenc_cl_fail(ctx, args.error, "sinusoidal", "clSetKernelArg");
    }

    if (event) /* left running: the caller waits for *event */
        return posenc_cl_launch(ctx, kernel, units, "sinusoidal", wait_count, wait_list, event);
    cl_event done = NULL;
    status = posenc_cl_launch(ctx, kernel, units, "sinusoidal", wait_count, wait_list, &done);
    if (status == POSENC_OK) {
        status = posenc_cl_stage_out(ctx, &staging, done);
        state->cl->ReleaseEvent(done);
    }
    posenc_cl_stage_release(ctx, &staging); /* when the launch failed */
    posenc_cl_stage_trim(ctx);
    return status;
}
