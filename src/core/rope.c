/* SPDX-License-Identifier: MIT */
/* posenc_rope: defaults, validation and resolution of the descriptor, then the backend call.
 * Backends receive a posenc__rope_op they can trust. */
#include "backend.h"
#include "core/frequencies.h"
#include "core/rope_cache.h"
#include "core/rope_memo.h"
#include "core/rope_norm.h"
#include "core/rope_tables.h"
#include "core/scaling.h"
#include "core/tensor.h"

/* Batch, tokens and head_dim: the dims q and k must share. */
#define SHARED_DIMS ((1u << 0) | (1u << 1) | (1u << 3))
#define ALL_DIMS 0xfu

/* A 2-D view is [tokens, head_dim] (one head), not the right-aligned [heads, head_dim]. */
static posenc_status resolve_qk_view(posenc_context *ctx, const posenc_tensor *tensor,
                                     const char *name, posenc_dtype default_dtype,
                                     posenc__view *view)
{
    posenc_status status = posenc__resolve_view(ctx, tensor, name, POSENC_MAX_DIMS, default_dtype,
                                                POSENC__FLOAT_DTYPES, view);
    if (status == POSENC_OK && tensor->ndim == 2) {
        view->shape[1] = view->shape[2];
        view->strides[1] = view->strides[2];
        view->shape[2] = 1;
    }
    return status;
}

/* Resolves an output that may be absent (then it is the input itself: in place). */
static posenc_status resolve_output(posenc_context *ctx, const posenc_tensor *tensor,
                                    const char *name, const posenc__view *input,
                                    const char *input_name,
                                    posenc__view *out, bool *in_place)
{
    if (posenc__tensor_absent(tensor)) {
        *out = *input;
        *in_place = true;
        return posenc__check_output_distinct(ctx, out, input_name);
    }
    posenc_status status = resolve_qk_view(ctx, tensor, name, input->dtype, out);
    if (status != POSENC_OK)
        return status;
    if (out->dtype != input->dtype)
        return posenc__fail(ctx, POSENC_INVALID_DTYPE, "%s.dtype: %s does not match %s's %s",
                            name, posenc_dtype_name(out->dtype), input_name,
                            posenc_dtype_name(input->dtype));
    status = posenc__check_same_dims(ctx, out, tensor->ndim, name, input, input_name, ALL_DIMS);
    if (status != POSENC_OK)
        return status;
    status = posenc__check_output_distinct(ctx, out, name);
    if (status != POSENC_OK)
        return status;
    *in_place = posenc__views_identical(ctx, out, input);
    if (!*in_place)
        return posenc__check_disjoint(ctx, out, name, input, input_name);
    return POSENC_OK;
}

static const char *multimodal_name(posenc_rope_multimodal kind)
{
    switch (kind) {
    case POSENC_ROPE_POSITIONS_1D: return "POSITIONS_1D";
    case POSENC_ROPE_MROPE: return "MROPE";
    case POSENC_ROPE_MROPE_INTERLEAVED: return "MROPE_INTERLEAVED";
    case POSENC_ROPE_VISION_2D: return "VISION_2D";
    case POSENC_ROPE_VISION_2D_PIXTRAL: return "VISION_2D_PIXTRAL";
    case POSENC_ROPE_POSITIONS_MAP: return "POSITIONS_MAP";
    case POSENC_ROPE_VISION_GGML: return "VISION_GGML";
    }
    return "unknown";
}

/* ggml's vision mode: its sections as ggml asserts them (summing to at most the rotated dims,
 * ggml's ne0, and not only the fourth), wrapping when they cover fewer frequencies than
 * rotary_dim/2; and ggml's own scaling or none. */
static posenc_status check_ggml_vision(posenc_context *ctx, const posenc_rope_desc *desc,
                                       uint32_t rotary_dim)
{
    const uint32_t *s = desc->mrope_section;
    uint64_t first_three = (uint64_t)s[0] + s[1] + s[2];
    if (first_three == 0 || first_three + s[3] > rotary_dim)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "mrope_section: %u + %u + %u + %u must sum to 1 to rotary_dim = %u "
                            "with one of the first three above 0 (ggml's sections of "
                            "multimodal VISION_GGML)",
                            s[0], s[1], s[2], s[3], rotary_dim);
    posenc_rope_scaling_type type = desc->scaling.type;
    if (type != POSENC_ROPE_SCALING_NONE && type != POSENC_ROPE_SCALING_YARN_GGML)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "scaling.type: multimodal VISION_GGML takes none or yarn_ggml (ggml's "
                            "freq_scale, ext_factor and betas), got %s",
                            posenc_rope_scaling_type_name(type));
    if (desc->component_map || desc->components)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s: is used only by multimodal POSITIONS_MAP and must be %s for "
                            "multimodal VISION_GGML",
                            desc->component_map ? "component_map" : "components",
                            desc->component_map ? "NULL" : "0");
    return POSENC_OK;
}

/* The multimodal kind and its fields; `*components` is the kind's position components. */
static posenc_status check_multimodal(posenc_context *ctx, const posenc_rope_desc *desc,
                                      uint32_t rotary_dim, uint32_t *components)
{
    posenc_rope_multimodal kind = desc->multimodal;
    if ((unsigned)kind > POSENC_ROPE_VISION_GGML)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "multimodal: unknown value %d",
                            (int)kind);
    const uint32_t *section = desc->mrope_section;
    uint64_t sum = (uint64_t)section[0] + section[1] + section[2];
    bool mrope = kind == POSENC_ROPE_MROPE || kind == POSENC_ROPE_MROPE_INTERLEAVED;
    bool vision = kind == POSENC_ROPE_VISION_2D || kind == POSENC_ROPE_VISION_2D_PIXTRAL;
    if (kind == POSENC_ROPE_VISION_GGML) {
        *components = 4;
        return check_ggml_vision(ctx, desc, rotary_dim);
    }
    if (mrope && section[3] != 0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "mrope_section[3]: multimodal %s has three components (t, h, w), so "
                            "the fourth section must be 0, got %u",
                            multimodal_name(kind), section[3]);
    if (mrope && sum == 0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "mrope_section: is required by multimodal %s (frequencies per "
                            "component t, h, w, summing to rotary_dim/2 = %u)",
                            multimodal_name(kind), rotary_dim / 2);
    if (mrope && sum != rotary_dim / 2)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "mrope_section: %u + %u + %u must sum to rotary_dim/2 = %u",
                            section[0], section[1], section[2], rotary_dim / 2);
    if (!mrope && (sum != 0 || section[3] != 0))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "mrope_section: is used only by the M-RoPE kinds and VISION_GGML and "
                            "must be 0 for multimodal %s",
                            multimodal_name(kind));
    if (vision) {
        /* Their two halves each take every other frequency of a theta table: no scaling type
         * would mean the same thing for them. Caller frequencies (and factors) are frequency
         * j's own, the kind only picks its component. */
        if (rotary_dim % 4)
            return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                                "rotary_dim: multimodal %s needs a multiple of 4, got %u",
                                multimodal_name(kind), rotary_dim);
        if (desc->scaling.type != POSENC_ROPE_SCALING_NONE)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.type: multimodal %s takes no scaling type (give the "
                                "frequencies as inv_freq instead)",
                                multimodal_name(kind));
    }
    bool map = kind == POSENC_ROPE_POSITIONS_MAP;
    if (!map && (desc->component_map || desc->components))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "%s: is used only by multimodal POSITIONS_MAP and must be %s for "
                            "multimodal %s",
                            desc->component_map ? "component_map" : "components",
                            desc->component_map ? "NULL" : "0", multimodal_name(kind));
    if (map) {
        if (desc->components < 1 || desc->components > POSENC__MAX_COMPONENTS)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "components: multimodal POSITIONS_MAP takes 1 to %d position "
                                "components, got %u",
                                POSENC__MAX_COMPONENTS, desc->components);
        if (!desc->component_map)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "component_map: is required by multimodal POSITIONS_MAP "
                                "(rotary_dim/2 = %u entries)",
                                rotary_dim / 2);
        for (uint32_t j = 0; j < rotary_dim / 2; j++) {
            if (desc->component_map[j] >= desc->components)
                return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                    "component_map[%u]: %u is not a component below "
                                    "components = %u",
                                    j, desc->component_map[j], desc->components);
        }
    }
    *components = mrope ? 3 : vision ? 2 : map ? desc->components : 1;
    return POSENC_OK;
}

/* Positions of `components` (> 1) components per token, the components innermost:
 * [tokens, C] or [batch, tokens, C], any strides. The op's view puts the components in dim 1,
 * so that dims 2 and 3 (batch, token) are those of plain positions. */
static posenc_status resolve_component_positions(posenc_context *ctx,
                                                 const posenc_rope_desc *desc,
                                                 uint32_t components, posenc__rope_op *op)
{
    const posenc_tensor *positions = &desc->positions;
    if (posenc__tensor_absent(positions) || desc->position_offset != 0)
        return posenc__resolve_positions(ctx, positions, desc->position_offset, op->batch,
                                         op->tokens, "tokens", &op->positions,
                                         &op->has_positions, &op->positions_per_batch);
    const char *kind = multimodal_name(desc->multimodal);
    if (positions->ndim < 2 || positions->ndim > 3)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "positions.ndim: multimodal %s reads [tokens, %u] or [batch, "
                            "tokens, %u], got %u dims",
                            kind, components, components, positions->ndim);
    posenc__view full;
    posenc_status status = posenc__resolve_view(ctx, positions, "positions", 3, POSENC_DTYPE_I32,
                                                POSENC__POSITION_DTYPES, &full);
    if (status != POSENC_OK)
        return status;
    uint32_t last = positions->ndim - 1;
    if (full.shape[3] != components)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "positions.shape[%u]: multimodal %s has %u position components, "
                            "got %lld",
                            last, kind, components, (long long)full.shape[3]);
    if (full.shape[2] != op->tokens)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "positions.shape[%u]: must equal the %lld tokens, got %lld", last - 1,
                            (long long)op->tokens, (long long)full.shape[2]);
    if (full.shape[1] != 1 && full.shape[1] != op->batch)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "positions.shape[0]: must be 1 or the batch size %lld, got %lld",
                            (long long)op->batch, (long long)full.shape[1]);
    posenc__view view = full;
    view.shape[1] = full.shape[3];
    view.strides[1] = full.strides[3];
    view.shape[2] = full.shape[1];
    view.strides[2] = full.strides[1];
    view.shape[3] = full.shape[2];
    view.strides[3] = full.strides[2];
    op->positions = view;
    op->has_positions = true;
    op->positions_per_batch = view.shape[2] > 1;
    return POSENC_OK;
}

/* The whole resolution, into `prepared`. */
static posenc_status prepare_in_full(posenc_context *ctx, const posenc_rope_desc *desc,
                                     posenc__rope_op *prepared)
{
    posenc__rope_op op = {0};
    posenc_status status;

    if (posenc__tensor_absent(&desc->q))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "q: is required");
    status = resolve_qk_view(ctx, &desc->q, "q", POSENC_DTYPE_F32, &op.q);
    if (status != POSENC_OK)
        return status;
    op.batch = op.q.shape[0];
    op.tokens = op.q.shape[1];
    op.q_heads = op.q.shape[2];
    op.head_dim = op.q.shape[3];

    status = resolve_output(ctx, &desc->q_out, "q_out", &op.q, "q", &op.q_out,
                            &op.q_in_place);
    if (status != POSENC_OK)
        return status;

    op.has_k = !posenc__tensor_absent(&desc->k);
    if (op.has_k) {
        status = resolve_qk_view(ctx, &desc->k, "k", op.q.dtype, &op.k);
        if (status != POSENC_OK)
            return status;
        if (op.k.dtype != op.q.dtype)
            return posenc__fail(ctx, POSENC_INVALID_DTYPE, "k.dtype: %s does not match q's %s",
                                posenc_dtype_name(op.k.dtype), posenc_dtype_name(op.q.dtype));
        status = posenc__check_same_dims(ctx, &op.k, desc->k.ndim, "k", &op.q, "q", SHARED_DIMS);
        if (status != POSENC_OK)
            return status;
        op.k_heads = op.k.shape[2];
        status = resolve_output(ctx, &desc->k_out, "k_out", &op.k, "k", &op.k_out,
                                &op.k_in_place);
        if (status != POSENC_OK)
            return status;
    } else if (!posenc__tensor_absent(&desc->k_out)) {
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "k_out: is set but k is not");
    }

    if (op.head_dim > UINT32_MAX)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE, "q.shape: head_dim %lld is too large",
                            (long long)op.head_dim);
    if (desc->rotary_offset % 2 || desc->rotary_offset >= op.head_dim)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "rotary_offset: must be even and below head_dim %lld, got %u",
                            (long long)op.head_dim, desc->rotary_offset);
    uint32_t rotary_dim =
        desc->rotary_dim ? desc->rotary_dim : (uint32_t)op.head_dim - desc->rotary_offset;
    if (rotary_dim % 2)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            desc->rotary_dim ? "rotary_dim: must be even, got %u"
                                             : "rotary_dim: defaults to head_dim %u, which is "
                                               "odd; set an even rotary_dim",
                            rotary_dim);
    if (rotary_dim > op.head_dim - desc->rotary_offset && desc->rotary_offset)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "rotary_dim: %u from rotary_offset %u reaches past head_dim %lld",
                            rotary_dim, desc->rotary_offset, (long long)op.head_dim);
    if (rotary_dim > op.head_dim)
        return posenc__fail(ctx, POSENC_INVALID_SHAPE,
                            "rotary_dim: %u is larger than head_dim %lld", rotary_dim,
                            (long long)op.head_dim);
    if (desc->style != POSENC_ROPE_NEOX && desc->style != POSENC_ROPE_GPTJ)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "style: unknown value %d",
                            (int)desc->style);
    op.rotary_dim = rotary_dim;
    op.rotary_offset = desc->rotary_offset;
    op.style = desc->style;
    op.inverse = desc->inverse;

    status = check_multimodal(ctx, desc, rotary_dim, &op.components);
    if (status != POSENC_OK)
        return status;
    if (op.components > 1)
        status = resolve_component_positions(ctx, desc, op.components, &op);
    else
        status = posenc__resolve_positions(ctx, &desc->positions, desc->position_offset,
                                           op.batch, op.tokens, "tokens", &op.positions,
                                           &op.has_positions, &op.positions_per_batch);
    if (status != POSENC_OK)
        return status;
    op.position_offset = desc->position_offset;
    op.component_stride = op.has_positions && op.components > 1 ? op.positions.strides[1] : 0;

    /* No output shares memory with another view of the call (an output and its own input may
     * be the same view: that is in place). */
    const char *q_out_name = op.q_in_place ? "q" : "q_out"; /* name what the caller set */
    const char *k_out_name = op.k_in_place ? "k" : "k_out";
    if (op.has_k) {
        status = posenc__check_disjoint(ctx, &op.q_out, q_out_name, &op.k, "k");
        if (status == POSENC_OK)
            status = posenc__check_disjoint(ctx, &op.k_out, k_out_name, &op.q, "q");
        if (status == POSENC_OK && !(op.q_in_place && op.k_in_place))
            status = posenc__check_disjoint(ctx, &op.q_out, q_out_name, &op.k_out, k_out_name);
    }
    if (status == POSENC_OK && op.has_positions) {
        status = posenc__check_disjoint(ctx, &op.q_out, q_out_name, &op.positions, "positions");
        if (status == POSENC_OK && op.has_k)
            status =
                posenc__check_disjoint(ctx, &op.k_out, k_out_name, &op.positions, "positions");
    }
    if (status == POSENC_OK)
        status = posenc__rope_resolve_cache(ctx, desc, &op);
    if (status == POSENC_OK)
        status = posenc__rope_resolve_tables(ctx, desc, &op);
    if (status == POSENC_OK)
        status = posenc__rope_resolve_norm(ctx, desc, &op);
    if (status != POSENC_OK)
        return status;

    /* With several components, from the largest position of any component. */
    uint32_t sequence_length = desc->scaling.sequence_length;
    bool length_from_positions = sequence_length == 0 &&
                                 (desc->scaling.type == POSENC_ROPE_SCALING_DYNAMIC_NTK ||
                                  desc->scaling.type == POSENC_ROPE_SCALING_LONGROPE);
    if (length_from_positions) {
        status = posenc__sequence_length(ctx, &op.positions, op.has_positions,
                                         op.positions_per_batch ? op.batch : 1, op.tokens,
                                         op.position_offset, &sequence_length);
        if (status != POSENC_OK)
            return status;
    }
    status = posenc__rope_frequencies(ctx, desc, rotary_dim, sequence_length,
                                      &op.attention_factor);
    if (status != POSENC_OK)
        return status;
    op.freqs = ctx->rope_freqs.freqs;
    op.freqs_id = ctx->rope_freqs.id;
    posenc__rope_memo_keep(ctx, desc, &op, length_from_positions);
    *prepared = op;
    return POSENC_OK;
}

posenc_status posenc__rope_check_outputs_apart(posenc_context *ctx, const posenc__rope_op *op,
                                              const posenc__view *input, const char *name)
{
    const posenc__view *outputs[] = {&op->q_out,
                                     op->has_k && op->k_out_written ? &op->k_out : NULL,
                                     op->has_k_cache ? &op->k_cache : NULL,
                                     op->has_v ? &op->v_cache : NULL};
    const char *names[] = {op->q_in_place ? "q" : "q_out", op->k_in_place ? "k" : "k_out",
                           "k_cache", "v_cache"};
    posenc_status status = POSENC_OK;
    for (uint32_t i = 0; i < 4 && status == POSENC_OK; i++) {
        if (outputs[i])
            status = posenc__check_disjoint(ctx, outputs[i], names[i], input, name);
    }
    return status;
}

/* `*op`: the remembered operation of a repeated descriptor (core/rope_memo.h), or `storage`
 * prepared in full. */
static posenc_status prepare(posenc_context *ctx, const posenc_rope_desc *desc,
                             posenc__rope_op *storage, const posenc__rope_op **op)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!desc)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "desc: is NULL");
    posenc__clear_error(ctx);
    posenc_status status = posenc__check_lost(ctx);
    if (status != POSENC_OK)
        return status;
    *op = posenc__rope_memo_use(ctx, desc);
    if (*op)
        return POSENC_OK;
    *op = storage;
    return prepare_in_full(ctx, desc, storage);
}

posenc_status posenc__rope_prepare(posenc_context *ctx, const posenc_rope_desc *desc,
                                   posenc__rope_op *prepared)
{
    const posenc__rope_op *op = prepared;
    posenc_status status = prepare(ctx, desc, prepared, &op);
    if (status == POSENC_OK && op != prepared)
        *prepared = *op;
    return status;
}

posenc_status posenc_rope(posenc_context *ctx, const posenc_rope_desc *desc)
{
    posenc__rope_op storage;
    const posenc__rope_op *op = &storage;
    posenc_status status = prepare(ctx, desc, &storage, &op);
    /* At every call: the positions' contents change between calls of one descriptor. */
    if (status == POSENC_OK)
        status = posenc__rope_check_table_rows(ctx, op);
    if (status == POSENC_OK)
        status = ctx->backend->run(ctx, &(posenc__op){.rope = op});
    if (status == POSENC_OK)
        posenc__atomic64_add(&ctx->stats.rope_calls, 1);
    return status;
}
