/* SPDX-License-Identifier: MIT */
/* Splitting GPU work into boxes whose bindings fit one binding's range (gpu_split.h). */
#include "core/gpu_split.h"

typedef struct split_job {
    posenc_context *ctx;
    const posenc__gpu_extent *extents;
    uint32_t count;
    uint64_t units_per_cell;
    const posenc__gpu_split_limits *limits;
    posenc__gpu_box_fn fn;
    void *user;
    uint32_t boxes;
} split_job;

static posenc__gpu_window window_of(const split_job *job, const posenc__gpu_extent *extent,
                                    const posenc__gpu_box *box)
{
    uint64_t lo = extent->offset;
    uint64_t span = (uint64_t)extent->inner;
    for (int k = 0; k < 3; k++) {
        lo += (uint64_t)box->start[k] * (uint64_t)extent->strides[k];
        span += (uint64_t)(box->count[k] - 1) * (uint64_t)extent->strides[k];
    }
    /* Whole words at the end, so that 16-bit elements keep their half of a word. */
    uint64_t unit = extent->element_size < 4 ? 4 : extent->element_size;
    uint64_t end = (lo + span + unit - 1) / unit * unit;
    if (end > extent->size)
        end = extent->size;
    posenc__gpu_window window;
    window.base = lo / job->limits->alignment * job->limits->alignment;
    window.range = end - window.base;
    window.first = (uint32_t)((lo - window.base) / extent->element_size);
    return window;
}

static posenc_status split(split_job *job, const posenc__gpu_box *box)
{
    /* The binding whose window is the largest of those too large, if any. */
    posenc__gpu_window windows[POSENC__GPU_MAX_BINDINGS] = {{0}};
    int worst = -1;
    uint64_t worst_range = 0;
    for (uint32_t i = 0; i < job->count; i++) {
        if (!job->extents[i].bound)
            continue;
        windows[i] = window_of(job, &job->extents[i], box);
        if (windows[i].range > job->limits->binding_bytes && windows[i].range > worst_range) {
            worst = (int)i;
            worst_range = windows[i].range;
        }
    }
    uint64_t cells = 1;
    for (int k = 0; k < 3; k++)
        cells *= (uint64_t)box->count[k];
    bool too_many = cells > job->limits->max_units / job->units_per_cell;
    if (worst < 0 && !too_many) {
        job->boxes++;
        return job->fn(job->ctx, box, windows, job->user);
    }

    /* Halve the dim that spans the most of that binding (or the longest dim). */
    const posenc__gpu_extent *w = worst >= 0 ? &job->extents[worst] : NULL;
    int dim = -1;
    for (int k = 0; k < 3; k++) {
        if (box->count[k] < 2)
            continue;
        if (dim < 0)
            dim = k;
        else if (w ? (box->count[k] - 1) * w->strides[k] > (box->count[dim] - 1) * w->strides[dim]
                   : box->count[k] > box->count[dim])
            dim = k;
    }
    if (dim < 0 || (w && w->strides[dim] == 0))
        return posenc__fail(job->ctx, POSENC_UNSUPPORTED,
                            "%s: one unit of work spans %llu bytes, more than one kernel binding "
                            "may address on this device (%llu bytes)",
                            w ? w->name : "shape", (unsigned long long)worst_range,
                            (unsigned long long)job->limits->binding_bytes);
    posenc__gpu_box half = *box;
    half.count[dim] = box->count[dim] / 2;
    posenc_status status = split(job, &half);
    if (status != POSENC_OK)
        return status;
    half.start[dim] = box->start[dim] + half.count[dim];
    half.count[dim] = box->count[dim] - half.count[dim];
    return split(job, &half);
}

posenc_status posenc__gpu_split(posenc_context *ctx, const posenc__gpu_extent *extents,
                                uint32_t count, const int64_t shape[3], uint64_t units_per_cell,
                                const posenc__gpu_split_limits *limits, posenc__gpu_box_fn fn,
                                void *user, uint32_t *boxes)
{
    split_job job = {
        .ctx = ctx,
        .extents = extents,
        .count = count < POSENC__GPU_MAX_BINDINGS ? count : POSENC__GPU_MAX_BINDINGS,
        .units_per_cell = units_per_cell ? units_per_cell : 1,
        .limits = limits,
        .fn = fn,
        .user = user,
    };
    posenc__gpu_box box = {{0, 0, 0}, {shape[0], shape[1], shape[2]}};
    posenc_status status = split(&job, &box);
    *boxes = job.boxes;
    return status;
}
