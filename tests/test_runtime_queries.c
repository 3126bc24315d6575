/* SPDX-License-Identifier: MIT */
/* A device's description when the runtime's per-device queries fail: posenc_vk_describe and
 * posenc_cl_describe_device on function tables of fakes, each query failed in turn. An
 * out-of-memory answer is the runtime's error, returned with the call that gave it; read as
 * "no value" it would describe the device without what it has. Other failures of an OpenCL
 * query (a property the runtime does not know) stay "no value". */
#include "test_common.h"

#include <stdlib.h>
#include <string.h>

#define NAME "test_runtime_queries"

#if defined(POSENC_TEST_VULKAN)
#include "vulkan/vk_internal.h"

static struct {
    uint32_t calls;     /* vkEnumerateDeviceExtensionProperties calls so far */
    uint32_t fail_call; /* the call (1: the count, 2: the list) that returns `result`; 0: none */
    VkResult result;
} vk_fake;

static const char *const fake_extensions[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME,
                                              VK_KHR_16BIT_STORAGE_EXTENSION_NAME};

static VKAPI_ATTR void VKAPI_CALL fake_properties(VkPhysicalDevice physical,
                                                  VkPhysicalDeviceProperties *properties)
{
    (void)physical;
    memset(properties, 0, sizeof *properties);
    properties->apiVersion = VK_API_VERSION_1_1;
    properties->deviceType = VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
    strcpy(properties->deviceName, "fake device");
    properties->limits.maxPerStageDescriptorStorageBuffers = 16; /* the kernels bind 8 */
    properties->limits.maxDescriptorSetStorageBuffers = 96;
}

static VKAPI_ATTR void VKAPI_CALL fake_properties2(VkPhysicalDevice physical,
                                                   VkPhysicalDeviceProperties2 *properties)
{
    fake_properties(physical, &properties->properties);
}

static VKAPI_ATTR void VKAPI_CALL fake_features2(VkPhysicalDevice physical,
                                                 VkPhysicalDeviceFeatures2 *features)
{
    (void)physical;
    memset(&features->features, 0, sizeof features->features);
}

static VKAPI_ATTR void VKAPI_CALL fake_memory(VkPhysicalDevice physical,
                                              VkPhysicalDeviceMemoryProperties *memory)
{
    (void)physical;
    memset(memory, 0, sizeof *memory);
    memory->memoryHeapCount = 1;
    memory->memoryHeaps[0].size = UINT64_C(1) << 30;
    memory->memoryHeaps[0].flags = VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
}

static VKAPI_ATTR void VKAPI_CALL fake_queue_families(VkPhysicalDevice physical, uint32_t *count,
                                                      VkQueueFamilyProperties *families)
{
    (void)physical;
    if (families && *count >= 1)
        families[0] = (VkQueueFamilyProperties){.queueFlags = VK_QUEUE_COMPUTE_BIT,
                                                .queueCount = 1};
    *count = 1;
}

static VKAPI_ATTR VkResult VKAPI_CALL fake_extensions_of(VkPhysicalDevice physical,
                                                         const char *layer, uint32_t *count,
                                                         VkExtensionProperties *extensions)
{
    (void)physical;
    (void)layer;
    if (++vk_fake.calls == vk_fake.fail_call) {
        if (vk_fake.result != VK_INCOMPLETE)
            return vk_fake.result;
        *count = 1; /* as if an extension had appeared since the count */
    }
    uint32_t n = sizeof fake_extensions / sizeof fake_extensions[0];
    if (!extensions) {
        *count = n;
        return VK_SUCCESS;
    }
    uint32_t written = *count < n ? *count : n;
    for (uint32_t i = 0; i < written; i++) {
        memset(&extensions[i], 0, sizeof extensions[i]);
        strcpy(extensions[i].extensionName, fake_extensions[i]);
    }
    *count = written;
    return written < n ? VK_INCOMPLETE : VK_SUCCESS;
}

static void vulkan_case(uint32_t fail_call, VkResult result, posenc_status expected)
{
    vk_fake.calls = 0;
    vk_fake.fail_call = fail_call;
    vk_fake.result = result;
    posenc_vk_instance instance;
    memset(&instance, 0, sizeof instance);
    instance.api_version = VK_API_VERSION_1_1;
    instance.fns.GetPhysicalDeviceProperties = fake_properties;
    instance.fns.GetPhysicalDeviceProperties2 = fake_properties2;
    instance.fns.GetPhysicalDeviceFeatures2 = fake_features2;
    instance.fns.GetPhysicalDeviceMemoryProperties = fake_memory;
    instance.fns.GetPhysicalDeviceQueueFamilyProperties = fake_queue_families;
    instance.fns.EnumerateDeviceExtensionProperties = fake_extensions_of;
    static int physical_object;
    posenc_vk_physical record;
    memset(&record, 0, sizeof record);
    posenc__device device;
    memset(&device, 0, sizeof device);
    device.handle = &record;
    posenc__gpu_failure failure = {0};
    posenc_status status = posenc_vk_describe(&instance, (VkPhysicalDevice)(void *)&physical_object,
                                              0, &device, &failure);
    printf("%s: vulkan, call %u answers %s: %s\n", NAME, fail_call,
           posenc_vk_result_name(result), posenc_status_name(status));
    CHECK_STATUS(status, expected);
    if (expected != POSENC_OK) {
        CHECK(failure.call && strcmp(failure.call, "vkEnumerateDeviceExtensionProperties") == 0);
        CHECK(failure.code == result);
    } else {
        CHECK(failure.call == NULL);
        CHECK(strcmp(device.info.name, "fake device") == 0);
        /* VK_INCOMPLETE after the count: the extensions read before it. */
        CHECK(record.push_descriptor);
    }
}

static void vulkan_queries(void)
{
    vulkan_case(0, VK_SUCCESS, POSENC_OK);
    vulkan_case(1, VK_ERROR_OUT_OF_HOST_MEMORY, POSENC_OUT_OF_MEMORY);
    vulkan_case(2, VK_ERROR_OUT_OF_HOST_MEMORY, POSENC_OUT_OF_MEMORY);
    vulkan_case(1, VK_ERROR_OUT_OF_DEVICE_MEMORY, POSENC_OUT_OF_DEVICE_MEMORY);
    vulkan_case(2, VK_ERROR_OUT_OF_DEVICE_MEMORY, POSENC_OUT_OF_DEVICE_MEMORY);
    vulkan_case(2, VK_INCOMPLETE, POSENC_OK);
}
#endif

#if defined(POSENC_TEST_OPENCL)
#include "opencl/cl_internal.h"

static struct {
    uint32_t calls;     /* clGetDeviceInfo calls so far */
    uint32_t fail_call; /* the call that returns `error`; 0: none */
    cl_int error;
} cl_fake;

static cl_int answer(const void *data, size_t data_size, size_t size, void *value,
                     size_t *size_ret)
{
    if (size_ret)
        *size_ret = data_size;
    if (!value)
        return CL_SUCCESS;
    if (size < data_size)
        return CL_INVALID_VALUE;
    memcpy(value, data, data_size);
    return CL_SUCCESS;
}

static cl_int CL_API_CALL fake_device_info(cl_device_id device, cl_device_info param,
                                           size_t size, void *value, size_t *size_ret)
{
    (void)device;
    if (++cl_fake.calls == cl_fake.fail_call)
        return cl_fake.error;
    cl_bool yes = CL_TRUE, no = CL_FALSE;
    cl_uint align_bits = 1024, units = 8;
    cl_ulong bytes = UINT64_C(1) << 30;
    cl_device_type type = CL_DEVICE_TYPE_GPU;
    cl_device_fp_config fp64 = CL_FP_FMA;
    size_t group = 256, items[3] = {256, 256, 64};
#define STRING_(text) answer(text, sizeof text, size, value, size_ret)
    switch (param) {
    case CL_DEVICE_AVAILABLE:
    case CL_DEVICE_COMPILER_AVAILABLE: return answer(&yes, sizeof yes, size, value, size_ret);
    case CL_DEVICE_HOST_UNIFIED_MEMORY: return answer(&no, sizeof no, size, value, size_ret);
    case CL_DEVICE_VERSION: return STRING_("OpenCL 3.0 fake");
    case CL_DRIVER_VERSION: return STRING_("1.0");
    case CL_DEVICE_NAME: return STRING_("fake device");
    case CL_DEVICE_VENDOR: return STRING_("fake vendor");
    case CL_DEVICE_EXTENSIONS: return STRING_("cl_khr_fp16 cl_khr_fp64");
    case CL_DEVICE_TYPE: return answer(&type, sizeof type, size, value, size_ret);
    case CL_DEVICE_GLOBAL_MEM_SIZE:
    case CL_DEVICE_MAX_MEM_ALLOC_SIZE: return answer(&bytes, sizeof bytes, size, value, size_ret);
    case CL_DEVICE_MEM_BASE_ADDR_ALIGN:
        return answer(&align_bits, sizeof align_bits, size, value, size_ret);
    case CL_DEVICE_MAX_COMPUTE_UNITS: return answer(&units, sizeof units, size, value, size_ret);
    case CL_DEVICE_DOUBLE_FP_CONFIG: return answer(&fp64, sizeof fp64, size, value, size_ret);
    case CL_DEVICE_MAX_WORK_GROUP_SIZE:
        return answer(&group, sizeof group, size, value, size_ret);
    case CL_DEVICE_MAX_WORK_ITEM_SIZES:
        return answer(items, sizeof items, size, value, size_ret);
    default: return CL_INVALID_VALUE;
    }
#undef STRING_
}

/* The platform's name is only a name: its query is not among those failed in turn. */
static cl_int CL_API_CALL fake_platform_info(cl_platform_id platform, cl_platform_info param,
                                             size_t size, void *value, size_t *size_ret)
{
    (void)platform;
    (void)param;
    return answer("fake platform", sizeof "fake platform", size, value, size_ret);
}

static posenc_status describe(uint32_t fail_call, cl_int error, posenc__device *out,
                              posenc__gpu_failure *failure)
{
    cl_fake.calls = 0;
    cl_fake.fail_call = fail_call;
    cl_fake.error = error;
    posenc_cl_api api;
    memset(&api, 0, sizeof api);
    api.GetDeviceInfo = fake_device_info;
    api.GetPlatformInfo = fake_platform_info;
    static int device_object;
    memset(failure, 0, sizeof *failure);
    return posenc_cl_describe_device(&api, NULL, (cl_device_id)(void *)&device_object, out,
                                     failure);
}

static void opencl_queries(void)
{
    posenc__device device;
    posenc__gpu_failure failure;
    CHECK_STATUS(describe(0, CL_SUCCESS, &device, &failure), POSENC_OK);
    uint32_t queries = cl_fake.calls;
    CHECK(device.info.fp16_arithmetic && device.info.fp64);
    CHECK(strcmp(device.info.name, "fake device") == 0);
    CHECK(strstr(device.info.driver, "fake platform") != NULL);
    free(device.handle);
    printf("%s: opencl, %u queries, each failed in turn\n", NAME, queries);
    CHECK(queries >= 10);

    static const cl_int short_errors[2] = {CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES};
    for (uint32_t call = 1; call <= queries; call++) {
        for (int e = 0; e < 2; e++) {
            posenc_status status = describe(call, short_errors[e], &device, &failure);
            if (!failure.call) {
                test_failures++;
                fprintf(stderr, "%s: query %u answering %s gave %s, not the failed query\n",
                        NAME, call, posenc_cl_error_name(short_errors[e]),
                        posenc_status_name(status));
                free(device.handle);
                continue;
            }
            CHECK(device.handle == NULL);
            CHECK(failure.code == short_errors[e]);
            CHECK(strncmp(failure.call, "clGetDeviceInfo (CL_", 20) == 0);
            CHECK(strcmp(failure.error, posenc_cl_error_name(short_errors[e])) == 0);
            CHECK_STATUS(status, e == 0 ? POSENC_OUT_OF_MEMORY : POSENC_OUT_OF_DEVICE_MEMORY);
        }
        /* A property the runtime does not know is no value: the device is still described
         * (or, without the first three answers, skipped as unusable). */
        posenc_status status = describe(call, CL_INVALID_VALUE, &device, &failure);
        CHECK_STATUS(status, call <= 3 ? POSENC_UNSUPPORTED : POSENC_OK);
        CHECK(failure.call == NULL);
        free(device.handle);
    }
}
#endif

int main(void)
{
#if defined(POSENC_TEST_VULKAN)
    vulkan_queries();
#endif
#if defined(POSENC_TEST_OPENCL)
    opencl_queries();
#endif
    return test_finish(NAME);
}
