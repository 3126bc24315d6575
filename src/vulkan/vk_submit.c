/* SPDX-License-Identifier: MIT */
/* Asynchronous submits on the context's queue (posenc_*_submit): each records into a command
 * buffer of its own from the context's pool, opened by a barrier that makes the writes of all
 * earlier work visible (a barrier's first scope is everything earlier in submission order, other
 * submissions included) and closed by one that makes its writes visible to the host, and is
 * submitted with a fence. Command buffers and fences are recycled once the fence signals; a
 * buffer and a frequency table remember the last submission that binds them, so that destroying
 * or mapping one waits for exactly the work it needs. */
#include "vulkan/vk_internal.h"

#include "core/op_views.h"
#include "core/tensor.h"

#include <stdlib.h>

_Static_assert(POSENC__ROPE_VIEWS <= POSENC_VK_MAX_VIEWS &&
                   POSENC__SINUSOIDAL_VIEWS <= POSENC_VK_MAX_VIEWS,
               "places of every operation's views");

/* Submissions in flight at once; one more waits for the oldest. */
#define MAX_SUBMISSIONS 16

typedef struct posenc_vk_event {
    uint64_t serial;
} posenc_vk_event;

/* Marks a signalled submission free. */
static void reap(posenc_vk_submission *submission)
{
    submission->serial = 0;
}

/* Waits for one submission, up to `timeout_ns`: OK once done, TIMEOUT, or the device error. */
static posenc_status wait_submission(posenc_context *ctx, posenc_vk_submission *submission,
                                     uint64_t timeout_ns)
{
    posenc_vk_context *vk = ctx->backend_state;
    if (posenc__is_lost(ctx)) { /* its fence may never signal: the work is over, with it */
        reap(submission);
        return posenc__check_lost(ctx);
    }
    VkResult result =
        vk->fns.WaitForFences(vk->device, 1, &submission->fence, VK_TRUE, timeout_ns);
    if (result == VK_TIMEOUT)
        return POSENC_TIMEOUT;
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkWaitForFences");
    reap(submission);
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

/* A free submission: a signalled one, a new one while there are fewer than MAX_SUBMISSIONS, or
 * the oldest once it is done. */
static posenc_status acquire(posenc_context *ctx, posenc_vk_submission **out)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_submission *oldest = NULL;
    for (uint32_t i = 0; i < vk->submission_count; i++) {
        posenc_vk_submission *submission = &vk->submissions[i];
        if (submission->serial &&
            vk->fns.GetFenceStatus(vk->device, submission->fence) == VK_SUCCESS)
            reap(submission);
        if (!submission->serial) {
            *out = submission;
            return POSENC_OK;
        }
        if (!oldest || submission->serial < oldest->serial)
            oldest = submission;
    }
    if (vk->submission_count == MAX_SUBMISSIONS) {
        posenc_status status = wait_submission(ctx, oldest, UINT64_MAX);
        if (status == POSENC_OK)
            *out = oldest;
        return status;
    }
    if (!vk->submissions) {
        vk->submissions = calloc(MAX_SUBMISSIONS, sizeof *vk->submissions);
        if (!vk->submissions)
            return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "submit: out of host memory");
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

typedef posenc_status (*record_fn)(posenc_context *ctx, const void *op,
                                   const posenc_vk_place *places);

static posenc_status record_rope(posenc_context *ctx, const void *op,
                                 const posenc_vk_place *places)
{
    return posenc_vk_rope_record(ctx, op, places);
}

static posenc_status record_sinusoidal(posenc_context *ctx, const void *op,
                                       const posenc_vk_place *places)
{
    return posenc_vk_sinusoidal_record(ctx, op, places);
}

/* The common part of both submits: `views` (NULL: absent) are all device buffers (the front
 * end checked them, see op_views.h). */
static posenc_status submit(posenc_context *ctx, const posenc__view *const *views,
                            uint32_t count, const posenc__freq *freqs, uint32_t freq_count,
                            uint64_t freqs_id, record_fn record,
                            const void *op, void **event_state, const char *call)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_status lost = posenc__check_lost(ctx);
    if (lost != POSENC_OK)
        return lost;
    if (!vk->queue)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "vulkan.queue: this context records only (no queue was given); "
                            "%s needs one",
                            call);
    posenc_status status;
    posenc_vk_event *event = NULL;
    if (event_state) {
        event = malloc(sizeof *event);
        if (!event)
            return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "event: out of host memory");
    }
    posenc_vk_place places[POSENC_VK_MAX_VIEWS] = {{0}};
    for (uint32_t i = 0; i < count; i++) {
        if (views[i])
            places[i] = posenc_vk_place_of(views[i]);
    }
    posenc_vk_descriptors_trim(ctx);
    posenc_vk_submission *submission = NULL;
    status = posenc_vk_set_freqs(ctx, freqs, freq_count, freqs_id, false);
    if (status == POSENC_OK)
        status = acquire(ctx, &submission);
    VkResult result = VK_SUCCESS;
    if (status == POSENC_OK) {
        VkCommandBufferBeginInfo begin = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
        };
        /* The pool resets command buffers one by one; begin resets a recorded one. */
        result = vk->fns.BeginCommandBuffer(submission->commands, &begin);
        if (result != VK_SUCCESS)
            status = posenc_vk_fail(ctx, result, "vkBeginCommandBuffer");
    }
    if (status == POSENC_OK) {
        vk->target = submission->commands;
        vk->dispatches = 0;
        posenc_vk_barrier_in(ctx, submission->commands);
        status = record(ctx, op, places);
        posenc_vk_barrier_out(ctx, submission->commands);
        result = vk->fns.EndCommandBuffer(submission->commands);
        if (status == POSENC_OK && result != VK_SUCCESS)
            status = posenc_vk_fail(ctx, result, "vkEndCommandBuffer");
    }
    if (status == POSENC_OK) {
        result = vk->fns.ResetFences(vk->device, 1, &submission->fence);
        VkSubmitInfo info = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = 1,
            .pCommandBuffers = &submission->commands,
        };
        if (result != VK_SUCCESS)
            status = posenc_vk_fail(ctx, result, "vkResetFences");
        else if ((result = vk->fns.QueueSubmit(vk->queue, 1, &info, submission->fence)) !=
                 VK_SUCCESS)
            status = posenc_vk_fail(ctx, result, "vkQueueSubmit");
    }
    if (status != POSENC_OK) {
        free(event);
        return status;
    }
    submission->serial = ++vk->serial;
    if (vk->table)
        vk->table->last_serial = submission->serial;
    for (uint32_t i = 0; i < count; i++) {
        if (views[i]) {
            posenc_vk_buffer *state = views[i]->buffer->backend_state;
            state->last_serial = submission->serial;
        }
    }
    if (event) {
        event->serial = submission->serial;
        *event_state = event;
    }
    return POSENC_OK;
}

posenc_status posenc_vk_rope_submit(posenc_context *ctx, const posenc__rope_op *op,
                                    void **event_state)
{
    posenc_vk_context *vk = ctx->backend_state;
    const posenc__view *views[POSENC__ROPE_VIEWS];
    posenc__rope_views(op, views);
    posenc__mutex_lock(&vk->lock);
    posenc_status status = submit(ctx, views, POSENC__ROPE_VIEWS, op->freqs, op->rotary_dim / 2,
                                  op->freqs_id, record_rope, op, event_state,
                                  "posenc_rope_submit");
    posenc__mutex_unlock(&vk->lock);
    return status;
}

posenc_status posenc_vk_sinusoidal_submit(posenc_context *ctx, const posenc__sinusoidal_op *op,
                                          void **event_state)
{
    posenc_vk_context *vk = ctx->backend_state;
    const posenc__view *views[POSENC__SINUSOIDAL_VIEWS];
    posenc__sinusoidal_views(ctx, op, views);
    posenc__mutex_lock(&vk->lock);
    posenc_status status = submit(ctx, views, POSENC__SINUSOIDAL_VIEWS, op->freqs, op->half,
                                  op->freqs_id, record_sinusoidal, op, event_state,
                                  "posenc_sinusoidal_submit");
    posenc__mutex_unlock(&vk->lock);
    return status;
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
    free(vk->submissions);
    vk->submissions = NULL;
    vk->submission_count = 0;
}
