/* SPDX-License-Identifier: MIT */
/* Debug names and labels (VK_EXT_debug_utils): posenc's objects named once, when they are made,
 * and each dispatch wrapped in a label built with the context, so that validation messages and
 * capture tools say which objects and commands are posenc's. Without the extension every
 * function here does nothing. */
#include "vulkan/vk_internal.h"

#include "core/kernels.h"

#include <stdio.h>

posenc_status posenc_vk_debug_init(posenc_context *ctx, bool wanted, const char *field)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_debug *debug = &vk->debug; /* zero: the state is calloc'ed */
    if (!wanted)
        return POSENC_OK;
    PFN_vkSetDebugUtilsObjectNameEXT name = vk->instance.fns.SetDebugUtilsObjectNameEXT;
    PFN_vkCmdBeginDebugUtilsLabelEXT begin = vk->instance.fns.CmdBeginDebugUtilsLabelEXT;
    PFN_vkCmdEndDebugUtilsLabelEXT end = vk->instance.fns.CmdEndDebugUtilsLabelEXT;
    if (!name || !begin || !end) {
        if (!field)
            return POSENC_OK; /* posenc's own instance: names are a nicety */
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s: POSENC_VULKAN_FEATURE_DEBUG_UTILS is set but the instance has "
                            "no %s (enable VK_EXT_debug_utils at vkCreateInstance)",
                            field,
                            !name    ? "vkSetDebugUtilsObjectNameEXT"
                            : !begin ? "vkCmdBeginDebugUtilsLabelEXT"
                                     : "vkCmdEndDebugUtilsLabelEXT");
    }
    debug->on = true;
    /* "rope_f16_s16" -> "posenc rope f16 s16": each pipeline's name and its dispatches' label,
     * made here once for all, so that a dispatch formats nothing. */
    for (int kernel = 0; kernel < POSENC__SPIRV_VARIANT_COUNT; kernel++) {
        char *label = debug->kernel_labels[kernel];
        const posenc__spirv *spirv = posenc__spirv_get((posenc_vk_kernel)kernel);
        snprintf(label, sizeof debug->kernel_labels[kernel], "posenc %s",
                 spirv ? spirv->name : "kernel");
        for (char *c = label; *c; c++) {
            if (*c == '_')
                *c = ' ';
        }
    }
    return POSENC_OK;
}

void posenc_vk_debug_name(const posenc_vk_context *vk, VkObjectType type, uint64_t handle,
                          const char *name)
{
    if (!vk->debug.on || !handle)
        return;
    VkDebugUtilsObjectNameInfoEXT info = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT,
        .objectType = type,
        .objectHandle = handle,
        .pObjectName = name,
    };
    /* A name is a nicety: a failure (out of host memory) leaves the object unnamed. */
    (void)vk->instance.fns.SetDebugUtilsObjectNameEXT(vk->device, &info);
}

void posenc_vk_debug_name_allocation(const posenc_vk_context *vk,
                                     const posenc_vk_allocation *allocation, const char *name)
{
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_BUFFER, POSENC_VK_OBJECT(allocation->buffer), name);
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_DEVICE_MEMORY, POSENC_VK_OBJECT(allocation->memory),
                         name);
}

void posenc_vk_debug_label_begin(const posenc_vk_context *vk, VkCommandBuffer commands,
                                 const char *label)
{
    if (!vk->debug.on)
        return;
    VkDebugUtilsLabelEXT info = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_LABEL_EXT,
        .pLabelName = label,
    };
    vk->instance.fns.CmdBeginDebugUtilsLabelEXT(commands, &info);
}

void posenc_vk_debug_label_end(const posenc_vk_context *vk, VkCommandBuffer commands)
{
    if (vk->debug.on)
        vk->instance.fns.CmdEndDebugUtilsLabelEXT(commands);
}
