/* SPDX-License-Identifier: MIT */
/* posenc_rope on OpenCL: every pass of core/gpu_rope.h (q, k and the paged KV cache writes) in
 * one launch of shaders/rope.cl, the passes' blocks as its struct arguments (its header
 * documents the arguments and the work split). */
#include "opencl/cl_internal.h"

#include "core/gpu_rope.h"

/* Work-groups' worth of units per compute unit that keep a device busy; below it, heads are
 * split over more units (each then computes its own sin/cos). */
#define UNITS_PER_COMPUTE_UNIT_GROUPS 8

/* rope_contiguous.cl's vector width in pairs, and the most pairs a work-item takes. */
#define CONTIGUOUS_PAIRS 8
#define CONTIGUOUS_GROUP_PAIRS 64

/* Whether rope_contiguous.cl applies: a CPU-type device (GPUs keep rope.cl's per-dim lanes,
 * which coalesce and split a decode step's heads over many units) and a layout it takes. */
static bool contiguous_applies(const posenc_context *ctx, const posenc__rope_op *op)
{
    return ctx->device->info.type == POSENC_DEVICE_CPU &&
           posenc__gpu_rope_contiguous(op, CONTIGUOUS_PAIRS);
}

static posenc_status rope_launch(posenc_context *ctx, const posenc_cl_op *run,
                                 const posenc_cl_kernel *kernel, cl_uint wait_count,
                                 const cl_event *wait_list, cl_event *event)
{
    const posenc__rope_op *op = run->op;
    uint64_t half = op->rotary_dim / 2;
    uint64_t lanes = posenc__gpu_rope_fused_lanes(op);
    uint64_t heads = posenc__gpu_rope_fused_heads(op);
    uint64_t rows = (uint64_t)op->batch * (uint64_t)op->tokens;
    uint64_t target = (uint64_t)ctx->device->info.compute_units * kernel->local_size *
                      UNITS_PER_COMPUTE_UNIT_GROUPS;
    posenc__gpu_head_split split = posenc__gpu_split_heads(rows, lanes, heads, target);
    uint64_t units = split.units;
    bool norm = op->has_q_norm || op->has_k_norm;
    if (contiguous_applies(ctx, op)) /* a unit per group of pairs of a token, in every head */
        units = norm ? rows /* every pair of the row a unit */
                     : rows * ((half + CONTIGUOUS_GROUP_PAIRS - 1) / CONTIGUOUS_GROUP_PAIRS);
    else if (norm) { /* whole heads a unit (rope_norm.cl) */
        split = posenc__gpu_rope_norm_split(rows, 1, heads, target);
        units = rows * posenc__gpu_rope_normed_units(op, split.heads_per_unit);
    }
    posenc_status status = posenc__gpu_rope_check_launch(ctx, "OpenCL", op, units);
    /* Any slot may be written, so a cache is bound whole, never windowed: a staged one must
     * fit one allocation. (One in a device buffer already does; past 2^32 elements
     * posenc__gpu_bind refuses it, naming it too.) */
    if (status == POSENC_OK)
        status = posenc__gpu_rope_check_caches(ctx, op, false, true, 0,
                                               ctx->device->info.max_buffer_bytes,
                                               "the largest allocation of this OpenCL device");
    posenc_cl_binding b[POSENC__ROPE_VIEWS];
    posenc_cl_staging staging = {0};
    cl_mem freqs = NULL;
    if (status == POSENC_OK)
        status = posenc_cl_stage_op(ctx, run, event != NULL, b, &staging, &freqs);
    if (status != POSENC_OK)
        return status;
    uint32_t offsets[POSENC__ROPE_VIEWS];
    for (int i = 0; i < POSENC__ROPE_VIEWS; i++)
        offsets[i] = b[i].offset;
    posenc__rope_pass params[POSENC_ROPE_PASSES];
    posenc__gpu_rope_launch_params(op, offsets, (uint32_t)split.heads_per_unit, params);

    /* The kernel's buffers: the thirteen views in their list's order (then the table). */
    return posenc_cl_run(ctx, kernel, units, "rope", b, POSENC__ROPE_VIEWS, freqs, params,
                         sizeof params, sizeof params[0], &staging, wait_count, wait_list,
                         event);
}

/* The kernel: by q's dtype, and on CPU-type devices the contiguous variant (with the QK norm,
 * its own) where the layout allows it. */
static posenc__cl_id rope_kernel(const posenc_context *ctx, const posenc__rope_op *op)
{
    static const posenc__cl_id kernels[3][3] = {
        {POSENC__CL_ROPE_F32, POSENC__CL_ROPE_F16, POSENC__CL_ROPE_BF16},
        {POSENC__CL_ROPE_CONTIGUOUS_F32, POSENC__CL_ROPE_CONTIGUOUS_F16,
         POSENC__CL_ROPE_CONTIGUOUS_BF16},
        {POSENC__CL_ROPE_CONTIGUOUS_NORM_F32, POSENC__CL_ROPE_CONTIGUOUS_NORM_F16,
         POSENC__CL_ROPE_CONTIGUOUS_NORM_BF16},
    };
    int column = op->q.dtype == POSENC_DTYPE_F16 ? 1 : op->q.dtype == POSENC_DTYPE_BF16 ? 2 : 0;
    int row = !contiguous_applies(ctx, op) ? 0 : op->has_q_norm || op->has_k_norm ? 2 : 1;
    return kernels[row][column];
}

posenc_cl_op posenc_cl_rope_op(const posenc_context *ctx, const posenc__rope_op *op)
{
    posenc_cl_op run = {.kernel = rope_kernel(ctx, op), .launch = rope_launch, .op = op};
    posenc__gpu_rope_op(op, &run.gpu);
    return run;
}
