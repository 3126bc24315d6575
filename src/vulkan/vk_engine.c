/* SPDX-License-Identifier: MIT */
/* The typed entry points of posenc_vulkan.h: the caller's VkBuffers as posenc buffers, and RoPE
 * and sinusoidal encodings recorded into the caller's command buffers. */
#include "vulkan/vk_internal.h"

#include <posenc/posenc_vulkan.h>

#include <stdlib.h>

/* The Vulkan state of a context on the caller's device, or NULL with the context error set. */
static posenc_vk_context *external_state(posenc_context *ctx, const char *call)
{
    posenc_vk_context *vk = posenc__backend_state(ctx, POSENC_BACKEND_VULKAN, "a Vulkan", call);
    if (vk && !vk->external) {
        posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                     "context: runs on posenc's own Vulkan device; %s needs a context on the "
                     "caller's device (posenc_context_desc.vulkan.device)",
                     call);
        return NULL;
    }
    return vk;
}

posenc_status posenc_vk_buffer_wrap(posenc_context *ctx, VkBuffer buffer, VkDeviceSize offset,
                                    VkDeviceSize range, posenc_buffer **wrapped)
{
    posenc_vk_context *vk = external_state(ctx, "posenc_vk_buffer_wrap");
    if (!vk)
        return POSENC_INVALID_ARGUMENT;
    if (!wrapped)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "wrapped: is NULL");
    if (buffer == VK_NULL_HANDLE)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "buffer: is VK_NULL_HANDLE");
    uint64_t alignment = vk->physical->binding_alignment > 16 ? vk->physical->binding_alignment
                                                              : 16;
    if (offset % alignment)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "offset: %llu is not a multiple of %llu (16 and the device's "
                            "minStorageBufferOffsetAlignment)",
                            (unsigned long long)offset, (unsigned long long)alignment);
    if (range == 0 || range == VK_WHOLE_SIZE)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "range: must be the size in bytes (> 0, not VK_WHOLE_SIZE)");
    if (offset > UINT64_MAX - range)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "range: offset + range overflows");
    posenc__clear_error(ctx);
    posenc_status status = posenc__check_lost(ctx);
    if (status != POSENC_OK)
        return status;
    posenc_vk_buffer *state = calloc(1, sizeof *state);
    if (!state)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "wrapped: out of host memory");
    state->allocation.buffer = buffer;
    state->allocation.size = range;
    state->base = offset;
    state->borrowed = true;
    status = posenc__buffer_adopt(ctx, range, state, wrapped);
    if (status != POSENC_OK)
        free(state);
    return status;
}

/* Both recording calls: the operation (`rope`, else sinusoidal; `desc` its descriptor) recorded
 * into the caller's command buffer, on device memory the caller submits later (op_views.h), as
 * for the other calls that outlive their work; its table stays for the context's life. The
 * front end writes the context's error and frequency cache, so validation runs under the
 * context lock too. */
static posenc_status record(posenc_context *ctx, VkCommandBuffer command_buffer, bool rope,
                            const void *desc, const char *call)
{
    posenc_vk_context *vk = external_state(ctx, call);
    if (!vk)
        return POSENC_INVALID_ARGUMENT;
    posenc__op_storage storage;
    posenc__op op;
    posenc__mutex_lock(&vk->lock);
    posenc_status status = command_buffer ? POSENC_OK
                                          : posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                                         "command_buffer: is NULL");
    if (status == POSENC_OK)
        status = posenc__op_resolve_device(ctx, rope, desc, call, &storage, &op);
    if (status == POSENC_OK) {
        posenc_vk_op run = posenc_vk_op_of(ctx, &op);
        vk->target = command_buffer;
        vk->dispatches = 0;
        status = posenc_vk_record_device(ctx, &run, true);
    }
    if (status == POSENC_OK)
        posenc__atomic64_add(rope ? &ctx->stats.rope_calls : &ctx->stats.sinusoidal_calls, 1);
    posenc__mutex_unlock(&vk->lock);
    return status;
}

posenc_status posenc_vk_cmd_rope(posenc_context *ctx, VkCommandBuffer command_buffer,
                                 const posenc_rope_desc *desc)
{
    return record(ctx, command_buffer, true, desc, "posenc_vk_cmd_rope");
}

posenc_status posenc_vk_cmd_sinusoidal(posenc_context *ctx, VkCommandBuffer command_buffer,
                                       const posenc_sinusoidal_desc *desc)
{
    return record(ctx, command_buffer, false, desc, "posenc_vk_cmd_sinusoidal");
}
