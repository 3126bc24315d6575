/* SPDX-License-Identifier: MIT */
/* posenc: transformer position encodings (RoPE, sinusoidal) on any compute device.
 * The whole public C API, with the RoPE part in posenc_rope.h, which this header includes. No
 * vendor header is included here: typed Vulkan/OpenCL interop lives in posenc_vulkan.h and
 * posenc_opencl.h.
 *
 * Conventions
 * - Every create call and operation takes a `const posenc_*_desc *`. A zero field means "the
 *   default"; each default is written beside its field. Zero-initialise descriptors
 *   (`posenc_rope_desc d = {0};`) and set only what you need.
 * - Every call that can fail returns posenc_status; results go through out-parameters. A failed
 *   call writes nothing into the caller's outputs (out-parameters, buffers, tensors).
 * - The library never prints and never aborts. Detailed messages naming the bad field are kept
 *   per context (posenc_context_last_error) and, for calls without a context, per thread
 *   (posenc_thread_last_error). An optional log callback receives diagnostics.
 * - The library frees only what it created; fields marked "borrowed" are never destroyed.
 *
 * Completion
 * - posenc_rope and posenc_sinusoidal are synchronous: when they return, the results are in the
 *   output memory (a buffer download or the caller's host array shows them).
 * - posenc_rope_submit and posenc_sinusoidal_submit return once the work is submitted; an
 *   optional posenc_event tells when it is done (see "Asynchronous operations").
 *
 * Thread safety
 * - Device enumeration, posenc_version, posenc_status_name/string, posenc_thread_last_error,
 *   the names of enum values (posenc_*_name, posenc_*_from_name), posenc_context_create and
 *   posenc_tensor_of_buffer/_of_host are safe to call from any thread at any time. Different
 *   contexts never interfere, so one context per thread needs no locking at all.
 * - On one context, these calls may run on several threads at once, with each other:
 *   the buffer calls (posenc_buffer_create, posenc_buffer_upload, posenc_buffer_download,
 *   posenc_buffer_destroy, posenc_buffer_size, and posenc_vk_buffer_wrap /
 *   posenc_cl_buffer_wrap), the recording and enqueueing calls of the interop headers
 *   (posenc_vk_cmd_*, posenc_cl_enqueue_*), posenc_context_device and
 *   posenc_context_last_error. An engine may wrap the buffers of a new layer on one thread
 *   while others record.
 * - posenc_context_stats may run on any thread at any time, with every call on its context
 *   (not with posenc_context_destroy).
 * - Every other call on a context (posenc_rope, posenc_sinusoidal, the submits and events,
 *   posenc_prepare, posenc_context_finish, posenc_context_destroy) needs the context to
 *   itself: the caller runs it when no other call on that context runs.
 * - A buffer belongs to whoever uses it: destroying it while a call on another thread uses it
 *   (a tensor of a rope or record call, an upload or download) is the caller's error, and so is
 *   any call on a context that another thread destroys. posenc does not detect these.
 *
 * Teardown
 * - The destroy calls return nothing and cannot fail. Where posenc can see work that still uses
 *   what is destroyed (its own submissions and commands, through their fences and events) it
 *   waits for that work; work it cannot see is the caller's to finish first.
 * - posenc_buffer_destroy waits for the work posenc submitted that uses the buffer (submits,
 *   staged copies; on OpenCL all of posenc's commands, posenc_cl_enqueue_* included).
 *   posenc_context_destroy waits for all of posenc's own work on the context, then destroys
 *   the buffers and events still alive. posenc_event_destroy never waits.
 * - Neither waits for anything else on a caller's device or queue. What an engine must have
 *   completed before each destroy call (command buffers recorded by posenc_vk_cmd_*, events
 *   that posenc's enqueued work waits for) is stated in posenc_vulkan.h and posenc_opencl.h.
 *
 * Accuracy promise (every backend, every device, with or without float64)
 * - RoPE, f32 output: |out - exact| / |rotated pair| <= 8 * 2^-24 (about 4.8e-7) for any int32
 *   position, and for float positions of magnitude below 2^31.
 * - f16 / bf16 output: within one unit in the last place of the output type of the exact
 *   result, plus the f32 bound above.
 * - Sinusoidal values: the same 8 * 2^-24, absolute, for integer and float positions (times
 *   |output_scale|).
 * - Sinusoidal add mode (out = x * input_scale + output_scale * PE): the table's bound plus the
 *   rounding of the sum in f32, |out - exact| <= 8 * 2^-24 * |output_scale|
 *   + 2^-24 * (|x * input_scale| + |output_scale * PE|), plus 2 * 2^-24 * |x * input_scale|
 *   when input_scale is not a power of two (rounding it to f32, and its product with x).
 *   Large x therefore dominates: the sum cannot be closer than half an f32 ulp of itself.
 * Angles are reduced exactly (fixed-point fractions of a turn), so accuracy does not decay
 * with the position. Float positions of magnitude 2^31 or more, or NaN, give NaN outputs.
 */
#ifndef POSENC_POSENC_H
#define POSENC_POSENC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(POSENC_SHARED)
#  if defined(POSENC_BUILDING)
#    define POSENC_API __declspec(dllexport)
#  else
#    define POSENC_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) && defined(POSENC_BUILDING)
#  define POSENC_API __attribute__((visibility("default")))
#else
#  define POSENC_API
#endif

#define POSENC_VERSION_MAJOR 0
#define POSENC_VERSION_MINOR 1
#define POSENC_VERSION_PATCH 0

/* "0.1.0": the version of the library actually linked. */
POSENC_API const char *posenc_version(void);

/* Most dimensions a tensor view has. */
#define POSENC_MAX_DIMS 4

/* ---------------------------------------------------------------------------------------------
 * Status codes, grouped by range: -1xx the caller's input, -2xx devices and runtimes,
 * -3xx the host. One list generates the enum, the names and the messages.
 */
#define POSENC_STATUS_LIST(X)                                                                      \
    X(OK, 0, "success")                                                                            \
    X(TIMEOUT, 1, "the wait timed out; the work is still running")                                 \
    X(INVALID_ARGUMENT, -100, "an argument is invalid")                                            \
    X(INVALID_SHAPE, -101, "a tensor shape is invalid or does not match")                          \
    X(INVALID_DTYPE, -102, "a tensor dtype is invalid or does not match")                          \
    X(INVALID_LAYOUT, -103, "tensor strides or offsets overlap, overflow or are misaligned")       \
    X(OUT_OF_BOUNDS, -104, "a tensor view reaches past the end of its buffer")                     \
    X(DEVICE_NOT_FOUND, -200, "no device matches the request")                                     \
    X(BACKEND_UNAVAILABLE, -201, "the backend's runtime is not present on this machine")           \
    X(UNSUPPORTED, -202, "the device or this version does not support the request")                \
    X(DEVICE_INIT_FAILED, -203, "the device failed to initialise")                                 \
    X(OUT_OF_DEVICE_MEMORY, -204, "out of device memory")                                          \
    X(DEVICE_LOST, -205, "the device was lost")                                                    \
    X(KERNEL_BUILD_FAILED, -206, "a kernel failed to build")                                       \
    X(DEVICE_ERROR, -207, "the device runtime reported an error")                                  \
    X(OUT_OF_MEMORY, -300, "out of host memory")                                                   \
    X(IO_ERROR, -301, "a file could not be read or written")                                       \
    X(INTERNAL, -399, "internal error")

typedef enum posenc_status {
#define POSENC_STATUS_ENUM_(name, value, message) POSENC_##name = value,
    POSENC_STATUS_LIST(POSENC_STATUS_ENUM_)
#undef POSENC_STATUS_ENUM_
} posenc_status;

/* "POSENC_INVALID_SHAPE"; "POSENC_UNKNOWN_STATUS" for a value not in the list. */
POSENC_API const char *posenc_status_name(posenc_status status);
/* "a tensor shape is invalid or does not match". Static strings, never NULL. */
POSENC_API const char *posenc_status_string(posenc_status status);

/* Detailed message of the last failed call made on this thread without a context (device
 * enumeration, posenc_context_create). "" when there is none. Valid until the next such call. */
POSENC_API const char *posenc_thread_last_error(void);

typedef enum posenc_log_level {
    POSENC_LOG_DEBUG = 0,
    POSENC_LOG_INFO = 1,
    POSENC_LOG_WARNING = 2,
    POSENC_LOG_ERROR = 3,
} posenc_log_level;

/* Called from the thread that made the call (so from several threads at once when calls run at
 * once: see "Thread safety"); `message` is valid only during the call. */
typedef void (*posenc_log_fn)(posenc_log_level level, const char *message, void *user_data);

/* ---------------------------------------------------------------------------------------------
 * Backends and devices
 */
/* The backends, in the registry's order: the order of posenc_device_get, AUTO preferring earlier
 * backends among devices of one type, and the native CPU path last. X(KIND, value, name): the
 * values are ABI and never change; `name` is posenc_backend_name's and the device selectors'.
 * AUTO (0, "auto") is a choice among them, not one of them. */
#define POSENC_BACKEND_LIST(X)                                                                     \
    X(VULKAN, 2, "vulkan")                                                                         \
    X(OPENCL, 3, "opencl")                                                                         \
    X(CPU, 1, "cpu")

typedef enum posenc_backend {
    POSENC_BACKEND_AUTO = 0,
#define POSENC_BACKEND_ENUM_(kind, value, name) POSENC_BACKEND_##kind = value,
    POSENC_BACKEND_LIST(POSENC_BACKEND_ENUM_)
#undef POSENC_BACKEND_ENUM_
} posenc_backend;

typedef enum posenc_device_type {
    POSENC_DEVICE_DISCRETE_GPU = 0,
    POSENC_DEVICE_INTEGRATED_GPU = 1,
    POSENC_DEVICE_VIRTUAL_GPU = 2,
    POSENC_DEVICE_CPU = 3,      /* a CPU: posenc's own CPU path, or a CPU seen through a runtime */
    POSENC_DEVICE_SOFTWARE = 4, /* a GPU emulated in software (llvmpipe/lavapipe, PoCL, ...) */
    POSENC_DEVICE_OTHER = 5,
} posenc_device_type;

/* "auto", "cpu", "vulkan", "opencl". */
POSENC_API const char *posenc_backend_name(posenc_backend backend);
/* "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "software", "other". */
POSENC_API const char *posenc_device_type_name(posenc_device_type type);

/* Whether a backend was compiled in and its runtime loaded (loading it if no call has yet, and
 * no other backend's). On failure `*reason` (optional) says why ("libvulkan.so.1 not found",
 * "not compiled in", "dynamic loading is not available in a static binary"); a static string. */
POSENC_API posenc_status posenc_backend_status(posenc_backend backend, const char **reason);

typedef struct posenc_device_info {
    posenc_backend backend;
    uint32_t backend_index;       /* index among this backend's devices: "vulkan:1" */
    posenc_device_type type;
    bool native_cpu;              /* posenc's own CPU path (the one AUTO falls back to) */
    char name[256];
    char vendor[128];
    char driver[128];             /* driver or runtime version, free text */
    uint64_t memory_bytes;        /* device-local memory; physical RAM for CPU devices */
    bool unified_memory;          /* host and device share memory: no staging copies */
    bool fp16_storage;            /* native 16-bit loads/stores (f16 works everywhere anyway) */
    bool fp16_arithmetic;         /* native half-precision arithmetic */
    bool bf16;                    /* native bf16 conversion or arithmetic */
    bool fp64;                    /* native double precision (not needed for accuracy) */
    uint32_t compute_units;       /* cores, SMs, CUs, execution units */
    uint32_t max_workgroup_size;  /* largest work-group (1 on the CPU path) */
    uint32_t subgroup_size;       /* 0 when unknown or variable */
    uint64_t max_buffer_bytes;    /* largest single buffer allocation */
    uint64_t max_binding_bytes;   /* largest range one kernel binding may address */
    bool host_memory_import;      /* caller host memory (host tensors, buffers wrapping
                                   * host_memory) is used in place, not copied through staging,
                                   * where the device takes it (Vulkan: the pages covering it,
                                   * VK_EXT_external_memory_host; OpenCL: CL_MEM_USE_HOST_PTR
                                   * from an address aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN);
                                   * always on the CPU path */
} posenc_device_info;

/* Every device of every available backend, in a stable order (Vulkan, OpenCL, CPU). Each
 * backend's devices are listed when first needed (these two calls need them all) and kept for
 * the process; a call that runs out of host memory while listing returns OUT_OF_MEMORY (as do
 * posenc_device_choose, posenc_backend_status and posenc_context_create) and the next call
 * lists them again. A runtime that fails to list, its own out-of-memory included, leaves its
 * backend unavailable for the process with the runtime's reason (posenc_backend_status), and
 * the other backends listed. Once listed, the native CPU device is always present. */
POSENC_API posenc_status posenc_device_count(uint32_t *count);
POSENC_API posenc_status posenc_device_get(uint32_t index, posenc_device_info *info);

/* ---------------------------------------------------------------------------------------------
 * Contexts
 */
typedef enum posenc_context_flags {
    POSENC_CONTEXT_NO_FALLBACK = 1u << 0,    /* fail instead of trying the next device */
    POSENC_CONTEXT_IGNORE_ENV = 1u << 1,     /* do not read the POSENC_DEVICE variable */
    POSENC_CONTEXT_ALLOW_SOFTWARE = 1u << 2, /* AUTO may pick software-emulated devices */
    POSENC_CONTEXT_VALIDATION = 1u << 3,     /* enable API validation (Vulkan layers) */
} posenc_context_flags;

/* Optional features of a caller's VkDevice (and instance) that posenc may use: set in
 * posenc_vulkan_external.enabled_features only those the caller enabled at vkCreateDevice
 * (vkCreateInstance for DEBUG_UTILS). */
typedef enum posenc_vulkan_feature {
    /* VkPhysicalDevice16BitStorageFeatures.storageBuffer16BitAccess: f16/bf16 loaded and stored
     * as 16-bit values (without it: two per 32-bit word, same results) */
    POSENC_VULKAN_FEATURE_16BIT_STORAGE = 1u << 0,
    /* the VK_KHR_push_descriptor extension: descriptors pushed into the command buffer
     * (without it: descriptor sets from a pool of posenc's, see posenc_vulkan.h) */
    POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR = 1u << 1,
    /* the VK_EXT_external_memory_host extension: on a unified-memory device, caller host memory
     * is imported instead of copied (posenc_device_info.host_memory_import) */
    POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT = 1u << 2,
    /* the VK_EXT_debug_utils extension, enabled on the instance: posenc names its objects
     * (vkSetDebugUtilsObjectNameEXT: "posenc rope f16", "posenc buffer", ...) and wraps each
     * dispatch it records, into its own command buffers or the caller's, in a label
     * (vkCmdBeginDebugUtilsLabelEXT: "posenc rope f16"), for validation messages and capture
     * tools. An instance setting, so it may be given with or without vulkan.device. Contexts
     * on posenc's own instance do the same whenever the loader offers the extension. */
    POSENC_VULKAN_FEATURE_DEBUG_UTILS = 1u << 3,
} posenc_vulkan_feature;

/* A caller's own Vulkan objects, for engines that bring their device. All borrowed, not
 * destroyed. The typed setter posenc_vulkan_external_of lives in posenc_vulkan.h. */
typedef struct posenc_vulkan_external {
    const void *instance;             /* VkInstance; required (Vulkan 1.1 or later) */
    const void *physical_device;      /* VkPhysicalDevice; required */
    const void *device;               /* VkDevice; NULL: posenc creates its own device on
                                       * physical_device (then queue_family, queue and
                                       * enabled_features must stay zero, except for
                                       * POSENC_VULKAN_FEATURE_DEBUG_UTILS) */
    uint32_t queue_family;            /* compute-capable queue family of `device` */
    const void *queue;                /* VkQueue of queue_family; NULL: posenc records only, never
                                       * submits (posenc_vk_cmd_*; posenc_rope and copies through
                                       * staging are then UNSUPPORTED) */
    void (*get_instance_proc_addr)(void); /* PFN_vkGetInstanceProcAddr; required: every function
                                           * is loaded through it (no loader is opened) */
    uint32_t enabled_features;        /* posenc_vulkan_feature bits the caller enabled; default 0 */
    const void *allocation_callbacks; /* const VkAllocationCallbacks *, used for every object
                                       * posenc creates on the device; default NULL (the
                                       * driver's) */
    uint64_t pipeline_cache;          /* VkPipelineCache (as an integer: a non-dispatchable
                                       * handle) for posenc's pipelines; default 0: posenc's own
                                       * (pipeline_cache_path) */
} posenc_vulkan_external;

/* A caller's own OpenCL objects. Borrowed: retained while the context lives, then released. */
typedef struct posenc_opencl_external {
    const void *context; /* cl_context */
    const void *device;  /* cl_device_id */
    const void *queue;   /* cl_command_queue */
} posenc_opencl_external;

typedef struct posenc_context_desc {
    posenc_backend backend;  /* default AUTO */
    /* Which device of `backend`: NULL = the best one; "1" = its device 1; "NVIDIA" = the first
     * whose name contains this (case-insensitive). With backend AUTO it may also be a full
     * selector as in POSENC_DEVICE: "cpu", "vulkan", "vulkan:1", "opencl:0", "llvmpipe"; a
     * selector here takes precedence over POSENC_DEVICE. */
    const char *device;
    uint32_t flags;          /* posenc_context_flags; default 0 */
    uint32_t num_threads;    /* CPU worker threads; default: the cores this process may use */
    posenc_log_fn log;       /* default: silent */
    void *log_user_data;
    /* The two paths are UTF-8 on every system, Windows included. */
    const char *cache_dir;   /* kernel binary cache; default $XDG_CACHE_HOME/posenc */
    const char *pipeline_cache_path; /* Vulkan pipeline cache file to load and save; default none */
    posenc_vulkan_external vulkan;   /* default: posenc creates everything */
    posenc_opencl_external opencl;   /* default: posenc creates everything */
} posenc_context_desc;

typedef struct posenc_context posenc_context;

/* Picks a device (POSENC_DEVICE overrides AUTO unless IGNORE_ENV), initialises it, and on failure
 * tries the next candidate (logging why) unless NO_FALLBACK. AUTO prefers a discrete GPU, then an
 * integrated GPU, then a virtual GPU, then the native CPU path; software-emulated devices only
 * when asked for by backend, selector or ALLOW_SOFTWARE. A request naming a backend ("cpu",
 * "vulkan:1", by backend, device or POSENC_DEVICE) loads that backend's runtime alone, the others
 * only to fall back; one for a backend that is absent fails with BACKEND_UNAVAILABLE. `desc` may
 * be NULL (all defaults). */
POSENC_API posenc_status posenc_context_create(const posenc_context_desc *desc,
                                               posenc_context **context);
/* Waits for the work posenc itself submitted or enqueued on the context (never for other work
 * on a caller's device or queue), then frees everything the context created. Buffers and
 * events still alive are destroyed too (their handles become invalid). NULL is a no-op. No
 * other call on the context may run; on a caller's device, what must have completed first is
 * in posenc_vulkan.h / posenc_opencl.h ("Teardown"). */
POSENC_API void posenc_context_destroy(posenc_context *context);

/* What posenc_context_create would choose for `desc`, without initialising anything.
 * `*index` is a posenc_device_get index; `*reason` (optional) a static explanation. */
POSENC_API posenc_status posenc_device_choose(const posenc_context_desc *desc, uint32_t *index,
                                              const char **reason);

POSENC_API posenc_status posenc_context_device(const posenc_context *context,
                                               posenc_device_info *info);
/* Message of the last failed call on this context, naming the bad field; "" if none (a call
 * that succeeds clears it). Returned as this thread's copy, valid until the thread's next
 * posenc_context_last_error. When calls run at once on one context, the message is that of
 * whichever of them failed or succeeded last, whole (never a mix of two): read it on the
 * thread that failed, right after the call, to have that call's message in the usual case. */
POSENC_API const char *posenc_context_last_error(const posenc_context *context);

/* What a context has done and what it holds, for an engine's own accounting. The totals count
 * from posenc_context_create and are never reset: subtract two readings for an interval. Each
 * counter is exact when calls run at once on the context; a reading taken while a call runs
 * may show some of that call's counts and not yet others. */
typedef struct posenc_stats {
    /* Totals */
    uint64_t rope_calls;        /* RoPE operations that succeeded: posenc_rope, posenc_rope_submit,
                                 * posenc_vk_cmd_rope, posenc_cl_enqueue_rope */
    uint64_t sinusoidal_calls;  /* the same for the sinusoidal calls */
    uint64_t staged_bytes;      /* bytes an operation copied between the caller's host memory
                                 * (host tensors, buffers wrapping host_memory) and staging
                                 * memory the device reads, both ways; 0 on the CPU backend,
                                 * and for memory the device uses in place (see
                                 * posenc_device_info.host_memory_import) */
    uint64_t uploaded_bytes;    /* bytes written by posenc_buffer_upload and initial_data */
    uint64_t downloaded_bytes;  /* bytes read by posenc_buffer_download */
    uint64_t kernels_built;     /* Vulkan pipelines created; OpenCL programs compiled from
                                 * source. 0 on the CPU backend */
    uint64_t kernels_loaded;    /* OpenCL programs made from a binary in the kernel cache
                                 * (cache_dir) instead (Vulkan pipelines count as built, with
                                 * or without a pipeline cache) */
    /* Held now */
    uint64_t freq_tables;       /* frequency tables kept for later calls: a GPU backend's device
                                 * tables (at most 256, evicted least recently used), the CPU
                                 * backend's host tables (its last RoPE and sinusoidal ones) */
    uint64_t buffer_bytes;      /* sizes of the live buffers posenc_buffer_create allocated
                                 * (not those wrapping host_memory, nor an engine's wrapped
                                 * buffers) */
    uint64_t staging_bytes;     /* staging memory kept between calls (GPU backends; a larger
                                 * area made for one call is freed after it, uncounted) */
    uint64_t table_bytes;       /* device memory of the frequency tables (GPU backends) */
    uint64_t device_bytes;      /* buffer_bytes + staging_bytes + table_bytes */
} posenc_stats;

/* Fills `*stats` with the context's counters. Reads counters only: no device work, no lock. */
POSENC_API posenc_status posenc_context_stats(const posenc_context *context, posenc_stats *stats);

/* ---------------------------------------------------------------------------------------------
 * Buffers: memory on the context's device. On the CPU backend and on unified-memory devices a
 * buffer is host memory used in place.
 */
typedef struct posenc_buffer posenc_buffer;

typedef struct posenc_buffer_desc {
    uint64_t size;            /* bytes; required (> 0) */
    void *host_memory;        /* wrap this caller memory of `size` bytes instead of allocating.
                               * Borrowed, not freed; must outlive the buffer. The CPU backend uses
                               * it in place; GPU backends import it once, at creation, where
                               * the device has host_memory_import and takes this memory, and
                               * otherwise copy it at each operation (the log says why). */
    const void *initial_data; /* optional: `size` bytes uploaded at creation */
} posenc_buffer_desc;

POSENC_API posenc_status posenc_buffer_create(posenc_context *context,
                                              const posenc_buffer_desc *desc,
                                              posenc_buffer **buffer);
/* Waits for the work posenc submitted that uses the buffer (see "Teardown" above), unmaps it if
 * mapped, and frees what posenc allocated for it (never wrapped memory or a wrapped VkBuffer
 * or cl_mem). No other call may be using it. NULL is a no-op. */
POSENC_API void posenc_buffer_destroy(posenc_buffer *buffer);
POSENC_API uint64_t posenc_buffer_size(const posenc_buffer *buffer);
POSENC_API posenc_status posenc_buffer_upload(posenc_buffer *buffer, uint64_t offset,
                                              const void *data, uint64_t size);
POSENC_API posenc_status posenc_buffer_download(posenc_buffer *buffer, uint64_t offset,
                                                void *data, uint64_t size);

/* Maps the whole buffer into the host's address space with no copy: `*data` points at its first
 * byte until posenc_buffer_unmap, for the caller to read and write in place. The map waits for
 * earlier work that uses the buffer (synchronous calls and submits), so the caller reads their
 * results. While the buffer is mapped, operations, uploads and downloads that use it are refused
 * (INVALID_ARGUMENT naming the view): unmap it first. A buffer maps once at a time.
 * Possible where the host already sees the buffer's memory: every buffer of the CPU backend,
 * every buffer wrapping host_memory (`*data` is that memory), and buffers on devices with
 * unified_memory (Vulkan: a host-visible coherent allocation; OpenCL: clEnqueueMapBuffer on
 * memory allocated for host access). Elsewhere (device-local memory of a discrete GPU, an
 * engine's wrapped VkBuffer) UNSUPPORTED: use posenc_buffer_upload / download, which stage. */
POSENC_API posenc_status posenc_buffer_map(posenc_buffer *buffer, void **data);
/* Ends the mapping: the pointer from posenc_buffer_map is invalid after it, and what the host
 * wrote is what later work reads. INVALID_ARGUMENT when the buffer is not mapped.
 * posenc_buffer_destroy unmaps a mapped buffer itself. */
POSENC_API posenc_status posenc_buffer_unmap(posenc_buffer *buffer);

/* ---------------------------------------------------------------------------------------------
 * Names of the enum values below (styles, scaling types, multimodal kinds, sinusoidal layouts,
 * dtypes), for command lines, configuration files and language bindings. Each of these enums is
 * generated from one list, X(NAME, value, "name"): the enum value POSENC_..._NAME, its number
 * (part of the ABI: never renumbered) and its canonical name, lower case with underscores
 * ("yarn_ggml"). The same lists give the two functions of each kind:
 *
 *   const char *posenc_<kind>_name(value): the canonical name; "unknown" for a value not in
 *     the list (never NULL).
 *   posenc_status posenc_<kind>_from_name(const char *name, <kind> *out): the value of `name`,
 *     which may spell each underscore as a hyphen ("yarn-ggml") and is read without regard to
 *     ASCII case ("YaRN_GGML"); the few older spellings written beside a list are accepted too.
 *     An unknown name, or a NULL name or out, is POSENC_INVALID_ARGUMENT with a message in
 *     posenc_thread_last_error listing the canonical names, and *out is left as it was.
 */

/* ---------------------------------------------------------------------------------------------
 * Tensor views
 */
/* DEFAULT: f32 for data tensors, i32 for positions. I32: positions only. Names: see "Names of
 * the enum values" above. */
#define POSENC_DTYPE_LIST(X)                                                                       \
    X(DEFAULT, 0, "default")                                                                       \
    X(F32, 1, "f32")                                                                               \
    X(F16, 2, "f16")                                                                               \
    X(BF16, 3, "bf16")                                                                             \
    X(I32, 4, "i32")

typedef enum posenc_dtype {
#define POSENC_DTYPE_ENUM_(name, value, text) POSENC_DTYPE_##name = value,
    POSENC_DTYPE_LIST(POSENC_DTYPE_ENUM_)
#undef POSENC_DTYPE_ENUM_
} posenc_dtype;

/* "default", "f32", "f16", "bf16", "i32"; "unknown" for another value. */
POSENC_API const char *posenc_dtype_name(posenc_dtype dtype);
POSENC_API posenc_status posenc_dtype_from_name(const char *name, posenc_dtype *out);
POSENC_API size_t posenc_dtype_size(posenc_dtype dtype); /* 0 for DEFAULT or unknown */

/* A view: memory + byte offset + dtype + up to 4 dims with byte strides, outermost first. Views
 * with fewer dims drop the outer ones: RoPE reads [batch, tokens, heads, head_dim],
 * [tokens, heads, head_dim], [tokens, head_dim] (one head) or [head_dim]; sinusoidal reads
 * [batch, rows, d_model], [rows, d_model] or [d_model]. Any layout is a choice of strides: a
 * [batch, heads, tokens, head_dim] tensor is passed with its token and head strides swapped, a
 * q slice of a fused qkv buffer with the qkv row strides. Exactly one of `buffer` and `host` is
 * set; a view with neither and ndim 0 is "absent". */
typedef struct posenc_tensor {
    posenc_buffer *buffer;            /* device memory, or NULL when `host` is used */
    void *host;                       /* caller host memory, borrowed (any backend) */
    uint64_t offset;                  /* bytes from the start of buffer/host; element-aligned */
    posenc_dtype dtype;               /* default: see posenc_dtype */
    uint32_t ndim;                    /* 1..POSENC_MAX_DIMS */
    int64_t shape[POSENC_MAX_DIMS];   /* sizes, outermost first; each >= 1 */
    int64_t strides[POSENC_MAX_DIMS]; /* bytes, positive multiples of the element size;
                                       * 0 = packed behind the next inner dim (all 0: row-major) */
} posenc_tensor;

/* Packed row-major views, a convenience for the common case. */
POSENC_API posenc_tensor posenc_tensor_of_buffer(posenc_buffer *buffer, posenc_dtype dtype,
                                                 uint32_t ndim, const int64_t *shape);
POSENC_API posenc_tensor posenc_tensor_of_host(void *host, posenc_dtype dtype, uint32_t ndim,
                                               const int64_t *shape);

/* RoPE: posenc_rope and its descriptor. */
#include "posenc_rope.h"

/* ---------------------------------------------------------------------------------------------
 * Sinusoidal encodings (Vaswani et al.; diffusion timestep embeddings)
 */
/* INTERLEAVED: sin f0, cos f0, sin f1, cos f1, ... (Vaswani); SIN_COS: [sin f0..f(h-1) |
 * cos f0..f(h-1)] (diffusers' default); COS_SIN: [cos | sin] (diffusers' flip_sin_to_cos). */
#define POSENC_SINUSOIDAL_LAYOUT_LIST(X)                                                           \
    X(INTERLEAVED, 0, "interleaved")                                                               \
    X(SIN_COS, 1, "sin_cos")                                                                       \
    X(COS_SIN, 2, "cos_sin")

typedef enum posenc_sinusoidal_layout {
#define POSENC_SINUSOIDAL_LAYOUT_ENUM_(name, value, text) POSENC_SINUSOIDAL_##name = value,
    POSENC_SINUSOIDAL_LAYOUT_LIST(POSENC_SINUSOIDAL_LAYOUT_ENUM_)
#undef POSENC_SINUSOIDAL_LAYOUT_ENUM_
} posenc_sinusoidal_layout;

/* "interleaved", "sin_cos", "cos_sin". */
POSENC_API const char *posenc_sinusoidal_layout_name(posenc_sinusoidal_layout layout);
POSENC_API posenc_status posenc_sinusoidal_layout_from_name(const char *name,
                                                            posenc_sinusoidal_layout *out);

/* out[b, r, :] = x[b, r, :] * input_scale + output_scale * PE(p), p the position of row r, with
 * PE(p) of d_model values at frequencies f_i = base^(-i / (d_model/2 - freq_shift)),
 * i < d_model/2; an odd d_model ends in one zero. Without x the table PE is written. */
typedef struct posenc_sinusoidal_desc {
    posenc_tensor out;          /* required: [rows, d_model] or [batch, rows, d_model] */
    posenc_tensor x;            /* optional: add mode; same shape; may be `out` itself (in place) */
    posenc_tensor positions;    /* i32 or f32 [rows] or [batch, rows]; absent: row index */
    int32_t position_offset;    /* absent positions: position = position_offset + row; must be
                                 * 0 when positions are given */
    posenc_sinusoidal_layout layout; /* default INTERLEAVED */
    double base;                /* max_period; default 10000 */
    double freq_shift;          /* diffusers' downscale_freq_shift; default 0 */
    double position_scale;      /* > 0, multiplies positions (diffusers' `scale`); default 1 */
    double input_scale;         /* add mode: multiplies x (e.g. sqrt(d_model)); default 1;
                                 * 0 or 1 without x (another value would have no effect) */
    double output_scale;        /* multiplies PE; default 1 */
} posenc_sinusoidal_desc;

POSENC_API posenc_status posenc_sinusoidal(posenc_context *context,
                                           const posenc_sinusoidal_desc *desc);

/* ---------------------------------------------------------------------------------------------
 * Warm-up: building kernels ahead of the first call
 * A GPU context builds a kernel (a Vulkan pipeline, an OpenCL program) and uploads a frequency
 * table at the first call that needs them, which makes that call milliseconds slower than the
 * next (an engine's first frame stutters). posenc_prepare does that work at a time the caller
 * chooses (loading a model), for the calls it names: each descriptor is one the caller will
 * pass later to posenc_rope / posenc_sinusoidal, their submits, posenc_vk_cmd_* or
 * posenc_cl_enqueue_*, tensors included. It is validated exactly as that call validates it
 * (messages start with its place: "rope[2].rotary_dim: ..."), and nothing is computed, written
 * or enqueued: the tensors' contents are read only where the call reads them too to choose the
 * table (DYNAMIC_NTK and LONGROPE without scaling.sequence_length read the positions).
 * - The kernels depend on the data dtype (q's; out's for sinusoidal encodings), and the tables
 *   on the frequency fields (rotary_dim, theta, scaling, inv_freq, multimodal; d_model, base
 *   and freq_shift): one descriptor per dtype and model is enough, whatever the shapes,
 *   positions or in-place choice of the later calls.
 * - Every descriptor is validated before anything is built: a bad one builds nothing. A device
 *   error while building returns its status; what was built before it stays in the context
 *   (used by later calls, freed with the context).
 * - Kernels stay built for the context's life. Tables stay as long as the context keeps tables
 *   (posenc_stats.freq_tables): every one on a caller's Vulkan device, the last few elsewhere.
 * - The native CPU path builds nothing: there posenc_prepare only validates.
 * - Needs the context to itself, like posenc_rope (see "Thread safety").
 */
typedef struct posenc_prepare_desc {
    const posenc_rope_desc *rope;             /* rope_count descriptors; NULL when 0 */
    size_t rope_count;
    const posenc_sinusoidal_desc *sinusoidal; /* sinusoidal_count descriptors; NULL when 0 */
    size_t sinusoidal_count;
} posenc_prepare_desc;

POSENC_API posenc_status posenc_prepare(posenc_context *context, const posenc_prepare_desc *desc);

/* ---------------------------------------------------------------------------------------------
 * Asynchronous operations, for callers who let posenc own the device and keep the host busy
 * meanwhile. A submit validates exactly like the synchronous call (same errors, nothing written
 * on failure), submits the work and returns without waiting for the device. One exception: the
 * positions' contents are not read on the host, since earlier work may still write them, so a
 * position outside caller cos/sin tables writes nothing for its token instead of being refused.
 * - Every tensor of a submitted operation must be a posenc_buffer view: host views are
 *   INVALID_ARGUMENT (naming the tensor); use the synchronous call for those. Buffers that wrap
 *   host_memory are UNSUPPORTED on the GPU backends where they copy that memory around each
 *   call, and accepted where the device imported it at the buffer's creation.
 * - Work of one context runs in submission order, and posenc_buffer_upload/download on the
 *   context are ordered after it: a download shows the results of every earlier submit.
 *   posenc_buffer_destroy and posenc_context_destroy wait for the work that uses them: the
 *   event of such work is complete when they return (see "Teardown").
 * - Until the work is done, the caller must not touch the memory of a buffer it uses through
 *   other means (a wrapped host_memory pointer, an engine's own view of the memory).
 * - The event is optional (NULL: not wanted). Events belong to their context: destroy them
 *   before it, or posenc_context_destroy frees those still alive.
 * - Backends without a device queue of their own (the native CPU path) run the work inside the
 *   submit call; the event is then already complete.
 */
typedef struct posenc_event posenc_event;

POSENC_API posenc_status posenc_rope_submit(posenc_context *context, const posenc_rope_desc *desc,
                                            posenc_event **event);
POSENC_API posenc_status posenc_sinusoidal_submit(posenc_context *context,
                                                  const posenc_sinusoidal_desc *desc,
                                                  posenc_event **event);
/* Waits up to `timeout_ns` nanoseconds (0: only polls; UINT64_MAX: no limit). Returns POSENC_OK
 * when the work is done, POSENC_TIMEOUT while it is still running, or the device error that
 * ended it. May be called again after it returned. */
POSENC_API posenc_status posenc_event_wait(posenc_event *event, uint64_t timeout_ns);
/* Frees the event without waiting (the work still completes). NULL is a no-op. */
POSENC_API void posenc_event_destroy(posenc_event *event);
/* Waits for every operation submitted on the context. */
POSENC_API posenc_status posenc_context_finish(posenc_context *context);

#ifdef __cplusplus
}
#endif

#endif /* POSENC_POSENC_H */
