/* SPDX-License-Identifier: MIT */
/* Sinusoidal tables and their addition into embeddings on Vulkan (shaders/sinusoidal.comp),
 * split by rows where the output is larger than one binding may address. */
#include "vulkan/vk_internal.h"

#include "posenc_kernel_params.h"

#include "core/op_views.h"
#include "core/tensor.h"

_Static_assert(sizeof(posenc__sinusoidal_params) <= POSENC_VK_PUSH_BYTES,
               "sinusoidal.comp's push constants");
/* The layout bits of the flags are posenc_sinusoidal_layout's values. */
_Static_assert(POSENC_SINUSOIDAL_FLAG_LAYOUT_INTERLEAVED == POSENC_SINUSOIDAL_INTERLEAVED &&
                   POSENC_SINUSOIDAL_FLAG_LAYOUT_SIN_COS == POSENC_SINUSOIDAL_SIN_COS,
               "sinusoidal layouts");

enum { BINDING_OUT = 0, BINDING_X = 1, BINDING_POSITIONS = 2 };

typedef struct sinusoidal_job {
    const posenc__sinusoidal_op *op;
    bool x_in_out;
    posenc_vk_kernel kernel;
} sinusoidal_job;

static uint32_t element_stride(int64_t stride_bytes, uint32_t element, int64_t count)
{
    return count > 1 ? (uint32_t)(stride_bytes / element) : 0;
}

static posenc_status record_sinusoidal(posenc_context *ctx, const posenc_vk_box *box,
                                       const posenc_vk_windows *windows, void *user)
{
    const sinusoidal_job *job = user;
    const posenc__sinusoidal_op *op = job->op;
    uint32_t e = posenc_vk_element_size(op->out.dtype);
    int64_t batch = box->count[0], rows = box->count[1];
    posenc__sinusoidal_params push = {
        .out_offset = windows->first[BINDING_OUT],
        .out_stride_batch = element_stride(op->out.strides[1], e, batch),
        .out_stride_row = element_stride(op->out.strides[2], e, rows),
        .out_stride_col = element_stride(op->out.strides[3], e, op->d_model),
        .batch = (uint32_t)batch,
        .rows = (uint32_t)rows,
        .d_model = (uint32_t)op->d_model,
        .position_offset = (int32_t)((int64_t)op->position_offset + box->start[1]),
        .flags = (uint32_t)op->layout,
        .input_scale = op->input_scale,
        .output_scale = op->output_scale,
    };
    if (op->has_x) {
        const posenc__view *x = job->x_in_out ? &op->out : &op->x;
        push.x_offset = windows->first[job->x_in_out ? BINDING_OUT : BINDING_X];
        push.x_stride_batch = element_stride(x->strides[1], e, batch);
        push.x_stride_row = element_stride(x->strides[2], e, rows);
        push.x_stride_col = element_stride(x->strides[3], e, op->d_model);
        push.flags |= POSENC_SINUSOIDAL_FLAG_ADD |
                      (job->x_in_out ? POSENC_SINUSOIDAL_FLAG_X_IN_OUT : 0u);
    }
    if (op->has_positions) {
        push.positions_offset = windows->first[BINDING_POSITIONS];
        push.positions_stride_batch =
            op->positions_per_batch ? element_stride(op->positions.strides[2], 4, batch) : 0;
        push.positions_stride_row = element_stride(op->positions.strides[3], 4, rows);
        push.flags |= (op->positions.dtype == POSENC_DTYPE_I32 ? POSENC_POSITIONS_I32
                                                               : POSENC_POSITIONS_F32)
                      << POSENC_SINUSOIDAL_FLAG_POSITIONS_SHIFT;
    }
    uint64_t units = op->half + (uint64_t)(op->d_model & 1);
    return posenc_vk_dispatch(ctx, job->kernel, windows, &push, sizeof push,
                              units * (uint64_t)(batch * rows));
}

static posenc_vk_kernel sinusoidal_kernel(const posenc_vk_context *vk, posenc_dtype dtype)
{
    switch (dtype) {
    case POSENC_DTYPE_F16:
        return vk->storage16 ? POSENC__SPIRV_SINUSOIDAL_F16_S16 : POSENC__SPIRV_SINUSOIDAL_F16;
    case POSENC_DTYPE_BF16:
        return vk->storage16 ? POSENC__SPIRV_SINUSOIDAL_BF16_S16 : POSENC__SPIRV_SINUSOIDAL_BF16;
    default: return POSENC__SPIRV_SINUSOIDAL_F32;
    }
}

posenc_status posenc_vk_sinusoidal_pipelines(posenc_context *ctx,
                                             const posenc__sinusoidal_op *op)
{
    VkPipeline pipeline;
    return posenc_vk_pipeline(ctx, sinusoidal_kernel(ctx->backend_state, op->out.dtype),
                              &pipeline);
}

posenc_status posenc_vk_sinusoidal_record(posenc_context *ctx, const posenc__sinusoidal_op *op,
                                          const posenc_vk_place *places)
{
    posenc_vk_context *vk = ctx->backend_state;
    enum { OUT, X, POSITIONS };
    bool x_in_out = op->has_x && posenc__views_identical(ctx, &op->out, &op->x);
    uint32_t e = posenc_vk_element_size(op->out.dtype);
    posenc_vk_binding bindings[3] = {
        {.place = places[OUT],
         .strides = {op->out.strides[1], op->out.strides[2], 0},
         .inner = (op->d_model - 1) * op->out.strides[3] + e,
         .element_size = e,
         .name = "out"},
        {.place = x_in_out ? (posenc_vk_place){0} : places[X],
         .strides = {op->x.strides[1], op->x.strides[2], 0},
         .inner = (op->d_model - 1) * op->x.strides[3] + e,
         .element_size = e,
         .name = "x"},
        {.place = places[POSITIONS],
         .strides = {op->positions_per_batch ? op->positions.strides[2] : 0,
                     op->positions.strides[3], 0},
         .inner = 4,
         .element_size = 4,
         .name = "positions"},
    };
    sinusoidal_job job = {
        .op = op, .x_in_out = x_in_out, .kernel = sinusoidal_kernel(vk, op->out.dtype)};
    int64_t shape[3] = {op->batch, op->rows, 1};
    return posenc_vk_split(ctx, bindings, 3, shape, op->half + (uint64_t)(op->d_model & 1),
                           (uint64_t)op->half * 12, record_sinusoidal, &job);
}

posenc_status posenc_vk_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    posenc_vk_context *vk = ctx->backend_state;
    const posenc__view *views[POSENC__SINUSOIDAL_VIEWS];
    unsigned access[POSENC__SINUSOIDAL_VIEWS];
    posenc__sinusoidal_views(ctx, op, views);
    posenc__sinusoidal_view_access(op, views, access);
    posenc_vk_place places[POSENC__SINUSOIDAL_VIEWS];
    posenc_vk_staging staging = {0};

    posenc__mutex_lock(&vk->lock);
    posenc_status status =
        posenc_vk_set_freqs(ctx, op->freqs, op->half, op->freqs_id, false);
    if (status == POSENC_OK)
        status = posenc_vk_place_views(ctx, views, access, posenc__sinusoidal_view_names,
                                       POSENC__SINUSOIDAL_VIEWS, places, &staging);
    if (status == POSENC_OK)
        status = posenc_vk_begin(ctx);
    if (status == POSENC_OK)
        status = posenc_vk_sinusoidal_record(ctx, op, places);
    if (status == POSENC_OK)
        status = posenc_vk_submit(ctx);
    posenc_vk_unstage(ctx, &staging, status == POSENC_OK);
    posenc__mutex_unlock(&vk->lock);
    return status;
}
