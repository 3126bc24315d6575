/* SPDX-License-Identifier: MIT */
/* Ordering and completion of posenc's OpenCL work: the chain of posenc's own commands through
 * events (so out-of-order queues work too), and waits (the backend's event and finish entries
 * among them) that look at posenc's events only, never at the rest of a queue that may be the
 * caller's. */
#include "opencl/cl_internal.h"

#include "core/platform.h"

#include <stdlib.h>

/* Wait lists up to this length are assembled on the stack. */
#define STACK_WAITS 16

/* ---- Ordering -------------------------------------------------------------------------------- */

cl_int posenc_cl_enqueue_ordered(posenc_context *ctx, cl_uint wait_count,
                                 const cl_event *wait_list, posenc_cl_enqueue_fn enqueue,
                                 void *user, cl_event *event)
{
    posenc_cl_context *state = ctx->backend_state;
    cl_event stack[STACK_WAITS];
    cl_event *waits = stack;
    cl_uint count = wait_count + (state->last ? 1u : 0u);
    if (count > STACK_WAITS) {
        waits = malloc(count * sizeof *waits);
        if (!waits)
            return CL_OUT_OF_HOST_MEMORY;
    }
    for (cl_uint i = 0; i < wait_count; i++)
        waits[i] = wait_list[i];
    if (state->last)
        waits[wait_count] = state->last;

    cl_event done = NULL;
    cl_int err = enqueue(ctx, user, count, count ? waits : NULL, &done);
    if (waits != stack)
        free(waits);
    if (err != CL_SUCCESS)
        return err;
    if (state->last)
        state->cl->ReleaseEvent(state->last);
    state->last = done;
    if (event) {
        state->cl->RetainEvent(done);
        *event = done;
    }
    return CL_SUCCESS;
}

/* ---- Waiting --------------------------------------------------------------------------------- */

cl_int posenc_cl_complete_all(const posenc_cl_api *cl, uint32_t count, const cl_event *events)
{
    if (count == 0)
        return CL_SUCCESS;
    /* One wait for all: each wait costs a wake-up of the runtime (PoCL: several us). */
    cl_int err = cl->WaitForEvents((cl_uint)count, events);
    for (uint32_t e = 0; e < count; e++) {
        cl_int status = CL_COMPLETE;
        if (err != CL_SUCCESS &&
            cl->GetEventInfo(events[e], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                             NULL) == CL_SUCCESS &&
            status < 0 && (count == 1 || err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST))
            err = status; /* the (first) failed command's own error says more than the wait's */
        cl->ReleaseEvent(events[e]);
    }
    return err;
}

static uint64_t now_ns(void) { return (uint64_t)(posenc__seconds_now() * 1e9); }

static void sleep_ns(uint64_t ns) { posenc__sleep_seconds((double)ns * 1e-9); }

/* CL_COMPLETE, a command status still running (> 0), or the negative error that ended it. */
static cl_int execution_status(const posenc_cl_api *cl, cl_event event, cl_int *error)
{
    cl_int status = CL_COMPLETE;
    *error = cl->GetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                              NULL);
    return status;
}

static posenc_status finished(posenc_context *ctx, cl_int status, const char *what)
{
    if (status == CL_COMPLETE)
        return POSENC_OK;
    /* A negative status is the command's error; the runtime decides which. Errors that are not
     * about memory or the device say only that the device failed the work. */
    posenc_status mapped = posenc_cl_status(status);
    if (mapped != POSENC_OUT_OF_DEVICE_MEMORY && mapped != POSENC_OUT_OF_MEMORY &&
        mapped != POSENC_DEVICE_LOST)
        mapped = POSENC_DEVICE_ERROR;
    return posenc__fail(ctx, mapped, "%s: the command ended with %s (%d)", what,
                        posenc_cl_error_name(status), (int)status);
}

/* Waits up to `timeout_ns` for `event`: POSENC_OK, POSENC_TIMEOUT, or the status of the error
 * that ended its command. */
static posenc_status event_wait(posenc_context *ctx, cl_event event, uint64_t timeout_ns,
                                const char *what)
{
    const posenc_cl_api *cl = ((posenc_cl_context *)ctx->backend_state)->cl;
    cl_int error = CL_SUCCESS;
    cl_int status = execution_status(cl, event, &error);
    if (error == CL_SUCCESS && status > CL_COMPLETE && timeout_ns == UINT64_MAX) {
        /* No limit: the runtime's own wait, which also flushes the queue. Its result only says
         * whether the command failed; the status says how. */
        cl->WaitForEvents(1, &event);
        status = execution_status(cl, event, &error);
    }
    /* Polling with a growing sleep: 1.2 has no timed wait. Short first, since small work ends
     * within microseconds; at most 1 ms late. */
    uint64_t start = status > CL_COMPLETE ? now_ns() : 0, nap = 2000;
    while (error == CL_SUCCESS && status > CL_COMPLETE) {
        uint64_t elapsed = now_ns() - start;
        if (elapsed >= timeout_ns)
            break;
        uint64_t left = timeout_ns - elapsed;
        sleep_ns(nap < left ? nap : left);
        nap = nap < 1000000 ? nap * 2 : 1000000;
        status = execution_status(cl, event, &error);
    }
    if (error != CL_SUCCESS)
        return posenc_cl_fail(ctx, error, what, "clGetEventInfo");
    if (status > CL_COMPLETE)
        return POSENC_TIMEOUT;
    return finished(ctx, status, what);
}

posenc_status posenc_cl_wait_all(posenc_context *ctx, const char *what)
{
    posenc_cl_context *state = ctx->backend_state;
    if (!state->last)
        return POSENC_OK;
    posenc_status status = event_wait(ctx, state->last, UINT64_MAX, what);
    if (status != POSENC_OK) {
        /* Later work must not wait for a command that failed: a runtime fails the commands
         * waiting for it too, and the context would never recover. */
        state->cl->ReleaseEvent(state->last);
        state->last = NULL;
    }
    return status;
}

posenc_status posenc_cl_submit_event_wait(posenc_context *ctx, void *event_state,
                                          uint64_t timeout_ns)
{
    return event_wait(ctx, (cl_event)event_state, timeout_ns, "event");
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
