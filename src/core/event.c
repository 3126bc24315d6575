/* posenc_rope_submit, posenc_sinusoidal_submit and their events: the front end of asynchronous
 * work. Backends without submit entries run the work synchronously and return a done event. */
#include "backend.h"

#include <stdlib.h>

static bool backend_is_async(const posenc_context *ctx)
{
    return ctx->backend->rope_submit != NULL;
}

/* Submitted work must live in posenc buffers: a host view would have to be copied back after the
 * device finishes, at a moment the library does not control. Wrapped host memory is refused
 * where the device does not use it in place, for the same reason. */
static posenc_status check_submit_view(posenc_context *ctx, const posenc__view *view,
                                       const char *name, const char *call)
{
    if (view->host)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s.host: %s needs a posenc_buffer view, not host memory (use the "
                            "synchronous call for host tensors)",
                            name, call);
    const posenc_buffer *buf = view->buffer;
    if (buf && buf->host_memory && backend_is_async(ctx)) {
        void *in_place = ctx->backend->buffer_host_address
                             ? ctx->backend->buffer_host_address(ctx, view->buffer)
                             : NULL;
        if (in_place != buf->host_memory)
            return posenc__fail(ctx, POSENC_UNSUPPORTED,
                                "%s.buffer: wraps host_memory, which this device copies at "
                                "each operation; %s needs a buffer the device owns",
                                name, call);
    }
    return POSENC_OK;
}

/* The event is allocated before the work is submitted, so that a failed allocation submits
 * nothing. */
static posenc_status create_event(posenc_context *ctx, posenc_event **event,
                                  posenc_event **created)
{
    *created = NULL;
    if (!event)
        return POSENC_OK;
    *created = calloc(1, sizeof **created);
    if (!*created)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "event: out of host memory");
    (*created)->ctx = ctx;
    return POSENC_OK;
}

/* Hands the event out once the work is submitted, or frees it when the submit failed. */
static posenc_status publish_event(posenc_context *ctx, posenc_status status,
                                   posenc_event *created, posenc_event **event)
{
    if (!created)
        return status;
    if (status != POSENC_OK) {
        free(created);
        return status;
    }
    created->result = POSENC_OK;
    created->next = ctx->events;
    if (ctx->events)
        ctx->events->prev = created;
    ctx->events = created;
    *event = created;
    return POSENC_OK;
}

posenc_status posenc_rope_submit(posenc_context *ctx, const posenc_rope_desc *desc,
                                 posenc_event **event)
{
    posenc__rope_op op;
    posenc_status status = posenc__rope_prepare(ctx, desc, &op);
    if (status != POSENC_OK)
        return status;
    static const char call[] = "posenc_rope_submit";
    status = check_submit_view(ctx, &op.q, "q", call);
    if (status == POSENC_OK && !op.q_in_place)
        status = check_submit_view(ctx, &op.q_out, "q_out", call);
    if (status == POSENC_OK && op.has_k)
        status = check_submit_view(ctx, &op.k, "k", call);
    if (status == POSENC_OK && op.has_k && !op.k_in_place)
        status = check_submit_view(ctx, &op.k_out, "k_out", call);
    if (status == POSENC_OK && op.has_positions)
        status = check_submit_view(ctx, &op.positions, "positions", call);
    posenc_event *created;
    if (status == POSENC_OK)
        status = create_event(ctx, event, &created);
    if (status != POSENC_OK)
        return status;
    if (ctx->backend->rope_submit)
        status = ctx->backend->rope_submit(ctx, &op, created ? &created->backend_state : NULL);
    else
        status = ctx->backend->rope(ctx, &op);
    return publish_event(ctx, status, created, event);
}

posenc_status posenc_sinusoidal_submit(posenc_context *ctx, const posenc_sinusoidal_desc *desc,
                                       posenc_event **event)
{
    posenc__sinusoidal_op op;
    posenc_status status = posenc__sinusoidal_prepare(ctx, desc, &op);
    if (status != POSENC_OK)
        return status;
    static const char call[] = "posenc_sinusoidal_submit";
    status = check_submit_view(ctx, &op.out, "out", call);
    if (status == POSENC_OK && op.has_x)
        status = check_submit_view(ctx, &op.x, "x", call);
    if (status == POSENC_OK && op.has_positions)
        status = check_submit_view(ctx, &op.positions, "positions", call);
    posenc_event *created;
    if (status == POSENC_OK)
        status = create_event(ctx, event, &created);
    if (status != POSENC_OK)
        return status;
    if (ctx->backend->sinusoidal_submit)
        status = ctx->backend->sinusoidal_submit(ctx, &op,
                                                 created ? &created->backend_state : NULL);
    else
        status = ctx->backend->sinusoidal(ctx, &op);
    return publish_event(ctx, status, created, event);
}

posenc_status posenc_event_wait(posenc_event *event, uint64_t timeout_ns)
{
    if (!event)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "event: is NULL");
    posenc_context *ctx = event->ctx;
    if (!event->backend_state)
        return event->result;
    posenc_status status = ctx->backend->event_wait(ctx, event->backend_state, timeout_ns);
    if (status == POSENC_TIMEOUT)
        return status;
    ctx->backend->event_release(ctx, event->backend_state);
    event->backend_state = NULL;
    event->result = status;
    return status;
}

void posenc_event_destroy(posenc_event *event)
{
    if (!event)
        return;
    posenc_context *ctx = event->ctx;
    if (event->backend_state)
        ctx->backend->event_release(ctx, event->backend_state);
    if (event->prev)
        event->prev->next = event->next;
    else
        ctx->events = event->next;
    if (event->next)
        event->next->prev = event->prev;
    free(event);
}

posenc_status posenc_context_finish(posenc_context *ctx)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    posenc__clear_error(ctx);
    return ctx->backend->finish ? ctx->backend->finish(ctx) : POSENC_OK;
}
