/* SPDX-License-Identifier: MIT */
/* Resolving public tensor views into validated 4-D views. */
#include "core/tensor.h"

#include "backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Extents above this are rejected, so sums of two extents never overflow int64. */
#define MAX_EXTENT (INT64_C(1) << 61)

bool posenc__tensor_absent(const posenc_tensor *tensor)
{
    return !tensor->buffer && !tensor->host && tensor->ndim == 0;
}

posenc_status posenc__resolve_view(posenc_context *ctx, const posenc_tensor *tensor,
                                   const char *name, uint32_t max_ndim, posenc_dtype default_dtype,
                                   uint32_t allowed_dtypes, posenc__view *view)
{
    if (tensor->buffer && tensor->host)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s: set either buffer or host, not both", name);
    if (!tensor->buffer && !tensor->host)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s: has no memory (buffer and host are both NULL)", name);
    if (tensor->buffer && tensor->buffer->ctx != ctx)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s.buffer: belongs to another context", name);
    if (tensor->buffer && posenc__atomic_load_acquire(&tensor->buffer->mapped))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s.buffer: is mapped; posenc_buffer_unmap it first", name);
    if (tensor->ndim < 1 || tensor->ndim > max_ndim)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE, "%s.ndim: must be 1..%u, got %u", name,
                            max_ndim, tensor->ndim);

    posenc_dtype dtype = tensor->dtype == POSENC_DTYPE_DEFAULT ? default_dtype : tensor->dtype;
    size_t element = posenc__dtype_size(dtype);
    if (element == 0 || (unsigned)dtype >= 32 || !(allowed_dtypes & POSENC__DTYPE_BIT(dtype)))
        return posenc__fail(ctx, POSENC_INVALID_DTYPE, "%s.dtype: %s (%d) is not allowed here",
                            name, posenc_dtype_name(dtype), (int)dtype);

    uint32_t n = tensor->ndim;
    for (uint32_t i = 0; i < n; i++) {
        if (tensor->shape[i] < 1)
            return posenc__fail(ctx, POSENC_INVALID_SHAPE, "%s.shape[%u]: must be >= 1, got %lld",
                                name, i, (long long)tensor->shape[i]);
    }
    if (tensor->offset % element)
        return posenc__fail(ctx, POSENC_INVALID_LAYOUT,
                            "%s.offset: %llu is not a multiple of the element size %zu", name,
                            (unsigned long long)tensor->offset, element);

    /* Strides from the innermost dim out; 0 means packed behind the next inner dim. The extent
     * (last byte + 1) is accumulated with overflow checks. */
    int64_t strides[POSENC_MAX_DIMS];
    int64_t packed = (int64_t)element;
    int64_t extent = (int64_t)element;
    for (uint32_t k = n; k-- > 0;) {
        int64_t stride = tensor->strides[k];
        if (stride == 0)
            stride = packed;
        if (stride < 0)
            return posenc__fail(ctx, POSENC_INVALID_LAYOUT,
                                "%s.strides[%u]: must be positive, got %lld", name, k,
                                (long long)stride);
        if (stride % (int64_t)element)
            return posenc__fail(ctx, POSENC_INVALID_LAYOUT,
                                "%s.strides[%u]: %lld is not a multiple of the element size %zu",
                                name, k, (long long)stride, element);
        int64_t steps = tensor->shape[k] - 1;
        if (steps > 0 && (stride > MAX_EXTENT / steps || extent > MAX_EXTENT - stride * steps))
            return posenc__fail(ctx, POSENC_INVALID_LAYOUT,
                                "%s.strides[%u]: the view's extent overflows", name, k);
        extent += stride * steps;
        if (tensor->shape[k] > MAX_EXTENT / stride)
            return posenc__fail(ctx, POSENC_INVALID_LAYOUT,
                                "%s.shape[%u]: the view's extent overflows", name, k);
        packed = stride * tensor->shape[k];
        strides[k] = stride;
    }

    if (tensor->buffer) {
        uint64_t size = tensor->buffer->size;
        if (tensor->offset > size || (uint64_t)extent > size - tensor->offset)
            return posenc__fail(ctx, POSENC_OUT_OF_BOUNDS,
                                "%s: the view (offset %llu, %lld bytes) reaches past the end of "
                                "its buffer (%llu bytes)",
                                name, (unsigned long long)tensor->offset, (long long)extent,
                                (unsigned long long)size);
    } else if (tensor->offset > (uint64_t)(UINTPTR_MAX - (uintptr_t)tensor->host) ||
               (uint64_t)extent > (uint64_t)(UINTPTR_MAX - (uintptr_t)tensor->host) -
                                      tensor->offset) {
        return posenc__fail(ctx, POSENC_INVALID_LAYOUT, "%s: the view wraps the address space",
                            name);
    }

    posenc__view resolved = {
        .buffer = tensor->buffer,
        .host = (uint8_t *)tensor->host,
        .offset = tensor->offset,
        .dtype = dtype,
    };
    uint32_t lead = POSENC_MAX_DIMS - n;
    for (uint32_t k = 0; k < POSENC_MAX_DIMS; k++) {
        resolved.shape[k] = k < lead ? 1 : tensor->shape[k - lead];
        resolved.strides[k] = k < lead ? extent : strides[k - lead];
    }
    *view = resolved;
    return POSENC_OK;
}

posenc_status posenc__resolve_positions(posenc_context *ctx, const posenc_tensor *positions,
                                        int32_t position_offset, int64_t batch, int64_t tokens,
                                        const char *tokens_name, posenc__view *view,
                                        bool *has_positions, bool *per_batch)
{
    if (posenc__tensor_absent(positions)) {
        if ((int64_t)position_offset + tokens - 1 > INT32_MAX)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "position_offset: %d + %lld %s passes the largest int32 position",
                                position_offset, (long long)tokens, tokens_name);
        *has_positions = false;
        *per_batch = false;
        return POSENC_OK;
    }
    if (position_offset != 0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "position_offset: must be 0 when positions are given, got %d",
                            position_offset);
    posenc_status status = posenc__resolve_view(ctx, positions, "positions", 2, POSENC_DTYPE_I32,
                                                POSENC__POSITION_DTYPES, view);
    if (status != POSENC_OK)
        return status;
    if (view->shape[3] != tokens)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "positions.shape[%u]: must equal the %lld %s, got %lld",
                            positions->ndim - 1, (long long)tokens, tokens_name,
                            (long long)view->shape[3]);
    if (view->shape[2] != 1 && view->shape[2] != batch)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "positions.shape[0]: must be 1 or the batch size %lld, got %lld",
                            (long long)batch, (long long)view->shape[2]);
    *has_positions = true;
    *per_batch = view->shape[2] > 1;
    return POSENC_OK;
}

posenc_status posenc__check_disjoint(posenc_context *ctx, const posenc__view *out,
                                     const char *out_name, const posenc__view *other,
                                     const char *other_name)
{
    if (posenc__views_may_overlap(ctx, out, other))
        return posenc__fail(ctx, POSENC_INVALID_LAYOUT, "%s: overlaps %s", out_name, other_name);
    return POSENC_OK;
}

posenc_status posenc__check_same_dims(posenc_context *ctx, const posenc__view *view,
                                      uint32_t view_ndim, const char *name,
                                      const posenc__view *like, const char *like_name,
                                      uint32_t mask)
{
    for (int k = 0; k < POSENC_MAX_DIMS; k++) {
        if (!(mask & (1u << k)) || view->shape[k] == like->shape[k])
            continue;
        int caller_index = k - (POSENC_MAX_DIMS - (int)view_ndim);
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "%s.shape[%d]: %lld does not match %s's %lld", name,
                            caller_index < 0 ? 0 : caller_index, (long long)view->shape[k],
                            like_name, (long long)like->shape[k]);
    }
    return POSENC_OK;
}

posenc_status posenc__positions_range(posenc_context *ctx, const posenc__view *positions,
                                      bool has_positions, int64_t rows, int64_t tokens,
                                      int32_t position_offset, double *smallest, double *largest)
{
    if (!has_positions) {
        *smallest = position_offset;
        *largest = (double)position_offset + (double)(tokens - 1);
        return POSENC_OK;
    }
    /* Host-visible positions are read in place; others are downloaded once (they are small:
     * one value per token). */
    int64_t components = positions->shape[1]; /* several for the multimodal kinds */
    int64_t extent = 4 + (components - 1) * positions->strides[1] +
                     (rows - 1) * positions->strides[2] + (tokens - 1) * positions->strides[3];
    const uint8_t *base = posenc__view_host_base(ctx, positions);
    uint8_t *copy = NULL;
    if (!base) {
        copy = malloc((size_t)extent);
        if (!copy)
            return posenc__fail(ctx, POSENC_OUT_OF_MEMORY,
                                "positions: cannot allocate %lld bytes to read them",
                                (long long)extent);
        posenc_status status = ctx->backend->buffer_download(ctx, positions->buffer,
                                                             positions->offset, copy,
                                                             (uint64_t)extent);
        if (status != POSENC_OK) {
            free(copy);
            return status;
        }
        base = copy;
    }
    *smallest = INFINITY;
    *largest = -INFINITY;
    for (int64_t i = 0; i < components * rows * tokens; i++) {
        int64_t c = i / (rows * tokens), r = i / tokens % rows, t = i % tokens;
        const uint8_t *p = base + c * positions->strides[1] + r * positions->strides[2] +
                           t * positions->strides[3];
        double value;
        if (positions->dtype == POSENC_DTYPE_I32) {
            int32_t v;
            memcpy(&v, p, sizeof v);
            value = v;
        } else {
            float f;
            memcpy(&f, p, sizeof f);
            value = f == f ? floor(f) : -1.0;
        }
        *smallest = fmin(*smallest, value);
        *largest = fmax(*largest, value);
    }
    free(copy);
    return POSENC_OK;
}
