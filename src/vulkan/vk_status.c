/* SPDX-License-Identifier: MIT */
/* VkResult to posenc_status, with the context message "vulkan: WHAT: VK_ERROR_...". */
#include "vulkan/vk_internal.h"

const char *posenc_vk_result_name(VkResult result)
{
    switch (result) {
#define NAME_(r) case r: return #r;
    NAME_(VK_SUCCESS)
    NAME_(VK_NOT_READY)
    NAME_(VK_TIMEOUT)
    NAME_(VK_EVENT_SET)
    NAME_(VK_EVENT_RESET)
    NAME_(VK_INCOMPLETE)
    NAME_(VK_ERROR_OUT_OF_HOST_MEMORY)
    NAME_(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    NAME_(VK_ERROR_INITIALIZATION_FAILED)
    NAME_(VK_ERROR_DEVICE_LOST)
    NAME_(VK_ERROR_MEMORY_MAP_FAILED)
    NAME_(VK_ERROR_LAYER_NOT_PRESENT)
    NAME_(VK_ERROR_EXTENSION_NOT_PRESENT)
    NAME_(VK_ERROR_FEATURE_NOT_PRESENT)
    NAME_(VK_ERROR_INCOMPATIBLE_DRIVER)
    NAME_(VK_ERROR_TOO_MANY_OBJECTS)
    NAME_(VK_ERROR_FORMAT_NOT_SUPPORTED)
    NAME_(VK_ERROR_FRAGMENTED_POOL)
    NAME_(VK_ERROR_UNKNOWN)
    NAME_(VK_ERROR_OUT_OF_POOL_MEMORY)
    NAME_(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    NAME_(VK_ERROR_FRAGMENTATION)
    NAME_(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    NAME_(VK_PIPELINE_COMPILE_REQUIRED)
    NAME_(VK_ERROR_INVALID_SHADER_NV)
#undef NAME_
    default: return "VkResult (unknown)";
    }
}

posenc_status posenc_vk_status_of(VkResult result)
{
    switch (result) {
    case VK_SUCCESS: return POSENC_OK;
    case VK_ERROR_OUT_OF_HOST_MEMORY: return POSENC_OUT_OF_MEMORY;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
    case VK_ERROR_FRAGMENTATION:
    case VK_ERROR_TOO_MANY_OBJECTS:
    case VK_ERROR_MEMORY_MAP_FAILED: return POSENC_OUT_OF_DEVICE_MEMORY;
    case VK_ERROR_DEVICE_LOST: return POSENC_DEVICE_LOST;
    case VK_ERROR_INITIALIZATION_FAILED: return POSENC_DEVICE_INIT_FAILED;
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_FORMAT_NOT_SUPPORTED: return POSENC_UNSUPPORTED;
    case VK_ERROR_INVALID_SHADER_NV: return POSENC_KERNEL_BUILD_FAILED;
    default: return POSENC_DEVICE_ERROR;
    }
}

posenc_status posenc_vk_fail(posenc_context *ctx, VkResult result, const char *what)
{
    posenc_status status = posenc_vk_status_of(result);
    if (status == POSENC_OK) /* a non-error code where success was needed (VK_TIMEOUT...) */
        status = POSENC_DEVICE_ERROR;
    return posenc__fail(ctx, status, "vulkan: %s: %s (%d)", what, posenc_vk_result_name(result),
                        (int)result);
}
