/* SPDX-License-Identifier: MIT */
/* posenc_rope on OpenCL: q, k and the paged KV cache write in one launch of shaders/rope.cl
 * (its header documents the arguments and the work split). */
#include "opencl/cl_internal.h"

#include "posenc_kernel_params.h"

#include "core/op_views.h"

/* Work-groups' worth of units per compute unit that keep a device busy; below it, heads are
 * split over more units (each then computes its own sin/cos). */
#define UNITS_PER_COMPUTE_UNIT_GROUPS 8

/* rope_contiguous.cl's vector width in pairs, and the most pairs a work-item takes. */
#define CONTIGUOUS_PAIRS 8
#define CONTIGUOUS_GROUP_PAIRS 64

/* Whether rope_contiguous.cl applies: a CPU-type device (GPUs keep rope.cl's per-dim lanes,
 * which coalesce and split a decode step's heads over many units), whole blocks of pairs,
 * a dim stride of one element in every tensor, and no pass-through dims to copy. */
static bool contiguous_applies(const posenc_context *ctx, const posenc__rope_op *op)
{
    if (ctx->device->info.type != POSENC_DEVICE_CPU)
        return false;
    uint32_t half = op->rotary_dim / 2;
    if (half == 0 || half % CONTIGUOUS_PAIRS != 0)
        return false;
    bool partial = (int64_t)op->rotary_dim < op->head_dim;
    if (partial && (!op->q_in_place || op->has_k_cache ||
                    (op->has_k && op->k_out_written && !op->k_in_place)))
        return false;
    const posenc__view *views[POSENC__ROPE_VIEWS];
    posenc__rope_views(op, views);
    enum { POSITIONS = 4, SLOTS = 5 };
    for (int i = 0; i < POSENC__ROPE_VIEWS; i++) {
        if (!views[i] || i == POSITIONS || i == SLOTS)
            continue;
        if (views[i]->strides[3] != (int64_t)posenc_dtype_size(views[i]->dtype))
            return false;
    }
    return true;
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

/* Initializers of a tensor's words in POSENC_ROPE_ARGS: offset, strides of batch, token, head
 * and dim. */
#define VIEW_WORDS(name, binding)                                                                 \
    .name##_offset = (binding).offset, .name##_stride_batch = (binding).strides[0],               \
    .name##_stride_token = (binding).strides[1], .name##_stride_head = (binding).strides[2],      \
    .name##_stride_dim = (binding).strides[3]

/* The same for a cache: offset, strides of block, row in the block, head and dim. */
#define CACHE_WORDS(name, binding)                                                                \
    .name##_offset = (binding).offset, .name##_stride_block = (binding).strides[0],               \
    .name##_stride_row = (binding).strides[1], .name##_stride_head = (binding).strides[2],        \
    .name##_stride_dim = (binding).strides[3]

/* A cache that posenc stages must fit one allocation, as it is bound whole. (One in a device
 * buffer already does; past 2^32 elements posenc__gpu_bind refuses it, naming it too.) */
static posenc_status check_cache_size(posenc_context *ctx, const posenc__view *view,
                                      const char *name)
{
    const posenc_cl_context *state = ctx->backend_state;
    if (!view || (view->buffer && posenc_cl_buffer_mem(view->buffer)))
        return POSENC_OK;
    uint64_t bytes = posenc__gpu_view_extent(view);
    if (bytes <= state->device->max_alloc_bytes)
        return POSENC_OK;
    return posenc__fail(ctx, POSENC_UNSUPPORTED,
                        "%s: the cache spans %llu bytes, more than the largest allocation of "
                        "this OpenCL device (%llu bytes); any slot may be written, so the "
                        "cache is bound whole: use a smaller cache",
                        name, (unsigned long long)bytes,
                        (unsigned long long)state->device->max_alloc_bytes);
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
    bool partial = (int64_t)op->rotary_dim < op->head_dim;
    bool copy_q = partial && !op->q_in_place;
    bool copy_k = partial && op->has_k && op->k_out_written && !op->k_in_place;
    /* A cache row is always written out of place: its pass-through dims (and v's) are copied. */
    bool copy_cache = partial && op->has_k_cache;
    uint64_t lanes = half + (copy_q || copy_k || copy_cache
                                 ? (uint64_t)op->head_dim - op->rotary_dim
                                 : 0);
    uint64_t k_heads = op->has_k ? (uint64_t)op->k_heads : 0;
    uint64_t v_heads = op->has_v ? k_heads : 0;
    uint64_t heads = (uint64_t)op->q_heads + k_heads + v_heads;
    uint64_t rows = (uint64_t)op->batch * (uint64_t)op->tokens;

    uint64_t target = (uint64_t)state->device->compute_units * kernel->local_size *
                      UNITS_PER_COMPUTE_UNIT_GROUPS;
    posenc__gpu_head_split split = posenc__gpu_split_heads(rows, lanes, heads, target);
    uint64_t units = split.units;
    if (contiguous) /* a unit per group of pairs of a token, in every head */
        units = rows * ((half + CONTIGUOUS_GROUP_PAIRS - 1) / CONTIGUOUS_GROUP_PAIRS);
    if (units > UINT32_MAX || heads > UINT32_MAX || (uint64_t)op->batch > UINT32_MAX ||
        (uint64_t)op->tokens > UINT32_MAX || (uint64_t)op->head_dim > UINT32_MAX)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "q.shape: %llu rows x %llu heads x %lld dims is more work than one "
                            "OpenCL launch indexes (2^32 units)",
                            (unsigned long long)rows, (unsigned long long)heads,
                            (long long)op->head_dim);

    const posenc__view *views[POSENC__ROPE_VIEWS];
    unsigned access[POSENC__ROPE_VIEWS];
    posenc__rope_views(op, views);
    posenc__rope_view_access(op, access);
    enum { Q, Q_OUT, K, K_OUT, POSITIONS, SLOTS, K_CACHE, V, V_CACHE };
    /* Any slot may be written, so a cache is bound whole, never windowed. */
    status = check_cache_size(ctx, views[K_CACHE], "k_cache");
    if (status == POSENC_OK)
        status = check_cache_size(ctx, views[V_CACHE], "v_cache");
    if (status != POSENC_OK)
        return status;
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

    posenc__rope_args params = {
        VIEW_WORDS(q, b[Q]),
        VIEW_WORDS(qo, b[Q_OUT]),
        VIEW_WORDS(k, b[K]),
        VIEW_WORDS(ko, b[K_OUT]),
        .positions_offset = b[POSITIONS].offset,
        .positions_stride_batch = op->positions_per_batch ? b[POSITIONS].strides[2] : 0,
        .positions_stride_token = b[POSITIONS].strides[3],
        .positions_stride_component = b[POSITIONS].strides[1], /* multimodal kinds */
        .batch = (uint32_t)op->batch,
        .tokens = (uint32_t)op->tokens,
        .q_heads = (uint32_t)op->q_heads,
        .k_heads = (uint32_t)k_heads,
        .rotary_dim = op->rotary_dim,
        .rotary_offset = op->rotary_offset,
        .heads_per_unit = (uint32_t)split.heads_per_unit,
        .lanes = (uint32_t)lanes,
        .position_offset = op->position_offset,
        .flags = (op->style == POSENC_ROPE_GPTJ ? POSENC_ROPE_FLAG_GPTJ : 0u) |
                 (op->inverse ? POSENC_ROPE_FLAG_INVERSE : 0u) |
                 (op->q_in_place ? POSENC_ROPE_FLAG_IN_PLACE : 0u) |
                 (op->has_k && op->k_in_place ? POSENC_ROPE_FLAG_K_IN_PLACE : 0u) |
                 (op->has_k_cache ? POSENC_ROPE_FLAG_K_CACHE : 0u) |
                 (op->has_k && !op->k_out_written ? POSENC_ROPE_FLAG_K_CACHE_ONLY : 0u),
        .attention_factor = op->attention_factor,
        .v_heads = (uint32_t)v_heads,
        .slots_offset = b[SLOTS].offset,
        .slots_stride_batch = b[SLOTS].strides[2],
        .slots_stride_token = b[SLOTS].strides[3],
        /* Bound whole, in fewer than 2^32 elements, a cache has fewer than 2^32 slots. */
        .block_size = op->has_k_cache ? (uint32_t)op->k_cache.shape[1] : 1u,
        .num_slots = op->has_k_cache ? (uint32_t)op->num_slots : 0u,
        CACHE_WORDS(kc, b[K_CACHE]),
        VIEW_WORDS(v, b[V]),
        CACHE_WORDS(vc, b[V_CACHE]),
    };
    if (op->has_positions)
        params.flags |= (op->positions.dtype == POSENC_DTYPE_I32 ? POSENC_POSITIONS_I32
                                                                 : POSENC_POSITIONS_F32)
                        << POSENC_ROPE_FLAG_POSITIONS_SHIFT;

    /* The kernel's buffers: the nine views in their list's order (then the table). */
    return posenc_cl_run(ctx, kernel, units, "rope", b, POSENC__ROPE_VIEWS, freqs, &params,
                         sizeof params, &staging, wait_count, wait_list, event);
}
