/* SPDX-License-Identifier: MIT */
/* posenc_prepare on OpenCL: an operation's program (built, or loaded from the kernel cache) and
 * the device copy of its frequency table, made before the first enqueue. */
#include "opencl/cl_internal.h"

static posenc_status prepare(posenc_context *ctx, posenc__cl_id kernel_id,
                             const posenc__freq *freqs, uint32_t count, uint64_t id,
                             const char *what)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_kernel *kernel = NULL;
    cl_mem table = NULL;
    posenc__mutex_lock(&state->lock);
    posenc_status status = posenc_cl_kernel_get(ctx, kernel_id, &kernel);
    if (status == POSENC_OK)
        status = posenc_cl_freqs_get(ctx, freqs, count, id, what, &table);
    posenc__mutex_unlock(&state->lock);
    return status;
}

posenc_status posenc_cl_prepare_rope(posenc_context *ctx, const posenc__rope_op *op)
{
    return prepare(ctx, posenc_cl_rope_kernel_id(ctx, op), op->freqs, op->rotary_dim / 2,
                   op->freqs_id, "rope");
}

posenc_status posenc_cl_prepare_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    return prepare(ctx, posenc_cl_sinusoidal_kernel_id(ctx, op), op->freqs, op->half,
                   op->freqs_id, "sinusoidal");
}
