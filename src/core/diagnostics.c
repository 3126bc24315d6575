/* SPDX-License-Identifier: MIT */
/* Front end of the diagnostics seam (posenc_diagnostics.h): range checks, then the backend's
 * diagnostics table: the copy roofline over a buffer's bytes or shaped like one operation, the
 * 16-bit conversion floor, and the kernel variant a context runs. */
#include <posenc/posenc_diagnostics.h>

#include "backend.h"

/* The backend's diagnostics table, or NULL. */
static const posenc__backend_diagnostics *diagnostics(const posenc_context *ctx)
{
    return ctx->backend->diagnostics;
}

posenc_status posenc_diagnostics_roofline(posenc_context *ctx, posenc_buffer *buffer,
                                          uint64_t offset, uint64_t bytes, bool write_only)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!buffer || buffer->ctx != ctx)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "buffer: is NULL or belongs to another context");
    if (bytes == 0 || bytes % 4 || offset % 4)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "bytes: must be a positive multiple of 4 at a 4-byte offset");
    if (offset > buffer->size || bytes > buffer->size - offset)
        return posenc__fail(ctx, POSENC_OUT_OF_BOUNDS, "bytes: past the end of the buffer");
    if (!diagnostics(ctx) || !diagnostics(ctx)->roofline)
        return posenc__fail(ctx, POSENC_UNSUPPORTED, "roofline: the %s backend has no copy kernel",
                            posenc_backend_name(ctx->backend->kind));
    posenc__clear_error(ctx);
    posenc_status status = posenc__check_lost(ctx);
    if (status != POSENC_OK)
        return status;
    return diagnostics(ctx)->roofline(ctx, buffer, offset, bytes, write_only);
}

/* A RoPE descriptor through one of the backend's RoPE-shaped diagnostics (`run`, NULL where the
 * backend has none: UNSUPPORTED with `missing`, naming the backend). */
typedef posenc_status (*rope_diagnostic)(posenc_context *ctx, const posenc__rope_op *op);
static posenc_status run_rope_diagnostic(posenc_context *ctx, const posenc_rope_desc *desc,
                                         rope_diagnostic run, const char *missing)
{
    if (!run)
        return posenc__fail(ctx, POSENC_UNSUPPORTED, "roofline: the %s backend has no %s",
                            posenc_backend_name(ctx->backend->kind), missing);
    posenc__rope_op op;
    posenc_status status = posenc__rope_prepare(ctx, desc, &op);
    return status == POSENC_OK ? run(ctx, &op) : status;
}

posenc_status posenc_diagnostics_roofline_rope(posenc_context *ctx,
                                               const posenc_rope_desc *desc)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    return run_rope_diagnostic(ctx, desc, diagnostics(ctx) ? diagnostics(ctx)->rope_roofline : NULL,
                               "copy shaped like RoPE");
}

posenc_status posenc_diagnostics_conversion_floor_rope(posenc_context *ctx,
                                                       const posenc_rope_desc *desc)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    return run_rope_diagnostic(ctx, desc,
                               diagnostics(ctx) ? diagnostics(ctx)->rope_conversion_floor : NULL,
                               "16-bit conversion floor");
}

posenc_status posenc_diagnostics_roofline_sinusoidal(posenc_context *ctx,
                                                     const posenc_sinusoidal_desc *desc)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!diagnostics(ctx) || !diagnostics(ctx)->sinusoidal_roofline)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "roofline: the %s backend has no copy shaped like a sinusoidal "
                            "encoding",
                            posenc_backend_name(ctx->backend->kind));
    posenc__sinusoidal_op op;
    posenc_status status = posenc__sinusoidal_prepare(ctx, desc, &op);
    return status == POSENC_OK ? diagnostics(ctx)->sinusoidal_roofline(ctx, &op) : status;
}

const char *posenc_diagnostics_kernel_variant(const posenc_context *ctx)
{
    if (!ctx || !diagnostics(ctx) || !diagnostics(ctx)->kernel_variant)
        return NULL;
    return diagnostics(ctx)->kernel_variant(ctx);
}
