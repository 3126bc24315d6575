/* SPDX-License-Identifier: MIT */
/* The caller cos/sin tables of posenc_rope: resolved against the views already resolved, and the
 * rows a call's positions pick checked against the tables' length. */
#include "core/rope_tables.h"
#include "core/frequencies.h"
#include "core/tensor.h"

#include <stdio.h>

/* A table as the op keeps it, [1, batch or 1, rows, width]: [rows, width] (rows by position),
 * [batch or 1, tokens, width] or HF's unsqueezed [batch or 1, 1, tokens, width] (rows gathered
 * per token). */
static posenc_status resolve_table(posenc_context *ctx, const posenc_tensor *tensor,
                                   const char *name, posenc__view *view)
{
    if (tensor->ndim < 2 || tensor->ndim > 4)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "%s.ndim: a cos/sin table is [rows, width] or [batch, tokens, "
                            "width], got %u dims",
                            name, tensor->ndim);
    posenc_status status = posenc__resolve_view(ctx, tensor, name, POSENC_MAX_DIMS,
                                                POSENC_DTYPE_F32, POSENC__FLOAT_DTYPES, view);
    if (status != POSENC_OK)
        return status;
    if (tensor->ndim == 4) {
        if (view->shape[1] != 1)
            return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                                "%s.shape[1]: a 4-D cos/sin table is [batch, 1, tokens, width] "
                                "(HF's unsqueezed form), got %lld",
                                name, (long long)view->shape[1]);
        view->shape[1] = view->shape[0];
        view->strides[1] = view->strides[0];
        view->shape[0] = 1;
    }
    return POSENC_OK;
}

/* Rows gathered per token: one row per token of the call, shared by the batch or one each;
 * positions would pick nothing and must be absent. */
static posenc_status check_gathered(posenc_context *ctx, const posenc_rope_desc *desc,
                                    const posenc__rope_op *op)
{
    uint32_t ndim = desc->cos.ndim;
    const posenc__view *cos = &op->cos;
    if (cos->shape[2] != op->tokens)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "cos.shape[%u]: gathered rows are one per token: must equal the "
                            "%lld tokens, got %lld",
                            ndim - 2, (long long)op->tokens, (long long)cos->shape[2]);
    if (cos->shape[1] != 1 && cos->shape[1] != op->batch)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "cos.shape[0]: must be 1 or the batch size %lld, got %lld",
                            (long long)op->batch, (long long)cos->shape[1]);
    if (op->has_positions || op->position_offset != 0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s: has no effect with cos/sin rows gathered per token ([batch, "
                            "tokens, width]) and must be %s; pass [rows, width] tables to "
                            "index them by position",
                            op->has_positions ? "positions" : "position_offset",
                            op->has_positions ? "absent" : "0");
    return POSENC_OK;
}

posenc_status posenc__rope_resolve_tables(posenc_context *ctx, const posenc_rope_desc *desc,
                                          posenc__rope_op *op)
{
    bool has_cos = !posenc__tensor_absent(&desc->cos);
    bool has_sin = !posenc__tensor_absent(&desc->sin);
    if (has_cos != has_sin)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "%s: is set but %s is not",
                            has_cos ? "cos" : "sin", has_cos ? "sin" : "cos");
    if (!has_cos)
        return POSENC_OK;
    char name[48];
    const char *field = posenc__rope_angle_field(desc, name, sizeof name);
    if (!field && desc->multimodal != POSENC_ROPE_POSITIONS_1D)
        field = "multimodal";
    if (field)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s: has no effect with caller cos/sin tables (they give every "
                            "rotation) and must be 0",
                            field);

    posenc_status status = resolve_table(ctx, &desc->cos, "cos", &op->cos);
    if (status == POSENC_OK)
        status = resolve_table(ctx, &desc->sin, "sin", &op->sin);
    if (status != POSENC_OK)
        return status;
    if (desc->sin.ndim != desc->cos.ndim)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "sin.ndim: %u does not match cos's %u", desc->sin.ndim,
                            desc->cos.ndim);
    for (uint32_t d = 0; d < desc->cos.ndim; d++) {
        if (desc->sin.shape[d] != desc->cos.shape[d])
            return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                                "sin.shape[%u]: %lld does not match cos's %lld", d,
                                (long long)desc->sin.shape[d], (long long)desc->cos.shape[d]);
    }
    int64_t width = op->cos.shape[3];
    uint32_t rot = op->rotary_dim;
    if (width != rot / 2 && width != rot)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "cos.shape[%u]: the width must be rotary_dim/2 = %u (a value per "
                            "pair) or rotary_dim = %u (a value per rotated dim), got %lld",
                            desc->cos.ndim - 1, rot / 2, rot, (long long)width);
    op->has_tables = true;
    op->tables_full_width = width == rot;
    op->tables_by_token = desc->cos.ndim > 2;
    op->table_rows = op->cos.shape[2];
    if (op->tables_by_token)
        status = check_gathered(ctx, desc, op);
    else if (op->has_positions && op->positions.dtype != POSENC_DTYPE_I32)
        status = posenc__fail(ctx, POSENC_INVALID_DTYPE,
                              "positions.dtype: cos/sin tables are indexed by i32 positions, "
                              "got %s",
                              posenc_dtype_name(op->positions.dtype));
    if (status == POSENC_OK)
        status = posenc__rope_check_outputs_apart(ctx, op, &op->cos, "cos");
    if (status == POSENC_OK)
        status = posenc__rope_check_outputs_apart(ctx, op, &op->sin, "sin");
    return status;
}

posenc_status posenc__rope_check_table_rows(posenc_context *ctx, const posenc__rope_op *op)
{
    if (!op->has_tables || op->tables_by_token)
        return POSENC_OK;
    double smallest, largest;
    posenc_status status = posenc__positions_range(
        ctx, &op->positions, op->has_positions, op->positions_per_batch ? op->batch : 1,
        op->tokens, op->position_offset, &smallest, &largest);
    if (status != POSENC_OK)
        return status;
    if (smallest >= 0.0 && largest < (double)op->table_rows)
        return POSENC_OK;
    double outside = smallest < 0.0 ? smallest : largest;
    if (!op->has_positions)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "position_offset: positions %d to %.0f reach outside the cos/sin "
                            "tables' %lld rows",
                            op->position_offset, largest, (long long)op->table_rows);
    return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                        "positions: position %.0f is outside the cos/sin tables' %lld rows "
                        "(positions index the rows)",
                        outside, (long long)op->table_rows);
}
