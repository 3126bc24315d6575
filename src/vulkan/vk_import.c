/* SPDX-License-Identifier: MIT */
/* Caller host memory bound in place on unified-memory devices (VK_EXT_external_memory_host):
 * the pages covering a byte range become a storage buffer of their own, with no copies. */
#include "vulkan/vk_internal.h"

static const VkExternalMemoryHandleTypeFlagBits HOST_ALLOCATION =
    VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;

bool posenc_vk_import(posenc_context *ctx, const void *host, uint64_t size, const char *name,
                      posenc_vk_allocation *allocation, uint64_t *base)
{
    posenc_vk_context *vk = ctx->backend_state;
    uint64_t alignment = vk->physical->import_alignment;
    /* The whole pages of the range: the driver maps pages, never parts of them. */
    uintptr_t lo = (uintptr_t)host & ~(uintptr_t)(alignment - 1);
    uint64_t span = ((uint64_t)((uintptr_t)host - lo) + size + alignment - 1) & ~(alignment - 1);
    const char *why = NULL;
    VkResult result = VK_SUCCESS;
    posenc_vk_allocation made = {0};
    VkMemoryHostPointerPropertiesEXT pointer = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    if (span > vk->physical->max_allocation) {
        why = "larger than one allocation";
    } else {
        result = vk->GetMemoryHostPointerPropertiesEXT(vk->device, HOST_ALLOCATION, (void *)lo,
                                                       &pointer);
        why = result != VK_SUCCESS ? "vkGetMemoryHostPointerPropertiesEXT refused the address"
                                   : NULL;
    }
    VkExternalMemoryBufferCreateInfo external = {
        .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
        .handleTypes = (VkExternalMemoryHandleTypeFlags)HOST_ALLOCATION,
    };
    if (!why) {
        result = posenc_vk_create_buffer(vk, span, &external, &made.buffer);
        why = result != VK_SUCCESS ? "vkCreateBuffer failed" : NULL;
    }
    uint32_t type = UINT32_MAX;
    VkMemoryRequirements requirements = {0};
    if (!why) {
        /* Host-visible and coherent: kernel writes then need no flush to be seen by the host
         * after the fence. */
        VkPhysicalDeviceMemoryProperties memory;
        vk->instance.fns.GetPhysicalDeviceMemoryProperties(vk->physical_handle, &memory);
        vk->fns.GetBufferMemoryRequirements(vk->device, made.buffer, &requirements);
        type = posenc_vk_memory_type(&memory, requirements.memoryTypeBits & pointer.memoryTypeBits,
                                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                         VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                     VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
        if (type == UINT32_MAX)
            why = "no host-coherent memory type can hold it";
        else if (requirements.size > span)
            why = "the buffer needs more memory than the pages hold";
    }
    if (!why) {
        VkImportMemoryHostPointerInfoEXT import = {
            .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
            .handleType = HOST_ALLOCATION,
            .pHostPointer = (void *)lo,
        };
        VkMemoryAllocateInfo allocate = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
            .pNext = &import,
            .allocationSize = span,
            .memoryTypeIndex = type,
        };
        result = vk->fns.AllocateMemory(vk->device, &allocate, vk->allocator, &made.memory);
        if (result == VK_SUCCESS)
            result = vk->fns.BindBufferMemory(vk->device, made.buffer, made.memory, 0);
        why = result != VK_SUCCESS ? "vkAllocateMemory could not import it" : NULL;
    }
    if (why) {
        /* Lost devices fail the call that follows; everything else falls back to staging. */
        if (result == VK_ERROR_DEVICE_LOST)
            posenc__mark_lost(ctx);
        posenc_vk_release(ctx, &made);
        posenc__log(ctx, POSENC_LOG_DEBUG,
                    "vulkan: %s: host memory at %p (%llu bytes) is staged, not imported: %s%s%s",
                    name, host, (unsigned long long)size, why, result != VK_SUCCESS ? ": " : "",
                    result != VK_SUCCESS ? posenc_vk_result_name(result) : "");
        return false;
    }
    posenc__log(ctx, POSENC_LOG_DEBUG, "vulkan: %s: host memory at %p (%llu bytes) imported",
                name, host, (unsigned long long)size);
    made.size = span;
    posenc_vk_debug_name_allocation(vk, &made, "posenc imported host memory");
    *allocation = made;
    *base = (uint64_t)((uintptr_t)host - lo);
    return true;
}
