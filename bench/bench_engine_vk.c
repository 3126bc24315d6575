/* SPDX-License-Identifier: MIT */
/* `posenc bench` warm-up on a VkDevice of the bench's own, as an engine has one: the loader
 * opened at run time, one compute queue, one buffer wrapped, records into fresh command
 * buffers (never submitted: recording is what is timed). */
#include "bench_engine.h"

#include "support.h"

#define VK_NO_PROTOTYPES
#include <posenc/posenc_vulkan.h>

#include <stdio.h>
#include <string.h>

#define INSTANCE_FUNCTIONS(X)                                                                   \
    X(DestroyInstance) X(EnumeratePhysicalDevices) X(GetPhysicalDeviceProperties)             \
    X(GetPhysicalDeviceQueueFamilyProperties) X(GetPhysicalDeviceMemoryProperties)            \
    X(EnumerateDeviceExtensionProperties) X(CreateDevice) X(GetDeviceProcAddr)

#define DEVICE_FUNCTIONS(X)                                                                     \
    X(DestroyDevice) X(GetDeviceQueue) X(CreateBuffer) X(DestroyBuffer)                        \
    X(GetBufferMemoryRequirements) X(AllocateMemory) X(FreeMemory) X(BindBufferMemory)         \
    X(CreateCommandPool) X(DestroyCommandPool) X(AllocateCommandBuffers) X(BeginCommandBuffer) \
    X(EndCommandBuffer)

#define MEMBER_(name) PFN_vk##name name;

typedef struct engine {
    void *library;
    PFN_vkGetInstanceProcAddr GetInstanceProcAddr;
    VkInstance instance;
    VkPhysicalDevice physical;
    VkDevice device;
    uint32_t family;
    VkQueue queue;
    uint32_t features;
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkCommandPool pool;
    INSTANCE_FUNCTIONS(MEMBER_)
    DEVICE_FUNCTIONS(MEMBER_)
} engine;

static const char *const loader_names[] = {
#if defined(_WIN32)
    "vulkan-1.dll",
#elif defined(__APPLE__)
    "libvulkan.1.dylib", "libMoltenVK.dylib",
#else
    "libvulkan.so.1", "libvulkan.so",
#endif
};

/* The instance and the physical device named like posenc's `info`. */
static const char *open_instance(engine *e, const posenc_device_info *info)
{
    e->library = support_library_open_first(loader_names,
                                             sizeof loader_names / sizeof loader_names[0]);
    if (!e->library)
        return "the Vulkan loader did not open";
    e->GetInstanceProcAddr =
        (PFN_vkGetInstanceProcAddr)support_library_symbol(e->library, "vkGetInstanceProcAddr");
    PFN_vkCreateInstance create = e->GetInstanceProcAddr
                                      ? (PFN_vkCreateInstance)e->GetInstanceProcAddr(
                                            VK_NULL_HANDLE, "vkCreateInstance")
                                      : NULL;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "posenc bench",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo instance_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                          .pApplicationInfo = &app};
    if (!create || create(&instance_info, NULL, &e->instance) != VK_SUCCESS)
        return "vkCreateInstance failed";
#define LOAD_INSTANCE_(name)                                                                    \
    e->name = (PFN_vk##name)e->GetInstanceProcAddr(e->instance, "vk" #name);                   \
    if (!e->name)                                                                              \
        return "vk" #name " is missing";
    INSTANCE_FUNCTIONS(LOAD_INSTANCE_)
#undef LOAD_INSTANCE_
    VkPhysicalDevice physicals[16];
    uint32_t count = 16;
    if (e->EnumeratePhysicalDevices(e->instance, &count, physicals) < 0)
        return "vkEnumeratePhysicalDevices failed";
    for (uint32_t i = 0; i < count && !e->physical; i++) {
        VkPhysicalDeviceProperties properties;
        e->GetPhysicalDeviceProperties(physicals[i], &properties);
        if (strcmp(properties.deviceName, info->name) == 0)
            e->physical = physicals[i];
    }
    return e->physical ? NULL : "the device is not among the loader's";
}

/* A device with one compute queue (and VK_KHR_push_descriptor where offered, as posenc prefers),
 * a host-visible buffer for the tensors and a command pool. */
static const char *open_device(engine *e)
{
    VkQueueFamilyProperties families[16];
    uint32_t count = 16;
    e->GetPhysicalDeviceQueueFamilyProperties(e->physical, &count, families);
    e->family = UINT32_MAX;
    for (uint32_t i = 0; i < count && e->family == UINT32_MAX; i++) {
        if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            e->family = i;
    }
    if (e->family == UINT32_MAX)
        return "no compute queue";
    VkExtensionProperties extensions[256];
    uint32_t extension_count = 256;
    if (e->EnumerateDeviceExtensionProperties(e->physical, NULL, &extension_count, extensions) < 0)
        extension_count = 0;
    const char *push = NULL;
    for (uint32_t i = 0; i < extension_count; i++) {
        if (strcmp(extensions[i].extensionName, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) == 0)
            push = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    }
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                          .queueFamilyIndex = e->family,
                                          .queueCount = 1,
                                          .pQueuePriorities = &priority};
    VkDeviceCreateInfo device_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                      .queueCreateInfoCount = 1,
                                      .pQueueCreateInfos = &queue_info,
                                      .enabledExtensionCount = push ? 1 : 0,
                                      .ppEnabledExtensionNames = push ? &push : NULL};
    if (e->CreateDevice(e->physical, &device_info, NULL, &e->device) != VK_SUCCESS)
        return "vkCreateDevice failed";
    e->features = push ? POSENC_VULKAN_FEATURE_PUSH_DESCRIPTOR : 0;
#define LOAD_DEVICE_(name)                                                                      \
    e->name = (PFN_vk##name)e->GetDeviceProcAddr(e->device, "vk" #name);                       \
    if (!e->name)                                                                              \
        return "vk" #name " is missing";
    DEVICE_FUNCTIONS(LOAD_DEVICE_)
#undef LOAD_DEVICE_
    e->GetDeviceQueue(e->device, e->family, 0, &e->queue);

    VkBufferCreateInfo buffer_info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                                      .size = BENCH_ENGINE_BYTES,
                                      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
    if (e->CreateBuffer(e->device, &buffer_info, NULL, &e->buffer) != VK_SUCCESS)
        return "vkCreateBuffer failed";
    VkMemoryRequirements requirements;
    e->GetBufferMemoryRequirements(e->device, e->buffer, &requirements);
    VkPhysicalDeviceMemoryProperties memory;
    e->GetPhysicalDeviceMemoryProperties(e->physical, &memory);
    uint32_t type = UINT32_MAX;
    for (uint32_t t = 0; t < memory.memoryTypeCount && type == UINT32_MAX; t++) {
        if (requirements.memoryTypeBits & (1u << t))
            type = t;
    }
    VkMemoryAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                     .allocationSize = requirements.size,
                                     .memoryTypeIndex = type};
    if (type == UINT32_MAX ||
        e->AllocateMemory(e->device, &allocate, NULL, &e->memory) != VK_SUCCESS ||
        e->BindBufferMemory(e->device, e->buffer, e->memory, 0) != VK_SUCCESS)
        return "the tensors' memory could not be allocated";
    VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                         .queueFamilyIndex = e->family};
    if (e->CreateCommandPool(e->device, &pool_info, NULL, &e->pool) != VK_SUCCESS)
        return "vkCreateCommandPool failed";
    return NULL;
}

static void close_engine(engine *e)
{
    if (e->pool)
        e->DestroyCommandPool(e->device, e->pool, NULL);
    if (e->buffer)
        e->DestroyBuffer(e->device, e->buffer, NULL);
    if (e->memory)
        e->FreeMemory(e->device, e->memory, NULL);
    if (e->device)
        e->DestroyDevice(e->device, NULL);
    if (e->instance)
        e->DestroyInstance(e->instance, NULL);
    if (e->library)
        support_library_close(e->library);
}

/* The context on the engine's handles, prepare, and the records; NULL or the failure. */
static const char *time_records(engine *e, bench_engine_times *times, char *error,
                                size_t error_size)
{
    enum { RECORDS = 1 + BENCH_ENGINE_LATER };
    VkCommandBuffer commands[RECORDS];
    VkCommandBufferAllocateInfo allocate = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = e->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = RECORDS};
    if (e->AllocateCommandBuffers(e->device, &allocate, commands) != VK_SUCCESS)
        return "vkAllocateCommandBuffers failed";
    posenc_context_desc desc = {
        .vulkan = posenc_vulkan_external_of(e->instance, e->physical, e->device, e->family,
                                            e->queue, e->GetInstanceProcAddr, e->features),
    };
    posenc_context *context = NULL;
    double start = support_seconds_now();
    posenc_status status = posenc_context_create(&desc, &context);
    times->context_seconds = support_seconds_now() - start;
    posenc_buffer *buffer = NULL;
    const char *call = "posenc_context_create";
    if (status == POSENC_OK) {
        call = "posenc_vk_buffer_wrap";
        status = posenc_vk_buffer_wrap(context, e->buffer, 0, BENCH_ENGINE_BYTES, &buffer);
    }
    posenc_rope_desc rope = bench_engine_rope(buffer);
    if (status == POSENC_OK) {
        call = "posenc_prepare";
        posenc_prepare_desc prepare = {.rope = &rope, .rope_count = 1};
        start = support_seconds_now();
        status = posenc_prepare(context, &prepare);
        times->prepare_seconds = support_seconds_now() - start;
    }
    uint64_t kernels = status == POSENC_OK ? bench_engine_kernels(context) : 0;
    double later[BENCH_ENGINE_LATER];
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    for (int i = 0; i < RECORDS && status == POSENC_OK; i++) {
        call = "posenc_vk_cmd_rope";
        if (e->BeginCommandBuffer(commands[i], &begin) != VK_SUCCESS) {
            posenc_buffer_destroy(buffer);
            posenc_context_destroy(context);
            return "vkBeginCommandBuffer failed";
        }
        start = support_seconds_now();
        status = posenc_vk_cmd_rope(context, commands[i], &rope);
        double seconds = support_seconds_now() - start;
        e->EndCommandBuffer(commands[i]);
        bench_engine_keep(times, later, i, seconds);
    }
    return bench_engine_finish(context, buffer, status, call, kernels, later, times, error,
                               error_size);
}

bool bench_engine_time_vulkan(const posenc_device_info *info, bench_engine_times *times,
                              char *error, size_t error_size)
{
    memset(times, 0, sizeof *times);
    times->call = "posenc_vk_cmd_rope";
    engine e;
    memset(&e, 0, sizeof e);
    const char *failure = open_instance(&e, info);
    if (!failure)
        failure = open_device(&e);
    if (!failure)
        failure = time_records(&e, times, error, error_size);
    if (failure && failure != error)
        snprintf(error, error_size, "%s", failure);
    close_engine(&e);
    return failure == NULL;
}
