/* SPDX-License-Identifier: MIT */
/* posenc_rope on OpenCL: q and k in one launch of shaders/rope.cl (its header documents the
 * arguments and the work split). */
#include "opencl/cl_internal.h"

#define FLAG_GPTJ 1u
#define FLAG_POSITIONS_I32 (1u << 1)
#define FLAG_POSITIONS_F32 (2u << 1)
#define FLAG_INVERSE 8u
#define FLAG_COPY_Q 16u
#define FLAG_COPY_K 32u

/* Work-groups' worth of units per compute unit that keep a device busy; below it, heads are
 * split over more units (each then computes its own sin/cos). */
#define UNITS_PER_COMPUTE_UNIT_GROUPS 8

static posenc_cl_kernel_id kernel_for(posenc_dtype dtype)
{
    switch (dtype) {
    case POSENC_DTYPE_F16: return POSENC_CL_ROPE_F16;
    case POSENC_DTYPE_BF16: return POSENC_CL_ROPE_BF16;
    default: return POSENC_CL_ROPE_F32;
    }
}

static void arg_view(posenc_cl_args *args, const posenc_cl_binding *binding)
{
    posenc_cl_arg_u32(args, binding->offset);
    for (int k = 0; k < POSENC_MAX_DIMS; k++)
        posenc_cl_arg_u32(args, binding->strides[k]);
}

posenc_status posenc_cl_rope_run(posenc_context *ctx, const posenc__rope_op *op,
                                 cl_uint wait_count, const cl_event *wait_list, cl_event *event)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_kernel *kernel = NULL;
    posenc_status status = posenc_cl_kernel_get(ctx, kernel_for(op->q.dtype), &kernel);
    if (status != POSENC_OK)
        return status;

    uint64_t half = op->rotary_dim / 2;
    bool partial = (int64_t)op->rotary_dim < op->head_dim;
    bool copy_q = partial && !op->q_in_place;
    bool copy_k = partial && op->has_k && !op->k_in_place;
    uint64_t lanes = half + (copy_q || copy_k ? (uint64_t)op->head_dim - op->rotary_dim : 0);
    uint64_t k_heads = op->has_k ? (uint64_t)op->k_heads : 0;
    uint64_t heads = (uint64_t)op->q_heads + k_heads;
    uint64_t rows = (uint64_t)op->batch * (uint64_t)op->tokens;

    uint64_t target = (uint64_t)state->device->compute_units * kernel->local_size *
                      UNITS_PER_COMPUTE_UNIT_GROUPS;
    posenc__gpu_head_split split = posenc__gpu_split_heads(rows, lanes, heads, target);
    uint64_t units = split.units;
    if (units > UINT32_MAX || heads > UINT32_MAX || (uint64_t)op->batch > UINT32_MAX ||
        (uint64_t)op->tokens > UINT32_MAX || (uint64_t)op->head_dim > UINT32_MAX)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "q.shape: %llu rows x %llu heads x %lld dims is more work than one "
                            "OpenCL launch indexes (2^32 units)",
                            (unsigned long long)rows, (unsigned long long)heads,
                            (long long)op->head_dim);

    posenc_cl_binding q, q_out, k, k_out, positions;
    posenc_cl_staging staging = {0};
    posenc_cl_stage_add(&staging, &op->q, "q", POSENC__GPU_READ, &q);
    posenc_cl_stage_add(&staging, &op->q_out, "q_out", POSENC__GPU_WRITE, &q_out);
    if (op->has_k) {
        posenc_cl_stage_add(&staging, &op->k, "k", POSENC__GPU_READ, &k);
        posenc_cl_stage_add(&staging, &op->k_out, "k_out", POSENC__GPU_WRITE, &k_out);
    }
    if (op->has_positions)
        posenc_cl_stage_add(&staging, &op->positions, "positions", POSENC__GPU_READ, &positions);
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
    if (!op->has_k)
        k = k_out = q;
    if (!op->has_positions) /* an unused argument still needs a buffer */
        positions = (posenc_cl_binding){.mem = freqs};

    uint32_t flags = (op->style == POSENC_ROPE_GPTJ ? FLAG_GPTJ : 0u) |
                     (op->inverse ? FLAG_INVERSE : 0u) | (copy_q ? FLAG_COPY_Q : 0u) |
                     (copy_k ? FLAG_COPY_K : 0u);
    if (op->has_positions)
        flags |= op->positions.dtype == POSENC_DTYPE_I32 ? FLAG_POSITIONS_I32 : FLAG_POSITIONS_F32;

    posenc_cl_args args = {.kernel = kernel->kernel};
    posenc_cl_arg_mem(&args, q.mem);
    posenc_cl_arg_mem(&args, q_out.mem);
    posenc_cl_arg_mem(&args, k.mem);
    posenc_cl_arg_mem(&args, k_out.mem);
    posenc_cl_arg_mem(&args, positions.mem);
    posenc_cl_arg_mem(&args, freqs);
    arg_view(&args, &q);
    arg_view(&args, &q_out);
    arg_view(&args, &k);
    arg_view(&args, &k_out);
    posenc_cl_arg_u32(&args, positions.offset);
    posenc_cl_arg_u32(&args, op->positions_per_batch ? positions.strides[2] : 0);
    posenc_cl_arg_u32(&args, positions.strides[3]);
    posenc_cl_arg_u32(&args, positions.strides[1]); /* the components (multimodal kinds) */
    posenc_cl_arg_u32(&args, (uint32_t)op->batch);
    posenc_cl_arg_u32(&args, (uint32_t)op->tokens);
    posenc_cl_arg_u32(&args, (uint32_t)op->q_heads);
    posenc_cl_arg_u32(&args, (uint32_t)k_heads);
    posenc_cl_arg_u32(&args, op->rotary_dim);
    posenc_cl_arg_u32(&args, (uint32_t)split.heads_per_unit);
    posenc_cl_arg_u32(&args, (uint32_t)lanes);
    posenc_cl_arg_i32(&args, op->position_offset);
    posenc_cl_arg_u32(&args, flags);
    posenc_cl_arg_f32(&args, op->attention_factor);
    if (args.error != CL_SUCCESS) {
        posenc_cl_stage_release(ctx, &staging);
        return posenc_cl_fail(ctx, args.error, "rope", "clSetKernelArg");
    }

    if (event) /* left running: the caller waits for *event */
        return posenc_cl_launch(ctx, kernel, units, "rope", wait_count, wait_list, event);
    cl_event done = NULL;
    status = posenc_cl_launch(ctx, kernel, units, "rope", wait_count, wait_list, &done);
    if (status == POSENC_OK) {
        status = posenc_cl_stage_out(ctx, &staging, done);
        state->cl->ReleaseEvent(done);
    }
    posenc_cl_stage_release(ctx, &staging); /* when the launch failed */
    posenc_cl_stage_trim(ctx);
    return status;
}
