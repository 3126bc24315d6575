/* SPDX-License-Identifier: MIT */
/* Dispatches: the boxes core/gpu_split.h cuts an operation into, as descriptor ranges within
 * maxStorageBufferRange, and recording one dispatch within maxComputeWorkGroupCount. */
#include "vulkan/vk_internal.h"

#include <string.h>

/* Invocations of one dispatch stay below this, so that the kernels' 32-bit counters hold. */
#define MAX_UNITS (UINT64_C(1) << 31)
/* Windows start on a multiple of this (and of minStorageBufferOffsetAlignment), so that 16-bit
 * elements keep their half of a word and vectors their alignment. */
#define WINDOW_ALIGNMENT 16
/* Local size of every kernel (the shaders' local_size_x): within the 128 invocations every
 * Vulkan device supports. */
#define LOCAL_SIZE 64

_Static_assert(POSENC_VK_BINDINGS <= POSENC__GPU_MAX_BINDINGS, "core/gpu_split.h's bindings");

typedef struct split_job {
    const posenc_vk_place *places;
    uint32_t binding_count;
    uint64_t params_size;
    posenc_vk_record_fn record;
    void *user;
} split_job;

/* One box of core/gpu_split.h as descriptor ranges. */
static posenc_status record_box(posenc_context *ctx, const posenc__gpu_box *box,
                                const posenc__gpu_window *box_windows, void *user)
{
    const split_job *job = user;
    posenc_vk_context *vk = ctx->backend_state;
    posenc_vk_windows windows;
    for (uint32_t i = 0; i < POSENC_VK_BINDINGS; i++) {
        /* The placeholder: 16 bytes no kernel reads. */
        windows.infos[i] = (VkDescriptorBufferInfo){vk->placeholder.buffer, 0, 16};
        windows.first[i] = 0;
        if (i < job->binding_count && box_windows[i].range) {
            windows.infos[i] = (VkDescriptorBufferInfo){
                job->places[i].buffer, box_windows[i].base, box_windows[i].range};
            windows.first[i] = box_windows[i].first;
        }
    }
    if (job->params_size && vk->table_binding.buffer)
        windows.infos[POSENC_VK_TABLE_BINDING] = (VkDescriptorBufferInfo){
            vk->table_binding.buffer, vk->table_binding.offset, (job->params_size + 15) & ~15ull};
    return job->record(ctx, box, &windows, job->user);
}

posenc_status posenc_vk_split(posenc_context *ctx, const posenc__gpu_extent *extents,
                              const posenc_vk_place *places, uint32_t binding_count,
                              const int64_t shape[3],
                              uint64_t units_per_cell, uint64_t params_size,
                              posenc_vk_record_fn record, void *user)
{
    posenc_vk_context *vk = ctx->backend_state;
    posenc__gpu_split_limits limits = {
        .binding_bytes = vk->binding_limit,
        .alignment = vk->physical->binding_alignment,
        .max_units = MAX_UNITS,
    };
    if (limits.alignment < WINDOW_ALIGNMENT)
        limits.alignment = WINDOW_ALIGNMENT;
    if (params_size > vk->binding_limit)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "rotary_dim: %llu bytes of frequencies are more than one kernel "
                            "binding may address on this device",
                            (unsigned long long)params_size);
    posenc__gpu_extent placed[POSENC_VK_BINDINGS] = {{0}};
    for (uint32_t i = 0; i < binding_count && i < POSENC_VK_BINDINGS; i++) {
        placed[i] = extents[i];
        placed[i].bound = extents[i].bound && places[i].buffer != VK_NULL_HANDLE;
        placed[i].offset = places[i].offset;
        placed[i].size = places[i].buffer_size;
    }
    if (params_size)
        posenc_vk_write_table(ctx); /* a table past the cache, before the first dispatch */
    split_job job = {places, binding_count, params_size, record, user};
    uint32_t boxes = 0;
    posenc_status status = posenc__gpu_split(ctx, placed, binding_count, shape, units_per_cell,
                                             &limits, record_box, &job, &boxes);
    if (status == POSENC_OK && boxes > 1)
        posenc__log(ctx, POSENC_LOG_DEBUG,
                    "vulkan: split into %u dispatches, each binding within %llu bytes", boxes,
                    (unsigned long long)limits.binding_bytes);
    return status;
}

static bool ranges_overlap(const VkDescriptorBufferInfo *a, const VkDescriptorBufferInfo *b)
{
    return a->buffer == b->buffer && a->offset < b->offset + b->range &&
           b->offset < a->offset + a->range;
}

/* Whether a dispatch binds a range that one since the last barrier writes, or writes one that it
 * binds (binding 0, the output, is the only one the kernels write): q and k slices of one fused
 * tensor, a pass that rotates in place what an earlier one read (k into its cache), or the
 * windows of a split tensor, which are aligned down and may share a few bytes. Every earlier
 * dispatch counts, not only the last: the windows of a split pass each overlap a different
 * window of the next pass. */
static bool needs_barrier(const posenc_vk_context *vk, const VkDescriptorBufferInfo *next)
{
    if (vk->dispatches == POSENC_VK_TRACKED_DISPATCHES)
        return true;
    for (uint32_t d = 0; d < vk->dispatches; d++) {
        const VkDescriptorBufferInfo *previous = vk->previous[d];
        for (uint32_t i = 0; i < POSENC_VK_BINDINGS; i++) {
            if (ranges_overlap(&previous[0], &next[i]) || ranges_overlap(&next[0], &previous[i]))
                return true;
        }
    }
    return false;
}

posenc_status posenc_vk_dispatch(posenc_context *ctx, posenc_vk_kernel kernel,
                                 const posenc_vk_windows *windows, const void *push,
                                 uint32_t push_size, uint64_t invocations)
{
    posenc_vk_context *vk = ctx->backend_state;
    if (invocations == 0)
        return POSENC_OK;
    VkPipeline pipeline;
    posenc_status status = posenc_vk_pipeline(ctx, kernel, &pipeline);
    if (status != POSENC_OK)
        return status;
    VkCommandBuffer commands = vk->target;
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (!vk->CmdPushDescriptorSetKHR) {
        status = posenc_vk_descriptor_set(ctx, windows->infos, &set);
        if (status != POSENC_OK)
            return status;
    }
    if (needs_barrier(vk, windows->infos)) {
        /* Earlier dispatches' reads and writes before later ones' (write after read too). */
        VkMemoryBarrier barrier = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
        };
        vk->fns.CmdPipelineBarrier(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, NULL,
                                   0, NULL);
        vk->dispatches = 0;
    }
    memcpy(vk->previous[vk->dispatches++], windows->infos, sizeof vk->previous[0]);
    posenc_vk_debug_label_begin(vk, commands, vk->debug.kernel_labels[kernel]);
    vk->fns.CmdBindPipeline(commands, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    if (vk->CmdPushDescriptorSetKHR) {
        VkWriteDescriptorSet writes[POSENC_VK_BINDINGS];
        posenc_vk_descriptor_writes(windows->infos, VK_NULL_HANDLE, writes);
        vk->CmdPushDescriptorSetKHR(commands, VK_PIPELINE_BIND_POINT_COMPUTE,
                                    vk->pipeline_layout, 0, POSENC_VK_BINDINGS, writes);
    } else {
        vk->fns.CmdBindDescriptorSets(commands, VK_PIPELINE_BIND_POINT_COMPUTE,
                                      vk->pipeline_layout, 0, 1, &set, 0, NULL);
    }
    vk->fns.CmdPushConstants(commands, vk->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                             push_size, push);
    uint64_t groups = (invocations + LOCAL_SIZE - 1) / LOCAL_SIZE;
    uint64_t max_groups = vk->physical->max_group_count;
    if (max_groups > 65535) /* plenty to fill any device; the kernels loop over the rest */
        max_groups = 65535;
    vk->fns.CmdDispatch(commands, (uint32_t)(groups < max_groups ? groups : max_groups), 1, 1);
    posenc_vk_debug_label_end(vk, commands);
    return POSENC_OK;
}
