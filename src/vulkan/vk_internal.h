/* SPDX-License-Identifier: MIT */
/* Private to the Vulkan backend: function tables, the enumerated device record, the context and
 * buffer state, and the helpers the files of src/vulkan share. Compiled with VK_NO_PROTOTYPES:
 * every Vulkan function comes from the loader at run time (vk_loader.c). */
#ifndef POSENC_VK_INTERNAL_H
#define POSENC_VK_INTERNAL_H

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include "backend.h"
#include "core/gpu_devices.h"
#include "core/gpu_plan.h"
#include "core/gpu_split.h"
#include "core/gpu_staging.h"
#include "core/gpu_tables.h"
#include "core/internal.h"
#include "core/kernels.h"
#include "core/platform.h"

#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Function tables (vk_loader.c)
 */

/* Instance functions every Vulkan 1.1 implementation has. */
#define POSENC_VK_INSTANCE_FUNCTIONS(X)                                                           \
    X(DestroyInstance)                                                                            \
    X(EnumeratePhysicalDevices)                                                                   \
    X(GetPhysicalDeviceProperties)                                                                \
    X(GetPhysicalDeviceProperties2)                                                               \
    X(GetPhysicalDeviceFeatures2)                                                                 \
    X(GetPhysicalDeviceMemoryProperties)                                                          \
    X(GetPhysicalDeviceQueueFamilyProperties)                                                     \
    X(EnumerateDeviceExtensionProperties)                                                         \
    X(CreateDevice)                                                                               \
    X(GetDeviceProcAddr)

/* Present only with VK_EXT_debug_utils. Instance-level functions, the object names and labels
 * too: the loader, and any layer that implements them, dispatch them to the device the call
 * names. */
#define POSENC_VK_DEBUG_FUNCTIONS(X)                                                              \
    X(CreateDebugUtilsMessengerEXT)                                                               \
    X(DestroyDebugUtilsMessengerEXT)                                                              \
    X(SetDebugUtilsObjectNameEXT)                                                                 \
    X(CmdBeginDebugUtilsLabelEXT)                                                                 \
    X(CmdEndDebugUtilsLabelEXT)

#define POSENC_VK_DEVICE_FUNCTIONS(X)                                                             \
    X(DestroyDevice)                                                                              \
    X(GetDeviceQueue)                                                                             \
    X(DeviceWaitIdle)                                                                             \
    X(CreateBuffer)                                                                               \
    X(DestroyBuffer)                                                                              \
    X(GetBufferMemoryRequirements)                                                                \
    X(AllocateMemory)                                                                             \
    X(FreeMemory)                                                                                 \
    X(BindBufferMemory)                                                                           \
    X(MapMemory)                                                                                  \
    X(CreateShaderModule)                                                                         \
    X(DestroyShaderModule)                                                                        \
    X(CreatePipelineCache)                                                                        \
    X(DestroyPipelineCache)                                                                       \
    X(GetPipelineCacheData)                                                                       \
    X(CreateComputePipelines)                                                                     \
    X(DestroyPipeline)                                                                            \
    X(CreateDescriptorSetLayout)                                                                  \
    X(DestroyDescriptorSetLayout)                                                                 \
    X(CreatePipelineLayout)                                                                       \
    X(DestroyPipelineLayout)                                                                      \
    X(CreateDescriptorPool)                                                                       \
    X(DestroyDescriptorPool)                                                                      \
    X(AllocateDescriptorSets)                                                                     \
    X(UpdateDescriptorSets)                                                                       \
    X(CreateCommandPool)                                                                          \
    X(DestroyCommandPool)                                                                         \
    X(AllocateCommandBuffers)                                                                     \
    X(FreeCommandBuffers)                                                                         \
    X(ResetCommandBuffer)                                                                         \
    X(BeginCommandBuffer)                                                                         \
    X(EndCommandBuffer)                                                                           \
    X(CmdBindPipeline)                                                                            \
    X(CmdBindDescriptorSets)                                                                      \
    X(CmdPushConstants)                                                                           \
    X(CmdDispatch)                                                                                \
    X(CmdPipelineBarrier)                                                                         \
    X(FreeDescriptorSets)                                                                         \
    X(GetFenceStatus)                                                                             \
    X(CmdCopyBuffer)                                                                              \
    X(CmdUpdateBuffer)                                                                            \
    X(CreateFence)                                                                                \
    X(DestroyFence)                                                                               \
    X(ResetFences)                                                                                \
    X(WaitForFences)                                                                              \
    X(QueueSubmit)

#define POSENC_VK_MEMBER_(name) PFN_vk##name name;

/* The loader, opened once per process and never closed. */
typedef struct posenc_vk_loader {
    PFN_vkGetInstanceProcAddr GetInstanceProcAddr;
    PFN_vkCreateInstance CreateInstance;
    PFN_vkEnumerateInstanceExtensionProperties EnumerateInstanceExtensionProperties;
    uint32_t instance_version; /* what the loader supports: VK_API_VERSION_1_0 and up */
} posenc_vk_loader;

/* The loader, or NULL with a static reason ("libvulkan.so.1 not found"). Thread-safe. */
const posenc_vk_loader *posenc_vk_loader_get(const char **reason);

typedef struct posenc_vk_instance_fns {
    POSENC_VK_INSTANCE_FUNCTIONS(POSENC_VK_MEMBER_)
    POSENC_VK_DEBUG_FUNCTIONS(POSENC_VK_MEMBER_)
} posenc_vk_instance_fns;

typedef struct posenc_vk_device_fns {
    POSENC_VK_DEVICE_FUNCTIONS(POSENC_VK_MEMBER_)
} posenc_vk_device_fns;

/* Fill the tables; false names the first missing function in `missing`. The debug functions
 * are optional (NULL when absent). */
bool posenc_vk_load_instance_fns(PFN_vkGetInstanceProcAddr get, VkInstance instance,
                                 posenc_vk_instance_fns *fns, const char **missing);
bool posenc_vk_load_device_fns(const posenc_vk_instance_fns *instance_fns, VkDevice device,
                               posenc_vk_device_fns *fns, const char **missing);

/* ---------------------------------------------------------------------------------------------
 * Instances (vk_instance.c)
 */
typedef struct posenc_vk_instance {
    VkInstance handle;
    uint32_t api_version;                /* requested in VkApplicationInfo */
    VkDebugUtilsMessengerEXT messenger;  /* VK_NULL_HANDLE when none */
    bool validation;                     /* VK_LAYER_KHRONOS_validation enabled by posenc */
    bool debug_utils;                    /* VK_EXT_debug_utils enabled by posenc */
    bool borrowed;                       /* the caller's instance: never destroyed */
    posenc_vk_instance_fns fns;
} posenc_vk_instance;

/* Creates an instance: portability enumeration when offered (MoltenVK), and with `log_ctx`
 * VK_EXT_debug_utils when offered (debug names and labels, vk_debug.c), with `validation` too
 * the Khronos validation layer (when installed) plus a debug messenger that forwards warnings
 * and errors to log_ctx's log. A messenger is also made when layers come from
 * VK_INSTANCE_LAYERS. On failure writes a message and returns the status, with the VkResult
 * of the runtime call that failed in `*runtime_result` (VK_SUCCESS when no runtime call failed:
 * no loader, or posenc itself out of host memory), so that a caller can tell the runtime's
 * VK_ERROR_OUT_OF_HOST_MEMORY from its own shortage. */
posenc_status posenc_vk_instance_create(posenc_context *log_ctx, bool validation,
                                        posenc_vk_instance *instance, char *message,
                                        size_t message_size, VkResult *runtime_result);
void posenc_vk_instance_destroy(posenc_vk_instance *instance);
/* Whether the `count` extensions listed name `name` (instance or device extensions). */
bool posenc_vk_has_extension(const VkExtensionProperties *extensions, uint32_t count,
                             const char *name);

/* ---------------------------------------------------------------------------------------------
 * Enumerated devices (vk_devices.c): what posenc_device_info (the posenc__device holding this
 * record) does not say.
 */
typedef struct posenc_vk_physical {
    uint8_t uuid[VK_UUID_SIZE];
    bool has_uuid;                /* the driver reported a non-zero deviceUUID */
    uint32_t enumeration_index;   /* among the physical devices, for devices without a UUID */
    uint32_t queue_family;        /* a compute queue family */
    bool push_descriptor;         /* VK_KHR_push_descriptor */
    bool portability_subset;      /* VK_KHR_portability_subset must be enabled */
    uint64_t import_alignment;    /* minImportedHostPointerAlignment (a power of two) */
    uint64_t max_allocation;      /* bytes of one allocation */
    uint64_t binding_alignment;   /* minStorageBufferOffsetAlignment */
    uint32_t max_group_count;     /* maxComputeWorkGroupCount[0] */
    /* The fewest invocations a compute subgroup may have where they can shuffle (subgroup
     * shuffle in compute; the smallest size subgroup size control allows), else 0. */
    uint32_t shuffle_lanes;
} posenc_vk_physical;

/* ---------------------------------------------------------------------------------------------
 * Contexts and buffers
 */

/* The kernels, each created at first use: the SPIR-V variants of shaders/variants.cmake. */
typedef posenc__spirv_id posenc_vk_kernel;

/* Storage buffers of every kernel: set 0, bindings 0-7 (8, what some mobile GPUs allow a
 * stage), of which the frequency table is POSENC_VK_TABLE_BINDING (the shaders' binding 3;
 * rope.comp's slots, cos, sin and norm weights follow it at 4-7); push constants up to this
 * size (the 128 bytes every Vulkan device offers). */
#define POSENC_VK_BINDINGS 8
#define POSENC_VK_TABLE_BINDING 3
#define POSENC_VK_PUSH_BYTES 128
/* Dispatches of one call whose ranges are remembered between barriers (one more is preceded
 * by a barrier). */
#define POSENC_VK_TRACKED_DISPATCHES 32

/* A buffer with its memory. `mapped` is set for host-visible memory (always coherent). */
typedef struct posenc_vk_allocation {
    VkBuffer buffer;
    VkDeviceMemory memory;
    void *mapped;
    uint64_t size;
} posenc_vk_allocation;

/* The device copy of a frequency table (vk_freqs.c): memory of its own, written once and
 * never changed, so that any command buffer that binds it stays valid. Slot i holds table i of
 * the context's core/gpu_tables.h cache. */
typedef struct posenc_vk_freq_table {
    posenc_vk_allocation memory; /* host-visible: the encoded words */
    uint64_t last_serial;        /* the last asynchronous submission that binds it */
} posenc_vk_freq_table;

/* Rings whose slots hold the tables past the cache (vk_freqs.c). Rings outgrown by a larger
 * table are kept until the context goes: recorded work may still bind them. */
#define POSENC_VK_TABLE_RINGS 32

/* Tables the cache does not keep (every cached table pinned by recorded work): each is written
 * by the command buffer that binds it, into the next slot of a device-local ring, between
 * barriers, so that a recorded command buffer carries its own table however often it is
 * submitted again. */
typedef struct posenc_vk_table_ring {
    posenc_vk_allocation rings[POSENC_VK_TABLE_RINGS]; /* the last one is in use */
    uint32_t ring_count;
    uint64_t slot_bytes; /* of the ring in use */
    uint32_t next;       /* its next slot */
    const uint32_t *pending; /* words the next dispatch needs written first (NULL: none) */
    uint64_t pending_bytes;
    uint64_t pending_offset;
} posenc_vk_table_ring;

/* A descriptor set of the pool path and the ranges it binds (vk_descriptors.c). */
typedef struct posenc_vk_cached_set posenc_vk_cached_set;

/* One asynchronous submission: its command buffer and fence, recycled once the fence signals
 * (vk_submit.c); so many in flight at once, one more waits for the oldest. */
#define POSENC_VK_MAX_SUBMISSIONS 16
typedef struct posenc_vk_submission {
    VkCommandBuffer commands;
    VkFence fence;
    uint64_t serial; /* 0: free */
} posenc_vk_submission;

/* Debug names and labels (vk_debug.c), through the instance's VK_EXT_debug_utils functions. */
typedef struct posenc_vk_debug {
    bool on; /* the instance has the extension enabled (or the caller says it has) */
    /* "posenc rope f16": each pipeline's name and its dispatches' label, built once by
     * posenc_vk_debug_init. */
    char kernel_labels[POSENC__SPIRV_VARIANT_COUNT][40];
} posenc_vk_debug;

typedef struct posenc_vk_context {
    posenc_vk_instance instance;
    const posenc_vk_physical *physical;
    VkPhysicalDevice physical_handle;
    VkDevice device;
    posenc_vk_device_fns fns;
    PFN_vkCmdPushDescriptorSetKHR CmdPushDescriptorSetKHR; /* NULL: the pool path */
    const VkAllocationCallbacks *allocator; /* the caller's, for everything posenc creates */
    bool external;                /* the caller's VkDevice: borrowed, never destroyed */
    bool borrowed_pipeline_cache; /* the caller's VkPipelineCache */
    posenc__mutex lock;           /* serialises recording, the set cache and the tables */
    bool lock_made;
    VkQueue queue;                /* VK_NULL_HANDLE: records only (a caller's device) */
    uint32_t queue_family;
    VkCommandPool command_pool;
    VkCommandBuffer commands;
    VkFence fence;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipeline_layout;
    VkDescriptorPool *pools;      /* grown as new binding sets need more sets */
    uint32_t pool_count;
    posenc_vk_cached_set *sets;   /* the pool path's sets, one per distinct binding set */
    uint32_t set_count;
    uint32_t set_capacity;
    VkPipelineCache pipeline_cache;
    VkPipeline pipelines[POSENC__SPIRV_VARIANT_COUNT];
    uint32_t device_memory_type;  /* posenc buffers */
    uint32_t host_memory_type;    /* staging: host-visible, coherent, cached when offered */
    bool unified;                 /* posenc buffers are mapped: no staging copies */
    /* Caller host memory is imported (vk_import.c): VK_EXT_external_memory_host enabled. */
    PFN_vkGetMemoryHostPointerPropertiesEXT GetMemoryHostPointerPropertiesEXT;
    bool host_import;
    bool storage16;               /* 16-bit storage enabled: the "_s16" kernels */
    /* The command buffer dispatches go into, and the ranges of the dispatches of the same call
     * since its start or its last barrier: a barrier comes before a dispatch that binds what
     * one of them writes, or writes what one of them binds. */
    VkCommandBuffer target;
    VkDescriptorBufferInfo previous[POSENC_VK_TRACKED_DISPATCHES][POSENC_VK_BINDINGS];
    uint32_t dispatches;          /* entries of `previous` */
    posenc_vk_allocation placeholder; /* bound where a kernel has no buffer */
    posenc__gpu_tables table_cache;
    posenc_vk_freq_table tables[POSENC__GPU_MAX_TABLES];
    posenc_vk_freq_table *table;  /* the cached table of the call being recorded, or NULL */
    VkDescriptorBufferInfo table_binding; /* where that call's table lies (its range unset) */
    posenc_vk_table_ring table_ring;
    posenc_vk_submission submissions[POSENC_VK_MAX_SUBMISSIONS];
    uint32_t submission_count;
    uint64_t serial;              /* of the last asynchronous submission */
    posenc_vk_allocation staging; /* host-visible: host data of operations, uploads, downloads */
    uint64_t binding_limit;       /* bytes one binding may span (aligned down) */
    posenc__device device_record; /* a caller's device: what posenc_context_device reports */
    posenc_vk_physical physical_record;
    posenc_vk_debug debug;
} posenc_vk_context;

typedef struct posenc_vk_buffer {
    posenc_vk_allocation allocation; /* none (zero) for wrapped host memory; for a caller's
                                      * VkBuffer (posenc_vk_buffer_wrap) only `buffer` and
                                      * `size` (the range) */
    uint64_t base;                   /* a caller's VkBuffer: where the range starts; wrapped
                                      * host memory that was imported: where host_memory lies
                                      * in the imported pages (`allocation` is then the import
                                      * and its `size` the buffer's) */
    bool borrowed;                   /* a caller's VkBuffer: never destroyed */
    uint64_t last_serial;            /* the last asynchronous submission that binds it */
} posenc_vk_buffer;

/* vk_status.c: a VkResult as a posenc status, with the context error "vulkan: WHAT: NAME". A
 * lost device marks the context lost. */
posenc_status posenc_vk_fail(posenc_context *ctx, VkResult result, const char *what);
posenc_status posenc_vk_status_of(VkResult result);
const char *posenc_vk_result_name(VkResult result);

/* vk_memory.c */
/* A memory type with all `required` flags among `type_bits`, preferring also `preferred`;
 * UINT32_MAX when none. */
uint32_t posenc_vk_memory_type(const VkPhysicalDeviceMemoryProperties *memory, uint32_t type_bits,
                               VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred);
/* A storage buffer that copies may read and write, of `size` bytes; `next` extends its
 * VkBufferCreateInfo (NULL: nothing). */
VkResult posenc_vk_create_buffer(posenc_vk_context *vk, uint64_t size, const void *next,
                                 VkBuffer *buffer);
/* A storage/transfer buffer of `size` bytes in memory type `type` (mapped when host-visible),
 * given `debug_name` (vk_debug.c). `what` names it in messages. */
posenc_status posenc_vk_allocate(posenc_context *ctx, uint64_t size, uint32_t type,
                                 bool host_visible, const char *what, const char *debug_name,
                                 posenc_vk_allocation *allocation);
void posenc_vk_release(posenc_context *ctx, posenc_vk_allocation *allocation);
/* Host-visible staging of at least `size` bytes (contents not kept): vk->staging, grown, up to
 * POSENC__GPU_STAGING_KEEP_BYTES; a larger one made in `*temporary`, which the caller
 * releases once the call is done. */
posenc_status posenc_vk_reserve(posenc_context *ctx, uint64_t size,
                                posenc_vk_allocation *temporary);

/* vk_commands.c: the command buffers posenc records for itself. posenc_vk_open begins one
 * (vk->target) after the writes of earlier work; posenc_vk_close makes its writes visible to
 * the host, ends it, and when `recorded` is OK submits it with `fence`. A failed recording is
 * ended too, so that the command buffer can be begun again, and its status returned. */
posenc_status posenc_vk_open(posenc_context *ctx, VkCommandBuffer commands);
posenc_status posenc_vk_close(posenc_context *ctx, VkCommandBuffer commands, VkFence fence,
                              posenc_status recorded);
/* The context's own command buffer, recorded and submitted synchronously: posenc_vk_submit
 * closes, submits and waits. Whatever fails after a begin still closes (posenc_vk_run closes a
 * failed recording), so that a begin always finds the command buffer ready. */
posenc_status posenc_vk_begin(posenc_context *ctx);
posenc_status posenc_vk_submit(posenc_context *ctx);
/* vk_debug.c: debug names and labels. posenc_vk_debug_init loads the functions when `wanted`
 * (the instance has VK_EXT_debug_utils enabled); where they are missing, a caller's instance
 * (`field`: the field that claimed the extension) is INVALID_ARGUMENT, posenc's own (`field`
 * NULL) goes without names. The others do nothing without the functions. */
posenc_status posenc_vk_debug_init(posenc_context *ctx, bool wanted, const char *field);
void posenc_vk_debug_name(const posenc_vk_context *vk, VkObjectType type, uint64_t handle,
                          const char *name);
/* Names the VkBuffer and the VkDeviceMemory of an allocation. */
void posenc_vk_debug_name_allocation(const posenc_vk_context *vk,
                                     const posenc_vk_allocation *allocation, const char *name);
void posenc_vk_debug_label_begin(const posenc_vk_context *vk, VkCommandBuffer commands,
                                 const char *label);
void posenc_vk_debug_label_end(const posenc_vk_context *vk, VkCommandBuffer commands);

/* The bits of a Vulkan handle as VkDebugUtilsObjectNameInfoEXT.objectHandle takes them: a
 * pointer (dispatchable handles, and the others on 64-bit platforms) or a uint64_t. */
static inline uint64_t posenc_vk_object_bits(const void *handle, size_t size)
{
    if (size == sizeof(uint64_t)) {
        uint64_t bits;
        memcpy(&bits, handle, sizeof bits);
        return bits;
    }
    uintptr_t address;
    memcpy(&address, handle, sizeof address);
    return (uint64_t)address;
}
#define POSENC_VK_OBJECT(handle) posenc_vk_object_bits(&(handle), sizeof(handle))

/* vk_descriptors.c: the writes of the bindings `infos` (into `set`; VK_NULL_HANDLE for push
 * descriptors). */
void posenc_vk_descriptor_writes(const VkDescriptorBufferInfo *infos, VkDescriptorSet set,
                                 VkWriteDescriptorSet writes[POSENC_VK_BINDINGS]);
/* The set for `infos` (the pool path), written at its first use and then kept until one of its
 * buffers is released, or the context goes. */
posenc_status posenc_vk_descriptor_set(posenc_context *ctx, const VkDescriptorBufferInfo *infos,
                                       VkDescriptorSet *set);
/* Forgets (and frees) the sets that bind `buffer`: called before the buffer is destroyed. */
void posenc_vk_forget_sets(posenc_context *ctx, VkBuffer buffer);
/* On posenc's own device, starts the cache again once it is large (after waiting for the work
 * that may bind its sets). Called before a call records anything. */
void posenc_vk_descriptors_trim(posenc_context *ctx);
void posenc_vk_descriptors_fini(posenc_context *ctx);

/* vk_fences.c: the submissions in flight. An event of posenc_*_submit is the serial of its
 * submission. */
typedef struct posenc_vk_event {
    uint64_t serial;
} posenc_vk_event;
/* A free submission: a signalled one, a new one while there are fewer than the most in flight,
 * or the oldest once it is done. */
posenc_status posenc_vk_acquire_submission(posenc_context *ctx, posenc_vk_submission **out);
posenc_status posenc_vk_event_wait(posenc_context *ctx, void *event_state, uint64_t timeout_ns);
void posenc_vk_event_release(posenc_context *ctx, void *event_state);
posenc_status posenc_vk_finish(posenc_context *ctx);
/* Waits for the submissions up to `serial` (those that may use a buffer or table). */
posenc_status posenc_vk_wait_serial(posenc_context *ctx, uint64_t serial);
/* Waits for every submission and frees their command buffers and fences. */
void posenc_vk_submissions_fini(posenc_context *ctx);

/* vk_pipeline.c */
posenc_status posenc_vk_pipeline(posenc_context *ctx, posenc_vk_kernel kernel,
                                 VkPipeline *pipeline);
/* The pipeline cache from ctx->pipeline_cache_path (or empty), and its saving. */
posenc_status posenc_vk_pipeline_cache_create(posenc_context *ctx);
void posenc_vk_pipeline_cache_save(posenc_context *ctx);

/* ---------------------------------------------------------------------------------------------
 * Placing views on the device (vk_staging.c) and splitting work into bindable windows
 * (vk_dispatch.c)
 */

/* Where a view's bytes are on the device. */
typedef struct posenc_vk_place {
    VkBuffer buffer;      /* VK_NULL_HANDLE: not bound (an absent view) */
    uint64_t buffer_size;
    uint64_t offset;      /* bytes from the buffer's start to the view's element 0 */
} posenc_vk_place;

/* Where a (non-host) buffer view's bytes are. */
posenc_vk_place posenc_vk_place_of(const posenc__view *view);

/* Host-memory views (host tensors, buffers wrapping host memory) of one operation in the
 * staging buffer, as core/gpu_staging.h plans them. */
typedef struct posenc_vk_staging {
    posenc__gpu_staging plan;
    posenc_vk_place *places[POSENC__GPU_MAX_VIEWS]; /* where each view of the plan goes */
    posenc_vk_allocation temporary; /* used instead of ctx's staging buffer when larger */
    /* The import of each imported region (vk_import.c), released after the call: the caller
     * may free that memory as soon as the call returns. */
    posenc_vk_allocation imports[POSENC__GPU_MAX_VIEWS];
    uint64_t import_base[POSENC__GPU_MAX_VIEWS]; /* where the region's lo lies in it */
} posenc_vk_staging;

/* vk_import.c: imports the pages covering [host, host + size) (VK_EXT_external_memory_host;
 * vk->host_import must be set) as one storage buffer, and stores in `*base` where `host` lies
 * in it. False, with the reason logged (naming `name`), when the memory is to be staged. */
bool posenc_vk_import(posenc_context *ctx, const void *host, uint64_t size, const char *name,
                      posenc_vk_allocation *allocation, uint64_t *base);

/* Places each view (NULL: absent), copying host-memory ones to the device; `access` says how
 * the kernels use each (POSENC__GPU_READ, POSENC__GPU_WRITE). `names` name the views in
 * messages. */
posenc_status posenc_vk_place_views(posenc_context *ctx, const posenc__view *const *views,
                                    const unsigned *access, const char *const *names,
                                    uint32_t count, posenc_vk_place *places,
                                    posenc_vk_staging *staging);
/* Copies the elements of the outputs back to host memory (when `copy_back`; the bytes between
 * them, such as the v slice of a fused qkv tensor, are left alone) and frees the staging. */
void posenc_vk_unstage(posenc_context *ctx, posenc_vk_staging *staging, bool copy_back);
/* vk_freqs.c: makes vk->table_binding the device copy of the table of `source`, as encoded and
 * cached by core/gpu_tables.h (found by freqs_id, or by content). `recorded`: the
 * call records into a caller's command buffer, so the table stays for the context's life, or,
 * once the cache holds only such tables, is written by the command buffer itself (the write is
 * recorded before the call's first dispatch, by posenc_vk_write_table). */
posenc_status posenc_vk_set_freqs(posenc_context *ctx, const posenc__gpu_table_source *source,
                                  bool recorded);
/* Records the write of a table set_freqs left pending into vk->target, between barriers. */
void posenc_vk_write_table(posenc_context *ctx);
void posenc_vk_freqs_fini(posenc_context *ctx);

typedef posenc__gpu_box posenc_vk_box;

/* What one dispatch binds: the descriptor ranges, and the element index of each binding's box
 * origin inside its range. */
typedef struct posenc_vk_windows {
    VkDescriptorBufferInfo infos[POSENC_VK_BINDINGS];
    uint32_t first[POSENC_VK_BINDINGS];
} posenc_vk_windows;

/* Records one dispatch of a box. */
typedef posenc_status (*posenc_vk_record_fn)(posenc_context *ctx, const posenc_vk_box *box,
                                             const posenc_vk_windows *windows, void *user);

/* Splits `shape` into boxes whose every binding fits in one descriptor range
 * (maxStorageBufferRange) and whose cells times `units_per_cell` fit in 31 bits, and records
 * each with `record`. Each binding is laid out as `extents` says (core/gpu_split.h) at
 * `places` (offset and size there are ignored). Bindings past `binding_count`, and unbound ones
 * (not `bound`, or no buffer placed), get the placeholder; POSENC_VK_TABLE_BINDING is the
 * frequency table of vk->table (its first `params_size` bytes) when `params_size` > 0. */
posenc_status posenc_vk_split(posenc_context *ctx, const posenc__gpu_extent *extents,
                              const posenc_vk_place *places, uint32_t binding_count,
                              const int64_t shape[3],
                              uint64_t units_per_cell, uint64_t params_size,
                              posenc_vk_record_fn record, void *user);
/* Binds `kernel` with `windows` and `push` and dispatches enough groups for `invocations`
 * (within maxComputeWorkGroupCount; the kernels loop over the rest). */
posenc_status posenc_vk_dispatch(posenc_context *ctx, posenc_vk_kernel kernel,
                                 const posenc_vk_windows *windows, const void *push,
                                 uint32_t push_size, uint64_t invocations);

/* One operation, as every call path takes it (the entries of vk_submit.c and the recording
 * calls of vk_engine.c): its views and table (core/gpu_plan.h), and its kernels and recording. */
#define POSENC_VK_OP_KERNELS 5
typedef struct posenc_vk_op {
    posenc__gpu_op gpu;
    /* Every kernel `record` may use, whose pipelines are made before anything is recorded, so
     * that a failed build leaves a caller's command buffer untouched (posenc_vk_run makes
     * them as it records, and takes descriptions without them). */
    posenc_vk_kernel kernels[POSENC_VK_OP_KERNELS];
    uint32_t kernel_count;
    /* Records the dispatches into vk->target, with the views at `places` (in the order of
     * gpu.views) and the table in vk->table. Nothing else is recorded except barriers between
     * dispatches that touch the same bytes. */
    posenc_status (*record)(posenc_context *ctx, const void *op, const posenc_vk_place *places);
    const void *op; /* what `record` takes */
} posenc_vk_op;
/* vk_rope.c, vk_sinusoidal.c: the description of `op`, which points into `op`; and
 * vk_submit.c's, of either kind. */
posenc_vk_op posenc_vk_rope_op(posenc_context *ctx, const posenc__rope_op *op);
posenc_vk_op posenc_vk_sinusoidal_op(posenc_context *ctx, const posenc__sinusoidal_op *op);
posenc_vk_op posenc_vk_op_of(posenc_context *ctx, const posenc__op *op);
/* vk_submit.c: records `run`, every view a device buffer (the front end checked them:
 * op_views.h), into vk->target, with its table set (`pinned` for the caller's command buffers,
 * so that it stays for the context's life) and its pipelines made before anything is recorded. */
posenc_status posenc_vk_record_device(posenc_context *ctx, const posenc_vk_op *run, bool pinned);
/* vk_commands.c: runs `op` on the context's own command buffer, under the context's lock:
 * sets its table, places its views (host memory staged), records, submits and waits, then
 * copies the outputs back to host memory. */
posenc_status posenc_vk_run(posenc_context *ctx, const posenc_vk_op *op);
/* vk_submit.c: the entries run, prepare and submit of src/backend.h (a submit's views are all
 * device buffers: the front end checked them, see op_views.h). */
posenc_status posenc_vk_op_run(posenc_context *ctx, const posenc__op *op);
posenc_status posenc_vk_op_prepare(posenc_context *ctx, const posenc__op *op);
posenc_status posenc_vk_op_submit(posenc_context *ctx, const posenc__op *op, void **event_state);

/* The roofline (vk_roofline.c) and buffers (vk_buffer.c). */
posenc_status posenc_vk_roofline(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                 uint64_t bytes, bool write_only);
posenc_status posenc_vk_buffer_init(posenc_context *ctx, posenc_buffer *buf);
void posenc_vk_buffer_fini(posenc_context *ctx, posenc_buffer *buf);
posenc_status posenc_vk_buffer_upload(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                      const void *data, uint64_t size);
posenc_status posenc_vk_buffer_download(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                        void *data, uint64_t size);
void *posenc_vk_buffer_host_address(posenc_context *ctx, posenc_buffer *buf);
posenc_status posenc_vk_buffer_map(posenc_context *ctx, posenc_buffer *buf, void **data);

/* vk_devices.c and vk_context.c */
posenc_status posenc_vk_enumerate(posenc__device_list *list, const char **reason);
void posenc_vk_release_devices(posenc__device_list *list);
posenc_status posenc_vk_context_init(posenc_context *ctx, const posenc__device *device);
void posenc_vk_context_fini(posenc_context *ctx);
/* Describes a physical device into `device` and the posenc_vk_physical its handle points to
 * (vk_devices.c): UNSUPPORTED when posenc cannot use it, OUT_OF_MEMORY when posenc ran out of
 * host memory; a failed query of the runtime (vkEnumerateDeviceExtensionProperties, whose list
 * the description needs) in `*failure`, with its status. */
posenc_status posenc_vk_describe(const posenc_vk_instance *instance, VkPhysicalDevice physical,
                                 uint32_t index, posenc__device *device,
                                 posenc__gpu_failure *failure);
/* vkEnumeratePhysicalDevices into `*physicals` (freed by the caller; NULL when posenc ran out
 * of host memory) and `*count`: VK_SUCCESS, or the VkResult of the call that failed. */
VkResult posenc_vk_physical_devices(const posenc_vk_instance *instance,
                                    VkPhysicalDevice **physicals, uint32_t *count);
/* A context on the caller's instance and device (vk_context.c). */
posenc_status posenc_vk_context_init_external(posenc_context *ctx,
                                              const posenc_context_desc *desc);
extern const posenc__backend posenc_vk_backend;

#endif
