/* SPDX-License-Identifier: MIT */
/* Binding the tensors of one operation to device memory. Views in device buffers are used in
 * place. Host views and wrapped buffers are staged: views whose host bytes overlap share one
 * region (in place, fused qkv slices), each region is copied into a reusable device allocation
 * before the kernel, and afterwards only the elements of the written views are copied back, so
 * bytes between them (another slice, padding) are never rewritten. */
#include "opencl/cl_internal.h"

#include <string.h>

#define ELEMENT_LIMIT (UINT64_C(1) << 32)   /* kernels index elements with 32-bit words */
#define TRIM_BYTES (UINT64_C(64) << 20)     /* larger staging allocations are not kept */
#define MIN_SLOT_BYTES 4096

static uint64_t view_extent(const posenc__view *view)
{
    uint64_t extent = posenc_dtype_size(view->dtype);
    for (int k = 0; k < POSENC_MAX_DIMS; k++)
        extent += (uint64_t)(view->shape[k] - 1) * (uint64_t)view->strides[k];
    return extent;
}

/* Every byte of the extent is an element: no gaps to preserve. */
static bool view_dense(const posenc__view *view)
{
    uint64_t count = 1;
    for (int k = 0; k < POSENC_MAX_DIMS; k++)
        count *= (uint64_t)view->shape[k];
    return count * posenc_dtype_size(view->dtype) == view_extent(view);
}

void posenc_cl_stage_add(posenc_cl_staging *staging, const posenc__view *view, const char *name,
                         bool written, posenc_cl_binding *binding)
{
    if (staging->view_count >= POSENC_CL_MAX_VIEWS)
        return; /* callers add at most POSENC_CL_MAX_VIEWS views */
    posenc_cl_staged_view *v = &staging->views[staging->view_count++];
    memset(v, 0, sizeof *v);
    v->view = view;
    v->name = name;
    v->written = written;
    v->binding = binding;
}

/* Offset and strides in elements, from the element's position in its allocation. */
static posenc_status bind(posenc_context *ctx, const posenc_cl_staged_view *v, cl_mem mem,
                          uint64_t byte_position)
{
    const posenc__view *view = v->view;
    uint64_t element = posenc_dtype_size(view->dtype);
    uint64_t end = (byte_position + view_extent(view)) / element;
    if (end > ELEMENT_LIMIT)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "%s: the view reaches element %llu of its device allocation; OpenCL "
                            "kernels index at most 2^32 elements",
                            v->name, (unsigned long long)end);
    posenc_cl_binding *b = v->binding;
    b->mem = mem;
    b->offset = (uint32_t)(byte_position / element);
    for (int k = 0; k < POSENC_MAX_DIMS; k++)
        b->strides[k] = view->shape[k] > 1 ? (uint32_t)((uint64_t)view->strides[k] / element) : 0;
    return POSENC_OK;
}

/* Regions: the union of overlapping host byte ranges, merged until none overlap. */
static void build_regions(posenc_cl_staging *staging)
{
    staging->region_count = 0;
    for (uint32_t i = 0; i < staging->view_count; i++) {
        posenc_cl_staged_view *v = &staging->views[i];
        if (!v->host)
            continue;
        posenc_cl_region *r = &staging->regions[staging->region_count];
        memset(r, 0, sizeof *r);
        r->lo = v->host;
        r->hi = v->host + view_extent(v->view);
        v->region = staging->region_count++;
    }
    for (bool merged = true; merged;) {
        merged = false;
        for (uint32_t a = 0; a < staging->region_count && !merged; a++) {
            for (uint32_t b = a + 1; b < staging->region_count && !merged; b++) {
                posenc_cl_region *ra = &staging->regions[a], *rb = &staging->regions[b];
                if (rb->lo >= ra->hi || ra->lo >= rb->hi)
                    continue;
                if (rb->lo < ra->lo)
                    ra->lo = rb->lo;
                if (rb->hi > ra->hi)
                    ra->hi = rb->hi;
                /* b goes; the last region takes its index. */
                uint32_t last = staging->region_count - 1;
                for (uint32_t i = 0; i < staging->view_count; i++) {
                    posenc_cl_staged_view *v = &staging->views[i];
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

/* The smallest shift t (0..3) that puts every view of the region on an element boundary once
 * the region starts at an address congruent to lo + t modulo 4; -1 when none does (views of
 * different dtypes misaligned against each other in the same memory). */
static int region_shift(const posenc_cl_staging *staging, uint32_t region)
{
    for (int t = 0; t < 4; t++) {
        bool fits = true;
        for (uint32_t i = 0; i < staging->view_count && fits; i++) {
            const posenc_cl_staged_view *v = &staging->views[i];
            if (v->host && v->region == region)
                fits = ((uintptr_t)v->host + (uintptr_t)t) % posenc_dtype_size(v->view->dtype) ==
                       0;
        }
        if (fits)
            return t;
    }
    return -1;
}

static posenc_status ensure_slot(posenc_context *ctx, posenc_cl_slot *slot, uint64_t bytes,
                                 const char *name)
{
    posenc_cl_context *state = ctx->backend_state;
    if (slot->mem && slot->capacity >= bytes)
        return POSENC_OK;
    if (bytes > state->device->max_alloc_bytes || bytes > SIZE_MAX)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "%s: the host tensor spans %llu bytes, more than the largest "
                            "allocation of this OpenCL device (%llu bytes); use a smaller "
                            "tensor or split the call",
                            name, (unsigned long long)bytes,
                            (unsigned long long)state->device->max_alloc_bytes);
    if (slot->mem)
        state->cl->ReleaseMemObject(slot->mem);
    slot->mem = NULL;
    slot->capacity = 0;
    uint64_t capacity = bytes < MIN_SLOT_BYTES ? MIN_SLOT_BYTES : bytes;
    if (capacity > state->device->max_alloc_bytes)
        capacity = bytes;
    cl_int err = CL_SUCCESS;
    cl_mem mem = state->cl->CreateBuffer(state->context, CL_MEM_READ_WRITE, (size_t)capacity,
                                         NULL, &err);
    if (err != CL_SUCCESS || !mem) {
        if (mem)
            state->cl->ReleaseMemObject(mem);
        return posenc_cl_fail(ctx, err == CL_SUCCESS ? CL_MEM_OBJECT_ALLOCATION_FAILURE : err,
                              name, "clCreateBuffer (staging)");
    }
    slot->mem = mem;
    slot->capacity = capacity;
    return POSENC_OK;
}

posenc_status posenc_cl_stage_in(posenc_context *ctx, posenc_cl_staging *staging)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc_status status = POSENC_OK;

    for (uint32_t i = 0; i < staging->view_count && status == POSENC_OK; i++) {
        posenc_cl_staged_view *v = &staging->views[i];
        cl_mem mem = v->view->buffer ? posenc_cl_buffer_mem(v->view->buffer) : NULL;
        if (mem)
            status = bind(ctx, v, mem, v->view->offset);
        else
            v->host = posenc__view_host_base(ctx, v->view);
    }
    if (status != POSENC_OK)
        return status;

    build_regions(staging);
    for (uint32_t r = 0; r < staging->region_count; r++) {
        posenc_cl_region *region = &staging->regions[r];
        const char *name = "";
        uint32_t views = 0;
        bool dense_write_only = true;
        for (uint32_t i = 0; i < staging->view_count; i++) {
            posenc_cl_staged_view *v = &staging->views[i];
            if (!v->host || v->region != r)
                continue;
            name = views++ ? name : v->name;
            region->written |= v->written;
            dense_write_only = dense_write_only && v->written && view_dense(v->view);
        }
        /* A region that is one packed output is written whole by the kernel: nothing to copy
         * in. Anything else is copied in, gaps included. */
        region->upload = !(views == 1 && dense_write_only);

        int shift = region_shift(staging, r);
        if (shift < 0)
            return posenc__fail(ctx, POSENC_UNSUPPORTED,
                                "%s: host tensors sharing this memory are misaligned against "
                                "each other for their dtypes; align them to their element sizes",
                                name);
        region->slot_offset = ((uintptr_t)region->lo + (uintptr_t)shift) % 4;
        uint64_t size = (uint64_t)(region->hi - region->lo);
        status = ensure_slot(ctx, &state->slots[r], region->slot_offset + size, name);
        if (status != POSENC_OK)
            return status;
        for (uint32_t i = 0; i < staging->view_count && status == POSENC_OK; i++) {
            posenc_cl_staged_view *v = &staging->views[i];
            if (v->host && v->region == r)
                status = bind(ctx, v, state->slots[r].mem,
                              region->slot_offset + (uint64_t)(v->host - region->lo));
        }
        if (status != POSENC_OK)
            return status;
        if (region->upload) {
            cl_event written = NULL;
            cl_int err = state->cl->EnqueueWriteBuffer(state->queue, state->slots[r].mem,
                                                       CL_FALSE, (size_t)region->slot_offset,
                                                       (size_t)size, region->lo, 0, NULL,
                                                       &written);
            if (err == CL_SUCCESS)
                err = posenc_cl_complete(state->cl, written);
            if (err != CL_SUCCESS)
                return posenc_cl_fail(ctx, err, name, "clEnqueueWriteBuffer (staging)");
        }
    }
    return POSENC_OK;
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
    size_t run = posenc_dtype_size(view->dtype);
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

static posenc_status copy_out(posenc_context *ctx, posenc_cl_staging *staging, cl_event after)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_api *cl = state->cl;
    for (uint32_t r = 0; r < staging->region_count; r++) {
        posenc_cl_region *region = &staging->regions[r];
        if (!region->written)
            continue;
        size_t size = (size_t)(region->hi - region->lo);
        cl_mem mem = state->slots[r].mem;
        cl_int err;
        if (!region->upload) { /* one packed output: read it straight into place */
            cl_event read = NULL;
            err = cl->EnqueueReadBuffer(state->queue, mem, CL_FALSE, (size_t)region->slot_offset,
                                        size, region->lo, 1, &after, &read);
            if (err == CL_SUCCESS)
                err = posenc_cl_complete(cl, read);
            if (err != CL_SUCCESS)
                return posenc_cl_fail(ctx, err, "output", "clEnqueueReadBuffer (staging)");
            continue;
        }
        cl_event map = NULL;
        void *mapped = cl->EnqueueMapBuffer(state->queue, mem, CL_FALSE, CL_MAP_READ,
                                            (size_t)region->slot_offset, size, 1, &after, &map,
                                            &err);
        if (err == CL_SUCCESS)
            err = posenc_cl_complete(cl, map);
        if (err != CL_SUCCESS || !mapped)
            return posenc_cl_fail(ctx, err == CL_SUCCESS ? CL_MAP_FAILURE : err, "output",
                                  "clEnqueueMapBuffer (staging)");
        for (uint32_t i = 0; i < staging->view_count; i++) {
            posenc_cl_staged_view *v = &staging->views[i];
            if (v->host && v->region == r && v->written)
                copy_elements(v->host, (const uint8_t *)mapped + (v->host - region->lo), v->view);
        }
        /* Waited for, so that the next call's copy into this slot cannot overtake it on an
         * out-of-order queue. */
        cl_event unmapped = NULL;
        err = cl->EnqueueUnmapMemObject(state->queue, mem, mapped, 0, NULL, &unmapped);
        if (err == CL_SUCCESS)
            err = posenc_cl_complete(cl, unmapped);
        if (err != CL_SUCCESS)
            return posenc_cl_fail(ctx, err, "output", "clEnqueueUnmapMemObject (staging)");
    }
    return POSENC_OK;
}

posenc_status posenc_cl_stage_out(posenc_context *ctx, posenc_cl_staging *staging,
                                  cl_event after)
{
    posenc_status status = copy_out(ctx, staging, after);
    /* Waits for posenc's own commands only: the queue may be the caller's. */
    posenc_status waited = posenc_cl_wait_all(ctx, "operation");
    return status != POSENC_OK ? status : waited;
}

bool posenc_cl_stage_has_host(const posenc_cl_staging *staging)
{
    for (uint32_t i = 0; i < staging->view_count; i++) {
        if (staging->views[i].host)
            return true;
    }
    return false;
}

void posenc_cl_stage_trim(posenc_context *ctx)
{
    posenc_cl_context *state = ctx->backend_state;
    for (int i = 0; i < POSENC_CL_SLOTS; i++) {
        posenc_cl_slot *slot = &state->slots[i];
        if (slot->mem && slot->capacity > TRIM_BYTES) {
            state->cl->ReleaseMemObject(slot->mem);
            slot->mem = NULL;
            slot->capacity = 0;
        }
    }
}
