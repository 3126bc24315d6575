/* SPDX-License-Identifier: MIT */
/* The Vulkan backend's operation entries (src/backend.h), each running the operation's
 * description (posenc_vk_op): synchronous calls (posenc_vk_run), posenc_prepare's pipelines and
 * table made ahead, and submits left running on the context's queue. A submit records into a
 * command buffer of its own from the context's pool, opened by a barrier that makes the writes
 * of all earlier work visible (a barrier's first scope is everything earlier in submission
 * order, other submissions included) and closed by one that makes its writes visible to the
 * host, and is submitted with a fence. Command buffers and fences are recycled once the fence
 * signals; a buffer and a frequency table remember the last submission that binds them, so that
 * destroying or mapping one waits for exactly the work it needs. */
#include "vulkan/vk_internal.h"

#include <stdlib.h>

posenc_vk_op posenc_vk_op_of(posenc_context *ctx, const posenc__op *op)
{
    return op->rope ? posenc_vk_rope_op(ctx, op->rope)
                    : posenc_vk_sinusoidal_op(ctx, op->sinusoidal);
}

/* The pipelines of run->kernels and its table (`pinned`: see posenc_vk_record_device). */
static posenc_status make_ready(posenc_context *ctx, const posenc_vk_op *run, bool pinned)
{
    VkPipeline pipeline;
    posenc_status status = POSENC_OK;
    for (uint32_t i = 0; i < run->kernel_count && status == POSENC_OK; i++)
        status = posenc_vk_pipeline(ctx, run->kernels[i], &pipeline);
    if (status == POSENC_OK)
        status = posenc_vk_set_freqs(ctx, &run->gpu.table, pinned);
    return status;
}

posenc_status posenc_vk_record_device(posenc_context *ctx, const posenc_vk_op *run, bool pinned)
{
    posenc_vk_place places[POSENC__GPU_MAX_VIEWS];
    for (uint32_t i = 0; i < run->gpu.view_count; i++)
        places[i] = run->gpu.views[i] ? posenc_vk_place_of(run->gpu.views[i])
                                      : (posenc_vk_place){0};
    posenc_status status = make_ready(ctx, run, pinned);
    return status == POSENC_OK ? run->record(ctx, run->op, places) : status;
}

posenc_status posenc_vk_op_run(posenc_context *ctx, const posenc__op *op)
{
    posenc_vk_op run = posenc_vk_op_of(ctx, op);
    return posenc_vk_run(ctx, &run);
}

posenc_status posenc_vk_op_prepare(posenc_context *ctx, const posenc__op *op)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_op run = posenc_vk_op_of(ctx, op);
    posenc__mutex_lock(&vk->lock);
    posenc_status status = make_ready(ctx, &run, false);
    /* No work binds it yet: the first call finds it again (or, past a cache of tables that
     * recorded work pins, writes it then). */
    vk->table = NULL;
    vk->table_ring.pending = NULL;
    posenc__mutex_unlock(&vk->lock);
    return status;
}

posenc_status posenc_vk_op_submit(posenc_context *ctx, const posenc__op *op, void **event_state)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_op run = posenc_vk_op_of(ctx, op);
    posenc_vk_event *event = NULL;
    posenc_vk_submission *submission = NULL;
    posenc__mutex_lock(&vk->lock);
    posenc_status status = posenc__check_lost(ctx);
    if (status == POSENC_OK && !vk->queue)
        status = posenc__fail(ctx, POSENC_UNSUPPORTED,
                              "vulkan.queue: this context records only (no queue was given); "
                              "%s needs one",
                              op->rope ? "posenc_rope_submit" : "posenc_sinusoidal_submit");
    if (status == POSENC_OK && event_state && !(event = malloc(sizeof *event)))
        status = posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "event: out of host memory");
    if (status == POSENC_OK) {
        posenc_vk_descriptors_trim(ctx);
        status = posenc_vk_acquire_submission(ctx, &submission);
    }
    if (status == POSENC_OK)
        status = posenc_vk_open(ctx, submission->commands);
    if (status == POSENC_OK)
        status = posenc_vk_close(ctx, submission->commands, submission->fence,
                                 posenc_vk_record_device(ctx, &run, false));
    if (status == POSENC_OK) {
        submission->serial = ++vk->serial;
        if (vk->table)
            vk->table->last_serial = submission->serial;
        for (uint32_t i = 0; i < run.gpu.view_count; i++) {
            if (run.gpu.views[i]) {
                posenc_vk_buffer *state = run.gpu.views[i]->buffer->backend_state;
                state->last_serial = submission->serial;
            }
        }
    }
    if (status == POSENC_OK && event) {
        event->serial = submission->serial;
        *event_state = event;
    } else {
        free(event);
    }
    posenc__mutex_unlock(&vk->lock);
    return status;
}
