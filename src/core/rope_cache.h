/* SPDX-License-Identifier: MIT */
/* The paged KV cache write of posenc_rope: k_cache, slot_mapping, v and v_cache. */
#ifndef POSENC_CORE_ROPE_CACHE_H
#define POSENC_CORE_ROPE_CACHE_H

#include "core/internal.h"

/* Resolves the cache fields of `desc` into `op`, whose q, k, outputs and positions are already
 * resolved: shapes, dtypes (k's), slot_mapping, and that no output shares memory with another
 * view. Without k_cache, checks that none of the other cache fields is set. */
posenc_status posenc__rope_resolve_cache(posenc_context *ctx, const posenc_rope_desc *desc,
                                         posenc__rope_op *op);

/* The 4-D index of a cache row: slot s is (s / block_size, s % block_size). False for a slot
 * outside [0, num_slots), which writes nothing. */
static inline bool posenc__cache_slot(const posenc__rope_op *op, int32_t slot, int64_t *block,
                                      int64_t *row)
{
    if (slot < 0 || slot >= op->num_slots)
        return false;
    /* A cache of rows (block size 1) needs no division, and a slot no 64-bit one. */
    const int64_t block_size = op->k_cache.shape[1];
    if (block_size == 1) {
        *block = slot;
        *row = 0;
    } else if (block_size > INT32_MAX) { /* past every slot */
        *block = 0;
        *row = slot;
    } else {
        *block = (int64_t)((uint32_t)slot / (uint32_t)block_size);
        *row = (int64_t)((uint32_t)slot % (uint32_t)block_size);
    }
    return true;
}

#endif
