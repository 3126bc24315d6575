/* SPDX-License-Identifier: MIT */
/* posenc_opencl.h: an engine's cl_mem as a posenc buffer, and operations enqueued on the
 * context's queue after the caller's events, validated by the same front end as posenc_rope. */
#include "backend.h"
#include "core/op_views.h"
#include "opencl/cl_internal.h"

#include <posenc/posenc_opencl.h>

/* The OpenCL state of `ctx`, or NULL (the error set) when it is not an OpenCL context. */
static posenc_cl_context *opencl_state(posenc_context *ctx, const char *call)
{
    if (!ctx) {
        posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
        return NULL;
    }
    if (ctx->backend->kind != POSENC_BACKEND_OPENCL) {
        posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                     "context: is a %s context; %s needs an OpenCL one",
                     posenc_backend_name(ctx->backend->kind), call);
        return NULL;
    }
    return ctx->backend_state;
}

posenc_status posenc_cl_buffer_wrap(posenc_context *ctx, cl_mem mem, posenc_buffer **buffer)
{
    posenc_cl_context *state = opencl_state(ctx, "posenc_cl_buffer_wrap");
    if (!state)
        return POSENC_INVALID_ARGUMENT;
    if (!buffer)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "buffer: is NULL");
    if (!mem)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "mem: is NULL");
    posenc__clear_error(ctx);
    if (posenc__check_lost(ctx) != POSENC_OK)
        return POSENC_DEVICE_LOST;
    const posenc_cl_api *cl = state->cl;
    cl_context owner = NULL;
    cl_mem_object_type type = 0;
    size_t size = 0;
    cl_int err = cl->GetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err == CL_SUCCESS)
        err = cl->GetMemObjectInfo(mem, CL_MEM_TYPE, sizeof type, &type, NULL);
    if (err == CL_SUCCESS)
        err = cl->GetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (err != CL_SUCCESS)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "mem: is not a usable cl_mem (clGetMemObjectInfo: %s)",
                            posenc_cl_error_name(err));
    if (owner != state->context)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "mem: belongs to another cl_context than the posenc context's");
    if (type != CL_MEM_OBJECT_BUFFER)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "mem: is an image or pipe, not a buffer");
    if (size == 0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "mem: has size 0");

    cl->RetainMemObject(mem);
    posenc_status status = posenc__buffer_adopt(ctx, size, mem, buffer);
    if (status != POSENC_OK)
        cl->ReleaseMemObject(mem);
    return status;
}

/* The wait list, checked here because runtimes do not all check it (PoCL 3 takes a NULL entry
 * or another context's event, and then never runs the work). */
static posenc_status check_wait_list(posenc_context *ctx, const posenc_cl_context *state,
                                     cl_uint count, const cl_event *list)
{
    if (count > 0 && !list)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "event_wait_list: is NULL but num_events_in_wait_list is %u", count);
    if (count == 0 && list)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "event_wait_list: is set but num_events_in_wait_list is 0");
    for (cl_uint i = 0; i < count; i++) {
        cl_context owner = NULL;
        cl_int err = list[i] ? state->cl->GetEventInfo(list[i], CL_EVENT_CONTEXT, sizeof owner,
                                                       &owner, NULL)
                             : CL_INVALID_EVENT;
        if (err != CL_SUCCESS)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "event_wait_list[%u]: is not a usable cl_event (%s%s (%d))", i,
                                list[i] ? "clGetEventInfo: " : "NULL: ",
                                posenc_cl_error_name(err), (int)err);
        if (owner != state->context)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "event_wait_list[%u]: belongs to another cl_context than the "
                                "posenc context's (CL_INVALID_CONTEXT)",
                                i);
    }
    return POSENC_OK;
}

/* Enqueues `run` after the caller's events, its views (`given`: every view the caller set)
 * in device memory only (op_views.h), and hands its event to the caller, or drops it
 * (state->last keeps posenc's own reference). */
static posenc_status enqueue(posenc_context *ctx, const posenc_cl_op *run,
                             const posenc__view *const *given, const char *call, cl_uint count,
                             const cl_event *list, cl_event *event)
{
    cl_event done = NULL;
    posenc_status status = posenc__check_device_views(ctx, given, run->gpu.names,
                                                      run->gpu.view_count, false, call);
    if (status == POSENC_OK)
        status = posenc_cl_run_op(ctx, run, count, list, &done);
    if (status == POSENC_OK && event)
        *event = done;
    else if (status == POSENC_OK)
        ((posenc_cl_context *)ctx->backend_state)->cl->ReleaseEvent(done);
    return status;
}

posenc_status posenc_cl_enqueue_rope(posenc_context *ctx, const posenc_rope_desc *desc,
                                     cl_uint num_events_in_wait_list,
                                     const cl_event *event_wait_list, cl_event *event)
{
    static const char call[] = "posenc_cl_enqueue_rope";
    posenc_cl_context *state = opencl_state(ctx, call);
    if (!state)
        return POSENC_INVALID_ARGUMENT;
    posenc__mutex_lock(&state->lock);
    posenc__rope_op op;
    posenc_status status = check_wait_list(ctx, state, num_events_in_wait_list,
                                           event_wait_list);
    if (status == POSENC_OK)
        status = posenc__rope_prepare(ctx, desc, &op);
    if (status == POSENC_OK) {
        const posenc__view *given[POSENC__ROPE_VIEWS];
        posenc__rope_given_views(&op, given);
        posenc_cl_op run = posenc_cl_rope_op(ctx, &op);
        status = enqueue(ctx, &run, given, call, num_events_in_wait_list, event_wait_list,
                         event);
    }
    posenc__mutex_unlock(&state->lock);
    if (status == POSENC_OK)
        posenc__atomic64_add(&ctx->stats.rope_calls, 1);
    return status;
}

posenc_status posenc_cl_enqueue_sinusoidal(posenc_context *ctx,
                                           const posenc_sinusoidal_desc *desc,
                                           cl_uint num_events_in_wait_list,
                                           const cl_event *event_wait_list, cl_event *event)
{
    static const char call[] = "posenc_cl_enqueue_sinusoidal";
    posenc_cl_context *state = opencl_state(ctx, call);
    if (!state)
        return POSENC_INVALID_ARGUMENT;
    posenc__mutex_lock(&state->lock);
    posenc__sinusoidal_op op;
    posenc_status status = check_wait_list(ctx, state, num_events_in_wait_list,
                                           event_wait_list);
    if (status == POSENC_OK)
        status = posenc__sinusoidal_prepare(ctx, desc, &op);
    if (status == POSENC_OK) {
        const posenc__view *given[POSENC__SINUSOIDAL_VIEWS];
        posenc__sinusoidal_given_views(&op, given);
        posenc_cl_op run = posenc_cl_sinusoidal_op(ctx, &op);
        status = enqueue(ctx, &run, given, call, num_events_in_wait_list, event_wait_list,
                         event);
    }
    posenc__mutex_unlock(&state->lock);
    if (status == POSENC_OK)
        posenc__atomic64_add(&ctx->stats.sinusoidal_calls, 1);
    return status;
}
