/* SPDX-License-Identifier: MIT */
/* The OpenCL backend's operation entries: synchronous calls, and submits left running on the
 * context's queue with their cl_event as the completion state (src/backend.h). */
#include "opencl/cl_internal.h"

posenc_status posenc_cl_rope(posenc_context *ctx, const posenc__rope_op *op)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc__mutex_lock(&state->lock);
    posenc_status status = posenc_cl_rope_run(ctx, op, 0, NULL, NULL);
    posenc__mutex_unlock(&state->lock);
    return status;
}

posenc_status posenc_cl_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc__mutex_lock(&state->lock);
    posenc_status status = posenc_cl_sinusoidal_run(ctx, op, 0, NULL, NULL);
    posenc__mutex_unlock(&state->lock);
    return status;
}

/* Hands the work's event out, or drops it: finish and context_fini wait through state->last. */
static posenc_status submitted(posenc_context *ctx, posenc_status status, cl_event event,
                               void **event_state)
{
    posenc_cl_context *state = ctx->backend_state;
    if (status != POSENC_OK)
        return status;
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

posenc_status posenc_cl_rope_submit(posenc_context *ctx, const posenc__rope_op *op,
                                    void **event_state)
{
    posenc_cl_context *state = ctx->backend_state;
    cl_event event = NULL; /* the front end checked the views (op_views.h) */
    posenc__mutex_lock(&state->lock);
    posenc_status status = posenc_cl_rope_run(ctx, op, 0, NULL, &event);
    status = submitted(ctx, status, event, event_state);
    posenc__mutex_unlock(&state->lock);
    return status;
}

posenc_status posenc_cl_sinusoidal_submit(posenc_context *ctx, const posenc__sinusoidal_op *op,
                                          void **event_state)
{
    posenc_cl_context *state = ctx->backend_state;
    cl_event event = NULL; /* the front end checked the views (op_views.h) */
    posenc__mutex_lock(&state->lock);
    posenc_status status = posenc_cl_sinusoidal_run(ctx, op, 0, NULL, &event);
    status = submitted(ctx, status, event, event_state);
    posenc__mutex_unlock(&state->lock);
    return status;
}

posenc_status posenc_cl_submit_event_wait(posenc_context *ctx, void *event_state,
                                          uint64_t timeout_ns)
{
    return posenc_cl_event_wait(ctx, (cl_event)event_state, timeout_ns, "event");
}

void posenc_cl_submit_event_release(posenc_context *ctx, void *event_state)
{
    posenc_cl_context *state = ctx->backend_state;
    state->cl->ReleaseEvent((cl_event)event_state);
}

posenc_status posenc_cl_finish(posenc_context *ctx)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc__mutex_lock(&state->lock);
    posenc_status status = posenc_cl_wait_all(ctx, "finish");
    posenc__mutex_unlock(&state->lock);
    return status;
}
