/* SPDX-License-Identifier: MIT */
/* posenc buffers on Vulkan: device-local memory, written and read through the staging buffer on
 * discrete GPUs and mapped directly on unified memory; buffers wrapping caller memory keep their
 * bytes there, imported once for the buffer's life where the device can (vk_import.c), else
 * staged around each operation (vk_staging.c). */
#include "vulkan/vk_internal.h"

#include <stdlib.h>
#include <string.h>

/* Where no staging buffer of the whole size can be had, transfers go in chunks of this size. */
#define CHUNK_BYTES (UINT64_C(16) << 20)
/* Wrapped host memory is imported only from this boundary (the largest element): views start
 * on their element boundaries within a buffer, so they then do in memory too. */
#define ELEMENT_ALIGNMENT 4

posenc_status posenc_vk_buffer_init(posenc_context *ctx, posenc_buffer *buf)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_buffer *state = calloc(1, sizeof *state);
    if (!state)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "buffer: out of host memory");
    posenc_status status = POSENC_OK;
    /* Under the context lock: other threads may be recording, and a failed allocation or import
     * is released through the descriptor set cache and may mark the device lost. */
    posenc__mutex_lock(&vk->lock);
    if (!buf->host_memory) {
        status = posenc_vk_allocate(ctx, buf->size, vk->device_memory_type, vk->unified, "size",
                                    "posenc buffer", &state->allocation);
    } else if (vk->host_import && (uintptr_t)buf->host_memory % ELEMENT_ALIGNMENT != 0) {
        posenc__log(ctx, POSENC_LOG_DEBUG,
                    "vulkan: host_memory: %p is staged, not imported: not on a %d-byte boundary, "
                    "so views would be off their elements",
                    buf->host_memory, ELEMENT_ALIGNMENT);
    } else if (vk->host_import) {
        /* The caller keeps the memory alive as long as the buffer: one import serves every
         * call, submits and recorded work included. */
        buf->host_imported = posenc_vk_import(ctx, buf->host_memory, buf->size, "host_memory",
                                              &state->allocation, &state->base);
        state->allocation.size = buf->size;
    }
    posenc__mutex_unlock(&vk->lock);
    if (status != POSENC_OK) {
        free(state);
        return status;
    }
    buf->backend_state = state;
    return POSENC_OK;
}

/* Whether another live posenc buffer wraps the same caller VkBuffer: its recorded work may bind
 * the same descriptor sets, which then stay. The list is read under the context's shared_lock:
 * other threads may be wrapping or destroying buffers meanwhile. */
static bool wrapped_elsewhere(posenc_context *ctx, const posenc_buffer *buf, VkBuffer buffer)
{
    bool found = false;
    posenc__mutex_lock(&ctx->shared_lock);
    for (const posenc_buffer *other = ctx->buffers; other && !found; other = other->next) {
        const posenc_vk_buffer *state = other->backend_state;
        found = other != buf && state && state->borrowed && state->allocation.buffer == buffer;
    }
    posenc__mutex_unlock(&ctx->shared_lock);
    return found;
}

void posenc_vk_buffer_fini(posenc_context *ctx, posenc_buffer *buf)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_buffer *state = buf->backend_state;
    if (!state)
        return;
    if (vk) {
        posenc__mutex_lock(&vk->lock);
        /* Submitted work that binds the buffer ends first (an error there is the event's). */
        posenc_vk_wait_serial(ctx, state->last_serial);
        if (!state->borrowed)
            posenc_vk_release(ctx, &state->allocation);
        else if (!wrapped_elsewhere(ctx, buf, state->allocation.buffer))
            posenc_vk_forget_sets(ctx, state->allocation.buffer);
        posenc__mutex_unlock(&vk->lock);
    }
    free(state);
    buf->backend_state = NULL;
}

/* Copies between a device-local buffer and the host through host-visible staging: the whole
 * range in one submission when staging of that size can be had (so that a failed download
 * writes nothing), else chunk by chunk. */
static posenc_status transfer(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                              uint8_t *host, uint64_t size, bool upload)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_buffer *state = buf->backend_state;
    posenc_vk_allocation temporary = {0};
    uint64_t chunk = size;
    posenc_status status = posenc_vk_reserve(ctx, size, &temporary);
    if (status != POSENC_OK && size > CHUNK_BYTES) {
        posenc__clear_error(ctx); /* retried in chunks */
        chunk = CHUNK_BYTES;
        status = posenc_vk_reserve(ctx, chunk, &temporary);
    }
    const posenc_vk_allocation *staging = temporary.buffer ? &temporary : &vk->staging;
    for (uint64_t done = 0; done < size && status == POSENC_OK; done += chunk) {
        uint64_t n = size - done < chunk ? size - done : chunk;
        if (upload)
            memcpy(staging->mapped, host + done, (size_t)n);
        status = posenc_vk_begin(ctx);
        if (status != POSENC_OK)
            break;
        VkBufferCopy region = {
            .srcOffset = upload ? 0 : state->base + offset + done,
            .dstOffset = upload ? state->base + offset + done : 0,
            .size = n,
        };
        vk->fns.CmdCopyBuffer(vk->commands, upload ? staging->buffer : state->allocation.buffer,
                              upload ? state->allocation.buffer : staging->buffer, 1, &region);
        status = posenc_vk_submit(ctx);
        if (status == POSENC_OK && !upload)
            memcpy(host + done, staging->mapped, (size_t)n);
    }
    posenc_vk_release(ctx, &temporary);
    return status;
}

/* A copy between the host and a buffer, after the submitted work that binds it: mapped memory
 * and imported host memory are read or written by the host directly, so that work must be done
 * first; a staged copy is a submission of its own, ordered after that work by the queue and its
 * opening barrier. */
static posenc_status copy(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                          uint8_t *host, uint64_t size, bool upload)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_buffer *state = buf->backend_state;
    uint8_t *memory = buf->host_memory ? buf->host_memory : state->allocation.mapped;
    posenc__mutex_lock(&vk->lock);
    posenc_status status = memory ? posenc_vk_wait_serial(ctx, state->last_serial)
                                  : transfer(ctx, buf, offset, host, size, upload);
    if (memory && status == POSENC_OK) /* else the work failed: copy nothing */
        memmove(upload ? memory + offset : host, upload ? host : memory + offset, (size_t)size);
    posenc__mutex_unlock(&vk->lock);
    return status;
}

posenc_status posenc_vk_buffer_upload(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                      const void *data, uint64_t size)
{
    return copy(ctx, buf, offset, (uint8_t *)data, size, true);
}

posenc_status posenc_vk_buffer_download(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                        void *data, uint64_t size)
{
    return copy(ctx, buf, offset, data, size, false);
}

void *posenc_vk_buffer_host_address(posenc_context *ctx, posenc_buffer *buf)
{
    (void)ctx;
    posenc_vk_buffer *state = buf->backend_state;
    return state ? state->allocation.mapped : NULL;
}

/* Unified memory is mapped for the buffer's whole life (host-visible and coherent, so the
 * mapping needs no flush and no ending); imported host memory is the caller's own. Device-local
 * memory of a discrete GPU, and an engine's wrapped VkBuffer, the host cannot see. */
posenc_status posenc_vk_buffer_map(posenc_context *ctx, posenc_buffer *buf, void **data)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_buffer *state = buf->backend_state;
    if (!state->allocation.mapped && !buf->host_imported)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            state->borrowed ? "buffer: wraps a VkBuffer whose memory posenc cannot "
                                              "map; map it through its own VkDeviceMemory"
                                            : "buffer: is in device-local memory that the host "
                                              "cannot see; use posenc_buffer_upload / "
                                              "posenc_buffer_download");
    posenc__mutex_lock(&vk->lock);
    posenc_status status = posenc_vk_wait_serial(ctx, state->last_serial);
    posenc__mutex_unlock(&vk->lock);
    if (status == POSENC_OK)
        *data = buf->host_imported ? buf->host_memory : state->allocation.mapped;
    return status;
}
