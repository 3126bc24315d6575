/* SPDX-License-Identifier: MIT */
/* Enumerating Vulkan devices: every physical device of Vulkan 1.1 or later with a compute queue,
 * described from queried properties and features (never from its name), and the same GPU seen
 * twice (two drivers, two loaders' manifests) listed once, by deviceUUID. */
#include "vulkan/vk_internal.h"

#include "core/kernels.h"
#include "core/platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reason the backend is absent, written under the registry's lock. */
static char absent_reason[256];
/* The instance devices were enumerated with, kept for the life of the process when there are
 * devices (unless the listing is abandoned: posenc_vk_release_devices): it keeps the drivers
 * loaded, so that each context does not load them again (Mesa's drivers also keep allocations
 * of their first use, which an unload would turn into leaks). */
static posenc_vk_instance enumeration_instance;

static const char *vendor_name(uint32_t vendor_id)
{
    switch (vendor_id) {
    case 0x1002: return "AMD";
    case 0x1010: return "Imagination Technologies";
    case 0x106b: return "Apple";
    case 0x10de: return "NVIDIA";
    case 0x13b5: return "ARM";
    case 0x14e4: return "Broadcom";
    case 0x5143: return "Qualcomm";
    case 0x8086: return "Intel";
    case 0x10005: return "Mesa";
    default: return NULL;
    }
}

/* A compute queue family, preferring one without graphics (a dedicated compute queue), in
 * `*family` (UINT32_MAX: none); false when out of host memory. */
static bool compute_queue_family(const posenc_vk_instance *instance, VkPhysicalDevice physical,
                                 uint32_t *family)
{
    uint32_t count = 0;
    instance->fns.GetPhysicalDeviceQueueFamilyProperties(physical, &count, NULL);
    VkQueueFamilyProperties *families = calloc(count + 1, sizeof *families);
    if (!families)
        return false;
    instance->fns.GetPhysicalDeviceQueueFamilyProperties(physical, &count, families);
    uint32_t found = UINT32_MAX;
    for (uint32_t i = 0; i < count; i++) {
        if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || families[i].queueCount == 0)
            continue;
        if (found == UINT32_MAX || !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            found = i;
        if (!(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            break;
    }
    free(families);
    *family = found;
    return true;
}

static posenc_device_type device_type(VkPhysicalDeviceType type)
{
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return POSENC_DEVICE_DISCRETE_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return POSENC_DEVICE_INTEGRATED_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return POSENC_DEVICE_VIRTUAL_GPU;
    /* A Vulkan "CPU" device is a GPU emulated in software (lavapipe, SwiftShader): AUTO uses
     * it only when asked to. */
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return POSENC_DEVICE_SOFTWARE;
    default: return POSENC_DEVICE_OTHER;
    }
}

/* Memory: the largest device-local heap, and whether all of it is host-visible, coherent
 * memory (an integrated or software device: buffers are then used in place). */
static void describe_memory(const VkPhysicalDeviceMemoryProperties *memory, bool discrete,
                            uint64_t *device_bytes, bool *unified)
{
    uint32_t largest = UINT32_MAX;
    for (uint32_t h = 0; h < memory->memoryHeapCount; h++) {
        const VkMemoryHeap *heap = &memory->memoryHeaps[h];
        if ((heap->flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            (largest == UINT32_MAX || heap->size > memory->memoryHeaps[largest].size))
            largest = h;
    }
    *device_bytes = largest == UINT32_MAX ? 0 : memory->memoryHeaps[largest].size;
    *unified = false;
    const VkMemoryPropertyFlags shared = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                         VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                         VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t t = 0; t < memory->memoryTypeCount && !discrete; t++) {
        if ((memory->memoryTypes[t].propertyFlags & shared) == shared &&
            memory->memoryTypes[t].heapIndex == largest)
            *unified = true;
    }
}

/* Appends `next` to a pNext chain whose last structure is `*tail`, when the device has it. */
static void chain(VkBaseOutStructure **tail, bool present, void *next)
{
    if (present) {
        (*tail)->pNext = next;
        *tail = next;
    }
}

posenc_status posenc_vk_describe(const posenc_vk_instance *instance, VkPhysicalDevice physical,
                                 uint32_t index, posenc__device *device,
                                 posenc__gpu_failure *failure)
{
    posenc_vk_physical *record = device->handle;
    const posenc_vk_instance_fns *vk = &instance->fns;
    VkPhysicalDeviceProperties basic;
    vk->GetPhysicalDeviceProperties(physical, &basic);
    uint32_t version = basic.apiVersion < instance->api_version ? basic.apiVersion
                                                                 : instance->api_version;
    if (VK_API_VERSION_MAJOR(version) == 1 && VK_API_VERSION_MINOR(version) < 1)
        return POSENC_UNSUPPORTED; /* Vulkan 1.0 only */
    /* A shortage is not the device's fault: it must not be described as unusable. */
    if (!compute_queue_family(instance, physical, &record->queue_family))
        return POSENC_OUT_OF_MEMORY;
    if (record->queue_family == UINT32_MAX)
        return POSENC_UNSUPPORTED;

    /* A failed query of the extensions is the runtime's error: read as "no extensions" it
     * would describe the device without 16-bit storage, host import or push descriptors, and
     * hide the failure. VK_INCOMPLETE: extensions appeared since the count; those are enough. */
    uint32_t extension_count = 0;
    VkExtensionProperties *extensions = NULL;
    VkResult result =
        vk->EnumerateDeviceExtensionProperties(physical, NULL, &extension_count, NULL);
    if (result >= 0) {
        extensions = calloc(extension_count + 1, sizeof *extensions);
        if (!extensions)
            return POSENC_OUT_OF_MEMORY;
        if (extension_count)
            result = vk->EnumerateDeviceExtensionProperties(physical, NULL, &extension_count,
                                                            extensions);
    }
    if (result < 0) {
        free(extensions);
        *failure = (posenc__gpu_failure){"vkEnumerateDeviceExtensionProperties",
                                         posenc_vk_result_name(result), result};
        return posenc_vk_status_of(result);
    }
#define HAS_(name) posenc_vk_has_extension(extensions, extension_count, name)
    bool has_driver_properties = version >= VK_API_VERSION_1_2 ||
                                 HAS_(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
    bool has_float16 = version >= VK_API_VERSION_1_2 ||
                       HAS_(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    bool has_size_control = version >= VK_API_VERSION_1_3 ||
                            HAS_(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    bool has_amd_cores = HAS_(VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
    bool has_nv_sms = HAS_(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    record->portability_subset = HAS_("VK_KHR_portability_subset");
    record->push_descriptor = HAS_(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    bool has_host_import = HAS_(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
#undef HAS_
    free(extensions);

    /* Properties: each structure chained only where the device has it. */
    VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties subgroup = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &id};
    VkPhysicalDeviceMaintenance3Properties maintenance3 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = &subgroup};
    VkPhysicalDeviceDriverProperties driver = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceSubgroupSizeControlPropertiesEXT size_control = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
    VkPhysicalDeviceShaderCorePropertiesAMD amd_cores = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV nv_sms = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT host_import = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
    VkPhysicalDeviceProperties2 properties = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &maintenance3};
    VkBaseOutStructure *tail = (VkBaseOutStructure *)&id;
    chain(&tail, has_host_import, &host_import);
    chain(&tail, has_driver_properties, &driver);
    chain(&tail, has_size_control, &size_control);
    chain(&tail, has_amd_cores, &amd_cores);
    chain(&tail, has_nv_sms, &nv_sms);
    vk->GetPhysicalDeviceProperties2(physical, &properties);

    VkPhysicalDevice16BitStorageFeatures storage16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceShaderFloat16Int8Features float16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDeviceSubgroupSizeControlFeaturesEXT size_control_features = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
    VkPhysicalDeviceFeatures2 features = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &storage16};
    tail = (VkBaseOutStructure *)&storage16;
    chain(&tail, has_float16, &float16);
    chain(&tail, has_size_control, &size_control_features);
    vk->GetPhysicalDeviceFeatures2(physical, &features);

    VkPhysicalDeviceMemoryProperties memory;
    vk->GetPhysicalDeviceMemoryProperties(physical, &memory);

    const VkPhysicalDeviceLimits *limits = &properties.properties.limits;
    /* The kernels bind POSENC_VK_BINDINGS storage buffers; Vulkan promises only 4 a stage. */
    if (limits->maxPerStageDescriptorStorageBuffers < POSENC_VK_BINDINGS ||
        limits->maxDescriptorSetStorageBuffers < POSENC_VK_BINDINGS)
        return POSENC_UNSUPPORTED;
    posenc_device_info *info = &device->info;
    info->type = device_type(properties.properties.deviceType);
    posenc__copy_string(info->name, sizeof info->name, properties.properties.deviceName);
    const char *vendor = vendor_name(properties.properties.vendorID);
    if (vendor)
        posenc__copy_string(info->vendor, sizeof info->vendor, vendor);
    else
        snprintf(info->vendor, sizeof info->vendor, "PCI vendor 0x%04x",
                 properties.properties.vendorID);
    uint32_t api = properties.properties.apiVersion;
    if (has_driver_properties && driver.driverName[0])
        snprintf(info->driver, sizeof info->driver, "%.40s %.60s, Vulkan %u.%u.%u",
                 driver.driverName, driver.driverInfo, VK_API_VERSION_MAJOR(api),
                 VK_API_VERSION_MINOR(api), VK_API_VERSION_PATCH(api));
    else
        snprintf(info->driver, sizeof info->driver, "driver 0x%x, Vulkan %u.%u.%u",
                 properties.properties.driverVersion, VK_API_VERSION_MAJOR(api),
                 VK_API_VERSION_MINOR(api), VK_API_VERSION_PATCH(api));
    describe_memory(&memory, info->type == POSENC_DEVICE_DISCRETE_GPU, &info->memory_bytes,
                    &info->unified_memory);
    uint64_t import_alignment = host_import.minImportedHostPointerAlignment;
    info->host_memory_import =
        has_host_import && posenc__gpu_host_importable(info->unified_memory, import_alignment);
    record->import_alignment = info->host_memory_import ? import_alignment : 0;
    info->fp16_storage = storage16.storageBuffer16BitAccess == VK_TRUE;
    info->fp16_arithmetic = has_float16 && float16.shaderFloat16 == VK_TRUE;
    info->fp64 = features.features.shaderFloat64 == VK_TRUE;
    if (has_amd_cores)
        info->compute_units = amd_cores.shaderEngineCount * amd_cores.shaderArraysPerEngineCount *
                              amd_cores.computeUnitsPerShaderArray;
    else if (has_nv_sms)
        info->compute_units = nv_sms.shaderSMCount;
    info->max_workgroup_size = limits->maxComputeWorkGroupInvocations;
    /* With subgroup size control and a range of sizes, the compiler may pick any of them. */
    bool variable = has_size_control && size_control_features.subgroupSizeControl &&
                    size_control.minSubgroupSize != size_control.maxSubgroupSize;
    info->subgroup_size = variable ? 0 : subgroup.subgroupSize;
    bool shuffles = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                    (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    record->shuffle_lanes = !shuffles ? 0
                            : variable ? size_control.minSubgroupSize
                                       : subgroup.subgroupSize;
    record->max_allocation = maintenance3.maxMemoryAllocationSize;
    info->max_buffer_bytes = record->max_allocation;
    if (info->memory_bytes && info->memory_bytes < info->max_buffer_bytes)
        info->max_buffer_bytes = info->memory_bytes;
    info->max_binding_bytes = limits->maxStorageBufferRange;

    memcpy(record->uuid, id.deviceUUID, VK_UUID_SIZE);
    static const uint8_t zero[VK_UUID_SIZE];
    record->has_uuid = memcmp(record->uuid, zero, VK_UUID_SIZE) != 0;
    record->enumeration_index = index;
    record->binding_alignment = limits->minStorageBufferOffsetAlignment;
    record->max_group_count = limits->maxComputeWorkGroupCount[0];
    return POSENC_OK;
}

static bool seen_before(const posenc__device_list *list, const posenc_vk_physical *record)
{
    if (!record->has_uuid)
        return false;
    for (uint32_t d = 0; d < list->count; d++) {
        const posenc_vk_physical *other = list->items[d].handle;
        if (other->has_uuid && memcmp(other->uuid, record->uuid, VK_UUID_SIZE) == 0)
            return true;
    }
    return false;
}

VkResult posenc_vk_physical_devices(const posenc_vk_instance *instance,
                                    VkPhysicalDevice **physicals, uint32_t *count)
{
    *physicals = NULL;
    *count = 0;
    VkResult result = instance->fns.EnumeratePhysicalDevices(instance->handle, count, NULL);
    if (result == VK_SUCCESS)
        *physicals = calloc(*count + 1, sizeof **physicals);
    if (*physicals && *count)
        result = instance->fns.EnumeratePhysicalDevices(instance->handle, count, *physicals);
    if (result == VK_INCOMPLETE) /* devices appeared since the count: those are enough */
        result = VK_SUCCESS;
    if (result != VK_SUCCESS) {
        free(*physicals);
        *physicals = NULL;
    }
    return result;
}

/* Every failure of the runtime while listing (its own VK_ERROR_OUT_OF_HOST_MEMORY included: the
 * loader returns it for a damaged driver manifest) makes the backend absent for the process,
 * with the call and its VkResult as the reason (core/gpu_devices.h). */
posenc_status posenc_vk_enumerate(posenc__device_list *list, const char **reason)
{
    if (!posenc__spirv_enabled() || !posenc__spirv_get(POSENC__SPIRV_ROPE_F32)) {
        *reason = "built without the SPIR-V kernels (no GLSL compiler at build time)";
        return POSENC_BACKEND_UNAVAILABLE;
    }
    posenc_vk_instance instance;
    VkResult runtime_result = VK_SUCCESS;
    posenc_status status = posenc_vk_instance_create(NULL, false, &instance, absent_reason,
                                                     sizeof absent_reason, &runtime_result);
    if (status != POSENC_OK) {
        *reason = absent_reason;
        return status == POSENC_OUT_OF_MEMORY && runtime_result == VK_SUCCESS
                   ? POSENC_OUT_OF_MEMORY
                   : POSENC_BACKEND_UNAVAILABLE;
    }

    uint32_t count = 0;
    VkPhysicalDevice *physicals = NULL;
    VkResult result = posenc_vk_physical_devices(&instance, &physicals, &count);
    if (result != VK_SUCCESS) {
        snprintf(absent_reason, sizeof absent_reason, "vkEnumeratePhysicalDevices failed: %s",
                 posenc_vk_result_name(result));
        posenc_vk_instance_destroy(&instance);
        *reason = absent_reason;
        return POSENC_BACKEND_UNAVAILABLE;
    }
    status = physicals ? POSENC_OK : POSENC_OUT_OF_MEMORY;

    /* A device whose description the runtime fails is left out, the others listed. */
    posenc__gpu_listing listing = {
        .api = "Vulkan",
        .lacks = "without Vulkan 1.1, a compute queue or 8 storage buffers a shader stage",
        .none = "no Vulkan driver or device (the loader found no physical device)",
    };
    for (uint32_t i = 0; i < count && status == POSENC_OK; i++) {
        /* Records live as long as the device list: for the rest of the process. */
        posenc__device device = {.handle = calloc(1, sizeof(posenc_vk_physical))};
        posenc__gpu_failure failure = {0};
        status = device.handle ? posenc_vk_describe(&instance, physicals[i], i, &device, &failure)
                               : POSENC_OUT_OF_MEMORY;
        if (status == POSENC_OK && seen_before(list, device.handle))
            free(device.handle);
        else
            status = posenc__gpu_listing_add(&listing, list, status, &failure, &device);
    }
    free(physicals);
    status = posenc__gpu_listing_end(&listing, list, status, absent_reason, sizeof absent_reason,
                                     reason);
    if (status == POSENC_OK)
        enumeration_instance = instance;
    else
        posenc_vk_instance_destroy(&instance);
    return status;
}

void posenc_vk_release_devices(posenc__device_list *list)
{
    posenc__gpu_devices_free(list);
    posenc_vk_instance_destroy(&enumeration_instance);
}
