/* SPDX-License-Identifier: MIT */
/* Sinusoidal tables and their addition into embeddings on Vulkan, split by rows where the
 * output is larger than one binding may address. Each dispatch runs sinusoidal_blocks.comp
 * where the rows are whole 16-byte blocks (the common, contiguous layout) and sinusoidal.comp,
 * which takes any strides, elsewhere (both in shaders/); the two give the same bits. */
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

/* The bytes of one block of sinusoidal_blocks.comp. */
#define BLOCK_BYTES 16
/* sinusoidal_blocks.comp's invocations: enough to fill a large GPU, each taking a few rows of
 * its frequencies; on a CPU device (a few threads of SIMD lanes) fewer, each taking long runs
 * of rows, whose turns step by one addition from row to row. */
#define BLOCKS_TARGET_INVOCATIONS (UINT64_C(1) << 18)
#define BLOCKS_CPU_TARGET_INVOCATIONS 1024

typedef struct sinusoidal_job {
    const posenc__sinusoidal_op *op;
    bool x_in_out;
    posenc_vk_kernel kernel;
    bool blocks; /* sinusoidal_blocks.comp where a dispatch's windows start on a block */
} sinusoidal_job;

static uint32_t element_stride(int64_t stride_bytes, uint32_t element, int64_t count)
{
    return count > 1 ? (uint32_t)(stride_bytes / element) : 0;
}

static posenc_vk_kernel sinusoidal_blocks_kernel(posenc_dtype dtype)
{
    switch (dtype) {
    case POSENC_DTYPE_F16: return POSENC__SPIRV_SINUSOIDAL_F16_BLOCKS;
    case POSENC_DTYPE_BF16: return POSENC__SPIRV_SINUSOIDAL_BF16_BLOCKS;
    default: return POSENC__SPIRV_SINUSOIDAL_F32_BLOCKS;
    }
}

/* Whether a [1, batch, rows, d_model] view's rows are runs of whole 16-byte blocks from its
 * element 0 on: consecutive columns, and the steps of batch and rows (where they have more
 * than one index; the kernels see 0 for the others) multiples of 16 bytes. */
static bool view_in_blocks(const posenc__view *view)
{
    if (view->strides[3] != (int64_t)posenc_dtype_size(view->dtype))
        return false;
    for (int k = 1; k < 3; k++) {
        if (view->shape[k] > 1 && view->strides[k] % BLOCK_BYTES != 0)
            return false;
    }
    return true;
}

/* Whether sinusoidal_blocks.comp may take the operation: out (and a separate x) in blocks, and
 * d_model/2 frequencies a whole number of E-frequency units. */
static bool sinusoidal_in_blocks(const posenc__sinusoidal_op *op, bool x_in_out)
{
    int64_t block_elements = BLOCK_BYTES / (int64_t)posenc_dtype_size(op->out.dtype);
    return op->d_model % 2 == 0 && op->half > 0 && op->half % block_elements == 0 &&
           view_in_blocks(&op->out) && (!op->has_x || x_in_out || view_in_blocks(&op->x));
}

static posenc_status record_sinusoidal(posenc_context *ctx, const posenc_vk_box *box,
                                       const posenc_vk_windows *windows, void *user)
{
    const sinusoidal_job *job = user;
    const posenc__sinusoidal_op *op = job->op;
    posenc_vk_context *vk = ctx->backend_state;
    uint32_t e = posenc_vk_element_size(op->out.dtype);
    int64_t batch = box->count[0], rows = box->count[1];
    /* Windows start on 16 bytes: a window's first element is on a block where its view's
     * element 0 is. A view off the grid takes sinusoidal.comp. */
    uint32_t block_elements = BLOCK_BYTES / e;
    bool blocks = job->blocks && windows->first[BINDING_OUT] % block_elements == 0 &&
                  windows->first[BINDING_X] % block_elements == 0;
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
    uint64_t all_rows = (uint64_t)(batch * rows);
    if (blocks) {
        /* Units of E frequencies, each over runs of rows: as many runs as fill the target. */
        uint64_t units = op->half / block_elements;
        uint64_t target = vk->physical->cpu ? BLOCKS_CPU_TARGET_INVOCATIONS
                                            : BLOCKS_TARGET_INVOCATIONS;
        uint64_t runs = (target + units - 1) / units;
        runs = runs < all_rows ? runs : all_rows;
        return posenc_vk_dispatch(ctx, sinusoidal_blocks_kernel(op->out.dtype), windows, &push,
                                  sizeof push, units * runs);
    }
    uint64_t units = op->half + (uint64_t)(op->d_model & 1);
    return posenc_vk_dispatch(ctx, job->kernel, windows, &push, sizeof push, units * all_rows);
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

/* Both kernels, as a call may take either (by where its views lie in memory). */
posenc_status posenc_vk_sinusoidal_pipelines(posenc_context *ctx,
                                             const posenc__sinusoidal_op *op)
{
    VkPipeline pipeline;
    posenc_status status =
        posenc_vk_pipeline(ctx, sinusoidal_kernel(ctx->backend_state, op->out.dtype), &pipeline);
    if (status == POSENC_OK)
        status = posenc_vk_pipeline(ctx, sinusoidal_blocks_kernel(op->out.dtype), &pipeline);
    return status;
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
        .op = op,
        .x_in_out = x_in_out,
        .kernel = sinusoidal_kernel(vk, op->out.dtype),
        .blocks = sinusoidal_in_blocks(op, x_in_out),
    };
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
