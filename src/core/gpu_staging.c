/* SPDX-License-Identifier: MIT */
/* The staging plan of one GPU operation (gpu_staging.h): regions, their place in the staging
 * area, and the element copies back to host memory. */
#include "core/gpu_staging.h"

#include <string.h>

/* Regions keep their views' host addresses modulo this much where the views allow it. */
#define LEAD_MODULUS 16

uint64_t posenc__gpu_view_extent(const posenc__view *view)
{
    uint64_t extent = posenc__dtype_size(view->dtype);
    for (int k = 0; k < POSENC_MAX_DIMS; k++)
        extent += (uint64_t)(view->shape[k] - 1) * (uint64_t)view->strides[k];
    return extent;
}

static uint64_t view_elements(const posenc__view *view)
{
    uint64_t count = 1;
    for (int k = 0; k < POSENC_MAX_DIMS; k++)
        count *= (uint64_t)view->shape[k];
    return count;
}

/* Every byte of the extent is an element: no gaps to preserve. */
static bool view_dense(const posenc__view *view)
{
    return view_elements(view) * posenc__dtype_size(view->dtype) == posenc__gpu_view_extent(view);
}

uint32_t posenc__gpu_stage_add(posenc__gpu_staging *staging, const posenc__view *view,
                               const char *name, unsigned access, uint8_t *host)
{
    if (staging->view_count >= POSENC__GPU_MAX_VIEWS)
        return POSENC__GPU_MAX_VIEWS - 1; /* callers add at most POSENC__GPU_MAX_VIEWS views */
    uint32_t index = staging->view_count++;
    staging->views[index] = (posenc__gpu_staged_view){
        .view = view, .name = name, .access = access, .host = host};
    return index;
}

/* Regions: the union of overlapping host byte ranges, merged until none overlap. A merge keeps
 * the lower index, so region 0 holds the first host view. */
static void build_regions(posenc__gpu_staging *staging)
{
    staging->region_count = 0;
    for (uint32_t i = 0; i < staging->view_count; i++) {
        posenc__gpu_staged_view *v = &staging->views[i];
        if (!v->host)
            continue;
        staging->regions[staging->region_count] = (posenc__gpu_region){
            .lo = v->host, .hi = v->host + posenc__gpu_view_extent(v->view)};
        v->region = staging->region_count++;
    }
    for (bool merged = true; merged;) {
        merged = false;
        for (uint32_t a = 0; a < staging->region_count && !merged; a++) {
            for (uint32_t b = a + 1; b < staging->region_count && !merged; b++) {
                posenc__gpu_region *ra = &staging->regions[a], *rb = &staging->regions[b];
                if (rb->lo >= ra->hi || ra->lo >= rb->hi)
                    continue;
                ra->lo = rb->lo < ra->lo ? rb->lo : ra->lo;
                ra->hi = rb->hi > ra->hi ? rb->hi : ra->hi;
                /* b goes; the last region takes its index. */
                uint32_t last = staging->region_count - 1;
                for (uint32_t i = 0; i < staging->view_count; i++) {
                    posenc__gpu_staged_view *v = &staging->views[i];
                    if (!v->host)
                        continue;
                    if (v->region == b)
                        v->region = a;
                    else if (v->region == last)
                        v->region = b;
                }
                staging->regions[b] = staging->regions[last];
                staging->region_count--;
                merged = true;
            }
        }
    }
}

/* The smallest shift t that puts every view of region `r` on an element boundary once the
 * region starts at an address congruent to lo + t; -1 when none does (views of different
 * dtypes misaligned against each other in the same memory). */
static int region_shift(const posenc__gpu_staging *staging, uint32_t r)
{
    for (int t = 0; t < LEAD_MODULUS; t++) {
        bool fits = true;
        for (uint32_t i = 0; i < staging->view_count && fits; i++) {
            const posenc__gpu_staged_view *v = &staging->views[i];
            if (v->host && v->region == r)
                fits = ((uintptr_t)v->host + (uintptr_t)t) % posenc__dtype_size(v->view->dtype) ==
                       0;
        }
        if (fits)
            return t;
    }
    return -1;
}

void posenc__gpu_stage_layout(posenc__gpu_staging *staging)
{
    staging->bytes = 0;
    staging->upload_bytes = 0;
    staging->download_bytes = 0;
    for (uint32_t r = 0; r < staging->region_count; r++) {
        posenc__gpu_region *region = &staging->regions[r];
        if (region->imported) {
            region->offset = 0;
            continue;
        }
        uint64_t size = (uint64_t)(region->hi - region->lo);
        uint64_t start = (staging->bytes + POSENC__GPU_REGION_ALIGNMENT - 1) &
                         ~(uint64_t)(POSENC__GPU_REGION_ALIGNMENT - 1);
        region->offset = start + region->lead;
        staging->bytes = region->offset + size;
        if (region->upload)
            staging->upload_bytes += size;
        if (region->whole)
            staging->download_bytes += size;
    }
    for (uint32_t i = 0; i < staging->view_count; i++) {
        posenc__gpu_staged_view *v = &staging->views[i];
        if (!v->host)
            continue;
        const posenc__gpu_region *region = &staging->regions[v->region];
        v->position = region->offset + (uint64_t)(v->host - region->lo);
        if ((v->access & POSENC__GPU_WRITE) && !region->imported && !region->whole)
            staging->download_bytes += view_elements(v->view) * posenc__dtype_size(v->view->dtype);
    }
}

posenc_status posenc__gpu_stage_plan(posenc_context *ctx, posenc__gpu_staging *staging)
{
    build_regions(staging);
    for (uint32_t r = 0; r < staging->region_count; r++) {
        posenc__gpu_region *region = &staging->regions[r];
        uint32_t views = 0;
        bool packed_output = true;
        for (uint32_t i = 0; i < staging->view_count; i++) {
            const posenc__gpu_staged_view *v = &staging->views[i];
            if (!v->host || v->region != r)
                continue;
            region->name = views++ ? region->name : v->name;
            region->written |= (v->access & POSENC__GPU_WRITE) != 0;
            packed_output = packed_output && v->access == POSENC__GPU_WRITE && view_dense(v->view);
        }
        /* One packed output is written whole by the kernel: nothing to copy in. Anything else
         * is copied in, gaps included, since only elements are copied back. */
        region->whole = views == 1 && packed_output;
        region->upload = !region->whole;
        int shift = region_shift(staging, r);
        if (shift < 0)
            return posenc__fail(ctx, POSENC_UNSUPPORTED,
                                "%s: host tensors sharing this memory are misaligned against "
                                "each other for their dtypes; align them to their element sizes",
                                region->name);
        region->lead = (uint32_t)(((uintptr_t)region->lo + (uintptr_t)shift) % LEAD_MODULUS);
    }
    posenc__gpu_stage_layout(staging);
    return POSENC_OK;
}

bool posenc__gpu_stage_importable(const posenc__gpu_staging *staging, uint32_t r)
{
    for (uint32_t i = 0; i < staging->view_count; i++) {
        const posenc__gpu_staged_view *v = &staging->views[i];
        if (v->host && v->region == r &&
            (uintptr_t)v->host % posenc__dtype_size(v->view->dtype) != 0)
            return false;
    }
    return true;
}

bool posenc__gpu_stage_has_host(const posenc__gpu_staging *staging)
{
    for (uint32_t i = 0; i < staging->view_count; i++) {
        if (staging->views[i].host)
            return true;
    }
    return false;
}

/* Copies the elements of `view` from `src` to `dst`, both laid out with the view's strides:
 * contiguous runs at once, dims merged where they are contiguous. */
static void copy_elements(uint8_t *dst, const uint8_t *src, const posenc__view *view)
{
    int64_t shape[POSENC_MAX_DIMS], stride[POSENC_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < POSENC_MAX_DIMS; k++) {
        if (view->shape[k] == 1)
            continue;
        if (n > 0 && stride[n - 1] == view->shape[k] * view->strides[k]) {
            shape[n - 1] *= view->shape[k]; /* the outer dim continues the inner one */
            stride[n - 1] = view->strides[k];
            continue;
        }
        shape[n] = view->shape[k];
        stride[n] = view->strides[k];
        n++;
    }
    size_t run = posenc__dtype_size(view->dtype);
    if (n > 0 && stride[n - 1] == (int64_t)run) {
        run *= (size_t)shape[n - 1];
        n--;
    }
    int64_t index[POSENC_MAX_DIMS] = {0, 0, 0, 0};
    for (;;) {
        int64_t at = 0;
        for (int k = 0; k < n; k++)
            at += index[k] * stride[k];
        memcpy(dst + at, src + at, run);
        int k = n - 1;
        while (k >= 0 && ++index[k] == shape[k])
            index[k--] = 0;
        if (k < 0)
            return;
    }
}

/* Copies back the elements of the written views of region `r` from `region_bytes`, the device
 * copy of the region's first byte (lo) as the backend sees it mapped. */
static void copy_out(const posenc__gpu_staging *staging, uint32_t r, const uint8_t *region_bytes)
{
    const posenc__gpu_region *region = &staging->regions[r];
    if (region->whole) {
        memcpy(region->lo, region_bytes, (size_t)(region->hi - region->lo));
        return;
    }
    for (uint32_t i = 0; i < staging->view_count; i++) {
        const posenc__gpu_staged_view *v = &staging->views[i];
        if (v->host && v->region == r && (v->access & POSENC__GPU_WRITE))
            copy_elements(v->host, region_bytes + (v->host - region->lo), v->view);
    }
}

/* Offers the backend the regions it may import (the import hook); those it takes are marked. */
static void import_regions(posenc_context *ctx, posenc__gpu_staging *staging,
                           const posenc__gpu_stage_hooks *hooks, void *user)
{
    bool any = false;
    for (uint32_t r = 0; r < staging->region_count; r++) {
        posenc__gpu_region *region = &staging->regions[r];
        uint64_t size = (uint64_t)(region->hi - region->lo);
        if (size < hooks->import_min_bytes || !posenc__gpu_stage_importable(staging, r))
            continue;
        region->imported = hooks->import(ctx, user, r, region->lo, size, region->name);
        any = any || region->imported;
    }
    if (any)
        posenc__gpu_stage_layout(staging);
}

uint8_t *posenc__gpu_view_host(const posenc__view *view)
{
    if (view->host)
        return view->host + view->offset;
    const posenc_buffer *buffer = view->buffer;
    if (buffer && buffer->host_memory && !buffer->host_imported)
        return (uint8_t *)buffer->host_memory + view->offset;
    return NULL;
}

posenc_status posenc__gpu_stage_in(posenc_context *ctx, posenc__gpu_staging *staging,
                                   const posenc__gpu_stage_hooks *hooks, void *user)
{
    posenc_status status = POSENC_OK;
    for (uint32_t i = 0; i < staging->view_count && status == POSENC_OK; i++) {
        posenc__gpu_staged_view *v = &staging->views[i];
        v->host = posenc__gpu_view_host(v->view);
        if (!v->host)
            status = hooks->bind(ctx, user, i, POSENC__GPU_IN_DEVICE, 0, 0);
    }
    if (status == POSENC_OK)
        status = posenc__gpu_stage_plan(ctx, staging);
    if (status != POSENC_OK || staging->region_count == 0)
        return status;
    if (hooks->import)
        import_regions(ctx, staging, hooks, user);

    /* Messages name the first staged view, which region 0 holds (build_regions). */
    const char *name = staging->regions[0].name;
    if (staging->bytes > 0)
        status = hooks->reserve(ctx, user, staging->bytes, name);
    for (uint32_t i = 0; i < staging->view_count && status == POSENC_OK; i++) {
        const posenc__gpu_staged_view *v = &staging->views[i];
        if (v->host)
            status = hooks->bind(ctx, user, i,
                                 staging->regions[v->region].imported ? POSENC__GPU_IN_IMPORT
                                                                      : POSENC__GPU_IN_STAGING,
                                 v->region, v->position);
    }
    for (uint32_t r = 0; r < staging->region_count && status == POSENC_OK; r++) {
        if (staging->regions[r].upload && !staging->regions[r].imported)
            status = hooks->upload(ctx, user, r, name);
    }
    if (status == POSENC_OK)
        posenc__atomic64_add(&ctx->stats.staged_bytes, staging->upload_bytes);
    return status;
}

posenc_status posenc__gpu_stage_out(posenc_context *ctx, const posenc__gpu_staging *staging,
                                    const posenc__gpu_stage_out_hooks *hooks, void *user)
{
    uint32_t staged = 0, only = 0;
    for (uint32_t r = 0; r < staging->region_count; r++) {
        if (staging->regions[r].written && !staging->regions[r].imported) {
            staged++;
            only = r;
        }
    }
    bool read_lone = hooks->read && staged == 1 && staging->regions[only].whole;
    posenc__gpu_read reads[2 * POSENC__GPU_MAX_VIEWS];
    uint32_t count = 0;
    for (uint32_t i = 0; i < staging->view_count && hooks->read; i++) {
        const posenc__gpu_staged_view *v = &staging->views[i];
        const posenc_buffer *buf = v->view->buffer;
        if (buf && buf->host_imported && (v->access & POSENC__GPU_WRITE))
            reads[count++] = (posenc__gpu_read){POSENC__GPU_IN_DEVICE, i, v->view->offset,
                                                posenc__gpu_view_extent(v->view),
                                                (uint8_t *)buf->host_memory + v->view->offset};
    }
    for (uint32_t r = 0; r < staging->region_count && hooks->read; r++) {
        const posenc__gpu_region *region = &staging->regions[r];
        if (region->written && (region->imported || read_lone))
            reads[count++] = (posenc__gpu_read){
                region->imported ? POSENC__GPU_IN_IMPORT : POSENC__GPU_IN_STAGING, r,
                region->offset, (uint64_t)(region->hi - region->lo), region->lo};
    }
    posenc_status status = count ? hooks->read(ctx, user, reads, count) : POSENC_OK;
    if (status == POSENC_OK && staged && !read_lone) {
        const uint8_t *mapped[POSENC__GPU_MAX_VIEWS] = {0};
        for (uint32_t r = 0; r < staging->region_count && status == POSENC_OK; r++) {
            if (staging->regions[r].written && !staging->regions[r].imported)
                status = hooks->map(ctx, user, r, &mapped[r]);
        }
        for (uint32_t r = 0; r < staging->region_count && status == POSENC_OK; r++) {
            if (mapped[r])
                copy_out(staging, r, mapped[r]);
        }
        /* The outputs are the caller's now: a failed unmap costs the backend its staging
         * allocation, not them. */
        if (hooks->unmap)
            hooks->unmap(ctx, user, mapped);
    }
    if (status == POSENC_OK && staging->region_count)
        posenc__atomic64_add(&ctx->stats.staged_bytes, staging->download_bytes);
    return status;
}
