/* SPDX-License-Identifier: MIT */
/* VK_LAYER_POSENC_faults (fault_layer.h): a Vulkan layer in front of the real driver that fails
 * one chosen call, the device lost among the failures. It passes every call it does not wrap
 * straight on, and the wrapped ones too until the armed one comes. It also changes what a
 * device reports where the environment asks, and remembers the debug names objects get. */
#include "fault_layer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vk_layer.h>

#if defined(__GNUC__)
#define EXPORT __attribute__((visibility("default")))
#else
#define EXPORT
#endif

/* The entry points the layer wraps: NAME, the driver's function type. */
#define WRAPPED_(X)                                                                              \
    X(QueueSubmit)                                                                               \
    X(WaitForFences)                                                                             \
    X(GetFenceStatus)                                                                            \
    X(ResetFences)                                                                               \
    X(MapMemory)                                                                                 \
    X(AllocateMemory)                                                                            \
    X(BindBufferMemory)                                                                          \
    X(CreateBuffer)                                                                              \
    X(CreateFence)                                                                               \
    X(CreateComputePipelines)                                                                    \
    X(CreateShaderModule)                                                                        \
    X(CreatePipelineLayout)                                                                      \
    X(CreateDescriptorSetLayout)                                                                 \
    X(CreateDescriptorPool)                                                                      \
    X(AllocateDescriptorSets)                                                                    \
    X(CreateCommandPool)                                                                         \
    X(AllocateCommandBuffers)                                                                    \
    X(BeginCommandBuffer)                                                                        \
    X(EndCommandBuffer)                                                                          \
    X(QueueWaitIdle)                                                                             \
    X(DeviceWaitIdle)

typedef struct next_fns {
#define FIELD_(name) PFN_vk##name name;
    WRAPPED_(FIELD_)
#undef FIELD_
    PFN_vkDestroyDevice DestroyDevice;
} next_fns;

enum { MAX_OBJECTS = 16 };

/* The loader's dispatch table pointer, the first word of every dispatchable handle: a queue
 * and a command buffer share their device's, a physical device its instance's. */
static void *key_of(const void *handle)
{
    return *(void *const *)handle;
}

typedef struct instance_entry {
    void *key; /* NULL: a free entry */
    PFN_vkGetInstanceProcAddr next_gipa;
    PFN_vkDestroyInstance destroy;
    PFN_vkGetPhysicalDeviceProperties2 properties2;
} instance_entry;

typedef struct device_entry {
    void *key; /* NULL: a free entry */
    VkDevice device;
    PFN_vkGetDeviceProcAddr next_gdpa;
    next_fns next;
    PFN_vkSetDebugUtilsObjectNameEXT set_name;
    int lost;
} device_entry;

enum { MAX_NAMES = 64, NAME_SIZE = 64 };

static struct {
    pthread_mutex_t lock;
    instance_entry instances[MAX_OBJECTS];
    device_entry devices[MAX_OBJECTS];
    struct {
        const void *device;
        uint32_t count;
    } destroyed[MAX_OBJECTS];
    char call[64];  /* the armed entry point, without "vk"; "*": any */
    uint32_t nth;   /* the armed call; 0: none */
    VkResult result;
    uint32_t seen;  /* calls of `call` since the arm */
    uint32_t all;   /* wrapped calls since the arm */
    int fired;
    char fired_call[66]; /* "vk" and the entry point the fault fired in */
    char names[MAX_NAMES][NAME_SIZE]; /* debug names given to objects, each once */
    uint32_t name_count;
} layer = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define DEVICE_OF_(handle) find_device(key_of(handle))

static device_entry *find_device(void *key)
{
    for (int i = 0; i < MAX_OBJECTS; i++) {
        if (layer.devices[i].key == key)
            return &layer.devices[i];
    }
    return NULL;
}

/* Whether this call of `name` is the armed one; counts it. With a device-lost fault the device
 * is lost from then on. */
static int fails(const char *name, device_entry *device, VkResult *result)
{
    pthread_mutex_lock(&layer.lock);
    int fire = 0;
    layer.all++;
    if (layer.nth && !layer.fired) {
        int match = strcmp(layer.call, "*") == 0 || strcmp(layer.call, name) == 0;
        if (match && ++layer.seen == layer.nth) {
            fire = 1;
            layer.fired = 1;
            strcpy(layer.fired_call, "vk");
            strncat(layer.fired_call, name, sizeof layer.fired_call - 3);
            *result = layer.result;
            if (layer.result == VK_ERROR_DEVICE_LOST && device)
                device->lost = 1;
        }
    } else if (strcmp(layer.call, name) == 0) {
        layer.seen++;
    }
    pthread_mutex_unlock(&layer.lock);
    return fire;
}

/* A lost device: the work already submitted is waited for, so that nothing the driver still
 * runs is freed under it, and the call reports the loss. */
static int lost(device_entry *device)
{
    if (!device || !device->lost)
        return 0;
    device->next.DeviceWaitIdle(device->device);
    return 1;
}

/* ---- the wrapped entry points ------------------------------------------------------------ */

#define CHECK_(name, handle)                                                                     \
    device_entry *d = DEVICE_OF_(handle);                                                        \
    VkResult injected = VK_SUCCESS;                                                              \
    if (fails(#name, d, &injected)) {                                                            \
        if (injected == VK_ERROR_DEVICE_LOST)                                                    \
            (void)lost(d);                                                                       \
        return injected;                                                                         \
    }

/* A wait that fails: the work it waited for is over first, as with a loss, so that posenc,
 * taking it for unfinished or failed, frees nothing the driver still runs. */
#define CHECK_WAIT_(name, handle)                                                                \
    device_entry *d = DEVICE_OF_(handle);                                                        \
    VkResult injected = VK_SUCCESS;                                                              \
    if (fails(#name, d, &injected)) {                                                            \
        d->next.DeviceWaitIdle(d->device);                                                       \
        return injected;                                                                         \
    }

static VKAPI_ATTR VkResult VKAPI_CALL QueueSubmit(VkQueue queue, uint32_t count,
                                                  const VkSubmitInfo *submits, VkFence fence)
{
    CHECK_(QueueSubmit, queue)
    if (lost(d))
        return VK_ERROR_DEVICE_LOST;
    return d->next.QueueSubmit(queue, count, submits, fence);
}

static VKAPI_ATTR VkResult VKAPI_CALL WaitForFences(VkDevice device, uint32_t count,
                                                    const VkFence *fences, VkBool32 all,
                                                    uint64_t timeout)
{
    CHECK_WAIT_(WaitForFences, device)
    if (lost(d))
        return VK_ERROR_DEVICE_LOST;
    return d->next.WaitForFences(device, count, fences, all, timeout);
}

static VKAPI_ATTR VkResult VKAPI_CALL GetFenceStatus(VkDevice device, VkFence fence)
{
    CHECK_WAIT_(GetFenceStatus, device)
    if (lost(d))
        return VK_ERROR_DEVICE_LOST;
    return d->next.GetFenceStatus(device, fence);
}

static VKAPI_ATTR VkResult VKAPI_CALL ResetFences(VkDevice device, uint32_t count,
                                                  const VkFence *fences)
{
    CHECK_(ResetFences, device)
    return d->next.ResetFences(device, count, fences);
}

static VKAPI_ATTR VkResult VKAPI_CALL MapMemory(VkDevice device, VkDeviceMemory memory,
                                                VkDeviceSize offset, VkDeviceSize size,
                                                VkMemoryMapFlags flags, void **data)
{
    CHECK_(MapMemory, device)
    if (lost(d))
        return VK_ERROR_DEVICE_LOST;
    return d->next.MapMemory(device, memory, offset, size, flags, data);
}

static VKAPI_ATTR VkResult VKAPI_CALL AllocateMemory(VkDevice device,
                                                     const VkMemoryAllocateInfo *info,
                                                     const VkAllocationCallbacks *allocator,
                                                     VkDeviceMemory *memory)
{
    CHECK_(AllocateMemory, device)
    return d->next.AllocateMemory(device, info, allocator, memory);
}

static VKAPI_ATTR VkResult VKAPI_CALL BindBufferMemory(VkDevice device, VkBuffer buffer,
                                                       VkDeviceMemory memory, VkDeviceSize offset)
{
    CHECK_(BindBufferMemory, device)
    return d->next.BindBufferMemory(device, buffer, memory, offset);
}

static VKAPI_ATTR VkResult VKAPI_CALL CreateBuffer(VkDevice device, const VkBufferCreateInfo *info,
                                                   const VkAllocationCallbacks *allocator,
                                                   VkBuffer *buffer)
{
    CHECK_(CreateBuffer, device)
    return d->next.CreateBuffer(device, info, allocator, buffer);
}

static VKAPI_ATTR VkResult VKAPI_CALL CreateFence(VkDevice device, const VkFenceCreateInfo *info,
                                                  const VkAllocationCallbacks *allocator,
                                                  VkFence *fence)
{
    CHECK_(CreateFence, device)
    return d->next.CreateFence(device, info, allocator, fence);
}

static VKAPI_ATTR VkResult VKAPI_CALL CreateComputePipelines(
    VkDevice device, VkPipelineCache cache, uint32_t count,
    const VkComputePipelineCreateInfo *infos, const VkAllocationCallbacks *allocator,
    VkPipeline *pipelines)
{
    CHECK_(CreateComputePipelines, device)
    return d->next.CreateComputePipelines(device, cache, count, infos, allocator, pipelines);
}

static VKAPI_ATTR VkResult VKAPI_CALL CreateShaderModule(VkDevice device,
                                                         const VkShaderModuleCreateInfo *info,
                                                         const VkAllocationCallbacks *allocator,
                                                         VkShaderModule *module)
{
    CHECK_(CreateShaderModule, device)
    return d->next.CreateShaderModule(device, info, allocator, module);
}

static VKAPI_ATTR VkResult VKAPI_CALL CreatePipelineLayout(
    VkDevice device, const VkPipelineLayoutCreateInfo *info,
    const VkAllocationCallbacks *allocator, VkPipelineLayout *pipeline_layout)
{
    CHECK_(CreatePipelineLayout, device)
    return d->next.CreatePipelineLayout(device, info, allocator, pipeline_layout);
}

static VKAPI_ATTR VkResult VKAPI_CALL CreateDescriptorSetLayout(
    VkDevice device, const VkDescriptorSetLayoutCreateInfo *info,
    const VkAllocationCallbacks *allocator, VkDescriptorSetLayout *set_layout)
{
    CHECK_(CreateDescriptorSetLayout, device)
    return d->next.CreateDescriptorSetLayout(device, info, allocator, set_layout);
}

static VKAPI_ATTR VkResult VKAPI_CALL CreateDescriptorPool(VkDevice device,
                                                           const VkDescriptorPoolCreateInfo *info,
                                                           const VkAllocationCallbacks *allocator,
                                                           VkDescriptorPool *pool)
{
    CHECK_(CreateDescriptorPool, device)
    return d->next.CreateDescriptorPool(device, info, allocator, pool);
}

static VKAPI_ATTR VkResult VKAPI_CALL AllocateDescriptorSets(
    VkDevice device, const VkDescriptorSetAllocateInfo *info, VkDescriptorSet *sets)
{
    CHECK_(AllocateDescriptorSets, device)
    return d->next.AllocateDescriptorSets(device, info, sets);
}

static VKAPI_ATTR VkResult VKAPI_CALL CreateCommandPool(VkDevice device,
                                                        const VkCommandPoolCreateInfo *info,
                                                        const VkAllocationCallbacks *allocator,
                                                        VkCommandPool *pool)
{
    CHECK_(CreateCommandPool, device)
    return d->next.CreateCommandPool(device, info, allocator, pool);
}

static VKAPI_ATTR VkResult VKAPI_CALL AllocateCommandBuffers(
    VkDevice device, const VkCommandBufferAllocateInfo *info, VkCommandBuffer *buffers)
{
    CHECK_(AllocateCommandBuffers, device)
    return d->next.AllocateCommandBuffers(device, info, buffers);
}

static VKAPI_ATTR VkResult VKAPI_CALL BeginCommandBuffer(VkCommandBuffer commands,
                                                         const VkCommandBufferBeginInfo *info)
{
    CHECK_(BeginCommandBuffer, commands)
    return d->next.BeginCommandBuffer(commands, info);
}

static VKAPI_ATTR VkResult VKAPI_CALL EndCommandBuffer(VkCommandBuffer commands)
{
    CHECK_(EndCommandBuffer, commands)
    return d->next.EndCommandBuffer(commands);
}

static VKAPI_ATTR VkResult VKAPI_CALL QueueWaitIdle(VkQueue queue)
{
    CHECK_WAIT_(QueueWaitIdle, queue)
    if (lost(d))
        return VK_ERROR_DEVICE_LOST;
    return d->next.QueueWaitIdle(queue);
}

static VKAPI_ATTR VkResult VKAPI_CALL DeviceWaitIdle(VkDevice device)
{
    CHECK_WAIT_(DeviceWaitIdle, device)
    if (lost(d))
        return VK_ERROR_DEVICE_LOST;
    return d->next.DeviceWaitIdle(device);
}

/* ---- the chain: instances and devices ---------------------------------------------------- */

static VKAPI_ATTR VkResult VKAPI_CALL CreateInstance(const VkInstanceCreateInfo *info,
                                                     const VkAllocationCallbacks *allocator,
                                                     VkInstance *instance)
{
    VkLayerInstanceCreateInfo *link = (VkLayerInstanceCreateInfo *)info->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                     link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerInstanceCreateInfo *)link->pNext;
    if (!link)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext; /* the next layer's link for the next one */
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)next_gipa(NULL, "vkCreateInstance");
    VkResult result = create(info, allocator, instance);
    if (result != VK_SUCCESS)
        return result;
    pthread_mutex_lock(&layer.lock);
    for (int i = 0; i < MAX_OBJECTS; i++) {
        if (!layer.instances[i].key) {
            layer.instances[i].key = key_of(*instance);
            layer.instances[i].next_gipa = next_gipa;
            layer.instances[i].destroy =
                (PFN_vkDestroyInstance)next_gipa(*instance, "vkDestroyInstance");
            layer.instances[i].properties2 = (PFN_vkGetPhysicalDeviceProperties2)next_gipa(
                *instance, "vkGetPhysicalDeviceProperties2");
            break;
        }
    }
    pthread_mutex_unlock(&layer.lock);
    return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL DestroyInstance(VkInstance instance,
                                                  const VkAllocationCallbacks *allocator)
{
    if (!instance)
        return;
    PFN_vkDestroyInstance destroy = NULL;
    pthread_mutex_lock(&layer.lock);
    for (int i = 0; i < MAX_OBJECTS; i++) {
        if (layer.instances[i].key == key_of(instance)) {
            destroy = layer.instances[i].destroy;
            layer.instances[i].key = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&layer.lock);
    if (destroy)
        destroy(instance, allocator);
}

static VKAPI_ATTR VkResult VKAPI_CALL CreateDevice(VkPhysicalDevice physical,
                                                   const VkDeviceCreateInfo *info,
                                                   const VkAllocationCallbacks *allocator,
                                                   VkDevice *device)
{
    VkLayerDeviceCreateInfo *link = (VkLayerDeviceCreateInfo *)info->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO &&
                     link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerDeviceCreateInfo *)link->pNext;
    if (!link)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr next_gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)next_gipa(NULL, "vkCreateDevice");
    VkResult result = create(physical, info, allocator, device);
    if (result != VK_SUCCESS)
        return result;
    pthread_mutex_lock(&layer.lock);
    for (int i = 0; i < MAX_OBJECTS; i++) {
        if (!layer.devices[i].key) {
            device_entry *d = &layer.devices[i];
            memset(d, 0, sizeof *d);
            d->key = key_of(*device);
            d->device = *device;
            d->next_gdpa = next_gdpa;
#define LOAD_(name) d->next.name = (PFN_vk##name)next_gdpa(*device, "vk" #name);
            WRAPPED_(LOAD_)
            LOAD_(DestroyDevice)
#undef LOAD_
            d->set_name = (PFN_vkSetDebugUtilsObjectNameEXT)next_gdpa(
                *device, "vkSetDebugUtilsObjectNameEXT");
            break;
        }
    }
    pthread_mutex_unlock(&layer.lock);
    return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL DestroyDevice(VkDevice device,
                                                const VkAllocationCallbacks *allocator)
{
    if (!device)
        return;
    PFN_vkDestroyDevice destroy = NULL;
    pthread_mutex_lock(&layer.lock);
    device_entry *d = DEVICE_OF_(device);
    if (d) {
        destroy = d->next.DestroyDevice;
        d->key = NULL;
    }
    for (int i = 0; i < MAX_OBJECTS; i++) {
        if (layer.destroyed[i].device == device || !layer.destroyed[i].device) {
            layer.destroyed[i].device = device;
            layer.destroyed[i].count++;
            break;
        }
    }
    pthread_mutex_unlock(&layer.lock);
    if (destroy)
        destroy(device, allocator);
}

/* The device's properties as the driver gives them, but for what the environment changes:
 * POSENC_FAULTS_STORAGE_BUFFERS=N, maxPerStageDescriptorStorageBuffers N (a device with fewer
 * than posenc binds); POSENC_FAULTS_NO_SHUFFLE=1, no subgroup shuffles. */
static VKAPI_ATTR void VKAPI_CALL GetPhysicalDeviceProperties2(
    VkPhysicalDevice physical, VkPhysicalDeviceProperties2 *properties)
{
    PFN_vkGetPhysicalDeviceProperties2 next = NULL;
    pthread_mutex_lock(&layer.lock);
    for (int i = 0; i < MAX_OBJECTS; i++) {
        if (layer.instances[i].key == key_of(physical))
            next = layer.instances[i].properties2;
    }
    pthread_mutex_unlock(&layer.lock);
    if (!next)
        return;
    next(physical, properties);
    const char *buffers = getenv("POSENC_FAULTS_STORAGE_BUFFERS");
    if (buffers && *buffers)
        properties->properties.limits.maxPerStageDescriptorStorageBuffers =
            (uint32_t)strtoul(buffers, NULL, 10);
    const char *no_shuffle = getenv("POSENC_FAULTS_NO_SHUFFLE");
    for (VkBaseOutStructure *s = properties->pNext; s && no_shuffle && *no_shuffle == '1';
         s = s->pNext) {
        if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES)
            ((VkPhysicalDeviceSubgroupProperties *)(void *)s)->supportedOperations &=
                ~(VkSubgroupFeatureFlags)(VK_SUBGROUP_FEATURE_SHUFFLE_BIT |
                                          VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT);
    }
}

/* Remembers each debug name given (posenc names its pipelines by kernel), then names. */
static VKAPI_ATTR VkResult VKAPI_CALL SetDebugUtilsObjectNameEXT(
    VkDevice device, const VkDebugUtilsObjectNameInfoEXT *info)
{
    pthread_mutex_lock(&layer.lock);
    device_entry *d = DEVICE_OF_(device);
    PFN_vkSetDebugUtilsObjectNameEXT next = d ? d->set_name : NULL;
    const char *name = info && info->pObjectName ? info->pObjectName : "";
    int known = 0;
    for (uint32_t i = 0; i < layer.name_count; i++)
        known = known || strcmp(layer.names[i], name) == 0;
    if (!known && layer.name_count < MAX_NAMES) {
        strncpy(layer.names[layer.name_count], name, NAME_SIZE - 1);
        layer.names[layer.name_count++][NAME_SIZE - 1] = '\0';
    }
    pthread_mutex_unlock(&layer.lock);
    return next ? next(device, info) : VK_SUCCESS;
}

static PFN_vkVoidFunction own_device_function(const char *name)
{
    if (strcmp(name, "vkSetDebugUtilsObjectNameEXT") == 0)
        return (PFN_vkVoidFunction)SetDebugUtilsObjectNameEXT;
#define OWN_(fn)                                                                                 \
    if (strcmp(name, "vk" #fn) == 0)                                                             \
        return (PFN_vkVoidFunction)fn;
    WRAPPED_(OWN_)
    OWN_(DestroyDevice)
#undef OWN_
    return NULL;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL GetDeviceProcAddr(VkDevice device,
                                                                 const char *name)
{
    PFN_vkVoidFunction own = own_device_function(name);
    if (own)
        return own;
    pthread_mutex_lock(&layer.lock);
    device_entry *d = DEVICE_OF_(device);
    PFN_vkGetDeviceProcAddr next = d ? d->next_gdpa : NULL;
    pthread_mutex_unlock(&layer.lock);
    return next ? next(device, name) : NULL;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL GetInstanceProcAddr(VkInstance instance,
                                                                   const char *name)
{
    if (strcmp(name, "vkGetInstanceProcAddr") == 0)
        return (PFN_vkVoidFunction)GetInstanceProcAddr;
    if (strcmp(name, "vkCreateInstance") == 0)
        return (PFN_vkVoidFunction)CreateInstance;
    if (strcmp(name, "vkDestroyInstance") == 0)
        return (PFN_vkVoidFunction)DestroyInstance;
    if (strcmp(name, "vkCreateDevice") == 0)
        return (PFN_vkVoidFunction)CreateDevice;
    if (strcmp(name, "vkGetDeviceProcAddr") == 0)
        return (PFN_vkVoidFunction)GetDeviceProcAddr;
    if (strcmp(name, "vkGetPhysicalDeviceProperties2") == 0 ||
        strcmp(name, "vkGetPhysicalDeviceProperties2KHR") == 0)
        return (PFN_vkVoidFunction)GetPhysicalDeviceProperties2;
    PFN_vkVoidFunction own = own_device_function(name);
    if (own)
        return own;
    if (!instance)
        return NULL;
    PFN_vkGetInstanceProcAddr next = NULL;
    pthread_mutex_lock(&layer.lock);
    for (int i = 0; i < MAX_OBJECTS; i++) {
        if (layer.instances[i].key == key_of(instance))
            next = layer.instances[i].next_gipa;
    }
    pthread_mutex_unlock(&layer.lock);
    return next ? next(instance, name) : NULL;
}

EXPORT VKAPI_ATTR VkResult VKAPI_CALL
vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *version)
{
    if (version->loaderLayerInterfaceVersion < 2)
        return VK_ERROR_INITIALIZATION_FAILED;
    version->loaderLayerInterfaceVersion = 2;
    version->pfnGetInstanceProcAddr = GetInstanceProcAddr;
    version->pfnGetDeviceProcAddr = GetDeviceProcAddr;
    version->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}

/* ---- steering (fault_layer.h) ------------------------------------------------------------- */

EXPORT void posenc_faults_arm(const char *call, uint32_t nth, int32_t result)
{
    pthread_mutex_lock(&layer.lock);
    const char *bare = strncmp(call, "vk", 2) == 0 ? call + 2 : call;
    strncpy(layer.call, bare, sizeof layer.call - 1);
    layer.call[sizeof layer.call - 1] = '\0';
    layer.nth = nth;
    layer.result = (VkResult)result;
    layer.seen = 0;
    layer.all = 0;
    layer.fired = 0;
    layer.fired_call[0] = '\0';
    pthread_mutex_unlock(&layer.lock);
}

EXPORT uint32_t posenc_faults_count(const char *call)
{
    pthread_mutex_lock(&layer.lock);
    uint32_t count = strcmp(call, "*") == 0 ? layer.all : layer.seen;
    pthread_mutex_unlock(&layer.lock);
    return count;
}

EXPORT int posenc_faults_fired(void)
{
    pthread_mutex_lock(&layer.lock);
    int fired = layer.fired;
    pthread_mutex_unlock(&layer.lock);
    return fired;
}

EXPORT const char *posenc_faults_fired_call(void)
{
    return layer.fired_call; /* written before `fired`, under the lock; read after it */
}

EXPORT int posenc_faults_named(const char *name)
{
    int named = 0;
    pthread_mutex_lock(&layer.lock);
    for (uint32_t i = 0; i < layer.name_count; i++)
        named = named || strcmp(layer.names[i], name) == 0;
    pthread_mutex_unlock(&layer.lock);
    return named;
}

EXPORT uint32_t posenc_faults_destroyed(const void *device)
{
    uint32_t count = 0;
    pthread_mutex_lock(&layer.lock);
    for (int i = 0; i < MAX_OBJECTS; i++) {
        if (layer.destroyed[i].device == device)
            count = layer.destroyed[i].count;
    }
    pthread_mutex_unlock(&layer.lock);
    return count;
}
