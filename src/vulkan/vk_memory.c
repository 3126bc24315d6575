/* SPDX-License-Identifier: MIT */
/* Device memory: choosing memory types, and storage buffers with their own allocation. */
#include "vulkan/vk_internal.h"

uint32_t posenc_vk_memory_type(const VkPhysicalDeviceMemoryProperties *memory, uint32_t type_bits,
                               VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred)
{
    uint32_t found = UINT32_MAX;
    for (uint32_t t = 0; t < memory->memoryTypeCount; t++) {
        VkMemoryPropertyFlags flags = memory->memoryTypes[t].propertyFlags;
        if (!(type_bits & (1u << t)) || (flags & required) != required)
            continue;
        if ((flags & preferred) == preferred)
            return t;
        if (found == UINT32_MAX)
            found = t;
    }
    return found;
}

VkResult posenc_vk_create_buffer(posenc_vk_context *vk, uint64_t size, const void *next,
                                 VkBuffer *buffer)
{
    VkBufferCreateInfo buffer_info = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .pNext = next,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    return vk->fns.CreateBuffer(vk->device, &buffer_info, vk->allocator, buffer);
}

posenc_status posenc_vk_allocate(posenc_context *ctx, uint64_t size, uint32_t type,
                                 bool host_visible, const char *what, const char *debug_name,
                                 posenc_vk_allocation *allocation)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_allocation made = {0};
    /* Whole 16-byte blocks: a kernel binding may round its range up to a word or a vector. */
    made.size = (size + 15) & ~(uint64_t)15;
    if (made.size > vk->physical->max_allocation)
        return posenc__fail(ctx, POSENC_OUT_OF_DEVICE_MEMORY,
                            "%s: %llu bytes is more than the device allocates at once (%llu)", what,
                            (unsigned long long)made.size,
                            (unsigned long long)vk->physical->max_allocation);
    /* The message names the purpose and the driver call that failed. */
    char failed[128];
    VkResult result = posenc_vk_create_buffer(vk, made.size, NULL, &made.buffer);
    if (result != VK_SUCCESS) {
        snprintf(failed, sizeof failed, "%s: vkCreateBuffer", what);
        return posenc_vk_fail(ctx, result, failed);
    }
    VkMemoryRequirements requirements;
    vk->fns.GetBufferMemoryRequirements(vk->device, made.buffer, &requirements);
    if (!(requirements.memoryTypeBits & (1u << type))) {
        vk->fns.DestroyBuffer(vk->device, made.buffer, vk->allocator);
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "%s: storage buffers cannot use memory type %u on this device", what,
                            type);
    }
    VkMemoryAllocateInfo allocate = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = requirements.size,
        .memoryTypeIndex = type,
    };
    const char *call = "vkAllocateMemory";
    result = vk->fns.AllocateMemory(vk->device, &allocate, vk->allocator, &made.memory);
    if (result == VK_SUCCESS) {
        call = "vkBindBufferMemory";
        result = vk->fns.BindBufferMemory(vk->device, made.buffer, made.memory, 0);
    }
    if (result == VK_SUCCESS && host_visible) {
        call = "vkMapMemory";
        result = vk->fns.MapMemory(vk->device, made.memory, 0, VK_WHOLE_SIZE, 0, &made.mapped);
    }
    if (result != VK_SUCCESS) {
        posenc_vk_release(ctx, &made);
        snprintf(failed, sizeof failed, "%s: %s", what, call);
        return posenc_vk_fail(ctx, result, failed);
    }
    posenc_vk_debug_name_allocation(vk, &made, debug_name);
    *allocation = made;
    return POSENC_OK;
}

void posenc_vk_release(posenc_context *ctx, posenc_vk_allocation *allocation)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_forget_sets(ctx, allocation->buffer);
    if (allocation->buffer)
        vk->fns.DestroyBuffer(vk->device, allocation->buffer, vk->allocator);
    if (allocation->memory)
        vk->fns.FreeMemory(vk->device, allocation->memory, vk->allocator); /* unmaps too */
    *allocation = (posenc_vk_allocation){0};
}

posenc_status posenc_vk_reserve(posenc_context *ctx, uint64_t size,
                                posenc_vk_allocation *temporary)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_allocation *allocation = &vk->staging;
    if (size > POSENC__GPU_STAGING_KEEP_BYTES)
        return posenc_vk_allocate(ctx, size, vk->host_memory_type, true, "staging",
                                  "posenc staging", temporary);
    if (allocation->buffer && allocation->size >= size)
        return POSENC_OK;
    /* Grow by at least half again, so that slowly growing requests reallocate rarely. */
    uint64_t grown = allocation->size + allocation->size / 2;
    if (grown > vk->physical->max_allocation)
        grown = vk->physical->max_allocation;
    posenc_vk_allocation made;
    posenc_status status = POSENC_OUT_OF_DEVICE_MEMORY;
    if (size < grown) {
        status = posenc_vk_allocate(ctx, grown, vk->host_memory_type, true, "staging",
                                    "posenc staging", &made);
        if (status != POSENC_OK)
            posenc__clear_error(ctx); /* retried below with what is needed */
    }
    if (status != POSENC_OK)
        status = posenc_vk_allocate(ctx, size, vk->host_memory_type, true, "staging",
                                    "posenc staging", &made);
    if (status != POSENC_OK)
        return status;
    posenc__atomic64_add(&ctx->stats.staging_bytes, made.size - allocation->size); /* grows */
    posenc_vk_release(ctx, allocation);
    *allocation = made;
    return POSENC_OK;
}
