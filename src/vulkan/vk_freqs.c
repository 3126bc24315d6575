/* SPDX-License-Identifier: MIT */
/* Frequency tables in device memory: one small host-visible buffer per distinct table, written
 * once and never changed, so that a command buffer recorded with it stays valid however many
 * other tables later calls use. Tables are found by freqs_id first and by content second. */
#include "vulkan/vk_internal.h"

#include <string.h>

static void write_words(uint32_t *words, const posenc__freq *freqs, uint32_t count)
{
    for (uint32_t j = 0; j < count; j++) {
        words[3 * j] = freqs[j].int_turns;
        words[3 * j + 1] = (uint32_t)(freqs[j].frac >> 32);
        words[3 * j + 2] = (uint32_t)freqs[j].frac;
        words[3 * count + j] = freqs[j].component; /* after the triplets; only RoPE reads it */
    }
}

static bool same_content(const posenc_vk_freq_table *table, const posenc__freq *freqs,
                         uint32_t count)
{
    if (table->count != count)
        return false;
    const uint32_t *words = table->memory.mapped;
    for (uint32_t j = 0; j < count; j++) {
        if (words[3 * j] != freqs[j].int_turns ||
            words[3 * j + 1] != (uint32_t)(freqs[j].frac >> 32) ||
            words[3 * j + 2] != (uint32_t)freqs[j].frac ||
            words[3 * count + j] != freqs[j].component)
            return false;
    }
    return true;
}

/* A slot for a new table: a free one, or on posenc's own device the least recently used one,
 * once the submissions that bind it are done. A caller's command buffers may bind any table
 * at any later time, so there nothing is evicted. */
static posenc_status free_slot(posenc_context *ctx, posenc_vk_freq_table **slot)
{
    posenc_vk_context *vk = ctx->backend_state;
    if (vk->table_count < POSENC_VK_MAX_FREQ_TABLES) {
        *slot = &vk->tables[vk->table_count++];
        return POSENC_OK;
    }
    if (vk->external)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "rotary_dim: a context on the caller's Vulkan device keeps at most %d "
                            "distinct frequency tables, and all are in use",
                            POSENC_VK_MAX_FREQ_TABLES);
    posenc_vk_freq_table *oldest = &vk->tables[0];
    for (uint32_t t = 1; t < vk->table_count; t++) {
        if (vk->tables[t].last_use < oldest->last_use)
            oldest = &vk->tables[t];
    }
    posenc_status status = posenc_vk_wait_serial(ctx, oldest->last_serial);
    if (status != POSENC_OK)
        return status;
    posenc_vk_release(ctx, &oldest->memory);
    *oldest = (posenc_vk_freq_table){0};
    *slot = oldest;
    return POSENC_OK;
}

posenc_status posenc_vk_set_freqs(posenc_context *ctx, const posenc__freq *freqs, uint32_t count,
                                  uint64_t id)
{
    posenc_vk_context *vk = ctx->backend_state;
    vk->table = NULL;
    if (count == 0)
        return POSENC_OK;
    posenc_vk_freq_table *found = NULL;
    for (uint32_t t = 0; t < vk->table_count && !found && id; t++) {
        if (vk->tables[t].id == id && vk->tables[t].count == count)
            found = &vk->tables[t];
    }
    for (uint32_t t = 0; t < vk->table_count && !found; t++) {
        if (vk->tables[t].memory.buffer && same_content(&vk->tables[t], freqs, count))
            found = &vk->tables[t];
    }
    if (!found) {
        posenc_status status = free_slot(ctx, &found);
        if (status != POSENC_OK)
            return status;
        status = posenc_vk_allocate(ctx, (uint64_t)count * 16, vk->host_memory_type, true,
                                    "rotary_dim", &found->memory);
        if (status != POSENC_OK) {
            if (found == &vk->tables[vk->table_count - 1])
                vk->table_count--;
            return status;
        }
        found->count = count;
        write_words(found->memory.mapped, freqs, count);
    }
    found->id = id;
    found->last_use = ++vk->table_uses;
    vk->table = found;
    return POSENC_OK;
}

void posenc_vk_freqs_fini(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    for (uint32_t t = 0; t < vk->table_count; t++)
        posenc_vk_release(ctx, &vk->tables[t].memory);
    vk->table_count = 0;
}
