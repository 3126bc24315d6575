/* SPDX-License-Identifier: MIT */
/* posenc_prepare on Vulkan: an operation's pipelines and the device copy of its frequency
 * table, made before the first call records anything. */
#include "vulkan/vk_internal.h"

static posenc_status prepare(posenc_context *ctx, const posenc_vk_op *run)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc__mutex_lock(&vk->lock);
    posenc_status status = run->pipelines(ctx, run->op);
    if (status == POSENC_OK)
        status = posenc_vk_set_freqs(ctx, run->gpu.freqs, run->gpu.freq_count, run->gpu.freqs_id,
                                     false);
    /* No work binds it yet: the first call finds it again (or, past a cache of tables that
     * recorded work pins, writes it then). */
    vk->table = NULL;
    vk->table_ring.pending = NULL;
    posenc__mutex_unlock(&vk->lock);
    return status;
}

posenc_status posenc_vk_prepare_rope(posenc_context *ctx, const posenc__rope_op *op)
{
    posenc_vk_op run = posenc_vk_rope_op(op);
    return prepare(ctx, &run);
}

posenc_status posenc_vk_prepare_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    posenc_vk_op run = posenc_vk_sinusoidal_op(ctx, op);
    return prepare(ctx, &run);
}
