/* SPDX-License-Identifier: MIT */
/* Placing the views of one operation on the device: device buffers as they are, host memory
 * (host tensors, buffers wrapping caller memory) imported in place where the device can
 * (vk_import.c), else in a host-visible staging buffer that the kernels bind directly, laid out
 * and copied back as core/gpu_staging.h plans it. */
#include "vulkan/vk_internal.h"

#include <string.h>

/* Host regions smaller than this are copied, not imported: creating and freeing an import costs
 * more than copying a few pages (on lavapipe an 80 KiB RoPE was slower imported, a 160 KiB one
 * faster; see docs/benchmarks.md). */
#define IMPORT_MIN_BYTES (UINT64_C(128) << 10)

static uint8_t *host_address(const posenc__view *view)
{
    if (view->host)
        return view->host + view->offset;
    if (view->buffer && view->buffer->host_memory && !view->buffer->host_imported)
        return (uint8_t *)view->buffer->host_memory + view->offset;
    return NULL;
}

/* Imports one region the plan offers (posenc__gpu_stage_import). */
static bool import_region(posenc_context *ctx, void *user, uint32_t r, uint8_t *lo,
                          uint64_t size, const char *name)
{
    posenc_vk_staging *staging = user;
    return posenc_vk_import(ctx, lo, size, name, &staging->imports[r], &staging->import_base[r]);
}

posenc_vk_place posenc_vk_place_of(const posenc__view *view)
{
    const posenc_vk_buffer *state = view->buffer->backend_state;
    return (posenc_vk_place){state->allocation.buffer, state->base + state->allocation.size,
                             state->base + view->offset};
}

static const posenc_vk_allocation *staging_memory(const posenc_context *ctx,
                                                  const posenc_vk_staging *staging)
{
    const posenc_vk_context *vk = ctx->backend_state;
    return staging->temporary.buffer ? &staging->temporary : &vk->staging;
}

posenc_status posenc_vk_place_views(posenc_context *ctx, const posenc__view *const *views,
                                    const unsigned *access, const char *const *names,
                                    uint32_t count, posenc_vk_place *places,
                                    posenc_vk_staging *staging)
{
    posenc_vk_context *vk = ctx->backend_state;
    memset(staging, 0, sizeof *staging);
    posenc__gpu_staging *plan = &staging->plan;
    uint32_t index[POSENC__GPU_MAX_VIEWS] = {0};
    for (uint32_t i = 0; i < count; i++) {
        places[i] = (posenc_vk_place){0};
        if (views[i])
            index[i] = posenc__gpu_stage_add(plan, views[i], names[i], access[i],
                                             host_address(views[i]));
    }
    posenc_status status = posenc__gpu_stage_plan(ctx, plan);
    if (status == POSENC_OK && vk->host_import)
        posenc__gpu_stage_import(ctx, &staging->plan, IMPORT_MIN_BYTES, import_region, staging);
    if (status != POSENC_OK || plan->region_count == 0) {
        plan->region_count = 0;
        for (uint32_t i = 0; i < count && status == POSENC_OK; i++) {
            if (views[i])
                places[i] = posenc_vk_place_of(views[i]);
        }
        return status;
    }
    if (plan->bytes == 0)
        status = POSENC_OK; /* every region imported */
    else if (plan->bytes <= POSENC__GPU_STAGING_KEEP_BYTES)
        status = posenc_vk_reserve(ctx, &vk->staging, plan->bytes, "staging");
    else
        status = posenc_vk_allocate(ctx, plan->bytes, vk->host_memory_type, true, "staging",
                                    &staging->temporary);
    if (status == POSENC_OK)
        posenc_vk_debug_name_allocation(vk, &staging->temporary, "posenc staging");
    if (status != POSENC_OK) {
        posenc_vk_unstage(ctx, staging, false);
        return status;
    }
    const posenc_vk_allocation *memory = staging_memory(ctx, staging);
    for (uint32_t r = 0; r < plan->region_count; r++) {
        if (plan->regions[r].upload && !plan->regions[r].imported)
            posenc__gpu_stage_copy_in(plan, r, memory->mapped);
    }
    posenc__atomic64_add(&ctx->stats.staged_bytes, plan->upload_bytes);
    for (uint32_t i = 0; i < count; i++) {
        if (!views[i])
            continue;
        const posenc__gpu_staged_view *v = &plan->views[index[i]];
        const posenc_vk_allocation *import = &staging->imports[v->region];
        if (!v->host)
            places[i] = posenc_vk_place_of(views[i]);
        else if (plan->regions[v->region].imported)
            places[i] = (posenc_vk_place){import->buffer, import->size,
                                          staging->import_base[v->region] + v->position};
        else
            places[i] = (posenc_vk_place){memory->buffer, memory->size, v->position};
    }
    return POSENC_OK;
}

void posenc_vk_unstage(posenc_context *ctx, posenc_vk_staging *staging, bool copy_back)
{
    const posenc__gpu_staging *plan = &staging->plan;
    const posenc_vk_allocation *memory = staging_memory(ctx, staging);
    for (uint32_t r = 0; r < plan->region_count && copy_back; r++) {
        if (plan->regions[r].written && !plan->regions[r].imported)
            posenc__gpu_stage_copy_out(plan, r,
                                       (const uint8_t *)memory->mapped + plan->regions[r].offset);
    }
    if (copy_back && plan->region_count)
        posenc__atomic64_add(&ctx->stats.staged_bytes, plan->download_bytes);
    for (uint32_t r = 0; r < plan->region_count; r++)
        posenc_vk_release(ctx, &staging->imports[r]);
    posenc_vk_release(ctx, &staging->temporary);
    staging->plan.region_count = 0;
}
