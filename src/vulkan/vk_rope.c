/* SPDX-License-Identifier: MIT */
/* RoPE on Vulkan: each pass of core/gpu_rope.h (q, k and the paged KV cache writes) in its own
 * dispatches of one submission, its block pushed as the push constants, split where a tensor
 * is larger than one binding may address. Each dispatch runs shaders/rope_blocks.comp where the
 * tensors' heads are whole 16-byte blocks (the common, contiguous layout) and shaders/rope.comp,
 * which takes any strides, elsewhere; the two give the same bits. */
#include "vulkan/vk_internal.h"

#include "core/gpu_rope.h"

/* Enough invocations to fill a large GPU: below this, heads are spread over more invocations
 * (each computing its own sin and cos); above it, one invocation rotates every head. */
#define TARGET_INVOCATIONS (UINT64_C(1) << 18)
/* On a CPU device (lavapipe: a few threads of 8 or 16 lanes) more sin and cos cost more than
 * the spread gains, even for one token: every invocation rotates all heads. */
#define CPU_TARGET_INVOCATIONS 1

_Static_assert(sizeof(posenc__rope_pass) <= POSENC_VK_PUSH_BYTES, "a RoPE pass's push constants");
_Static_assert(POSENC__GPU_ROPE_BINDINGS == POSENC_VK_BINDINGS &&
                   POSENC__GPU_ROPE_BINDING_TABLE == POSENC_VK_TABLE_BINDING,
               "rope.comp's bindings");

typedef struct rope_job {
    const posenc__rope_op *op;
    const posenc__gpu_rope_pass *pass;
    bool blocks; /* rope_blocks.comp where a dispatch's windows start on a block */
} rope_job;

/* Which of a pass's kernels: the QK norm's (none, per head, per token), and rope_blocks.comp's
 * or rope.comp's. */
typedef enum rope_norm { NORM_NONE, NORM_PER_HEAD, NORM_PER_TOKEN } rope_norm;

/* rope.comp for `dtype` (16-bit elements packed in words, or in 16-bit storage), or
 * rope_blocks.comp; each with the QK norm: its variants (rope.comp's takes both forms). */
static posenc_vk_kernel rope_kernel(const posenc_vk_context *vk, posenc_dtype dtype, bool blocks,
                                    rope_norm norm)
{
    static const posenc_vk_kernel kernels[7][3] = {
        {POSENC__SPIRV_ROPE_F32, POSENC__SPIRV_ROPE_F16, POSENC__SPIRV_ROPE_BF16},
        {POSENC__SPIRV_ROPE_F32, POSENC__SPIRV_ROPE_F16_S16, POSENC__SPIRV_ROPE_BF16_S16},
        {POSENC__SPIRV_ROPE_F32_NORM, POSENC__SPIRV_ROPE_F16_NORM, POSENC__SPIRV_ROPE_BF16_NORM},
        {POSENC__SPIRV_ROPE_F32_NORM, POSENC__SPIRV_ROPE_F16_S16_NORM,
         POSENC__SPIRV_ROPE_BF16_S16_NORM},
        {POSENC__SPIRV_ROPE_F32_BLOCKS, POSENC__SPIRV_ROPE_F16_BLOCKS,
         POSENC__SPIRV_ROPE_BF16_BLOCKS},
        {POSENC__SPIRV_ROPE_F32_BLOCKS_NORM, POSENC__SPIRV_ROPE_F16_BLOCKS_NORM,
         POSENC__SPIRV_ROPE_BF16_BLOCKS_NORM},
        {POSENC__SPIRV_ROPE_F32_BLOCKS_TOKEN_NORM, POSENC__SPIRV_ROPE_F16_BLOCKS_TOKEN_NORM,
         POSENC__SPIRV_ROPE_BF16_BLOCKS_TOKEN_NORM},
    };
    int column = dtype == POSENC_DTYPE_F16 ? 1 : dtype == POSENC_DTYPE_BF16 ? 2 : 0;
    int row = blocks ? 4 + (int)norm : 2 * (norm != NORM_NONE) + vk->storage16;
    return kernels[row][column];
}

static rope_norm pass_norm(const posenc__gpu_rope_pass *pass)
{
    return !pass->norm ? NORM_NONE : pass->norm_per_token ? NORM_PER_TOKEN : NORM_PER_HEAD;
}

static posenc_status record_rope(posenc_context *ctx, const posenc_vk_box *box,
                                 const posenc_vk_windows *windows, void *user)
{
    const rope_job *job = user;
    const posenc__gpu_rope_pass *pass = job->pass;
    bool blocks = job->blocks && posenc__gpu_rope_box_in_blocks(pass, windows->first);
    uint64_t target = ctx->device->info.type == POSENC_DEVICE_SOFTWARE ? CPU_TARGET_INVOCATIONS
                                                                        : TARGET_INVOCATIONS;
    posenc__gpu_head_split split;
    posenc_status status =
        posenc__gpu_rope_box_split(ctx, job->op, pass, box, blocks, target, &split);
    if (status != POSENC_OK)
        return status;
    posenc__rope_pass push;
    posenc__gpu_rope_pass_params(job->op, pass, box, windows->first,
                                 (uint32_t)split.heads_per_unit, &push);
    return posenc_vk_dispatch(ctx,
                              rope_kernel(ctx->backend_state, pass->out->dtype, blocks,
                                          pass_norm(pass)),
                              windows, &push, sizeof push, split.units);
}

/* One pass: its bindings over [batch, tokens, heads] and the split dispatches. */
static posenc_status rope_pass_record(posenc_context *ctx, const posenc__rope_op *op,
                                      const posenc__gpu_rope_pass *pass,
                                      const posenc_vk_place *places)
{
    posenc__gpu_extent extents[POSENC__GPU_ROPE_BINDINGS];
    posenc__gpu_rope_pass_extents(op, pass, extents);
    posenc_vk_place bound[POSENC__GPU_ROPE_BINDINGS] = {
        [POSENC__GPU_ROPE_BINDING_OUT] = places[pass->out_index],
        [POSENC__GPU_ROPE_BINDING_IN] = places[pass->in_index],
        [POSENC__GPU_ROPE_BINDING_POSITIONS] = places[POSENC__ROPE_POSITIONS],
        [POSENC__GPU_ROPE_BINDING_SLOTS] = places[POSENC__ROPE_SLOTS],
        [POSENC__GPU_ROPE_BINDING_COS] = places[POSENC__ROPE_COS],
        [POSENC__GPU_ROPE_BINDING_SIN] = places[POSENC__ROPE_SIN],
        [POSENC__GPU_ROPE_BINDING_NORM] = places[pass->norm ? pass->norm_index : 0],
    };
    /* The norm's block kernel needs a head's invocations in one subgroup. */
    const posenc_vk_physical *physical = ((posenc_vk_context *)ctx->backend_state)->physical;
    rope_job job = {
        .op = op,
        .pass = pass,
        .blocks = posenc__gpu_rope_pass_in_blocks(op, pass) &&
                  (!pass->norm || posenc__gpu_rope_norm_lanes(op, pass) <= physical->shuffle_lanes),
    };
    int64_t shape[3] = {op->batch, op->tokens, pass->out->shape[2]};
    return posenc_vk_split(ctx, extents, bound, POSENC__GPU_ROPE_BINDINGS, shape,
                           posenc__gpu_rope_row_units(op, pass, false),
                           posenc__gpu_rope_table_bytes(op, pass), record_rope, &job);
}

static posenc_status rope_record(posenc_context *ctx, const void *rope,
                                 const posenc_vk_place *places)
{
    const posenc__rope_op *op = rope;
    /* A cache is bound whole for each head (any slot may be hit): one larger than a binding
     * may address is refused before anything is recorded, so that a caller's command buffer is
     * left as it was. A window starts up to an alignment (the device's, 16 bytes at least)
     * below the head and ends on a word: that much is kept free. */
    posenc_vk_context *vk = ctx->backend_state;
    uint64_t alignment =
        vk->physical->binding_alignment > 16 ? vk->physical->binding_alignment : 16;
    posenc_status status = posenc__gpu_rope_check_caches(
        ctx, op, true, false, alignment, vk->binding_limit,
        "one kernel binding may address on this device");
    if (status == POSENC_OK)
        status = posenc__gpu_rope_check_norm_rows(ctx, op, alignment, vk->binding_limit);
    posenc__gpu_rope_pass passes[POSENC_ROPE_PASSES];
    uint32_t count = posenc__gpu_rope_passes(op, passes);
    /* posenc_vk_dispatch puts a barrier between passes that touch the same memory (k read
     * into its cache, then rotated in place). */
    for (uint32_t i = 0; i < count && status == POSENC_OK; i++)
        status = rope_pass_record(ctx, op, &passes[i], places);
    return status;
}

posenc_vk_op posenc_vk_rope_op(posenc_context *ctx, const posenc__rope_op *op)
{
    /* Both kernels, as a call may take either for a pass (by where its views lie in memory);
     * with cos/sin tables only the generic one; with a QK norm their norm variants too, for the
     * passes that normalize (v's copy and an unnormalized k take the plain ones). */
    posenc_vk_context *vk = ctx->backend_state;
    bool blocks = !op->has_tables;
    posenc_vk_op run = {
        .kernels = {rope_kernel(vk, op->q.dtype, false, NORM_NONE),
                    rope_kernel(vk, op->q.dtype, blocks, NORM_NONE)},
        .kernel_count = 2,
        .record = rope_record,
        .op = op};
    bool per_head = (op->has_q_norm && !op->q_norm_per_token) ||
                    (op->has_k_norm && !op->k_norm_per_token);
    bool per_token = (op->has_q_norm && op->q_norm_per_token) ||
                     (op->has_k_norm && op->k_norm_per_token);
    if (per_head || per_token)
        run.kernels[run.kernel_count++] = rope_kernel(vk, op->q.dtype, false, NORM_PER_HEAD);
    if (per_head && blocks)
        run.kernels[run.kernel_count++] = rope_kernel(vk, op->q.dtype, true, NORM_PER_HEAD);
    if (per_token && blocks)
        run.kernels[run.kernel_count++] = rope_kernel(vk, op->q.dtype, true, NORM_PER_TOKEN);
    posenc__gpu_rope_op(op, &run.gpu);
    return run;
}
