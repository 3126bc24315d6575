/* SPDX-License-Identifier: MIT */
/* Descriptor sets of the pool path (devices without VK_KHR_push_descriptor): one set per
 * distinct set of bound ranges, written at its first use and never written again, so that a
 * command buffer that binds it stays valid when later calls bind other ranges, and a steady
 * state (the same buffers every frame) allocates and updates nothing. A set is freed when one of
 * its buffers is released. */
#include "vulkan/vk_internal.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(VkDescriptorBufferInfo) == sizeof(VkBuffer) + 2 * sizeof(VkDeviceSize),
               "binding sets are compared with memcmp: no padding");

/* Descriptor sets per pool; more pools are added as distinct binding sets appear. */
#define SETS_PER_POOL 64
/* On posenc's own device, past this many sets the cache starts again (after the work that may
 * bind them is done): an application that keeps binding new ranges does not grow it forever. */
#define MAX_OWNED_SETS 4096

/* A descriptor set of the shared layout, written once for one set of bound ranges and reused
 * whenever the same ranges are bound again. */
struct posenc_vk_cached_set {
    VkDescriptorBufferInfo infos[POSENC_VK_BINDINGS];
    VkDescriptorSet set;
    VkDescriptorPool pool;
};

static posenc_status add_pool(posenc_context *ctx, posenc_vk_context *vk)
{
    VkDescriptorPool *grown = realloc(vk->pools, (vk->pool_count + 1) * sizeof *grown);
    if (!grown)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "descriptors: out of host memory");
    vk->pools = grown;
    VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                 SETS_PER_POOL * POSENC_VK_BINDINGS};
    VkDescriptorPoolCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT,
        .maxSets = SETS_PER_POOL,
        .poolSizeCount = 1,
        .pPoolSizes = &size,
    };
    VkResult result = vk->fns.CreateDescriptorPool(vk->device, &info, vk->allocator,
                                                   &vk->pools[vk->pool_count]);
    if (result != VK_SUCCESS)
        return posenc_vk_fail(ctx, result, "vkCreateDescriptorPool");
    posenc_vk_debug_name(vk, VK_OBJECT_TYPE_DESCRIPTOR_POOL,
                         POSENC_VK_OBJECT(vk->pools[vk->pool_count]), "posenc descriptor pool");
    vk->pool_count++;
    return POSENC_OK;
}

/* A new set from the first pool with room (pools of freed sets are reused). */
static posenc_status allocate_set(posenc_context *ctx, posenc_vk_context *vk,
                                  VkDescriptorSet *set, VkDescriptorPool *pool)
{
    for (uint32_t p = 0;; p++) {
        bool fresh = p == vk->pool_count;
        if (fresh) {
            posenc_status status = add_pool(ctx, vk);
            if (status != POSENC_OK)
                return status;
        }
        VkDescriptorSetAllocateInfo info = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
            .descriptorPool = vk->pools[p],
            .descriptorSetCount = 1,
            .pSetLayouts = &vk->set_layout,
        };
        VkResult result = vk->fns.AllocateDescriptorSets(vk->device, &info, set);
        if (result == VK_SUCCESS) {
            *pool = vk->pools[p];
            return POSENC_OK;
        }
        if (fresh || (result != VK_ERROR_OUT_OF_POOL_MEMORY && result != VK_ERROR_FRAGMENTED_POOL))
            return posenc_vk_fail(ctx, result, "vkAllocateDescriptorSets");
    }
}

static void free_set(posenc_vk_context *vk, uint32_t index)
{
    posenc_vk_cached_set *entry = &vk->sets[index];
    vk->fns.FreeDescriptorSets(vk->device, entry->pool, 1, &entry->set);
    vk->sets[index] = vk->sets[--vk->set_count];
}

void posenc_vk_descriptor_writes(const VkDescriptorBufferInfo *infos, VkDescriptorSet set,
                                 VkWriteDescriptorSet writes[POSENC_VK_BINDINGS])
{
    for (uint32_t i = 0; i < POSENC_VK_BINDINGS; i++) {
        writes[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &infos[i],
        };
    }
}

posenc_status posenc_vk_descriptor_set(posenc_context *ctx, const VkDescriptorBufferInfo *infos,
                                       VkDescriptorSet *set)
{
    posenc_vk_context *vk = ctx->backend_state;
    for (uint32_t s = vk->set_count; s-- > 0;) {
        if (memcmp(vk->sets[s].infos, infos, sizeof vk->sets[s].infos) == 0) {
            *set = vk->sets[s].set;
            return POSENC_OK;
        }
    }
    if (vk->set_count == vk->set_capacity) {
        uint32_t capacity = vk->set_capacity ? 2 * vk->set_capacity : 64;
        posenc_vk_cached_set *grown = realloc(vk->sets, capacity * sizeof *grown);
        if (!grown)
            return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "descriptors: out of host memory");
        vk->sets = grown;
        vk->set_capacity = capacity;
    }
    posenc_vk_cached_set *entry = &vk->sets[vk->set_count];
    posenc_status status = allocate_set(ctx, vk, &entry->set, &entry->pool);
    if (status != POSENC_OK)
        return status;
    memcpy(entry->infos, infos, sizeof entry->infos);
    VkWriteDescriptorSet writes[POSENC_VK_BINDINGS];
    posenc_vk_descriptor_writes(entry->infos, entry->set, writes);
    vk->fns.UpdateDescriptorSets(vk->device, POSENC_VK_BINDINGS, writes, 0, NULL);
    vk->set_count++;
    *set = entry->set;
    return POSENC_OK;
}

void posenc_vk_descriptors_trim(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    if (vk->external || vk->set_count < MAX_OWNED_SETS ||
        posenc_vk_wait_serial(ctx, vk->serial) != POSENC_OK)
        return;
    while (vk->set_count)
        free_set(vk, vk->set_count - 1);
}

void posenc_vk_forget_sets(posenc_context *ctx, VkBuffer buffer)
{
    posenc_vk_context *vk = ctx->backend_state;
    if (!vk || !buffer)
        return;
    for (uint32_t s = vk->set_count; s-- > 0;) {
        for (uint32_t i = 0; i < POSENC_VK_BINDINGS; i++) {
            if (vk->sets[s].infos[i].buffer == buffer) {
                free_set(vk, s);
                break;
            }
        }
    }
}

void posenc_vk_descriptors_fini(posenc_context *ctx)
{
    posenc_vk_context *vk = ctx->backend_state;
    for (uint32_t p = 0; p < vk->pool_count; p++)
        vk->fns.DestroyDescriptorPool(vk->device, vk->pools[p], vk->allocator);
    free(vk->pools);
    free(vk->sets);
    vk->pools = NULL;
    vk->sets = NULL;
    vk->pool_count = vk->set_count = vk->set_capacity = 0;
}
