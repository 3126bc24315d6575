/* Private to the OpenCL backend: the runtime's function table, the per-device and per-context
 * state, and the functions the backend's files share. OpenCL 1.2 API only. */
#ifndef POSENC_OPENCL_CL_INTERNAL_H
#define POSENC_OPENCL_CL_INTERNAL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "core/internal.h"

/* Every entry point the backend calls, loaded with dlsym: X(name, return type, parameters). */
#define POSENC_CL_FUNCTIONS(X)                                                                    \
    X(GetPlatformIDs, cl_int, (cl_uint, cl_platform_id *, cl_uint *))                           \
    X(GetPlatformInfo, cl_int, (cl_platform_id, cl_platform_info, size_t, void *, size_t *))    \
    X(GetDeviceIDs, cl_int, (cl_platform_id, cl_device_type, cl_uint, cl_device_id *,           \
                             cl_uint *))                                                          \
    X(GetDeviceInfo, cl_int, (cl_device_id, cl_device_info, size_t, void *, size_t *))          \
    X(CreateContext, cl_context,                                                                \
      (const cl_context_properties *, cl_uint, const cl_device_id *,                            \
       void(CL_CALLBACK *)(const char *, const void *, size_t, void *), void *, cl_int *))      \
    X(ReleaseContext, cl_int, (cl_context))                                                     \
    X(CreateCommandQueue, cl_command_queue,                                                     \
      (cl_context, cl_device_id, cl_command_queue_properties, cl_int *))                        \
    X(ReleaseCommandQueue, cl_int, (cl_command_queue))                                          \
    X(CreateBuffer, cl_mem, (cl_context, cl_mem_flags, size_t, void *, cl_int *))               \
    X(ReleaseMemObject, cl_int, (cl_mem))                                                       \
    X(CreateProgramWithSource, cl_program,                                                      \
      (cl_context, cl_uint, const char **, const size_t *, cl_int *))                           \
    X(CreateProgramWithBinary, cl_program,                                                      \
      (cl_context, cl_uint, const cl_device_id *, const size_t *, const unsigned char **,       \
       cl_int *, cl_int *))                                                                     \
    X(BuildProgram, cl_int,                                                                     \
      (cl_program, cl_uint, const cl_device_id *, const char *,                                 \
       void(CL_CALLBACK *)(cl_program, void *), void *))                                        \
    X(GetProgramInfo, cl_int, (cl_program, cl_program_info, size_t, void *, size_t *))         \
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
      (cl_command_queue, cl_mem, cl_bool, cl_map_flags, size_t, size_t, cl_uint,               \
       const cl_event *, cl_event *, cl_int *))                                                 \
    X(EnqueueUnmapMemObject, cl_int,                                                            \
      (cl_command_queue, cl_mem, void *, cl_uint, const cl_event *, cl_event *))                \
    X(Finish, cl_int, (cl_command_queue))

typedef struct posenc_cl_api {
#define POSENC_CL_MEMBER_(name, result, params) result(CL_API_CALL *name) params;
    POSENC_CL_FUNCTIONS(POSENC_CL_MEMBER_)
#undef POSENC_CL_MEMBER_
} posenc_cl_api;

/* The loaded runtime (cl_loader.c). posenc_cl_load runs once, from the registry's once-lock;
 * afterwards the table is immutable. NULL on failure, with the reason in `*reason`. */
const posenc_cl_api *posenc_cl_load(const char **reason);
/* The table once loaded (backend entries run only after a successful load). */
const posenc_cl_api *posenc_cl_api_get(void);

/* The calling thread's alternate signal stack, kept across calls that may initialise a
 * driver's compiler: LLVM (inside PoCL and other drivers) installs a stack of its own on the
 * thread that first compiles, and that thread is the caller's. Putting the caller's back keeps
 * the library from changing the thread's signal state (and keeps AddressSanitizer, which frees
 * the stack it installed when the thread exits, from freeing LLVM's). No-op outside POSIX. */
typedef struct posenc_cl_signal_stack {
    void *sp;
    size_t size;
    int flags;
    bool saved;
} posenc_cl_signal_stack;
void posenc_cl_signal_stack_save(posenc_cl_signal_stack *saved);
void posenc_cl_signal_stack_restore(const posenc_cl_signal_stack *saved);

/* "CL_OUT_OF_RESOURCES"; "CL error" for a code not in the list. */
const char *posenc_cl_error_name(cl_int error);
/* The posenc status of an OpenCL error code. */
posenc_status posenc_cl_status(cl_int error);
/* Sets the context error to "<what>: <call> failed: <name> (<code>)" and returns its status. */
posenc_status posenc_cl_fail(posenc_context *ctx, cl_int error, const char *what,
                             const char *call);

/* One enumerated device (cl_devices.c), owned by the backend until the process exits. */
typedef struct posenc_cl_device {
    cl_platform_id platform;
    cl_device_id device;
    char platform_name[128];
    char device_version[128]; /* "OpenCL 3.0 PoCL ..." */
    char driver_version[128];
    size_t max_work_group_size;
    size_t max_work_item_size0;
    uint32_t compute_units;
    uint64_t max_alloc_bytes;
} posenc_cl_device;

/* Appends every usable OpenCL device of every platform (cl_devices.c). */
posenc_status posenc_cl_enumerate(posenc__device_list *list, const char **reason);

/* The embedded kernels a context builds, each on first use (cl_program.c). */
typedef enum posenc_cl_kernel_id {
    POSENC_CL_ROPE_F32,
    POSENC_CL_ROPE_F16,
    POSENC_CL_ROPE_BF16,
    POSENC_CL_SINUSOIDAL_F32,
    POSENC_CL_SINUSOIDAL_F16,
    POSENC_CL_SINUSOIDAL_BF16,
    POSENC_CL_COPY,
    POSENC_CL_KERNEL_COUNT,
} posenc_cl_kernel_id;

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

#define POSENC_CL_SLOTS 8

typedef struct posenc_cl_context {
    const posenc_cl_api *cl;
    const posenc_cl_device *device;
    cl_context context;
    cl_command_queue queue;
    posenc_cl_kernel kernels[POSENC_CL_KERNEL_COUNT];
    cl_mem freqs;            /* frequency words of the current operation */
    uint64_t freqs_capacity; /* bytes */
    uint64_t freqs_id;       /* the table `freqs` holds (posenc__rope_op.freqs_id); 0: unknown */
    uint32_t *freq_words;    /* host copy, grown on demand */
    size_t freq_words_capacity;
    posenc_cl_slot slots[POSENC_CL_SLOTS];
} posenc_cl_context;

/* Context state (cl_context.c). */
posenc_status posenc_cl_context_init(posenc_context *ctx, const posenc__device *device);
void posenc_cl_context_fini(posenc_context *ctx);

/* Buffers (cl_buffer.c): device allocations, or the caller's memory used as host memory. */
posenc_status posenc_cl_buffer_init(posenc_context *ctx, posenc_buffer *buf);
void posenc_cl_buffer_fini(posenc_context *ctx, posenc_buffer *buf);
posenc_status posenc_cl_buffer_upload(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                      const void *data, uint64_t size);
posenc_status posenc_cl_buffer_download(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                        void *data, uint64_t size);
void *posenc_cl_buffer_host_address(posenc_context *ctx, posenc_buffer *buf);
/* The device allocation of a buffer; NULL for wrapped host memory (staged like a host view). */
cl_mem posenc_cl_buffer_mem(const posenc_buffer *buf);

/* The kernel `id`, built (or loaded from the binary cache) on first use. */
posenc_status posenc_cl_kernel_get(posenc_context *ctx, posenc_cl_kernel_id id,
                                   const posenc_cl_kernel **kernel);
/* Builds `source` with `options` for the context's device, through the binary cache. `label`
 * names the program in messages and logs. The caller releases the program. */
posenc_status posenc_cl_program_build(posenc_context *ctx, const char *label, const char *source,
                                      const char *options, cl_program *program);
void posenc_cl_kernels_release(posenc_cl_context *state);

/* Launches `kernel` over `units` work-items' worth of work: a whole number of work-groups, at
 * most a few per compute unit (the kernels loop over the rest). posenc_cl_launch_size is the
 * global size such a launch uses. */
uint64_t posenc_cl_launch_size(const posenc_context *ctx, const posenc_cl_kernel *kernel,
                               uint64_t units);
posenc_status posenc_cl_launch(posenc_context *ctx, const posenc_cl_kernel *kernel,
                               uint64_t units, const char *what);
/* Uploads rotary/sinusoidal frequencies as (int_turns, frac_hi, frac_lo) words, then each
 * one's position component (which only RoPE reads), unless the table `id` (non-zero) is the
 * one uploaded last. */
posenc_status posenc_cl_upload_freqs(posenc_context *ctx, const posenc__freq *freqs,
                                     uint32_t count, uint64_t id, const char *what);

/* Sets kernel arguments in order, stopping at the first error. */
typedef struct posenc_cl_args {
    cl_kernel kernel;
    cl_uint next;
    cl_int error;
} posenc_cl_args;
void posenc_cl_arg_mem(posenc_cl_args *args, cl_mem mem);
void posenc_cl_arg_u32(posenc_cl_args *args, uint32_t value);
void posenc_cl_arg_i32(posenc_cl_args *args, int32_t value);
void posenc_cl_arg_f32(posenc_cl_args *args, float value);

/* ---- Staging (cl_staging.c) -----------------------------------------------------------------
 * The tensors of one operation bound to device memory: buffer views directly, host views (and
 * wrapped buffers) through staging allocations, copied in before the kernel and the written
 * elements copied back after it. Views are indexed in elements with 32-bit kernel words. */
typedef struct posenc_cl_binding {
    cl_mem mem;
    uint32_t offset;     /* elements from the start of `mem` */
    uint32_t strides[4]; /* elements; 0 for dims of size 1 */
} posenc_cl_binding;

#define POSENC_CL_MAX_VIEWS 8

typedef struct posenc_cl_staged_view {
    const posenc__view *view;
    const char *name;
    uint8_t *host; /* element 0 in host memory; NULL for a device buffer view */
    bool written;
    uint32_t region;
    posenc_cl_binding *binding;
} posenc_cl_staged_view;

typedef struct posenc_cl_region {
    uint8_t *lo, *hi;     /* host byte range */
    uint64_t slot_offset; /* where `lo` lies in the slot's allocation */
    bool written;
    bool upload;
} posenc_cl_region;

typedef struct posenc_cl_staging {
    posenc_cl_staged_view views[POSENC_CL_MAX_VIEWS];
    uint32_t view_count;
    posenc_cl_region regions[POSENC_CL_MAX_VIEWS];
    uint32_t region_count;
} posenc_cl_staging;

/* Registers a view read (and written when `written`) by the kernel; `binding` is filled by
 * posenc_cl_stage_in. Identical views may be added twice (in place). */
void posenc_cl_stage_add(posenc_cl_staging *staging, const posenc__view *view, const char *name,
                         bool written, posenc_cl_binding *binding);
/* Resolves every binding and copies host memory to the device. Nothing is written to the
 * caller's memory. */
posenc_status posenc_cl_stage_in(posenc_context *ctx, posenc_cl_staging *staging);
/* After the kernel: copies the written elements of staged views back to host memory, then
 * waits for the queue. */
posenc_status posenc_cl_stage_out(posenc_context *ctx, posenc_cl_staging *staging);
/* Frees staging allocations that grew unusually large. */
void posenc_cl_stage_trim(posenc_context *ctx);

/* The operations (cl_rope.c, cl_sinusoidal.c, cl_roofline.c). */
posenc_status posenc_cl_rope(posenc_context *ctx, const posenc__rope_op *op);
posenc_status posenc_cl_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op);
posenc_status posenc_cl_roofline(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                 uint64_t bytes, bool write_only);

#endif
