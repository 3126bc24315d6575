/* SPDX-License-Identifier: MIT */
/* The submissions in flight on posenc's queue: a command buffer and a fence each, recycled
 * once the fence signals; waiting for them by serial (what a buffer or table last took part
 * in), by event, or all. Below everything else that waits, so that memory, descriptors and
 * tables can wait without reaching up to the code that records work. */
#include "vulkan/vk_internal.h"

#include <stdlib.h>

/* Waits for one submission, up to `timeout_ns`: OK once done, TIMEOUT, or the device error. */
static posenc_status wait_submission(posenc_context *ctx, posenc_vk_submission *submission,
                                     uint64_t timeout_ns)
{
    posenc_vk_context *vk = ctx->backend_state;
    if (posenc__is_lost(ctx)) { /* its fence may never signal: the work is over, with it */
        submission->serial = 0;
        return posenc__check_lost(ctx);
    }
    VkResult result =
        vk->fns.WaitForFences(vk->device, 1, &submission->fence, VK_TRUE, timeout_ns);
    if (result == VK_TIMEOUT)
        return POSENC_TIMEOUT;
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkWaitForFences");
    submission->serial = 0; /* free */
    return POSENC_OK;
}

posenc_status posenc_vk_wait_serial(posenc_context *ctx, uint64_t serial)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_status status = POSENC_OK;
    for (uint32_t i = 0; i < vk->submission_count; i++) {
        posenc_vk_submission *submission = &vk->submissions[i];
        if (submission->serial && submission->serial <= serial) {
            posenc_status waited = wait_submission(ctx, submission, UINT64_MAX);
            if (status == POSENC_OK)
                status = waited;
        }
    }
    return status;
}

posenc_status posenc_vk_acquire_submission(posenc_context *ctx, posenc_vk_submission **out)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_submission *oldest = NULL;
    for (uint32_t i = 0; i < vk->submission_count; i++) {
        posenc_vk_submission *submission = &vk->submissions[i];
        if (submission->serial &&
            vk->fns.GetFenceStatus(vk->device, submission->fence) == VK_SUCCESS)
            submission->serial = 0; /* signalled: free */
        if (!submission->serial) {
            *out = submission;
            return POSENC_OK;
        }
        if (!oldest || submission->serial < oldest->serial)
            oldest = submission;
    }
    if (vk->submission_count == POSENC_VK_MAX_SUBMISSIONS) {
        posenc_status status = wait_submission(ctx, oldest, UINT64_MAX);
        if (status == POSENC_OK)
            *out = oldest;
        return status;
    }
    posenc_vk_submission made = {0};
    VkCommandBufferAllocateInfo buffer_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = vk->command_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkResult result = vk->fns.AllocateCommandBuffers(vk->device, &buffer_info, &made.commands);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkAllocateCommandBuffers");
    VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    result = vk->fns.CreateFence(vk->device, &fence_info, vk->allocator, &made.fence);
    if (result != VK_SUCCESS) {
        vk->fns.FreeCommandBuffers(vk->device, vk->command_pool, 1, &made.commands);
        return posenc_vk_fail(ctx, result, "vkCreateFence");
    }
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_COMMAND_BUFFER, POSENC_VK_OBJECT(made.commands),
                         "posenc submission command buffer");
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_FENCE, POSENC_VK_OBJECT(made.fence),
                         "posenc submission fence");
    vk->submissions[vk->submission_count] = made;
    *out = &vk->submissions[vk->submission_count++];
    return POSENC_OK;
}

posenc_status posenc_vk_event_wait(posenc_context *ctx, void *event_state, uint64_t timeout_ns)
{
    posenc_vk_context *vk = ctx->backend_state;
    const posenc_vk_event *event = event_state;
    posenc__mutex_lock(&vk->lock);
    posenc_status status = POSENC_OK;
    /* A submission no longer holding the serial was reaped: its work is done. */
    for (uint32_t i = 0; i < vk->submission_count; i++) {
        if (vk->submissions[i].serial == event->serial) {
            status = wait_submission(ctx, &vk->submissions[i], timeout_ns);
            break;
        }
    }
    posenc__mutex_unlock(&vk->lock);
    return status;
}

void posenc_vk_event_release(posenc_context *ctx, void *event_state)
{
    (void)ctx;
    free(event_state);
}

posenc_status posenc_vk_finish(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc__mutex_lock(&vk->lock);
    posenc_status status = posenc_vk_wait_serial(ctx, UINT64_MAX);
    posenc__mutex_unlock(&vk->lock);
    return status;
}

void posenc_vk_submissions_fini(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    for (uint32_t i = 0; i < vk->submission_count; i++) {
        posenc_vk_submission *submission = &vk->submissions[i];
        if (submission->serial && !posenc__is_lost(ctx))
            vk->fns.WaitForFences(vk->device, 1, &submission->fence, VK_TRUE, UINT64_MAX);
        vk->fns.DestroyFence(vk->device, submission->fence, vk->allocator);
        vk->fns.FreeCommandBuffers(vk->device, vk->command_pool, 1, &submission->commands);
    }
    vk->submission_count = 0;
}
