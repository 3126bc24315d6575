/* SPDX-License-Identifier: MIT */
/* Front end of the diagnostics seam (diagnostics.h): range checks, then the backend's
 * diagnostics table: the copy roofline over a buffer's bytes or shaped like one operation, the
 * 16-bit conversion floor, and the kernel variant a context runs. */
#include "diagnostics.h"

#include "backend.h"

/* The backend's diagnostics table, or NULL. */
static const posenc__backend_diagnostics *diagnostics(const posenc_context *ctx)
{
    return ctx->backend->diagnostics;
}

posenc_status posenc__roofline(posenc_context *ctx, posenc_buffer *buffer, uint64_t offset,
                               uint64_t bytes, bool write_only)
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
    return diagnostics(ctx)->roofline(ctx, buffer, offset, bytes, write_only);
}

posenc_status posenc__roofline_rope(posenc_context *ctx, const posenc_rope_desc *desc)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!diagnostics(ctx) || !diagnostics(ctx)->rope_roofline)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "roofline: the %s backend has no copy shaped like RoPE",
                            posenc_backend_name(ctx->backend->kind));
    posenc__rope_op op;
    posenc_status status = posenc__rope_prepare(ctx, desc, &op);
    return status == POSENC_OK ? diagnostics(ctx)->rope_roofline(ctx, &op) : status;
}

posenc_status posenc__conversion_floor_rope(posenc_context *ctx, const posenc_rope_desc *desc)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!diagnostics(ctx) || !diagnostics(ctx)->rope_conversion_floor)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "roofline: the %s backend has no 16-bit conversion floor",
                            posenc_backend_name(ctx->backend->kind));
    posenc__rope_op op;
    posenc_status status = posenc__rope_prepare(ctx, desc, &op);
    return status == POSENC_OK ? diagnostics(ctx)->rope_conversion_floor(ctx, &op) : status;
}

posenc_status posenc__roofline_sinusoidal(posenc_context *ctx, const posenc_sinusoidal_desc *desc)
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

const char *posenc__kernel_variant(const posenc_context *ctx)
{
    if (!ctx || !diagnostics(ctx) || !diagnostics(ctx)->kernel_variant)
        return NULL;
    return diagnostics(ctx)->kernel_variant(ctx);
}
