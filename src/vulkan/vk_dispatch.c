/* SPDX-License-Identifier: MIT */
/* Splitting an operation into dispatches whose bindings each fit in one descriptor range
 * (maxStorageBufferRange: 128 MiB on lavapipe, 4 GiB on many GPUs), and recording a dispatch
 * within maxComputeWorkGroupCount. Each binding is bound at a window of its buffer that starts
 * at an aligned offset at or below the box's first byte; the kernel indexes from there. */
#include "vulkan/vk_internal.h"

#include <string.h>

/* Invocations of one dispatch stay below this, so that the kernels' 32-bit counters hold. */
#define MAX_UNITS (UINT64_C(1) << 31)
/* Windows start on a multiple of this (and of minStorageBufferOffsetAlignment), so that 16-bit
 * elements keep their half of a word and vectors their alignment. */
#define WINDOW_ALIGNMENT 16

typedef struct split_job {
    posenc_context *ctx;
    const posenc_vk_binding *bindings;
    uint32_t binding_count;
    uint64_t units_per_cell;
    uint64_t params_size;
    uint64_t alignment;
    uint64_t limit;
    posenc_vk_record_fn record;
    void *user;
    uint32_t boxes; /* recorded so far */
} split_job;

/* The window of `binding` for `box`: [base, base + range), with the box origin `first`
 * elements in. */
static void window_of(const split_job *job, const posenc_vk_binding *binding,
                      const posenc_vk_box *box, uint64_t *base, uint64_t *range, uint64_t *first)
{
    uint64_t lo = binding->place.offset;
    uint64_t span = (uint64_t)binding->inner;
    for (int k = 0; k < 3; k++) {
        lo += (uint64_t)box->start[k] * (uint64_t)binding->strides[k];
        span += (uint64_t)(box->count[k] - 1) * (uint64_t)binding->strides[k];
    }
    uint64_t unit = binding->element_size < 4 ? 4 : binding->element_size;
    uint64_t end = (lo + span + unit - 1) / unit * unit;
    if (end > binding->place.buffer_size)
        end = binding->place.buffer_size;
    *base = lo / job->alignment * job->alignment;
    *range = end - *base;
    *first = (lo - *base) / binding->element_size;
}

static posenc_status record_box(split_job *job, const posenc_vk_box *box)
{
    posenc_vk_context *vk = job->ctx->backend_state;
    posenc_vk_windows windows;
    for (uint32_t i = 0; i < POSENC_VK_BINDINGS; i++) {
        /* The placeholder: 16 bytes no kernel reads. */
        windows.infos[i] = (VkDescriptorBufferInfo){vk->placeholder.buffer, 0, 16};
        windows.first[i] = 0;
        if (i < job->binding_count && job->bindings[i].place.buffer) {
            uint64_t base, range, first;
            window_of(job, &job->bindings[i], box, &base, &range, &first);
            windows.infos[i] = (VkDescriptorBufferInfo){job->bindings[i].place.buffer, base,
                                                        range};
            windows.first[i] = (uint32_t)first;
        }
    }
    if (job->params_size && vk->table)
        windows.infos[POSENC_VK_BINDINGS - 1] = (VkDescriptorBufferInfo){
            vk->table->memory.buffer, 0, (job->params_size + 15) & ~15ull};
    job->boxes++;
    return job->record(job->ctx, box, &windows, job->user);
}

static posenc_status split(split_job *job, const posenc_vk_box *box)
{
    /* The binding whose window is the largest of those too large, if any. */
    int worst = -1;
    uint64_t worst_range = 0;
    for (uint32_t i = 0; i < job->binding_count; i++) {
        if (!job->bindings[i].place.buffer)
            continue;
        uint64_t base, range, first;
        window_of(job, &job->bindings[i], box, &base, &range, &first);
        if (range > job->limit && range > worst_range) {
            worst = (int)i;
            worst_range = range;
        }
    }
    uint64_t cells = 1;
    for (int k = 0; k < 3; k++)
        cells *= (uint64_t)box->count[k];
    bool too_many = cells > MAX_UNITS / job->units_per_cell;
    if (worst < 0 && !too_many)
        return record_box(job, box);

    /* Halve the dim that spans the most of that binding (or the longest dim). */
    int dim = -1;
    for (int k = 0; k < 3; k++) {
        if (box->count[k] < 2)
            continue;
        if (dim < 0)
            dim = k;
        else if (worst >= 0 ? (box->count[k] - 1) * job->bindings[worst].strides[k] >
                                  (box->count[dim] - 1) * job->bindings[worst].strides[dim]
                            : box->count[k] > box->count[dim])
            dim = k;
    }
    if (dim < 0 || (worst >= 0 && job->bindings[worst].strides[dim] == 0))
        return posenc__fail(job->ctx, POSENC_UNSUPPORTED,
                            "%s: one unit of work spans %llu bytes, more than one kernel binding "
                            "may address on this device (maxStorageBufferRange %llu)",
                            worst >= 0 ? job->bindings[worst].name : "shape",
                            (unsigned long long)worst_range, (unsigned long long)job->limit);
    posenc_vk_box half = *box;
    half.count[dim] = box->count[dim] / 2;
    posenc_status status = split(job, &half);
    if (status != POSENC_OK)
        return status;
    half.start[dim] = box->start[dim] + half.count[dim];
    half.count[dim] = box->count[dim] - half.count[dim];
    return split(job, &half);
}

posenc_status posenc_vk_split(posenc_context *ctx, const posenc_vk_binding *bindings,
                              uint32_t binding_count, const int64_t shape[3],
                              uint64_t units_per_cell, uint64_t params_size,
                              posenc_vk_record_fn record, void *user)
{
    posenc_vk_context *vk = ctx->backend_state;
    uint64_t alignment = vk->physical->binding_alignment;
    if (alignment < WINDOW_ALIGNMENT)
        alignment = WINDOW_ALIGNMENT;
    if (params_size > vk->binding_limit)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "rotary_dim: %llu bytes of frequencies are more than one kernel "
                            "binding may address on this device",
                            (unsigned long long)params_size);
    split_job job = {
        .ctx = ctx,
        .bindings = bindings,
        .binding_count = binding_count,
        .units_per_cell = units_per_cell ? units_per_cell : 1,
        .params_size = params_size,
        .alignment = alignment,
        .limit = vk->binding_limit,
        .record = record,
        .user = user,
    };
    posenc_vk_box box = {{0, 0, 0}, {shape[0], shape[1], shape[2]}};
    posenc_status status = split(&job, &box);
    if (status == POSENC_OK && job.boxes > 1)
        posenc__log(ctx, POSENC_LOG_DEBUG,
                    "vulkan: split into %u dispatches, each binding within %llu bytes", job.boxes,
                    (unsigned long long)job.limit);
    return status;
}

static bool ranges_overlap(const VkDescriptorBufferInfo *a, const VkDescriptorBufferInfo *b)
{
    return a->buffer == b->buffer && a->offset < b->offset + b->range &&
           b->offset < a->offset + a->range;
}

/* Whether two dispatches of one call touch the same bytes where one of them writes (binding 0,
 * the output, is the only one the kernels write): q and k slices of one fused tensor, or the
 * windows of a split tensor, which are aligned down and may share a few bytes. */
static bool needs_barrier(const VkDescriptorBufferInfo *previous,
                          const VkDescriptorBufferInfo *next)
{
    for (uint32_t i = 0; i < POSENC_VK_BINDINGS; i++) {
        if (ranges_overlap(&previous[0], &next[i]) || ranges_overlap(&next[0], &previous[i]))
            return true;
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
    if (vk->dispatches > 0 && needs_barrier(vk->previous, windows->infos)) {
        VkMemoryBarrier barrier = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
        };
        vk->fns.CmdPipelineBarrier(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, NULL,
                                   0, NULL);
    }
    memcpy(vk->previous, windows->infos, sizeof vk->previous);
    vk->dispatches++;
    vk->fns.CmdBindPipeline(commands, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    if (vk->CmdPushDescriptorSetKHR) {
        VkWriteDescriptorSet writes[POSENC_VK_BINDINGS];
        for (uint32_t i = 0; i < POSENC_VK_BINDINGS; i++) {
            writes[i] = (VkWriteDescriptorSet){
                .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                .dstBinding = i,
                .descriptorCount = 1,
                .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                .pBufferInfo = &windows->infos[i],
            };
        }
        vk->CmdPushDescriptorSetKHR(commands, VK_PIPELINE_BIND_POINT_COMPUTE,
                                    vk->pipeline_layout, 0, POSENC_VK_BINDINGS, writes);
    } else {
        vk->fns.CmdBindDescriptorSets(commands, VK_PIPELINE_BIND_POINT_COMPUTE,
                                      vk->pipeline_layout, 0, 1, &set, 0, NULL);
    }
    vk->fns.CmdPushConstants(commands, vk->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                             push_size, push);
    uint64_t groups = (invocations + POSENC_VK_LOCAL_SIZE - 1) / POSENC_VK_LOCAL_SIZE;
    uint64_t max_groups = vk->physical->max_group_count;
    if (max_groups > 65535) /* plenty to fill any device; the kernels loop over the rest */
        max_groups = 65535;
    vk->fns.CmdDispatch(commands, (uint32_t)(groups < max_groups ? groups : max_groups), 1, 1);
    return POSENC_OK;
}
