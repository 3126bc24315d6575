/* SPDX-License-Identifier: MIT */
/* The paged KV cache fields of posenc_rope_desc (k_cache, slot_mapping, v, v_cache): resolved
 * and checked against the q and k views already resolved. */
#include "core/rope_cache.h"
#include "core/tensor.h"

/* A cache view: [num_slots, k_heads, head_dim] or [num_blocks, block_size, k_heads, head_dim],
 * resolved right-aligned (a 3-D cache is one block). */
static posenc_status resolve_cache(posenc_context *ctx, const posenc_tensor *tensor,
                                   const char *name, const posenc__rope_op *op,
                                   posenc__view *view)
{
    if (tensor->ndim != 3 && tensor->ndim != 4)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "%s.ndim: a cache is [num_slots, k_heads, head_dim] or [num_blocks, "
                            "block_size, k_heads, head_dim], got %u dims",
                            name, tensor->ndim);
    posenc_status status = posenc__resolve_view(ctx, tensor, name, POSENC_MAX_DIMS, op->k.dtype,
                                                POSENC__FLOAT_DTYPES, view);
    if (status != POSENC_OK)
        return status;
    if (view->dtype != op->k.dtype)
        return posenc__fail(ctx, POSENC_INVALID_DTYPE, "%s.dtype: %s does not match k's %s", name,
                            posenc_dtype_name(view->dtype), posenc_dtype_name(op->k.dtype));
    /* Heads and head_dim: the last two dims, which are 4-D dims 2 and 3 either way. */
    status = posenc__check_same_dims(ctx, view, tensor->ndim, name, &op->k, "k",
                                     (1u << 2) | (1u << 3));
    if (status != POSENC_OK)
        return status;
    return posenc__check_output_distinct(ctx, view, name);
}

/* slot_mapping: i32 [tokens] for a batch of 1, or [batch, tokens]; never shared by a batch
 * (its entries would all write the same rows). */
static posenc_status resolve_slots(posenc_context *ctx, const posenc_tensor *tensor,
                                   const posenc__rope_op *op, posenc__view *view)
{
    if (posenc__tensor_absent(tensor))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "slot_mapping: is required with k_cache (i32 [tokens] or [batch, "
                            "tokens]: the cache row of each token)");
    posenc_status status = posenc__resolve_view(ctx, tensor, "slot_mapping", 2, POSENC_DTYPE_I32,
                                                POSENC__DTYPE_BIT(POSENC_DTYPE_I32), view);
    if (status != POSENC_OK)
        return status;
    if (view->shape[3] != op->tokens)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "slot_mapping.shape[%u]: must equal the %lld tokens, got %lld",
                            tensor->ndim - 1, (long long)op->tokens, (long long)view->shape[3]);
    if (view->shape[2] != op->batch)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            tensor->ndim == 1 ? "slot_mapping.shape: [tokens] serves a batch of "
                                                "1; give [batch, tokens] for the batch of %lld"
                                              : "slot_mapping.shape[0]: must equal the batch "
                                                "size %lld, got %lld",
                            (long long)op->batch, (long long)view->shape[2]);
    return POSENC_OK;
}

/* A view (or NULL: absent), its span and its name, for check_apart. */
typedef struct named_span {
    const posenc__view *view;
    posenc__view_span span;
    const char *name;
} named_span;

static named_span span_of(posenc_context *ctx, const posenc__view *view, const char *name)
{
    named_span named = {view, {NULL, 0, 0}, name};
    if (view)
        named.span = posenc__view_span_of(ctx, view);
    return named;
}

/* INVALID_LAYOUT when output `out` shares a byte with `other`; absent views share none. */
static posenc_status check_apart(posenc_context *ctx, const named_span *out,
                                 const named_span *other)
{
    if (!out->view || !other->view || !posenc__spans_meet(&out->span, &other->span))
        return POSENC_OK;
    return posenc__check_disjoint(ctx, out->view, out->name, other->view, other->name);
}

posenc_status posenc__rope_resolve_cache(posenc_context *ctx, const posenc_rope_desc *desc,
                                         posenc__rope_op *op)
{
    op->k_out_written = op->has_k;
    bool has_v = !posenc__tensor_absent(&desc->v);
    bool has_v_cache = !posenc__tensor_absent(&desc->v_cache);
    if (posenc__tensor_absent(&desc->k_cache)) {
        const char *stray = !posenc__tensor_absent(&desc->slot_mapping) ? "slot_mapping"
                            : has_v                                      ? "v"
                            : has_v_cache                                ? "v_cache"
                                                                         : NULL;
        if (stray)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "%s: is set but k_cache is not (it belongs to the KV cache "
                                "write)",
                                stray);
        return POSENC_OK;
    }
    if (!op->has_k)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "k_cache: is set but k is not (the cache takes the rotated k)");
    if (has_v != has_v_cache)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "%s: is set but %s is not",
                            has_v ? "v" : "v_cache", has_v ? "v_cache" : "v");

    posenc_status status = resolve_cache(ctx, &desc->k_cache, "k_cache", op, &op->k_cache);
    if (status != POSENC_OK)
        return status;
    status = resolve_slots(ctx, &desc->slot_mapping, op, &op->slots);
    if (status != POSENC_OK)
        return status;
    if (has_v) {
        status = posenc__resolve_view(ctx, &desc->v, "v", POSENC_MAX_DIMS, op->k.dtype,
                                      POSENC__FLOAT_DTYPES, &op->v);
        if (status != POSENC_OK)
            return status;
        if (desc->v.ndim != desc->k.ndim)
            return posenc__fail(ctx, POSENC_INVALID_SHAPE, "v.ndim: %u does not match k's %u",
                                desc->v.ndim, desc->k.ndim);
        if (desc->v.ndim == 2) { /* [tokens, head_dim], as k reads it */
            op->v.shape[1] = op->v.shape[2];
            op->v.strides[1] = op->v.strides[2];
            op->v.shape[2] = 1;
        }
        if (op->v.dtype != op->k.dtype)
            return posenc__fail(ctx, POSENC_INVALID_DTYPE, "v.dtype: %s does not match k's %s",
                                posenc_dtype_name(op->v.dtype), posenc_dtype_name(op->k.dtype));
        status = posenc__check_same_dims(ctx, &op->v, desc->v.ndim, "v", &op->k, "k", 0xfu);
        if (status == POSENC_OK)
            status = resolve_cache(ctx, &desc->v_cache, "v_cache", op, &op->v_cache);
        if (status == POSENC_OK)
            status = posenc__check_same_dims(ctx, &op->v_cache, desc->v_cache.ndim, "v_cache",
                                             &op->k_cache, "k_cache", 0xfu);
        if (status != POSENC_OK)
            return status;
    }
    op->has_k_cache = true;
    op->has_v = has_v;
    op->num_slots = op->k_cache.shape[0] * op->k_cache.shape[1];
    /* k_out absent: k is only read. The k view stands in as k_out so that every view is
     * valid; nothing writes it. */
    op->k_out_written = !posenc__tensor_absent(&desc->k_out);
    if (!op->k_out_written)
        op->k_in_place = false;

    /* The caches are outputs: they share no byte with any other view of the call, and the
     * other outputs none with the inputs the cache brings. A decode step makes these checks at
     * every call, so each view's span is computed once and compared first. */
    enum { Q, Q_OUT, K, K_OUT, POSITIONS, SLOTS, V, OTHERS };
    const posenc__view *others[OTHERS] = {
        &op->q, op->q_in_place ? NULL : &op->q_out, &op->k,
        op->k_out_written && !op->k_in_place ? &op->k_out : NULL,
        op->has_positions ? &op->positions : NULL, &op->slots, has_v ? &op->v : NULL};
    const char *names[OTHERS] = {"q", "q_out", "k", "k_out", "positions", "slot_mapping", "v"};
    named_span spans[OTHERS];
    for (int i = 0; i < OTHERS; i++)
        spans[i] = span_of(ctx, others[i], names[i]);
    named_span k_cache = span_of(ctx, &op->k_cache, "k_cache");
    named_span v_cache = span_of(ctx, has_v ? &op->v_cache : NULL, "v_cache");
    for (int i = 0; i < OTHERS && status == POSENC_OK; i++) {
        status = check_apart(ctx, &k_cache, &spans[i]);
        if (status == POSENC_OK)
            status = check_apart(ctx, &v_cache, &spans[i]);
    }
    if (status == POSENC_OK)
        status = check_apart(ctx, &v_cache, &k_cache);
    /* q and k written in place are outputs too, under their own names. */
    named_span q_written = op->q_in_place ? span_of(ctx, &op->q, "q") : spans[Q_OUT];
    named_span k_written = !op->k_out_written ? span_of(ctx, NULL, "k")
                           : op->k_in_place   ? span_of(ctx, &op->k, "k")
                                              : spans[K_OUT];
    for (int i = SLOTS; i <= V && status == POSENC_OK; i++) {
        status = check_apart(ctx, &q_written, &spans[i]);
        if (status == POSENC_OK)
            status = check_apart(ctx, &k_written, &spans[i]);
    }
    return status;
}
