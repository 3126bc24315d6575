/* SPDX-License-Identifier: MIT */
/* The last RoPE descriptor a context prepared in full, kept so that the same descriptor at the
 * next call (a decode step: only position_offset and the tensors' contents change) costs a
 * comparison and the few checks whose outcome could differ, not the whole resolution. */
#ifndef POSENC_CORE_ROPE_MEMO_H
#define POSENC_CORE_ROPE_MEMO_H

#include "core/internal.h"

typedef struct posenc__rope_memo posenc__rope_memo;

/* What posenc__rope_prepare would resolve `desc` to, when `desc` equals the remembered
 * descriptor byte for byte (position_offset aside; so a descriptor whose padding bytes differ
 * is only a miss) and everything else the resolution read is unchanged: each buffer's context,
 * size, mapping and host address, the frequency table and the caller's arrays by value, and
 * the position_offset rules. Valid until the next operation is prepared on the context. NULL:
 * prepare in full, which reports any error exactly as always. */
const posenc__rope_op *posenc__rope_memo_use(posenc_context *ctx, const posenc_rope_desc *desc);

/* Remembers `desc`, just prepared in full into `op` with the frequency table of
 * `sequence_length`. A table that depended on the positions' contents (a sequence length
 * derived from them) is not remembered. Without memory nothing is remembered. */
void posenc__rope_memo_keep(posenc_context *ctx, const posenc_rope_desc *desc,
                            const posenc__rope_op *op, bool length_from_positions);

/* Frees the context's memo (context destruction). */
void posenc__rope_memo_free(posenc_context *ctx);

#endif
