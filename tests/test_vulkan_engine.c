/* SPDX-License-Identifier: MIT */
/* posenc inside an engine, through the public posenc_vulkan.h: a context on a Vulkan device this
 * test creates itself (validation layer on, any warning a failure), the errors of bad handles,
 * RoPE and sinusoidal encodings recorded into the test's command buffers over engine buffers in
 * every dtype and checked against the float64 reference, a command buffer submitted twice and
 * recorded before another frequency table was used, four threads recording at once, buffers
 * wrapped, made and destroyed on other threads while others record, the push-descriptor and
 * the descriptor-pool paths, synchronous and asynchronous calls on the caller's queue,
 * caller cos/sin tables recorded (a position outside them, written after the record, leaves
 * its token unwritten), the fused QK norm recorded (weights in engine buffers), the paged KV
 * cache write recorded and submitted twice with different
 * slots, and through posenc_rope_submit, byte for byte what the synchronous call writes,
 * posenc_prepare building every pipeline and table before the first record, and a decode loop
 * of 100,000 dynamic-NTK steps with a frequency table each (flat memory). A
 * machine without a Vulkan device skips it, unless POSENC_TEST_REQUIRE_DEVICES names vulkan. */
#include "decode_steps.h"
#include "reference.h"
#include "required_devices.h"
#include "test_common.h"

#define VK_NO_PROTOTYPES
#include <posenc/posenc_vulkan.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * A small headless engine: instance, device, queue, host-visible buffers, command buffers.
 */
#define ENGINE_FUNCTIONS(X)                                                                     \
    X(DestroyInstance) X(EnumeratePhysicalDevices) X(GetPhysicalDeviceProperties)             \
    X(GetPhysicalDeviceQueueFamilyProperties) X(GetPhysicalDeviceFeatures2)                   \
    X(GetPhysicalDeviceMemoryProperties) X(EnumerateDeviceExtensionProperties) X(CreateDevice) \
    X(GetDeviceProcAddr) X(CreateDebugUtilsMessengerEXT) X(DestroyDebugUtilsMessengerEXT)

#define DEVICE_FUNCTIONS(X)                                                                     \
    X(DestroyDevice) X(GetDeviceQueue) X(CreateBuffer) X(DestroyBuffer)                        \
    X(GetBufferMemoryRequirements) X(AllocateMemory) X(FreeMemory) X(BindBufferMemory)         \
    X(MapMemory) X(CreateCommandPool) X(DestroyCommandPool) X(AllocateCommandBuffers)          \
    X(BeginCommandBuffer) X(EndCommandBuffer) X(CmdPipelineBarrier) X(QueueSubmit)             \
    X(QueueWaitIdle) X(CreatePipelineCache) X(DestroyPipelineCache) X(CreateEvent)            \
    X(DestroyEvent) X(SetEvent) X(CmdWaitEvents)

#define MEMBER_(name) PFN_vk##name name;

/* The layer's synchronization validation, except under AddressSanitizer (the layer never frees
 * some of its state, which LeakSanitizer reports once the layer is unloaded). */
#if defined(__SANITIZE_ADDRESS__)
#define SYNC_VALIDATION 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SYNC_VALIDATION 0
#endif
#endif
#ifndef SYNC_VALIDATION
#define SYNC_VALIDATION 1
#endif

typedef struct engine {
    PFN_vkGetInstanceProcAddr GetInstanceProcAddr;
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice physical;
    VkDevice device;
    uint32_t family;
    VkQueue queue;
    uint32_t features; /* posenc_vulkan_feature bits enabled on the device */
    bool debug_utils;  /* VK_EXT_debug_utils enabled on the instance */
    char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    VkPhysicalDeviceMemoryProperties memory;
    ENGINE_FUNCTIONS(MEMBER_)
    DEVICE_FUNCTIONS(MEMBER_)
} engine;

static VKAPI_ATTR VkBool32 VKAPI_CALL count_messages(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    (void)user;
    test_failures++;
    fprintf(stderr, "engine validation %s: %s\n",
            severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning",
            data->pMessage);
    return VK_FALSE;
}

#if defined(_WIN32)
#  define VULKAN_LOADER "vulkan-1.dll"
#elif defined(__APPLE__)
#  define VULKAN_LOADER "libvulkan.1.dylib"
#else
#  define VULKAN_LOADER "libvulkan.so.1"
#endif

static PFN_vkGetInstanceProcAddr load_loader(const char **reason)
{
    static void *library;
    if (!library)
        library = posenc__library_open(VULKAN_LOADER);
    if (!library) {
        *reason = VULKAN_LOADER " not found";
        return NULL;
    }
    PFN_vkGetInstanceProcAddr gipa;
    void *symbol = posenc__library_symbol(library, "vkGetInstanceProcAddr");
    memcpy(&gipa, &symbol, sizeof gipa);
    return gipa;
}

static bool has_layer(PFN_vkGetInstanceProcAddr gipa, const char *name)
{
    PFN_vkEnumerateInstanceLayerProperties enumerate =
        (PFN_vkEnumerateInstanceLayerProperties)gipa(NULL, "vkEnumerateInstanceLayerProperties");
    uint32_t count = 0;
    if (!enumerate || enumerate(&count, NULL) != VK_SUCCESS)
        return false;
    VkLayerProperties *layers = calloc(count + 1, sizeof *layers);
    bool found = false;
    if (layers && enumerate(&count, layers) >= 0) {
        for (uint32_t i = 0; i < count && !found; i++)
            found = strcmp(layers[i].layerName, name) == 0;
    }
    free(layers);
    return found;
}

/* Offered by the implementation, the loader or an implicit layer. */
static bool instance_has_extension(PFN_vkGetInstanceProcAddr gipa, const char *name)
{
    PFN_vkEnumerateInstanceExtensionProperties enumerate =
        (PFN_vkEnumerateInstanceExtensionProperties)gipa(
            NULL, "vkEnumerateInstanceExtensionProperties");
    uint32_t count = 0;
    if (!enumerate || enumerate(NULL, &count, NULL) != VK_SUCCESS)
        return false;
    VkExtensionProperties *extensions = calloc(count + 1, sizeof *extensions);
    bool found = false;
    if (extensions && enumerate(NULL, &count, extensions) >= 0) {
        for (uint32_t i = 0; i < count && !found; i++)
            found = strcmp(extensions[i].extensionName, name) == 0;
    }
    free(extensions);
    return found;
}

static bool device_has_extension(engine *e, const char *name)
{
    uint32_t count = 0;
    e->EnumerateDeviceExtensionProperties(e->physical, NULL, &count, NULL);
    VkExtensionProperties *extensions = calloc(count + 1, sizeof *extensions);
    bool found = false;
    if (extensions && e->EnumerateDeviceExtensionProperties(e->physical, NULL, &count,
                                                            extensions) >= 0) {
        for (uint32_t i = 0; i < count && !found; i++)
            found = strcmp(extensions[i].extensionName, name) == 0;
    }
    free(extensions);
    return found;
}

/* Instance (with the validation layer when installed, and VK_EXT_debug_utils where offered)
 * and its first device with compute. */
static bool engine_instance(engine *e, const char **reason)
{
    memset(e, 0, sizeof *e);
    e->GetInstanceProcAddr = load_loader(reason);
    if (!e->GetInstanceProcAddr)
        return false;
    PFN_vkCreateInstance create =
        (PFN_vkCreateInstance)e->GetInstanceProcAddr(NULL, "vkCreateInstance");
    bool validation = has_layer(e->GetInstanceProcAddr, "VK_LAYER_KHRONOS_validation");
    e->debug_utils =
        validation || instance_has_extension(e->GetInstanceProcAddr,
                                             VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    const char *layer = "VK_LAYER_KHRONOS_validation";
    const char *extension = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .apiVersion = VK_API_VERSION_1_1};
    VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    VkValidationFeaturesEXT features = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                        .enabledValidationFeatureCount = 1,
                                        .pEnabledValidationFeatures = &sync};
    VkInstanceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = validation && SYNC_VALIDATION ? &features : NULL,
        .pApplicationInfo = &app,
        .enabledLayerCount = validation ? 1 : 0,
        .ppEnabledLayerNames = &layer,
        .enabledExtensionCount = e->debug_utils ? 1 : 0,
        .ppEnabledExtensionNames = &extension,
    };
    if (!create || create(&info, NULL, &e->instance) != VK_SUCCESS) {
        *reason = "vkCreateInstance failed";
        return false;
    }
#define LOAD_(name) e->name = (PFN_vk##name)e->GetInstanceProcAddr(e->instance, "vk" #name);
    ENGINE_FUNCTIONS(LOAD_)
#undef LOAD_
    if (validation && e->CreateDebugUtilsMessengerEXT) {
        VkDebugUtilsMessengerCreateInfoEXT messenger = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
            .pfnUserCallback = count_messages,
        };
        e->CreateDebugUtilsMessengerEXT(e->instance, &messenger, NULL, &e->messenger);
    }
    uint32_t count = 1;
    VkResult result = e->EnumeratePhysicalDevices(e->instance, &count, &e->physical);
    if ((result != VK_SUCCESS && result != VK_INCOMPLETE) || count == 0) {
        *reason = "no Vulkan physical device";
        return false;
    }
    VkPhysicalDeviceProperties properties;
    e->GetPhysicalDeviceProperties(e->physical, &properties);
    memcpy(e->name, properties.deviceName, sizeof e->name);
    e->GetPhysicalDeviceMemoryProperties(e->physical, &e->memory);
    uint32_t families = 0;
    e->GetPhysicalDeviceQueueFamilyProperties(e->physical, &families, NULL);
    VkQueueFamilyProperties family_properties[16];
    families = families > 16 ? 16 : families;
    e->GetPhysicalDeviceQueueFamilyProperties(e->physical, &families, family_properties);
    e->family = UINT32_MAX;
    for (uint32_t f = 0; f < families && e->family == UINT32_MAX; f++) {
        if (family_properties[f].queueFlags & VK_QUEUE_COMPUTE_BIT)
            e->family = f;
    }
    if (e->family == UINT32_MAX) {
        *reason = "no compute queue";
        return false;
    }
    return true;
}

/* A device with the features asked for that the physical device has. */
static bool engine_device(engine *e, bool push_descriptor, bool storage16)
{
    VkPhysicalDevice16BitStorageFeatures available16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                          .pNext = &available16};
    e->GetPhysicalDeviceFeatures2(e->physical, &features);
    storage16 = storage16 && available16.storageBuffer16BitAccess;
    push_descriptor =
        push_descriptor && device_has_extension(e, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    /* With push descriptors, also host memory import where posenc may use it (unified memory:
     * posenc_device_info.host_memory_import). */
    bool host_import = false;
    uint32_t devices = 0;
    CHECK_OK(posenc_device_count(&devices));
    for (uint32_t d = 0; d < devices && push_descriptor; d++) {
        posenc_device_info info;
        host_import = host_import || (posenc_device_get(d, &info) == POSENC_OK &&
                                      info.backend == POSENC_BACKEND_VULKAN &&
                                      info.host_memory_import && strcmp(info.name, e->name) == 0);
    }
    VkPhysicalDevice16BitStorageFeatures enable16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .storageBuffer16BitAccess = VK_TRUE};
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                     .queueFamilyIndex = e->family,
                                     .queueCount = 1,
                                     .pQueuePriorities = &priority};
    const char *extensions[2] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME,
                                 VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME};
    VkDeviceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = storage16 ? &enable16 : NULL,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &queue,
        .enabledExtensionCount = push_descriptor ? (host_import ? 2 : 1) : 0,
        .ppEnabledExtensionNames = extensions,
    };
    if (e->CreateDevice(e->physical, &info, NULL, &e->device) != VK_SUCCESS)
        return false;
#define LOAD_(name) e->name = (PFN_vk##name)e->GetDeviceProcAddr(e->device, "vk" #name);
    DEVICE_FUNCTIONS(LOAD_)
#undef LOAD_
    e->GetDeviceQueue(e->device, e->family, 0, &e->queue);
    e->features = (push_descriptor ? POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR : 0u) |
                  (storage16 ? POSENC_VULKAN_FEATURE_16BIT_STORAGE : 0u) |
                  (host_import ? POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT : 0u);
    return true;
}

static void engine_destroy(engine *e)
{
    if (e->device)
        e->DestroyDevice(e->device, NULL);
    if (e->messenger)
        e->DestroyDebugUtilsMessengerEXT(e->instance, e->messenger, NULL);
    if (e->instance)
        e->DestroyInstance(e->instance, NULL);
    memset(e, 0, sizeof *e);
}

/* One host-visible, coherent buffer the engine owns, mapped. */
typedef struct arena {
    VkBuffer buffer;
    VkDeviceMemory memory;
    unsigned char *bytes;
    VkDeviceSize size;
} arena;

static bool arena_create(engine *e, arena *a, VkDeviceSize size)
{
    memset(a, 0, sizeof *a);
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                               .size = size,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    if (e->CreateBuffer(e->device, &info, NULL, &a->buffer) != VK_SUCCESS)
        return false;
    VkMemoryRequirements requirements;
    e->GetBufferMemoryRequirements(e->device, a->buffer, &requirements);
    const VkMemoryPropertyFlags wanted =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t t = 0; t < e->memory.memoryTypeCount && type == UINT32_MAX; t++) {
        if ((requirements.memoryTypeBits & (1u << t)) &&
            (e->memory.memoryTypes[t].propertyFlags & wanted) == wanted)
            type = t;
    }
    VkMemoryAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                     .allocationSize = requirements.size,
                                     .memoryTypeIndex = type};
    void *mapped = NULL;
    if (type == UINT32_MAX ||
        e->AllocateMemory(e->device, &allocate, NULL, &a->memory) != VK_SUCCESS ||
        e->BindBufferMemory(e->device, a->buffer, a->memory, 0) != VK_SUCCESS ||
        e->MapMemory(e->device, a->memory, 0, VK_WHOLE_SIZE, 0, &mapped) != VK_SUCCESS)
        return false;
    a->bytes = mapped;
    a->size = size;
    memset(a->bytes, 0, (size_t)size);
    return true;
}

static void arena_destroy(engine *e, arena *a)
{
    if (a->buffer)
        e->DestroyBuffer(e->device, a->buffer, NULL);
    if (a->memory)
        e->FreeMemory(e->device, a->memory, NULL);
    memset(a, 0, sizeof *a);
}

static VkCommandBuffer begin_commands(engine *e, VkCommandPool pool)
{
    VkCommandBufferAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                        .commandPool = pool,
                                        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                        .commandBufferCount = 1};
    VkCommandBuffer commands = VK_NULL_HANDLE;
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if (e->AllocateCommandBuffers(e->device, &info, &commands) != VK_SUCCESS ||
        e->BeginCommandBuffer(commands, &begin) != VK_SUCCESS)
        return VK_NULL_HANDLE;
    return commands;
}

/* The contract of posenc_vulkan.h: the host's writes visible to posenc's compute reads before,
 * and posenc's writes visible to the host after. */
static void host_to_compute(engine *e, VkCommandBuffer commands)
{
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT,
                               .dstAccessMask =
                                   VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    e->CmdPipelineBarrier(commands, VK_PIPELINE_STAGE_HOST_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, NULL, 0, NULL);
}

static void compute_to_host(engine *e, VkCommandBuffer commands)
{
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                               .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    e->CmdPipelineBarrier(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, NULL, 0, NULL);
}

/* The contract's barrier between two compute users of the same memory. */
static void compute_to_compute(engine *e, VkCommandBuffer commands)
{
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                               .dstAccessMask =
                                   VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    e->CmdPipelineBarrier(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, NULL, 0, NULL);
}

static void submit_and_wait(engine *e, VkCommandBuffer commands)
{
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &commands};
    CHECK(e->QueueSubmit(e->queue, 1, &submit, VK_NULL_HANDLE) == VK_SUCCESS);
    CHECK(e->QueueWaitIdle(e->queue) == VK_SUCCESS);
}

static VkCommandPool make_pool(engine *e)
{
    VkCommandPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                    .queueFamilyIndex = e->family};
    VkCommandPool pool = VK_NULL_HANDLE;
    CHECK(e->CreateCommandPool(e->device, &info, NULL, &pool) == VK_SUCCESS);
    return pool;
}

static posenc_context *external_context(engine *e, VkQueue queue, uint32_t features)
{
    posenc_context_desc desc = {
        .log = test_count_warnings,
        .vulkan = posenc_vulkan_external_of(e->instance, e->physical, e->device, e->family, queue,
                                            e->GetInstanceProcAddr, features),
    };
    posenc_context *ctx = NULL;
    posenc_status status = posenc_context_create(&desc, &ctx);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "external context: %s: %s\n", posenc_status_name(status),
                posenc_thread_last_error());
    }
    return ctx;
}

/* ---------------------------------------------------------------------------------------------
 * RoPE on engine buffers: q [TOKENS, Q_HEADS, HEAD_DIM] rotated out of place into q_out, k
 * [TOKENS, K_HEADS, HEAD_DIM] in place, int32 positions, partial rotary dims, all at offsets of
 * one engine buffer (one posenc_vk_buffer_wrap per tensor).
 */
enum { TOKENS = 7, Q_HEADS = 4, K_HEADS = 2, HEAD_DIM = 64, ROTARY_DIM = 48 };
#define Q_COUNT (TOKENS * Q_HEADS * HEAD_DIM)
#define K_COUNT (TOKENS * K_HEADS * HEAD_DIM)
/* Bytes of each tensor's slot in the arena (room for f32), a multiple of 256. */
#define SLOT 8192

typedef struct rope_work {
    posenc_dtype dtype;
    posenc_rope_style style;
    double theta;
    int32_t positions[TOKENS];
    double q[Q_COUNT], k[K_COUNT]; /* the inputs as stored (rounded to dtype) */
    VkDeviceSize at;               /* the first of the four slots: q, q_out, k, positions */
    posenc_buffer *q_buffer, *q_out_buffer, *k_buffer, *positions_buffer;
} rope_work;

static void rope_fill(rope_work *w, arena *a, uint64_t seed)
{
    test_rng rng = {seed};
    size_t e = posenc_dtype_size(w->dtype);
    for (int i = 0; i < Q_COUNT; i++) {
        ref_store(w->dtype, a->bytes + w->at + i * e, test_rng_uniform(&rng, -2.0, 2.0));
        w->q[i] = ref_load(w->dtype, a->bytes + w->at + i * e);
    }
    memset(a->bytes + w->at + SLOT, 0xff, SLOT); /* q_out: NaN until written */
    for (int i = 0; i < K_COUNT; i++) {
        ref_store(w->dtype, a->bytes + w->at + 2 * SLOT + i * e,
                  test_rng_uniform(&rng, -2.0, 2.0));
        w->k[i] = ref_load(w->dtype, a->bytes + w->at + 2 * SLOT + i * e);
    }
    for (int t = 0; t < TOKENS; t++) {
        /* Spread over the int32 range: accuracy must not depend on the position. */
        w->positions[t] = (int32_t)(uint32_t)(seed * 977u + (uint32_t)t * 613566757u);
        memcpy(a->bytes + w->at + 3 * SLOT + t * 4, &w->positions[t], 4);
    }
}

/* Without CHECK, for threads (which report through their job). */
static bool rope_wrap_quietly(posenc_context *ctx, rope_work *w, VkBuffer buffer)
{
    return posenc_vk_buffer_wrap(ctx, buffer, w->at, SLOT, &w->q_buffer) == POSENC_OK &&
           posenc_vk_buffer_wrap(ctx, buffer, w->at + SLOT, SLOT, &w->q_out_buffer) ==
               POSENC_OK &&
           posenc_vk_buffer_wrap(ctx, buffer, w->at + 2 * SLOT, SLOT, &w->k_buffer) ==
               POSENC_OK &&
           posenc_vk_buffer_wrap(ctx, buffer, w->at + 3 * SLOT, SLOT, &w->positions_buffer) ==
               POSENC_OK;
}

static bool rope_wrap(posenc_context *ctx, rope_work *w, arena *a)
{
    bool ok = rope_wrap_quietly(ctx, w, a->buffer);
    CHECK(ok);
    return ok;
}

static void rope_unwrap(rope_work *w)
{
    posenc_buffer_destroy(w->q_buffer);
    posenc_buffer_destroy(w->q_out_buffer);
    posenc_buffer_destroy(w->k_buffer);
    posenc_buffer_destroy(w->positions_buffer);
    w->q_buffer = w->q_out_buffer = w->k_buffer = w->positions_buffer = NULL;
}

static posenc_rope_desc rope_desc_of(const rope_work *w)
{
    const int64_t q_shape[3] = {TOKENS, Q_HEADS, HEAD_DIM};
    const int64_t k_shape[3] = {TOKENS, K_HEADS, HEAD_DIM};
    const int64_t positions_shape[1] = {TOKENS};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_buffer(w->q_buffer, w->dtype, 3, q_shape),
        .q_out = posenc_tensor_of_buffer(w->q_out_buffer, w->dtype, 3, q_shape),
        .k = posenc_tensor_of_buffer(w->k_buffer, w->dtype, 3, k_shape),
        .positions = posenc_tensor_of_buffer(w->positions_buffer, POSENC_DTYPE_I32, 1,
                                             positions_shape),
        .rotary_dim = ROTARY_DIM,
        .style = w->style,
        .theta = w->theta,
    };
    return desc;
}

/* Every output element against the reference, with the promise of posenc.h as tolerance (the
 * pair norm scales the f32 bound; f16/bf16 add one ulp of the output type); pass-through dims
 * must be the input's exact values. */
static void rope_check(const rope_work *w, const arena *a, const char *label)
{
    posenc_rope_desc desc = rope_desc_of(w);
    double inv_freq[ROTARY_DIM / 2], ref[HEAD_DIM], norm[HEAD_DIM];
    double factor = ref_rope_frequencies(&desc, ROTARY_DIM, inv_freq);
    size_t e = posenc_dtype_size(w->dtype);
    ref_stats stats = {0};
    int bad = 0;
    for (int which = 0; which < 2; which++) {
        int heads = which == 0 ? Q_HEADS : K_HEADS;
        const double *input = which == 0 ? w->q : w->k;
        const unsigned char *out = a->bytes + w->at + (which == 0 ? SLOT : 2 * SLOT);
        for (int t = 0; t < TOKENS; t++) {
            for (int h = 0; h < heads; h++) {
                const double *x = input + (t * heads + h) * HEAD_DIM;
                ref_rope_head(x, ref, HEAD_DIM, ROTARY_DIM, w->style, inv_freq,
                              (double)w->positions[t], factor, false);
                for (uint32_t j = 0; j < ROTARY_DIM / 2; j++) {
                    uint32_t ia, ib;
                    ref_rope_pair(w->style, ROTARY_DIM, j, &ia, &ib);
                    norm[ia] = norm[ib] = hypot(ref[ia], ref[ib]);
                }
                for (int d = 0; d < HEAD_DIM; d++) {
                    double got = ref_load(w->dtype, out + ((t * heads + h) * HEAD_DIM + d) * e);
                    bool ok = d < ROTARY_DIM ? ref_check(&stats, w->dtype, got, ref[d], norm[d], 0)
                                             : got == x[d];
                    if (!ok && bad++ < 4)
                        fprintf(stderr, "  %s %s %s[%d,%d,%d]: got %.9g, expected %.9g\n", label,
                                posenc_dtype_name(w->dtype), which ? "k" : "q_out", t, h, d, got,
                                ref[d]);
                }
            }
        }
    }
    if (bad)
        test_failures++;
}

static bool cmd_rope(posenc_context *ctx, VkCommandBuffer commands, const rope_work *w)
{
    posenc_rope_desc desc = rope_desc_of(w);
    posenc_status status = posenc_vk_cmd_rope(ctx, commands, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  posenc_vk_cmd_rope: %s: %s\n", posenc_status_name(status),
                posenc_context_last_error(ctx));
    }
    return status == POSENC_OK;
}

/* One recorded RoPE per dtype and style, each checked against the reference. */
static void test_rope_dtypes(engine *e, posenc_context *ctx, VkCommandPool pool)
{
    static const posenc_dtype dtypes[3] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    arena a;
    CHECK(arena_create(e, &a, 4 * SLOT));
    for (int d = 0; d < 3 && a.bytes; d++) {
        for (int style = 0; style < 2; style++) {
            rope_work *w = calloc(1, sizeof *w);
            w->dtype = dtypes[d];
            w->style = (posenc_rope_style)style;
            w->theta = 10000.0;
            rope_fill(w, &a, 100 + (uint64_t)d * 2 + (uint64_t)style);
            if (rope_wrap(ctx, w, &a)) {
                VkCommandBuffer commands = begin_commands(e, pool);
                host_to_compute(e, commands);
                if (cmd_rope(ctx, commands, w)) {
                    compute_to_host(e, commands);
                    CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
                    submit_and_wait(e, commands);
                    rope_check(w, &a, "cmd_rope");
                }
            }
            rope_unwrap(w);
            free(w);
        }
    }
    arena_destroy(e, &a);
}

/* Caller cos/sin tables recorded over engine buffers: byte for byte what the synchronous call
 * writes, but for a token whose position, written after the record (which cannot read it),
 * lies outside the tables: left unwritten, in q_out and in k rotated in place. */
static void test_rope_tables_recorded(engine *e, posenc_context *ctx, VkCommandPool pool)
{
    enum { ROWS = 16, WIDTH = ROTARY_DIM / 2, OUTSIDE_TOKEN = 2 };
    arena a;
    rope_work *w = calloc(1, sizeof *w);
    unsigned char *inputs = malloc(4 * SLOT), *expected = malloc(4 * SLOT);
    posenc_buffer *tables[2] = {NULL, NULL};
    bool ready = arena_create(e, &a, 6 * SLOT) && w && inputs && expected;
    CHECK(ready);
    if (ready) {
        w->dtype = POSENC_DTYPE_F32;
        w->style = POSENC_ROPE_NEOX;
        rope_fill(w, &a, 300);
        test_rng rng = {301};
        for (int i = 0; i < 2 * SLOT / 4; i++) /* cos, then sin: any values, as given */
            ref_store(POSENC_DTYPE_F32, a.bytes + 4 * SLOT + i * 4,
                      test_rng_uniform(&rng, -1.5, 1.5));
        for (int t = 0; t < TOKENS; t++) {
            w->positions[t] = t * 5 % ROWS;
            memcpy(a.bytes + 3 * SLOT + t * 4, &w->positions[t], 4);
        }
        memcpy(inputs, a.bytes, 4 * SLOT);
        ready = rope_wrap(ctx, w, &a);
        for (int i = 0; i < 2 && ready; i++)
            ready = posenc_vk_buffer_wrap(ctx, a.buffer, (4 + i) * SLOT, SLOT, &tables[i]) ==
                    POSENC_OK;
        CHECK(ready);
    }
    if (ready) {
        posenc_rope_desc desc = rope_desc_of(w);
        desc.theta = 0.0;
        const int64_t table_shape[2] = {ROWS, WIDTH};
        desc.cos = posenc_tensor_of_buffer(tables[0], POSENC_DTYPE_F32, 2, table_shape);
        desc.sin = posenc_tensor_of_buffer(tables[1], POSENC_DTYPE_F32, 2, table_shape);
        CHECK_OK(posenc_rope(ctx, &desc));
        memcpy(expected, a.bytes, 4 * SLOT);
        memcpy(a.bytes, inputs, 4 * SLOT);
        VkCommandBuffer commands = begin_commands(e, pool);
        host_to_compute(e, commands);
        CHECK_OK(posenc_vk_cmd_rope(ctx, commands, &desc));
        compute_to_host(e, commands);
        CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
        int32_t outside = ROWS;
        memcpy(a.bytes + 3 * SLOT + OUTSIDE_TOKEN * 4, &outside, 4);
        submit_and_wait(e, commands);
        for (int which = 0; which < 2; which++) { /* q_out, then k */
            size_t token_bytes = (size_t)(which ? K_HEADS : Q_HEADS) * HEAD_DIM * 4;
            size_t at = (which ? 2 : 1) * (size_t)SLOT;
            for (int t = 0; t < TOKENS; t++) {
                const unsigned char *want = t == OUTSIDE_TOKEN ? inputs : expected;
                size_t offset = at + (size_t)t * token_bytes;
                if (memcmp(a.bytes + offset, want + offset, token_bytes) != 0) {
                    test_failures++;
                    fprintf(stderr, "  cmd_rope with cos/sin tables: %s token %d %s\n",
                            which ? "k" : "q_out", t,
                            t == OUTSIDE_TOKEN ? "written" : "unlike the synchronous call's");
                }
            }
        }
    }
    posenc_buffer_destroy(tables[0]);
    posenc_buffer_destroy(tables[1]);
    if (w)
        rope_unwrap(w);
    free(w);
    free(inputs);
    free(expected);
    arena_destroy(e, &a);
}

/* The fused QK norm recorded over engine buffers, q's weights per head in f16 and k's over the
 * token's whole k in f32 (OLMo 2's form), Gemma's weight offset: byte for byte what the
 * synchronous call writes. */
static void test_rope_norm_recorded(engine *e, posenc_context *ctx, VkCommandPool pool)
{
    arena a;
    rope_work *w = calloc(1, sizeof *w);
    unsigned char *inputs = malloc(4 * SLOT), *expected = malloc(6 * SLOT);
    posenc_buffer *weights[2] = {NULL, NULL};
    bool ready = arena_create(e, &a, 6 * SLOT) && w && inputs && expected;
    CHECK(ready);
    if (ready) {
        w->dtype = POSENC_DTYPE_F32;
        w->style = POSENC_ROPE_GPTJ;
        rope_fill(w, &a, 310);
        test_rng rng = {311};
        for (int i = 0; i < HEAD_DIM; i++)
            ref_store(POSENC_DTYPE_F16, a.bytes + 4 * SLOT + i * 2,
                      test_rng_uniform(&rng, -1.0, 1.0));
        for (int i = 0; i < K_HEADS * HEAD_DIM; i++)
            ref_store(POSENC_DTYPE_F32, a.bytes + 5 * SLOT + i * 4,
                      test_rng_uniform(&rng, -1.0, 1.0));
        memcpy(inputs, a.bytes, 4 * SLOT);
        ready = rope_wrap(ctx, w, &a);
        for (int i = 0; i < 2 && ready; i++)
            ready = posenc_vk_buffer_wrap(ctx, a.buffer, (4 + i) * SLOT, SLOT, &weights[i]) ==
                    POSENC_OK;
        CHECK(ready);
    }
    if (ready) {
        posenc_rope_desc desc = rope_desc_of(w);
        desc.q_norm_weight =
            posenc_tensor_of_buffer(weights[0], POSENC_DTYPE_F16, 1, (int64_t[]){HEAD_DIM});
        desc.k_norm_weight = posenc_tensor_of_buffer(weights[1], POSENC_DTYPE_F32, 1,
                                                     (int64_t[]){K_HEADS * HEAD_DIM});
        desc.norm_weight_offset = 1.0;
        CHECK_OK(posenc_rope(ctx, &desc));
        memcpy(expected, a.bytes, 4 * SLOT);
        memcpy(a.bytes, inputs, 4 * SLOT);
        VkCommandBuffer commands = begin_commands(e, pool);
        host_to_compute(e, commands);
        CHECK_OK(posenc_vk_cmd_rope(ctx, commands, &desc));
        compute_to_host(e, commands);
        CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
        submit_and_wait(e, commands);
        if (memcmp(a.bytes + SLOT, expected + SLOT, 2 * SLOT) != 0) {
            test_failures++;
            fprintf(stderr, "  cmd_rope with the QK norm: unlike the synchronous call's\n");
        }
    }
    posenc_buffer_destroy(weights[0]);
    posenc_buffer_destroy(weights[1]);
    if (w)
        rope_unwrap(w);
    free(w);
    free(inputs);
    free(expected);
    arena_destroy(e, &a);
}

/* Recorded command buffers stay valid: A is recorded, then B with another frequency table (the
 * context's cache then holds B's); B runs, then A twice, its output clobbered in between. */
static void test_replay(engine *e, posenc_context *ctx, VkCommandPool pool)
{
    arena a;
    CHECK(arena_create(e, &a, 8 * SLOT));
    rope_work *w[2] = {calloc(1, sizeof(rope_work)), calloc(1, sizeof(rope_work))};
    VkCommandBuffer commands[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};
    bool recorded = a.bytes != NULL;
    for (int i = 0; i < 2 && recorded; i++) {
        w[i]->dtype = POSENC_DTYPE_F32;
        w[i]->theta = i ? 500000.0 : 10000.0;
        w[i]->at = (VkDeviceSize)i * 4 * SLOT;
        rope_fill(w[i], &a, 7 + (uint64_t)i);
        recorded = rope_wrap(ctx, w[i], &a);
        commands[i] = recorded ? begin_commands(e, pool) : VK_NULL_HANDLE;
        recorded = recorded && commands[i];
        if (recorded) {
            host_to_compute(e, commands[i]);
            recorded = cmd_rope(ctx, commands[i], w[i]);
            compute_to_host(e, commands[i]);
            CHECK(e->EndCommandBuffer(commands[i]) == VK_SUCCESS);
        }
    }
    if (recorded) {
        submit_and_wait(e, commands[1]);
        rope_check(w[1], &a, "second recording");
        /* k is rotated in place: put the inputs back before each run. */
        for (int run = 0; run < 2; run++) {
            rope_fill(w[0], &a, 7);
            submit_and_wait(e, commands[0]);
            rope_check(w[0], &a, run ? "first recording, second run" : "first recording");
        }
    }
    for (int i = 0; i < 2; i++) {
        rope_unwrap(w[i]);
        free(w[i]);
    }
    arena_destroy(e, &a);
}

/* ---------------------------------------------------------------------------------------------
 * A long decode loop with dynamic NTK (decode_steps.h), a command buffer per batch: device memory
 * stays flat once the cache is full, and the first command buffer, submitted again at the end,
 * still carries its own tables.
 */
typedef struct decode_loop {
    engine *e;
    posenc_context *ctx;
    arena a;
    posenc_buffer *buffer; /* the whole arena */
    float *inputs;
} decode_loop;

/* Records a batch from `first`; VK_NULL_HANDLE after a failure (reported). */
static VkCommandBuffer decode_record(decode_loop *loop, VkCommandPool pool, int32_t first)
{
    VkCommandBuffer commands = begin_commands(loop->e, pool);
    CHECK(commands != VK_NULL_HANDLE);
    if (!commands)
        return VK_NULL_HANDLE;
    host_to_compute(loop->e, commands);
    for (uint32_t i = 0; i < DECODE_BATCH; i++) {
        posenc_rope_desc desc = decode_step_desc(loop->buffer, i, first + (int32_t)i);
        posenc_status status = posenc_vk_cmd_rope(loop->ctx, commands, &desc);
        if (status != POSENC_OK) {
            test_failures++;
            fprintf(stderr, "  decode step %d: %s: %s\n", first + (int32_t)i,
                    posenc_status_name(status), posenc_context_last_error(loop->ctx));
            return VK_NULL_HANDLE;
        }
    }
    compute_to_host(loop->e, commands);
    CHECK(loop->e->EndCommandBuffer(commands) == VK_SUCCESS);
    return commands;
}

/* Runs a recorded batch on fresh inputs and checks it. */
static bool decode_run(decode_loop *loop, VkCommandBuffer commands, int32_t first, uint64_t seed)
{
    decode_fill(loop->inputs, seed);
    memcpy(loop->a.bytes, loop->inputs, DECODE_BATCH_BYTES);
    submit_and_wait(loop->e, commands);
    bool ok = decode_batch_ok(loop->inputs, (const float *)loop->a.bytes, first);
    CHECK(ok);
    return ok;
}

static void test_decode_loop(engine *e, VkCommandPool pool, int32_t steps)
{
    decode_loop loop = {.e = e, .ctx = external_context(e, e->queue, e->features)};
    loop.inputs = malloc(DECODE_BATCH_BYTES);
    bool ok = loop.ctx && loop.inputs && arena_create(e, &loop.a, DECODE_BATCH_BYTES);
    CHECK(ok);
    if (ok)
        CHECK_OK(posenc_vk_buffer_wrap(loop.ctx, loop.a.buffer, 0, DECODE_BATCH_BYTES,
                                       &loop.buffer));
    ok = ok && loop.buffer;
    VkCommandBuffer first = VK_NULL_HANDLE;
    posenc_stats full = {0}, stats = {0};
    for (int32_t done = 0; ok && done < steps; done += DECODE_BATCH) {
        VkCommandBuffer commands = decode_record(&loop, pool, DECODE_START + done);
        ok = commands && decode_run(&loop, commands, DECODE_START + done, (uint64_t)done);
        first = first ? first : commands;
        ok = decode_memory_flat(loop.ctx, done, &full, &stats) && ok; /* once the cache is full */
    }
    /* Its table slots have been written over many times since. */
    ok = ok && decode_run(&loop, first, DECODE_START, 1);
    decode_report(steps, &full, &stats, ok);
    posenc_buffer_destroy(loop.buffer);
    posenc_context_destroy(loop.ctx);
    arena_destroy(e, &loop.a);
    free(loop.inputs);
}

/* Four threads record at once, each into its own command buffer (and pool: pools are the
 * caller's to synchronise) with its own frequency table; then all are submitted and checked. */
enum { THREADS = 4 };

typedef struct thread_job {
    engine *e;
    posenc_context *ctx;
    rope_work *w;
    VkBuffer wrap_in_thread; /* the thread wraps its tensors in this buffer first, if set */
    VkCommandPool pool;
    VkCommandBuffer commands;
    bool ok;
} thread_job;

static void record_in_thread(void *argument)
{
    thread_job *job = argument;
    if (job->wrap_in_thread && !rope_wrap_quietly(job->ctx, job->w, job->wrap_in_thread))
        return;
    job->commands = begin_commands(job->e, job->pool);
    if (!job->commands)
        return;
    host_to_compute(job->e, job->commands);
    /* Recordings with tables of their own first, for more chances to overlap with the other
     * threads; then the one that counts, which overwrites what they wrote. */
    posenc_rope_desc warm_up = rope_desc_of(job->w);
    warm_up.q_out = (posenc_tensor){0};
    warm_up.k = (posenc_tensor){0};
    warm_up.q.buffer = job->w->q_out_buffer;
    job->ok = true;
    for (int repeat = 0; repeat < 8 && job->ok; repeat++) {
        posenc_rope_desc desc = rope_desc_of(job->w);
        if (repeat < 7) {
            desc = warm_up;
            desc.theta = job->w->theta + repeat + 1;
        }
        job->ok = posenc_vk_cmd_rope(job->ctx, job->commands, &desc) == POSENC_OK;
        compute_to_compute(job->e, job->commands);
    }
    compute_to_host(job->e, job->commands);
    job->ok = job->e->EndCommandBuffer(job->commands) == VK_SUCCESS && job->ok;
}

static void test_threads(engine *e, posenc_context *ctx)
{
    arena a;
    CHECK(arena_create(e, &a, THREADS * 4 * SLOT));
    thread_job jobs[THREADS];
    posenc__thread threads[THREADS];
    bool started[THREADS] = {false};
    posenc_stats before = {0}, after = {0};
    CHECK_OK(posenc_context_stats(ctx, &before));
    for (int i = 0; i < THREADS && a.bytes; i++) {
        jobs[i] = (thread_job){.e = e, .ctx = ctx, .w = calloc(1, sizeof(rope_work))};
        jobs[i].w->dtype = i % 2 ? POSENC_DTYPE_F16 : POSENC_DTYPE_F32;
        jobs[i].w->style = (posenc_rope_style)(i / 2);
        jobs[i].w->theta = 10000.0 * (i + 1);
        jobs[i].w->at = (VkDeviceSize)i * 4 * SLOT;
        rope_fill(jobs[i].w, &a, 50 + (uint64_t)i);
        jobs[i].pool = make_pool(e);
        if (rope_wrap(ctx, jobs[i].w, &a))
            started[i] = posenc__thread_start(&threads[i], record_in_thread, &jobs[i]);
        CHECK(started[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        if (started[i])
            posenc__thread_join(&threads[i]);
    }
    /* Eight recordings a thread, counted exactly by threads counting at once. */
    CHECK_OK(posenc_context_stats(ctx, &after));
    uint64_t recorded = 0;
    for (int i = 0; i < THREADS; i++)
        recorded += started[i] ? 8 : 0;
    CHECK(after.rope_calls - before.rope_calls == recorded);
    for (int i = 0; i < THREADS && a.bytes; i++) {
        CHECK(jobs[i].ok);
        if (jobs[i].ok) {
            submit_and_wait(e, jobs[i].commands);
            rope_check(jobs[i].w, &a, "threads");
        }
    }
    for (int i = 0; i < THREADS && a.bytes; i++) {
        rope_unwrap(jobs[i].w);
        free(jobs[i].w);
        e->DestroyCommandPool(e->device, jobs[i].pool, NULL);
    }
    arena_destroy(e, &a);
}

/* Buffers wrapped, made and destroyed on some threads while others record on the same context,
 * as an engine wraps the buffers of a layer it loads while it records the last: the recorders
 * wrap their own tensors in the thread and record; the others wrap views of the same VkBuffer
 * and destroy them (which must keep the descriptor sets the recorders' work binds), create
 * buffers with data and read them back, and make calls that fail. The recorded work is checked
 * against the reference; every message a thread reads is one whole message. */
enum { RECORDERS = 2, CHURNERS = 2, CHURN_ROUNDS = 16 };

/* The messages of the failing calls the churners make, read beforehand on one thread. */
typedef struct churn_messages {
    char wrap[256];   /* posenc_vk_buffer_wrap at a misaligned offset */
    char record[256]; /* posenc_vk_cmd_rope without a command buffer */
    char create[256]; /* posenc_buffer_create of size 0 */
} churn_messages;

typedef struct churn_job {
    posenc_context *ctx;
    VkBuffer buffer;  /* the arena's: the recorders' tensors live there too */
    VkDeviceSize at;  /* the churner's own four slots */
    int index;
    const churn_messages *messages;
    int failures;
    char first_failure[300];
} churn_job;

static void churn_failed(churn_job *job, const char *what)
{
    if (job->failures++ == 0)
        snprintf(job->first_failure, sizeof job->first_failure, "churner %d: %s", job->index,
                 what);
}

/* A message read while other threads fail and succeed on the context: one of theirs, whole. */
static void churn_check_message(churn_job *job)
{
    const char *message = posenc_context_last_error(job->ctx);
    const churn_messages *known = job->messages;
    if (message[0] && strcmp(message, known->wrap) != 0 && strcmp(message, known->record) != 0 &&
        strcmp(message, known->create) != 0)
        churn_failed(job, "a message that no call wrote whole");
}

static void churn_in_thread(void *argument)
{
    churn_job *job = argument;
    posenc_rope_desc no_work = {0};
    for (int round = 0; round < CHURN_ROUNDS; round++) {
        posenc_buffer *view = NULL, *made = NULL;
        VkDeviceSize at = job->at + (VkDeviceSize)(round % 4) * SLOT;
        if (posenc_vk_buffer_wrap(job->ctx, job->buffer, at, SLOT, &view) != POSENC_OK)
            churn_failed(job, "posenc_vk_buffer_wrap");
        else if (posenc_buffer_size(view) != SLOT)
            churn_failed(job, "the wrapped size");

        posenc_buffer *refused = NULL;
        if (posenc_vk_buffer_wrap(job->ctx, job->buffer, 4, SLOT, &refused) !=
                POSENC_INVALID_ARGUMENT ||
            refused)
            churn_failed(job, "a misaligned wrap was not refused");
        churn_check_message(job);
        if (posenc_vk_cmd_rope(job->ctx, VK_NULL_HANDLE, &no_work) != POSENC_INVALID_ARGUMENT)
            churn_failed(job, "a record without a command buffer was not refused");
        churn_check_message(job);

        uint32_t data[64], back[64];
        for (int i = 0; i < 64; i++)
            data[i] = (uint32_t)(job->index * 100000 + round * 100 + i);
        memset(back, 0, sizeof back);
        posenc_buffer_desc desc = {.size = sizeof data, .initial_data = data};
        if (posenc_buffer_create(job->ctx, &desc, &made) != POSENC_OK)
            churn_failed(job, "posenc_buffer_create");
        else if (posenc_buffer_download(made, 0, back, sizeof back) != POSENC_OK ||
                 memcmp(back, data, sizeof data) != 0)
            churn_failed(job, "a created buffer read back");
        posenc_buffer_desc empty = {0};
        posenc_buffer *none = NULL;
        if (posenc_buffer_create(job->ctx, &empty, &none) != POSENC_INVALID_ARGUMENT || none)
            churn_failed(job, "a buffer of size 0 was not refused");
        churn_check_message(job);
        posenc_buffer_destroy(made);
        posenc_buffer_destroy(view);
    }
}

static void read_churn_messages(posenc_context *ctx, VkBuffer buffer, churn_messages *messages)
{
    posenc_buffer *refused = NULL;
    posenc_rope_desc no_work = {0};
    posenc_buffer_desc empty = {0};
    CHECK_STATUS(posenc_vk_buffer_wrap(ctx, buffer, 4, SLOT, &refused), POSENC_INVALID_ARGUMENT);
    snprintf(messages->wrap, sizeof messages->wrap, "%s", posenc_context_last_error(ctx));
    CHECK_STATUS(posenc_vk_cmd_rope(ctx, VK_NULL_HANDLE, &no_work), POSENC_INVALID_ARGUMENT);
    snprintf(messages->record, sizeof messages->record, "%s", posenc_context_last_error(ctx));
    CHECK_STATUS(posenc_buffer_create(ctx, &empty, &refused), POSENC_INVALID_ARGUMENT);
    snprintf(messages->create, sizeof messages->create, "%s", posenc_context_last_error(ctx));
    CHECK(strstr(messages->wrap, "offset") && strstr(messages->record, "command_buffer") &&
          strstr(messages->create, "size"));
}

static void test_wrap_while_recording(engine *e, posenc_context *ctx)
{
    arena a;
    CHECK(arena_create(e, &a, (RECORDERS + CHURNERS) * 4 * SLOT));
    if (!a.bytes)
        return;
    churn_messages messages;
    read_churn_messages(ctx, a.buffer, &messages);
    thread_job recorders[RECORDERS];
    churn_job churners[CHURNERS];
    posenc__thread threads[RECORDERS + CHURNERS];
    bool started[RECORDERS + CHURNERS] = {false};
    for (int i = 0; i < RECORDERS; i++) {
        recorders[i] = (thread_job){.e = e, .ctx = ctx, .w = calloc(1, sizeof(rope_work)),
                                    .wrap_in_thread = a.buffer, .pool = make_pool(e)};
        recorders[i].w->dtype = i ? POSENC_DTYPE_BF16 : POSENC_DTYPE_F32;
        recorders[i].w->style = (posenc_rope_style)i;
        recorders[i].w->theta = 20000.0 * (i + 1);
        recorders[i].w->at = (VkDeviceSize)i * 4 * SLOT;
        rope_fill(recorders[i].w, &a, 80 + (uint64_t)i);
    }
    for (int i = 0; i < CHURNERS; i++)
        churners[i] = (churn_job){.ctx = ctx, .buffer = a.buffer, .index = i,
                                  .at = (VkDeviceSize)(RECORDERS + i) * 4 * SLOT,
                                  .messages = &messages};
    /* Interleaved, so that each kind starts while the other runs. */
    for (int i = 0; i < RECORDERS + CHURNERS; i++) {
        void *job = i % 2 ? (void *)&churners[i / 2] : (void *)&recorders[i / 2];
        started[i] = posenc__thread_start(&threads[i],
                                          i % 2 ? churn_in_thread : record_in_thread, job);
        CHECK(started[i]);
    }
    for (int i = 0; i < RECORDERS + CHURNERS; i++) {
        if (started[i])
            posenc__thread_join(&threads[i]);
    }
    for (int i = 0; i < CHURNERS; i++) {
        if (churners[i].failures) {
            test_failures++;
            fprintf(stderr, "  %s (%d failures)\n", churners[i].first_failure,
                    churners[i].failures);
        }
    }
    for (int i = 0; i < RECORDERS; i++) {
        CHECK(recorders[i].ok);
        if (recorders[i].ok) {
            submit_and_wait(e, recorders[i].commands);
            rope_check(recorders[i].w, &a, "recorded while others wrapped");
        }
        rope_unwrap(recorders[i].w);
        free(recorders[i].w);
        e->DestroyCommandPool(e->device, recorders[i].pool, NULL);
    }
    arena_destroy(e, &a);
}

/* ---------------------------------------------------------------------------------------------
 * Sinusoidal tables recorded into a command buffer, every dtype.
 */
enum { ROWS = 9, D_MODEL = 40 };

static void test_sinusoidal_dtypes(engine *e, posenc_context *ctx, VkCommandPool pool)
{
    static const posenc_dtype dtypes[3] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    arena a;
    CHECK(arena_create(e, &a, SLOT));
    for (int d = 0; d < 3 && a.bytes; d++) {
        posenc_buffer *out = NULL;
        CHECK_OK(posenc_vk_buffer_wrap(ctx, a.buffer, 0, SLOT, &out));
        const int64_t shape[2] = {ROWS, D_MODEL};
        posenc_sinusoidal_desc desc = {
            .out = posenc_tensor_of_buffer(out, dtypes[d], 2, shape),
            .position_offset = 123456789,
            .layout = POSENC_SINUSOIDAL_SIN_COS,
        };
        memset(a.bytes, 0xff, SLOT);
        VkCommandBuffer commands = begin_commands(e, pool);
        host_to_compute(e, commands);
        posenc_status status = posenc_vk_cmd_sinusoidal(ctx, commands, &desc);
        CHECK_OK(status);
        compute_to_host(e, commands);
        CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
        if (status == POSENC_OK) {
            submit_and_wait(e, commands);
            double freq[D_MODEL / 2], pe[D_MODEL];
            ref_sinusoidal_frequencies(&desc, D_MODEL, freq);
            ref_stats stats = {0};
            int bad = 0;
            size_t size = posenc_dtype_size(dtypes[d]);
            for (int r = 0; r < ROWS; r++) {
                ref_sinusoidal_row(freq, D_MODEL, desc.layout, 123456789.0 + r, pe);
                for (int c = 0; c < D_MODEL; c++) {
                    double got = ref_load(dtypes[d], a.bytes + (r * D_MODEL + c) * size);
                    if (!ref_check(&stats, dtypes[d], got, pe[c], 1.0, 0.0) && bad++ < 4)
                        fprintf(stderr, "  cmd_sinusoidal %s [%d,%d]: got %.9g, expected %.9g\n",
                                posenc_dtype_name(dtypes[d]), r, c, got, pe[c]);
                }
            }
            if (bad)
                test_failures++;
        }
        posenc_buffer_destroy(out);
    }
    arena_destroy(e, &a);
}

/* ---------------------------------------------------------------------------------------------
 * Warm-up: posenc_prepare builds every pipeline and table the recorded calls use, so that the
 * first record builds nothing (posenc_context_stats counts what was built), and the results of
 * those records still match the reference. A bad descriptor anywhere builds nothing.
 */
static posenc_stats stats_of(posenc_context *ctx)
{
    posenc_stats stats;
    memset(&stats, 0, sizeof stats);
    CHECK_OK(posenc_context_stats(ctx, &stats));
    return stats;
}

static void test_prepare(engine *e, VkCommandPool pool)
{
    static const posenc_dtype dtypes[3] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    posenc_context *ctx = external_context(e, e->queue, e->features);
    arena a;
    rope_work *w = calloc(3, sizeof *w);
    bool ready = ctx && w && arena_create(e, &a, 13 * SLOT);
    CHECK(ready);
    posenc_rope_desc rope[3];
    posenc_buffer *table = NULL;
    for (int d = 0; d < 3 && ready; d++) {
        w[d].dtype = dtypes[d];
        w[d].style = (posenc_rope_style)(d % 2);
        w[d].theta = 10000.0;
        w[d].at = (VkDeviceSize)d * 4 * SLOT;
        rope_fill(&w[d], &a, 300 + (uint64_t)d);
        ready = rope_wrap(ctx, &w[d], &a);
        rope[d] = rope_desc_of(&w[d]);
    }
    if (ready)
        CHECK_OK(posenc_vk_buffer_wrap(ctx, a.buffer, 12 * SLOT, SLOT, &table));
    const int64_t table_shape[2] = {ROWS, D_MODEL};
    posenc_sinusoidal_desc sinusoidal = {
        .out = posenc_tensor_of_buffer(table, POSENC_DTYPE_F16, 2, table_shape),
        .base = 500.0,
    };
    if (!ready || !table) {
        posenc_buffer_destroy(table);
        for (int d = 0; d < 3 && w; d++)
            rope_unwrap(&w[d]);
        free(w);
        posenc_context_destroy(ctx);
        return;
    }

    /* Bad input, before anything is built: the descriptor's place and field are named, and
     * the good descriptors before it build nothing either. */
    posenc_rope_desc bad[3] = {rope[0], rope[1], rope[2]};
    bad[2].rotary_dim = 47;
    posenc_prepare_desc desc = {.rope = bad, .rope_count = 3};
    CHECK_STATUS(posenc_prepare(ctx, &desc), POSENC_INVALID_SHAPE);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "rope[2].rotary_dim");
    desc = (posenc_prepare_desc){.rope = rope, .rope_count = 3, .sinusoidal = &sinusoidal,
                                 .sinusoidal_count = 1};
    sinusoidal.out.dtype = POSENC_DTYPE_I32;
    CHECK_STATUS(posenc_prepare(ctx, &desc), POSENC_INVALID_DTYPE);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "sinusoidal[0].out.dtype");
    sinusoidal.out.dtype = POSENC_DTYPE_F16;
    posenc_stats s = stats_of(ctx);
    CHECK(s.kernels_built == 0 && s.freq_tables == 0 && s.table_bytes == 0);

    /* Two kernels per operation and dtype (the general one and the one for whole 16-byte
     * blocks: a call takes either, by where its views lie): six RoPE and two sinusoidal; one
     * RoPE table (the dtypes share its frequencies) and one sinusoidal. Again: nothing more. */
    double start = posenc__seconds_now();
    CHECK_OK(posenc_prepare(ctx, &desc));
    double prepare_seconds = posenc__seconds_now() - start;
    CHECK_OK(posenc_prepare(ctx, &desc));
    posenc_stats prepared = stats_of(ctx);
    CHECK(prepared.kernels_built == 8 && prepared.freq_tables == 2);
    CHECK(prepared.rope_calls == 0 && prepared.sinusoidal_calls == 0);

    VkCommandBuffer commands = begin_commands(e, pool);
    host_to_compute(e, commands);
    start = posenc__seconds_now();
    bool recorded = cmd_rope(ctx, commands, &w[0]);
    double first_seconds = posenc__seconds_now() - start;
    for (int d = 1; d < 3; d++)
        recorded = cmd_rope(ctx, commands, &w[d]) && recorded;
    CHECK_OK(posenc_vk_cmd_sinusoidal(ctx, commands, &sinusoidal));
    compute_to_host(e, commands);
    CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
    s = stats_of(ctx);
    CHECK(s.kernels_built == prepared.kernels_built && s.freq_tables == prepared.freq_tables);
    CHECK(s.table_bytes == prepared.table_bytes && s.rope_calls == 3);
    printf("  prepare %.3f ms, then the first record %.1f us\n", prepare_seconds * 1e3,
           first_seconds * 1e6);
    if (recorded) {
        submit_and_wait(e, commands);
        for (int d = 0; d < 3; d++)
            rope_check(&w[d], &a, "after prepare");
        double freq[D_MODEL / 2], pe[D_MODEL];
        ref_sinusoidal_frequencies(&sinusoidal, D_MODEL, freq);
        ref_stats stats = {0};
        int wrong = 0;
        for (int r = 0; r < ROWS; r++) {
            ref_sinusoidal_row(freq, D_MODEL, sinusoidal.layout, r, pe);
            for (int c = 0; c < D_MODEL; c++) {
                const unsigned char *at = a.bytes + 12 * SLOT + (r * D_MODEL + c) * 2;
                wrong += !ref_check(&stats, POSENC_DTYPE_F16, ref_load(POSENC_DTYPE_F16, at),
                                    pe[c], 1.0, 0.0);
            }
        }
        CHECK(wrong == 0);
    }
    CHECK_STATUS(posenc_prepare(NULL, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_STATUS(posenc_prepare(ctx, NULL), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "desc");
    desc.rope = NULL;
    CHECK_STATUS(posenc_prepare(ctx, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "rope");
    posenc_buffer_destroy(table);
    for (int d = 0; d < 3; d++)
        rope_unwrap(&w[d]);
    free(w);
    arena_destroy(e, &a);
    posenc_context_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * The caller's queue for posenc's own calls: synchronous, asynchronous, buffer copies.
 */
static void test_calls_on_queue(engine *e, posenc_context *ctx)
{
    arena a;
    CHECK(arena_create(e, &a, 4 * SLOT));
    rope_work *w = calloc(1, sizeof *w);
    if (a.bytes && w) {
        w->dtype = POSENC_DTYPE_BF16;
        w->theta = 1e6;
        rope_fill(w, &a, 77);
        if (rope_wrap(ctx, w, &a)) {
            posenc_rope_desc desc = rope_desc_of(w);
            CHECK_OK(posenc_rope(ctx, &desc));
            rope_check(w, &a, "posenc_rope");
            rope_fill(w, &a, 77);
            posenc_event *event = NULL;
            CHECK_OK(posenc_rope_submit(ctx, &desc, &event));
            CHECK_OK(posenc_event_wait(event, UINT64_MAX));
            posenc_event_destroy(event);
            rope_check(w, &a, "posenc_rope_submit");
            /* A staged download of a wrapped buffer, through the caller's queue. */
            unsigned char *copy = malloc(SLOT);
            if (copy) {
                CHECK_OK(posenc_buffer_download(w->q_out_buffer, 0, copy, SLOT));
                CHECK(memcmp(copy, a.bytes + SLOT, SLOT) == 0);
                free(copy);
            }
        }
        rope_unwrap(w);
    }
    free(w);
    arena_destroy(e, &a);
}

/* ---------------------------------------------------------------------------------------------
 * The paged KV cache write on engine buffers: the rope_work tensors (k rotated in place, k_out
 * set to k) plus slot_mapping, k_cache [BLOCKS, BLOCK_SIZE, K_HEADS, HEAD_DIM] packed, v, and
 * v_cache in the HND layout, one SLOT each after rope_work's four. Recorded once and submitted
 * with two slot mappings, and through posenc_rope_submit, each run compared byte for byte with
 * a synchronous posenc_rope of the same inputs (test_kv_cache checks that one against a plain
 * RoPE and the reference on every device).
 */
enum { BLOCKS = 3, BLOCK_SIZE = 4, KV_SLOTS = BLOCKS * BLOCK_SIZE };
enum { KV_SLOT_MAPPING = 4, KV_K_CACHE, KV_V, KV_V_CACHE, KV_REGIONS };
#define KV_FILL 0x5a /* every cache byte before a run: rows without a slot keep it */

typedef struct kv_work {
    rope_work rope;
    posenc_buffer *slots, *k_cache, *v, *v_cache;
} kv_work;

/* Two mappings: each with a padding slot (-1) and one past the cache, which write nothing. */
static const int32_t kv_slot_runs[2][TOKENS] = {{5, -1, 11, 0, KV_SLOTS, 3, 7},
                                                {2, 9, 4, -3, 1, 10, KV_SLOTS + 100}};

static unsigned char *kv_region(const arena *a, int region)
{
    return a->bytes + (size_t)region * SLOT;
}

/* Fresh inputs (k is rotated in place, so before every run), `slots`, and filled caches. */
static void kv_fill(kv_work *w, arena *a, const int32_t *slots, uint64_t seed)
{
    rope_fill(&w->rope, a, seed);
    test_rng rng = {seed + 1000};
    size_t e = posenc_dtype_size(w->rope.dtype);
    for (int i = 0; i < K_COUNT; i++)
        ref_store(w->rope.dtype, kv_region(a, KV_V) + i * e, test_rng_uniform(&rng, -2.0, 2.0));
    memcpy(kv_region(a, KV_SLOT_MAPPING), slots, TOKENS * sizeof *slots);
    memset(kv_region(a, KV_K_CACHE), KV_FILL, SLOT);
    memset(kv_region(a, KV_V_CACHE), KV_FILL, SLOT);
}

static bool kv_wrap(posenc_context *ctx, kv_work *w, arena *a)
{
    posenc_buffer **buffers[] = {&w->slots, &w->k_cache, &w->v, &w->v_cache};
    bool ok = rope_wrap(ctx, &w->rope, a);
    for (int i = 0; i < 4 && ok; i++)
        ok = posenc_vk_buffer_wrap(ctx, a->buffer, (VkDeviceSize)(KV_SLOT_MAPPING + i) * SLOT,
                                   SLOT, buffers[i]) == POSENC_OK;
    CHECK(ok);
    return ok;
}

static void kv_unwrap(kv_work *w)
{
    rope_unwrap(&w->rope);
    posenc_buffer_destroy(w->slots);
    posenc_buffer_destroy(w->k_cache);
    posenc_buffer_destroy(w->v);
    posenc_buffer_destroy(w->v_cache);
    w->slots = w->k_cache = w->v = w->v_cache = NULL;
}

static posenc_rope_desc kv_desc_of(const kv_work *w)
{
    posenc_rope_desc desc = rope_desc_of(&w->rope);
    const int64_t k_shape[3] = {TOKENS, K_HEADS, HEAD_DIM};
    const int64_t cache_shape[4] = {BLOCKS, BLOCK_SIZE, K_HEADS, HEAD_DIM};
    const int64_t slots_shape[1] = {TOKENS};
    int64_t e = (int64_t)posenc_dtype_size(w->rope.dtype);
    desc.k_out = desc.k; /* rotated in place as well */
    desc.slot_mapping =
        posenc_tensor_of_buffer(w->slots, POSENC_DTYPE_I32, 1, slots_shape);
    desc.k_cache = posenc_tensor_of_buffer(w->k_cache, w->rope.dtype, 4, cache_shape);
    desc.v = posenc_tensor_of_buffer(w->v, w->rope.dtype, 3, k_shape);
    desc.v_cache = posenc_tensor_of_buffer(w->v_cache, w->rope.dtype, 4, cache_shape);
    const int64_t hnd[4] = {K_HEADS * BLOCK_SIZE * HEAD_DIM * e, HEAD_DIM * e,
                            BLOCK_SIZE * HEAD_DIM * e, e};
    memcpy(desc.v_cache.strides, hnd, sizeof hnd);
    return desc;
}

/* The bytes a run writes or must leave alone: q_out, k, and both caches. */
static const int kv_outputs[] = {1, 2, KV_K_CACHE, KV_V_CACHE};

/* What a synchronous posenc_rope writes from the same inputs, into `expected` (4 SLOTs), and
 * its q_out and k against the reference. The caches' rows of the slots are checked against
 * the rotated k and v here too, so that the comparison does not rest on the synchronous call
 * alone. */
static void kv_expected(posenc_context *ctx, kv_work *w, arena *a, const int32_t *slots,
                        uint64_t seed, unsigned char *expected)
{
    kv_fill(w, a, slots, seed);
    posenc_rope_desc desc = kv_desc_of(w);
    posenc_status status = posenc_rope(ctx, &desc);
    CHECK_OK(status);
    if (status != POSENC_OK)
        fprintf(stderr, "  posenc_rope: %s\n", posenc_context_last_error(ctx));
    rope_check(&w->rope, a, "posenc_rope with a KV cache");
    size_t e = posenc_dtype_size(w->rope.dtype);
    size_t row = HEAD_DIM * e;
    unsigned char fill[HEAD_DIM * 4];
    memset(fill, KV_FILL, sizeof fill);
    bool written[KV_SLOTS] = {false};
    for (int t = 0; t < TOKENS; t++) {
        if (slots[t] < 0 || slots[t] >= KV_SLOTS)
            continue;
        written[slots[t]] = true;
        for (int h = 0; h < K_HEADS; h++) {
            const unsigned char *k_row = a->bytes + 2 * SLOT + (size_t)(t * K_HEADS + h) * row;
            const unsigned char *k_cached =
                kv_region(a, KV_K_CACHE) + (size_t)(slots[t] * K_HEADS + h) * row;
            CHECK(memcmp(k_cached, k_row, row) == 0);
        }
    }
    /* Rows without a slot keep their bytes; v's rows are in v_cache (HND) as they are. */
    for (int s = 0; s < KV_SLOTS; s++) {
        for (int h = 0; h < K_HEADS && !written[s]; h++) {
            size_t at = (size_t)(((s / BLOCK_SIZE * K_HEADS + h) * BLOCK_SIZE + s % BLOCK_SIZE) *
                                 HEAD_DIM) * e;
            CHECK(memcmp(kv_region(a, KV_K_CACHE) + (size_t)(s * K_HEADS + h) * row, fill, row) ==
                  0);
            CHECK(memcmp(kv_region(a, KV_V_CACHE) + at, fill, row) == 0);
        }
    }
    for (int t = 0; t < TOKENS; t++) {
        for (int h = 0; h < K_HEADS && slots[t] >= 0 && slots[t] < KV_SLOTS; h++) {
            int32_t s = slots[t];
            size_t at = (size_t)(((s / BLOCK_SIZE * K_HEADS + h) * BLOCK_SIZE + s % BLOCK_SIZE) *
                                 HEAD_DIM) * e;
            CHECK(memcmp(kv_region(a, KV_V_CACHE) + at,
                         kv_region(a, KV_V) + (size_t)(t * K_HEADS + h) * row, row) == 0);
        }
    }
    for (size_t i = 0; i < sizeof kv_outputs / sizeof kv_outputs[0]; i++)
        memcpy(expected + i * SLOT, kv_region(a, kv_outputs[i]), SLOT);
}

static void kv_compare(const arena *a, const unsigned char *expected, const char *what,
                       posenc_dtype dtype)
{
    static const char *const names[] = {"q_out", "k", "k_cache", "v_cache"};
    for (size_t i = 0; i < sizeof kv_outputs / sizeof kv_outputs[0]; i++) {
        if (memcmp(kv_region(a, kv_outputs[i]), expected + i * SLOT, SLOT) != 0) {
            test_failures++;
            fprintf(stderr, "  %s %s: %s differs from the synchronous call's\n", what,
                    posenc_dtype_name(dtype), names[i]);
        }
    }
}

/* A recorded command buffer submitted with two slot mappings, and posenc_rope_submit, in every
 * dtype, each byte for byte what the synchronous call writes. On a context of its own, where
 * posenc_prepare builds everything the recording needs. */
static void test_kv_cache(engine *e, VkCommandPool pool)
{
    static const posenc_dtype dtypes[3] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    posenc_context *ctx = external_context(e, e->queue, e->features);
    if (!ctx)
        return;
    arena a;
    CHECK(arena_create(e, &a, KV_REGIONS * SLOT));
    kv_work *w = calloc(1, sizeof *w);
    unsigned char *expected = malloc(4 * SLOT);
    for (int d = 0; d < 3 && a.bytes && w && expected; d++) {
        memset(w, 0, sizeof *w);
        w->rope.dtype = dtypes[d];
        w->rope.style = d == 1 ? POSENC_ROPE_GPTJ : POSENC_ROPE_NEOX;
        w->rope.theta = 10000.0;
        uint64_t seed = 300 + (uint64_t)d;
        if (!kv_wrap(ctx, w, &a)) {
            kv_unwrap(w);
            continue;
        }
        posenc_rope_desc desc = kv_desc_of(w);
        posenc_prepare_desc prepare = {.rope = &desc, .rope_count = 1};
        CHECK_OK(posenc_prepare(ctx, &prepare));
        posenc_stats prepared = stats_of(ctx);
        VkCommandBuffer commands = begin_commands(e, pool);
        bool recorded = commands != VK_NULL_HANDLE;
        if (recorded) {
            host_to_compute(e, commands);
            posenc_status status = posenc_vk_cmd_rope(ctx, commands, &desc);
            CHECK_OK(status);
            if (status != POSENC_OK)
                fprintf(stderr, "  posenc_vk_cmd_rope: %s\n", posenc_context_last_error(ctx));
            recorded = status == POSENC_OK;
            compute_to_host(e, commands);
            CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
        }
        posenc_stats after = stats_of(ctx);
        CHECK(after.kernels_built == prepared.kernels_built &&
              after.freq_tables == prepared.freq_tables);
        for (int run = 0; run < 2 && recorded; run++) {
            kv_expected(ctx, w, &a, kv_slot_runs[run], seed, expected);
            kv_fill(w, &a, kv_slot_runs[run], seed);
            submit_and_wait(e, commands);
            kv_compare(&a, expected, run ? "recorded, second run" : "recorded", w->rope.dtype);
        }
        kv_fill(w, &a, kv_slot_runs[1], seed);
        posenc_event *event = NULL;
        posenc_status status = posenc_rope_submit(ctx, &desc, &event);
        CHECK_OK(status);
        if (status == POSENC_OK) {
            CHECK_OK(posenc_event_wait(event, UINT64_MAX));
            posenc_event_destroy(event);
            kv_compare(&a, expected, "posenc_rope_submit", w->rope.dtype);
        } else {
            fprintf(stderr, "  posenc_rope_submit: %s\n", posenc_context_last_error(ctx));
        }
        kv_unwrap(w);
    }
    free(expected);
    free(w);
    arena_destroy(e, &a);
    posenc_context_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * Teardown: posenc_buffer_destroy and posenc_context_destroy wait for posenc's own submissions
 * on the caller's queue. The engine holds them back: a command buffer of its own, submitted
 * first, waits for a VkEvent that another thread sets HOLD_SECONDS later, and posenc's
 * submission after it on the same queue cannot finish before. A destroy that did not wait would
 * return with posenc's RoPE still pending.
 */
#define HOLD_SECONDS 0.2

typedef struct queue_hold {
    engine *e;
    VkEvent event;
    posenc__thread thread;
    bool started;
} queue_hold;

static void set_event_later(void *argument)
{
    queue_hold *hold = argument;
    posenc__sleep_seconds(HOLD_SECONDS);
    CHECK(hold->e->SetEvent(hold->e->device, hold->event) == VK_SUCCESS);
}

/* Submits a command buffer that waits for hold->event: later compute and transfer work on the
 * queue waits with it. */
static bool hold_queue(engine *e, VkCommandPool pool, queue_hold *hold)
{
    memset(hold, 0, sizeof *hold);
    hold->e = e;
    VkEventCreateInfo info = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
    if (e->CreateEvent(e->device, &info, NULL, &hold->event) != VK_SUCCESS)
        return false;
    VkCommandBuffer commands = begin_commands(e, pool);
    if (!commands)
        return false;
    e->CmdWaitEvents(commands, 1, &hold->event, VK_PIPELINE_STAGE_HOST_BIT,
                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                     NULL, 0, NULL, 0, NULL);
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                           .commandBufferCount = 1,
                           .pCommandBuffers = &commands};
    return e->EndCommandBuffer(commands) == VK_SUCCESS &&
           e->QueueSubmit(e->queue, 1, &submit, VK_NULL_HANDLE) == VK_SUCCESS;
}

/* Lets the queue go on HOLD_SECONDS from now, from another thread (set at once if none). */
static void release_queue_later(queue_hold *hold)
{
    hold->started = posenc__thread_start(&hold->thread, set_event_later, hold);
    CHECK(hold->started);
    if (!hold->started)
        hold->e->SetEvent(hold->e->device, hold->event);
}

static void hold_finish(queue_hold *hold)
{
    engine *e = hold->e;
    if (hold->started)
        posenc__thread_join(&hold->thread);
    else if (hold->event)
        e->SetEvent(e->device, hold->event); /* never left waiting */
    CHECK(e->QueueWaitIdle(e->queue) == VK_SUCCESS);
    if (hold->event)
        e->DestroyEvent(e->device, hold->event, NULL);
}

static void test_destroy_waits(engine *e, VkCommandPool pool)
{
    posenc_context *ctx = external_context(e, e->queue, e->features);
    arena a;
    rope_work *w = calloc(1, sizeof *w);
    CHECK(arena_create(e, &a, 4 * SLOT) && w);
    if (!ctx || !a.bytes || !w) {
        posenc_context_destroy(ctx);
        free(w);
        arena_destroy(e, &a);
        return;
    }
    w->dtype = POSENC_DTYPE_F32;
    w->theta = 10000.0;

    /* posenc_buffer_destroy: a buffer of posenc's own, rotated by a held-back submit. */
    const int64_t shape[2] = {16, 64};
    float zeros[16 * 64] = {0};
    posenc_buffer *buffer = NULL;
    posenc_buffer_desc buffer_desc = {.size = sizeof zeros, .initial_data = zeros};
    CHECK_OK(posenc_buffer_create(ctx, &buffer_desc, &buffer));
    queue_hold hold;
    posenc_event *event = NULL;
    if (buffer && hold_queue(e, pool, &hold)) {
        posenc_rope_desc rope = {.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2, shape)};
        CHECK_OK(posenc_rope_submit(ctx, &rope, &event));
        if (event)
            CHECK_STATUS(posenc_event_wait(event, 0), POSENC_TIMEOUT); /* held */
        release_queue_later(&hold);
        posenc_buffer_destroy(buffer);
        buffer = NULL;
        if (event)
            CHECK_STATUS(posenc_event_wait(event, 0), POSENC_OK); /* done before it returned */
        posenc_event_destroy(event);
    }
    hold_finish(&hold);
    posenc_buffer_destroy(buffer);

    /* posenc_context_destroy: the engine's buffer, wrapped, rotated by a held-back submit, shows
     * the result as soon as the context is gone. */
    rope_fill(w, &a, 93);
    if (rope_wrap(ctx, w, &a) && hold_queue(e, pool, &hold)) {
        posenc_rope_desc rope = rope_desc_of(w);
        CHECK_OK(posenc_rope_submit(ctx, &rope, NULL));
        release_queue_later(&hold);
        posenc_context_destroy(ctx); /* also destroys the wraps */
        ctx = NULL;
        rope_check(w, &a, "after posenc_context_destroy");
    }
    hold_finish(&hold);
    posenc_context_destroy(ctx);
    free(w);
    arena_destroy(e, &a);
}

/* ---------------------------------------------------------------------------------------------
 * The caller's allocation callbacks and pipeline cache: every object posenc creates goes
 * through the callbacks (and is freed by the time the context is gone), and the borrowed cache
 * outlives the context (the validation layer reports a second destruction).
 */
typedef struct allocation_count {
    posenc__mutex lock;
    long live, total;
} allocation_count;

/* Each block starts with a header holding the raw pointer and the size, just below the aligned
 * address handed out. */
typedef struct block_header {
    void *raw;
    size_t size;
} block_header;

static void *VKAPI_CALL count_allocation(void *user, size_t size, size_t alignment,
                                         VkSystemAllocationScope scope)
{
    (void)scope;
    allocation_count *count = user;
    if (alignment < sizeof(block_header))
        alignment = sizeof(block_header);
    unsigned char *raw = malloc(size + alignment + sizeof(block_header));
    if (!raw)
        return NULL;
    uintptr_t at = ((uintptr_t)raw + sizeof(block_header) + alignment - 1) &
                   ~(uintptr_t)(alignment - 1);
    block_header header = {raw, size};
    memcpy((void *)(at - sizeof header), &header, sizeof header);
    posenc__mutex_lock(&count->lock);
    count->live++;
    count->total++;
    posenc__mutex_unlock(&count->lock);
    return (void *)at;
}

static void VKAPI_CALL count_free(void *user, void *memory)
{
    if (!memory)
        return;
    allocation_count *count = user;
    block_header header;
    memcpy(&header, (unsigned char *)memory - sizeof header, sizeof header);
    free(header.raw);
    posenc__mutex_lock(&count->lock);
    count->live--;
    posenc__mutex_unlock(&count->lock);
}

static void *VKAPI_CALL count_reallocation(void *user, void *original, size_t size,
                                           size_t alignment, VkSystemAllocationScope scope)
{
    if (!original)
        return count_allocation(user, size, alignment, scope);
    if (size == 0) {
        count_free(user, original);
        return NULL;
    }
    block_header header;
    memcpy(&header, (unsigned char *)original - sizeof header, sizeof header);
    void *moved = count_allocation(user, size, alignment, scope);
    if (moved) {
        memcpy(moved, original, header.size < size ? header.size : size);
        count_free(user, original);
    }
    return moved;
}

static void test_allocator_and_cache(engine *e, VkCommandPool pool)
{
    allocation_count count = {.live = 0};
    posenc__mutex_init(&count.lock);
    VkAllocationCallbacks callbacks = {
        .pUserData = &count,
        .pfnAllocation = count_allocation,
        .pfnReallocation = count_reallocation,
        .pfnFree = count_free,
    };
    VkPipelineCacheCreateInfo cache_info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    VkPipelineCache cache = VK_NULL_HANDLE;
    CHECK(e->CreatePipelineCache(e->device, &cache_info, NULL, &cache) == VK_SUCCESS);
    posenc_context_desc desc = {
        .log = test_count_warnings,
        .vulkan = posenc_vulkan_external_of(e->instance, e->physical, e->device, e->family,
                                            e->queue, e->GetInstanceProcAddr, e->features),
    };
    desc.vulkan.allocation_callbacks = &callbacks;
    memcpy(&desc.vulkan.pipeline_cache, &cache, sizeof cache);
    posenc_context *ctx = NULL;
    CHECK_OK(posenc_context_create(&desc, &ctx));
    arena a;
    CHECK(arena_create(e, &a, 4 * SLOT));
    rope_work *w = calloc(1, sizeof *w);
    if (ctx && a.bytes && w) {
        w->dtype = POSENC_DTYPE_F16;
        w->theta = 10000.0;
        rope_fill(w, &a, 5);
        if (rope_wrap(ctx, w, &a)) {
            VkCommandBuffer commands = begin_commands(e, pool);
            host_to_compute(e, commands);
            if (cmd_rope(ctx, commands, w)) {
                compute_to_host(e, commands);
                CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
                submit_and_wait(e, commands);
                rope_check(w, &a, "with the caller's allocator");
                /* The steady state (the same work recorded every frame) creates nothing. */
                long before = count.total;
                VkCommandBuffer again = begin_commands(e, pool);
                for (int frame = 0; frame < 3; frame++) {
                    CHECK(cmd_rope(ctx, again, w));
                    compute_to_compute(e, again);
                }
                CHECK(e->EndCommandBuffer(again) == VK_SUCCESS);
                CHECK(count.total == before);
            }
        }
        rope_unwrap(w);
    }
    free(w);
    arena_destroy(e, &a);
    posenc_context_destroy(ctx);
    CHECK(count.total > 0);  /* posenc's objects went through the callbacks */
    CHECK(count.live == 0);  /* and all were freed with the context */
    e->DestroyPipelineCache(e->device, cache, NULL); /* still the caller's */
    posenc__mutex_destroy(&count.lock);
}

/* ---------------------------------------------------------------------------------------------
 * Errors
 */
static void expect_create_error(posenc_context_desc desc, posenc_status expected,
                                const char *field)
{
    posenc_context *const sentinel = (posenc_context *)(uintptr_t)0x5e5e5e50u;
    posenc_context *ctx = sentinel;
    desc.log = test_count_warnings;
    CHECK_STATUS(posenc_context_create(&desc, &ctx), expected);
    CHECK(ctx == sentinel);
    if (!strstr(posenc_thread_last_error(), field)) {
        test_failures++;
        fprintf(stderr, "  expected an error naming %s, got '%s'\n", field,
                posenc_thread_last_error());
    }
}

static void test_bad_handles(engine *e)
{
    posenc_context_desc good = {
        .vulkan = posenc_vulkan_external_of(e->instance, e->physical, e->device, e->family,
                                            e->queue, e->GetInstanceProcAddr, e->features),
    };
    posenc_context_desc bad = good;
    bad.vulkan.instance = NULL;
    expect_create_error(bad, POSENC_INVALID_ARGUMENT, "vulkan.instance");
    bad = good;
    bad.vulkan.physical_device = NULL;
    expect_create_error(bad, POSENC_INVALID_ARGUMENT, "vulkan.physical_device");
    bad = good;
    bad.vulkan.get_instance_proc_addr = NULL;
    expect_create_error(bad, POSENC_INVALID_ARGUMENT, "vulkan.get_instance_proc_addr");
    bad = good;
    bad.vulkan.enabled_features |= 1u << 7;
    expect_create_error(bad, POSENC_INVALID_ARGUMENT, "vulkan.enabled_features");
    bad = good;
    bad.vulkan.queue_family = 1000;
    expect_create_error(bad, POSENC_INVALID_ARGUMENT, "vulkan.queue_family");
    bad = good;
    bad.vulkan.device = NULL;
    expect_create_error(bad, POSENC_INVALID_ARGUMENT, "vulkan.queue");
    bad = good;
    bad.backend = POSENC_BACKEND_OPENCL;
    expect_create_error(bad, POSENC_INVALID_ARGUMENT, "backend");
    bad = good;
    bad.device = "0";
    expect_create_error(bad, POSENC_INVALID_ARGUMENT, "device");

    /* A family without compute, where the device has one. */
    uint32_t families = 0;
    e->GetPhysicalDeviceQueueFamilyProperties(e->physical, &families, NULL);
    VkQueueFamilyProperties properties[16];
    families = families > 16 ? 16 : families;
    e->GetPhysicalDeviceQueueFamilyProperties(e->physical, &families, properties);
    for (uint32_t f = 0; f < families; f++) {
        if (!(properties[f].queueFlags & VK_QUEUE_COMPUTE_BIT)) {
            bad = good;
            bad.vulkan.queue_family = f;
            bad.vulkan.queue = NULL;
            expect_create_error(bad, POSENC_INVALID_ARGUMENT, "vulkan.queue_family");
            break;
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Debug names and labels (POSENC_VULKAN_FEATURE_DEBUG_UTILS), seen through a
 * vkGetInstanceProcAddr of the test's own, through which posenc loads every function: it hands
 * out wrappers of vkSetDebugUtilsObjectNameEXT, the two label calls and vkCmdDispatch that note
 * what posenc asked for and then call the real functions (with the validation layer on, its
 * own, which checks that labels pair up). Function pointers carry no state: one spy per process,
 * used by one thread at a time.
 */
#define SPY_NAMES 2048 /* more than the objects of TABLES_PAST_CACHE tables */
#define SPY_NAME_BYTES 48
/* Distinct frequency tables that certainly outgrow those a context keeps (256). */
#define TABLES_PAST_CACHE 300

static struct {
    PFN_vkGetInstanceProcAddr real_get_instance;
    PFN_vkGetDeviceProcAddr real_get_device;
    PFN_vkSetDebugUtilsObjectNameEXT real_name;
    PFN_vkCmdBeginDebugUtilsLabelEXT real_begin;
    PFN_vkCmdEndDebugUtilsLabelEXT real_end;
    PFN_vkCmdDispatch real_dispatch;
    bool hide_debug_utils; /* answer NULL for the extension: an instance without it */
    uint32_t name_calls, label_calls;
    VkObjectType types[SPY_NAMES];
    char names[SPY_NAMES][SPY_NAME_BYTES];
    int depth;                    /* labels open */
    char label[SPY_NAME_BYTES];   /* the innermost one */
    uint32_t dispatches, labelled_dispatches;
    uint32_t table_writes;        /* labels "posenc frequency table write" */
    char dispatch_labels[8][SPY_NAME_BYTES]; /* distinct labels around dispatches */
    uint32_t dispatch_label_count;
} spy;

static VKAPI_ATTR VkResult VKAPI_CALL spy_name(VkDevice device,
                                               const VkDebugUtilsObjectNameInfoEXT *info)
{
    if (spy.name_calls < SPY_NAMES) {
        spy.types[spy.name_calls] = info->objectType;
        snprintf(spy.names[spy.name_calls], SPY_NAME_BYTES, "%s",
                 info->pObjectName ? info->pObjectName : "");
    }
    spy.name_calls++;
    if (info->objectHandle == 0) {
        test_failures++;
        fprintf(stderr, "  a name for VK_NULL_HANDLE: %s\n", info->pObjectName);
    }
    return spy.real_name(device, info);
}

static VKAPI_ATTR void VKAPI_CALL spy_begin(VkCommandBuffer commands,
                                            const VkDebugUtilsLabelEXT *info)
{
    spy.label_calls++;
    spy.depth++;
    snprintf(spy.label, sizeof spy.label, "%s", info->pLabelName ? info->pLabelName : "");
    spy.table_writes += strcmp(spy.label, "posenc frequency table write") == 0;
    spy.real_begin(commands, info);
}

static VKAPI_ATTR void VKAPI_CALL spy_end(VkCommandBuffer commands)
{
    spy.depth--;
    spy.label[0] = '\0';
    spy.real_end(commands);
}

static VKAPI_ATTR void VKAPI_CALL spy_dispatch(VkCommandBuffer commands, uint32_t x, uint32_t y,
                                               uint32_t z)
{
    spy.dispatches++;
    if (spy.depth > 0 && strncmp(spy.label, "posenc ", 7) == 0) {
        spy.labelled_dispatches++;
        bool seen = false;
        for (uint32_t i = 0; i < spy.dispatch_label_count && !seen; i++)
            seen = strcmp(spy.dispatch_labels[i], spy.label) == 0;
        if (!seen && spy.dispatch_label_count < 8)
            memcpy(spy.dispatch_labels[spy.dispatch_label_count++], spy.label, sizeof spy.label);
    }
    spy.real_dispatch(commands, x, y, z);
}

/* What posenc gets for `name`, whose real function is `real`: the spy's wrapper for the four
 * functions it watches (NULL for the extension's while it is hidden), `real` for the others. */
static PFN_vkVoidFunction spy_lookup(const char *name, PFN_vkVoidFunction real)
{
    PFN_vkVoidFunction wrapper = NULL;
    bool debug = true;
    if (strcmp(name, "vkCmdDispatch") == 0) {
        spy.real_dispatch = (PFN_vkCmdDispatch)real;
        wrapper = (PFN_vkVoidFunction)spy_dispatch;
        debug = false;
    } else if (strcmp(name, "vkSetDebugUtilsObjectNameEXT") == 0) {
        spy.real_name = (PFN_vkSetDebugUtilsObjectNameEXT)real;
        wrapper = (PFN_vkVoidFunction)spy_name;
    } else if (strcmp(name, "vkCmdBeginDebugUtilsLabelEXT") == 0) {
        spy.real_begin = (PFN_vkCmdBeginDebugUtilsLabelEXT)real;
        wrapper = (PFN_vkVoidFunction)spy_begin;
    } else if (strcmp(name, "vkCmdEndDebugUtilsLabelEXT") == 0) {
        spy.real_end = (PFN_vkCmdEndDebugUtilsLabelEXT)real;
        wrapper = (PFN_vkVoidFunction)spy_end;
    } else {
        return real;
    }
    return !real || (debug && spy.hide_debug_utils) ? NULL : wrapper;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL spy_get_device_proc_addr(VkDevice device,
                                                                         const char *name)
{
    return spy_lookup(name, spy.real_get_device(device, name));
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL spy_get_instance_proc_addr(VkInstance instance,
                                                                           const char *name)
{
    if (strcmp(name, "vkGetDeviceProcAddr") == 0) {
        spy.real_get_device =
            (PFN_vkGetDeviceProcAddr)spy.real_get_instance(instance, "vkGetDeviceProcAddr");
        return (PFN_vkVoidFunction)spy_get_device_proc_addr;
    }
    return spy_lookup(name, spy.real_get_instance(instance, name));
}

static void spy_reset(engine *e, bool hide_debug_utils)
{
    memset(&spy, 0, sizeof spy);
    spy.real_get_instance = e->GetInstanceProcAddr;
    spy.hide_debug_utils = hide_debug_utils;
}

/* Whether an object of `type` was named `name` (a prefix, when `prefix`). */
static bool spy_named(VkObjectType type, const char *name, bool prefix)
{
    for (uint32_t i = 0; i < spy.name_calls && i < SPY_NAMES; i++) {
        bool match = prefix ? strncmp(spy.names[i], name, strlen(name)) == 0
                            : strcmp(spy.names[i], name) == 0;
        if (spy.types[i] == type && match)
            return true;
    }
    fprintf(stderr, "  no object of type %d named '%s'%s\n", (int)type, name,
            prefix ? " (or longer)" : "");
    return false;
}

static bool spy_dispatch_label(const char *prefix)
{
    for (uint32_t i = 0; i < spy.dispatch_label_count; i++) {
        if (strncmp(spy.dispatch_labels[i], prefix, strlen(prefix)) == 0)
            return true;
    }
    fprintf(stderr, "  no dispatch inside a label '%s...'\n", prefix);
    return false;
}

/* Every dispatch posenc recorded so far sat inside one of its labels, all closed again. */
static void spy_check_labels(const char *what)
{
    if (spy.dispatches == 0 || spy.labelled_dispatches != spy.dispatches || spy.depth != 0) {
        test_failures++;
        fprintf(stderr, "  %s: %u dispatches, %u inside a posenc label, %d labels left open\n",
                what, spy.dispatches, spy.labelled_dispatches, spy.depth);
    }
}

static posenc_context *spy_context(engine *e, VkDevice device, VkQueue queue, uint32_t features)
{
    posenc_context_desc desc = {
        .log = test_count_warnings,
        .vulkan = posenc_vulkan_external_of(e->instance, e->physical, device,
                                            device ? e->family : 0, queue,
                                            spy_get_instance_proc_addr, features),
    };
    posenc_context *ctx = NULL;
    posenc_status status = posenc_context_create(&desc, &ctx);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  debug context: %s: %s\n", posenc_status_name(status),
                posenc_thread_last_error());
    }
    return ctx;
}

/* On the caller's device: names at creation, then a RoPE and a sinusoidal table recorded into
 * the test's command buffer, and work on the caller's queue. */
static void test_debug_names_recorded(engine *e, VkCommandPool pool)
{
    spy_reset(e, false);
    uint32_t features = e->features | POSENC_VULKAN_FEATURE_DEBUG_UTILS;
    posenc_context *ctx = spy_context(e, e->device, e->queue, features);
    if (!ctx)
        return;
    CHECK(spy_named(VK_OBJECT_TYPE_PIPELINE_LAYOUT, "posenc pipeline layout", false));
    CHECK(spy_named(VK_OBJECT_TYPE_DESCRIPTOR_SET_LAYOUT, "posenc descriptor set layout", false));
    CHECK(spy_named(VK_OBJECT_TYPE_PIPELINE_CACHE, "posenc pipeline cache", false));
    CHECK(spy_named(VK_OBJECT_TYPE_COMMAND_POOL, "posenc command pool", false));
    CHECK(spy_named(VK_OBJECT_TYPE_COMMAND_BUFFER, "posenc command buffer", false));
    CHECK(spy_named(VK_OBJECT_TYPE_FENCE, "posenc fence", false));
    CHECK(spy_named(VK_OBJECT_TYPE_BUFFER, "posenc placeholder", false));
    CHECK(spy_named(VK_OBJECT_TYPE_DEVICE_MEMORY, "posenc placeholder", false));

    arena a;
    rope_work *w = calloc(1, sizeof *w);
    CHECK(arena_create(e, &a, 4 * SLOT + 4096) && w);
    VkCommandBuffer commands = begin_commands(e, pool);
    if (a.bytes && w && commands) {
        w->dtype = POSENC_DTYPE_F16;
        w->theta = 10000.0;
        rope_fill(w, &a, 91);
        if (rope_wrap(ctx, w, &a)) {
            host_to_compute(e, commands);
            cmd_rope(ctx, commands, w);
            spy_check_labels("posenc_vk_cmd_rope");
            CHECK(spy_dispatch_label("posenc rope f16"));
            CHECK(spy_named(VK_OBJECT_TYPE_PIPELINE, "posenc rope f16", true));
            CHECK(spy_named(VK_OBJECT_TYPE_BUFFER, "posenc frequency table", false));
            if (!(e->features & POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR))
                CHECK(spy_named(VK_OBJECT_TYPE_DESCRIPTOR_POOL, "posenc descriptor pool", false));

            posenc_buffer *table = NULL;
            CHECK_OK(posenc_vk_buffer_wrap(ctx, a.buffer, 4 * SLOT, 4096, &table));
            const int64_t shape[2] = {8, 32};
            posenc_sinusoidal_desc sinusoidal = {
                .out = posenc_tensor_of_buffer(table, POSENC_DTYPE_F32, 2, shape)};
            CHECK_OK(posenc_vk_cmd_sinusoidal(ctx, commands, &sinusoidal));
            spy_check_labels("posenc_vk_cmd_sinusoidal");
            CHECK(spy_dispatch_label("posenc sinusoidal f32"));
            CHECK(spy_named(VK_OBJECT_TYPE_PIPELINE, "posenc sinusoidal f32", false));

            compute_to_host(e, commands);
            CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
            submit_and_wait(e, commands);
            rope_check(w, &a, "labelled"); /* labels change nothing */
            posenc_buffer_destroy(table);

            /* More distinct tables than the context keeps: the command buffer writes the
             * later ones into the ring, inside a label of their own. Recorded, not run. */
            VkCommandBuffer many = begin_commands(e, pool);
            for (int i = 0; many && i < TABLES_PAST_CACHE && spy.table_writes == 0; i++) {
                w->theta = 20000.0 + i;
                cmd_rope(ctx, many, w);
            }
            CHECK(spy.table_writes > 0);
            CHECK(spy_named(VK_OBJECT_TYPE_BUFFER, "posenc frequency table ring", false));
            spy_check_labels("tables written by the command buffer");
            if (many)
                CHECK(e->EndCommandBuffer(many) == VK_SUCCESS);
        }
        rope_unwrap(w);
    }

    /* posenc's own submissions on the caller's queue: its buffers, staging, the command
     * buffers and fences of submits, and their dispatches labelled too. */
    uint32_t dispatches = spy.dispatches;
    float host[8 * 32] = {0};
    const int64_t shape[2] = {8, 32};
    posenc_sinusoidal_desc staged = {.out = posenc_tensor_of_host(host, POSENC_DTYPE_F32, 2,
                                                                  shape)};
    CHECK_OK(posenc_sinusoidal(ctx, &staged));
    CHECK(host[1] == 1.0f); /* cos(0) of row 0 */
    CHECK(spy_named(VK_OBJECT_TYPE_BUFFER, "posenc staging", false));
    posenc_buffer *buffer = NULL;
    posenc_buffer_desc buffer_desc = {.size = sizeof host};
    CHECK_OK(posenc_buffer_create(ctx, &buffer_desc, &buffer));
    CHECK(spy_named(VK_OBJECT_TYPE_BUFFER, "posenc buffer", false));
    posenc_rope_desc rope = {.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2, shape)};
    posenc_event *event = NULL;
    CHECK_OK(posenc_rope_submit(ctx, &rope, &event));
    CHECK_OK(posenc_event_wait(event, UINT64_MAX));
    posenc_event_destroy(event);
    posenc_buffer_destroy(buffer);
    CHECK(spy_named(VK_OBJECT_TYPE_COMMAND_BUFFER, "posenc submission command buffer", false));
    CHECK(spy_named(VK_OBJECT_TYPE_FENCE, "posenc submission fence", false));
    CHECK(spy.dispatches > dispatches);
    spy_check_labels("posenc's own submissions");
    CHECK(spy_dispatch_label("posenc rope f32"));

    posenc_context_destroy(ctx);
    free(w);
    arena_destroy(e, &a);
}

/* Without the feature nothing is named or labelled, though the instance has the extension; a
 * feature the instance lacks is refused by name; and posenc's own device on the caller's
 * instance is named as well. */
static void test_debug_names_other_setups(engine *e, VkCommandPool pool)
{
    spy_reset(e, false);
    posenc_context *ctx = spy_context(e, e->device, e->queue,
                                      e->features & ~(uint32_t)POSENC_VULKAN_FEATURE_DEBUG_UTILS);
    arena a;
    rope_work *w = calloc(1, sizeof *w);
    CHECK(arena_create(e, &a, 4 * SLOT) && w);
    VkCommandBuffer commands = begin_commands(e, pool);
    if (ctx && a.bytes && w && commands) {
        w->dtype = POSENC_DTYPE_F32;
        rope_fill(w, &a, 92);
        if (rope_wrap(ctx, w, &a)) {
            host_to_compute(e, commands);
            cmd_rope(ctx, commands, w);
            compute_to_host(e, commands);
            CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
            submit_and_wait(e, commands);
            rope_check(w, &a, "unlabelled");
        }
        rope_unwrap(w);
        CHECK(spy.dispatches > 0);
        CHECK(spy.name_calls == 0 && spy.label_calls == 0);
    }
    posenc_context_destroy(ctx);
    free(w);
    arena_destroy(e, &a);

    spy_reset(e, true);
    posenc_context_desc desc = {
        .vulkan = posenc_vulkan_external_of(e->instance, e->physical, e->device, e->family,
                                            e->queue, spy_get_instance_proc_addr,
                                            e->features | POSENC_VULKAN_FEATURE_DEBUG_UTILS),
    };
    expect_create_error(desc, POSENC_INVALID_ARGUMENT, "vulkan.enabled_features");
    CHECK(strstr(posenc_thread_last_error(), "VK_EXT_debug_utils") != NULL);

    /* vulkan.device NULL: posenc makes the device, on the caller's instance. */
    spy_reset(e, false);
    ctx = spy_context(e, NULL, NULL, POSENC_VULKAN_FEATURE_DEBUG_UTILS);
    if (ctx) {
        CHECK(spy_named(VK_OBJECT_TYPE_COMMAND_POOL, "posenc command pool", false));
        float host[4 * 64];
        for (int i = 0; i < 4 * 64; i++)
            host[i] = 1.0f;
        const int64_t shape[2] = {4, 64};
        posenc_rope_desc rope = {.q = posenc_tensor_of_host(host, POSENC_DTYPE_F32, 2, shape)};
        CHECK_OK(posenc_rope(ctx, &rope));
        CHECK(host[0] == 1.0f && host[64] != 1.0f); /* position 0 stays, position 1 turns */
        spy_check_labels("posenc's own device");
        CHECK(spy_dispatch_label("posenc rope f32"));
        CHECK(spy_named(VK_OBJECT_TYPE_PIPELINE, "posenc rope f32", true)); /* or f32 blocks */
        posenc_context_destroy(ctx);
    }
}

/* Recording refuses host memory by name, writes nothing, and needs a caller's device. */
static void test_record_errors(engine *e, posenc_context *ctx, VkCommandPool pool)
{
    float host[TOKENS * HEAD_DIM] = {0};
    const int64_t shape[2] = {TOKENS, HEAD_DIM};
    posenc_rope_desc desc = {.q = posenc_tensor_of_host(host, POSENC_DTYPE_F32, 2, shape)};
    VkCommandBuffer commands = begin_commands(e, pool);
    CHECK_STATUS(posenc_vk_cmd_rope(ctx, commands, &desc), POSENC_INVALID_ARGUMENT);
    CHECK(strstr(posenc_context_last_error(ctx), "q.host") != NULL);
    posenc_sinusoidal_desc table = {.out = posenc_tensor_of_host(host, POSENC_DTYPE_F32, 2, shape)};
    CHECK_STATUS(posenc_vk_cmd_sinusoidal(ctx, commands, &table), POSENC_INVALID_ARGUMENT);
    CHECK(strstr(posenc_context_last_error(ctx), "out.host") != NULL);
    /* Wrapped host memory is recorded only where the device imported it (test_record_imported
     * below). */
    posenc_buffer_desc wrap_host = {.size = sizeof host, .host_memory = host};
    posenc_buffer *wrapped = NULL;
    CHECK_OK(posenc_buffer_create(ctx, &wrap_host, &wrapped));
    desc.q = posenc_tensor_of_buffer(wrapped, POSENC_DTYPE_F32, 2, shape);
    if (!(e->features & POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT)) {
        CHECK_STATUS(posenc_vk_cmd_rope(ctx, commands, &desc), POSENC_UNSUPPORTED);
        CHECK(strstr(posenc_context_last_error(ctx), "q.buffer") != NULL);
    }
    posenc_buffer_destroy(wrapped);
    CHECK_STATUS(posenc_vk_cmd_rope(ctx, VK_NULL_HANDLE, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_STATUS(posenc_vk_cmd_rope(NULL, commands, &desc), POSENC_INVALID_ARGUMENT);

    arena a;
    CHECK(arena_create(e, &a, SLOT));
    posenc_buffer *buffer = (posenc_buffer *)(uintptr_t)0x5e5e5e50u;
    CHECK_STATUS(posenc_vk_buffer_wrap(ctx, a.buffer, 4, 64, &buffer), POSENC_INVALID_ARGUMENT);
    CHECK(strstr(posenc_context_last_error(ctx), "offset") != NULL);
    CHECK_STATUS(posenc_vk_buffer_wrap(ctx, a.buffer, 0, 0, &buffer), POSENC_INVALID_ARGUMENT);
    CHECK(strstr(posenc_context_last_error(ctx), "range") != NULL);
    CHECK_STATUS(posenc_vk_buffer_wrap(ctx, VK_NULL_HANDLE, 0, 64, &buffer),
                 POSENC_INVALID_ARGUMENT);
    CHECK(buffer == (posenc_buffer *)(uintptr_t)0x5e5e5e50u);
    /* A view past the wrapped range is caught by the usual validation. */
    CHECK_OK(posenc_vk_buffer_wrap(ctx, a.buffer, 0, 64, &buffer));
    desc.q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2, shape);
    CHECK_STATUS(posenc_vk_cmd_rope(ctx, commands, &desc), POSENC_OUT_OF_BOUNDS);
    posenc_buffer_destroy(buffer);
    arena_destroy(e, &a);
    CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS); /* nothing was recorded */

    /* A context on posenc's own device does not record into the caller's command buffers. */
    posenc_context_desc own = {.backend = POSENC_BACKEND_VULKAN,
                               .flags = POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_NO_FALLBACK,
                               .log = test_count_warnings};
    posenc_context *owned = NULL;
    desc.q = posenc_tensor_of_host(host, POSENC_DTYPE_F32, 2, shape);
    if (posenc_context_create(&own, &owned) == POSENC_OK) {
        CHECK_STATUS(posenc_vk_cmd_rope(owned, commands, &desc), POSENC_INVALID_ARGUMENT);
        CHECK(strstr(posenc_context_last_error(owned), "context") != NULL);
        CHECK_STATUS(posenc_vk_buffer_wrap(owned, (VkBuffer)(uintptr_t)16, 0, 64, &buffer),
                     POSENC_INVALID_ARGUMENT);
        posenc_context_destroy(owned);
    }
}

/* A record-only context (no queue) records, and refuses what would need to submit. */
static void test_record_only(engine *e, VkCommandPool pool)
{
    posenc_context *ctx = external_context(e, VK_NULL_HANDLE, e->features);
    if (!ctx)
        return;
    arena a;
    CHECK(arena_create(e, &a, 4 * SLOT));
    rope_work *w = calloc(1, sizeof *w);
    if (a.bytes && w) {
        w->dtype = POSENC_DTYPE_F32;
        w->theta = 10000.0;
        rope_fill(w, &a, 3);
        if (rope_wrap(ctx, w, &a)) {
            posenc_rope_desc desc = rope_desc_of(w);
            CHECK_STATUS(posenc_rope(ctx, &desc), POSENC_UNSUPPORTED);
            CHECK(strstr(posenc_context_last_error(ctx), "vulkan.queue") != NULL);
            CHECK_STATUS(posenc_rope_submit(ctx, &desc, NULL), POSENC_UNSUPPORTED);
            VkCommandBuffer commands = begin_commands(e, pool);
            host_to_compute(e, commands);
            if (cmd_rope(ctx, commands, w)) {
                compute_to_host(e, commands);
                CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
                submit_and_wait(e, commands);
                rope_check(w, &a, "record-only");
            }
        }
        rope_unwrap(w);
    }
    free(w);
    arena_destroy(e, &a);
    posenc_context_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 */

/* Everything on one device, made with or without VK_KHR_push_descriptor (the two descriptor
 * paths) and 16-bit storage. */
/* With POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT, a buffer wrapping page-aligned host memory is
 * imported and its RoPE recorded into the engine's command buffer; the engine's submission
 * writes the caller's memory in place (checked against the float64 reference). */
static void test_record_imported(engine *e, posenc_context *ctx, VkCommandPool pool)
{
    enum { Q_ROWS = TOKENS * Q_HEADS };
    const int64_t shape[3] = {TOKENS, Q_HEADS, HEAD_DIM};
    float *host = posenc__aligned_alloc(4096, Q_COUNT * sizeof(float));
    CHECK(host != NULL);
    if (!host)
        return;
    double in[Q_COUNT];
    test_rng rng = {77};
    for (int i = 0; i < Q_COUNT; i++)
        host[i] = (float)(in[i] = (float)test_rng_uniform(&rng, -1.0, 1.0));
    posenc_buffer_desc wrap_host = {.size = Q_COUNT * sizeof(float), .host_memory = host};
    posenc_buffer *wrapped = NULL;
    CHECK_OK(posenc_buffer_create(ctx, &wrap_host, &wrapped));
    posenc_rope_desc desc = {.position_offset = 5};
    desc.q = posenc_tensor_of_buffer(wrapped, POSENC_DTYPE_F32, 3, shape);
    VkCommandBuffer commands = begin_commands(e, pool);
    host_to_compute(e, commands);
    /* An output given as a host view is refused as what it is, even in place over its input's
     * imported memory, as posenc_rope_submit and posenc_cl_enqueue_rope refuse it. */
    desc.q_out = posenc_tensor_of_host(host, POSENC_DTYPE_F32, 3, shape);
    CHECK_STATUS(posenc_vk_cmd_rope(ctx, commands, &desc), POSENC_INVALID_ARGUMENT);
    CHECK(strstr(posenc_context_last_error(ctx), "q_out.host") != NULL);
    desc.q_out = (posenc_tensor){0};
    CHECK_OK(posenc_vk_cmd_rope(ctx, commands, &desc));
    compute_to_host(e, commands);
    CHECK(e->EndCommandBuffer(commands) == VK_SUCCESS);
    submit_and_wait(e, commands);

    posenc_rope_desc ref_desc = {.theta = 10000.0};
    double inv_freq[HEAD_DIM / 2], ref[HEAD_DIM];
    double factor = ref_rope_frequencies(&ref_desc, HEAD_DIM, inv_freq);
    ref_stats stats = {0};
    bool ok = true;
    for (int row = 0; row < Q_ROWS; row++) {
        ref_rope_head(in + row * HEAD_DIM, ref, HEAD_DIM, HEAD_DIM, POSENC_ROPE_NEOX, inv_freq,
                      5.0 + row / Q_HEADS, factor, false);
        for (int j = 0; j < HEAD_DIM / 2; j++) {
            double a = in[row * HEAD_DIM + j], b = in[row * HEAD_DIM + j + HEAD_DIM / 2];
            double scale = sqrt(a * a + b * b) > 0.0 ? sqrt(a * a + b * b) : 1.0;
            ok &= ref_check(&stats, POSENC_DTYPE_F32, host[row * HEAD_DIM + j], ref[j], scale,
                            0.0);
            ok &= ref_check(&stats, POSENC_DTYPE_F32, host[row * HEAD_DIM + j + HEAD_DIM / 2],
                            ref[j + HEAD_DIM / 2], scale, 0.0);
        }
    }
    CHECK(ok);
    posenc_buffer_destroy(wrapped);
    posenc__aligned_free(host);
}

static void run_engine(bool push_descriptor, bool storage16)
{
    const char *reason = "";
    engine e;
    if (!engine_instance(&e, &reason) || !engine_device(&e, push_descriptor, storage16)) {
        test_failures++;
        fprintf(stderr, "engine set-up failed: %s\n", reason);
        engine_destroy(&e);
        return;
    }
    int before = test_failures;
    /* The first run records everything with debug names and labels, under the validation layer
     * (which checks that each label is closed in its command buffer); the second without. */
    if (push_descriptor && e.debug_utils)
        e.features |= POSENC_VULKAN_FEATURE_DEBUG_UTILS;
    test_bad_handles(&e);
    posenc_context *ctx = external_context(&e, e.queue, e.features);
    VkCommandPool pool = make_pool(&e);
    if (ctx && pool) {
        posenc_device_info info;
        CHECK_OK(posenc_context_device(ctx, &info));
        CHECK(info.backend == POSENC_BACKEND_VULKAN && strcmp(info.name, e.name) == 0);
        test_rope_dtypes(&e, ctx, pool);
        test_sinusoidal_dtypes(&e, ctx, pool);
        test_replay(&e, ctx, pool);
        test_rope_tables_recorded(&e, ctx, pool);
        test_rope_norm_recorded(&e, ctx, pool);
        test_threads(&e, ctx);
        test_wrap_while_recording(&e, ctx);
        test_calls_on_queue(&e, ctx);
        test_kv_cache(&e, pool);
        test_destroy_waits(&e, pool);
        test_record_errors(&e, ctx, pool);
        if (e.features & POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT)
            test_record_imported(&e, ctx, pool);
        test_record_only(&e, pool);
        test_prepare(&e, pool);
        test_allocator_and_cache(&e, pool);
        test_decode_loop(&e, pool, push_descriptor ? DECODE_STEPS : DECODE_STEPS / 10);
        if (e.debug_utils) {
            test_debug_names_recorded(&e, pool);
            test_debug_names_other_setups(&e, pool);
        } else {
            printf("  VK_EXT_debug_utils is not offered: debug names not checked\n");
        }
    }
    posenc_context_destroy(ctx);
    if (pool)
        e.DestroyCommandPool(e.device, pool, NULL);
    printf("  %-40s descriptors %s, f16/bf16 %s, host memory %s, debug names %s: %s\n",
           e.name, e.features & POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR ? "pushed" : "from pools",
           e.features & POSENC_VULKAN_FEATURE_16BIT_STORAGE ? "16-bit storage" : "packed",
           e.features & POSENC_VULKAN_FEATURE_HOST_MEMORY_IMPORT ? "imported" : "staged",
           e.features & POSENC_VULKAN_FEATURE_DEBUG_UTILS ? "on" : "off",
           test_failures == before ? "ok" : "FAILED");
    engine_destroy(&e);
}

int main(void)
{
    const char *reason = "";
    /* Kept until the end, as posenc keeps its own: an instance alive keeps the driver loaded,
     * whose first-use allocations would otherwise be reported as leaks when it unloads. */
    engine probe;
    bool present = engine_instance(&probe, &reason);
    if (!present) {
        engine_destroy(&probe);
        return test_device_absent("test_vulkan_engine", "vulkan", reason);
    }
    run_engine(true, true);
    run_engine(false, false);
    engine_destroy(&probe);
    return test_finish("test_vulkan_engine");
}
