/* SPDX-License-Identifier: MIT */
/* The context's own command buffer, recorded and submitted synchronously per call, and the
 * barriers that open and close every command buffer posenc records for itself. */
#include "vulkan/vk_internal.h"

posenc_status posenc_vk_begin(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_status lost = posenc__check_lost(ctx);
    if (lost != POSENC_OK)
        return lost;
    VkResult result = VK_SUCCESS;
    if (vk->recording) { /* a call that failed while recording */
        result = vk->fns.ResetCommandBuffer(vk->commands, 0);
        if (result != VK_SUCCESS)
            return posenc_vk_fail(ctx, result, "vkResetCommandBuffer");
        vk->recording = false;
    }
    if (!vk->queue)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "vulkan.queue: this context records only (no queue was given), and "
                            "this call needs to submit work");
    posenc_vk_descriptors_trim(ctx);
    VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    result = vk->fns.BeginCommandBuffer(vk->commands, &begin);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkBeginCommandBuffer");
    vk->recording = true;
    vk->target = vk->commands;
    vk->dispatches = 0;
    posenc_vk_barrier_in(ctx, vk->commands);
    return POSENC_OK;
}

void posenc_vk_barrier_in(posenc_context *ctx, VkCommandBuffer commands)
{
    posenc_vk_context *vk = ctx->backend_state;
    /* Writes of earlier work (kernels, copies, earlier submissions: a barrier's first scope is
     * everything before it in submission order) become visible to this one's. */
    VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    const VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vk->fns.CmdPipelineBarrier(commands, stages, stages, 0, 1, &barrier, 0, NULL, 0, NULL);
}

void posenc_vk_barrier_out(posenc_context *ctx, VkCommandBuffer commands)
{
    posenc_vk_context *vk = ctx->backend_state;
    VkMemoryBarrier to_host = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    vk->fns.CmdPipelineBarrier(
        commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
        VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0, NULL);
}

posenc_status posenc_vk_submit(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_barrier_out(ctx, vk->commands);
    VkResult result = vk->fns.EndCommandBuffer(vk->commands);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkEndCommandBuffer");
    vk->recording = false;
    result = vk->fns.ResetFences(vk->device, 1, &vk->fence);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkResetFences");
    VkSubmitInfo submit = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &vk->commands,
    };
    result = vk->fns.QueueSubmit(vk->queue, 1, &submit, vk->fence);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkQueueSubmit");
    result = vk->fns.WaitForFences(vk->device, 1, &vk->fence, VK_TRUE, UINT64_MAX);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkWaitForFences");
    return POSENC_OK;
}
