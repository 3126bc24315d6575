/* SPDX-License-Identifier: MIT */
/* Buffers: creation, host wrapping, adoption of a backend's storage, upload and download with
 * range checks. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

/* The context's list of live buffers, which posenc_context_destroy frees. Buffers are made and
 * destroyed while other threads record or enqueue on the context, and by several threads at
 * once, so the list changes under the context's shared_lock. */
static void link_buffer(posenc_context *ctx, posenc_buffer *buf)
{
    posenc__mutex_lock(&ctx->shared_lock);
    buf->prev = NULL;
    buf->next = ctx->buffers;
    if (ctx->buffers)
        ctx->buffers->prev = buf;
    ctx->buffers = buf;
    posenc__mutex_unlock(&ctx->shared_lock);
}

static void unlink_buffer(posenc_context *ctx, posenc_buffer *buf)
{
    posenc__mutex_lock(&ctx->shared_lock);
    if (buf->prev)
        buf->prev->next = buf->next;
    else
        ctx->buffers = buf->next;
    if (buf->next)
        buf->next->prev = buf->prev;
    posenc__mutex_unlock(&ctx->shared_lock);
}

/* Wrapped host memory the device does not use in place is the caller's own: work on it is staged
 * and over when its call returns, so the host copies to and from it and maps it itself. */
static bool host_owned(const posenc_buffer *buf)
{
    return buf->host_memory && !buf->host_imported;
}

/* A copy between the host and a buffer, counted in the context's statistics. */
static posenc_status copy(posenc_buffer *buf, uint64_t offset, void *host, uint64_t size,
                          bool upload)
{
    posenc_context *ctx = buf->ctx;
    posenc_status status = POSENC_OK;
    if (!host_owned(buf)) {
        status = upload ? ctx->backend->buffer_upload(ctx, buf, offset, host, size)
                        : ctx->backend->buffer_download(ctx, buf, offset, host, size);
    } else {
        uint8_t *memory = (uint8_t *)buf->host_memory + offset;
        memmove(upload ? memory : host, upload ? host : memory, (size_t)size);
    }
    if (status == POSENC_OK)
        posenc__atomic64_add(upload ? &ctx->stats.uploaded_bytes : &ctx->stats.downloaded_bytes,
                             size);
    return status;
}

posenc_status posenc_buffer_create(posenc_context *ctx, const posenc_buffer_desc *desc,
                                   posenc_buffer **buffer)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!desc)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "desc: is NULL");
    if (!buffer)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "buffer: is NULL");
    if (desc->size == 0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "size: must be > 0");
    if (desc->size > ctx->device->info.max_buffer_bytes)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "size: %llu bytes is more than the device's largest buffer (%llu)",
                            (unsigned long long)desc->size,
                            (unsigned long long)ctx->device->info.max_buffer_bytes);
    posenc__clear_error(ctx);
    posenc_status status = posenc__check_lost(ctx);
    if (status != POSENC_OK)
        return status;

    posenc_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "buffer: out of host memory");
    buf->ctx = ctx;
    buf->size = desc->size;
    buf->host_memory = desc->host_memory;
    status = ctx->backend->buffer_init(ctx, buf);
    if (status != POSENC_OK) {
        free(buf);
        return status;
    }
    if (desc->initial_data) {
        status = copy(buf, 0, (void *)desc->initial_data, desc->size, true);
        if (status != POSENC_OK) {
            ctx->backend->buffer_fini(ctx, buf);
            free(buf);
            return status;
        }
    }
    /* Wrapped host memory is the caller's, not posenc's. */
    buf->counted_bytes = desc->host_memory ? 0 : desc->size;
    posenc__atomic64_add(&ctx->stats.buffer_bytes, buf->counted_bytes);
    link_buffer(ctx, buf);
    *buffer = buf;
    return POSENC_OK;
}

void *posenc__buffer_backend_host_address(posenc_context *ctx, posenc_buffer *buf)
{
    return ctx->backend->buffer_host_address ? ctx->backend->buffer_host_address(ctx, buf) : NULL;
}

posenc_status posenc__buffer_adopt(posenc_context *ctx, uint64_t size, void *backend_state,
                                   posenc_buffer **buffer)
{
    posenc_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "buffer: out of host memory");
    buf->ctx = ctx;
    buf->size = size;
    buf->backend_state = backend_state;
    link_buffer(ctx, buf);
    *buffer = buf;
    return POSENC_OK;
}

void posenc_buffer_destroy(posenc_buffer *buf)
{
    if (!buf)
        return;
    posenc_context *ctx = buf->ctx;
    if (posenc__atomic_load_acquire(&buf->mapped) && ctx->backend->buffer_unmap)
        (void)ctx->backend->buffer_unmap(ctx, buf, buf->mapped_address);
    unlink_buffer(ctx, buf);
    ctx->backend->buffer_fini(ctx, buf);
    posenc__atomic64_sub(&ctx->stats.buffer_bytes, buf->counted_bytes);
    free(buf);
}

uint64_t posenc_buffer_size(const posenc_buffer *buf) { return buf ? buf->size : 0; }

static posenc_status check_range(posenc_buffer *buf, uint64_t offset, const void *data,
                                 uint64_t size)
{
    if (!buf)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "buffer: is NULL");
    if (!data && size)
        return posenc__fail(buf->ctx, POSENC_INVALID_ARGUMENT, "data: is NULL");
    if (posenc__atomic_load_acquire(&buf->mapped))
        return posenc__fail(buf->ctx, POSENC_INVALID_ARGUMENT,
                            "buffer: is mapped; posenc_buffer_unmap it first");
    if (offset > buf->size || size > buf->size - offset)
        return posenc__fail(buf->ctx, POSENC_OUT_OF_BOUNDS,
                            "offset: range [%llu, %llu + %llu) is past the end of the buffer "
                            "(%llu bytes)",
                            (unsigned long long)offset, (unsigned long long)offset,
                            (unsigned long long)size, (unsigned long long)buf->size);
    posenc__clear_error(buf->ctx);
    return posenc__check_lost(buf->ctx);
}

posenc_status posenc_buffer_upload(posenc_buffer *buf, uint64_t offset, const void *data,
                                   uint64_t size)
{
    posenc_status status = check_range(buf, offset, data, size);
    return status != POSENC_OK || size == 0 ? status : copy(buf, offset, (void *)data, size, true);
}

posenc_status posenc_buffer_download(posenc_buffer *buf, uint64_t offset, void *data,
                                     uint64_t size)
{
    posenc_status status = check_range(buf, offset, data, size);
    return status != POSENC_OK || size == 0 ? status : copy(buf, offset, data, size, false);
}

posenc_status posenc_buffer_map(posenc_buffer *buf, void **data)
{
    if (!buf)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "buffer: is NULL");
    posenc_context *ctx = buf->ctx;
    if (!data)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "data: is NULL");
    posenc_status status = posenc__check_lost(ctx);
    if (status != POSENC_OK)
        return status;
    if (!ctx->backend->buffer_map)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "buffer: the %s backend cannot map buffers; use "
                            "posenc_buffer_upload / posenc_buffer_download",
                            posenc_backend_name(ctx->backend->kind));
    /* Claimed under the lock, mapped outside it: the backend waits for the buffer's work under
     * its own lock, which is never taken inside shared_lock's. */
    posenc__mutex_lock(&ctx->shared_lock);
    bool taken = posenc__atomic_load_relaxed(&buf->mapped) != 0;
    if (!taken)
        posenc__atomic_store_release(&buf->mapped, 1);
    posenc__mutex_unlock(&ctx->shared_lock);
    if (taken)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "buffer: is already mapped; posenc_buffer_unmap it first");
    void *address = buf->host_memory;
    if (!host_owned(buf))
        status = ctx->backend->buffer_map(ctx, buf, &address);
    if (status != POSENC_OK) {
        posenc__atomic_store_release(&buf->mapped, 0);
        return status;
    }
    buf->mapped_address = address;
    posenc__clear_error(ctx);
    *data = address;
    return POSENC_OK;
}

posenc_status posenc_buffer_unmap(posenc_buffer *buf)
{
    if (!buf)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "buffer: is NULL");
    posenc_context *ctx = buf->ctx;
    if (!posenc__atomic_load_acquire(&buf->mapped))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "buffer: is not mapped");
    posenc_status status = POSENC_OK;
    if (ctx->backend->buffer_unmap && !host_owned(buf))
        status = ctx->backend->buffer_unmap(ctx, buf, buf->mapped_address);
    if (status != POSENC_OK)
        return status;
    buf->mapped_address = NULL;
    posenc__atomic_store_release(&buf->mapped, 0);
    posenc__clear_error(ctx);
    return POSENC_OK;
}

static posenc_tensor packed_tensor(posenc_buffer *buffer, void *host, posenc_dtype dtype,
                                   uint32_t ndim, const int64_t *shape)
{
    posenc_tensor t = {.buffer = buffer, .host = host, .dtype = dtype, .ndim = ndim};
    for (uint32_t i = 0; i < ndim && i < POSENC_MAX_DIMS && shape; i++)
        t.shape[i] = shape[i];
    return t;
}

posenc_tensor posenc_tensor_of_buffer(posenc_buffer *buffer, posenc_dtype dtype, uint32_t ndim,
                                      const int64_t *shape)
{
    return packed_tensor(buffer, NULL, dtype, ndim, shape);
}

posenc_tensor posenc_tensor_of_host(void *host, posenc_dtype dtype, uint32_t ndim,
                                    const int64_t *shape)
{
    return packed_tensor(NULL, host, dtype, ndim, shape);
}
