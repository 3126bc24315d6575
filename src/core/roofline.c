/* Front end of the copy roofline: range checks, then the backend's copy kernel. */
#include "core/roofline.h"

#include "backend.h"

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
    if (!ctx->backend->roofline)
        return posenc__fail(ctx, POSENC_UNSUPPORTED, "roofline: the %s backend has no copy kernel",
                            ctx->backend->name);
    posenc__clear_error(ctx);
    return ctx->backend->roofline(ctx, buffer, offset, bytes, write_only);
}
