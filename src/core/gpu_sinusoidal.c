/* SPDX-License-Identifier: MIT */
/* The sinusoidal kernels' parameters and layout tests, for every GPU backend
 * (gpu_sinusoidal.h). */
#include "core/gpu_sinusoidal.h"

#include "core/tensor.h"

#include <stdio.h>

/* The layout bits of the flags are posenc_sinusoidal_layout's values. */
_Static_assert(POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED == POSENC_SINUSOIDAL_INTERLEAVED &&
                   POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS == POSENC_SINUSOIDAL_SIN_COS,
               "sinusoidal layouts");

/* The bytes of one block of the block kernels. */
#define BLOCK_BYTES 16

_Static_assert(POSENC__SINUSOIDAL_VIEWS <= POSENC__GPU_MAX_VIEWS, "posenc__gpu_op's views");

void posenc__gpu_sinusoidal_op(posenc_context *ctx, const posenc__sinusoidal_op *op,
                               posenc__gpu_op *gpu)
{
    *gpu = (posenc__gpu_op){.names = posenc__sinusoidal_view_names,
                            .view_count = POSENC__SINUSOIDAL_VIEWS,
                            .what = "sinusoidal",
                            .table = {.freqs = op->freqs, .count = op->half, .id = op->freqs_id}};
    posenc__sinusoidal_views(ctx, op, gpu->views);
    posenc__sinusoidal_view_access(op, gpu->views, gpu->access);
}

bool posenc__gpu_sinusoidal_x_in_out(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    return op->has_x && posenc__views_identical(ctx, &op->out, &op->x);
}

void posenc__gpu_sinusoidal_params(const posenc__sinusoidal_op *op, bool x_in_out,
                                   const posenc__gpu_box *box,
                                   const uint32_t *first,
                                   posenc__sinusoidal_params *params)
{
    enum { OUT, X, POSITIONS };
    int64_t batch = box->count[0], rows = box->count[1];
    const posenc__view *out = &op->out;
    *params = (posenc__sinusoidal_params){
        .out_offset = first[OUT],
        .out_stride_batch = posenc__gpu_element_stride(out, 1, batch),
        .out_stride_row = posenc__gpu_element_stride(out, 2, rows),
        .out_stride_col = posenc__gpu_element_stride(out, 3, op->d_model),
        .batch = (uint32_t)batch,
        .rows = (uint32_t)rows,
        .d_model = (uint32_t)op->d_model,
        /* The box's first row is row start[1]; the front end checked that position_offset +
         * rows - 1 stays an int32. */
        .position_offset = (int32_t)((int64_t)op->position_offset + box->start[1]),
        .flags = (uint32_t)op->layout,
        .input_scale = op->input_scale,
        .output_scale = op->output_scale,
    };
    if (op->has_x) {
        const posenc__view *x = x_in_out ? out : &op->x;
        params->x_offset = first[x_in_out ? OUT : X];
        params->x_stride_batch = posenc__gpu_element_stride(x, 1, batch);
        params->x_stride_row = posenc__gpu_element_stride(x, 2, rows);
        params->x_stride_col = posenc__gpu_element_stride(x, 3, op->d_model);
        params->flags |=
            POSENC_SINUSOIDAL_FLAG_ADD | (x_in_out ? POSENC_SINUSOIDAL_FLAG_X_IN_OUT : 0u);
    }
    if (op->has_positions) {
        params->positions_offset = first[POSITIONS];
        params->positions_stride_batch =
            op->positions_per_batch ? posenc__gpu_element_stride(&op->positions, 2, batch) : 0;
        params->positions_stride_row = posenc__gpu_element_stride(&op->positions, 3, rows);
        params->flags |= (op->positions.dtype == POSENC_DTYPE_I32 ? POSENC_POSITIONS_I32
                                                                  : POSENC_POSITIONS_F32)
                         << POSENC_SINUSOIDAL_FLAG_POSITIONS_SHIFT;
    }
}

/* A row of a [1, batch, rows, d_model] view. */
static posenc__gpu_extent row_extent(const posenc__view *view, int64_t d_model, const char *name)
{
    uint32_t e = (uint32_t)posenc__dtype_size(view->dtype);
    return (posenc__gpu_extent){
        .bound = true,
        .strides = {view->strides[1], view->strides[2], 0},
        .inner = (d_model - 1) * view->strides[3] + e,
        .element_size = e,
        .name = name,
    };
}

void posenc__gpu_sinusoidal_extents(const posenc__sinusoidal_op *op, bool x_in_out,
                                    posenc__gpu_extent extents[POSENC__SINUSOIDAL_VIEWS])
{
    enum { OUT, X, POSITIONS };
    extents[OUT] = row_extent(&op->out, op->d_model, "out");
    extents[X] = row_extent(&op->x, op->d_model, "x");
    extents[X].bound = op->has_x && !x_in_out;
    extents[POSITIONS] = (posenc__gpu_extent){
        .bound = op->has_positions,
        .strides = {op->positions_per_batch ? op->positions.strides[2] : 0,
                    op->positions.strides[3], 0},
        .inner = 4,
        .element_size = 4,
        .name = "positions",
    };
}

bool posenc__gpu_sinusoidal_in_blocks(const posenc__sinusoidal_op *op, bool x_in_out)
{
    uint32_t block_elements = BLOCK_BYTES / (uint32_t)posenc__dtype_size(op->out.dtype);
    return op->d_model % 2 == 0 && op->half > 0 && op->half % block_elements == 0 &&
           posenc__gpu_view_in_blocks(&op->out, BLOCK_BYTES) &&
           (!op->has_x || x_in_out || posenc__gpu_view_in_blocks(&op->x, BLOCK_BYTES));
}

bool posenc__gpu_sinusoidal_contiguous(const posenc__sinusoidal_op *op, uint32_t frequencies)
{
    if (op->half == 0 || op->half % frequencies != 0)
        return false;
    if (op->out.strides[3] != (int64_t)posenc__dtype_size(op->out.dtype))
        return false;
    return !op->has_x || op->x.strides[3] == (int64_t)posenc__dtype_size(op->x.dtype);
}

uint64_t posenc__gpu_sinusoidal_units(const posenc__sinusoidal_op *op, int64_t rows)
{
    return ((uint64_t)op->half + (uint64_t)(op->d_model & 1)) * (uint64_t)rows;
}

posenc_status posenc__gpu_sinusoidal_check_launch(posenc_context *ctx, const char *backend,
                                                  const posenc__sinusoidal_op *op)
{
    char shape[96];
    snprintf(shape, sizeof shape, "%lld x %lld x %lld", (long long)op->batch,
             (long long)op->rows, (long long)op->d_model);
    return posenc__gpu_check_units(ctx, backend, "out.shape", shape,
                                   posenc__gpu_sinusoidal_units(op, op->batch * op->rows),
                                   (uint64_t)op->d_model);
}
