/* SPDX-License-Identifier: MIT */
/* posenc_opencl.h: an engine's cl_mem as a posenc buffer, and operations enqueued on the
 * context's queue after the caller's events, validated by the same front end as posenc_rope. */
#include "opencl/cl_internal.h"

#include <posenc/posenc_opencl.h>

posenc_status posenc_cl_buffer_wrap(posenc_context *ctx, cl_mem mem, posenc_buffer **buffer)
{
    posenc_cl_context *state =
        posenc__backend_state(ctx, POSENC_BACKEND_OPENCL, "an OpenCL", "posenc_cl_buffer_wrap");
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

/* Both enqueue calls: the operation (`rope`, else sinusoidal; `desc` its descriptor) after the
 * caller's events, on device memory only (op_views.h); its event goes to the caller, or is
 * dropped (state->last keeps posenc's own reference). */
static posenc_status enqueue(posenc_context *ctx, const char *call, bool rope, const void *desc,
                             cl_uint wait_count, const cl_event *wait_list, cl_event *event)
{
    posenc_cl_context *state = posenc__backend_state(ctx, POSENC_BACKEND_OPENCL, "an OpenCL", call);
    if (!state)
        return POSENC_INVALID_ARGUMENT;
    cl_event done = NULL;
    posenc__op_storage storage;
    posenc__op op;
    posenc__mutex_lock(&state->lock);
    posenc_status status = check_wait_list(ctx, state, wait_count, wait_list);
    if (status == POSENC_OK)
        status = posenc__op_resolve_device(ctx, rope, desc, call, &storage, &op);
    if (status == POSENC_OK) {
        posenc_cl_op run = posenc_cl_op_of(ctx, &op);
        status = posenc_cl_run_op(ctx, &run, wait_count, wait_list, &done);
    }
    posenc__mutex_unlock(&state->lock);
    if (status != POSENC_OK)
        return status;
    if (event)
        *event = done;
    else
        state->cl->ReleaseEvent(done);
    posenc__atomic64_add(rope ? &ctx->stats.rope_calls : &ctx->stats.sinusoidal_calls, 1);
    return POSENC_OK;
}

posenc_status posenc_cl_enqueue_rope(posenc_context *ctx, const posenc_rope_desc *desc,
                                     cl_uint num_events_in_wait_list,
                                     const cl_event *event_wait_list, cl_event *event)
{
    return enqueue(ctx, "posenc_cl_enqueue_rope", true, desc, num_events_in_wait_list,
                   event_wait_list, event);
}

posenc_status posenc_cl_enqueue_sinusoidal(posenc_context *ctx,
                                           const posenc_sinusoidal_desc *desc,
                                           cl_uint num_events_in_wait_list,
                                           const cl_event *event_wait_list, cl_event *event)
{
    return enqueue(ctx, "posenc_cl_enqueue_sinusoidal", false, desc, num_events_in_wait_list,
                   event_wait_list, event);
}
