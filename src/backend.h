/* SPDX-License-Identifier: MIT */
/* The interface every backend implements. The front end (src/core) applies defaults and
 * validates every descriptor before any entry here runs, so a backend trusts its input.
 * Adding a backend: a folder with a `const posenc__backend`, one line in posenc.h's
 * POSENC_BACKEND_LIST and its table's name in core/backend_list.h.
 */
#ifndef POSENC_BACKEND_H
#define POSENC_BACKEND_H

#include "core/internal.h"

/* An operation as the backends take it: the validated and resolved description of one kind,
 * the other NULL. */
typedef struct posenc__op {
    const posenc__rope_op *rope;
    const posenc__sinusoidal_op *sinusoidal;
} posenc__op;

typedef struct posenc__backend {
    posenc_backend kind; /* its name: posenc_backend_name (POSENC_BACKEND_LIST) */

    /* Loads the runtime (dlopen) and appends this backend's devices to `list` (empty when
     * called). Called under the registry's lock when this backend's devices are first needed
     * (never for a context of another backend), once per process unless a listing runs out of
     * host memory. Returning BACKEND_UNAVAILABLE with a message in `reason` (a static string)
     * makes the backend absent for the process: so does any failure the runtime reports while
     * listing, its own out-of-memory included (a damaged driver manifest gives the Vulkan
     * loader's), with the runtime call and its error in `reason`, so that a broken runtime
     * takes down its backend alone. OUT_OF_MEMORY is for posenc's own host allocations only
     * (never reported as an unusable device or an absent backend): it fails the whole listing,
     * which is made again on the next call, and the backend must then leave nothing in `list`
     * and keep nothing. Required. */
    posenc_status (*enumerate)(posenc__device_list *list, const char **reason);
    /* Undoes a successful `enumerate` whose listing is abandoned (another backend listed by
     * the same call ran out of host memory, or joining the lists did): frees the handles of the devices in `list` and whatever enumerate kept for
     * them, so that the next enumerate starts afresh (`list->items` itself is the registry's).
     * Optional: NULL when the devices own nothing. */
    void (*release_devices)(posenc__device_list *list);

    /* Creates the per-context state for `device` (one of this backend's enumerated devices) in
     * ctx->backend_state. On failure sets the context error and leaves nothing allocated.
     * Required. */
    posenc_status (*context_init)(posenc_context *ctx, const posenc__device *device);
    /* Waits for outstanding work and frees ctx->backend_state. Required. */
    void (*context_fini)(posenc_context *ctx);

    /* Creates buf->backend_state for buf->size bytes; wraps buf->host_memory when it is set,
     * and sets buf->host_imported when the device then uses that memory in place (work left
     * running may bind such a buffer; others are refused there). Required. */
    posenc_status (*buffer_init)(posenc_context *ctx, posenc_buffer *buf);
    /* Frees buf->backend_state (never the wrapped host memory). Required. */
    void (*buffer_fini)(posenc_context *ctx, posenc_buffer *buf);
    /* Copies between host memory and the buffer; ranges already checked. Not called for wrapped
     * host memory the device does not use in place (the front end copies it itself). Required. */
    posenc_status (*buffer_upload)(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                   const void *data, uint64_t size);
    posenc_status (*buffer_download)(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                     void *data, uint64_t size);
    /* Host address of a buffer's memory when the device shares it with the host (CPU backend,
     * unified memory), else NULL. Not called for wrapped host memory (its address is
     * host_memory). Optional (NULL entry: never shared). Used by the front end to detect
     * aliasing between buffers and host tensors. */
    void *(*buffer_host_address)(posenc_context *ctx, posenc_buffer *buf);
    /* Maps the buffer for the host (posenc_buffer_map): after the submitted work that uses it,
     * stores in `*data` the address of its first byte, or returns UNSUPPORTED with a message
     * naming "buffer" when the host cannot see its memory. Not called for wrapped host memory
     * the device does not use in place (the front end hands out buf->host_memory itself).
     * Optional: NULL means UNSUPPORTED. */
    posenc_status (*buffer_map)(posenc_context *ctx, posenc_buffer *buf, void **data);
    /* Ends a mapping made by buffer_map (`data` is what it returned); never called for one
     * buffer_map did not make. Optional: NULL when a mapping needs no ending (persistently
     * mapped coherent memory, host memory). */
    posenc_status (*buffer_unmap)(posenc_context *ctx, posenc_buffer *buf, void *data);

    /* Runs `op` (posenc_rope, posenc_sinusoidal) and waits for it. Required. */
    posenc_status (*run)(posenc_context *ctx, const posenc__op *op);

    /* Builds ahead what `run`, `submit` and the interop calls will use for `op`
     * (posenc_prepare): its kernel and the device copy of its frequency table, so that the
     * first such call builds nothing. Runs nothing on the device; what it builds stays in the
     * context, freed by context_fini, also when it fails half-way. Optional: NULL when the
     * backend has nothing to build (the native CPU path). */
    posenc_status (*prepare)(posenc_context *ctx, const posenc__op *op);

    /* The asynchronous form of `run` (posenc_*_submit): submits the work and returns without
     * waiting. With `event_state` non-NULL, store there the state that event_wait /
     * event_release take; with NULL the caller wants no event (finish and context_fini still
     * wait for the work). The backend keeps what the work needs alive (the frequency table:
     * see posenc__rope_prepare), runs work of one context in submission order and orders
     * buffer_upload/download after it; buffer_fini waits for the work that uses the buffer.
     * Every view is a buffer view (the front end refuses host views). Optional, all four
     * together: NULL entries make posenc_*_submit run the synchronous operation. */
    posenc_status (*submit)(posenc_context *ctx, const posenc__op *op, void **event_state);
    /* Waits up to `timeout_ns` for the work behind `event_state`: POSENC_OK when done,
     * POSENC_TIMEOUT while running, or the device error that ended it (the state stays valid
     * either way). */
    posenc_status (*event_wait)(posenc_context *ctx, void *event_state, uint64_t timeout_ns);
    /* Frees `event_state` without waiting for its work. */
    void (*event_release)(posenc_context *ctx, void *event_state);
    /* Waits for all submitted work of the context. */
    posenc_status (*finish)(posenc_context *ctx);

    /* Creates the context on the caller's own Vulkan or OpenCL objects (desc->vulkan /
     * desc->opencl): borrowed handles, never destroyed; called without enumerate having run
     * (the backend loads nothing it does not need, e.g. no Vulkan loader when the caller gives
     * vkGetInstanceProcAddr). Validates the handles' fields (messages start "vulkan." /
     * "opencl."), sets ctx->backend_state and points ctx->device at a device record it owns
     * (freed in context_fini). Optional: NULL means such handles are UNSUPPORTED. */
    posenc_status (*context_init_external)(posenc_context *ctx, const posenc_context_desc *desc);

    /* What `posenc bench` measures beside the operations (below). Optional: NULL means the
     * benchmark reports no roofline and no kernel variant. */
    const struct posenc__backend_diagnostics *diagnostics;
} posenc__backend;

/* The diagnostics seam (include/posenc/posenc_diagnostics.h, core/diagnostics.c): no operation uses it. Every entry
 * is optional. */
typedef struct posenc__backend_diagnostics {
    /* The yardstick of `posenc bench`: a plain copy kernel over `bytes` bytes of `buf` from
     * `offset`, on the same device and with the same access pattern as the operations:
     * read and write in place (like an in-place RoPE), or write only (like a table).
     * Synchronous. NULL means the benchmark reports no roofline. */
    posenc_status (*roofline)(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                              uint64_t bytes, bool write_only);
    /* The same yardstick shaped like one operation: a plain copy of exactly the elements `op`
     * writes (read and written back in place, written only for a table), in the operation's
     * own order and split over threads, so that the two differ only in their arithmetic.
     * Synchronous. NULL, each, means the benchmark uses `roofline` over the bytes. */
    posenc_status (*rope_roofline)(posenc_context *ctx, const posenc__rope_op *op);
    posenc_status (*sinusoidal_roofline)(posenc_context *ctx, const posenc__sinusoidal_op *op);
    /* The 16-bit floor beside the copy shaped like RoPE: each f16 or bf16 element of `op`
     * (rotated in place, whole heads with contiguous dims) converted to f32 and back, in the
     * operation's order and split: what a 16-bit RoPE costs before any arithmetic.
     * Synchronous; UNSUPPORTED (with a message) for other tensors. NULL: not measured. */
    posenc_status (*rope_conversion_floor)(posenc_context *ctx, const posenc__rope_op *op);
    /* The kernel variant the context runs, for the report (the CPU backend's instruction set:
     * "avx2"). NULL when the backend has no such choice. */
    const char *(*kernel_variant)(const posenc_context *ctx);
} posenc__backend_diagnostics;

/* ---- The front end's share with the interop calls (core/event.c) ---------------------------- */

/* Storage for an operation a call resolves from its descriptor. */
typedef union posenc__op_storage {
    posenc__rope_op rope;
    posenc__sinusoidal_op sinusoidal;
} posenc__op_storage;

/* Validates and resolves `desc`, a posenc_rope_desc when `rope`, else a posenc_sinusoidal_desc
 * (posenc__rope_prepare, posenc__sinusoidal_prepare), into `storage`, and points `*op` there. */
posenc_status posenc__op_resolve(posenc_context *ctx, bool rope, const void *desc,
                                 posenc__op_storage *storage, posenc__op *op);
/* The same for work that outlives `call` (posenc_*_submit, work recorded or enqueued for the
 * caller), whose views the caller gave, outputs in place included, must then be device memory
 * (posenc__check_device_views; wrapped host memory only on a backend without `submit`, which
 * runs all work at once). */
posenc_status posenc__op_resolve_device(posenc_context *ctx, bool rope, const void *desc,
                                        const char *call, posenc__op_storage *storage,
                                        posenc__op *op);

/* The state of `ctx` for `call`, an entry point of the `kind` backend's interop header; NULL,
 * with the error set, when ctx is NULL or of another backend ("context: is a cpu context;
 * posenc_cl_enqueue_rope needs an OpenCL one": `api` is "an OpenCL"). */
void *posenc__backend_state(posenc_context *ctx, posenc_backend kind, const char *api,
                            const char *call);

#endif
