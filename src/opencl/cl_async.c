/* SPDX-License-Identifier: MIT */
/* The OpenCL backend's operation entries, each running the operation's description
 * (posenc_cl_op): synchronous calls, submits left running on the context's queue with their
 * cl_event as the completion state (src/backend.h), and posenc_prepare's builds ahead. */
#include "opencl/cl_internal.h"

/* Hands the work's event out, or drops it: finish and context_fini wait through state->last. */
static posenc_status submitted(posenc_context *ctx, cl_event event, void **event_state)
{
    posenc_cl_context *state = ctx->backend_state;
    /* Submitted work starts without anyone waiting for it. A flush that fails does not undo
     * the enqueue: the work is on the queue and may still run, so the call cannot report it as
     * not done; whatever the runtime failed shows at the event's wait (which flushes again).
     * A lost device runs nothing more: that is reported at once. */
    cl_int err = state->cl->Flush(state->queue);
    if (err != CL_SUCCESS && posenc_cl_status(err) == POSENC_DEVICE_LOST) {
        state->cl->ReleaseEvent(event);
        return posenc_cl_fail(ctx, err, "submit", "clFlush");
    }
    if (err != CL_SUCCESS)
        posenc__log(ctx, POSENC_LOG_DEBUG, "submit: clFlush failed: %s (%d); the wait will tell",
                    posenc_cl_error_name(err), (int)err);
    if (event_state)
        *event_state = event;
    else
        state->cl->ReleaseEvent(event);
    return POSENC_OK;
}

posenc_cl_op posenc_cl_op_of(posenc_context *ctx, const posenc__op *op)
{
    return op->rope ? posenc_cl_rope_op(ctx, op->rope)
                    : posenc_cl_sinusoidal_op(ctx, op->sinusoidal);
}

/* Runs `op` under the lock: synchronously, or with `submit` left running. */
static posenc_status run_locked(posenc_context *ctx, const posenc__op *op, bool submit,
                                void **event_state)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc_cl_op run = posenc_cl_op_of(ctx, op);
    cl_event event = NULL; /* submits: the front end checked the views (op_views.h) */
    posenc__mutex_lock(&state->lock);
    posenc_status status = posenc_cl_run_op(ctx, &run, 0, NULL, submit ? &event : NULL);
    if (status == POSENC_OK && submit)
        status = submitted(ctx, event, event_state);
    posenc__mutex_unlock(&state->lock);
    return status;
}

posenc_status posenc_cl_op_run(posenc_context *ctx, const posenc__op *op)
{
    return run_locked(ctx, op, false, NULL);
}

posenc_status posenc_cl_op_submit(posenc_context *ctx, const posenc__op *op, void **event_state)
{
    return run_locked(ctx, op, true, event_state);
}

/* The operation's program (built, or loaded from the kernel cache) and the device copy of its
 * frequency table, made before the first enqueue. */
posenc_status posenc_cl_op_prepare(posenc_context *ctx, const posenc__op *op)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc_cl_op run = posenc_cl_op_of(ctx, op);
    const posenc_cl_kernel *kernel = NULL;
    cl_mem table = NULL;
    posenc__mutex_lock(&state->lock);
    posenc_status status = posenc_cl_kernel_get(ctx, run.kernel, &kernel);
    if (status == POSENC_OK)
        status = posenc_cl_freqs_get(ctx, &run.gpu.table, run.gpu.what, &table);
    posenc__mutex_unlock(&state->lock);
    return status;
}
