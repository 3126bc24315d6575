/* SPDX-License-Identifier: MIT */
/* Placing the views of one operation on the device: device buffers as they are, host memory
 * (host tensors, buffers wrapping caller memory) copied into a host-visible staging buffer that
 * the kernels bind directly. Views whose bytes overlap (q and k slices of one fused array) share
 * one copy. After the call only the elements of the outputs go back, so bytes the call does not
 * own (the v slice, padding) are never rewritten. */
#include "vulkan/vk_internal.h"

#include <stdint.h>
#include <string.h>

/* Staging at most this large stays with the context for the next call; larger is freed. */
#define KEEP_STAGING_BYTES (UINT64_C(64) << 20)
/* Each copy starts on such a boundary, plus the host address modulo 16, so that a view keeps
 * its alignment (and a kernel binding can start at its first byte). */
#define INTERVAL_ALIGNMENT 256

static uint8_t *host_address(const posenc__view *view)
{
    if (view->host)
        return view->host + view->offset;
    if (view->buffer && view->buffer->host_memory)
        return (uint8_t *)view->buffer->host_memory + view->offset;
    return NULL;
}

posenc_vk_place posenc_vk_place_of(const posenc__view *view)
{
    const posenc_vk_buffer *state = view->buffer->backend_state;
    return (posenc_vk_place){state->allocation.buffer, state->base + state->allocation.size,
                             state->base + view->offset};
}

static uint64_t extent(const posenc__view *view)
{
    uint64_t bytes = posenc_dtype_size(view->dtype);
    for (int k = 0; k < POSENC_MAX_DIMS; k++)
        bytes += (uint64_t)(view->shape[k] - 1) * (uint64_t)view->strides[k];
    return bytes;
}

/* Adds [host, host + size) to the intervals, merging every interval it touches. */
static void add_interval(posenc_vk_staging *staging, uint8_t *host, uint64_t size)
{
    uintptr_t lo = (uintptr_t)host, hi = lo + (uintptr_t)size;
    for (uint32_t i = 0; i < staging->count;) {
        uintptr_t other_lo = (uintptr_t)staging->intervals[i].host;
        uintptr_t other_hi = other_lo + (uintptr_t)staging->intervals[i].size;
        if (other_hi < lo || hi < other_lo) {
            i++;
            continue;
        }
        lo = other_lo < lo ? other_lo : lo;
        hi = other_hi > hi ? other_hi : hi;
        staging->intervals[i] = staging->intervals[--staging->count];
        i = 0; /* the union may now touch an earlier one */
    }
    uint32_t n = staging->count++;
    staging->intervals[n].host = (uint8_t *)lo;
    staging->intervals[n].size = (uint64_t)(hi - lo);
}

posenc_status posenc_vk_place_views(posenc_context *ctx, const posenc__view *const *views,
                                    const bool *outputs, const char *const *names,
                                    uint32_t count, posenc_vk_place *places,
                                    posenc_vk_staging *staging)
{
    posenc_vk_context *vk = ctx->backend_state;
    memset(staging, 0, sizeof *staging);
    for (uint32_t i = 0; i < count; i++) {
        places[i] = (posenc_vk_place){0};
        const posenc__view *view = views[i];
        if (!view)
            continue;
        uint8_t *host = host_address(view);
        if (!host) {
            places[i] = posenc_vk_place_of(view);
            continue;
        }
        size_t element = posenc_dtype_size(view->dtype);
        if ((uintptr_t)host % element)
            return posenc__fail(ctx, POSENC_UNSUPPORTED,
                                "%s: host memory at %p is not aligned to its %zu-byte elements, "
                                "which the Vulkan kernels need",
                                names[i], (void *)host, element);
        add_interval(staging, host, extent(view));
    }
    if (staging->count == 0)
        return POSENC_OK;

    uint64_t total = 0;
    for (uint32_t i = 0; i < staging->count; i++) {
        uint64_t start = (total + INTERVAL_ALIGNMENT - 1) & ~(uint64_t)(INTERVAL_ALIGNMENT - 1);
        staging->intervals[i].offset = start + ((uintptr_t)staging->intervals[i].host & 15u);
        total = staging->intervals[i].offset + staging->intervals[i].size;
    }
    posenc_status status;
    posenc_vk_allocation *memory = &vk->staging;
    if (total <= KEEP_STAGING_BYTES) {
        status = posenc_vk_reserve(ctx, &vk->staging, total, "staging");
    } else {
        memory = &staging->temporary;
        status = posenc_vk_allocate(ctx, total, vk->host_memory_type, true, "staging",
                                    &staging->temporary);
    }
    if (status != POSENC_OK) {
        staging->count = 0;
        return status;
    }
    for (uint32_t i = 0; i < staging->count; i++)
        memcpy((uint8_t *)memory->mapped + staging->intervals[i].offset,
               staging->intervals[i].host, (size_t)staging->intervals[i].size);

    for (uint32_t v = 0; v < count; v++) {
        uint8_t *host = views[v] ? host_address(views[v]) : NULL;
        if (!host)
            continue;
        for (uint32_t i = 0; i < staging->count; i++) {
            uint8_t *start = staging->intervals[i].host;
            if (host >= start && host < start + staging->intervals[i].size) {
                uint64_t offset = staging->intervals[i].offset + (uint64_t)(host - start);
                places[v] = (posenc_vk_place){memory->buffer, memory->size, offset};
                if (outputs[v]) {
                    uint32_t o = staging->output_count++;
                    staging->outputs[o].view = views[v];
                    staging->outputs[o].host = host;
                    staging->outputs[o].offset = offset;
                }
                break;
            }
        }
    }
    return POSENC_OK;
}

/* Copies the elements of `view` from `from` to `to`, both laid out as the view from element 0:
 * runs of contiguous elements (dims packed behind each other) at a time. */
static void copy_elements(uint8_t *to, const uint8_t *from, const posenc__view *view)
{
    int64_t run = (int64_t)posenc_dtype_size(view->dtype);
    int inner = POSENC_MAX_DIMS; /* dims from here in are one run */
    while (inner > 0 && (view->shape[inner - 1] == 1 || view->strides[inner - 1] == run)) {
        run *= view->shape[inner - 1];
        inner--;
    }
    int64_t index[POSENC_MAX_DIMS] = {0, 0, 0, 0};
    for (;;) {
        int64_t at = 0;
        for (int k = 0; k < inner; k++)
            at += index[k] * view->strides[k];
        memcpy(to + at, from + at, (size_t)run);
        int k = inner - 1;
        while (k >= 0 && ++index[k] == view->shape[k])
            index[k--] = 0;
        if (k < 0)
            return;
    }
}

void posenc_vk_unstage(posenc_context *ctx, posenc_vk_staging *staging, bool copy_back)
{
    posenc_vk_context *vk = ctx->backend_state;
    const posenc_vk_allocation *memory =
        staging->temporary.buffer ? &staging->temporary : &vk->staging;
    for (uint32_t o = 0; o < staging->output_count && copy_back; o++)
        copy_elements(staging->outputs[o].host,
                      (const uint8_t *)memory->mapped + staging->outputs[o].offset,
                      staging->outputs[o].view);
    posenc_vk_release(ctx, &staging->temporary);
    staging->count = 0;
    staging->output_count = 0;
}
