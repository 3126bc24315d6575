/* SPDX-License-Identifier: MIT */
/* Splitting GPU work into boxes whose every binding fits in what one kernel binding may address
 * (Vulkan: maxStorageBufferRange, 128 MiB on lavapipe, 4 GiB on many GPUs) and whose
 * invocations fit the kernels' 32-bit counters. Each binding of a box is a window of its
 * allocation that starts at an aligned offset at or below the box's first byte; the kernel
 * indexes from there. */
#ifndef POSENC_CORE_GPU_SPLIT_H
#define POSENC_CORE_GPU_SPLIT_H

#include "core/internal.h"

/* Bindings one kernel has at most (Vulkan's rope.comp: out, in, positions, the frequency table,
 * the KV cache slots, cos, sin and the norm's weights). */
#define POSENC__GPU_MAX_BINDINGS 8

/* One kernel binding over a box of up to three dims: the byte range that the cells of a box
 * touch is offset + sum(start[k] * strides[k]) for (count[k] - 1) * strides[k] + inner bytes. */
typedef struct posenc__gpu_extent {
    bool bound;              /* false: nothing is bound (an absent view) */
    uint64_t offset;         /* bytes from the allocation's start to the cell at the origin */
    uint64_t size;           /* bytes of the allocation: windows end within it */
    int64_t strides[3];      /* bytes per step of each box dim (0: independent of it) */
    int64_t inner;           /* bytes one cell spans */
    uint32_t element_size;   /* the kernel's index unit, in bytes */
    const char *name;        /* the view's name, for messages */
} posenc__gpu_extent;

typedef struct posenc__gpu_box {
    int64_t start[3];
    int64_t count[3];
} posenc__gpu_box;

/* The part of a binding's allocation one box binds: [base, base + range), with the box origin
 * `first` elements in. */
typedef struct posenc__gpu_window {
    uint64_t base, range;
    uint32_t first;
} posenc__gpu_window;

typedef struct posenc__gpu_split_limits {
    uint64_t binding_bytes; /* bytes one binding may span */
    uint64_t alignment;     /* windows start on a multiple of this (a power of two) */
    uint64_t max_units;     /* invocations of one box stay below this */
} posenc__gpu_split_limits;

/* Called once per box, in order, with the windows of every binding (unbound ones zero). */
typedef posenc_status (*posenc__gpu_box_fn)(posenc_context *ctx, const posenc__gpu_box *box,
                                            const posenc__gpu_window *windows, void *user);

/* Halves `shape` until each box fits `limits` (each cell is `units_per_cell` invocations),
 * calling `fn` per box; `*boxes` counts them. UNSUPPORTED, naming the binding, when one cell
 * alone is larger than a binding may be. */
posenc_status posenc__gpu_split(posenc_context *ctx, const posenc__gpu_extent *extents,
                                uint32_t count, const int64_t shape[3], uint64_t units_per_cell,
                                const posenc__gpu_split_limits *limits, posenc__gpu_box_fn fn,
                                void *user, uint32_t *boxes);

#endif
