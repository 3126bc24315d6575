/* SPDX-License-Identifier: MIT */
/* Private to the OpenCL backend: the runtime's function table, the per-device and per-context
 * state, and the functions the backend's files share. OpenCL 1.2 API only. */
#ifndef POSENC_OPENCL_CL_INTERNAL_H
#define POSENC_OPENCL_CL_INTERNAL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "backend.h"
#include "core/gpu_devices.h"
#include "core/gpu_plan.h"
#include "core/gpu_staging.h"
#include "core/gpu_tables.h"
#include "core/internal.h"
#include "core/kernels.h"
#include "core/platform.h"

/* Every entry point the backend calls, loaded with dlsym: X(name, return type, parameters). */
#define POSENC_CL_FUNCTIONS(X)                                                                    \
    X(GetPlatformIDs, cl_int, (cl_uint, cl_platform_id *, cl_uint *))                           \
    X(GetPlatformInfo, cl_int, (cl_platform_id, cl_platform_info, size_t, void *, size_t *))    \
    X(GetDeviceIDs, cl_int, (cl_platform_id, cl_device_type, cl_uint, cl_device_id *,           \
                             cl_uint *))                                                        \
    X(GetDeviceInfo, cl_int, (cl_device_id, cl_device_info, size_t, void *, size_t *))          \
    X(CreateContext, cl_context,                                                                \
      (const cl_context_properties *, cl_uint, const cl_device_id *,                            \
       void(CL_CALLBACK *)(const char *, const void *, size_t, void *), void *, cl_int *))      \
    X(RetainContext, cl_int, (cl_context))                                                      \
    X(ReleaseContext, cl_int, (cl_context))                                                     \
    X(GetContextInfo, cl_int, (cl_context, cl_context_info, size_t, void *, size_t *))          \
    X(RetainDevice, cl_int, (cl_device_id))                                                     \
    X(ReleaseDevice, cl_int, (cl_device_id))                                                    \
    X(CreateCommandQueue, cl_command_queue,                                                     \
      (cl_context, cl_device_id, cl_command_queue_properties, cl_int *))                        \
    X(RetainCommandQueue, cl_int, (cl_command_queue))                                           \
    X(ReleaseCommandQueue, cl_int, (cl_command_queue))                                          \
    X(GetCommandQueueInfo, cl_int,                                                              \
      (cl_command_queue, cl_command_queue_info, size_t, void *, size_t *))                      \
    X(CreateBuffer, cl_mem, (cl_context, cl_mem_flags, size_t, void *, cl_int *))               \
    X(RetainMemObject, cl_int, (cl_mem))                                                        \
    X(ReleaseMemObject, cl_int, (cl_mem))                                                       \
    X(GetMemObjectInfo, cl_int, (cl_mem, cl_mem_info, size_t, void *, size_t *))                \
    X(CreateProgramWithSource, cl_program,                                                      \
      (cl_context, cl_uint, const char **, const size_t *, cl_int *))                           \
    X(CreateProgramWithBinary, cl_program,                                                      \
      (cl_context, cl_uint, const cl_device_id *, const size_t *, const unsigned char **,       \
       cl_int *, cl_int *))                                                                     \
    X(BuildProgram, cl_int,                                                                     \
      (cl_program, cl_uint, const cl_device_id *, const char *,                                 \
       void(CL_CALLBACK *)(cl_program, void *), void *))                                        \
    X(GetProgramInfo, cl_int, (cl_program, cl_program_info, size_t, void *, size_t *))          \
    X(GetProgramBuildInfo, cl_int,                                                              \
      (cl_program, cl_device_id, cl_program_build_info, size_t, void *, size_t *))              \
    X(ReleaseProgram, cl_int, (cl_program))                                                     \
    X(CreateKernel, cl_kernel, (cl_program, const char *, cl_int *))                            \
    X(ReleaseKernel, cl_int, (cl_kernel))                                                       \
    X(SetKernelArg, cl_int, (cl_kernel, cl_uint, size_t, const void *))                         \
    X(GetKernelWorkGroupInfo, cl_int,                                                           \
      (cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t, void *, size_t *))           \
    X(EnqueueNDRangeKernel, cl_int,                                                             \
      (cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *,    \
       cl_uint, const cl_event *, cl_event *))                                                  \
    X(EnqueueReadBuffer, cl_int,                                                                \
      (cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint, const cl_event *,    \
       cl_event *))                                                                             \
    X(EnqueueWriteBuffer, cl_int,                                                               \
      (cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, cl_uint,                \
       const cl_event *, cl_event *))                                                           \
    X(EnqueueMapBuffer, void *,                                                                 \
      (cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, size_t, cl_uint,                \
       const cl_event *, cl_event *, cl_int *))                                                 \
    X(EnqueueUnmapMemObject, cl_int,                                                            \
      (cl_command_queue, cl_mem, void *, cl_uint, const cl_event *, cl_event *))                \
    X(Flush, cl_int, (cl_command_queue))                                                        \
    X(Finish, cl_int, (cl_command_queue))                                                       \
    X(WaitForEvents, cl_int, (cl_uint, const cl_event *))                                       \
    X(GetEventInfo, cl_int, (cl_event, cl_event_info, size_t, void *, size_t *))                \
    X(RetainEvent, cl_int, (cl_event))                                                          \
    X(ReleaseEvent, cl_int, (cl_event))

typedef struct posenc_cl_api {
#define POSENC_CL_MEMBER_(name, result, params) result(CL_API_CALL *name) params;
    POSENC_CL_FUNCTIONS(POSENC_CL_MEMBER_)
#undef POSENC_CL_MEMBER_
} posenc_cl_api;

/* The loaded runtime (cl_loader.c). posenc_cl_load loads it once per process, whichever thread
 * comes first (the registry's enumeration, or a context on the caller's own OpenCL objects);
 * afterwards the table is immutable. NULL on failure, with the reason in `*reason`. */
const posenc_cl_api *posenc_cl_load(const char **reason);
/* The table once loaded (backend entries run only after a successful load). */
const posenc_cl_api *posenc_cl_api_get(void);

/* Calls that may initialise a driver's compiler keep the calling thread's alternate signal
 * stack with posenc__signal_stack_save / _restore (core/platform.h): LLVM (inside PoCL and
 * other drivers) installs one of its own on the thread that first compiles. */

/* cl_khr_icd's "no platform" (cl_ext.h), returned by ICD loaders that found no ICD. */
#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR (-1001)
#endif
/* "CL_OUT_OF_RESOURCES"; "CL error" for a code not in the list. */
const char *posenc_cl_error_name(cl_int error);
/* The posenc status of an OpenCL error code. OpenCL has no code of its own for a lost device:
 * CL_DEVICE_NOT_AVAILABLE, returned by a call or as the negative execution status a command
 * ended with, is what a runtime reports for a device that went away after the context was
 * made, and it is the one read as POSENC_DEVICE_LOST (after which the context is lost for
 * good: core/status.c). Other negative statuses (CL_OUT_OF_RESOURCES, which some drivers also
 * give after a crashed kernel, or an error of the runtime's own) fail only the call. */
posenc_status posenc_cl_status(cl_int error);
/* Sets the context error to "<what>: <call> failed: <name> (<code>)" and returns its status. */
posenc_status posenc_cl_fail(posenc_context *ctx, cl_int error, const char *what,
                             const char *call);

/* One enumerated device (cl_devices.c), owned by the backend until the process exits: what
 * posenc_device_info (the posenc__device holding this record) does not say. */
typedef struct posenc_cl_device {
    cl_platform_id platform;
    cl_device_id device;
    char platform_name[128];
    char device_version[128]; /* "OpenCL 3.0 PoCL ..." */
    char driver_version[128];
    size_t max_local_size;   /* of a 1-D work-group: CL_DEVICE_MAX_WORK_GROUP_SIZE, within
                              * CL_DEVICE_MAX_WORK_ITEM_SIZES[0] */
    uint64_t base_alignment; /* CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bytes: where an imported
                              * (CL_MEM_USE_HOST_PTR) buffer may start */
} posenc_cl_device;

/* Appends every usable OpenCL device of every platform (cl_devices.c). */
posenc_status posenc_cl_enumerate(posenc__device_list *list, const char **reason);

/* Describes one device of `platform` into `out`, whose handle is then a posenc_cl_device the
 * caller frees: UNSUPPORTED when it is not usable (not available, no compiler, before 1.2),
 * OUT_OF_MEMORY when posenc ran out of host memory; a query the runtime failed for want of
 * memory in `*failure`, with its status. */
posenc_status posenc_cl_describe_device(const posenc_cl_api *cl, cl_platform_id platform,
                                        cl_device_id id, posenc__device *out,
                                        posenc__gpu_failure *failure);

/* The embedded kernels a context builds, each on first use (cl_program.c): the OpenCL C
 * variants of shaders/variants.cmake, by id (POSENC__CL_ROPE_F32, ...). */
#define POSENC_CL_KERNEL_COUNT POSENC__CL_VARIANT_COUNT
typedef struct posenc_cl_kernel {
    cl_program program;
    cl_kernel kernel;
    size_t local_size; /* work-group size used for every launch of this kernel */
} posenc_cl_kernel;

/* Host memory staged in a device allocation for one operation (cl_staging.c); reused. */
typedef struct posenc_cl_slot {
    cl_mem mem;
    uint64_t capacity;
} posenc_cl_slot;

typedef struct posenc_cl_context {
    const posenc_cl_api *cl;
    cl_context context; /* on ctx->device, whose handle is a posenc_cl_device */
    cl_command_queue queue;
    bool out_of_order; /* the queue runs commands out of order: posenc orders its own by events */
    /* The caller's device, described (its handle owned), when context, device and queue are
     * the caller's (retained, then released); zero for posenc's own. */
    posenc__device external_record;
    posenc__mutex lock; /* serialises the state for posenc_cl_enqueue_* on several threads */
    cl_event last;     /* posenc's latest command on the queue (retained), or NULL */
    posenc_cl_kernel kernels[POSENC_CL_KERNEL_COUNT];
    posenc__gpu_tables freq_cache; /* the frequency tables (cl_dispatch.c) */
    cl_mem freq_mems[POSENC__GPU_MAX_TABLES]; /* their device copies, slot by slot */
    posenc_cl_slot staging; /* the staging area of host views (cl_staging.c) */
    bool host_import;       /* host memory bound in place (CL_MEM_USE_HOST_PTR) */
} posenc_cl_context;

/* Context state (cl_context.c): on a device posenc found, or on the caller's own objects. */
posenc_status posenc_cl_context_init(posenc_context *ctx, const posenc__device *device);
posenc_status posenc_cl_context_init_external(posenc_context *ctx,
                                              const posenc_context_desc *desc);
void posenc_cl_context_fini(posenc_context *ctx);

/* ---- Ordering and completion (cl_sync.c) -----------------------------------------------------
 * Every command posenc enqueues waits for posenc's previous one (state->last), so posenc's own
 * work runs in order on in-order and out-of-order queues alike. Called with state->lock held. */

/* Enqueues through `enqueue` with the wait list `waits` (the caller's events) plus
 * state->last, and makes the new command's event state->last. `*event` (optional) receives a
 * reference of its own. */
typedef cl_int (*posenc_cl_enqueue_fn)(posenc_context *ctx, void *user, cl_uint count,
                                       const cl_event *list, cl_event *event);
cl_int posenc_cl_enqueue_ordered(posenc_context *ctx, cl_uint wait_count,
                                 const cl_event *wait_list, posenc_cl_enqueue_fn enqueue,
                                 void *user, cl_event *event);
/* Waits for `count` commands together and releases their events: CL_SUCCESS, or the error that
 * ended one. posenc never makes a blocking enqueue: some runtimes (PoCL) implement one as
 * clFinish, which on the caller's queue would also wait for the caller's own work. */
cl_int posenc_cl_complete_all(const posenc_cl_api *cl, uint32_t count, const cl_event *events);
/* Waits for every command posenc enqueued (state->last), never for the caller's other work.
 * `what` names the operation in the error message. */
posenc_status posenc_cl_wait_all(posenc_context *ctx, const char *what);

/* Buffers (cl_buffer.c): device allocations, or the caller's memory used as host memory. */
posenc_status posenc_cl_buffer_init(posenc_context *ctx, posenc_buffer *buf);
void posenc_cl_buffer_fini(posenc_context *ctx, posenc_buffer *buf);
posenc_status posenc_cl_buffer_upload(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                      const void *data, uint64_t size);
posenc_status posenc_cl_buffer_download(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                        void *data, uint64_t size);
posenc_status posenc_cl_buffer_map(posenc_context *ctx, posenc_buffer *buf, void **data);
posenc_status posenc_cl_buffer_unmap(posenc_context *ctx, posenc_buffer *buf, void *data);
/* The device allocation of a buffer; NULL for wrapped host memory (staged like a host view). */
cl_mem posenc_cl_buffer_mem(const posenc_buffer *buf);

/* The kernel `id`, built (or loaded from the binary cache) on first use. */
posenc_status posenc_cl_kernel_get(posenc_context *ctx, posenc__cl_id id,
                                   const posenc_cl_kernel **kernel);
/* Builds `source` with `options` for the context's device, through the binary cache. `label`
 * names the program in messages and logs. The caller releases the program. */
posenc_status posenc_cl_program_build(posenc_context *ctx, const char *label, const char *source,
                                      const char *options, cl_program *program);

/* The global size of a launch of `kernel` over `units` work-items' worth of work: a whole
 * number of work-groups, at most a few per compute unit (the kernels loop over the rest). */
uint64_t posenc_cl_launch_size(const posenc_context *ctx, const posenc_cl_kernel *kernel,
                               uint64_t units);
/* The device copy of the table of `source`, encoded and cached as core/gpu_tables.h does it; a
 * new one is created with the words copied in at creation (no host memory outlives the call).
 * The cache owns `*mem`: evicting an entry releases it, which OpenCL defers until the commands
 * already using it are done. */
posenc_status posenc_cl_freqs_get(posenc_context *ctx, const posenc__gpu_table_source *source,
                                 const char *what, cl_mem *mem);

/* ---- Staging (cl_staging.c) -----------------------------------------------------------------
 * The tensors of one operation bound to device memory: buffer views directly, host views (and
 * wrapped buffers) through staging allocations, copied in before the kernel and the written
 * elements copied back after it. Views are indexed in elements with 32-bit kernel words. */
typedef struct posenc_cl_binding {
    cl_mem mem;
    uint32_t offset; /* elements from the start of `mem` to element 0 (strides: core/gpu_*.h) */
} posenc_cl_binding;

/* The views of one operation and where each one's binding goes. */
typedef struct posenc_cl_staging {
    posenc__gpu_staging plan;
    posenc_cl_binding *bindings[POSENC__GPU_MAX_VIEWS];
    /* Imported regions: a CL_MEM_USE_HOST_PTR buffer each from an address aligned down to
     * CL_DEVICE_MEM_BASE_ADDR_ALIGN, and where the region's lo lies in it. Released by the
     * call that made them: the caller may free that memory once the call returns. */
    cl_mem imports[POSENC__GPU_MAX_VIEWS];
    uint64_t import_base[POSENC__GPU_MAX_VIEWS];
    cl_event kernel_done; /* posenc_cl_stage_out's `after`: what copying back waits for */
} posenc_cl_staging;

/* Registers an operation's views (core/op_views.h lists), skipping absent (NULL) ones, each
 * used by the kernel as `access` (POSENC__GPU_READ, POSENC__GPU_WRITE); `bindings` are filled
 * by posenc_cl_stage_in. Identical views may be added twice (in place). */
void posenc_cl_stage_views(posenc_cl_staging *staging, const posenc__view *const *views,
                           const unsigned *access, const char *const *names, uint32_t count,
                           posenc_cl_binding *bindings);
/* Resolves every binding and copies host memory to the device. Nothing is written to the
 * caller's memory. */
posenc_status posenc_cl_stage_in(posenc_context *ctx, posenc_cl_staging *staging);
/* After the kernel (`after`, its event): copies the written elements of staged views back to
 * host memory, then waits for posenc's commands (never for the whole queue: it may be the
 * caller's). */
posenc_status posenc_cl_stage_out(posenc_context *ctx, posenc_cl_staging *staging,
                                  cl_event after);
/* Releases the imports of a call that ends without posenc_cl_stage_out (which releases them),
 * and a staging allocation grown past POSENC__GPU_STAGING_KEEP_BYTES. Safe to call twice. */
void posenc_cl_stage_release(posenc_context *ctx, posenc_cl_staging *staging);
/* Makes a CL_MEM_USE_HOST_PTR buffer of `size` bytes at `host` (aligned to
 * CL_DEVICE_MEM_BASE_ADDR_ALIGN); NULL, with the reason logged naming `name`, when the memory
 * is to be staged instead. */
cl_mem posenc_cl_import(posenc_context *ctx, void *host, uint64_t size, const char *name);

/* One operation, as every call path takes it (cl_async.c's entries, the enqueues of
 * cl_interop.c): its views and table (core/gpu_plan.h), its kernel, and its launch. */
typedef struct posenc_cl_op {
    posenc__gpu_op gpu;
    posenc__cl_id kernel;
    /* Checks what `kernel` (built) can take, stages (posenc_cl_stage_op) and runs
     * (posenc_cl_run). */
    posenc_status (*launch)(posenc_context *ctx, const struct posenc_cl_op *run,
                            const posenc_cl_kernel *kernel, cl_uint wait_count,
                            const cl_event *wait_list, cl_event *event);
    const void *op; /* what `launch` takes */
} posenc_cl_op;
/* cl_rope.c, cl_sinusoidal.c: the description of `op`, which points into `op`; and
 * cl_async.c's, of either kind. */
posenc_cl_op posenc_cl_rope_op(const posenc_context *ctx, const posenc__rope_op *op);
posenc_cl_op posenc_cl_sinusoidal_op(posenc_context *ctx, const posenc__sinusoidal_op *op);
posenc_cl_op posenc_cl_op_of(posenc_context *ctx, const posenc__op *op);
/* Runs `run` with state->lock held. With `event` NULL the call is synchronous (host views
 * staged, results in place on return); otherwise every view is a device buffer, the work is
 * left running after the events of `wait_list`, and `*event` receives the event of its last
 * command. */
posenc_status posenc_cl_run_op(posenc_context *ctx, const posenc_cl_op *run, cl_uint wait_count,
                               const cl_event *wait_list, cl_event *event);
/* Binds the views of `run` into `bindings` (in its order; an absent one as the one before it),
 * staging host memory, and sets `*freqs` to the device copy of its table (when it has one);
 * `left_running` work must bind no host memory. Releases the staging on failure. */
posenc_status posenc_cl_stage_op(posenc_context *ctx, const posenc_cl_op *run, bool left_running,
                                 posenc_cl_binding *bindings, posenc_cl_staging *staging,
                                 cl_mem *freqs);
/* Sets the kernel's arguments (the `count` bindings' buffers in order, the frequency table
 * unless `freqs` is NULL, then the parameters, `arg_size` bytes an argument: 4 for scalar
 * words, a block's size for struct arguments) and launches `units` after the events of
 * `wait_list` and posenc's previous command; with `event` the work is left running, else it
 * is waited for and its staged outputs copied back. `staging` is released either way. `what`
 * names the operation in messages. */
posenc_status posenc_cl_run(posenc_context *ctx, const posenc_cl_kernel *kernel, uint64_t units,
                            const char *what, const posenc_cl_binding *bindings, uint32_t count,
                            cl_mem freqs, const void *params, size_t params_size,
                            size_t arg_size, posenc_cl_staging *staging, cl_uint wait_count,
                            const cl_event *wait_list, cl_event *event);
posenc_status posenc_cl_roofline(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                 uint64_t bytes, bool write_only);

/* The backend entries run, submit and prepare (cl_async.c) and their waits (cl_sync.c). */
posenc_status posenc_cl_op_run(posenc_context *ctx, const posenc__op *op);
posenc_status posenc_cl_op_submit(posenc_context *ctx, const posenc__op *op, void **event_state);
posenc_status posenc_cl_op_prepare(posenc_context *ctx, const posenc__op *op);
posenc_status posenc_cl_submit_event_wait(posenc_context *ctx, void *event_state,
                                          uint64_t timeout_ns);
void posenc_cl_submit_event_release(posenc_context *ctx, void *event_state);
posenc_status posenc_cl_finish(posenc_context *ctx);

#endif
