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

/* Imports one region the plan offers (posenc__gpu_stage_in's hooks, here and below; `user` is
 * the call's staging). */
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

static posenc_status bind(posenc_context *ctx, void *user, uint32_t view,
                          posenc__gpu_memory memory, uint32_t region, uint64_t position)
{
    const posenc_vk_staging *staging = user;
    const posenc_vk_allocation *import = &staging->imports[region];
    const posenc_vk_allocation *area = staging_memory(ctx, staging);
    switch (memory) {
    case POSENC__GPU_IN_DEVICE:
        *staging->places[view] = posenc_vk_place_of(staging->plan.views[view].view);
        break;
    case POSENC__GPU_IN_IMPORT:
        *staging->places[view] = (posenc_vk_place){import->buffer, import->size,
                                                   staging->import_base[region] + position};
        break;
    case POSENC__GPU_IN_STAGING:
        *staging->places[view] = (posenc_vk_place){area->buffer, area->size, position};
        break;
    }
    return POSENC_OK;
}

static posenc_status reserve(posenc_context *ctx, void *user, uint64_t bytes, const char *name)
{
    return posenc_vk_reserve(ctx, bytes, &((posenc_vk_staging *)user)->temporary);
}

static posenc_status upload(posenc_context *ctx, void *user, uint32_t region, const char *name)
{
    const posenc_vk_staging *staging = user;
    const posenc__gpu_region *r = &staging->plan.regions[region];
    memcpy((uint8_t *)staging_memory(ctx, staging)->mapped + r->offset, r->lo,
           (size_t)(r->hi - r->lo));
    return POSENC_OK;
}

posenc_status posenc_vk_place_views(posenc_context *ctx, const posenc__view *const *views,
                                    const unsigned *access, const char *const *names,
                                    uint32_t count, posenc_vk_place *places,
                                    posenc_vk_staging *staging)
{
    posenc_vk_context *vk = ctx->backend_state;
    memset(staging, 0, sizeof *staging);
    for (uint32_t i = 0; i < count; i++) {
        places[i] = (posenc_vk_place){0};
        if (views[i])
            staging->places[posenc__gpu_stage_add(&staging->plan, views[i], names[i], access[i],
                                                  NULL)] = &places[i];
    }
    posenc__gpu_stage_hooks hooks = {
        .bind = bind,
        .reserve = reserve,
        .upload = upload,
        .import = vk->host_import ? import_region : NULL,
        .import_min_bytes = IMPORT_MIN_BYTES,
    };
    return posenc__gpu_stage_in(ctx, &staging->plan, &hooks, staging);
}

/* Staging memory (the context's, or the call's temporary area) stays mapped and is coherent: a
 * region is read where it lies, and copying back cannot fail (posenc__gpu_stage_out's hook). */
static posenc_status map_region(posenc_context *ctx, void *user, uint32_t region,
                                const uint8_t **bytes)
{
    const posenc_vk_staging *staging = user;
    *bytes = (const uint8_t *)staging_memory(ctx, staging)->mapped +
             staging->plan.regions[region].offset;
    return POSENC_OK;
}

void posenc_vk_unstage(posenc_context *ctx, posenc_vk_staging *staging, bool copy_back)
{
    const posenc__gpu_staging *plan = &staging->plan;
    static const posenc__gpu_stage_out_hooks hooks = {.map = map_region};
    if (copy_back)
        (void)posenc__gpu_stage_out(ctx, plan, &hooks, staging);
    for (uint32_t r = 0; r < plan->region_count; r++)
        posenc_vk_release(ctx, &staging->imports[r]);
    posenc_vk_release(ctx, &staging->temporary);
    staging->plan.region_count = 0;
}
