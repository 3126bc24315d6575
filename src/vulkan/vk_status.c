/* SPDX-License-Identifier: MIT */
/* VkResult to posenc_status, with the context message "vulkan: WHAT: VK_ERROR_...". */
#include "vulkan/vk_internal.h"

#include "core/gpu_errors.h"

/* Every VkResult posenc names, with the status it reports for it; any other is a
 * DEVICE_ERROR. A non-error code where success was needed (VK_TIMEOUT...) is one too. */
#define POSENC_VK_RESULTS(X)                                                                      \
    X(VK_SUCCESS, POSENC_OK)                                                                      \
    X(VK_NOT_READY, POSENC_DEVICE_ERROR)                                                          \
    X(VK_TIMEOUT, POSENC_DEVICE_ERROR)                                                            \
    X(VK_EVENT_SET, POSENC_DEVICE_ERROR)                                                          \
    X(VK_EVENT_RESET, POSENC_DEVICE_ERROR)                                                        \
    X(VK_INCOMPLETE, POSENC_DEVICE_ERROR)                                                         \
    X(VK_ERROR_OUT_OF_HOST_MEMORY, POSENC_OUT_OF_MEMORY)                                          \
    X(VK_ERROR_OUT_OF_DEVICE_MEMORY, POSENC_OUT_OF_DEVICE_MEMORY)                                 \
    X(VK_ERROR_INITIALIZATION_FAILED, POSENC_DEVICE_INIT_FAILED)                                  \
    X(VK_ERROR_DEVICE_LOST, POSENC_DEVICE_LOST)                                                   \
    X(VK_ERROR_MEMORY_MAP_FAILED, POSENC_OUT_OF_DEVICE_MEMORY)                                    \
    X(VK_ERROR_LAYER_NOT_PRESENT, POSENC_UNSUPPORTED)                                             \
    X(VK_ERROR_EXTENSION_NOT_PRESENT, POSENC_UNSUPPORTED)                                         \
    X(VK_ERROR_FEATURE_NOT_PRESENT, POSENC_UNSUPPORTED)                                           \
    X(VK_ERROR_INCOMPATIBLE_DRIVER, POSENC_UNSUPPORTED)                                           \
    X(VK_ERROR_TOO_MANY_OBJECTS, POSENC_OUT_OF_DEVICE_MEMORY)                                     \
    X(VK_ERROR_FORMAT_NOT_SUPPORTED, POSENC_UNSUPPORTED)                                          \
    X(VK_ERROR_FRAGMENTED_POOL, POSENC_OUT_OF_DEVICE_MEMORY)                                      \
    X(VK_ERROR_UNKNOWN, POSENC_DEVICE_ERROR)                                                      \
    X(VK_ERROR_OUT_OF_POOL_MEMORY, POSENC_OUT_OF_DEVICE_MEMORY)                                   \
    X(VK_ERROR_INVALID_EXTERNAL_HANDLE, POSENC_DEVICE_ERROR)                                      \
    X(VK_ERROR_FRAGMENTATION, POSENC_OUT_OF_DEVICE_MEMORY)                                        \
    X(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS, POSENC_DEVICE_ERROR)                               \
    X(VK_PIPELINE_COMPILE_REQUIRED, POSENC_DEVICE_ERROR)                                          \
    X(VK_ERROR_INVALID_SHADER_NV, POSENC_KERNEL_BUILD_FAILED)

static const posenc__gpu_error results[] = {POSENC_VK_RESULTS(POSENC__GPU_ERROR)};

const char *posenc_vk_result_name(VkResult result)
{
    return posenc__gpu_error_name(results, sizeof results / sizeof results[0], result,
                                  "VkResult (unknown)");
}

posenc_status posenc_vk_status_of(VkResult result)
{
    return posenc__gpu_error_status(results, sizeof results / sizeof results[0], result);
}

posenc_status posenc_vk_fail(posenc_context *ctx, VkResult result, const char *what)
{
    posenc_status status = posenc_vk_status_of(result);
    if (status == POSENC_OK) /* a non-error code where success was needed (VK_TIMEOUT...) */
        status = POSENC_DEVICE_ERROR;
    return posenc__fail(ctx, status, "vulkan: %s: %s (%d)", what, posenc_vk_result_name(result),
                        (int)result);
}
