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

posenc__cl_id posenc_cl_rope_kernel_id(const posenc_context *ctx, const posenc__rope_op *op)
{
    bool contiguous = contiguous_applies(ctx, op);
    switch (op->q.dtype) {
    case POSENC_DTYPE_F16: return contiguous ? POSENC__CL_ROPE_CONTIGUOUS_F16 : POSENC__CL_ROPE_F16;
    case POSENC_DTYPE_BF16:
        return contiguous ? POSENC__CL_ROPE_CONTIGUOUS_BF16 : POSENC__CL_ROPE_BF16;
    default: return contiguous ? POSENC__CL_ROPE_CONTIGUOUS_F32 : POSENC__CL_ROPE_F32;
    }
}

posenc_status posenc_cl_rope_run(posenc_context *ctx, const posenc__rope_op *op,
                                 cl_uint wait_count, const cl_event *wait_list, cl_event *event)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_kernel *kernel = NULL;
    bool contiguous = contiguous_applies(ctx, op);
    posenc_status status = posenc_cl_kernel_get(ctx, posenc_cl_rope_kernel_id(ctx, op), &kernel);
    if (status != POSENC_OK)
        return status;

    uint64_t half = op->rotary_dim / 2;
    uint64_t lanes = posenc__gpu_rope_fused_lanes(op);
    uint64_t heads = posenc__gpu_rope_fused_heads(op);
    uint64_t rows = (uint64_t)op->batch * (uint64_t)op->tokens;
    uint64_t target = (uint64_t)state->device->compute_units * kernel->local_size *
                      UNITS_PER_COMPUTE_UNIT_GROUPS;
    posenc__gpu_head_split split = posenc__gpu_split_heads(rows, lanes, heads, target);
    uint64_t units = split.units;
    if (contiguous) /* a unit per group of pairs of a token, in every head */
        units = rows * ((half + CONTIGUOUS_GROUP_PAIRS - 1) / CONTIGUOUS_GROUP_PAIRS);
    status = posenc__gpu_rope_check_launch(ctx, "OpenCL", op, units);
    /* Any slot may be written, so a cache is bound whole, never windowed: a staged one must
     * fit one allocation. (One in a device buffer already does; past 2^32 elements
     * posenc__gpu_bind refuses it, naming it too.) */
    if (status == POSENC_OK)
        status = posenc__gpu_rope_check_caches(ctx, op, false, true, 0,
                                               state->device->max_alloc_bytes,
                                               "the largest allocation of this OpenCL device");
    if (status != POSENC_OK)
        return status;

    const posenc__view *views[POSENC__ROPE_VIEWS];
    unsigned access[POSENC__ROPE_VIEWS];
    posenc__rope_views(op, views);
    posenc__rope_view_access(op, access);
    enum { Q, Q_OUT, K, K_OUT, POSITIONS, SLOTS, K_CACHE, V, V_CACHE };
    posenc_cl_binding b[POSENC__ROPE_VIEWS];
    posenc_cl_staging staging = {0};
    posenc_cl_stage_views(&staging, views, access, posenc__rope_view_names, POSENC__ROPE_VIEWS,
                          b);
    status = posenc_cl_stage_in(ctx, &staging);
    if (status == POSENC_OK && event && posenc__gpu_stage_has_host(&staging.plan))
        status = posenc__fail(ctx, POSENC_INTERNAL, "rope: host memory in work left running");
    cl_mem freqs = NULL;
    if (status == POSENC_OK)
        status = posenc_cl_freqs_get(ctx, op->freqs, (uint32_t)half, op->freqs_id, "rope",
                                     &freqs);
    if (status != POSENC_OK) {
        posenc_cl_stage_release(ctx, &staging);
        return status;
    }
    /* Outputs in place are their inputs; unused arguments still need a buffer: q for the
     * writable ones (never written), the table for the others. */
    if (op->q_in_place)
        b[Q_OUT] = b[Q];
    if (!op->has_k)
        b[K] = b[K_OUT] = b[Q];
    else if (op->k_in_place || !op->k_out_written)
        b[K_OUT] = b[K];
    if (!op->has_positions)
        b[POSITIONS] = (posenc_cl_binding){.mem = freqs};
    if (!op->has_k_cache) {
        b[SLOTS] = (posenc_cl_binding){.mem = freqs};
        b[K_CACHE] = (posenc_cl_binding){.mem = b[Q].mem};
    }
    if (!op->has_v) {
        b[V] = (posenc_cl_binding){.mem = freqs};
        b[V_CACHE] = (posenc_cl_binding){.mem = b[Q].mem};
    }

    uint32_t offsets[POSENC__ROPE_VIEWS];
    for (int i = 0; i < POSENC__ROPE_VIEWS; i++)
        offsets[i] = b[i].offset;
    posenc__rope_pass params[POSENC_ROPE_PASSES];
    posenc__gpu_rope_launch_params(op, offsets, (uint32_t)split.heads_per_unit, params);

    /* The kernel's buffers: the nine views in their list's order (then the table). */
    return posenc_cl_run(ctx, kernel, units, "rope", b, POSENC__ROPE_VIEWS, freqs, params,
                         sizeof params, sizeof params[0], &staging, wait_count, wait_list,
                         event);
}
