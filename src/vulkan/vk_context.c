/* SPDX-License-Identifier: MIT */
/* Vulkan contexts, on an instance and a logical device of posenc's own or on the caller's
 * (posenc_context_desc.vulkan): one path, whose differences are what is borrowed (never
 * destroyed) and which optional features the device may use; one compute queue, one command
 * buffer recorded and submitted synchronously per call, and the shared layouts. A caller's
 * instance gives every function through its vkGetInstanceProcAddr (no loader is opened). */
#include "vulkan/vk_internal.h"

#include "core/kernels.h"
#include "core/platform.h"

#include <stdlib.h>
#include <string.h>

#define KNOWN_FEATURES                                                                         \
    (POSENC_VULKAN_FEATURE_16BIT_STORAGE | POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR |               \
     POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT | POSENC_VULKAN_FEATURE_DEBUG_UTILS)
/* Features of the instance rather than the device: allowed when posenc makes the device. */
#define INSTANCE_FEATURES POSENC_VULKAN_FEATURE_DEBUG_UTILS

/* Whether POSENC_VULKAN_DISABLE lists `feature`, to exercise the code paths of devices
 * without it: "16bit_storage" (f16/bf16 packed two per word), "unified_memory" (device buffers
 * with staging copies, as on discrete GPUs), "push_descriptor" (descriptor sets from pools),
 * "host_import" (caller host memory staged instead of imported). */
static bool disabled(const char *feature)
{
    return posenc__gpu_feature_disabled("POSENC_VULKAN_DISABLE", feature);
}

/* What can be checked of the caller's handles before any Vulkan call. */
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

static posenc_status find_physical(posenc_context *ctx, posenc_vk_context *vk)
{
    uint32_t count = 0;
    VkPhysicalDevice *physicals = NULL;
    VkResult result = posenc_vk_physical_devices(&vk->instance, &physicals, &count);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkEnumeratePhysicalDevices");
    if (!physicals)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    const posenc_vk_physical *want = ctx->device->handle;
    for (uint32_t i = 0; i < count && !vk->physical_handle; i++) {
        VkPhysicalDeviceIDProperties id = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
        VkPhysicalDeviceProperties2 properties = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id};
        vk->instance.fns.GetPhysicalDeviceProperties2(physicals[i], &properties);
        if (want->has_uuid ? memcmp(id.deviceUUID, want->uuid, VK_UUID_SIZE) == 0
                           : i == want->enumeration_index)
            vk->physical_handle = physicals[i];
    }
    free(physicals);
    if (!vk->physical_handle)
        return posenc__fail(ctx, POSENC_DEVICE_NOT_FOUND,
                            "device: the Vulkan device is no longer present");
    return POSENC_OK;
}

/* posenc's own instance, and on it the physical device ctx->device was listed as. */
static posenc_status create_instance(posenc_context *ctx, posenc_vk_context *vk)
{
    char message[256];
    VkResult runtime_result;
    bool validation = (ctx->flags & POSENC_CONTEXT_VALIDATION) != 0;
    posenc_status status = posenc_vk_instance_create(ctx, validation, &vk->instance, message,
                                                     sizeof message, &runtime_result);
    if (status != POSENC_OK)
        return posenc__fail(ctx, status, "vulkan: %s", message);
    if (validation && !vk->instance.validation)
        posenc__log(ctx, POSENC_LOG_INFO,
                    "vulkan: validation requested but VK_LAYER_KHRONOS_validation is not "
                    "installed");
    return find_physical(ctx, vk);
}

/* The caller's instance and physical device, described as posenc describes its own; the record
 * is the context's (what posenc_context_device reports). */
static posenc_status borrow_instance(posenc_context *ctx, posenc_vk_context *vk,
                                     const posenc_vulkan_external *ext)
{
    vk->instance.handle = (VkInstance)ext->instance;
    vk->instance.api_version = VK_API_VERSION_1_1; /* what posenc requires of the instance */
    vk->instance.borrowed = true;
    vk->physical_handle = (VkPhysicalDevice)ext->physical_device;
    const char *missing = "";
    if (!posenc_vk_load_instance_fns((PFN_vkGetInstanceProcAddr)ext->get_instance_proc_addr,
                                     vk->instance.handle, &vk->instance.fns, &missing))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "vulkan.get_instance_proc_addr: returns no %s for vulkan.instance "
                            "(posenc needs a Vulkan 1.1 instance)",
                            missing);
    posenc__gpu_failure failure = {0};
    vk->device_record.handle = &vk->physical_record;
    posenc_status status = posenc_vk_describe(&vk->instance, vk->physical_handle, 0,
                                              &vk->device_record, &failure);
    return posenc__gpu_external_device(ctx, &vk->device_record, status, &failure,
                                       "vulkan.physical_device",
                                       "posenc needs Vulkan 1.1, a compute queue and 8 storage "
                                       "buffers a shader stage, which this device lacks");
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

/* The caller's device: its functions, queue and pipeline cache, and the features it enabled. */
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
    vk->storage16 = storage16 && !disabled("16bit_storage");
    if (ext->enabled_features & POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR) {
        vk->CmdPushDescriptorSetKHR = (PFN_vkCmdPushDescriptorSetKHR)
            vk->instance.fns.GetDeviceProcAddr(device, "vkCmdPushDescriptorSetKHR");
        if (!vk->CmdPushDescriptorSetKHR)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "vulkan.enabled_features: POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR "
                                "is set but the device has no vkCmdPushDescriptorSetKHR (enable "
                                "VK_KHR_push_descriptor at vkCreateDevice)");
        if (disabled("push_descriptor"))
            vk->CmdPushDescriptorSetKHR = NULL;
    }
    if (ext->enabled_features & POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT) {
        if (!vk->device_record.info.host_memory_import)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "vulkan.enabled_features: POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT "
                                "is set but the physical device has no "
                                "VK_EXT_external_memory_host on unified memory");
        if (!disabled("host_import"))
            vk->GetMemoryHostPointerPropertiesEXT = (PFN_vkGetMemoryHostPointerPropertiesEXT)
                vk->instance.fns.GetDeviceProcAddr(device, "vkGetMemoryHostPointerPropertiesEXT");
        if (!vk->GetMemoryHostPointerPropertiesEXT && !disabled("host_import"))
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

/* posenc's own logical device, with one queue of its compute family and the optional features
 * the physical device offers. */
static posenc_status create_device(posenc_context *ctx, posenc_vk_context *vk)
{
    const posenc_vk_physical *physical = vk->physical;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = physical->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    vk->storage16 = ctx->device->info.fp16_storage && !disabled("16bit_storage");
    VkPhysicalDevice16BitStorageFeatures storage16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .storageBuffer16BitAccess = VK_TRUE,
    };
    const char *extensions[3];
    uint32_t extension_count = 0;
    if (physical->portability_subset) /* required wherever the device offers it (MoltenVK) */
        extensions[extension_count++] = "VK_KHR_portability_subset";
    bool push_descriptor = physical->push_descriptor && !disabled("push_descriptor");
    if (push_descriptor)
        extensions[extension_count++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    bool host_import = ctx->device->info.host_memory_import && !disabled("host_import");
    if (host_import)
        extensions[extension_count++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
    VkDeviceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = vk->storage16 ? &storage16 : NULL,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &queue,
        .enabledExtensionCount = extension_count,
        .ppEnabledExtensionNames = extension_count ? extensions : NULL,
    };
    VkResult result =
        vk->instance.fns.CreateDevice(vk->physical_handle, &info, vk->allocator, &vk->device);
    if (result != VK_SUCCESS) {
        vk->device = VK_NULL_HANDLE;
        posenc_vk_fail(ctx, result, "vkCreateDevice");
        return result == VK_ERROR_DEVICE_LOST ? POSENC_DEVICE_LOST : POSENC_DEVICE_INIT_FAILED;
    }
    const char *missing = "";
    if (!posenc_vk_load_device_fns(&vk->instance.fns, vk->device, &vk->fns, &missing)) {
        PFN_vkDestroyDevice destroy = (PFN_vkDestroyDevice)vk->instance.fns.GetDeviceProcAddr(
            vk->device, "vkDestroyDevice");
        if (destroy)
            destroy(vk->device, vk->allocator);
        vk->device = VK_NULL_HANDLE;
        return posenc__fail(ctx, POSENC_DEVICE_INIT_FAILED, "vulkan: the device lacks %s",
                            missing);
    }
    vk->fns.GetDeviceQueue(vk->device, physical->queue_family, 0, &vk->queue);
    vk->queue_family = physical->queue_family;
    if (push_descriptor)
        vk->CmdPushDescriptorSetKHR = (PFN_vkCmdPushDescriptorSetKHR)
            vk->instance.fns.GetDeviceProcAddr(vk->device, "vkCmdPushDescriptorSetKHR");
    if (host_import)
        vk->GetMemoryHostPointerPropertiesEXT = (PFN_vkGetMemoryHostPointerPropertiesEXT)
            vk->instance.fns.GetDeviceProcAddr(vk->device, "vkGetMemoryHostPointerPropertiesEXT");
    return POSENC_OK;
}

/* Memory types: posenc buffers in device-local memory (mapped on unified memory), staging in
 * host-visible coherent memory, cached when offered (the host reads results back). */
static posenc_status choose_memory(posenc_context *ctx, posenc_vk_context *vk)
{
    VkPhysicalDeviceMemoryProperties memory;
    vk->instance.fns.GetPhysicalDeviceMemoryProperties(vk->physical_handle, &memory);
    /* The types storage buffers may use, from a probe buffer. */
    VkBuffer probe;
    VkResult result = posenc_vk_create_buffer(vk, 16, NULL, &probe);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkCreateBuffer");
    VkMemoryRequirements requirements;
    vk->fns.GetBufferMemoryRequirements(vk->device, probe, &requirements);
    vk->fns.DestroyBuffer(vk->device, probe, vk->allocator);
    uint32_t bits = requirements.memoryTypeBits;

    const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    vk->host_memory_type =
        posenc_vk_memory_type(&memory, bits, host, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (vk->host_memory_type == UINT32_MAX)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "vulkan: no host-visible coherent memory for storage buffers");
    vk->unified = ctx->device->info.unified_memory && !disabled("unified_memory");
    if (vk->unified) {
        vk->device_memory_type =
            posenc_vk_memory_type(&memory, bits, host | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                  VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
        vk->unified = vk->device_memory_type != UINT32_MAX;
    }
    /* Imports are for devices that share host memory, as staging copies are elsewhere. */
    vk->host_import = vk->unified && vk->GetMemoryHostPointerPropertiesEXT != NULL;
    if (!vk->unified) {
        vk->device_memory_type =
            posenc_vk_memory_type(&memory, bits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
        if (vk->device_memory_type == UINT32_MAX)
            vk->device_memory_type = vk->host_memory_type;
    }
    return POSENC_OK;
}

static posenc_status create_layouts(posenc_context *ctx, posenc_vk_context *vk)
{
    VkDescriptorSetLayoutBinding bindings[POSENC_VK_BINDINGS];
    for (uint32_t i = 0; i < POSENC_VK_BINDINGS; i++) {
        bindings[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    }
    VkDescriptorSetLayoutCreateInfo set_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = vk->CmdPushDescriptorSetKHR
                     ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR
                     : 0,
        .bindingCount = POSENC_VK_BINDINGS,
        .pBindings = bindings,
    };
    VkResult result =
        vk->fns.CreateDescriptorSetLayout(vk->device, &set_info, vk->allocator, &vk->set_layout);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkCreateDescriptorSetLayout");
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_DESCRIPTOR_SET_LAYOUT,
                         POSENC_VK_OBJECT(vk->set_layout), "posenc descriptor set layout");
    VkPushConstantRange push = {VK_SHADER_STAGE_COMPUTE_BIT, 0, POSENC_VK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo layout_info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &vk->set_layout,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &push,
    };
    result = vk->fns.CreatePipelineLayout(vk->device, &layout_info, vk->allocator,
                                          &vk->pipeline_layout);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkCreatePipelineLayout");
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_PIPELINE_LAYOUT, POSENC_VK_OBJECT(vk->pipeline_layout),
                         "posenc pipeline layout");
    return POSENC_OK;
}

/* The command pool of posenc's own submissions; none without a queue (record-only). */
static posenc_status create_commands(posenc_context *ctx, posenc_vk_context *vk)
{
    if (!vk->queue)
        return POSENC_OK;
    VkCommandPoolCreateInfo pool_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = vk->queue_family,
    };
    VkResult result =
        vk->fns.CreateCommandPool(vk->device, &pool_info, vk->allocator, &vk->command_pool);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkCreateCommandPool");
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_COMMAND_POOL, POSENC_VK_OBJECT(vk->command_pool),
                         "posenc command pool");
    VkCommandBufferAllocateInfo buffer_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = vk->command_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    result = vk->fns.AllocateCommandBuffers(vk->device, &buffer_info, &vk->commands);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkAllocateCommandBuffers");
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_COMMAND_BUFFER, POSENC_VK_OBJECT(vk->commands),
                         "posenc command buffer");
    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    result = vk->fns.CreateFence(vk->device, &fence_info, vk->allocator, &vk->fence);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkCreateFence");
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_FENCE, POSENC_VK_OBJECT(vk->fence), "posenc fence");
    return POSENC_OK;
}

/* Frees whatever exists of the context state; safe on a partly made one, which has no pipeline
 * cache of its own to save. A caller's device, instance and pipeline cache stay; on a caller's
 * device posenc waits only for its own submissions (vkDeviceWaitIdle would need every queue of
 * the engine to be idle). */
void posenc_vk_context_fini(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    if (!vk)
        return;
    if (vk->device) {
        if (!posenc__is_lost(ctx) && !vk->external)
            vk->fns.DeviceWaitIdle(vk->device);
        posenc_vk_submissions_fini(ctx);
        posenc_vk_pipeline_cache_save(ctx);
        const VkAllocationCallbacks *allocator = vk->allocator;
        /* vkDestroy* take VK_NULL_HANDLE: what was never made needs no test. */
        for (uint32_t k = 0; k < POSENC__SPIRV_VARIANT_COUNT; k++)
            vk->fns.DestroyPipeline(vk->device, vk->pipelines[k], allocator);
        if (vk->pipeline_cache && !vk->borrowed_pipeline_cache)
            vk->fns.DestroyPipelineCache(vk->device, vk->pipeline_cache, allocator);
        posenc_vk_descriptors_fini(ctx);
        vk->fns.DestroyPipelineLayout(vk->device, vk->pipeline_layout, allocator);
        vk->fns.DestroyDescriptorSetLayout(vk->device, vk->set_layout, allocator);
        vk->fns.DestroyFence(vk->device, vk->fence, allocator);
        vk->fns.DestroyCommandPool(vk->device, vk->command_pool, allocator);
        posenc_vk_freqs_fini(ctx);
        posenc_vk_release(ctx, &vk->placeholder);
        posenc_vk_release(ctx, &vk->staging);
        if (!vk->external)
            vk->fns.DestroyDevice(vk->device, vk->allocator);
    }
    posenc_vk_instance_destroy(&vk->instance);
    if (vk->lock_made)
        posenc__mutex_destroy(&vk->lock);
    free(vk);
    ctx->backend_state = NULL;
}

/* The shared end of creation: debug names (posenc_vk_debug_init's `wanted` and `field`), memory
 * types, layouts, the command pool and fence (when there is a queue), the placeholder and the
 * pipeline cache. */
static posenc_status finish_init(posenc_context *ctx, bool debug_utils, const char *debug_field)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_status status = posenc_vk_debug_init(ctx, debug_utils, debug_field);
    if (status != POSENC_OK)
        return status;
    vk->lock_made = posenc__mutex_init(&vk->lock);
    if (!vk->lock_made)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: could not create a mutex");
    status = choose_memory(ctx, vk);
    if (status == POSENC_OK)
        status = create_layouts(ctx, vk);
    if (status == POSENC_OK)
        status = create_commands(ctx, vk);
    if (status == POSENC_OK)
        status = posenc_vk_allocate(ctx, 16, vk->host_memory_type, true, "placeholder",
                                    "posenc placeholder", &vk->placeholder);
    if (status == POSENC_OK) /* last: a context whose creation failed saves no cache */
        status = posenc_vk_pipeline_cache_create(ctx);
    if (status != POSENC_OK)
        return status;
    /* Windows of at most 2^31 bytes keep every element index of a kernel in 31 bits. */
    uint64_t limit = ctx->device->info.max_binding_bytes;
    vk->binding_limit = (limit < (UINT64_C(1) << 31) ? limit : (UINT64_C(1) << 31)) & ~(uint64_t)15;
    posenc__log(ctx, POSENC_LOG_DEBUG,
                "vulkan: %s%s; f16/bf16 %s; descriptors %s; validation %s; debug names %s",
                vk->unified ? "unified memory, buffers mapped" : "buffers staged",
                vk->host_import ? ", host memory imported" : "",
                vk->storage16 ? "with 16-bit storage" : "packed two per word",
                vk->CmdPushDescriptorSetKHR ? "pushed" : "from pools",
                vk->instance.validation ? "on" : "off",
                vk->debug.on ? "on" : "off");
    return POSENC_OK;
}

/* Both kinds of context: posenc's own on `device` (`ext` NULL), or on the caller's handles. A
 * failure is torn down with posenc_vk_context_fini, which frees whatever exists. */
static posenc_status context_init(posenc_context *ctx, const posenc__device *device,
                                  const posenc_vulkan_external *ext)
{
    posenc_vk_context *vk = calloc(1, sizeof *vk);
    if (!vk)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    ctx->backend_state = vk;
    vk->allocator = ext ? ext->allocation_callbacks : NULL;
    posenc_status status = ext ? borrow_instance(ctx, vk, ext) : create_instance(ctx, vk);
    vk->physical = ext ? &vk->physical_record : device->handle;
    if (status == POSENC_OK)
        status = ext && ext->device ? borrow_device(ctx, vk, ext) : create_device(ctx, vk);
    if (status == POSENC_OK && ext)
        status = finish_init(ctx, (ext->enabled_features & POSENC_VULKAN_FEATURE_DEBUG_UTILS) != 0,
                             "vulkan.enabled_features");
    else if (status == POSENC_OK)
        status = finish_init(ctx, vk->instance.debug_utils, NULL);
    if (status != POSENC_OK)
        posenc_vk_context_fini(ctx);
    return status;
}

posenc_status posenc_vk_context_init(posenc_context *ctx, const posenc__device *device)
{
    return context_init(ctx, device, NULL);
}

posenc_status posenc_vk_context_init_external(posenc_context *ctx,
                                              const posenc_context_desc *desc)
{
    posenc_status status = check_fields(ctx, &desc->vulkan);
    return status == POSENC_OK ? context_init(ctx, NULL, &desc->vulkan) : status;
}
