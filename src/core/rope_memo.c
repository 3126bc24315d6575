/* SPDX-License-Identifier: MIT */
/* The remembered RoPE descriptor of a context (core/rope_memo.h). The resolution of a
 * descriptor depends on the descriptor's bytes, on the buffers its tensors name, on the
 * frequency table and the caller's arrays, and on position_offset: a hit re-checks all but
 * the first, which it compares whole. */
#include "core/rope_memo.h"
#include "backend.h"
#include "core/frequencies.h"
#include "core/tensor.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A buffer a remembered view lies in, with what the view checks read from it. A buffer
 * destroyed and another created at the same address must be checked as the new one. */
typedef struct memo_buffer {
    posenc_buffer *buffer;
    uint64_t end;        /* the view's offset + extent: must stay within the buffer */
    const void *host;    /* the buffer's host address (NULL: none), which the overlap checks
                          * compare with host views and other buffers */
} memo_buffer;

struct posenc__rope_memo {
    bool valid;
    posenc_rope_desc desc;
    posenc__rope_op op;
    uint64_t freqs_id;
    uint32_t buffer_count;
    memo_buffer buffers[13]; /* one per tensor of the descriptor (13) that names a buffer */
};

static bool same_desc(const posenc_rope_desc *a, const posenc_rope_desc *b)
{
    const size_t at = offsetof(posenc_rope_desc, position_offset);
    const size_t after = at + sizeof a->position_offset;
    return memcmp(a, b, at) == 0 &&
           memcmp((const char *)a + after, (const char *)b + after, sizeof *a - after) == 0;
}

const posenc__rope_op *posenc__rope_memo_use(posenc_context *ctx, const posenc_rope_desc *desc)
{
    posenc__rope_memo *memo = ctx->rope_memo;
    if (!memo || !memo->valid || !same_desc(desc, &memo->desc))
        return NULL;
    /* posenc__resolve_positions' rules, the one input left out of the comparison. */
    if (posenc__tensor_absent(&desc->positions)) {
        if ((int64_t)desc->position_offset + memo->op.tokens - 1 > INT32_MAX)
            return NULL;
    } else if (desc->position_offset != 0) {
        return NULL;
    }
    if (memo->op.tables_by_token && desc->position_offset != 0)
        return NULL; /* gathered cos/sin rows take no position_offset */
    for (uint32_t i = 0; i < memo->buffer_count; i++) {
        const memo_buffer *b = &memo->buffers[i];
        if (b->buffer->ctx != ctx || posenc__atomic_load_acquire(&b->buffer->mapped) ||
            b->end > b->buffer->size || posenc__buffer_host_address(ctx, b->buffer) != b->host)
            return NULL;
    }
    if (!posenc__rope_frequencies_current(ctx, desc, memo->op.rotary_dim, memo->freqs_id))
        return NULL;
    memo->op.position_offset = desc->position_offset;
    return &memo->op;
}

/* Notes the buffer of a tensor the caller set, resolved into `view`. */
static void note_buffer(posenc_context *ctx, posenc__rope_memo *memo, const posenc_tensor *tensor,
                        const posenc__view *view)
{
    if (posenc__tensor_absent(tensor) || !tensor->buffer)
        return;
    posenc__view_span span = posenc__view_span_of(ctx, view);
    memo->buffers[memo->buffer_count++] = (memo_buffer){
        .buffer = tensor->buffer,
        .end = tensor->offset + (uint64_t)(span.hi - span.lo),
        .host = posenc__buffer_host_address(ctx, tensor->buffer),
    };
}

void posenc__rope_memo_keep(posenc_context *ctx, const posenc_rope_desc *desc,
                            const posenc__rope_op *op, bool length_from_positions)
{
    if (!ctx->rope_memo)
        ctx->rope_memo = calloc(1, sizeof *ctx->rope_memo);
    posenc__rope_memo *memo = ctx->rope_memo;
    if (!memo)
        return;
    memo->valid = false;
    if (length_from_positions || op->freqs_id == 0)
        return;
    memcpy(&memo->desc, desc, sizeof *desc); /* padding too: same_desc compares it */
    memo->op = *op;
    memo->freqs_id = op->freqs_id;
    memo->buffer_count = 0;
    note_buffer(ctx, memo, &desc->q, &op->q);
    note_buffer(ctx, memo, &desc->q_out, &op->q_out);
    note_buffer(ctx, memo, &desc->k, &op->k);
    note_buffer(ctx, memo, &desc->k_out, &op->k_out);
    note_buffer(ctx, memo, &desc->positions, &op->positions);
    note_buffer(ctx, memo, &desc->k_cache, &op->k_cache);
    note_buffer(ctx, memo, &desc->slot_mapping, &op->slots);
    note_buffer(ctx, memo, &desc->v, &op->v);
    note_buffer(ctx, memo, &desc->v_cache, &op->v_cache);
    note_buffer(ctx, memo, &desc->cos, &op->cos);
    note_buffer(ctx, memo, &desc->sin, &op->sin);
    note_buffer(ctx, memo, &desc->q_norm_weight, &op->q_norm_weight);
    note_buffer(ctx, memo, &desc->k_norm_weight, &op->k_norm_weight);
    memo->valid = true;
}

void posenc__rope_memo_free(posenc_context *ctx)
{
    free(ctx->rope_memo);
    ctx->rope_memo = NULL;
}
