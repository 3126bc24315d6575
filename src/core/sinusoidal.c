/* SPDX-License-Identifier: MIT */
/* posenc_sinusoidal: defaults, validation and resolution of the descriptor, then the backend
 * call. */
#include "backend.h"
#include "core/frequencies.h"
#include "core/tensor.h"

#include <math.h>

/* A scale field: 0 means 1; otherwise finite and representable as a float. */
static posenc_status resolve_scale(posenc_context *ctx, double value, const char *name,
                                   bool positive, double *out)
{
    double v = value == 0.0 ? 1.0 : value;
    if (!isfinite(v) || fabs(v) > 3.4e38 || (positive && v <= 0.0))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "%s: must be a finite number%s, got %g",
                            name, positive ? " > 0" : "", value);
    *out = v;
    return POSENC_OK;
}

posenc_status posenc__sinusoidal_prepare(posenc_context *ctx, const posenc_sinusoidal_desc *desc,
                                         posenc__sinusoidal_op *prepared)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!desc)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "desc: is NULL");
    posenc__clear_error(ctx);
    posenc_status status = posenc__check_lost(ctx);
    if (status != POSENC_OK)
        return status;

    posenc__sinusoidal_op op = {0};

    if (posenc__tensor_absent(&desc->out))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "out: is required");
    status = posenc__resolve_view(ctx, &desc->out, "out", 3, POSENC_DTYPE_F32,
                                  POSENC__FLOAT_DTYPES, &op.out);
    if (status != POSENC_OK)
        return status;
    op.batch = op.out.shape[1];
    op.rows = op.out.shape[2];
    op.d_model = op.out.shape[3];
    if (op.d_model / 2 > UINT32_MAX)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE, "out.shape: d_model %lld is too large",
                            (long long)op.d_model);
    op.half = (uint32_t)(op.d_model / 2);

    op.has_x = !posenc__tensor_absent(&desc->x);
    if (op.has_x) {
        status = posenc__resolve_view(ctx, &desc->x, "x", 3, op.out.dtype, POSENC__FLOAT_DTYPES,
                                      &op.x);
        if (status != POSENC_OK)
            return status;
        if (op.x.dtype != op.out.dtype)
            return posenc__fail(ctx, POSENC_INVALID_DTYPE, "x.dtype: %s does not match out's %s",
                                posenc_dtype_name(op.x.dtype), posenc_dtype_name(op.out.dtype));
        status = posenc__check_same_dims(ctx, &op.x, desc->x.ndim, "x", &op.out, "out", 0xfu);
        if (status != POSENC_OK)
            return status;
    }

    if (desc->layout != POSENC_SINUSOIDAL_INTERLEAVED && desc->layout != POSENC_SINUSOIDAL_SIN_COS &&
        desc->layout != POSENC_SINUSOIDAL_COS_SIN)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "layout: unknown value %d",
                            (int)desc->layout);
    op.layout = desc->layout;

    double base = desc->base == 0.0 ? 10000.0 : desc->base;
    if (!isfinite(base) || base <= 0.0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "base: must be a finite number > 0, got %g", desc->base);
    if (!isfinite(desc->freq_shift) || (op.half > 0 && (double)op.half - desc->freq_shift <= 0.0))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "freq_shift: d_model/2 - freq_shift must be > 0 (d_model/2 = %u, "
                            "freq_shift = %g)",
                            op.half, desc->freq_shift);
    double position_scale = 1.0, input_scale = 1.0, output_scale = 1.0;
    status = resolve_scale(ctx, desc->position_scale, "position_scale", true, &position_scale);
    if (status == POSENC_OK)
        status = resolve_scale(ctx, desc->input_scale, "input_scale", false, &input_scale);
    if (status == POSENC_OK)
        status = resolve_scale(ctx, desc->output_scale, "output_scale", false, &output_scale);
    if (status != POSENC_OK)
        return status;
    /* input_scale multiplies x: without x, a scale other than 1 would be ignored, and a call
     * that means to scale the embeddings would return OK with them unscaled. */
    if (!op.has_x && input_scale != 1.0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "input_scale: multiplies x (add mode), which is not given; %g would "
                            "have no effect (0 or 1 without x)",
                            desc->input_scale);
    op.input_scale = (float)input_scale;
    op.output_scale = (float)output_scale;

    status = posenc__resolve_positions(ctx, &desc->positions, desc->position_offset, op.batch,
                                       op.rows, "rows", &op.positions, &op.has_positions,
                                       &op.positions_per_batch);
    if (status != POSENC_OK)
        return status;
    op.position_offset = desc->position_offset;

    status = posenc__check_output_distinct(ctx, &op.out, "out");
    if (status == POSENC_OK && op.has_x && !posenc__views_identical(ctx, &op.out, &op.x))
        status = posenc__check_disjoint(ctx, &op.out, "out", &op.x, "x");
    if (status == POSENC_OK && op.has_positions)
        status = posenc__check_disjoint(ctx, &op.out, "out", &op.positions, "positions");
    if (status != POSENC_OK)
        return status;

    status = posenc__sinusoidal_frequencies(ctx, op.half, base, desc->freq_shift, position_scale);
    if (status != POSENC_OK)
        return status;
    op.freqs = ctx->sinusoidal_freqs.freqs;
    op.freqs_id = ctx->sinusoidal_freqs.id;
    *prepared = op;
    return POSENC_OK;
}

posenc_status posenc_sinusoidal(posenc_context *ctx, const posenc_sinusoidal_desc *desc)
{
    posenc__sinusoidal_op op;
    posenc_status status = posenc__sinusoidal_prepare(ctx, desc, &op);
    if (status == POSENC_OK)
        status = ctx->backend->run(ctx, &(posenc__op){.sinusoidal = &op});
    if (status == POSENC_OK)
        posenc__atomic64_add(&ctx->stats.sinusoidal_calls, 1);
    return status;
}
