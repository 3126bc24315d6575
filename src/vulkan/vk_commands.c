/* SPDX-License-Identifier: MIT */
/* The command buffers posenc records for itself, opened and closed by the same barriers and
 * submitted with a fence: the context's own one, recorded and waited for within a call
 * (posenc_vk_run), and the asynchronous submissions (vk_submit.c). */
#include "vulkan/vk_internal.h"

static const VkPipelineStageFlags WORK_STAGES =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;

posenc_status posenc_vk_open(posenc_context *ctx, VkCommandBuffer commands)
{
    posenc_vk_context *vk = ctx->backend_state;
    VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    /* The pool resets command buffers one by one; begin resets a recorded one. */
    VkResult result = vk->fns.BeginCommandBuffer(commands, &begin);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkBeginCommandBuffer");
    vk->target = commands;
    vk->dispatches = 0;
    /* Writes of earlier work (kernels, copies, earlier submissions: a barrier's first scope is
     * everything before it in submission order) become visible to this one's. */
    VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vk->fns.CmdPipelineBarrier(commands, WORK_STAGES, WORK_STAGES, 0, 1, &barrier, 0, NULL, 0,
                               NULL);
    return POSENC_OK;
}

posenc_status posenc_vk_close(posenc_context *ctx, VkCommandBuffer commands, VkFence fence,
                              posenc_status recorded)
{
    posenc_vk_context *vk = ctx->backend_state;
    VkMemoryBarrier to_host = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    vk->fns.CmdPipelineBarrier(commands, WORK_STAGES, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host,
                               0, NULL, 0, NULL);
    VkResult result = vk->fns.EndCommandBuffer(commands);
    if (recorded != POSENC_OK)
        return recorded;
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkEndCommandBuffer");
    result = vk->fns.ResetFences(vk->device, 1, &fence);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkResetFences");
    VkSubmitInfo submit = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &commands,
    };
    result = vk->fns.QueueSubmit(vk->queue, 1, &submit, fence);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkQueueSubmit");
    return POSENC_OK;
}

posenc_status posenc_vk_begin(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_status lost = posenc__check_lost(ctx);
    if (lost != POSENC_OK)
        return lost;
    if (!vk->queue)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "vulkan.queue: this context records only (no queue was given), and "
                            "this call needs to submit work");
    posenc_vk_descriptors_trim(ctx);
    return posenc_vk_open(ctx, vk->commands);
}

/* Ends the context's own command buffer (every call ends what it began, so that the next
 * begin finds it ready), and when `recorded` is OK submits it and waits. */
static posenc_status end(posenc_context *ctx, posenc_status recorded)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_status status = posenc_vk_close(ctx, vk->commands, vk->fence, recorded);
    if (status != POSENC_OK)
        return status;
    VkResult result = vk->fns.WaitForFences(vk->device, 1, &vk->fence, VK_TRUE, UINT64_MAX);
    return result == VK_SUCCESS ? POSENC_OK : posenc_vk_fail(ctx, result, "vkWaitForFences");
}

posenc_status posenc_vk_submit(posenc_context *ctx)
{
    return end(ctx, POSENC_OK);
}

posenc_status posenc_vk_run(posenc_context *ctx, const posenc_vk_op *op)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_place places[POSENC__GPU_MAX_VIEWS];
    posenc_vk_staging staging = {0};
    posenc_status status = POSENC_OK;
    posenc__mutex_lock(&vk->lock);
    if (posenc__gpu_table_given(&op->gpu.table))
        status = posenc_vk_set_freqs(ctx, &op->gpu.table, false);
    if (status == POSENC_OK)
        status = posenc_vk_place_views(ctx, op->gpu.views, op->gpu.access, op->gpu.names,
                                       op->gpu.view_count, places, &staging);
    if (status == POSENC_OK)
        status = posenc_vk_begin(ctx);
    if (status == POSENC_OK)
        status = end(ctx, op->record(ctx, op->op, places));
    posenc_vk_unstage(ctx, &staging, status == POSENC_OK);
    posenc__mutex_unlock(&vk->lock);
    return status;
}
