/* SPDX-License-Identifier: MIT */
/* Sinusoidal tables and their addition into embeddings on Vulkan, split by rows where the
 * output is larger than one binding may address. Each dispatch runs sinusoidal_blocks.comp
 * where the rows are whole 16-byte blocks (the common, contiguous layout) and sinusoidal.comp,
 * which takes any strides, elsewhere (both in shaders/); the two give the same bits. */
#include "vulkan/vk_internal.h"

#include "core/gpu_sinusoidal.h"

_Static_assert(sizeof(posenc__sinusoidal_params) <= POSENC_VK_PUSH_BYTES,
               "sinusoidal.comp's push constants");

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
    bool blocks; /* sinusoidal_blocks.comp where a dispatch's windows start on a block */
} sinusoidal_job;

/* sinusoidal.comp for `dtype` (16-bit elements packed in words, or in 16-bit storage), or
 * sinusoidal_blocks.comp. */
static posenc_vk_kernel sinusoidal_kernel(const posenc_vk_context *vk, posenc_dtype dtype,
                                          bool blocks)
{
    static const posenc_vk_kernel kernels[3][3] = {
        {POSENC__SPIRV_SINUSOIDAL_F32, POSENC__SPIRV_SINUSOIDAL_F16,
         POSENC__SPIRV_SINUSOIDAL_BF16},
        {POSENC__SPIRV_SINUSOIDAL_F32, POSENC__SPIRV_SINUSOIDAL_F16_S16,
         POSENC__SPIRV_SINUSOIDAL_BF16_S16},
        {POSENC__SPIRV_SINUSOIDAL_F32_BLOCKS, POSENC__SPIRV_SINUSOIDAL_F16_BLOCKS,
         POSENC__SPIRV_SINUSOIDAL_BF16_BLOCKS},
    };
    int column = dtype == POSENC_DTYPE_F16 ? 1 : dtype == POSENC_DTYPE_BF16 ? 2 : 0;
    return kernels[blocks ? 2 : vk->storage16][column];
}

static posenc_status record_sinusoidal(posenc_context *ctx, const posenc_vk_box *box,
                                       const posenc_vk_windows *windows, void *user)
{
    const sinusoidal_job *job = user;
    const posenc__sinusoidal_op *op = job->op;
    /* Windows start on 16 bytes: a window's first element is on a block where its view's
     * element 0 is. A view off the grid takes sinusoidal.comp. */
    uint32_t block_elements = BLOCK_BYTES / (uint32_t)posenc__dtype_size(op->out.dtype);
    bool blocks = job->blocks && windows->first[BINDING_OUT] % block_elements == 0 &&
                  windows->first[BINDING_X] % block_elements == 0;
    posenc__sinusoidal_params push;
    posenc__gpu_sinusoidal_params(op, job->x_in_out, box, windows->first, &push);
    uint64_t all_rows = (uint64_t)(box->count[0] * box->count[1]);
    uint64_t invocations = posenc__gpu_sinusoidal_units(op, (int64_t)all_rows);
    if (blocks) {
        /* Units of E frequencies, each over runs of rows: as many runs as fill the target. */
        uint64_t units = op->half / block_elements;
        uint64_t target = ctx->device->info.type == POSENC_DEVICE_SOFTWARE
                              ? BLOCKS_CPU_TARGET_INVOCATIONS
                              : BLOCKS_TARGET_INVOCATIONS;
        uint64_t runs = (target + units - 1) / units;
        invocations = units * (runs < all_rows ? runs : all_rows);
    }
    return posenc_vk_dispatch(ctx, sinusoidal_kernel(ctx->backend_state, op->out.dtype, blocks),
                              windows, &push, sizeof push, invocations);
}

static posenc_status sinusoidal_record(posenc_context *ctx, const void *sinusoidal,
                                       const posenc_vk_place *places)
{
    const posenc__sinusoidal_op *op = sinusoidal;
    bool x_in_out = posenc__gpu_sinusoidal_x_in_out(ctx, op);
    posenc__gpu_extent extents[POSENC__SINUSOIDAL_VIEWS];
    posenc__gpu_sinusoidal_extents(op, x_in_out, extents);
    sinusoidal_job job = {
        .op = op,
        .x_in_out = x_in_out,
        .blocks = posenc__gpu_sinusoidal_in_blocks(op, x_in_out),
    };
    int64_t shape[3] = {op->batch, op->rows, 1};
    return posenc_vk_split(ctx, extents, places, POSENC__SINUSOIDAL_VIEWS, shape,
                           posenc__gpu_sinusoidal_units(op, 1), (uint64_t)op->half * 12,
                           record_sinusoidal, &job);
}

posenc_vk_op posenc_vk_sinusoidal_op(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    /* Both kernels, as a call may take either (by where its views lie in memory). */
    posenc_vk_op run = {.kernels = {sinusoidal_kernel(ctx->backend_state, op->out.dtype, false),
                                    sinusoidal_kernel(ctx->backend_state, op->out.dtype, true)},
                        .kernel_count = 2,
                        .record = sinusoidal_record,
                        .op = op};
    posenc__gpu_sinusoidal_op(ctx, op, &run.gpu);
    return run;
}
