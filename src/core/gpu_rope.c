/* SPDX-License-Identifier: MIT */
/* RoPE's passes, parameter blocks, layout tests and checks, for every GPU backend
 * (gpu_rope.h). */
#include "core/gpu_rope.h"

#include "core/gpu_staging.h"

#include <stdio.h>

/* The bytes of one block of the block kernels. */
#define BLOCK_BYTES 16

#define POSITIONS_MASK (3u << POSENC_ROPE_FLAG_POSITIONS_SHIFT)

_Static_assert(POSENC_ROPE_STYLE_NEOX == POSENC_ROPE_NEOX &&
                   POSENC_ROPE_STYLE_GPTJ == POSENC_ROPE_GPTJ,
               "the kernels' pairing styles are posenc_rope_style's values");

/* What the fast kernels (rope_blocks.comp, rope_contiguous.cl and their norm variants) were
 * written for: their styles and angles of their own (caller cos/sin tables take the generic
 * kernels). The QK norm has conditions of its own in each. */
static bool fast_kernel_takes(const posenc__rope_op *op)
{
    return (op->style == POSENC_ROPE_NEOX || op->style == POSENC_ROPE_GPTJ) && !op->has_tables;
}

static uint32_t table_dtype(const posenc__view *view)
{
    return view->dtype == POSENC_DTYPE_F16    ? POSENC_TABLE_F16
           : view->dtype == POSENC_DTYPE_BF16 ? POSENC_TABLE_BF16
                                              : POSENC_TABLE_F32;
}

_Static_assert(POSENC__ROPE_VIEWS <= POSENC__GPU_MAX_VIEWS, "posenc__gpu_op's views");
_Static_assert(POSENC_ROPE_TABLE_WORDS + POSENC_ROPE_NORM_WORDS <= POSENC__GPU_SOURCE_WORDS &&
                   POSENC_ROPE_TABLE_SIN_STRIDE_BATCH == POSENC_ROPE_TABLE_COS_STRIDE_BATCH + 3 &&
                   POSENC_ROPE_TABLE_SIN_DTYPE == POSENC_ROPE_TABLE_COS_DTYPE + 1,
               "the tables' layout: cos's strides, then sin's; cos's dtype, then sin's");

/* The caller tables' layout: the words the kernels read in the frequency table's place. Element
 * strides are 0 along dims of one index: a batch sharing one table, or rows by position. */
static void table_layout(const posenc__rope_op *op, posenc__gpu_table_source *table)
{
    const posenc__view *views[2] = {&op->cos, &op->sin};
    uint32_t *words = table->words;
    for (uint32_t i = 0; i < 2; i++) {
        const posenc__view *view = views[i];
        uint32_t *strides = &words[POSENC_ROPE_TABLE_COS_STRIDE_BATCH + 3 * i];
        for (int d = 1; d < 4; d++) /* batch, row, column */
            strides[d - 1] = posenc__gpu_element_stride(view, d, view->shape[d]);
        words[POSENC_ROPE_TABLE_COS_DTYPE + i] = table_dtype(view);
    }
    /* Rows past 32 bits never reach a kernel: the table's binding is refused first. */
    words[POSENC_ROPE_TABLE_ROWS] = (uint32_t)op->table_rows;
    words[POSENC_ROPE_TABLE_FORM] = (op->tables_by_token ? POSENC_ROPE_TABLE_BY_TOKEN : 0u) |
                                    (op->tables_full_width ? POSENC_ROPE_TABLE_FULL_WIDTH : 0u);
    table->word_count = POSENC_ROPE_TABLE_WORDS;
}

/* The norm's words after the frequencies or the tables' layout: the weights' element strides
 * (0 for one element) and eps and the weight offset as f32 bits. */
static void norm_words(const posenc__rope_op *op, posenc__gpu_table_source *table)
{
    union {
        float f;
        uint32_t u;
    } eps = {(float)op->norm_eps}, offset = {(float)op->norm_weight_offset};
    uint32_t *words = &table->words[table->word_count];
    const posenc__view *q = &op->q_norm_weight, *k = &op->k_norm_weight;
    if (op->has_q_norm)
        words[POSENC_ROPE_NORM_Q_STRIDE] = posenc__gpu_element_stride(q, 3, q->shape[3]);
    if (op->has_k_norm)
        words[POSENC_ROPE_NORM_K_STRIDE] = posenc__gpu_element_stride(k, 3, k->shape[3]);
    words[POSENC_ROPE_NORM_EPS] = eps.u;
    words[POSENC_ROPE_NORM_OFFSET] = offset.u;
    table->word_count += POSENC_ROPE_NORM_WORDS;
}

void posenc__gpu_rope_op(const posenc__rope_op *op, posenc__gpu_op *gpu)
{
    *gpu = (posenc__gpu_op){.names = posenc__rope_view_names,
                            .view_count = POSENC__ROPE_VIEWS,
                            .what = "rope"};
    if (op->has_tables)
        table_layout(op, &gpu->table);
    else
        gpu->table = (posenc__gpu_table_source){
            .freqs = op->freqs, .count = op->rotary_dim / 2, .id = op->freqs_id};
    if (op->has_q_norm || op->has_k_norm)
        norm_words(op, &gpu->table);
    posenc__rope_views(op, gpu->views);
    posenc__rope_view_access(op, gpu->access);
}

uint32_t posenc__gpu_rope_flags(const posenc__rope_op *op)
{
    uint32_t flags = ((uint32_t)op->style & POSENC_ROPE_FLAG_STYLE_MASK) |
                     (op->inverse ? POSENC_ROPE_FLAG_INVERSE : 0u) |
                     (op->has_tables ? POSENC_ROPE_FLAG_TABLES : 0u);
    if (op->has_positions)
        flags |= (op->positions.dtype == POSENC_DTYPE_I32 ? POSENC_POSITIONS_I32
                                                          : POSENC_POSITIONS_F32)
                 << POSENC_ROPE_FLAG_POSITIONS_SHIFT;
    return flags;
}

static uint32_t element_size(const posenc__view *view)
{
    return (uint32_t)posenc__dtype_size(view->dtype);
}

/* ---- One tensor a dispatch ---------------------------------------------------------------- */

static posenc__gpu_rope_pass make_pass(const posenc__rope_op *op, uint32_t kind, uint32_t in,
                                       uint32_t out, bool in_place, bool rotate, bool cache)
{
    const posenc__view *views[POSENC__ROPE_VIEWS];
    posenc__rope_given_views(op, views);
    uint32_t pairs = rotate ? op->rotary_dim / 2 : 0;
    return (posenc__gpu_rope_pass){
        .kind = kind,
        .in = views[in],
        .out = in_place ? views[in] : views[out],
        .in_index = in,
        .out_index = in_place ? in : out,
        .in_place = in_place,
        .rotate = rotate,
        .cache = cache,
        .pairs = pairs,
        .pass_units = in_place ? 0 : (uint32_t)((op->head_dim - 2 * (int64_t)pairs + 1) / 2),
    };
}

/* The pass normalizes its input, q or k, with that tensor's weights. */
static posenc__gpu_rope_pass normed(const posenc__rope_op *op, posenc__gpu_rope_pass pass)
{
    bool is_q = pass.kind == POSENC_ROPE_PASS_Q;
    if (is_q ? op->has_q_norm : op->has_k_norm) {
        pass.norm = is_q ? &op->q_norm_weight : &op->k_norm_weight;
        pass.norm_index = is_q ? POSENC__ROPE_Q_NORM : POSENC__ROPE_K_NORM;
        pass.norm_per_token = is_q ? op->q_norm_per_token : op->k_norm_per_token;
    }
    return pass;
}

uint32_t posenc__gpu_rope_passes(const posenc__rope_op *op,
                                 posenc__gpu_rope_pass passes[POSENC_ROPE_PASSES])
{
    uint32_t n = 0;
    passes[n++] = normed(op, make_pass(op, POSENC_ROPE_PASS_Q, POSENC__ROPE_Q,
                                       POSENC__ROPE_Q_OUT, op->q_in_place, true, false));
    if (op->has_k_cache)
        passes[n++] = normed(op, make_pass(op, POSENC_ROPE_PASS_K_CACHE, POSENC__ROPE_K,
                                           POSENC__ROPE_K_CACHE, false, true, true));
    if (op->has_v)
        passes[n++] = make_pass(op, POSENC_ROPE_PASS_V_CACHE, POSENC__ROPE_V,
                                POSENC__ROPE_V_CACHE, false, false, true);
    if (op->has_k && op->k_out_written)
        passes[n++] = normed(op, make_pass(op, POSENC_ROPE_PASS_K, POSENC__ROPE_K,
                                           POSENC__ROPE_K_OUT, op->k_in_place, true, false));
    return n;
}

/* The bytes of one head of a cache, over every block and row. */
static int64_t cache_head_span(const posenc__view *cache)
{
    return (int64_t)posenc__gpu_view_extent(cache) - (cache->shape[2] - 1) * cache->strides[2];
}

/* A [batch, tokens, heads] cell of a tensor: one head's dims. */
static posenc__gpu_extent head_extent(const posenc__view *view, const char *name)
{
    return (posenc__gpu_extent){
        .bound = true,
        .strides = {view->strides[0], view->strides[1], view->strides[2]},
        .inner = (view->shape[3] - 1) * view->strides[3] + element_size(view),
        .element_size = element_size(view),
        .name = name,
    };
}

/* A caller table over [batch, tokens, heads]: rows gathered per token follow the cells; rows
 * by position may be any, so the table is bound whole, as a cache is. */
static void table_extent(const posenc__rope_op *op, const posenc__view *table,
                         posenc__gpu_extent *extent)
{
    extent->bound = true;
    extent->element_size = element_size(table);
    if (!op->tables_by_token) {
        extent->inner = (int64_t)posenc__gpu_view_extent(table);
        return;
    }
    extent->strides[0] = table->shape[1] > 1 ? table->strides[1] : 0;
    extent->strides[1] = table->strides[2];
    extent->inner = (table->shape[3] - 1) * table->strides[3] + element_size(table);
}

void posenc__gpu_rope_pass_extents(const posenc__rope_op *op, const posenc__gpu_rope_pass *pass,
                                   posenc__gpu_extent extents[POSENC__GPU_ROPE_BINDINGS])
{
    const char *const *names = posenc__rope_view_names;
    for (int i = 0; i < POSENC__GPU_ROPE_BINDINGS; i++)
        extents[i] = (posenc__gpu_extent){.element_size = 4};
    extents[POSENC__GPU_ROPE_BINDING_OUT] = head_extent(pass->out, names[pass->out_index]);
    extents[POSENC__GPU_ROPE_BINDING_IN].element_size = element_size(pass->out);
    extents[POSENC__GPU_ROPE_BINDING_IN].name = names[pass->in_index];
    if (!pass->in_place)
        extents[POSENC__GPU_ROPE_BINDING_IN] = head_extent(pass->in, names[pass->in_index]);
    extents[POSENC__GPU_ROPE_BINDING_POSITIONS].name = "positions";
    /* With tables every pass reads the positions: a token that picks no row writes nothing. */
    if (op->has_positions && (pass->rotate || op->has_tables)) {
        posenc__gpu_extent *positions = &extents[POSENC__GPU_ROPE_BINDING_POSITIONS];
        positions->bound = true;
        positions->strides[0] = op->positions_per_batch ? op->positions.strides[2] : 0;
        positions->strides[1] = op->positions.strides[3];
        /* A cell is one token's components, wherever they lie. */
        positions->inner = (op->positions.shape[1] - 1) * op->component_stride + 4;
    }
    extents[POSENC__GPU_ROPE_BINDING_TABLE].name = "frequencies";
    extents[POSENC__GPU_ROPE_BINDING_SLOTS].name = "slot_mapping";
    if (pass->cache) {
        /* Any row of the cache may be written: a window spans every block and row of the box's
         * heads, so that only a cache larger than one binding (with one head per window) is
         * UNSUPPORTED, naming it. */
        posenc__gpu_extent *out = &extents[POSENC__GPU_ROPE_BINDING_OUT];
        out->strides[0] = out->strides[1] = 0;
        out->inner = cache_head_span(pass->out);
        posenc__gpu_extent *slots = &extents[POSENC__GPU_ROPE_BINDING_SLOTS];
        slots->bound = true;
        slots->strides[0] = op->slots.strides[2];
        slots->strides[1] = op->slots.strides[3];
        slots->inner = 4;
    }
    extents[POSENC__GPU_ROPE_BINDING_COS].name = "cos";
    extents[POSENC__GPU_ROPE_BINDING_SIN].name = "sin";
    if (op->has_tables) {
        table_extent(op, &op->cos, &extents[POSENC__GPU_ROPE_BINDING_COS]);
        table_extent(op, &op->sin, &extents[POSENC__GPU_ROPE_BINDING_SIN]);
    }
    posenc__gpu_extent *norm = &extents[POSENC__GPU_ROPE_BINDING_NORM];
    norm->name = "q_norm_weight";
    if (pass->norm) { /* every box reads all of them */
        norm->bound = true;
        norm->element_size = element_size(pass->norm);
        norm->inner = (int64_t)posenc__gpu_view_extent(pass->norm);
        norm->name = posenc__rope_view_names[pass->norm_index];
    }
    if (pass->norm_per_token) {
        /* A token's heads are one cell of the split (it must not cut them): each view's cell
         * spans all of them, and no box moves along them. */
        int64_t heads = pass->out->shape[2];
        for (int i = 0; i < POSENC__GPU_ROPE_BINDINGS; i++) {
            posenc__gpu_extent *extent = &extents[i];
            if (extent->bound && extent->strides[2] > 0) {
                extent->inner += (heads - 1) * extent->strides[2];
                extent->strides[2] = 0;
            }
        }
    }
}

uint64_t posenc__gpu_rope_table_bytes(const posenc__rope_op *op,
                                      const posenc__gpu_rope_pass *pass)
{
    if (pass->norm) /* the norm's words follow */
        return 4 * ((uint64_t)POSENC_ROPE_NORM_WORDS_AT(op->has_tables, pass->pairs) +
                    POSENC_ROPE_NORM_WORDS);
    if (op->has_tables)
        return 4 * (uint64_t)POSENC_ROPE_TABLE_WORDS;
    return (uint64_t)pass->pairs * 16; /* posenc__gpu_freq_words: 4 words a pair */
}

uint32_t posenc__gpu_rope_norm_lanes(const posenc__rope_op *op, const posenc__gpu_rope_pass *pass)
{
    const uint64_t unit = POSENC_ROPE_NORM_UNIT_PAIRS;
    uint64_t rotated = pass->pairs, rest = (uint64_t)op->head_dim - 2 * rotated;
    if (rotated % unit || rest % unit || (uint64_t)op->rotary_offset % unit)
        return 0;
    uint64_t units = rotated / unit + rest / unit, lanes = 1;
    while (lanes < units && lanes <= POSENC_ROPE_NORM_MAX_LANES)
        lanes *= 2;
    return lanes <= POSENC_ROPE_NORM_MAX_LANES ? (uint32_t)lanes : 0;
}

bool posenc__gpu_rope_pass_in_blocks(const posenc__rope_op *op,
                                     const posenc__gpu_rope_pass *pass)
{
    int64_t block_elements = BLOCK_BYTES / (int64_t)element_size(pass->out);
    int64_t rotated = pass->rotate ? op->rotary_dim : 0;
    int64_t first = pass->rotate ? op->rotary_offset : 0;
    /* With the QK norm, per pass: its norm variant takes units of 8 pairs (the backend checks
     * that a subgroup holds a head's), and v's copy and an unnormalized k have none. */
    bool kernel = fast_kernel_takes(op) && (!pass->norm || posenc__gpu_rope_norm_lanes(op, pass));
    return kernel && posenc__gpu_view_in_blocks(pass->out, BLOCK_BYTES) &&
           (pass->in_place || posenc__gpu_view_in_blocks(pass->in, BLOCK_BYTES)) &&
           op->head_dim % block_elements == 0 && rotated % (2 * block_elements) == 0 &&
           first % block_elements == 0;
}

bool posenc__gpu_rope_box_in_blocks(const posenc__gpu_rope_pass *pass, const uint32_t *first)
{
    /* Windows start on 16 bytes: a window's first element is on a block where its view's
     * element 0 is. A view off the grid takes the generic kernel. */
    uint32_t block_elements = BLOCK_BYTES / element_size(pass->out);
    return first[POSENC__GPU_ROPE_BINDING_OUT] % block_elements == 0 &&
           first[POSENC__GPU_ROPE_BINDING_IN] % block_elements == 0;
}

uint64_t posenc__gpu_rope_row_units(const posenc__rope_op *op, const posenc__gpu_rope_pass *pass,
                                    bool blocks)
{
    if (pass->norm) /* a cluster of invocations a head, or whole heads one */
        return blocks ? posenc__gpu_rope_norm_lanes(op, pass) : 1;
    if (!blocks)
        return pass->pairs + pass->pass_units;
    uint64_t pass_dims = pass->in_place ? 0 : (uint64_t)op->head_dim - 2 * (uint64_t)pass->pairs;
    return (pass->pairs + pass_dims) / (BLOCK_BYTES / element_size(pass->out));
}

posenc_status posenc__gpu_rope_check_norm_rows(posenc_context *ctx, const posenc__rope_op *op,
                                              uint64_t slack, uint64_t limit)
{
    posenc__gpu_rope_pass passes[POSENC_ROPE_PASSES];
    uint32_t count = posenc__gpu_rope_passes(op, passes);
    for (uint32_t p = 0; p < count; p++) {
        if (!passes[p].norm_per_token)
            continue;
        posenc__gpu_extent extents[POSENC__GPU_ROPE_BINDINGS];
        posenc__gpu_rope_pass_extents(op, &passes[p], extents);
        for (int i = POSENC__GPU_ROPE_BINDING_OUT; i <= POSENC__GPU_ROPE_BINDING_IN; i++) {
            uint64_t span = (uint64_t)extents[i].inner;
            if (extents[i].bound && (span > limit || slack > limit - span))
                return posenc__fail(ctx, POSENC_UNSUPPORTED,
                                    "%s: a norm over the token's whole tensor needs all of a "
                                    "token's heads in one kernel binding, but they span %llu "
                                    "bytes of %s (the whole cache for a cache), more than %llu",
                                    posenc__rope_view_names[passes[p].norm_index],
                                    (unsigned long long)span, extents[i].name,
                                    (unsigned long long)limit);
        }
    }
    return POSENC_OK;
}

posenc_status posenc__gpu_rope_box_split(posenc_context *ctx, const posenc__rope_op *op,
                                         const posenc__gpu_rope_pass *pass,
                                         const posenc__gpu_box *box, bool blocks,
                                         uint64_t target, posenc__gpu_head_split *split)
{
    uint64_t rows = (uint64_t)(box->count[0] * box->count[1]), heads = (uint64_t)box->count[2];
    if (!pass->norm_per_token) {
        uint64_t lanes = posenc__gpu_rope_row_units(op, pass, blocks);
        *split = pass->norm && !blocks ? posenc__gpu_rope_norm_split(rows, lanes, heads, target)
                                       : posenc__gpu_split_heads(rows, lanes, heads, target);
        return POSENC_OK;
    }
    if (box->count[2] != pass->out->shape[2])
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "%s: a norm over the token's whole tensor needs all %lld heads of a "
                            "token in one kernel binding, more than this device allows",
                            posenc__rope_view_names[pass->norm_index],
                            (long long)pass->out->shape[2]);
    *split = (posenc__gpu_head_split){
        .heads_per_unit = heads,
        .chunks = 1,
        .units = rows * posenc__gpu_rope_row_units(op, pass, blocks)};
    return POSENC_OK;
}

void posenc__gpu_rope_pass_params(const posenc__rope_op *op, const posenc__gpu_rope_pass *pass,
                                  const posenc__gpu_box *box, const uint32_t *first,
                                  uint32_t heads_per_unit, posenc__rope_pass *params)
{
    const posenc__view *out = pass->out, *in = pass->in_place ? out : pass->in;
    int64_t batch = box->count[0], tokens = box->count[1], heads = box->count[2];
    uint32_t flags = posenc__gpu_rope_flags(op) |
                     (pass->in_place ? POSENC_ROPE_FLAG_IN_PLACE : 0u);
    if (pass->pairs == 0 && !op->has_tables)
        flags &= ~POSITIONS_MASK; /* v's copy reads no positions (but for the tables' rows) */
    *params = (posenc__rope_pass){
        .in_offset = first[POSENC__GPU_ROPE_BINDING_IN],
        .in_stride_batch = posenc__gpu_element_stride(in, 0, batch),
        .in_stride_token = posenc__gpu_element_stride(in, 1, tokens),
        .in_stride_head = posenc__gpu_element_stride(in, 2, heads),
        .in_stride_dim = posenc__gpu_element_stride(in, 3, op->head_dim),
        .out_offset = first[POSENC__GPU_ROPE_BINDING_OUT],
        .out_stride_batch = posenc__gpu_element_stride(out, 0, batch),
        .out_stride_token = posenc__gpu_element_stride(out, 1, tokens),
        .out_stride_head = posenc__gpu_element_stride(out, 2, heads),
        .out_stride_dim = posenc__gpu_element_stride(out, 3, op->head_dim),
        .batch = (uint32_t)batch,
        .tokens = (uint32_t)tokens,
        .heads = (uint32_t)heads,
        .heads_per_unit = heads_per_unit,
        .pairs = pass->pairs,
        .head_dim = (uint32_t)op->head_dim,
        .rotary_offset = pass->pairs ? op->rotary_offset : 0, /* v's copy: every dim from 0 */
        /* Absent positions: the box's first token is token start[1]; the front end checked
         * that position_offset + tokens - 1 stays an int32. */
        .position_offset = (int32_t)((int64_t)op->position_offset + box->start[1]),
        .flags = flags,
        .attention_factor = op->attention_factor,
    };
    if (flags & POSITIONS_MASK) {
        const posenc__view *positions = &op->positions;
        params->positions_offset = first[POSENC__GPU_ROPE_BINDING_POSITIONS];
        params->positions_stride_batch =
            op->positions_per_batch ? posenc__gpu_element_stride(positions, 2, batch) : 0;
        params->positions_stride_token = posenc__gpu_element_stride(positions, 3, tokens);
        params->positions_stride_component =
            posenc__gpu_element_stride(positions, 1, positions->shape[1]);
    }
    if (pass->cache) {
        /* The whole cache is bound (any slot may be hit): its blocks and rows stand in for the
         * output's batch and tokens, and the slots binding's window starts at the box's first
         * token, so that each token finds its own slot however the work was split. */
        params->out_stride_batch = posenc__gpu_element_stride(out, 0, out->shape[0]);
        params->out_stride_token = posenc__gpu_element_stride(out, 1, out->shape[1]);
        params->slots_offset = first[POSENC__GPU_ROPE_BINDING_SLOTS];
        params->slots_stride_batch = posenc__gpu_element_stride(&op->slots, 2, batch);
        params->slots_stride_token = posenc__gpu_element_stride(&op->slots, 3, tokens);
        params->block_size = (uint32_t)out->shape[1];
        /* Below 2^32: the cache fits one binding. */
        params->num_slots = (uint32_t)op->num_slots;
        params->flags |= POSENC_ROPE_FLAG_SLOTS;
    }
    if (op->has_tables) {
        params->cos_offset = first[POSENC__GPU_ROPE_BINDING_COS];
        params->sin_offset = first[POSENC__GPU_ROPE_BINDING_SIN];
    }
    if (pass->norm) {
        params->norm_offset = first[POSENC__GPU_ROPE_BINDING_NORM];
        params->flags |= POSENC_ROPE_FLAG_NORM |
                         (pass->kind != POSENC_ROPE_PASS_Q ? POSENC_ROPE_FLAG_NORM_K : 0u) |
                         (pass->norm_per_token ? POSENC_ROPE_FLAG_NORM_PER_TOKEN : 0u) |
                         table_dtype(pass->norm) << POSENC_ROPE_FLAG_NORM_DTYPE_SHIFT;
    }
}

/* ---- q, k and the cache in one launch ----------------------------------------------------- */

uint64_t posenc__gpu_rope_fused_heads(const posenc__rope_op *op)
{
    uint64_t k_heads = op->has_k ? (uint64_t)op->k_heads : 0;
    return (uint64_t)op->q_heads + k_heads + (op->has_v ? k_heads : 0);
}

uint64_t posenc__gpu_rope_fused_lanes(const posenc__rope_op *op)
{
    bool partial = (int64_t)op->rotary_dim < op->head_dim;
    bool copy_q = !op->q_in_place;
    bool copy_k = op->has_k && op->k_out_written && !op->k_in_place;
    /* A cache row is always written out of place: its pass-through dims (and v's) are copied. */
    bool copies = partial && (copy_q || copy_k || op->has_k_cache);
    return op->rotary_dim / 2 + (copies ? (uint64_t)op->head_dim - op->rotary_dim : 0);
}

posenc__gpu_head_split posenc__gpu_rope_norm_split(uint64_t rows, uint64_t lanes, uint64_t heads,
                                                   uint64_t fill_units)
{
    posenc__gpu_head_split split = posenc__gpu_split_heads(rows, lanes, heads, fill_units);
    if (split.heads_per_unit > POSENC_ROPE_NORM_UNIT_HEADS) {
        split.heads_per_unit = POSENC_ROPE_NORM_UNIT_HEADS;
        split.chunks = (heads + POSENC_ROPE_NORM_UNIT_HEADS - 1) / POSENC_ROPE_NORM_UNIT_HEADS;
        split.units = rows * lanes * split.chunks;
    }
    return split;
}

uint64_t posenc__gpu_rope_normed_units(const posenc__rope_op *op, uint64_t heads_per_unit)
{
    if (heads_per_unit == 0) /* no rows */
        return 0;
    uint64_t k_heads = op->has_k ? (uint64_t)op->k_heads : 0;
    uint64_t q_units = op->has_q_norm && op->q_norm_per_token
                           ? 1
                           : ((uint64_t)op->q_heads + heads_per_unit - 1) / heads_per_unit;
    uint64_t k_units = op->has_k_norm && op->k_norm_per_token
                           ? 1
                           : (k_heads + heads_per_unit - 1) / heads_per_unit;
    return q_units + k_units + (op->has_v ? k_heads : 0);
}

void posenc__gpu_rope_launch_params(const posenc__rope_op *op, const uint32_t *offset,
                                    uint32_t heads_per_unit,
                                    posenc__rope_pass params[POSENC_ROPE_PASSES])
{
    posenc__gpu_rope_pass passes[POSENC_ROPE_PASSES];
    uint32_t count = posenc__gpu_rope_passes(op, passes);
    for (uint32_t p = 0; p < POSENC_ROPE_PASSES; p++)
        params[p] = (posenc__rope_pass){0}; /* absent: no heads */
    for (uint32_t i = 0; i < count; i++) {
        const posenc__gpu_rope_pass *pass = &passes[i];
        posenc__gpu_box box = {.count = {op->batch, op->tokens, pass->out->shape[2]}};
        uint32_t first[POSENC__GPU_ROPE_BINDINGS] = {
            [POSENC__GPU_ROPE_BINDING_OUT] = offset[pass->out_index],
            [POSENC__GPU_ROPE_BINDING_IN] = offset[pass->in_index],
            [POSENC__GPU_ROPE_BINDING_POSITIONS] = offset[POSENC__ROPE_POSITIONS],
            [POSENC__GPU_ROPE_BINDING_SLOTS] = offset[POSENC__ROPE_SLOTS],
            [POSENC__GPU_ROPE_BINDING_COS] = offset[POSENC__ROPE_COS],
            [POSENC__GPU_ROPE_BINDING_SIN] = offset[POSENC__ROPE_SIN],
            [POSENC__GPU_ROPE_BINDING_NORM] = pass->norm ? offset[pass->norm_index] : 0,
        };
        posenc__gpu_rope_pass_params(op, pass, &box, first, heads_per_unit, &params[pass->kind]);
    }
}

bool posenc__gpu_rope_contiguous(const posenc__rope_op *op, uint32_t pairs)
{
    uint32_t half = op->rotary_dim / 2;
    bool norm = op->has_q_norm || op->has_k_norm;
    if (!fast_kernel_takes(op) || half == 0 || half % pairs != 0)
        return false;
    /* With the norm, a work-item takes whole heads, every dim of them rotated. */
    if (norm && ((int64_t)op->rotary_dim != op->head_dim ||
                 half > POSENC_ROPE_NORM_CONTIGUOUS_PAIRS))
        return false;
    bool partial = (int64_t)op->rotary_dim < op->head_dim;
    if (partial && (!op->q_in_place || op->has_k_cache ||
                    (op->has_k && op->k_out_written && !op->k_in_place)))
        return false;
    const posenc__view *views[POSENC__ROPE_VIEWS];
    posenc__rope_views(op, views);
    for (int i = 0; i < POSENC__ROPE_VIEWS; i++) {
        if (!views[i] || i == POSENC__ROPE_POSITIONS || i == POSENC__ROPE_SLOTS)
            continue;
        if (views[i]->strides[3] != (int64_t)element_size(views[i]))
            return false;
    }
    return true;
}

/* ---- Both ---------------------------------------------------------------------------------- */

static posenc_status check_cache(posenc_context *ctx, const posenc__view *cache,
                                 const char *name, bool per_head, bool host_only, uint64_t slack,
                                 uint64_t limit, const char *limit_text)
{
    if (host_only && !posenc__gpu_view_host(cache))
        return POSENC_OK;
    uint64_t span = per_head ? (uint64_t)cache_head_span(cache) : posenc__gpu_view_extent(cache);
    if (span <= limit && slack <= limit - span)
        return POSENC_OK;
    return posenc__fail(ctx, POSENC_UNSUPPORTED,
                        "%s: %s spans %llu bytes, more than %s (%llu bytes); any slot may be "
                        "written, so the cache is bound whole: use a smaller cache",
                        name, per_head ? "one head of the cache" : "the cache",
                        (unsigned long long)span, limit_text, (unsigned long long)limit);
}

posenc_status posenc__gpu_rope_check_caches(posenc_context *ctx, const posenc__rope_op *op,
                                            bool per_head, bool host_only, uint64_t slack,
                                            uint64_t limit, const char *limit_text)
{
    posenc_status status = POSENC_OK;
    if (op->has_k_cache)
        status = check_cache(ctx, &op->k_cache, "k_cache", per_head, host_only, slack, limit,
                             limit_text);
    if (status == POSENC_OK && op->has_v)
        status = check_cache(ctx, &op->v_cache, "v_cache", per_head, host_only, slack, limit,
                             limit_text);
    return status;
}

posenc_status posenc__gpu_rope_check_launch(posenc_context *ctx, const char *backend,
                                            const posenc__rope_op *op, uint64_t units)
{
    uint64_t rows = (uint64_t)op->batch * (uint64_t)op->tokens;
    uint64_t heads = posenc__gpu_rope_fused_heads(op);
    uint64_t largest = heads;
    if ((uint64_t)op->batch > largest)
        largest = (uint64_t)op->batch;
    if ((uint64_t)op->tokens > largest)
        largest = (uint64_t)op->tokens;
    if ((uint64_t)op->head_dim > largest)
        largest = (uint64_t)op->head_dim;
    char shape[128];
    snprintf(shape, sizeof shape, "%llu rows x %llu heads x %lld dims", (unsigned long long)rows,
             (unsigned long long)heads, (long long)op->head_dim);
    return posenc__gpu_check_units(ctx, backend, "q.shape", shape, units, largest);
}
