/* SPDX-License-Identifier: MIT */
/* Kernel dispatch: arguments, the device copies of the frequency tables core/gpu_tables.h
 * caches, and the launch geometry (whole work-groups within CL_KERNEL_WORK_GROUP_SIZE; the
 * kernels loop over the rest). */
#include "opencl/cl_internal.h"

/* Work-groups per compute unit launched at most; each work-item then loops. */
#define GROUPS_PER_COMPUTE_UNIT 64

typedef struct launch {
    cl_kernel kernel;
    size_t global, local;
} launch;

static cl_int enqueue_launch(posenc_context *ctx, void *user, cl_uint count, const cl_event *list,
                             cl_event *event)
{
    posenc_cl_context *state = ctx->backend_state;
    const launch *l = user;
    return state->cl->EnqueueNDRangeKernel(state->queue, l->kernel, 1, NULL, &l->global,
                                           &l->local, count, list, event);
}

uint64_t posenc_cl_launch_size(const posenc_context *ctx, const posenc_cl_kernel *kernel,
                               uint64_t units)
{
    size_t local = kernel->local_size;
    uint64_t groups = (units + local - 1) / local;
    /* GPUs: a few groups per compute unit, each work-item looping over the rest. CPU devices
     * run a group's work-items one after another, so a work-item looping with the stride of
     * the launch would stream its rows through the cache once for every work-item of its group
     * (PoCL: RoPE 1.5-3x slower): there, one work-item per unit, up to the 2^31 that the
     * kernels' 32-bit indexing allows. */
    uint64_t max_groups = ctx->device->info.type == POSENC_DEVICE_CPU
                              ? (UINT64_C(1) << 31) / local
                              : (uint64_t)ctx->device->info.compute_units * GROUPS_PER_COMPUTE_UNIT;
    if (groups > max_groups)
        groups = max_groups;
    if (groups == 0)
        groups = 1;
    return groups * local;
}

posenc_status posenc_cl_run_op(posenc_context *ctx, const posenc_cl_op *run, cl_uint wait_count,
                               const cl_event *wait_list, cl_event *event)
{
    const posenc_cl_kernel *kernel = NULL;
    posenc_status status = posenc_cl_kernel_get(ctx, run->kernel, &kernel);
    if (status != POSENC_OK)
        return status;
    return run->launch(ctx, run, kernel, wait_count, wait_list, event);
}

posenc_status posenc_cl_stage_op(posenc_context *ctx, const posenc_cl_op *run, bool left_running,
                                 posenc_cl_binding *bindings, posenc_cl_staging *staging,
                                 cl_mem *freqs)
{
    const posenc__gpu_op *op = &run->gpu;
    posenc_cl_stage_views(staging, op->views, op->access, op->names, op->view_count, bindings);
    posenc_status status = posenc_cl_stage_in(ctx, staging);
    /* Every view is a kernel argument. One absent from the list is bound as the one before it:
     * an output in place, or x added into out itself, is then its input (core/op_views.h),
     * and an argument the kernel never touches still needs a buffer. */
    for (uint32_t i = 1; status == POSENC_OK && i < op->view_count; i++) {
        if (!op->views[i])
            bindings[i] = bindings[i - 1];
    }
    if (status == POSENC_OK && left_running && posenc__gpu_stage_has_host(&staging->plan))
        status = posenc__fail(ctx, POSENC_INTERNAL, "%s: host memory in work left running",
                              op->what);
    if (status == POSENC_OK && posenc__gpu_table_given(&op->table))
        status = posenc_cl_freqs_get(ctx, &op->table, op->what, freqs);
    if (status != POSENC_OK)
        posenc_cl_stage_release(ctx, staging);
    return status;
}

posenc_status posenc_cl_run(posenc_context *ctx, const posenc_cl_kernel *kernel, uint64_t units,
                            const char *what, const posenc_cl_binding *bindings, uint32_t count,
                            cl_mem freqs, const void *params, size_t params_size,
                            size_t arg_size, posenc_cl_staging *staging, cl_uint wait_count,
                            const cl_event *wait_list, cl_event *event)
{
    posenc_cl_context *state = ctx->backend_state;
    cl_uint next = 0; /* the arguments in order, up to the first error */
    cl_int err = CL_SUCCESS;
    for (uint32_t i = 0; i < count && err == CL_SUCCESS; i++)
        err = state->cl->SetKernelArg(kernel->kernel, next++, sizeof(cl_mem), &bindings[i].mem);
    if (err == CL_SUCCESS && freqs)
        err = state->cl->SetKernelArg(kernel->kernel, next++, sizeof freqs, &freqs);
    /* The parameters as arguments of `arg_size` bytes each: 4-byte words, or whole blocks for
     * struct arguments. Every parameter is a 4-byte uint, int or float, passed as its bytes
     * (cl_uint, cl_int and cl_float have the host's representation, and a struct of them no
     * padding). */
    for (size_t at = 0; err == CL_SUCCESS && at + arg_size <= params_size; at += arg_size)
        err = state->cl->SetKernelArg(kernel->kernel, next++, arg_size,
                                      (const unsigned char *)params + at);
    if (err != CL_SUCCESS) {
        posenc_cl_stage_release(ctx, staging);
        return posenc_cl_fail(ctx, err, what, "clSetKernelArg");
    }
    launch l = {.kernel = kernel->kernel,
                .global = (size_t)posenc_cl_launch_size(ctx, kernel, units),
                .local = kernel->local_size};
    cl_event done = NULL;
    err = posenc_cl_enqueue_ordered(ctx, wait_count, wait_list, enqueue_launch, &l,
                                    event ? event : &done);
    posenc_status status =
        err == CL_SUCCESS ? POSENC_OK : posenc_cl_fail(ctx, err, what, "clEnqueueNDRangeKernel");
    if (event) /* left running: the caller waits for *event */
        return status;
    if (status == POSENC_OK) {
        status = posenc_cl_stage_out(ctx, staging, done);
        state->cl->ReleaseEvent(done);
    }
    posenc_cl_stage_release(ctx, staging); /* when the launch failed */
    return status;
}

/* OpenCL releases a table's memory once the commands already using it are done. */
static posenc_status evict(posenc_context *ctx, uint32_t slot, void *user)
{
    (void)user;
    posenc_cl_context *state = ctx->backend_state;
    state->cl->ReleaseMemObject(state->freq_mems[slot]);
    state->freq_mems[slot] = NULL;
    return POSENC_OK;
}

posenc_status posenc_cl_freqs_get(posenc_context *ctx, const posenc__gpu_table_source *source,
                                 const char *what, cl_mem *mem)
{
    posenc_cl_context *state = ctx->backend_state;
    uint32_t slot;
    bool hit;
    posenc_status status = posenc__gpu_tables_find(ctx, &state->freq_cache, source, what, evict,
                                                   NULL, &slot, &hit);
    if (status != POSENC_OK)
        return status;
    if (hit) { /* a repeated call (a decode step): the table is on the device */
        *mem = state->freq_mems[slot];
        return POSENC_OK;
    }
    /* CL_MEM_COPY_HOST_PTR: the words are copied when the buffer is created, so work left
     * running (submits, enqueues on the caller's queue) never reads posenc's host memory, and
     * nothing waits on the queue. */
    const posenc__gpu_table *table = &state->freq_cache.slots[slot];
    cl_int err = CL_SUCCESS;
    cl_mem created = state->cl->CreateBuffer(
        state->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
        (size_t)table->word_count * sizeof(uint32_t), table->words, &err);
    if (err != CL_SUCCESS || !created) {
        if (created)
            state->cl->ReleaseMemObject(created);
        posenc__gpu_tables_drop(ctx, &state->freq_cache, slot);
        return posenc_cl_fail(ctx, err == CL_SUCCESS ? CL_MEM_OBJECT_ALLOCATION_FAILURE : err,
                              what, "clCreateBuffer (frequencies)");
    }
    state->freq_mems[slot] = created;
    *mem = created;
    return POSENC_OK;
}
