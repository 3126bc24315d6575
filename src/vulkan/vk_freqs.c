/* SPDX-License-Identifier: MIT */
/* Device copies of the frequency tables that core/gpu_tables.h caches: one small host-visible
 * buffer per table, written once and never changed, so that a command buffer recorded with it
 * stays valid however many other tables later calls use. */
#include "vulkan/vk_internal.h"

#include <string.h>

/* On posenc's own device a table goes once the submissions that bind it are done. A caller's
 * command buffers may bind any table at any later time, so there nothing is evicted. */
static posenc_status evict(posenc_context *ctx, uint32_t slot, void *user)
{
    (void)user;
    posenc_vk_context *vk = ctx->backend_state;
    if (vk->external)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "rotary_dim: a context on the caller's Vulkan device keeps at most %d "
                            "distinct frequency tables (%llu bytes), and all are in use",
                            POSENC__GPU_MAX_TABLES,
                            (unsigned long long)POSENC__GPU_TABLE_BYTES);
    posenc_status status = posenc_vk_wait_serial(ctx, vk->tables[slot].last_serial);
    if (status != POSENC_OK)
        return status;
    posenc_vk_release(ctx, &vk->tables[slot].memory);
    vk->tables[slot] = (posenc_vk_freq_table){0};
    return POSENC_OK;
}

posenc_status posenc_vk_set_freqs(posenc_context *ctx, const posenc__freq *freqs, uint32_t count,
                                  uint64_t id)
{
    posenc_vk_context *vk = ctx->backend_state;
    vk->table = NULL;
    uint32_t slot;
    bool hit;
    posenc_status status = posenc__gpu_tables_find(ctx, &vk->table_cache, freqs, count, id,
                                                   "rotary_dim", evict, NULL, &slot, &hit);
    if (status != POSENC_OK)
        return status;
    posenc_vk_freq_table *table = &vk->tables[slot];
    if (!hit) {
        const posenc__gpu_table *words = &vk->table_cache.slots[slot];
        uint64_t bytes = words->word_count * sizeof(uint32_t);
        status = posenc_vk_allocate(ctx, bytes, vk->host_memory_type, true, "rotary_dim",
                                    &table->memory);
        if (status != POSENC_OK) {
            posenc__gpu_tables_drop(ctx, &vk->table_cache, slot);
            return status;
        }
        memcpy(table->memory.mapped, words->words, (size_t)bytes);
    }
    vk->table = table;
    return POSENC_OK;
}

void posenc_vk_freqs_fini(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    for (uint32_t t = 0; t < POSENC__GPU_MAX_TABLES; t++)
        posenc_vk_release(ctx, &vk->tables[t].memory);
    posenc__gpu_tables_fini(ctx, &vk->table_cache);
}
