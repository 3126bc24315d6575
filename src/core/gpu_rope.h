/* SPDX-License-Identifier: MIT */
/* RoPE planned once for every GPU backend: the passes of a call (q; k into its cache; v into
 * its cache; k) and the parameter block of each (posenc_kernel_params.h's POSENC_ROPE_PASS),
 * with their strides and flag words, whether a backend runs a pass at a time or all in one
 * launch; the layout tests that pick a fast kernel, the caches' bound-whole check and the
 * launch-size check. Backends place the views (the element offset of each in its binding) and
 * dispatch. */
#ifndef POSENC_CORE_GPU_ROPE_H
#define POSENC_CORE_GPU_ROPE_H

#include "core/gpu_plan.h"
#include "core/gpu_split.h"
#include "core/op_views.h"

#include "posenc_kernel_params.h"

/* The operation's views, their use and its table: rotary_dim / 2 frequencies, or with caller
 * cos/sin tables their layout (posenc_kernel_params.h's POSENC_ROPE_TABLE_*), then with a QK
 * norm its words (POSENC_ROPE_NORM_*). An op with tables or a norm runs the generic kernels only
 * (rope.comp, rope.cl): the layout tests below refuse the fast ones. */
void posenc__gpu_rope_op(const posenc__rope_op *op, posenc__gpu_op *gpu);

/* ---- A pass at a time (rope.comp, rope_blocks.comp) --------------------------------------- */

/* The kernels' bindings: the output, the input, positions, the frequency table (bound by the
 * backend with its table), the KV cache's slots, the caller's cos and sin tables and the
 * weights of the pass's norm. */
enum {
    POSENC__GPU_ROPE_BINDING_OUT,
    POSENC__GPU_ROPE_BINDING_IN,
    POSENC__GPU_ROPE_BINDING_POSITIONS,
    POSENC__GPU_ROPE_BINDING_TABLE,
    POSENC__GPU_ROPE_BINDING_SLOTS,
    POSENC__GPU_ROPE_BINDING_COS,
    POSENC__GPU_ROPE_BINDING_SIN,
    POSENC__GPU_ROPE_BINDING_NORM,
    POSENC__GPU_ROPE_BINDINGS
};

/* One pass over [batch, tokens, heads]: q or k rotated into its output (or in place), k rotated
 * into k_cache, or v copied into v_cache (no pairs: every dim copied). */
typedef struct posenc__gpu_rope_pass {
    uint32_t kind; /* POSENC_ROPE_PASS_* */
    const posenc__view *in, *out;
    uint32_t in_index, out_index; /* in posenc__rope_views' list: where the backend placed them */
    bool in_place;       /* out is in: read through it, pass-through dims left alone */
    bool rotate;         /* false: every dim is copied */
    bool cache;          /* out is a KV cache: each token's row is its slot's */
    uint32_t pairs;      /* rotated per row: rotary_dim / 2, or 0 */
    uint32_t pass_units; /* per row: pass-through dims copied two by two, out of place */
    /* The input's norm weights (NULL: not normalized) and their index in posenc__rope_views'
     * list; a unit of a normalized pass takes whole heads, all of a token's when per_token. */
    const posenc__view *norm;
    uint32_t norm_index;
    bool norm_per_token;
} posenc__gpu_rope_pass;

/* The passes in the order they run: q, then k into k_cache (from k as it is, before k is
 * rotated in place), v into v_cache, then k. Returns their count. */
uint32_t posenc__gpu_rope_passes(const posenc__rope_op *op,
                                 posenc__gpu_rope_pass passes[POSENC_ROPE_PASSES]);

/* What the pass binds over its [batch, tokens, heads] cells: strides, the bytes of one cell,
 * element sizes and names. The backend sets where each bound view lies (bound, offset, size);
 * the table's entry is left unbound. */
void posenc__gpu_rope_pass_extents(const posenc__rope_op *op, const posenc__gpu_rope_pass *pass,
                                   posenc__gpu_extent extents[POSENC__GPU_ROPE_BINDINGS]);
/* The bytes of the operation's table the pass reads (0: none, v's copy without cos/sin
 * tables). */
uint64_t posenc__gpu_rope_table_bytes(const posenc__rope_op *op,
                                      const posenc__gpu_rope_pass *pass);

/* Whether rope_blocks.comp may take the pass: both views in 16-byte blocks, the rotated and
 * pass-through dims whole blocks, no cos/sin tables, and with the QK norm a head in units of
 * POSENC_ROPE_NORM_UNIT_PAIRS (posenc__gpu_rope_norm_lanes; the backend checks that its
 * subgroups hold them). Its windows must still start on a block
 * (posenc__gpu_rope_box_in_blocks). */
bool posenc__gpu_rope_pass_in_blocks(const posenc__rope_op *op,
                                     const posenc__gpu_rope_pass *pass);
bool posenc__gpu_rope_box_in_blocks(const posenc__gpu_rope_pass *pass, const uint32_t *first);

/* The invocations rope_blocks.comp's norm variant gives a head of the pass (its units of
 * POSENC_ROPE_NORM_UNIT_PAIRS pairs or pass-through dims, rounded up to a power of two, at most
 * POSENC_ROPE_NORM_MAX_LANES), or 0 where the head is not in such units. */
uint32_t posenc__gpu_rope_norm_lanes(const posenc__rope_op *op, const posenc__gpu_rope_pass *pass);

/* Units of one row: rope_blocks.comp takes E pairs, or one pass-through block, a unit (with
 * the norm, a head's cluster of invocations); rope.comp one pair, or two pass-through dims, or
 * with the norm whole heads. */
uint64_t posenc__gpu_rope_row_units(const posenc__rope_op *op, const posenc__gpu_rope_pass *pass,
                                    bool blocks);

/* UNSUPPORTED, naming the weights, when a norm over the token's whole q or k cannot have a
 * token's heads in one binding of `limit` bytes less `slack` (in its input and output, all of
 * a cache): checked before anything is recorded, as the split never cuts those heads. */
posenc_status posenc__gpu_rope_check_norm_rows(posenc_context *ctx, const posenc__rope_op *op,
                                              uint64_t slack, uint64_t limit);

/* The heads one invocation of the pass takes over a box of `rows` rows and `heads` heads
 * (posenc__gpu_split_heads towards `target` invocations; every head of the row for a norm per
 * token): UNSUPPORTED, naming the weights, when such a norm's heads were split over boxes
 * (only to bound the invocations of one box). */
posenc_status posenc__gpu_rope_box_split(posenc_context *ctx, const posenc__rope_op *op,
                                         const posenc__gpu_rope_pass *pass,
                                         const posenc__gpu_box *box, bool blocks,
                                         uint64_t target, posenc__gpu_head_split *split);

/* The parameters of one box of a pass, with the element index of each binding's box origin in
 * `first` (indexed by POSENC__GPU_ROPE_BINDING_*) and `heads_per_unit` heads an invocation. */
void posenc__gpu_rope_pass_params(const posenc__rope_op *op, const posenc__gpu_rope_pass *pass,
                                  const posenc__gpu_box *box, const uint32_t *first,
                                  uint32_t heads_per_unit, posenc__rope_pass *params);

/* ---- Every pass in one launch (rope.cl, rope_contiguous.cl) ------------------------------- */

/* Heads of one launch: q's, k's and v's. */
uint64_t posenc__gpu_rope_fused_heads(const posenc__rope_op *op);
/* Lanes of one row of a head: rotary_dim / 2, plus the pass-through dims where a pass writes
 * out of place (they are copied). rope.cl finds the same count from the blocks. */
uint64_t posenc__gpu_rope_fused_lanes(const posenc__rope_op *op);
/* posenc__gpu_split_heads for the passes with a norm per head, whose kernels hold one factor a
 * head of a unit: at most POSENC_ROPE_NORM_UNIT_HEADS heads a unit. */
posenc__gpu_head_split posenc__gpu_rope_norm_split(uint64_t rows, uint64_t lanes, uint64_t heads,
                                                   uint64_t fill_units);
/* With a QK norm, rope.cl's units of one row instead: one per run of `heads_per_unit` heads of
 * q and of k, but one for all of q's (k's) heads with a norm per token, and one a head of v. */
uint64_t posenc__gpu_rope_normed_units(const posenc__rope_op *op, uint64_t heads_per_unit);

/* The four blocks of one launch, indexed by POSENC_ROPE_PASS_* (an absent pass's zero), each
 * over the whole call, with each view's element 0 at `offset[i]` elements into its binding, in
 * posenc__rope_views' order (absent entries unused). */
void posenc__gpu_rope_launch_params(const posenc__rope_op *op, const uint32_t *offset,
                                    uint32_t heads_per_unit,
                                    posenc__rope_pass params[POSENC_ROPE_PASSES]);

/* Whether kernels that take `pairs` consecutive pairs a vector (rope_contiguous.cl) may run:
 * whole groups of pairs, a dim stride of one element in every tensor, no pass-through dims to
 * copy, no cos/sin tables, and with the QK norm every dim rotated in at most
 * POSENC_ROPE_NORM_CONTIGUOUS_PAIRS pairs. */
bool posenc__gpu_rope_contiguous(const posenc__rope_op *op, uint32_t pairs);

/* ---- Both ---------------------------------------------------------------------------------- */

/* The flag bits every RoPE kernel reads from the operation: style, direction, positions,
 * caller tables. */
uint32_t posenc__gpu_rope_flags(const posenc__rope_op *op);

/* The caches are bound whole, as any slot may be written: UNSUPPORTED, naming the cache, when
 * what a kernel binds of one (each head's span with `per_head`, else all of it) plus `slack`
 * bytes is over `limit`, described as `limit_text` in the message. Caches in device memory are
 * skipped when `host_only` (they fit their allocation already). */
posenc_status posenc__gpu_rope_check_caches(posenc_context *ctx, const posenc__rope_op *op,
                                            bool per_head, bool host_only, uint64_t slack,
                                            uint64_t limit, const char *limit_text);

/* UNSUPPORTED, naming q.shape, when `units` or the heads are more than one launch of `backend`
 * indexes (2^32). */
posenc_status posenc__gpu_rope_check_launch(posenc_context *ctx, const char *backend,
                                            const posenc__rope_op *op, uint64_t units);

#endif
