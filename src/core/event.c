/* SPDX-License-Identifier: MIT */
/* posenc_rope_submit, posenc_sinusoidal_submit and their events: the front end of asynchronous
 * work, and what the interop calls' work left running shares with it (src/backend.h). Backends
 * without submit entries run the work synchronously and return a done event. */
#include "backend.h"
#include "core/op_views.h"
#include "core/rope_tables.h"

#include <stdlib.h>

posenc_status posenc__op_resolve(posenc_context *ctx, bool rope, const void *desc,
                                 posenc__op_storage *storage, posenc__op *op)
{
    *op = rope ? (posenc__op){.rope = &storage->rope}
               : (posenc__op){.sinusoidal = &storage->sinusoidal};
    return rope ? posenc__rope_prepare(ctx, desc, &storage->rope)
                : posenc__sinusoidal_prepare(ctx, desc, &storage->sinusoidal);
}

posenc_status posenc__op_resolve_device(posenc_context *ctx, bool rope, const void *desc,
                                        const char *call, posenc__op_storage *storage,
                                        posenc__op *op)
{
    posenc_status status = posenc__op_resolve(ctx, rope, desc, storage, op);
    if (status != POSENC_OK)
        return status;
    const posenc__view *given[POSENC__ROPE_VIEWS];
    if (rope)
        posenc__rope_given_views(op->rope, given);
    else
        posenc__sinusoidal_given_views(op->sinusoidal, given);
    /* Backends without submits run the work now, so wrapped host memory is fine there; host
     * views are refused everywhere, so that code written on one device runs on all. */
    status = posenc__check_device_views(
        ctx, given, rope ? posenc__rope_view_names : posenc__sinusoidal_view_names,
        rope ? POSENC__ROPE_VIEWS : POSENC__SINUSOIDAL_VIEWS, !ctx->backend->submit, call);
    /* The rows of cos/sin tables that positions pick are checked on the host for work run now.
     * Work left running may not read positions written later: its kernels skip a token that
     * picks no row (core/rope_tables.h). */
    if (status == POSENC_OK && rope && !ctx->backend->submit)
        status = posenc__rope_check_table_rows(ctx, op->rope);
    return status;
}

void *posenc__backend_state(posenc_context *ctx, posenc_backend kind, const char *api,
                            const char *call)
{
    if (!ctx) {
        posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
        return NULL;
    }
    if (ctx->backend->kind != kind) {
        posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "context: is a %s context; %s needs %s one",
                     posenc_backend_name(ctx->backend->kind), call, api);
        return NULL;
    }
    return ctx->backend_state;
}

static posenc_status submit(posenc_context *ctx, bool rope, const void *desc, const char *call,
                            posenc_event **event)
{
    posenc__op_storage storage;
    posenc__op op;
    posenc_status status = posenc__op_resolve_device(ctx, rope, desc, call, &storage, &op);
    if (status != POSENC_OK)
        return status;
    /* The event is allocated before the work is submitted, so that a failed allocation submits
     * nothing. */
    posenc_event *created = event ? calloc(1, sizeof *created) : NULL;
    if (event && !created)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "event: out of host memory");
    if (ctx->backend->submit)
        status = ctx->backend->submit(ctx, &op, created ? &created->backend_state : NULL);
    else
        status = ctx->backend->run(ctx, &op);
    if (status != POSENC_OK) {
        free(created);
        return status;
    }
    posenc__atomic64_add(rope ? &ctx->stats.rope_calls : &ctx->stats.sinusoidal_calls, 1);
    if (created) { /* handed out once the work is submitted */
        created->ctx = ctx;
        created->result = POSENC_OK;
        created->next = ctx->events;
        if (ctx->events)
            ctx->events->prev = created;
        ctx->events = created;
        *event = created;
    }
    return POSENC_OK;
}

posenc_status posenc_rope_submit(posenc_context *ctx, const posenc_rope_desc *desc,
                                 posenc_event **event)
{
    return submit(ctx, true, desc, "posenc_rope_submit", event);
}

posenc_status posenc_sinusoidal_submit(posenc_context *ctx, const posenc_sinusoidal_desc *desc,
                                       posenc_event **event)
{
    return submit(ctx, false, desc, "posenc_sinusoidal_submit", event);
}

posenc_status posenc_event_wait(posenc_event *event, uint64_t timeout_ns)
{
    if (!event)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "event: is NULL");
    posenc_context *ctx = event->ctx;
    if (!event->backend_state)
        return event->result;
    /* Work still pending when the device was lost never completes: the event ends with the
     * loss, and the device is not asked again. */
    posenc_status status = posenc__check_lost(ctx);
    if (status == POSENC_OK)
        status = ctx->backend->event_wait(ctx, event->backend_state, timeout_ns);
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
    posenc_status status = posenc__check_lost(ctx);
    if (status != POSENC_OK)
        return status;
    return ctx->backend->finish ? ctx->backend->finish(ctx) : POSENC_OK;
}
