/* SPDX-License-Identifier: MIT */
/* Kernel dispatch: arguments, the device copies of frequency tables, and the launch geometry
 * (whole work-groups within CL_KERNEL_WORK_GROUP_SIZE; the kernels loop over the rest). */
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
    const posenc_cl_context *state = ctx->backend_state;
    size_t local = kernel->local_size;
    uint64_t groups = (units + local - 1) / local;
    /* GPUs: a few groups per compute unit, each work-item looping over the rest. CPU devices
     * run a group's work-items one after another, so a work-item looping with the stride of
     * the launch would stream its rows through the cache once for every work-item of its group
     * (PoCL: RoPE 1.5-3x slower): there, one work-item per unit, up to the 2^31 that the
     * kernels' 32-bit indexing allows. */
    uint64_t max_groups = ctx->device->info.type == POSENC_DEVICE_CPU
                              ? (UINT64_C(1) << 31) / local
                              : (uint64_t)state->device->compute_units * GROUPS_PER_COMPUTE_UNIT;
    if (groups > max_groups)
        groups = max_groups;
    if (groups == 0)
        groups = 1;
    return groups * local;
}

posenc_status posenc_cl_launch(posenc_context *ctx, const posenc_cl_kernel *kernel,
                               uint64_t units, const char *what, cl_uint wait_count,
                               const cl_event *wait_list, cl_event *event)
{
    launch l = {.kernel = kernel->kernel,
                .global = (size_t)posenc_cl_launch_size(ctx, kernel, units),
                .local = kernel->local_size};
    cl_int err = posenc_cl_enqueue_ordered(ctx, wait_count, wait_list, enqueue_launch, &l, event);
    return err == CL_SUCCESS ? POSENC_OK : posenc_cl_fail(ctx, err, what, "clEnqueueNDRangeKernel");
}

/* The cache entry to use for table `id`: its own, or the least recently used one. */
static posenc_cl_freq_table *table_slot(posenc_cl_context *state, uint64_t id, bool *hit)
{
    posenc_cl_freq_table *oldest = &state->freq_tables[0];
    for (int i = 0; i < POSENC_CL_FREQ_TABLES; i++) {
        posenc_cl_freq_table *t = &state->freq_tables[i];
        if (id != 0 && t->id == id && t->mem) {
            *hit = true;
            return t;
        }
        if (!t->mem || (oldest->mem && t->used < oldest->used))
            oldest = t;
    }
    *hit = false;
    return oldest;
}

posenc_status posenc_cl_freqs_get(posenc_context *ctx, const posenc__freq *freqs,
                                 uint32_t count, uint64_t id, const char *what, cl_mem *mem)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_api *cl = state->cl;
    bool hit = false;
    posenc_cl_freq_table *table = table_slot(state, id, &hit);
    table->used = ++state->freq_uses;
    if (hit) { /* a repeated call (a decode step): the table is on the device */
        *mem = table->mem;
        return POSENC_OK;
    }

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

    /* CL_MEM_COPY_HOST_PTR: the words are copied when the buffer is created, so work left
     * running (submits, enqueues on the caller's queue) never reads posenc's host memory, and
     * nothing waits on the queue. */
    cl_int err = CL_SUCCESS;
    cl_mem created = cl->CreateBuffer(state->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                      words * sizeof(uint32_t), state->freq_words, &err);
    if (err != CL_SUCCESS || !created) {
        if (created)
            cl->ReleaseMemObject(created);
        return posenc_cl_fail(ctx, err == CL_SUCCESS ? CL_MEM_OBJECT_ALLOCATION_FAILURE : err,
                              what, "clCreateBuffer (frequencies)");
    }
    /* The table replaced may still be read by queued work: OpenCL releases the memory once
     * that work is done. */
    if (table->mem)
        cl->ReleaseMemObject(table->mem);
    table->mem = created;
    table->id = id;
    *mem = created;
    return POSENC_OK;
}
