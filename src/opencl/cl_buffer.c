/* SPDX-License-Identifier: MIT */
/* OpenCL buffers: a device allocation each, an engine's cl_mem (posenc_cl_buffer_wrap), or the
 * caller's wrapped host memory, which stays the buffer's storage: imported once
 * (CL_MEM_USE_HOST_PTR) where the device shares host memory and takes its address, and then used
 * like a device allocation; otherwise staged by operations like any host tensor, so it is
 * current after each call on every device. */
#include "opencl/cl_internal.h"

#include <string.h>

posenc_status posenc_cl_buffer_init(posenc_context *ctx, posenc_buffer *buf)
{
    posenc_cl_context *state = ctx->backend_state;
    if (buf->host_memory) {
        /* NULL: the caller's memory is the storage, staged around each operation */
        buf->backend_state = state->host_import ? posenc_cl_import(ctx, buf->host_memory,
                                                                   buf->size, "host_memory")
                                                : NULL;
        buf->host_imported = buf->backend_state != NULL;
        return POSENC_OK;
    }
    if (buf->size > SIZE_MAX)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "size: %llu bytes cannot be addressed",
                            (unsigned long long)buf->size);
    cl_int err = CL_SUCCESS;
    /* Memory the host shares is allocated for host access, so that posenc_buffer_map is the
     * same memory, not a copy (drivers of integrated GPUs map other allocations by copying). */
    cl_mem_flags flags = CL_MEM_READ_WRITE;
    if (ctx->device->info.unified_memory)
        flags |= CL_MEM_ALLOC_HOST_PTR;
    cl_mem mem = state->cl->CreateBuffer(state->context, flags, (size_t)buf->size, NULL, &err);
    if (err != CL_SUCCESS || !mem) {
        if (mem)
            state->cl->ReleaseMemObject(mem);
        return posenc_cl_fail(ctx, err == CL_SUCCESS ? CL_MEM_OBJECT_ALLOCATION_FAILURE : err,
                              "size", "clCreateBuffer");
    }
    buf->backend_state = mem;
    return POSENC_OK;
}

void posenc_cl_buffer_fini(posenc_context *ctx, posenc_buffer *buf)
{
    posenc_cl_context *state = ctx->backend_state;
    if (buf->backend_state) {
        /* Work left running may use the buffer (submits, enqueues on the caller's queue): wait
         * for posenc's commands, though OpenCL would defer the release anyway. For a wrapped
         * cl_mem this releases the reference taken by posenc_cl_buffer_wrap. */
        posenc__mutex_lock(&state->lock);
        posenc_cl_wait_all(ctx, "buffer");
        posenc__mutex_unlock(&state->lock);
        state->cl->ReleaseMemObject((cl_mem)buf->backend_state);
    }
    buf->backend_state = NULL;
}

cl_mem posenc_cl_buffer_mem(const posenc_buffer *buf) { return (cl_mem)buf->backend_state; }

/* Copies come after posenc's earlier commands (submits, enqueues), so a download shows their
 * results on out-of-order queues too, and return once their own command is done. */
typedef struct transfer {
    cl_mem mem;
    uint64_t offset;
    void *host;
    uint64_t size;
    bool upload;
} transfer;

static cl_int enqueue_transfer(posenc_context *ctx, void *user, cl_uint count,
                               const cl_event *list, cl_event *event)
{
    posenc_cl_context *state = ctx->backend_state;
    const transfer *t = user;
    if (t->upload)
        return state->cl->EnqueueWriteBuffer(state->queue, t->mem, CL_FALSE, (size_t)t->offset,
                                             (size_t)t->size, t->host, count, list, event);
    return state->cl->EnqueueReadBuffer(state->queue, t->mem, CL_FALSE, (size_t)t->offset,
                                        (size_t)t->size, t->host, count, list, event);
}

static posenc_status copy(posenc_context *ctx, posenc_cl_enqueue_fn enqueue, void *user,
                          const char *call)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc__mutex_lock(&state->lock);
    cl_event done = NULL;
    cl_int err = posenc_cl_enqueue_ordered(ctx, 0, NULL, enqueue, user, &done);
    posenc__mutex_unlock(&state->lock);
    if (err != CL_SUCCESS)
        return posenc_cl_fail(ctx, err, "buffer", call);
    err = posenc_cl_complete(state->cl, done);
    return err == CL_SUCCESS ? POSENC_OK : posenc_cl_fail(ctx, err, "buffer", "clWaitForEvents");
}

/* Wrapped host memory that is not imported is the buffer's storage itself. */
static posenc_status copy_bytes(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                void *host, uint64_t size, bool upload)
{
    if (buf->host_memory && !buf->host_imported) {
        uint8_t *memory = (uint8_t *)buf->host_memory + offset;
        memmove(upload ? memory : host, upload ? host : memory, (size_t)size);
        return POSENC_OK;
    }
    transfer t = {(cl_mem)buf->backend_state, offset, host, size, upload};
    return copy(ctx, enqueue_transfer, &t,
                upload ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer");
}

posenc_status posenc_cl_buffer_upload(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                      const void *data, uint64_t size)
{
    return copy_bytes(ctx, buf, offset, (void *)data, size, true);
}

posenc_status posenc_cl_buffer_download(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                        void *data, uint64_t size)
{
    return copy_bytes(ctx, buf, offset, data, size, false);
}

/* Wrapped memory is the caller's: the front end compares it by address with host tensors and
 * other wrappers, so aliasing is seen. Device allocations have no host address. */
void *posenc_cl_buffer_host_address(posenc_context *ctx, posenc_buffer *buf)
{
    (void)ctx;
    return buf->host_memory;
}

typedef struct mapping {
    cl_mem mem;
    size_t size;
    void *address;
} mapping;

static cl_int enqueue_map(posenc_context *ctx, void *user, cl_uint count, const cl_event *list,
                          cl_event *event)
{
    posenc_cl_context *state = ctx->backend_state;
    mapping *m = user;
    cl_int err = CL_SUCCESS;
    m->address = state->cl->EnqueueMapBuffer(state->queue, m->mem, CL_FALSE,
                                             CL_MAP_READ | CL_MAP_WRITE, 0, m->size, count, list,
                                             event, &err);
    return err;
}

static cl_int enqueue_unmap(posenc_context *ctx, void *user, cl_uint count, const cl_event *list,
                            cl_event *event)
{
    posenc_cl_context *state = ctx->backend_state;
    const mapping *m = user;
    return state->cl->EnqueueUnmapMemObject(state->queue, m->mem, m->address, count, list, event);
}

/* A device allocation (or imported host memory) is mapped where the device shares host memory
 * (allocated with CL_MEM_ALLOC_HOST_PTR, above), after posenc's earlier commands; a discrete GPU
 * would copy, which posenc_buffer_download already does. */
posenc_status posenc_cl_buffer_map(posenc_context *ctx, posenc_buffer *buf, void **data)
{
    if (!ctx->device->info.unified_memory)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "buffer: is in memory of a device that does not share host memory; "
                            "use posenc_buffer_upload / posenc_buffer_download");
    mapping m = {(cl_mem)buf->backend_state, (size_t)buf->size, NULL};
    posenc_status status = copy(ctx, enqueue_map, &m, "clEnqueueMapBuffer");
    if (status == POSENC_OK)
        *data = m.address;
    return status;
}

posenc_status posenc_cl_buffer_unmap(posenc_context *ctx, posenc_buffer *buf, void *data)
{
    mapping m = {(cl_mem)buf->backend_state, (size_t)buf->size, data};
    return copy(ctx, enqueue_unmap, &m, "clEnqueueUnmapMemObject");
}
