/* Kernel dispatch: arguments, the frequency table upload, and the launch geometry (whole
 * work-groups within CL_KERNEL_WORK_GROUP_SIZE; the kernels loop over the rest of the work). */
#include "opencl/cl_internal.h"

#include <stdlib.h>
#include <string.h>

/* Work-groups per compute unit launched at most; each work-item then loops. */
#define GROUPS_PER_COMPUTE_UNIT 64

static void arg(posenc_cl_args *args, size_t size, const void *value)
{
    if (args->error != CL_SUCCESS)
        return;
    args->error = posenc_cl_api_get()->SetKernelArg(args->kernel, args->next, size, value);
    args->next++;
}

void posenc_cl_arg_mem(posenc_cl_args *args, cl_mem mem) { arg(args, sizeof mem, &mem); }
void posenc_cl_arg_u32(posenc_cl_args *args, uint32_t value)
{
    cl_uint v = value;
    arg(args, sizeof v, &v);
}
void posenc_cl_arg_i32(posenc_cl_args *args, int32_t value)
{
    cl_int v = value;
    arg(args, sizeof v, &v);
}
void posenc_cl_arg_f32(posenc_cl_args *args, float value)
{
    cl_float v = value;
    arg(args, sizeof v, &v);
}

uint64_t posenc_cl_launch_size(const posenc_context *ctx, const posenc_cl_kernel *kernel,
                               uint64_t units)
{
    const posenc_cl_context *state = ctx->backend_state;
    size_t local = kernel->local_size;
    uint64_t groups = (units + local - 1) / local;
    uint64_t max_groups = (uint64_t)state->device->compute_units * GROUPS_PER_COMPUTE_UNIT;
    if (groups > max_groups)
        groups = max_groups;
    if (groups == 0)
        groups = 1;
    return groups * local;
}

posenc_status posenc_cl_launch(posenc_context *ctx, const posenc_cl_kernel *kernel,
                               uint64_t units, const char *what)
{
    posenc_cl_context *state = ctx->backend_state;
    size_t local = kernel->local_size;
    size_t global = (size_t)posenc_cl_launch_size(ctx, kernel, units);
    cl_int err = state->cl->EnqueueNDRangeKernel(state->queue, kernel->kernel, 1, NULL, &global,
                                                 &local, 0, NULL, NULL);
    return err == CL_SUCCESS ? POSENC_OK : posenc_cl_fail(ctx, err, what, "clEnqueueNDRangeKernel");
}

posenc_status posenc_cl_upload_freqs(posenc_context *ctx, const posenc__freq *freqs,
                                     uint32_t count, uint64_t id, const char *what)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_api *cl = state->cl;
    if (id != 0 && id == state->freqs_id && state->freqs)
        return POSENC_OK; /* a repeated call (a decode step): the table is on the device */
    state->freqs_id = 0;
    size_t words = 4 * (size_t)(count ? count : 1);
    if (words > state->freq_words_capacity) {
        uint32_t *grown = realloc(state->freq_words, words * sizeof *grown);
        if (!grown)
            return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "%s: out of host memory", what);
        state->freq_words = grown;
        state->freq_words_capacity = words;
    }
    for (uint32_t j = 0; j < count; j++) {
        state->freq_words[3 * j] = freqs[j].int_turns;
        state->freq_words[3 * j + 1] = (uint32_t)(freqs[j].frac >> 32);
        state->freq_words[3 * j + 2] = (uint32_t)freqs[j].frac;
        state->freq_words[3 * count + j] = freqs[j].component;
    }
    if (count == 0)
        memset(state->freq_words, 0, words * sizeof *state->freq_words);

    uint64_t bytes = words * sizeof(uint32_t);
    if (bytes > state->freqs_capacity) {
        if (state->freqs)
            cl->ReleaseMemObject(state->freqs);
        state->freqs = NULL;
        state->freqs_capacity = 0;
        uint64_t capacity = bytes < 4096 ? 4096 : bytes;
        cl_int err = CL_SUCCESS;
        cl_mem mem = cl->CreateBuffer(state->context, CL_MEM_READ_ONLY, (size_t)capacity, NULL,
                                      &err);
        if (err != CL_SUCCESS || !mem) {
            if (mem)
                cl->ReleaseMemObject(mem);
            return posenc_cl_fail(ctx, err == CL_SUCCESS ? CL_MEM_OBJECT_ALLOCATION_FAILURE : err,
                                  what, "clCreateBuffer (frequencies)");
        }
        state->freqs = mem;
        state->freqs_capacity = capacity;
    }
    cl_int err = cl->EnqueueWriteBuffer(state->queue, state->freqs, CL_TRUE, 0, (size_t)bytes,
                                        state->freq_words, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return posenc_cl_fail(ctx, err, what, "clEnqueueWriteBuffer (frequencies)");
    state->freqs_id = id;
    return POSENC_OK;
}
