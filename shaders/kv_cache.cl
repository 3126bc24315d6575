/* SPDX-License-Identifier: MIT */
/* The paged KV cache's rows, for the RoPE kernels that also write the cache (rope.cl,
 * rope_contiguous.cl). */
#ifndef POSENC_KV_CACHE_CL
#define POSENC_KV_CACHE_CL

/* The cache row of a token whose slot_mapping entry is `slot`: its block and row in the block.
 * Returns 0, and leaves both alone, for a slot outside [0, num_slots): such a token's k and v
 * are not written to the caches at all. */
int posenc_cache_row(int slot, uint num_slots, uint block_size, uint *block, uint *in_block)
{
    if (slot < 0 || (uint)slot >= num_slots)
        return 0;
    *block = (uint)slot / block_size;
    *in_block = (uint)slot - *block * block_size;
    return 1;
}

#endif
