/* SPDX-License-Identifier: MIT */
/* Binding the tensors of one operation to device memory. Views in device buffers are used in
 * place; host views and wrapped buffers are imported where the device shares host memory
 * (cl_import.c), else go through one reusable staging allocation, laid out, copied in and
 * copied back as core/gpu_staging.h plans it. */
#include "opencl/cl_internal.h"

#define MIN_STAGING_BYTES 4096
/* Host regions smaller than this are copied, not imported: making and releasing a buffer costs
 * more than copying less than a page. On PoCL a decode step's q (16 KiB) and k (4 KiB) were
 * both faster imported (see docs/benchmarks.md). */
#define IMPORT_MIN_BYTES (UINT64_C(4) << 10)

void posenc_cl_stage_views(posenc_cl_staging *staging, const posenc__view *const *views,
                           const unsigned *access, const char *const *names, uint32_t count,
                           posenc_cl_binding *bindings)
{
    for (uint32_t i = 0; i < count; i++) {
        if (views[i])
            staging->bindings[posenc__gpu_stage_add(&staging->plan, views[i], names[i],
                                                    access[i], NULL)] = &bindings[i];
    }
}

/* Frees the staging allocation. */
static void drop_staging(posenc_context *ctx)
{
    posenc_cl_context *state = ctx->backend_state;
    if (state->staging.mem)
        state->cl->ReleaseMemObject(state->staging.mem);
    posenc__atomic64_sub(&ctx->stats.staging_bytes, state->staging.capacity);
    state->staging = (posenc_cl_slot){0};
}

/* Imports one region the plan offers (posenc__gpu_stage_in's hook), from its start aligned down to
 * CL_DEVICE_MEM_BASE_ADDR_ALIGN (within the same page, so mapped). */
static bool import_region(posenc_context *ctx, void *user, uint32_t r, uint8_t *lo,
                          uint64_t size, const char *name)
{
    const posenc_cl_device *dev = ctx->device->handle;
    posenc_cl_staging *staging = user;
    uint64_t base = (uint64_t)((uintptr_t)lo % dev->base_alignment);
    staging->imports[r] = posenc_cl_import(ctx, lo - base, base + size, name);
    staging->import_base[r] = base;
    return staging->imports[r] != NULL;
}

void posenc_cl_stage_release(posenc_context *ctx, posenc_cl_staging *staging)
{
    posenc_cl_context *state = ctx->backend_state;
    for (uint32_t r = 0; r < POSENC__GPU_MAX_VIEWS; r++) {
        if (staging->imports[r])
            state->cl->ReleaseMemObject(staging->imports[r]);
        staging->imports[r] = NULL;
    }
    if (state->staging.capacity > POSENC__GPU_STAGING_KEEP_BYTES)
        drop_staging(ctx);
}

/* Where a view or a read lies: in view `index`'s buffer, in region `index`'s import (`*offset`
 * moved from the region's lo to the import's start), or in the staging area. */
static cl_mem memory_of(const posenc_context *ctx, const posenc_cl_staging *staging,
                        posenc__gpu_memory memory, uint32_t index, uint64_t *offset)
{
    if (memory == POSENC__GPU_IN_DEVICE)
        return posenc_cl_buffer_mem(staging->plan.views[index].view->buffer);
    if (memory == POSENC__GPU_IN_STAGING)
        return ((const posenc_cl_context *)ctx->backend_state)->staging.mem;
    *offset += staging->import_base[index];
    return staging->imports[index];
}

/* Binds a view of the plan (posenc__gpu_stage_in's hook). */
static posenc_status bind_view(posenc_context *ctx, void *user, uint32_t view,
                               posenc__gpu_memory memory, uint32_t region, uint64_t position)
{
    posenc_cl_staging *staging = user;
    const posenc__gpu_staged_view *v = &staging->plan.views[view];
    bool in_device = memory == POSENC__GPU_IN_DEVICE;
    if (in_device)
        position = v->view->offset;
    cl_mem mem = memory_of(ctx, staging, memory, in_device ? view : region, &position);
    posenc__gpu_binding b;
    posenc_status status = posenc__gpu_bind(ctx, "OpenCL", v->name, v->view, position,
                                            POSENC__GPU_ELEMENT_LIMIT, &b);
    if (status != POSENC_OK)
        return status;
    staging->bindings[view]->mem = mem;
    staging->bindings[view]->offset = b.offset;
    return POSENC_OK;
}

/* The staging allocation is kept and grown (posenc__gpu_stage_in's hook); one past
 * POSENC__GPU_STAGING_KEEP_BYTES is freed after the call (posenc_cl_stage_release). */
static posenc_status reserve(posenc_context *ctx, void *user, uint64_t bytes, const char *name)
{
    posenc_cl_context *state = ctx->backend_state;
    uint64_t max = ctx->device->info.max_buffer_bytes;
    if (state->staging.capacity >= bytes)
        return POSENC_OK;
    if (bytes > max || bytes > SIZE_MAX)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "%s: the host tensor spans %llu bytes, more than the largest "
                            "allocation of this OpenCL device (%llu bytes); use a smaller "
                            "tensor or split the call",
                            name, (unsigned long long)bytes, (unsigned long long)max);
    drop_staging(ctx);
    uint64_t capacity = bytes < MIN_STAGING_BYTES && MIN_STAGING_BYTES <= max ? MIN_STAGING_BYTES
                                                                              : bytes;
    cl_int err = CL_SUCCESS;
    cl_mem mem = state->cl->CreateBuffer(state->context, CL_MEM_READ_WRITE, (size_t)capacity,
                                         NULL, &err);
    if (err != CL_SUCCESS || !mem) {
        if (mem)
            state->cl->ReleaseMemObject(mem);
        return posenc_cl_fail(ctx, err == CL_SUCCESS ? CL_MEM_OBJECT_ALLOCATION_FAILURE : err,
                              name, "clCreateBuffer (staging)");
    }
    state->staging = (posenc_cl_slot){mem, capacity};
    posenc__atomic64_add(&ctx->stats.staging_bytes, capacity);
    return POSENC_OK;
}

static posenc_status upload(posenc_context *ctx, void *user, uint32_t r, const char *name)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc__gpu_region *region = &((posenc_cl_staging *)user)->plan.regions[r];
    cl_event written = NULL;
    cl_int err = state->cl->EnqueueWriteBuffer(state->queue, state->staging.mem, CL_FALSE,
                                               (size_t)region->offset,
                                               (size_t)(region->hi - region->lo), region->lo, 0,
                                               NULL, &written);
    if (err != CL_SUCCESS)
        return posenc_cl_fail(ctx, err, name, "clEnqueueWriteBuffer (staging)");
    if ((err = posenc_cl_complete_all(state->cl, 1, &written)) != CL_SUCCESS)
        return posenc_cl_fail(ctx, err, name, "clWaitForEvents (staging write)");
    return POSENC_OK;
}

posenc_status posenc_cl_stage_in(posenc_context *ctx, posenc_cl_staging *staging)
{
    const posenc_cl_context *state = ctx->backend_state;
    posenc__gpu_stage_hooks hooks = {
        .bind = bind_view,
        .reserve = reserve,
        .upload = upload,
        .import = state->host_import ? import_region : NULL,
        .import_min_bytes = IMPORT_MIN_BYTES,
    };
    return posenc__gpu_stage_in(ctx, &staging->plan, &hooks, staging);
}

/* Reads into place (posenc__gpu_stage_out's hooks, here and below; `user` is the call's
 * staging). Imported memory is read into the very memory its CL_MEM_USE_HOST_PTR buffer was
 * made over: that is how OpenCL makes a kernel's writes there visible to the host (1.2, 5.2.2),
 * one command where a map and unmap take two; on a device sharing host memory it copies
 * nothing. OpenCL asks that no other command use a buffer while a read of it runs, so each read
 * waits for the one before (the kernel for the first), and all are waited for together. */
static posenc_status read_in_place(posenc_context *ctx, void *user, const posenc__gpu_read *reads,
                                   uint32_t count)
{
    const posenc_cl_context *state = ctx->backend_state;
    posenc_cl_staging *staging = user;
    cl_event after = staging->kernel_done;
    cl_event events[2 * POSENC__GPU_MAX_VIEWS] = {0};
    uint32_t made = 0;
    cl_int err = CL_SUCCESS;
    const char *what = "staging";
    for (uint32_t i = 0; i < count && err == CL_SUCCESS; i++) {
        const posenc__gpu_read *r = &reads[i];
        uint64_t offset = r->offset;
        cl_mem mem = memory_of(ctx, staging, r->memory, r->index, &offset);
        what = r->memory == POSENC__GPU_IN_STAGING ? "staging" : "imported host memory";
        cl_event read = NULL;
        err = state->cl->EnqueueReadBuffer(state->queue, mem, CL_FALSE, (size_t)offset,
                                           (size_t)r->size, r->host, 1, &after, &read);
        if (read) {
            events[made++] = read;
            after = read;
        }
    }
    /* Every event is waited for and released, also after a failed enqueue. */
    cl_int waited = posenc_cl_complete_all(state->cl, made, events);
    char call[64];
    snprintf(call, sizeof call, "%s (%s)",
             err != CL_SUCCESS ? "clEnqueueReadBuffer" : "clWaitForEvents", what);
    err = err != CL_SUCCESS ? err : waited;
    return err == CL_SUCCESS ? POSENC_OK : posenc_cl_fail(ctx, err, "output", call);
}

/* Maps a staging region for reading, and waits for the map. */
static posenc_status map_region(posenc_context *ctx, void *user, uint32_t r,
                                const uint8_t **bytes)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_api *cl = state->cl;
    posenc_cl_staging *staging = user;
    const posenc__gpu_region *region = &staging->plan.regions[r];
    cl_event map = NULL;
    cl_int err = CL_SUCCESS;
    void *mapped = cl->EnqueueMapBuffer(state->queue, state->staging.mem, CL_FALSE, CL_MAP_READ,
                                        (size_t)region->offset,
                                        (size_t)(region->hi - region->lo), 1,
                                        &staging->kernel_done, &map, &err);
    if (err != CL_SUCCESS || !mapped) {
        if (map)
            cl->ReleaseEvent(map);
        return posenc_cl_fail(ctx, err == CL_SUCCESS ? CL_MAP_FAILURE : err, "output",
                              "clEnqueueMapBuffer (staging)");
    }
    *bytes = mapped; /* unmapped by unmap_all, also when the wait fails */
    if ((err = posenc_cl_complete_all(cl, 1, &map)) != CL_SUCCESS)
        return posenc_cl_fail(ctx, err, "output", "clWaitForEvents (staging map)");
    return POSENC_OK;
}

/* Unmaps the staging regions in `mapped`, each unmap waited for, so that the next call's copy
 * into the staging allocation cannot overtake it on an out-of-order queue. An unmap the
 * runtime refuses leaves the allocation mapped: it is dropped, and the next call makes another. */
static void unmap_all(posenc_context *ctx, void *user, const uint8_t *const *mapped)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_api *cl = state->cl;
    const posenc__gpu_staging *plan = &((posenc_cl_staging *)user)->plan;
    cl_int failed = CL_SUCCESS;
    for (uint32_t r = 0; r < plan->region_count; r++) {
        if (!mapped[r])
            continue;
        cl_event unmapped = NULL;
        cl_int err = cl->EnqueueUnmapMemObject(state->queue, state->staging.mem,
                                               (void *)(uintptr_t)mapped[r], 0, NULL, &unmapped);
        if (err == CL_SUCCESS)
            err = posenc_cl_complete_all(cl, 1, &unmapped);
        if (err != CL_SUCCESS && failed == CL_SUCCESS)
            failed = err;
    }
    if (failed == CL_SUCCESS)
        return;
    posenc__log(ctx, POSENC_LOG_WARNING,
                "output: clEnqueueUnmapMemObject (staging) failed: %s (%d); the staging "
                "allocation is dropped",
                posenc_cl_error_name(failed), (int)failed);
    drop_staging(ctx);
}

posenc_status posenc_cl_stage_out(posenc_context *ctx, posenc_cl_staging *staging,
                                  cl_event after)
{
    static const posenc__gpu_stage_out_hooks hooks = {
        .read = read_in_place,
        .map = map_region,
        .unmap = unmap_all,
    };
    staging->kernel_done = after;
    posenc_status status = posenc__gpu_stage_out(ctx, &staging->plan, &hooks, staging);
    /* Waits for posenc's own commands only: the queue may be the caller's. */
    posenc_status waited = posenc_cl_wait_all(ctx, "operation");
    posenc_cl_stage_release(ctx, staging);
    return status != POSENC_OK ? status : waited;
}
