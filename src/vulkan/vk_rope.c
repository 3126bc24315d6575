/* SPDX-License-Identifier: MIT */
/* RoPE on Vulkan: q, k and the paged KV cache writes each in their own dispatches of one
 * submission, split where a tensor is larger than one binding may address. Each dispatch runs
 * shaders/rope_blocks.comp where the tensors' heads are whole 16-byte blocks (the common,
 * contiguous layout) and shaders/rope.comp, which takes any strides, elsewhere; the two give the
 * same bits. */
#include "vulkan/vk_internal.h"

#include "posenc_kernel_params.h"

#include "core/op_views.h"

/* The bytes of one block of rope_blocks.comp. */
#define BLOCK_BYTES 16

/* Enough invocations to fill a large GPU: below this, heads are spread over more invocations
 * (each computing its own sin and cos); above it, one invocation rotates every head. */
#define TARGET_INVOCATIONS (UINT64_C(1) << 18)
/* On a CPU device (lavapipe: a few threads of 8 or 16 lanes) more sin and cos cost more than
 * the spread gains, even for one token: every invocation rotates all heads. */
#define CPU_TARGET_INVOCATIONS 1

_Static_assert(sizeof(posenc__rope_push) <= POSENC_VK_PUSH_BYTES, "rope.comp's push constants");

enum { BINDING_OUT = 0, BINDING_IN = 1, BINDING_POSITIONS = 2, BINDING_SLOTS = 4 };
_Static_assert(BINDING_SLOTS < POSENC_VK_BINDINGS && BINDING_SLOTS != POSENC_VK_TABLE_BINDING,
               "rope.comp's bindings");

/* One pass of rope.comp over [batch, tokens, heads]: q or k rotated into its output (or in
 * place), k rotated into k_cache, or v copied into v_cache (no pairs: every dim copied). */
typedef struct rope_pass {
    const posenc__view *in, *out;
    bool in_place;
    bool rotate;  /* false: every dim is copied */
    bool cache;   /* out is a KV cache: each token's row is its slot's */
    posenc_vk_place in_at, out_at;
    const char *in_name, *out_name;
} rope_pass;

typedef struct rope_job {
    const posenc__rope_op *op;
    const rope_pass *pass;
    posenc_vk_kernel kernel;
    uint32_t pairs;      /* rotated per row: rotary_dim / 2, or 0 */
    uint32_t pass_units; /* per row: pass-through dims copied two by two, out of place */
    bool blocks;         /* rope_blocks.comp where a dispatch's windows start on a block */
} rope_job;

/* A stride in kernel elements along a dim the box spans; 0 where the box has one index, so
 * that huge strides of unit dims never reach 32 bits. */
static uint32_t element_stride(int64_t stride_bytes, uint32_t element, int64_t count)
{
    return count > 1 ? (uint32_t)(stride_bytes / element) : 0;
}

static posenc_vk_kernel rope_kernel(const posenc_vk_context *vk, posenc_dtype dtype)
{
    switch (dtype) {
    case POSENC_DTYPE_F16:
        return vk->storage16 ? POSENC__SPIRV_ROPE_F16_S16 : POSENC__SPIRV_ROPE_F16;
    case POSENC_DTYPE_BF16:
        return vk->storage16 ? POSENC__SPIRV_ROPE_BF16_S16 : POSENC__SPIRV_ROPE_BF16;
    default: return POSENC__SPIRV_ROPE_F32;
    }
}

static posenc_vk_kernel rope_blocks_kernel(posenc_dtype dtype)
{
    switch (dtype) {
    case POSENC_DTYPE_F16: return POSENC__SPIRV_ROPE_F16_BLOCKS;
    case POSENC_DTYPE_BF16: return POSENC__SPIRV_ROPE_BF16_BLOCKS;
    default: return POSENC__SPIRV_ROPE_F32_BLOCKS;
    }
}

/* Whether a view's heads are runs of whole 16-byte blocks from its element 0 on: consecutive
 * dims, and every step of the first three dims that have more than one index (the kernels see 0
 * for the others) a multiple of 16 bytes. */
static bool view_in_blocks(const posenc__view *view)
{
    if (view->strides[3] != (int64_t)posenc_dtype_size(view->dtype))
        return false;
    for (int k = 0; k < 3; k++) {
        if (view->shape[k] > 1 && view->strides[k] % BLOCK_BYTES != 0)
            return false;
    }
    return true;
}

/* Whether a pass may run rope_blocks.comp: both views in blocks, and the rotated and
 * pass-through dims whole blocks (each unit E pairs, in either style). */
static bool pass_in_blocks(const posenc__rope_op *op, const rope_pass *pass)
{
    int64_t block_elements = BLOCK_BYTES / (int64_t)posenc_dtype_size(pass->out->dtype);
    int64_t rotated = pass->rotate ? op->rotary_dim : 0;
    int64_t first = pass->rotate ? op->rotary_offset : 0;
    return view_in_blocks(pass->out) && (pass->in_place || view_in_blocks(pass->in)) &&
           op->head_dim % block_elements == 0 && rotated % (2 * block_elements) == 0 &&
           first % block_elements == 0;
}

static posenc_status record_rope(posenc_context *ctx, const posenc_vk_box *box,
                                 const posenc_vk_windows *windows, void *user)
{
    const rope_job *job = user;
    const rope_pass *pass = job->pass;
    const posenc__rope_op *op = job->op;
    const posenc__view *out = pass->out;
    uint32_t e = posenc_vk_element_size(out->dtype);
    int64_t batch = box->count[0], tokens = box->count[1], heads = box->count[2];
    uint64_t rows = (uint64_t)(batch * tokens);
    /* Windows start on 16 bytes: a window's first element is on a block where its view's
     * element 0 is. A view off the grid takes rope.comp. */
    uint32_t block_elements = BLOCK_BYTES / e;
    bool blocks = job->blocks && windows->first[BINDING_OUT] % block_elements == 0 &&
                  windows->first[BINDING_IN] % block_elements == 0;
    posenc_vk_kernel kernel = blocks ? rope_blocks_kernel(out->dtype) : job->kernel;
    /* rope_blocks.comp: E pairs, or one pass-through block, a unit; rope.comp: one pair, or
     * two pass-through dims. */
    uint64_t pass_dims = pass->in_place ? 0 : (uint64_t)op->head_dim - 2 * (uint64_t)job->pairs;
    uint64_t per_row = blocks ? (job->pairs + pass_dims) / block_elements
                              : job->pairs + job->pass_units;

    posenc_vk_context *vk = ctx->backend_state;
    uint64_t target = vk->physical->cpu ? CPU_TARGET_INVOCATIONS : TARGET_INVOCATIONS;
    posenc__gpu_head_split split =
        posenc__gpu_split_heads(rows, per_row, (uint64_t)heads, target);

    const posenc__view *in = pass->in_place ? out : pass->in;
    posenc__rope_push push = {
        .in_offset = windows->first[BINDING_IN],
        .in_stride_batch = element_stride(in->strides[0], e, batch),
        .in_stride_token = element_stride(in->strides[1], e, tokens),
        .in_stride_head = element_stride(in->strides[2], e, heads),
        .in_stride_dim = element_stride(in->strides[3], e, op->head_dim),
        .out_offset = windows->first[BINDING_OUT],
        .out_stride_batch = element_stride(out->strides[0], e, batch),
        .out_stride_token = element_stride(out->strides[1], e, tokens),
        .out_stride_head = element_stride(out->strides[2], e, heads),
        .out_stride_dim = element_stride(out->strides[3], e, op->head_dim),
        .batch = (uint32_t)batch,
        .tokens = (uint32_t)tokens,
        .heads = (uint32_t)heads,
        .heads_per_invocation = (uint32_t)split.heads_per_unit,
        .pairs = job->pairs,
        .head_dim = (uint32_t)op->head_dim,
        .rotary_offset = job->pairs ? op->rotary_offset : 0, /* v's copy: every dim from 0 */
        /* Absent positions: the box's first token is token start[1]; the front end checked
         * that position_offset + tokens - 1 stays an int32. */
        .position_offset = (int32_t)((int64_t)op->position_offset + box->start[1]),
        .flags = (op->style == POSENC_ROPE_GPTJ ? POSENC_ROPE_FLAG_GPTJ : 0u) |
                 (op->inverse ? POSENC_ROPE_FLAG_INVERSE : 0u) |
                 (pass->in_place ? POSENC_ROPE_FLAG_IN_PLACE : 0u),
        .attention_factor = op->attention_factor,
    };
    if (op->has_positions && job->pairs > 0) {
        push.positions_offset = windows->first[BINDING_POSITIONS];
        push.positions_stride_batch =
            op->positions_per_batch ? element_stride(op->positions.strides[2], 4, batch) : 0;
        push.positions_stride_token = element_stride(op->positions.strides[3], 4, tokens);
        push.positions_stride_component =
            element_stride(op->component_stride, 4, op->positions.shape[1]);
        push.flags |= (op->positions.dtype == POSENC_DTYPE_I32 ? POSENC_POSITIONS_I32
                                                               : POSENC_POSITIONS_F32)
                      << POSENC_ROPE_FLAG_POSITIONS_SHIFT;
    }
    if (pass->cache) {
        /* The whole cache is bound (any slot may be hit): its blocks and rows stand in for the
         * output's batch and tokens, and the slots binding's window starts at the box's first
         * token, so that each token finds its own slot however the work was split. */
        push.out_stride_batch = element_stride(out->strides[0], e, out->shape[0]);
        push.out_stride_token = element_stride(out->strides[1], e, out->shape[1]);
        push.slots_offset = windows->first[BINDING_SLOTS];
        push.slots_stride_batch = element_stride(op->slots.strides[2], 4, batch);
        push.slots_stride_token = element_stride(op->slots.strides[3], 4, tokens);
        push.block_size = (uint32_t)out->shape[1];
        /* Below 2^32: the cache fits one binding. */
        push.num_slots = (uint32_t)op->num_slots;
        push.flags |= POSENC_ROPE_FLAG_SLOTS;
    }
    return posenc_vk_dispatch(ctx, kernel, windows, &push, sizeof push, split.units);
}

/* The bytes a view's elements span from its element 0. */
static int64_t view_span(const posenc__view *view, uint32_t element)
{
    int64_t span = element;
    for (int k = 0; k < POSENC_MAX_DIMS; k++)
        span += (view->shape[k] - 1) * view->strides[k];
    return span;
}

/* The bytes of one head of a cache, over every block and row. */
static int64_t cache_head_span(const posenc__view *cache, uint32_t element)
{
    return view_span(cache, element) - (cache->shape[2] - 1) * cache->strides[2];
}

/* One pass: its bindings over [batch, tokens, heads] and the split dispatches. */
static posenc_status rope_pass_record(posenc_context *ctx, const posenc__rope_op *op,
                                      const rope_pass *pass, const posenc_vk_place *positions_at,
                                      const posenc_vk_place *slots_at)
{
    posenc_vk_context *vk = ctx->backend_state;
    const posenc__view *out = pass->out, *in = pass->in;
    uint32_t e = posenc_vk_element_size(out->dtype);
    posenc_vk_binding bindings[POSENC_VK_BINDINGS] = {
        {.place = pass->out_at,
         .strides = {out->strides[0], out->strides[1], out->strides[2]},
         .inner = (op->head_dim - 1) * out->strides[3] + e,
         .element_size = e,
         .name = pass->out_name},
        {.element_size = e, .name = pass->in_name},
        {.element_size = 4, .name = "positions"},
        {.element_size = 4, .name = "frequencies"}, /* the table, bound by posenc_vk_split */
        {.element_size = 4, .name = "slot_mapping"},
    };
    if (pass->cache) {
        /* Any row of the cache may be written: a window spans every block and row of the box's
         * heads, so that only a cache larger than one binding (with one head per window) is
         * UNSUPPORTED, naming it. */
        bindings[BINDING_OUT].strides[0] = 0;
        bindings[BINDING_OUT].strides[1] = 0;
        bindings[BINDING_OUT].inner = cache_head_span(out, e);
        bindings[BINDING_SLOTS].place = *slots_at;
        bindings[BINDING_SLOTS].strides[0] = op->slots.strides[2];
        bindings[BINDING_SLOTS].strides[1] = op->slots.strides[3];
        bindings[BINDING_SLOTS].inner = 4;
    }
    bool blocks = pass_in_blocks(op, pass);
    if (!pass->in_place) {
        bindings[BINDING_IN].place = pass->in_at;
        bindings[BINDING_IN].strides[0] = in->strides[0];
        bindings[BINDING_IN].strides[1] = in->strides[1];
        bindings[BINDING_IN].strides[2] = in->strides[2];
        bindings[BINDING_IN].inner = (op->head_dim - 1) * in->strides[3] + e;
    }
    if (op->has_positions && pass->rotate) {
        bindings[BINDING_POSITIONS].place = *positions_at;
        bindings[BINDING_POSITIONS].strides[0] =
            op->positions_per_batch ? op->positions.strides[2] : 0;
        bindings[BINDING_POSITIONS].strides[1] = op->positions.strides[3];
        /* A cell is one token's components, wherever they lie. */
        bindings[BINDING_POSITIONS].inner =
            (op->positions.shape[1] - 1) * op->component_stride + 4;
    }
    uint32_t pairs = pass->rotate ? op->rotary_dim / 2 : 0;
    rope_job job = {
        .op = op,
        .pass = pass,
        .kernel = rope_kernel(vk, out->dtype),
        .pairs = pairs,
        .pass_units =
            pass->in_place ? 0 : (uint32_t)((op->head_dim - 2 * (int64_t)pairs + 1) / 2),
        .blocks = blocks,
    };
    int64_t shape[3] = {op->batch, op->tokens, out->shape[2]};
    return posenc_vk_split(ctx, bindings, POSENC_VK_BINDINGS, shape, pairs + job.pass_units,
                           (uint64_t)pairs * 16, record_rope, &job);
}

/* Both kernels, as a call may take either for a pass (by where its views lie in memory). */
posenc_status posenc_vk_rope_pipelines(posenc_context *ctx, const posenc__rope_op *op)
{
    VkPipeline pipeline;
    posenc_status status =
        posenc_vk_pipeline(ctx, rope_kernel(ctx->backend_state, op->q.dtype), &pipeline);
    if (status == POSENC_OK)
        status = posenc_vk_pipeline(ctx, rope_blocks_kernel(op->q.dtype), &pipeline);
    return status;
}

/* A cache is bound whole for each head (any slot may be hit): one larger than a binding may
 * address is refused before anything is recorded, so that a caller's command buffer is left as
 * it was. A window starts up to an alignment (the device's, 16 bytes at least) below the head
 * and ends on a word: that much is kept free. */
static posenc_status check_cache(posenc_context *ctx, const posenc__view *cache, const char *name)
{
    posenc_vk_context *vk = ctx->backend_state;
    uint32_t e = posenc_vk_element_size(cache->dtype);
    uint64_t head_span = (uint64_t)cache_head_span(cache, e);
    uint64_t alignment = vk->physical->binding_alignment > 16 ? vk->physical->binding_alignment
                                                              : 16;
    if (head_span + alignment <= vk->binding_limit)
        return POSENC_OK;
    return posenc__fail(ctx, POSENC_UNSUPPORTED,
                        "%s: one head of the cache spans %llu bytes, more than one kernel binding "
                        "may address on this device (%llu bytes); any slot may be written, so "
                        "the cache is bound whole",
                        name, (unsigned long long)head_span,
                        (unsigned long long)vk->binding_limit);
}

posenc_status posenc_vk_rope_record(posenc_context *ctx, const posenc__rope_op *op,
                                    const posenc_vk_place *places)
{
    enum { Q, Q_OUT, K, K_OUT, POSITIONS, SLOTS, K_CACHE, V, V_CACHE };
    if (op->has_k_cache) {
        posenc_status status = check_cache(ctx, &op->k_cache, "k_cache");
        if (status == POSENC_OK && op->has_v)
            status = check_cache(ctx, &op->v_cache, "v_cache");
        if (status != POSENC_OK)
            return status;
    }
    rope_pass q = {
        .in = &op->q,
        .out = op->q_in_place ? &op->q : &op->q_out,
        .in_place = op->q_in_place,
        .rotate = true,
        .in_at = places[Q],
        .out_at = op->q_in_place ? places[Q] : places[Q_OUT],
        .in_name = "q",
        .out_name = op->q_in_place ? "q" : "q_out",
    };
    posenc_status status = rope_pass_record(ctx, op, &q, &places[POSITIONS], NULL);
    if (status == POSENC_OK && op->has_k_cache) {
        /* From k as it is, so before k is rotated in place (posenc_vk_dispatch puts a barrier
         * between the two). */
        rope_pass k_cache = {
            .in = &op->k,
            .out = &op->k_cache,
            .rotate = true,
            .cache = true,
            .in_at = places[K],
            .out_at = places[K_CACHE],
            .in_name = "k",
            .out_name = "k_cache",
        };
        status = rope_pass_record(ctx, op, &k_cache, &places[POSITIONS], &places[SLOTS]);
    }
    if (status == POSENC_OK && op->has_v) {
        rope_pass v_cache = {
            .in = &op->v,
            .out = &op->v_cache,
            .cache = true,
            .in_at = places[V],
            .out_at = places[V_CACHE],
            .in_name = "v",
            .out_name = "v_cache",
        };
        status = rope_pass_record(ctx, op, &v_cache, &places[POSITIONS], &places[SLOTS]);
    }
    if (status == POSENC_OK && op->has_k && op->k_out_written) {
        rope_pass k = {
            .in = &op->k,
            .out = op->k_in_place ? &op->k : &op->k_out,
            .in_place = op->k_in_place,
            .rotate = true,
            .in_at = places[K],
            .out_at = op->k_in_place ? places[K] : places[K_OUT],
            .in_name = "k",
            .out_name = op->k_in_place ? "k" : "k_out",
        };
        status = rope_pass_record(ctx, op, &k, &places[POSITIONS], NULL);
    }
    return status;
}

posenc_status posenc_vk_rope(posenc_context *ctx, const posenc__rope_op *op)
{
    const posenc__view *views[POSENC__ROPE_VIEWS];
    unsigned access[POSENC__ROPE_VIEWS];
    posenc__rope_views(op, views);
    posenc__rope_view_access(op, access);
    posenc_vk_place places[POSENC__ROPE_VIEWS];
    posenc_vk_staging staging;

    posenc_vk_context *vk = ctx->backend_state;
    posenc__mutex_lock(&vk->lock);
    posenc_status status =
        posenc_vk_set_freqs(ctx, op->freqs, op->rotary_dim / 2, op->freqs_id, false);
    if (status == POSENC_OK)
        status = posenc_vk_place_views(ctx, views, access, posenc__rope_view_names,
                                       POSENC__ROPE_VIEWS, places, &staging);
    else
        staging = (posenc_vk_staging){0};
    if (status == POSENC_OK)
        status = posenc_vk_begin(ctx);
    if (status == POSENC_OK)
        status = posenc_vk_rope_record(ctx, op, places);
    if (status == POSENC_OK)
        status = posenc_vk_submit(ctx);
    posenc_vk_unstage(ctx, &staging, status == POSENC_OK);
    posenc__mutex_unlock(&vk->lock);
    return status;
}
