/* SPDX-License-Identifier: MIT */
/* Kernel bindings of views and the spreading of RoPE heads over invocations (gpu_plan.h). */
#include "core/gpu_plan.h"

#include "core/gpu_staging.h"

void posenc__gpu_roofline_op(posenc_buffer *buf, uint64_t offset, uint64_t bytes,
                             bool write_only, posenc__view *view, posenc__gpu_op *gpu)
{
    static const char *const names[1] = {"buffer"};
    *view = (posenc__view){
        .buffer = buf,
        .offset = offset,
        .dtype = POSENC_DTYPE_F32,
        .shape = {1, 1, 1, (int64_t)(bytes / 4)},
        .strides = {(int64_t)bytes, (int64_t)bytes, (int64_t)bytes, 4},
    };
    *gpu = (posenc__gpu_op){
        .views = {view},
        .access = {write_only ? POSENC__GPU_WRITE : POSENC__GPU_READ | POSENC__GPU_WRITE},
        .names = names,
        .view_count = 1,
        .what = "roofline",
    };
}

posenc_status posenc__gpu_bind(posenc_context *ctx, const char *backend, const char *name,
                               const posenc__view *view, uint64_t byte_position,
                               uint64_t element_limit, posenc__gpu_binding *binding)
{
    uint64_t element = posenc__dtype_size(view->dtype);
    if (element_limit > POSENC__GPU_ELEMENT_LIMIT)
        element_limit = POSENC__GPU_ELEMENT_LIMIT;
    uint64_t end = (byte_position + posenc__gpu_view_extent(view)) / element;
    if (end > element_limit)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "%s: the view reaches element %llu of its device allocation; %s "
                            "kernels index at most %llu elements",
                            name, (unsigned long long)end, backend,
                            (unsigned long long)element_limit);
    binding->offset = (uint32_t)(byte_position / element);
    for (int k = 0; k < POSENC_MAX_DIMS; k++)
        binding->strides[k] = posenc__gpu_element_stride(view, k, view->shape[k]);
    return POSENC_OK;
}

uint32_t posenc__gpu_element_stride(const posenc__view *view, int dim, int64_t count)
{
    return count > 1 ? (uint32_t)(view->strides[dim] / (int64_t)posenc__dtype_size(view->dtype))
                     : 0;
}

bool posenc__gpu_view_in_blocks(const posenc__view *view, uint32_t block_bytes)
{
    if (view->strides[POSENC_MAX_DIMS - 1] != (int64_t)posenc__dtype_size(view->dtype))
        return false;
    for (int k = 0; k < POSENC_MAX_DIMS - 1; k++) {
        if (view->shape[k] > 1 && view->strides[k] % (int64_t)block_bytes != 0)
            return false;
    }
    return true;
}

posenc_status posenc__gpu_check_units(posenc_context *ctx, const char *backend, const char *name,
                                      const char *shape, uint64_t units, uint64_t largest_size)
{
    if (units <= UINT32_MAX && largest_size <= UINT32_MAX)
        return POSENC_OK;
    return posenc__fail(ctx, POSENC_UNSUPPORTED,
                        "%s: %s is more work than one %s launch indexes (2^32 units)", name,
                        shape, backend);
}

posenc__gpu_head_split posenc__gpu_split_heads(uint64_t rows, uint64_t lanes, uint64_t heads,
                                               uint64_t fill_units)
{
    posenc__gpu_head_split split = {0};
    if (heads == 0 || rows == 0 || lanes == 0)
        return split;
    /* Fewest chunks (most heads sharing one sin/cos) that still fill the device. */
    uint64_t per_chunk = rows * lanes;
    uint64_t chunks = per_chunk >= fill_units ? 1 : (fill_units + per_chunk - 1) / per_chunk;
    if (chunks > heads)
        chunks = heads;
    split.heads_per_unit = (heads + chunks - 1) / chunks;
    split.chunks = (heads + split.heads_per_unit - 1) / split.heads_per_unit;
    split.units = per_chunk * split.chunks;
    return split;
}
