/* SPDX-License-Identifier: MIT */
/* GPU planning that is not staging: views as kernels index them (element offsets and strides
 * in 32-bit words), and how RoPE's heads are spread over invocations to fill a device. */
#ifndef POSENC_CORE_GPU_PLAN_H
#define POSENC_CORE_GPU_PLAN_H

#include "core/gpu_staging.h"
#include "core/gpu_tables.h"
#include "core/internal.h"

/* An operation as every GPU call path takes it (synchronous, submitted, recorded or enqueued for
 * the caller, prepared): its views in the order of core/op_views.h's list (NULL: absent) with
 * how the kernels use each, and the table it reads (its frequencies, or the layout of RoPE's
 * caller cos/sin tables). Filled by posenc__gpu_rope_op and posenc__gpu_sinusoidal_op. */
typedef struct posenc__gpu_op {
    const posenc__view *views[POSENC__GPU_MAX_VIEWS];
    unsigned access[POSENC__GPU_MAX_VIEWS]; /* POSENC__GPU_READ, POSENC__GPU_WRITE */
    const char *const *names;               /* of the views, in messages */
    uint32_t view_count;
    const char *what; /* the operation, in messages: "rope" */
    posenc__gpu_table_source table;
} posenc__gpu_op;

/* The copy roofline of `posenc bench`: `bytes` of `buf` from `offset` as one packed view of
 * 4-byte words (`*view`, so that wrapped host memory is staged like any view), read and
 * written, or written only. */
void posenc__gpu_roofline_op(posenc_buffer *buf, uint64_t offset, uint64_t bytes,
                             bool write_only, posenc__view *view, posenc__gpu_op *gpu);

/* Kernels index the elements of one binding with 32-bit words. */
#define POSENC__GPU_ELEMENT_LIMIT (UINT64_C(1) << 32)

/* A view as a kernel indexes it from the start of its allocation or window. */
typedef struct posenc__gpu_binding {
    uint32_t offset;     /* elements from the start to element 0 */
    uint32_t strides[4]; /* elements; 0 for dims of size 1, so their strides never matter */
} posenc__gpu_binding;

/* A view's stride along `dim` in its own elements, over a box spanning `count` indices of that
 * dim: 0 where it spans one, so that the strides of unit dims (any size) never reach the kernels'
 * 32-bit words. */
uint32_t posenc__gpu_element_stride(const posenc__view *view, int dim, int64_t count);

/* Whether a view's innermost runs (heads, rows) are whole blocks of `block_bytes` from its
 * element 0 on: consecutive last dim, and every step of the other dims that have more than one
 * index (the kernels see 0 for the others) a multiple of the block. The fast kernels that load
 * and store whole 16-byte vectors take such views. */
bool posenc__gpu_view_in_blocks(const posenc__view *view, uint32_t block_bytes);

/* Refuses (UNSUPPORTED) work of more units than one launch of `backend` indexes (2^32), or
 * with a size past 32 bits, naming `name` and its `shape` text. */
posenc_status posenc__gpu_check_units(posenc_context *ctx, const char *backend, const char *name,
                                      const char *shape, uint64_t units, uint64_t largest_size);

/* Binds `view` with element 0 at `byte_position` of its allocation. UNSUPPORTED, naming the
 * view, when its last element lies at or past `element_limit` (POSENC__GPU_ELEMENT_LIMIT at
 * most); `backend` names the API in that message. */
posenc_status posenc__gpu_bind(posenc_context *ctx, const char *backend, const char *name,
                               const posenc__view *view, uint64_t byte_position,
                               uint64_t element_limit, posenc__gpu_binding *binding);

/* How RoPE spreads `heads` over invocations: each invocation rotates `heads_per_unit` heads of
 * one row, so that one sin/cos serves them all, with as many chunks of heads as it takes for
 * rows x lanes x chunks to reach `fill_units` (the invocations that keep the device busy). */
typedef struct posenc__gpu_head_split {
    uint64_t heads_per_unit;
    uint64_t chunks; /* ceil(heads / heads_per_unit) */
    uint64_t units;  /* rows * lanes * chunks: the invocations of the work */
} posenc__gpu_head_split;

posenc__gpu_head_split posenc__gpu_split_heads(uint64_t rows, uint64_t lanes, uint64_t heads,
                                               uint64_t fill_units);

#endif
