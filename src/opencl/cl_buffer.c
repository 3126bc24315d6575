/* SPDX-License-Identifier: MIT */
/* OpenCL buffers: a device allocation each, an engine's cl_mem (posenc_cl_buffer_wrap), or the
 * caller's wrapped host memory, which stays the buffer's storage: imported once
 * (CL_MEM_USE_HOST_PTR) where the device shares host memory and takes its address, and then used
 * like a device allocation; otherwise staged by operations like any host tensor, so it is
 * current after each call on every device. */
#include "opencl/cl_internal.h"

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

/* Commands on a buffer come after posenc's earlier commands (submits, enqueues), so that a
 * download or a map shows their results on out-of-order queues too, and return once their own
 * command is done. */
typedef enum command_kind { WRITE, READ, MAP, UNMAP } command_kind;
static const char *const command_calls[] = {"clEnqueueWriteBuffer", "clEnqueueReadBuffer",
                                            "clEnqueueMapBuffer", "clEnqueueUnmapMemObject"};

typedef struct command {
    command_kind kind;
    cl_mem mem;
    uint64_t offset, size;
    void *host; /* the host bytes of a copy; a mapping's address */
} command;

static cl_int enqueue_command(posenc_context *ctx, void *user, cl_uint count,
                              const cl_event *list, cl_event *event)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_api *cl = state->cl;
    command *c = user;
    cl_int err = CL_SUCCESS;
    switch (c->kind) {
    case WRITE:
        return cl->EnqueueWriteBuffer(state->queue, c->mem, CL_FALSE, (size_t)c->offset,
                                      (size_t)c->size, c->host, count, list, event);
    case READ:
        return cl->EnqueueReadBuffer(state->queue, c->mem, CL_FALSE, (size_t)c->offset,
                                     (size_t)c->size, c->host, count, list, event);
    case MAP:
        c->host = cl->EnqueueMapBuffer(state->queue, c->mem, CL_FALSE, CL_MAP_READ | CL_MAP_WRITE,
                                       0, (size_t)c->size, count, list, event, &err);
        return err;
    case UNMAP: break;
    }
    return cl->EnqueueUnmapMemObject(state->queue, c->mem, c->host, count, list, event);
}

static posenc_status run(posenc_context *ctx, command *c)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc__mutex_lock(&state->lock);
    cl_event done = NULL;
    cl_int err = posenc_cl_enqueue_ordered(ctx, 0, NULL, enqueue_command, c, &done);
    posenc__mutex_unlock(&state->lock);
    if (err != CL_SUCCESS)
        return posenc_cl_fail(ctx, err, "buffer", command_calls[c->kind]);
    err = posenc_cl_complete_all(state->cl, 1, &done);
    return err == CL_SUCCESS ? POSENC_OK : posenc_cl_fail(ctx, err, "buffer", "clWaitForEvents");
}

posenc_status posenc_cl_buffer_upload(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                      const void *data, uint64_t size)
{
    command c = {WRITE, (cl_mem)buf->backend_state, offset, size, (void *)data};
    return run(ctx, &c);
}

posenc_status posenc_cl_buffer_download(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                        void *data, uint64_t size)
{
    command c = {READ, (cl_mem)buf->backend_state, offset, size, data};
    return run(ctx, &c);
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
    command c = {MAP, (cl_mem)buf->backend_state, 0, buf->size, NULL};
    posenc_status status = run(ctx, &c);
    if (status == POSENC_OK)
        *data = c.host;
    return status;
}

posenc_status posenc_cl_buffer_unmap(posenc_context *ctx, posenc_buffer *buf, void *data)
{
    command c = {UNMAP, (cl_mem)buf->backend_state, 0, buf->size, data};
    return run(ctx, &c);
}
