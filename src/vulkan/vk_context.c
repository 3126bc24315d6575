/* SPDX-License-Identifier: MIT */
/* Vulkan contexts: an instance and a logical device of their own, one compute queue, one
 * command buffer recorded and submitted synchronously per call, and the shared descriptor and
 * pipeline layouts; and the parts of creation and teardown that contexts on a caller's device
 * (vk_external.c) share. */
#include "vulkan/vk_internal.h"

#include "core/platform.h"

#include <stdlib.h>
#include <string.h>

static posenc_status find_physical(posenc_context *ctx, posenc_vk_context *vk)
{
    uint32_t count = 0;
    VkPhysicalDevice *physicals = NULL;
    VkResult result = posenc_vk_physical_devices(&vk->instance, &physicals, &count);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkEnumeratePhysicalDevices");
    if (!physicals)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    const posenc_vk_physical *want = vk->physical;
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

posenc_status posenc_vk_create_device(posenc_context *ctx, posenc_vk_context *vk)
{
    const posenc_vk_physical *physical = vk->physical;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = physical->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    vk->storage16 = ctx->device->info.fp16_storage && !posenc_vk_disabled("16bit_storage");
    VkPhysicalDevice16BitStorageFeatures storage16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .storageBuffer16BitAccess = vk->storage16 ? VK_TRUE : VK_FALSE,
    };
    const char *extensions[3];
    uint32_t extension_count = 0;
    if (physical->portability_subset) /* required wherever the device offers it (MoltenVK) */
        extensions[extension_count++] = "VK_KHR_portability_subset";
    bool push_descriptor = physical->push_descriptor && !posenc_vk_disabled("push_descriptor");
    if (push_descriptor)
        extensions[extension_count++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    bool host_import = ctx->device->info.host_memory_import && !posenc_vk_disabled("host_import");
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
    vk->unified = ctx->device->info.unified_memory && !posenc_vk_disabled("unified_memory");
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
    free(vk->pools);
    free(vk->sets);
    posenc_vk_instance_destroy(&vk->instance);
    if (vk->lock_made)
        posenc__mutex_destroy(&vk->lock);
    free(vk);
    ctx->backend_state = NULL;
}

posenc_status posenc_vk_context_finish_init(posenc_context *ctx, bool debug_utils,
                                            const char *debug_field)
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
                vk->debug.SetDebugUtilsObjectNameEXT ? "on" : "off");
    return POSENC_OK;
}

posenc_status posenc_vk_context_init(posenc_context *ctx, const posenc__device *device)
{
    posenc_vk_context *vk = calloc(1, sizeof *vk);
    if (!vk)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    ctx->backend_state = vk;
    vk->physical = device->handle;

    char message[256];
    VkResult runtime_result;
    posenc_status status =
        posenc_vk_instance_create(ctx, (ctx->flags & POSENC_CONTEXT_VALIDATION) != 0,
                                  &vk->instance, message, sizeof message, &runtime_result);
    if (status != POSENC_OK) {
        posenc__fail(ctx, status, "vulkan: %s", message);
    } else {
        if ((ctx->flags & POSENC_CONTEXT_VALIDATION) && !vk->instance.validation)
            posenc__log(ctx, POSENC_LOG_INFO,
                        "vulkan: validation requested but VK_LAYER_KHRONOS_validation is not "
                        "installed");
        status = find_physical(ctx, vk);
    }
    if (status == POSENC_OK)
        status = posenc_vk_create_device(ctx, vk);
    if (status == POSENC_OK)
        status = posenc_vk_context_finish_init(ctx, vk->instance.debug_utils, NULL);
    if (status != POSENC_OK)
        posenc_vk_context_fini(ctx);
    return status;
}
