/* SPDX-License-Identifier: MIT */
/* The QK RMSNorm fields of posenc_rope: the weights of q and k, each over one head or over the
 * token's whole tensor, and the norm's epsilon and weight offset. */
#include "core/rope_norm.h"
#include "core/tensor.h"

#include <math.h>

#define DEFAULT_EPS 1e-6

/* One tensor's weights: 1-D, head_dim values (a norm per head) or heads * head_dim (per token). */
static posenc_status resolve_weights(posenc_context *ctx, const posenc_tensor *tensor,
                                     const char *name, const posenc__rope_op *op, int64_t heads,
                                     posenc__view *view, bool *per_token)
{
    if (tensor->ndim != 1)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "%s.ndim: the weights are 1-D, [head_dim] or [heads * head_dim], "
                            "got %u dims",
                            name, tensor->ndim);
    posenc_status status = posenc__resolve_view(ctx, tensor, name, 1, POSENC_DTYPE_F32,
                                                POSENC__FLOAT_DTYPES, view);
    if (status != POSENC_OK)
        return status;
    int64_t length = view->shape[3];
    if (length != op->head_dim && length != heads * op->head_dim)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "%s.shape[0]: must be head_dim %lld (a norm per head) or heads * "
                            "head_dim %lld (per token), got %lld",
                            name, (long long)op->head_dim, (long long)(heads * op->head_dim),
                            (long long)length);
    /* With one head the two readings agree: per head. */
    *per_token = length != op->head_dim;
    return POSENC_OK;
}

posenc_status posenc__rope_resolve_norm(posenc_context *ctx, const posenc_rope_desc *desc,
                                        posenc__rope_op *op)
{
    op->has_q_norm = !posenc__tensor_absent(&desc->q_norm_weight);
    op->has_k_norm = !posenc__tensor_absent(&desc->k_norm_weight);
    if (!op->has_q_norm && !op->has_k_norm) {
        if (desc->norm_eps != 0.0 || desc->norm_weight_offset != 0.0)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "%s: has no effect without q_norm_weight or k_norm_weight and "
                                "must be 0",
                                desc->norm_eps != 0.0 ? "norm_eps" : "norm_weight_offset");
        return POSENC_OK;
    }
    if (op->has_k_norm && !op->has_k)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "k_norm_weight: is set but k is not");
    if (!(isfinite(desc->norm_eps) && desc->norm_eps >= 0.0))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "norm_eps: must be a finite number > 0 (0: 1e-6), got %g",
                            desc->norm_eps);
    if (!isfinite(desc->norm_weight_offset))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "norm_weight_offset: must be finite, got %g",
                            desc->norm_weight_offset);
    op->norm_eps = desc->norm_eps == 0.0 ? DEFAULT_EPS : desc->norm_eps;
    op->norm_weight_offset = desc->norm_weight_offset;
    posenc_status status = POSENC_OK;
    if (op->has_q_norm)
        status = resolve_weights(ctx, &desc->q_norm_weight, "q_norm_weight", op, op->q_heads,
                                 &op->q_norm_weight, &op->q_norm_per_token);
    if (status == POSENC_OK && op->has_k_norm)
        status = resolve_weights(ctx, &desc->k_norm_weight, "k_norm_weight", op, op->k_heads,
                                 &op->k_norm_weight, &op->k_norm_per_token);
    if (status == POSENC_OK && op->has_q_norm)
        status = posenc__rope_check_outputs_apart(ctx, op, &op->q_norm_weight, "q_norm_weight");
    if (status == POSENC_OK && op->has_k_norm)
        status = posenc__rope_check_outputs_apart(ctx, op, &op->k_norm_weight, "k_norm_weight");
    return status;
}
