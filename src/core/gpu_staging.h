/* SPDX-License-Identifier: MIT */
/* The staging plan of one GPU operation: which host bytes go to the device, where they lie in
 * one staging area, what is copied in and what is copied back. Backends only allocate and copy.
 *
 * A view whose memory the device cannot address (a host tensor, a buffer wrapping caller
 * memory) is staged. Host views whose bytes overlap (the q and k slices of one fused qkv array,
 * an output rotated in place) share one region, copied once. Regions are packed into one staging
 * area, each placed so that every view in it starts on a multiple of its element size and keeps
 * its host address modulo 16 where that already was aligned (vector loads). Before the kernel a
 * region is copied in unless one packed output covers it (the kernel writes every byte); after
 * it only the elements of written views are copied back, so bytes between them (the v slice,
 * padding) are never rewritten.
 *
 * A backend that can map the caller's memory for the device (unified memory) marks such a region
 * imported and lays the plan out again: imported regions take no staging bytes and nothing is
 * copied for them. upload_bytes and download_bytes are what the call copies, in one place. */
#ifndef POSENC_CORE_GPU_STAGING_H
#define POSENC_CORE_GPU_STAGING_H

#include "core/internal.h"

/* How a kernel uses a view. */
#define POSENC__GPU_READ 1u
#define POSENC__GPU_WRITE 2u

/* Views one operation adds at most (RoPE: q, q_out, k, k_out, positions, slot_mapping, k_cache,
 * v, v_cache, cos, sin and the two norm weights). */
#define POSENC__GPU_MAX_VIEWS 13
/* Regions start on this boundary in the staging area (plus their lead, below 16). */
#define POSENC__GPU_REGION_ALIGNMENT 256
/* A staging area at most this large stays with the context for the next call; larger is freed
 * after the call. */
#define POSENC__GPU_STAGING_KEEP_BYTES (UINT64_C(64) << 20)

typedef struct posenc__gpu_staged_view {
    const posenc__view *view;
    const char *name;   /* in messages */
    unsigned access;    /* POSENC__GPU_READ | POSENC__GPU_WRITE */
    uint8_t *host;      /* element 0 in host memory; NULL: the view is in device memory */
    uint32_t region;    /* staged views: the region holding it */
    uint64_t position;  /* staged views: bytes from the staging area's start to element 0;
                         * in an imported region, from the region's lo */
} posenc__gpu_staged_view;

typedef struct posenc__gpu_region {
    uint8_t *lo, *hi;   /* the host byte range */
    const char *name;   /* its first view's, in messages */
    uint64_t offset;    /* where `lo` lies in the staging area (not for imported regions) */
    uint32_t lead;      /* offset modulo 16: puts every view of the region on its elements */
    bool upload;        /* copied in before the kernel */
    bool written;       /* some view in it is written: copied back after the kernel */
    bool whole;         /* one packed output: copied back byte for byte, as one range */
    bool imported;      /* the device reads and writes the host bytes in place: no copies */
} posenc__gpu_region;

typedef struct posenc__gpu_staging {
    posenc__gpu_staged_view views[POSENC__GPU_MAX_VIEWS];
    uint32_t view_count;
    posenc__gpu_region regions[POSENC__GPU_MAX_VIEWS];
    uint32_t region_count;
    uint64_t bytes;          /* size of the staging area the regions need */
    uint64_t upload_bytes;   /* host to device before the kernel */
    uint64_t download_bytes; /* device to host after it (whole regions, or written elements) */
} posenc__gpu_staging;

/* Adds a view the kernel uses as `access`; `host` is its element 0 when the backend cannot bind
 * its memory directly (NULL: in device memory, not staged; posenc__gpu_stage_in finds it). The
 * same memory may be added twice (an input and its in-place output). Returns the view's index,
 * which the plan keeps. */
uint32_t posenc__gpu_stage_add(posenc__gpu_staging *staging, const posenc__view *view,
                               const char *name, unsigned access, uint8_t *host);

/* Builds the regions and lays them out. UNSUPPORTED (naming the view) when host views sharing
 * memory are misaligned against each other for their element sizes. */
posenc_status posenc__gpu_stage_plan(posenc_context *ctx, posenc__gpu_staging *staging);

/* (Re)assigns staging offsets to the regions that are not imported, and the byte counts. */
void posenc__gpu_stage_layout(posenc__gpu_staging *staging);

/* Whether region `r` may be bound in place (imported): every view in it starts on its element
 * boundary in host memory, as the kernels index it. Staging realigns the others. */
bool posenc__gpu_stage_importable(const posenc__gpu_staging *staging, uint32_t r);

/* Whether any view is staged or imported: work that reads host memory cannot be left running. */
bool posenc__gpu_stage_has_host(const posenc__gpu_staging *staging);

/* ---- Staging a call: the order of the steps, with the backend's runtime calls as hooks ----- */

/* Where a view of the plan is bound. */
typedef enum posenc__gpu_memory {
    POSENC__GPU_IN_DEVICE,  /* its buffer's device memory, element 0 at view->offset */
    POSENC__GPU_IN_STAGING, /* the staging area, element 0 at `position` */
    POSENC__GPU_IN_IMPORT   /* region `region`'s import, element 0 at `position` from its lo */
} posenc__gpu_memory;

typedef struct posenc__gpu_stage_hooks {
    /* Binds view `view` of the plan where `memory` says. May refuse (the 32-bit indexing
     * limit), naming the view. */
    posenc_status (*bind)(posenc_context *ctx, void *user, uint32_t view,
                          posenc__gpu_memory memory, uint32_t region, uint64_t position);
    /* Makes a staging area of at least `bytes`: one the context keeps for later calls, or one
     * past POSENC__GPU_STAGING_KEEP_BYTES, freed once the call is done. `name` (the first
     * staged view) is for messages. */
    posenc_status (*reserve)(posenc_context *ctx, void *user, uint64_t bytes, const char *name);
    /* Copies region `region`'s host bytes (lo to hi) to its place in the staging area
     * (`offset`), done when it returns. */
    posenc_status (*upload)(posenc_context *ctx, void *user, uint32_t region, const char *name);
    /* Maps region `region` of host memory, `size` bytes from `lo` (`name`: its first view), for
     * the device in place, and returns whether it did; NULL where the device cannot. Only
     * regions whose views all start on their element boundaries are offered, and none under
     * `import_min_bytes`: an import costs more than copying a few pages. The plan is laid out
     * again without the regions taken. */
    bool (*import)(posenc_context *ctx, void *user, uint32_t region, uint8_t *lo, uint64_t size,
                   const char *name);
    uint64_t import_min_bytes;
} posenc__gpu_stage_hooks;

/* Everything before the kernel: the views added with posenc__gpu_stage_add (their `host`
 * found here: host tensors and wrapped buffers the device did not import are staged) are
 * planned, host regions imported where the device takes them, the staging area reserved,
 * every view bound and the regions copied in. Nothing is written to the caller's memory. On
 * failure the backend releases what the hooks made (imports, a temporary area). */
posenc_status posenc__gpu_stage_in(posenc_context *ctx, posenc__gpu_staging *staging,
                                   const posenc__gpu_stage_hooks *hooks, void *user);

/* `size` bytes read from device memory straight into `host`: from `offset` in view `index`'s
 * buffer (POSENC__GPU_IN_DEVICE), in region `index`'s import (from its lo) or in the staging
 * area. */
typedef struct posenc__gpu_read {
    posenc__gpu_memory memory;
    uint32_t index;
    uint64_t offset;
    uint64_t size;
    uint8_t *host;
} posenc__gpu_read;

typedef struct posenc__gpu_stage_out_hooks {
    /* Makes `count` reads, in order, done when it returns: what the kernel wrote into memory the
     * device used in place (the written views of imported wrapped buffers, the written imported
     * regions), for the host to see, and a lone packed output's staging bytes, one command
     * where a map, a copy and an unmap take three. Optional: NULL where imported memory is
     * coherent and every staged output is mapped. */
    posenc_status (*read)(posenc_context *ctx, void *user, const posenc__gpu_read *reads,
                          uint32_t count);
    /* Makes the staging bytes of region `region` readable by the host, its lo's device copy in
     * `*bytes`. A mapping made before a failure stays in `*bytes`, for `unmap`. */
    posenc_status (*map)(posenc_context *ctx, void *user, uint32_t region, const uint8_t **bytes);
    /* Ends the mappings `map` made (`mapped`, by region; NULL where none), also after a failure.
     * Optional: NULL where a mapping needs no ending (persistently mapped memory). */
    void (*unmap)(posenc_context *ctx, void *user, const uint8_t *const *mapped);
} posenc__gpu_stage_out_hooks;

/* Everything after the kernel: the written elements of staged views (whole packed outputs,
 * byte for byte) copied back into the caller's memory, all or none: every region is mapped
 * before any is copied, so that a runtime failure on the way leaves every output as it was. */
posenc_status posenc__gpu_stage_out(posenc_context *ctx, const posenc__gpu_staging *staging,
                                    const posenc__gpu_stage_out_hooks *hooks, void *user);

/* Element 0 of a view in host memory the device cannot address (host tensors, and buffers
 * wrapping caller memory that the device did not import): what staging copies. NULL for a view
 * in device memory. */
uint8_t *posenc__gpu_view_host(const posenc__view *view);

/* Bytes from element 0 to one past the view's last element. */
uint64_t posenc__gpu_view_extent(const posenc__view *view);

#endif
