/* SPDX-License-Identifier: MIT */
/* Contexts on the caller's Vulkan objects (posenc_context_desc.vulkan): every function comes
 * through the caller's vkGetInstanceProcAddr and vkGetDeviceProcAddr (no loader is opened), the
 * instance, device, queue and pipeline cache are borrowed and never destroyed, and posenc uses
 * only the optional features the caller says it enabled. */
#include "vulkan/vk_internal.h"

#include "core/kernels.h"

#include <stdlib.h>
#include <string.h>

#define KNOWN_FEATURES                                                                         \
    (POSENC_VULKAN_FEATURE_16BIT_STORAGE | POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR |               \
     POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT | POSENC_VULKAN_FEATURE_DEBUG_UTILS)
/* Features of the instance rather than the device: allowed when posenc makes the device. */
#define INSTANCE_FEATURES POSENC_VULKAN_FEATURE_DEBUG_UTILS

/* What can be checked before any Vulkan call. */
static posenc_status check_fields(posenc_context *ctx, const posenc_vulkan_external *ext)
{
    if (!ext->instance)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "vulkan.instance: is NULL");
    if (!ext->physical_device)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "vulkan.physical_device: is NULL");
    if (!ext->get_instance_proc_addr)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "vulkan.get_instance_proc_addr: is NULL (posenc loads every Vulkan "
                            "function through it)");
    if (ext->enabled_features & ~(uint32_t)KNOWN_FEATURES)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "vulkan.enabled_features: unknown bits 0x%x",
                            ext->enabled_features & ~(uint32_t)KNOWN_FEATURES);
    if (!ext->device) {
        uint32_t device_features = ext->enabled_features & ~(uint32_t)INSTANCE_FEATURES;
        const char *field = ext->queue            ? "queue"
                            : ext->queue_family   ? "queue_family"
                            : device_features     ? "enabled_features"
                            : ext->pipeline_cache ? "pipeline_cache"
                                                  : NULL;
        if (field)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "vulkan.%s: must be zero when vulkan.device is NULL (posenc then "
                                "creates its own device)",
                                field);
    }
    if (!posenc__spirv_enabled() || !posenc__spirv_get(POSENC__SPIRV_ROPE_F32))
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "vulkan: this build has no SPIR-V kernels (no GLSL compiler at build "
                            "time)");
    return POSENC_OK;
}

static posenc_status check_queue_family(posenc_context *ctx, posenc_vk_context *vk,
                                        uint32_t family)
{
    uint32_t count = 0;
    vk->instance.fns.GetPhysicalDeviceQueueFamilyProperties(vk->physical_handle, &count, NULL);
    VkQueueFamilyProperties *families = calloc(count + 1, sizeof *families);
    if (!families)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    vk->instance.fns.GetPhysicalDeviceQueueFamilyProperties(vk->physical_handle, &count,
                                                            families);
    bool compute = family < count && (families[family].queueFlags & VK_QUEUE_COMPUTE_BIT);
    free(families);
    if (family >= count)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "vulkan.queue_family: %u is not a queue family of the physical "
                            "device (it has %u)",
                            family, count);
    if (!compute)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "vulkan.queue_family: family %u has no compute queues", family);
    return POSENC_OK;
}

/* The caller's device: its functions, queue and the features it enabled. */
static posenc_status borrow_device(posenc_context *ctx, posenc_vk_context *vk,
                                   const posenc_vulkan_external *ext)
{
    posenc_status status = check_queue_family(ctx, vk, ext->queue_family);
    if (status != POSENC_OK)
        return status;
    bool storage16 = (ext->enabled_features & POSENC_VULKAN_FEATURE_16BIT_STORAGE) != 0;
    if (storage16 && !vk->device_record.info.fp16_storage)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "vulkan.enabled_features: POSENC_VULKAN_FEATURE_16BIT_STORAGE is set "
                            "but the physical device has no storageBuffer16BitAccess");
    VkDevice device = (VkDevice)ext->device;
    const char *missing = "";
    if (!posenc_vk_load_device_fns(&vk->instance.fns, device, &vk->fns, &missing))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "vulkan.device: vkGetDeviceProcAddr returns no %s", missing);
    vk->device = device;
    vk->external = true;
    vk->queue = (VkQueue)ext->queue;
    vk->queue_family = ext->queue_family;
    vk->storage16 = storage16 && !posenc_vk_disabled("16bit_storage");
    if (ext->enabled_features & POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR) {
        vk->CmdPushDescriptorSetKHR = (PFN_vkCmdPushDescriptorSetKHR)
            vk->instance.fns.GetDeviceProcAddr(device, "vkCmdPushDescriptorSetKHR");
        if (!vk->CmdPushDescriptorSetKHR)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "vulkan.enabled_features: POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR "
                                "is set but the device has no vkCmdPushDescriptorSetKHR (enable "
                                "VK_KHR_push_descriptor at vkCreateDevice)");
    }
    if (ext->enabled_features & POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT) {
        if (!vk->device_record.info.host_memory_import)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "vulkan.enabled_features: POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT "
                                "is set but the physical device has no "
                                "VK_EXT_external_memory_host on unified memory");
        if (!posenc_vk_disabled("host_import"))
            vk->GetMemoryHostPointerPropertiesEXT = (PFN_vkGetMemoryHostPointerPropertiesEXT)
                vk->instance.fns.GetDeviceProcAddr(device, "vkGetMemoryHostPointerPropertiesEXT");
        if (!vk->GetMemoryHostPointerPropertiesEXT && !posenc_vk_disabled("host_import"))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "vulkan.enabled_features: POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT "
                                "is set but the device has no vkGetMemoryHostPointerPropertiesEXT "
                                "(enable VK_EXT_external_memory_host at vkCreateDevice)");
    }
    if (ext->pipeline_cache) {
        /* A non-dispatchable handle is 64 bits wide everywhere (a pointer or a uint64_t). */
        _Static_assert(sizeof(VkPipelineCache) == sizeof ext->pipeline_cache, "handle size");
        memcpy(&vk->pipeline_cache, &ext->pipeline_cache, sizeof vk->pipeline_cache);
        vk->borrowed_pipeline_cache = true;
    }
    return POSENC_OK;
}

posenc_status posenc_vk_context_init_external(posenc_context *ctx,
                                              const posenc_context_desc *desc)
{
    const posenc_vulkan_external *ext = &desc->vulkan;
    posenc_status status = check_fields(ctx, ext);
    if (status != POSENC_OK)
        return status;
    posenc_vk_context *vk = calloc(1, sizeof *vk);
    if (!vk)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    ctx->backend_state = vk;
    vk->allocator = ext->allocation_callbacks;
    vk->loader.GetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)ext->get_instance_proc_addr;
    vk->instance.loader = &vk->loader;
    vk->instance.handle = (VkInstance)ext->instance;
    vk->instance.api_version = VK_API_VERSION_1_1; /* what posenc requires of the instance */
    vk->instance.borrowed = true;
    vk->physical_handle = (VkPhysicalDevice)ext->physical_device;
    vk->physical = &vk->physical_record;

    const char *missing = "";
    if (!posenc_vk_load_instance_fns(&vk->loader, vk->instance.handle, &vk->instance.fns,
                                     &missing)) {
        status = posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                              "vulkan.get_instance_proc_addr: returns no %s for vulkan.instance "
                              "(posenc needs a Vulkan 1.1 instance)",
                              missing);
    } else {
        posenc__gpu_failure failure = {0};
        vk->device_record.handle = &vk->physical_record;
        status = posenc_vk_describe(&vk->instance, vk->physical_handle, 0, &vk->device_record,
                                    &failure);
        status = posenc__gpu_external_device(ctx, &vk->device_record, status, &failure,
                                             "vulkan.physical_device",
                                             "posenc needs Vulkan 1.1 and a compute queue, which "
                                             "this device lacks");
    }
    if (status == POSENC_OK && ext->device)
        status = borrow_device(ctx, vk, ext);
    else if (status == POSENC_OK)
        status = posenc_vk_create_device(ctx, vk);
    if (status == POSENC_OK)
        status = posenc_vk_context_finish_init(
            ctx, (ext->enabled_features & POSENC_VULKAN_FEATURE_DEBUG_UTILS) != 0,
            "vulkan.enabled_features");
    if (status != POSENC_OK)
        posenc_vk_context_fini(ctx);
    return status;
}
