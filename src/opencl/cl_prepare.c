/* SPDX-License-Identifier: MIT */
/* posenc_prepare on OpenCL: an operation's program (built, or loaded from the kernel cache) and
 * the device copy of its frequency table, made before the first enqueue. */
#include "opencl/cl_internal.h"

posenc_status posenc_cl_prepare_rope(posenc_context *ctx, const posenc__rope_op *op)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_kernel *kernel = NULL;
    cl_mem freqs = NULL;
    posenc__mutex_lock(&state->lock);
    posenc_status status = posenc_cl_kernel_get(ctx, posenc_cl_rope_kernel_id(ctx, op),
                                                &kernel);
    if (status == POSENC_OK)
        status = posenc_cl_freqs_get(ctx, op->freqs, op->rotary_dim / 2, op->freqs_id, "rope",
                                     &freqs);
    posenc__mutex_unlock(&state->lock);
    return status;
}

posenc_status posenc_cl_prepare_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_kernel *kernel = NULL;
    cl_mem freqs = NULL;
    posenc__mutex_lock(&state->lock);
    posenc_status status =
        posenc_cl_kernel_get(ctx, posenc_cl_sinusoidal_kernel_id(ctx, op), &kernel);
    if (status == POSENC_OK)
        status = posenc_cl_freqs_get(ctx, op->freqs, op->half, op->freqs_id, "sinusoidal",
                                     &freqs);
    posenc__mutex_unlock(&state->lock);
    return status;
}
