/* OpenCL buffers: a device allocation each, or the caller's wrapped host memory, which stays the
 * buffer's storage (operations stage it like any host tensor, so it is current after each call
 * on every device, unified memory or not). */
#include "opencl/cl_internal.h"

#include <string.h>

posenc_status posenc_cl_buffer_init(posenc_context *ctx, posenc_buffer *buf)
{
    if (buf->host_memory) {
        buf->backend_state = NULL; /* the caller's memory is the storage */
        return POSENC_OK;
    }
    posenc_cl_context *state = ctx->backend_state;
    if (buf->size > SIZE_MAX)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "size: %llu bytes cannot be addressed",
                            (unsigned long long)buf->size);
    cl_int err = CL_SUCCESS;
    cl_mem mem = state->cl->CreateBuffer(state->context, CL_MEM_READ_WRITE, (size_t)buf->size,
                                         NULL, &err);
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
        /* An in-order queue: anything still using the buffer was finished by its operation
         * (every operation is synchronous), so releasing is safe. */
        state->cl->ReleaseMemObject((cl_mem)buf->backend_state);
    }
    buf->backend_state = NULL;
}

cl_mem posenc_cl_buffer_mem(const posenc_buffer *buf) { return (cl_mem)buf->backend_state; }

posenc_status posenc_cl_buffer_upload(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                      const void *data, uint64_t size)
{
    if (buf->host_memory) {
        memmove((uint8_t *)buf->host_memory + offset, data, (size_t)size);
        return POSENC_OK;
    }
    posenc_cl_context *state = ctx->backend_state;
    cl_int err = state->cl->EnqueueWriteBuffer(state->queue, (cl_mem)buf->backend_state, CL_TRUE,
                                               (size_t)offset, (size_t)size, data, 0, NULL,
                                               NULL);
    return err == CL_SUCCESS ? POSENC_OK
                             : posenc_cl_fail(ctx, err, "buffer", "clEnqueueWriteBuffer");
}

posenc_status posenc_cl_buffer_download(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                        void *data, uint64_t size)
{
    if (buf->host_memory) {
        memmove(data, (const uint8_t *)buf->host_memory + offset, (size_t)size);
        return POSENC_OK;
    }
    posenc_cl_context *state = ctx->backend_state;
    cl_int err = state->cl->EnqueueReadBuffer(state->queue, (cl_mem)buf->backend_state, CL_TRUE,
                                              (size_t)offset, (size_t)size, data, 0, NULL, NULL);
    return err == CL_SUCCESS ? POSENC_OK
                             : posenc_cl_fail(ctx, err, "buffer", "clEnqueueReadBuffer");
}

/* Wrapped memory is the caller's: the front end compares it by address with host tensors and
 * other wrappers, so aliasing is seen. Device allocations have no host address. */
void *posenc_cl_buffer_host_address(posenc_context *ctx, posenc_buffer *buf)
{
    (void)ctx;
    return buf->host_memory;
}
