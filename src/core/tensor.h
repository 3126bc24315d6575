/* SPDX-License-Identifier: MIT */
/* Resolving and validating tensor views, and the overlap rules between them. */
#ifndef POSENC_CORE_TENSOR_H
#define POSENC_CORE_TENSOR_H

#include "core/internal.h"

/* A view with no memory and ndim 0: an optional tensor left out. */
bool posenc__tensor_absent(const posenc_tensor *tensor);

/* Checks one public view and resolves it to 4-D (right-aligned, leading dims of size 1):
 * memory set exactly once and owned by `ctx`, ndim in [1, max_ndim], dtype allowed by
 * `allowed_dtypes` (a bit per posenc_dtype; DEFAULT becomes `default_dtype`), sizes >= 1, strides
 * positive and element-aligned (0 = packed), no overflow, inside its buffer. `name` is the field
 * path used in messages ("q", "k_out"). */
posenc_status posenc__resolve_view(posenc_context *ctx, const posenc_tensor *tensor,
                                   const char *name, uint32_t max_ndim, posenc_dtype default_dtype,
                                   uint32_t allowed_dtypes, posenc__view *view);

#define POSENC__DTYPE_BIT(d) (1u << (d))
#define POSENC__FLOAT_DTYPES \
    (POSENC__DTYPE_BIT(POSENC_DTYPE_F32) | POSENC__DTYPE_BIT(POSENC_DTYPE_F16) | \
     POSENC__DTYPE_BIT(POSENC_DTYPE_BF16))
#define POSENC__POSITION_DTYPES \
    (POSENC__DTYPE_BIT(POSENC_DTYPE_I32) | POSENC__DTYPE_BIT(POSENC_DTYPE_F32))

/* Fails with INVALID_LAYOUT when two different indices of an output view reach the same byte. */
posenc_status posenc__check_output_distinct(posenc_context *ctx, const posenc__view *view,
                                            const char *name);

/* Both views address exactly the same elements in the same order (in-place operation). */
bool posenc__views_identical(posenc_context *ctx, const posenc__view *a, const posenc__view *b);

/* The bytes a view spans, [lo, hi) in its memory space (host addresses, or one buffer's
 * offsets): views whose spans do not meet share no byte, a test cheap enough to run first when
 * one view is checked against many. */
typedef struct posenc__view_span {
    const void *space;
    int64_t lo, hi;
} posenc__view_span;
posenc__view_span posenc__view_span_of(posenc_context *ctx, const posenc__view *view);
static inline bool posenc__spans_meet(const posenc__view_span *a, const posenc__view_span *b)
{
    return a->space == b->space && a->lo < b->hi && b->lo < a->hi;
}

/* Whether any byte of `a` may also be a byte of `b`. Exact for ordinary strided layouts (fused
 * qkv slices are told apart); answers "may" when the search would be too long. */
bool posenc__views_may_overlap(posenc_context *ctx, const posenc__view *a, const posenc__view *b);

#endif

/* Resolves an optional positions tensor for `batch` x `tokens` rows: i32 or f32, shape [tokens]
 * or [batch, tokens] (a leading 1 means shared by the batch). Absent positions use
 * position_offset + index, which must stay within int32; given positions need offset 0. */
posenc_status posenc__resolve_positions(posenc_context *ctx, const posenc_tensor *positions,
                                        int32_t position_offset, int64_t batch, int64_t tokens,
                                        const char *tokens_name, posenc__view *view,
                                        bool *has_positions, bool *per_batch);

/* The smallest and largest position of `rows` x `tokens` tokens over every component of
 * `positions` (a view as posenc__resolve_positions gives it), reading them (downloading them
 * from a device buffer), or of position_offset + token index without positions. A NaN float
 * position counts as -1. */
posenc_status posenc__positions_range(posenc_context *ctx, const posenc__view *positions,
                                      bool has_positions, int64_t rows, int64_t tokens,
                                      int32_t position_offset, double *smallest, double *largest);

/* An output must not share a byte with another view of the same call. */
posenc_status posenc__check_disjoint(posenc_context *ctx, const posenc__view *out,
                                     const char *out_name, const posenc__view *other,
                                     const char *other_name);

/* Every dim of `view` equals the same dim of `like`, for the dims whose bit is set in `mask`
 * (bit k: 4-D dim k). Messages name `name.shape[...]` in the caller's own indexing. */
posenc_status posenc__check_same_dims(posenc_context *ctx, const posenc__view *view,
                                      uint32_t view_ndim, const char *name,
                                      const posenc__view *like, const char *like_name,
                                      uint32_t mask);
