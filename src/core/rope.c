/* posenc_rope: defaults, validation and resolution of the descriptor, then the backend call.
 * Backends receive a posenc__rope_op they can trust. */
#include "backend.h"
#include "core/frequencies.h"
#include "core/scaling.h"
#include "core/tensor.h"

/* Batch, tokens and head_dim: the dims q and k must share. */
#define SHARED_DIMS ((1u << 0) | (1u << 1) | (1u << 3))
#define ALL_DIMS 0xfu

/* A 2-D view is [tokens, head_dim] (one head), not the right-aligned [heads, head_dim]. */
static posenc_status resolve_qk_view(posenc_context *ctx, const posenc_tensor *tensor,
                                     const char *name, posenc_dtype default_dtype,
                                     posenc__view *view)
{
    posenc_status status = posenc__resolve_view(ctx, tensor, name, POSENC_MAX_DIMS, default_dtype,
                                                POSENC__FLOAT_DTYPES, view);
    if (status == POSENC_OK && tensor->ndim == 2) {
        view->shape[1] = view->shape[2];
        view->strides[1] = view->strides[2];
        view->shape[2] = 1;
    }
    return status;
}

/* Resolves an output that may be absent (then it is the input itself: in place). */
static posenc_status resolve_output(posenc_context *ctx, const posenc_tensor *tensor,
                                    const char *name, const posenc__view *input,
                                    const char *input_name,
                                    posenc__view *out, bool *in_place)
{
    if (posenc__tensor_absent(tensor)) {
        *out = *input;
        *in_place = true;
        return posenc__check_output_distinct(ctx, out, input_name);
    }
    posenc_status status = resolve_qk_view(ctx, tensor, name, input->dtype, out);
    if (status != POSENC_OK)
        return status;
    if (out->dtype != input->dtype)
        return posenc__fail(ctx, POSENC_INVALID_DTYPE, "%s.dtype: %s does not match %s's %s",
                            name, posenc_dtype_name(out->dtype), input_name,
                            posenc_dtype_name(input->dtype));
    status = posenc__check_same_dims(ctx, out, tensor->ndim, name, input, input_name, ALL_DIMS);
    if (status != POSENC_OK)
        return status;
    status = posenc__check_output_distinct(ctx, out, name);
    if (status != POSENC_OK)
        return status;
    *in_place = posenc__views_identical(ctx, out, input);
    if (!*in_place)
        return posenc__check_disjoint(ctx, out, name, input, input_name);
    return POSENC_OK;
}

posenc_status posenc_rope(posenc_context *ctx, const posenc_rope_desc *desc)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!desc)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "desc: is NULL");
    posenc__clear_error(ctx);

    posenc__rope_op op = {0};
    posenc_status status;

    if (posenc__tensor_absent(&desc->q))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "q: is required");
    status = resolve_qk_view(ctx, &desc->q, "q", POSENC_DTYPE_F32, &op.q);
    if (status != POSENC_OK)
        return status;
    op.batch = op.q.shape[0];
    op.tokens = op.q.shape[1];
    op.q_heads = op.q.shape[2];
    op.head_dim = op.q.shape[3];

    status = resolve_output(ctx, &desc->q_out, "q_out", &op.q, "q", &op.q_out,
                            &op.q_in_place);
    if (status != POSENC_OK)
        return status;

    op.has_k = !posenc__tensor_absent(&desc->k);
    if (op.has_k) {
        status = resolve_qk_view(ctx, &desc->k, "k", op.q.dtype, &op.k);
        if (status != POSENC_OK)
            return status;
        if (op.k.dtype != op.q.dtype)
            return posenc__fail(ctx, POSENC_INVALID_DTYPE, "k.dtype: %s does not match q's %s",
                                posenc_dtype_name(op.k.dtype), posenc_dtype_name(op.q.dtype));
        status = posenc__check_same_dims(ctx, &op.k, desc->k.ndim, "k", &op.q, "q", SHARED_DIMS);
        if (status != POSENC_OK)
            return status;
        op.k_heads = op.k.shape[2];
        status = resolve_output(ctx, &desc->k_out, "k_out", &op.k, "k", &op.k_out,
                                &op.k_in_place);
        if (status != POSENC_OK)
            return status;
    } else if (!posenc__tensor_absent(&desc->k_out)) {
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "k_out: is set but k is not");
    }

    if (op.head_dim > UINT32_MAX)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE, "q.shape: head_dim %lld is too large",
                            (long long)op.head_dim);
    uint32_t rotary_dim = desc->rotary_dim ? desc->rotary_dim : (uint32_t)op.head_dim;
    if (rotary_dim % 2)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            desc->rotary_dim ? "rotary_dim: must be even, got %u"
                                             : "rotary_dim: defaults to head_dim %u, which is "
                                               "odd; set an even rotary_dim",
                            rotary_dim);
    if (rotary_dim > op.head_dim)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "rotary_dim: %u is larger than head_dim %lld", rotary_dim,
                            (long long)op.head_dim);
    if (desc->style != POSENC_ROPE_NEOX && desc->style != POSENC_ROPE_GPTJ)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "style: unknown value %d",
                            (int)desc->style);
    op.rotary_dim = rotary_dim;
    op.style = desc->style;
    op.inverse = desc->inverse;

    status = posenc__resolve_positions(ctx, &desc->positions, desc->position_offset, op.batch,
                                       op.tokens, "tokens", &op.positions, &op.has_positions,
                                       &op.positions_per_batch);
    if (status != POSENC_OK)
        return status;
    op.position_offset = desc->position_offset;

    /* No output shares memory with another view of the call (an output and its own input may
     * be the same view: that is in place). */
    const char *q_out_name = op.q_in_place ? "q" : "q_out"; /* name what the caller set */
    const char *k_out_name = op.k_in_place ? "k" : "k_out";
    if (op.has_k) {
        status = posenc__check_disjoint(ctx, &op.q_out, q_out_name, &op.k, "k");
        if (status == POSENC_OK)
            status = posenc__check_disjoint(ctx, &op.k_out, k_out_name, &op.q, "q");
        if (status == POSENC_OK && !(op.q_in_place && op.k_in_place))
            status = posenc__check_disjoint(ctx, &op.q_out, q_out_name, &op.k_out, k_out_name);
    }
    if (status == POSENC_OK && op.has_positions) {
        status = posenc__check_disjoint(ctx, &op.q_out, q_out_name, &op.positions, "positions");
        if (status == POSENC_OK && op.has_k)
            status =
                posenc__check_disjoint(ctx, &op.k_out, k_out_name, &op.positions, "positions");
    }
    if (status != POSENC_OK)
        return status;

    uint32_t sequence_length = desc->scaling.sequence_length;
    if (sequence_length == 0 && (desc->scaling.type == POSENC_ROPE_SCALING_DYNAMIC_NTK ||
                                 desc->scaling.type == POSENC_ROPE_SCALING_LONGROPE)) {
        status = posenc__sequence_length(ctx, &op.positions, op.has_positions,
                                         op.positions_per_batch ? op.batch : 1, op.tokens,
                                         op.position_offset, &sequence_length);
        if (status != POSENC_OK)
            return status;
    }
    status = posenc__rope_frequencies(ctx, desc, rotary_dim, sequence_length,
                                      &op.attention_factor);
    if (status != POSENC_OK)
        return status;
    op.freqs = ctx->rope_freqs.freqs;
    op.freqs_id = ctx->rope_freqs.id;
    if (ctx->copy_instead)
        return ctx->backend->rope_roofline(ctx, &op);
    return ctx->backend->rope(ctx, &op);
}
