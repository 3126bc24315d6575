/* The OpenCL backend's operation entries: synchronous calls, and submits left running on the
 * context's queue with their cl_event as the completion state (src/backend.h). */
#include "opencl/cl_internal.h"

static posenc_status check_view(posenc_context *ctx, const posenc__view *view, const char *name,
                                const char *call)
{
    if (view->host)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s.host: %s needs a posenc_buffer view, not host memory (use the "
                            "synchronous call for host tensors)",
                            name, call);
    if (view->buffer && view->buffer->host_memory)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "%s.buffer: wraps host_memory, which OpenCL devices copy at each "
                            "operation; %s needs a buffer the device owns",
                            name, call);
    return POSENC_OK;
}

posenc_status posenc_cl_check_rope_views(posenc_context *ctx, const posenc__rope_op *op,
                                         const char *call)
{
    posenc_status status = check_view(ctx, &op->q, "q", call);
    if (status == POSENC_OK && !op->q_in_place)
        status = check_view(ctx, &op->q_out, "q_out", call);
    if (status == POSENC_OK && op->has_k)
        status = check_view(ctx, &op->k, "k", call);
    if (status == POSENC_OK && op->has_k && !op->k_in_place)
        status = check_view(ctx, &op->k_out, "k_out", call);
    if (status == POSENC_OK && op->has_positions)
        status = check_view(ctx, &op->positions, "positions", call);
    return status;
}

posenc_status posenc_cl_check_sinusoidal_views(posenc_context *ctx,
                                               const posenc__sinusoidal_op *op,
                                               const char *call)
{
    posenc_status status = check_view(ctx, &op->out, "out", call);
    if (status == POSENC_OK && op->has_x)
        status = check_view(ctx, &op->x, "x", call);
    if (status == POSENC_OK && op->has_positions)
        status = check_view(ctx, &op->positions, "positions", call);
    return status;
}

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
    /* Submitted work starts without anyone waiting for it. */
    cl_int err = state->cl->Flush(state->queue);
    if (err != CL_SUCCESS) {
        state->cl->ReleaseEvent(event);
        return posenc_cl_fail(ctx, err, "submit", "clFlush");
    }
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
    posenc_status status = posenc_cl_check_rope_views(ctx, op, "posenc_rope_submit");
    if (status != POSENC_OK)
        return status;
    cl_event event = NULL;
    posenc__mutex_lock(&state->lock);
    status = posenc_cl_rope_run(ctx, op, 0, NULL, &event);
    status = submitted(ctx, status, event, event_state);
    posenc__mutex_unlock(&state->lock);
    return status;
}

posenc_status posenc_cl_sinusoidal_submit(posenc_context *ctx, const posenc__sinusoidal_op *op,
                                          void **event_state)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc_status status = posenc_cl_check_sinusoidal_views(ctx, op, "posenc_sinusoidal_submit");
    if (status != POSENC_OK)
        return status;
    cl_event event = NULL;
    posenc__mutex_lock(&state->lock);
    status = posenc_cl_sinusoidal_run(ctx, op, 0, NULL, &event);
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
