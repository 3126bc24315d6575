/* SPDX-License-Identifier: MIT */
/* Compute pipelines, each created at its first use from the embedded SPIR-V, through a
 * VkPipelineCache that is loaded from and saved to the context's pipeline_cache_path. */
#include "vulkan/vk_internal.h"

#include "core/kernel_cache.h"
#include "core/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Caches larger than this are not read (a wrong path, not a cache). */
#define MAX_CACHE_BYTES (UINT64_C(1) << 30)

posenc_status posenc_vk_pipeline(posenc_context *ctx, posenc_vk_kernel kernel,
                                 VkPipeline *pipeline)
{
    posenc_vk_context *vk = ctx->backend_state;
    if (vk->pipelines[kernel]) {
        *pipeline = vk->pipelines[kernel];
        return POSENC_OK;
    }
    const posenc__spirv *spirv = posenc__spirv_get(kernel);
    if (!spirv)
        return posenc__fail(ctx, POSENC_KERNEL_BUILD_FAILED,
                            "vulkan: kernel %d is not embedded in this build", (int)kernel);
    VkShaderModuleCreateInfo module_info = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = spirv->word_count * sizeof(uint32_t),
        .pCode = spirv->words,
    };
    VkShaderModule module;
    VkResult result = vk->fns.CreateShaderModule(vk->device, &module_info, vk->allocator, &module);
    const char *call = "vkCreateShaderModule";
    if (result == VK_SUCCESS) {
        VkComputePipelineCreateInfo info = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage =
                {
                    .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                    .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                    .module = module,
                    .pName = "main",
                },
            .layout = vk->pipeline_layout,
        };
        call = "vkCreateComputePipelines";
        result = vk->fns.CreateComputePipelines(vk->device, vk->pipeline_cache, 1, &info,
                                                vk->allocator, &vk->pipelines[kernel]);
        vk->fns.DestroyShaderModule(vk->device, module, vk->allocator);
    }
    if (result != VK_SUCCESS) {
        vk->pipelines[kernel] = VK_NULL_HANDLE;
        char what[96];
        snprintf(what, sizeof what, "%s: %s", spirv->name, call);
        posenc_status status = posenc_vk_fail(ctx, result, what);
        return status == POSENC_DEVICE_ERROR ? POSENC_KERNEL_BUILD_FAILED : status;
    }
    posenc__atomic64_add(&ctx->stats.kernels_built, 1);
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_PIPELINE, POSENC_VK_OBJECT(vk->pipelines[kernel]),
                         vk->debug.kernel_labels[kernel]); /* its dispatches' label too */
    *pipeline = vk->pipelines[kernel];
    return POSENC_OK;
}

/* The file's bytes, or NULL when it cannot be read (absent: a first run). */
static void *read_file(const char *path, size_t *size)
{
    FILE *file = posenc__file_open(path, "rb");
    if (!file)
        return NULL;
    void *data = NULL;
    long length = -1;
    if (fseek(file, 0, SEEK_END) == 0)
        length = ftell(file);
    if (length > 0 && (uint64_t)length <= MAX_CACHE_BYTES && fseek(file, 0, SEEK_SET) == 0) {
        data = malloc((size_t)length);
        if (data && fread(data, 1, (size_t)length, file) != (size_t)length) {
            free(data);
            data = NULL;
        }
    }
    fclose(file);
    *size = data ? (size_t)length : 0;
    return data;
}

/* Whether `data` is a cache of this very device and driver (the header of
 * VK_PIPELINE_CACHE_HEADER_VERSION_ONE). Drivers check this too; checking first keeps a cache
 * from another GPU away from drivers that check less. */
static bool cache_matches(const posenc_vk_context *vk, const uint8_t *data, size_t size)
{
    VkPhysicalDeviceProperties device;
    vk->instance.fns.GetPhysicalDeviceProperties(vk->physical_handle, &device);
    uint32_t words[4];
    if (size < 16 + VK_UUID_SIZE)
        return false;
    memcpy(words, data, sizeof words);
    return words[0] >= 16 + VK_UUID_SIZE && words[0] <= size &&
           words[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && words[2] == device.vendorID &&
           words[3] == device.deviceID &&
           memcmp(data + 16, device.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

posenc_status posenc_vk_pipeline_cache_create(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    if (vk->borrowed_pipeline_cache)
        return POSENC_OK;
    size_t size = 0;
    void *data = NULL;
    if (ctx->pipeline_cache_path) {
        data = read_file(ctx->pipeline_cache_path, &size);
        if (data && !cache_matches(vk, data, size)) {
            posenc__log(ctx, POSENC_LOG_INFO,
                        "vulkan: pipeline cache %s is not for this device and driver; starting "
                        "an empty one",
                        ctx->pipeline_cache_path);
            free(data);
            data = NULL;
            size = 0;
        }
    }
    VkPipelineCacheCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = size,
        .pInitialData = data,
    };
    VkResult result =
        vk->fns.CreatePipelineCache(vk->device, &info, vk->allocator, &vk->pipeline_cache);
    if (result != VK_SUCCESS && data) { /* a driver refusing the data: start empty */
        info.initialDataSize = 0;
        info.pInitialData = NULL;
        result = vk->fns.CreatePipelineCache(vk->device, &info, vk->allocator, &vk->pipeline_cache);
    }
    free(data);
    if (result != VK_SUCCESS) {
        vk->pipeline_cache = VK_NULL_HANDLE;
        return posenc_vk_fail(ctx, result, "vkCreatePipelineCache");
    }
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_PIPELINE_CACHE, POSENC_VK_OBJECT(vk->pipeline_cache),
                         "posenc pipeline cache");
    return POSENC_OK;
}

void posenc_vk_pipeline_cache_save(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    if (!ctx->pipeline_cache_path || !vk->pipeline_cache || vk->borrowed_pipeline_cache ||
        posenc__is_lost(ctx))
        return;
    size_t size = 0;
    VkResult result = vk->fns.GetPipelineCacheData(vk->device, vk->pipeline_cache, &size, NULL);
    void *data = result == VK_SUCCESS && size ? malloc(size) : NULL;
    if (data)
        result = vk->fns.GetPipelineCacheData(vk->device, vk->pipeline_cache, &size, data);
    const void *pieces[1] = {data};
    if (!data || result != VK_SUCCESS ||
        !posenc__kernel_cache_save(ctx->pipeline_cache_path, pieces, &size, 1))
        posenc__log(ctx, POSENC_LOG_WARNING, "vulkan: could not save the pipeline cache to %s",
                    ctx->pipeline_cache_path);
    free(data);
}
