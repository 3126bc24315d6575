/* OpenCL contexts: one cl_context and one in-order queue per posenc context, and their teardown
 * with everything built or allocated for them. */
#include "opencl/cl_internal.h"

#include <stdlib.h>

posenc_status posenc_cl_context_init(posenc_context *ctx, const posenc__device *device)
{
    const posenc_cl_api *cl = posenc_cl_api_get();
    const posenc_cl_device *dev = device->handle;
    posenc_cl_context *state = calloc(1, sizeof *state);
    if (!state)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    state->cl = cl;
    state->device = dev;

    cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                          (cl_context_properties)dev->platform, 0};
    cl_int err = CL_SUCCESS;
    posenc_cl_signal_stack stack;
    posenc_cl_signal_stack_save(&stack);
    state->context = cl->CreateContext(properties, 1, &dev->device, NULL, NULL, &err);
    posenc_cl_signal_stack_restore(&stack);
    const char *call = "clCreateContext";
    if (err == CL_SUCCESS && state->context) {
        call = "clCreateCommandQueue";
        state->queue = cl->CreateCommandQueue(state->context, dev->device, 0, &err);
        if (err == CL_SUCCESS && !state->queue)
            err = CL_INVALID_COMMAND_QUEUE;
    } else if (err == CL_SUCCESS) {
        err = CL_INVALID_CONTEXT;
    }
    if (err != CL_SUCCESS) {
        if (state->context)
            cl->ReleaseContext(state->context);
        free(state);
        posenc_status status = posenc_cl_status(err);
        if (status != POSENC_OUT_OF_MEMORY && status != POSENC_OUT_OF_DEVICE_MEMORY)
            status = POSENC_DEVICE_INIT_FAILED;
        return posenc__fail(ctx, status, "device: %s failed: %s (%d)", call,
                            posenc_cl_error_name(err), (int)err);
    }
    ctx->backend_state = state;
    return POSENC_OK;
}

void posenc_cl_context_fini(posenc_context *ctx)
{
    posenc_cl_context *state = ctx->backend_state;
    if (!state)
        return;
    const posenc_cl_api *cl = state->cl;
    cl->Finish(state->queue);
    posenc_cl_kernels_release(state);
    for (int i = 0; i < POSENC_CL_SLOTS; i++) {
        if (state->slots[i].mem)
            cl->ReleaseMemObject(state->slots[i].mem);
    }
    if (state->freqs)
        cl->ReleaseMemObject(state->freqs);
    free(state->freq_words);
    cl->ReleaseCommandQueue(state->queue);
    cl->ReleaseContext(state->context);
    free(state);
    ctx->backend_state = NULL;
}
