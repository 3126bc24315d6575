/* SPDX-License-Identifier: MIT */
/* Caller cos/sin tables of posenc_rope (the cos and sin fields): resolved once per descriptor,
 * and the rows the call's positions pick checked at every call. */
#ifndef POSENC_CORE_ROPE_TABLES_H
#define POSENC_CORE_ROPE_TABLES_H

#include "core/internal.h"

#include "posenc_kernel_params.h"

/* Resolves cos and sin into `op`, whose q, k, outputs, positions and caches are already
 * resolved: shapes, dtypes, the row form and width, that no other angle field is set, and that
 * no output shares memory with a table. Without tables, checks that neither is set alone. */
posenc_status posenc__rope_resolve_tables(posenc_context *ctx, const posenc_rope_desc *desc,
                                          posenc__rope_op *op);

/* Tables indexed by position: every position of the call (read from positions, or
 * position_offset + token index) lies in [0, table_rows). Runs at every call that runs its work
 * before returning, also for a remembered descriptor, since the positions' contents change
 * between calls. Work left running (submits, commands recorded or enqueued for the caller)
 * cannot read positions the caller writes later: there the GPU kernels write nothing for a
 * token whose position picks no row, so that nothing outside a table is read. */
posenc_status posenc__rope_check_table_rows(posenc_context *ctx, const posenc__rope_op *op);

/* The table column of pair j (of `pairs`): j for half-width tables, else the column of the
 * pair's first dim. */
static inline uint32_t posenc__rope_table_column(const posenc__rope_op *op, uint32_t j)
{
    return op->tables_full_width ? POSENC_ROPE_PAIR_FIRST(op->style, j, op->rotary_dim / 2) : j;
}

/* Bytes from the start of `table` (op->cos or op->sin) to the value of token (b, t), whose
 * position is `position` (unused for gathered rows), at `column`. */
static inline int64_t posenc__rope_table_offset(const posenc__rope_op *op,
                                                const posenc__view *table, int64_t b, int64_t t,
                                                int64_t position, uint32_t column)
{
    int64_t row = op->tables_by_token ? t : position;
    int64_t batch = op->tables_by_token && table->shape[1] > 1 ? b : 0;
    return batch * table->strides[1] + row * table->strides[2] + column * table->strides[3];
}

#endif
