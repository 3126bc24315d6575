/* SPDX-License-Identifier: MIT */
/* The QK RMSNorm fused into posenc_rope (q_norm_weight, k_norm_weight, norm_eps,
 * norm_weight_offset): resolved against the views already resolved. */
#ifndef POSENC_CORE_ROPE_NORM_H
#define POSENC_CORE_ROPE_NORM_H

#include "core/internal.h"

/* Resolves the norm fields of `desc` into `op`, whose q, k, outputs, caches and tables are
 * already resolved: each weight's length (per head or per token), dtype, that k_norm_weight
 * comes with k, eps and the offset, and that no output shares memory with a weight. */
posenc_status posenc__rope_resolve_norm(posenc_context *ctx, const posenc_rope_desc *desc,
                                        posenc__rope_op *op);

#endif
