/* SPDX-License-Identifier: MIT */
/* Device copies of the frequency tables that core/gpu_tables.h caches, one small host-visible
 * buffer each (posenc_vk_freq_table), and the ring of the tables past the cache. */
#include "vulkan/vk_internal.h"

#include <string.h>

/* Slots of a table ring. Any number of tables is correct with one slot (each write waits for
 * the reads before it); more slots keep command buffers recorded close together from sharing
 * one when they run at the same time on different queues. */
#define RING_SLOTS 64
/* vkCmdUpdateBuffer writes at most this many bytes at once. */
#define UPDATE_BYTES 65536

/* A table goes once the submissions that bind it are done. Tables bound by a caller's command
 * buffers are pinned (the caller may submit them at any later time), so never come here. */
static posenc_status evict(posenc_context *ctx, uint32_t slot, void *user)
{
    (void)user;
    posenc_vk_context *vk = ctx->backend_state;
    posenc_status status = posenc_vk_wait_serial(ctx, vk->tables[slot].last_serial);
    if (status != POSENC_OK)
        return status;
    posenc_vk_release(ctx, &vk->tables[slot].memory);
    vk->tables[slot] = (posenc_vk_freq_table){0};
    return POSENC_OK;
}

/* A ring whose slots hold `bytes`: the one in use, or a larger one; the outgrown ring stays. */
static posenc_status ring_for(posenc_context *ctx, uint64_t bytes)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_table_ring *ring = &vk->table_ring;
    uint64_t alignment = vk->physical->binding_alignment > 256 ? vk->physical->binding_alignment
                                                               : 256;
    if (ring->ring_count && ring->slot_bytes >= bytes)
        return POSENC_OK;
    uint64_t slot_bytes = ring->ring_count ? ring->slot_bytes : alignment;
    while (slot_bytes < bytes)
        slot_bytes *= 2;
    if (ring->ring_count == POSENC_VK_TABLE_RINGS) /* 2^32 doublings from 256 bytes: unreachable */
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "rotary_dim: %llu bytes of frequencies outgrow the table rings",
                            (unsigned long long)bytes);
    posenc_vk_allocation *memory = &ring->rings[ring->ring_count];
    posenc_status status =
        posenc_vk_allocate(ctx, slot_bytes * RING_SLOTS, vk->device_memory_type, false,
                           "rotary_dim", "posenc frequency table ring", memory);
    if (status != POSENC_OK)
        return status;
    posenc__atomic64_add(&ctx->stats.table_bytes, memory->size);
    ring->ring_count++;
    ring->slot_bytes = slot_bytes;
    ring->next = 0;
    posenc__log(ctx, POSENC_LOG_DEBUG,
                "vulkan: every cached frequency table is bound by recorded work; tables past "
                "them are written by the command buffer (a ring of %d slots of %llu bytes)",
                RING_SLOTS, (unsigned long long)slot_bytes);
    return POSENC_OK;
}

posenc_status posenc_vk_set_freqs(posenc_context *ctx, const posenc__gpu_table_source *source,
                                  bool recorded)
{
    posenc_vk_context *vk = ctx->backend_state;
    vk->table = NULL;
    vk->table_ring.pending = NULL;
    uint32_t slot;
    bool hit;
    posenc_status status = posenc__gpu_tables_find(ctx, &vk->table_cache, source, "rotary_dim",
                                                   evict, NULL, &slot, &hit);
    if (status != POSENC_OK)
        return status;
    if (slot == POSENC__GPU_UNCACHED) {
        const posenc__gpu_table *words = &vk->table_cache.uncached;
        uint64_t bytes = words->word_count * sizeof(uint32_t);
        status = ring_for(ctx, bytes);
        if (status != POSENC_OK)
            return status;
        posenc_vk_table_ring *ring = &vk->table_ring;
        ring->pending = words->words;
        ring->pending_bytes = bytes;
        ring->pending_offset = ring->next * ring->slot_bytes;
        ring->next = (ring->next + 1) % RING_SLOTS;
        vk->table_binding = (VkDescriptorBufferInfo){
            ring->rings[ring->ring_count - 1].buffer, ring->pending_offset, 0};
        return POSENC_OK;
    }
    posenc_vk_freq_table *table = &vk->tables[slot];
    if (!hit) {
        const posenc__gpu_table *words = &vk->table_cache.slots[slot];
        uint64_t bytes = words->word_count * sizeof(uint32_t);
        status = posenc_vk_allocate(ctx, bytes, vk->host_memory_type, true, "rotary_dim",
                                    "posenc frequency table", &table->memory);
        if (status != POSENC_OK) {
            posenc__gpu_tables_drop(ctx, &vk->table_cache, slot);
            return status;
        }
        memcpy(table->memory.mapped, words->words, (size_t)bytes);
    }
    if (recorded)
        vk->table_cache.slots[slot].pinned = true;
    vk->table = table;
    vk->table_binding = (VkDescriptorBufferInfo){table->memory.buffer, 0, 0};
    return POSENC_OK;
}

void posenc_vk_write_table(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_table_ring *ring = &vk->table_ring;
    if (!ring->pending)
        return;
    VkBuffer buffer = ring->rings[ring->ring_count - 1].buffer;
    posenc_vk_debug_label_begin(vk, vk->target, "posenc frequency table write");
    /* Earlier reads of the slot (compute) and writes of it (transfer) finish first. */
    VkMemoryBarrier before = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vk->fns.CmdPipelineBarrier(vk->target,
                               VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
                                   VK_PIPELINE_STAGE_TRANSFER_BIT,
                               VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
    for (uint64_t done = 0; done < ring->pending_bytes; done += UPDATE_BYTES) {
        uint64_t size = ring->pending_bytes - done;
        if (size > UPDATE_BYTES)
            size = UPDATE_BYTES;
        vk->fns.CmdUpdateBuffer(vk->target, buffer, ring->pending_offset + done, size,
                                (const uint8_t *)ring->pending + done);
    }
    VkBufferMemoryBarrier after = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT,
        .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
        .buffer = buffer,
        .offset = ring->pending_offset,
        .size = ring->pending_bytes,
    };
    vk->fns.CmdPipelineBarrier(vk->target, VK_PIPELINE_STAGE_TRANSFER_BIT,
                               VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 0, NULL, 1, &after, 0,
                               NULL);
    posenc_vk_debug_label_end(vk, vk->target);
    ring->pending = NULL;
}

void posenc_vk_freqs_fini(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    for (uint32_t t = 0; t < POSENC__GPU_MAX_TABLES; t++)
        posenc_vk_release(ctx, &vk->tables[t].memory);
    posenc_vk_table_ring *ring = &vk->table_ring;
    for (uint32_t r = 0; r < ring->ring_count; r++) {
        posenc__atomic64_sub(&ctx->stats.table_bytes, ring->rings[r].size);
        posenc_vk_release(ctx, &ring->rings[r]);
    }
    *ring = (posenc_vk_table_ring){0};
    posenc__gpu_tables_fini(ctx, &vk->table_cache);
}
