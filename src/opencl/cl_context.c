/* SPDX-License-Identifier: MIT */
/* OpenCL contexts: one cl_context and one in-order queue per posenc context, or the caller's own
 * context, device and queue (checked to belong together, retained, then released); and their
 * teardown with everything built or allocated for them. */
#include "opencl/cl_internal.h"

#include <stdlib.h>

/* The state both kinds of context start from. */
static posenc_cl_context *new_state(const posenc_cl_api *cl)
{
    posenc_cl_context *state = calloc(1, sizeof *state);
    if (!state)
        return NULL;
    if (!posenc__mutex_init(&state->lock)) {
        free(state);
        return NULL;
    }
    state->cl = cl;
    return state;
}

/* The end of both kinds of init: the state of ctx->device, or freed after `status` failed. */
static posenc_status init_end(posenc_context *ctx, posenc_cl_context *state, posenc_status status)
{
    if (status != POSENC_OK) {
        posenc__mutex_destroy(&state->lock);
        free(state);
        return status;
    }
    /* Host memory is imported where the device can, unless POSENC_OPENCL_DISABLE names
     * "host_import", to exercise the staging path on such devices. */
    state->host_import = ctx->device->info.host_memory_import &&
                         !posenc__gpu_feature_disabled("POSENC_OPENCL_DISABLE", "host_import");
    ctx->backend_state = state;
    return POSENC_OK;
}

posenc_status posenc_cl_context_init(posenc_context *ctx, const posenc__device *device)
{
    const posenc_cl_device *dev = device->handle;
    posenc_cl_context *state = new_state(posenc_cl_api_get());
    if (!state)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    const posenc_cl_api *cl = state->cl;
    cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                          (cl_context_properties)dev->platform, 0};
    cl_int err = CL_SUCCESS;
    posenc__signal_stack stack;
    posenc__signal_stack_save(&stack);
    state->context = cl->CreateContext(properties, 1, &dev->device, NULL, NULL, &err);
    posenc__signal_stack_restore(&stack);
    const char *call = "clCreateContext";
    if (err == CL_SUCCESS && state->context) {
        call = "clCreateCommandQueue";
        state->queue = cl->CreateCommandQueue(state->context, dev->device, 0, &err);
        if (err == CL_SUCCESS && !state->queue)
            err = CL_INVALID_COMMAND_QUEUE;
    } else if (err == CL_SUCCESS) {
        err = CL_INVALID_CONTEXT;
    }
    posenc_status status = POSENC_OK;
    if (err != CL_SUCCESS) {
        if (state->context)
            cl->ReleaseContext(state->context);
        status = posenc_cl_status(err);
        if (status != POSENC_OUT_OF_MEMORY && status != POSENC_OUT_OF_DEVICE_MEMORY)
            status = POSENC_DEVICE_INIT_FAILED;
        status = posenc__fail(ctx, status, "device: %s failed: %s (%d)", call,
                              posenc_cl_error_name(err), (int)err);
    }
    return init_end(ctx, state, status);
}

/* ---- The caller's objects -------------------------------------------------------------------- */

/* The handles fit together: the device is one of the context's, the queue was created on both.
 * Sets *platform to the device's, *out_of_order from the queue's properties. */
static posenc_status check_handles(posenc_context *ctx, const posenc_cl_api *cl,
                                   cl_context context, cl_device_id device,
                                   cl_command_queue queue, cl_platform_id *platform,
                                   bool *out_of_order)
{
    cl_uint count = 0;
    cl_int err = cl->GetContextInfo(context, CL_CONTEXT_NUM_DEVICES, sizeof count, &count, NULL);
    if (err != CL_SUCCESS || count == 0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "opencl.context: is not a usable cl_context (clGetContextInfo: %s)",
                            posenc_cl_error_name(err));
    err = cl->GetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof *platform, platform, NULL);
    if (err != CL_SUCCESS)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "opencl.device: is not a usable cl_device_id (clGetDeviceInfo: %s)",
                            posenc_cl_error_name(err));
    cl_device_id *devices = calloc(count, sizeof *devices);
    if (!devices)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    err = cl->GetContextInfo(context, CL_CONTEXT_DEVICES, count * sizeof *devices, devices, NULL);
    bool member = false;
    for (cl_uint i = 0; i < count && err == CL_SUCCESS; i++)
        member |= devices[i] == device;
    free(devices);
    if (err != CL_SUCCESS)
        return posenc_cl_fail(ctx, err, "opencl.context", "clGetContextInfo (CL_CONTEXT_DEVICES)");
    if (!member)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "opencl.device: is not one of the %u device(s) of opencl.context",
                            count);

    cl_context queue_context = NULL;
    cl_device_id queue_device = NULL;
    cl_command_queue_properties properties = 0;
    err = cl->GetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof queue_context, &queue_context,
                                  NULL);
    if (err == CL_SUCCESS)
        err = cl->GetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof queue_device, &queue_device,
                                      NULL);
    if (err == CL_SUCCESS)
        err = cl->GetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof properties, &properties,
                                      NULL);
    if (err != CL_SUCCESS)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "opencl.queue: is not a usable cl_command_queue "
                            "(clGetCommandQueueInfo: %s)",
                            posenc_cl_error_name(err));
    if (queue_context != context)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "opencl.queue: belongs to another cl_context than opencl.context");
    if (queue_device != device)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "opencl.queue: was created for another device than opencl.device");
    *out_of_order = (properties & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0;
    return POSENC_OK;
}

posenc_status posenc_cl_context_init_external(posenc_context *ctx,
                                              const posenc_context_desc *desc)
{
    const posenc_opencl_external *ext = &desc->opencl;
    static const char *const fields[3] = {"context", "device", "queue"};
    const void *handles[3] = {ext->context, ext->device, ext->queue};
    for (int i = 0; i < 3; i++) {
        if (!handles[i])
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "opencl.%s: is NULL; set context, device and queue together",
                                fields[i]);
    }
    const char *reason = "";
    const posenc_cl_api *cl = posenc_cl_load(&reason);
    if (!cl)
        return posenc__fail(ctx, POSENC_BACKEND_UNAVAILABLE, "opencl: %s", reason);
    cl_context context = (cl_context)ext->context;
    cl_device_id device = (cl_device_id)ext->device;
    cl_command_queue queue = (cl_command_queue)ext->queue;

    posenc_cl_context *state = new_state(cl);
    if (!state)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    posenc__signal_stack stack;
    posenc__signal_stack_save(&stack);
    cl_platform_id platform = NULL;
    posenc__gpu_failure failure = {0};
    posenc_status status =
        check_handles(ctx, cl, context, device, queue, &platform, &state->out_of_order);
    if (status == POSENC_OK) {
        /* The caller's device described like an enumerated one, in records the state owns. */
        status = posenc_cl_describe_device(cl, platform, device, &state->external_record,
                                           &failure);
        status = posenc__gpu_external_device(ctx, &state->external_record, status, &failure,
                                             "opencl.device",
                                             "cannot run posenc's kernels (they need an "
                                             "available OpenCL 1.2 device with a compiler)");
    }
    posenc__signal_stack_restore(&stack);
    if (status == POSENC_OK) {
        /* Borrowed: retained here, released once at context destroy. */
        cl->RetainContext(context);
        cl->RetainDevice(device);
        cl->RetainCommandQueue(queue);
        state->context = context;
        state->queue = queue;
    }
    return init_end(ctx, state, status);
}

void posenc_cl_context_fini(posenc_context *ctx)
{
    posenc_cl_context *state = ctx->backend_state;
    if (!state)
        return;
    const posenc_cl_api *cl = state->cl;
    /* posenc's own commands only: a caller's queue may hold work that waits for the caller. */
    posenc_cl_wait_all(ctx, "context");
    if (state->last)
        cl->ReleaseEvent(state->last);
    for (int i = 0; i < POSENC_CL_KERNEL_COUNT; i++) {
        if (state->kernels[i].kernel)
            cl->ReleaseKernel(state->kernels[i].kernel);
        if (state->kernels[i].program)
            cl->ReleaseProgram(state->kernels[i].program);
    }
    if (state->staging.mem)
        cl->ReleaseMemObject(state->staging.mem);
    for (int i = 0; i < POSENC__GPU_MAX_TABLES; i++) {
        if (state->freq_mems[i])
            cl->ReleaseMemObject(state->freq_mems[i]);
    }
    posenc__gpu_tables_fini(ctx, &state->freq_cache);
    cl->ReleaseCommandQueue(state->queue);
    cl->ReleaseContext(state->context);
    if (state->external_record.handle) { /* the caller's device */
        cl->ReleaseDevice(((const posenc_cl_device *)state->external_record.handle)->device);
        free(state->external_record.handle);
    }
    posenc__mutex_destroy(&state->lock);
    free(state);
    ctx->backend_state = NULL;
}
