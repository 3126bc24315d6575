/* SPDX-License-Identifier: MIT */
/* Enumerating OpenCL platforms and devices into posenc device descriptions: type, memory,
 * unified memory, work-group and allocation limits, and extensions found by querying the
 * device's extension list. */
#include "opencl/cl_internal.h"

#include "core/platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kernels index elements with 32-bit words, so one binding reaches 2^32 elements: 8 GiB of the
 * narrowest (16-bit) elements. */
#define MAX_BINDING_BYTES (UINT64_C(1) << 33)

/* One clGetDeviceInfo query: a property read into `out`. */
typedef struct device_query {
    cl_device_info param;
    const char *call; /* as messages name it: "clGetDeviceInfo (CL_DEVICE_NAME)" */
    void *out;
    size_t size;
    bool text; /* a string, always terminated; else a value of exactly `size` bytes */
} device_query;
#define VALUE_(param, value)                                                                      \
    {(param), "clGetDeviceInfo (" #param ")", &(value), sizeof(value), false}
#define TEXT_(param, text) {(param), "clGetDeviceInfo (" #param ")", (text), sizeof(text), true}

static bool runtime_short(cl_int err)
{
    return err == CL_OUT_OF_HOST_MEMORY || err == CL_OUT_OF_RESOURCES;
}

/* clGetDeviceInfo. A query the runtime fails for want of memory (CL_OUT_OF_HOST_MEMORY,
 * CL_OUT_OF_RESOURCES) is its error, described in `*failure`: read as "no value" it would
 * describe the device as lacking what it has. */
static cl_int query(const posenc_cl_api *cl, cl_device_id id, const device_query *q,
                    size_t *returned, posenc__gpu_failure *failure)
{
    cl_int err = cl->GetDeviceInfo(id, q->param, q->size, q->out, returned);
    if (runtime_short(err))
        *failure = (posenc__gpu_failure){q->call, posenc_cl_error_name(err), err};
    return err;
}

/* Runs `count` queries, up to the first out-of-memory error, which it returns. Other failures
 * (a property an older runtime does not know) are read as no value: zero, or "". */
static cl_int query_all(const posenc_cl_api *cl, cl_device_id id, const device_query *queries,
                        size_t count, posenc__gpu_failure *failure)
{
    for (size_t i = 0; i < count; i++) {
        device_query q = queries[i];
        memset(q.out, 0, q.size);
        q.size -= q.text; /* the last byte stays the terminator */
        size_t returned = 0;
        cl_int err = query(cl, id, &q, &returned, failure);
        if (runtime_short(err))
            return err;
        if (err != CL_SUCCESS || (!q.text && returned != q.size))
            memset(q.out, 0, queries[i].size);
    }
    return CL_SUCCESS;
}

/* The device's extension list in `*list` (malloc'ed; "" when the runtime gives none). An
 * out-of-memory error is the runtime's (in `*failure`) or posenc's own (CL_OUT_OF_HOST_MEMORY
 * with no failure: its status, OUT_OF_MEMORY, with no call named, is posenc's shortage). */
static cl_int query_extensions(const posenc_cl_api *cl, cl_device_id id, char **list,
                               posenc__gpu_failure *failure)
{
    device_query q = {CL_DEVICE_EXTENSIONS, "clGetDeviceInfo (CL_DEVICE_EXTENSIONS)", NULL, 0,
                      true};
    size_t length = 0;
    cl_int err = query(cl, id, &q, &length, failure);
    if (runtime_short(err))
        return err;
    q.size = (err == CL_SUCCESS ? length : 0) + 1;
    q.out = *list = calloc(q.size, 1);
    if (!*list)
        return CL_OUT_OF_HOST_MEMORY;
    err = q.size > 1 ? query_all(cl, id, &q, 1, failure) : CL_SUCCESS;
    if (err == CL_SUCCESS)
        return CL_SUCCESS;
    free(*list);
    *list = NULL;
    return err;
}

/* Leading and trailing blanks removed in place (some drivers pad their names). */
static void trim(char *text)
{
    size_t start = 0, length = strlen(text);
    while (text[start] == ' ' || text[start] == '\t')
        start++;
    while (length > start && (text[length - 1] == ' ' || text[length - 1] == '\t' ||
                              text[length - 1] == '\n'))
        length--;
    memmove(text, text + start, length - start);
    text[length - start] = '\0';
}

/* Whether the space-separated extension list names `extension` exactly. */
static bool has_extension(const char *list, const char *extension)
{
    size_t length = strlen(extension);
    for (const char *p = list; (p = strstr(p, extension)) != NULL; p += length) {
        bool starts = p == list || p[-1] == ' ';
        bool ends = p[length] == '\0' || p[length] == ' ';
        if (starts && ends)
            return true;
    }
    return false;
}

/* "OpenCL 1.2 ..." -> 102; 0 when unparsable. */
static int parse_version(const char *text)
{
    int major = 0, minor = 0;
    if (sscanf(text, "OpenCL %d.%d", &major, &minor) != 2)
        return 0;
    return major * 100 + minor;
}

static posenc_device_type device_type(cl_device_type type, cl_bool unified)
{
    if (type & CL_DEVICE_TYPE_GPU)
        return unified ? POSENC_DEVICE_INTEGRATED_GPU : POSENC_DEVICE_DISCRETE_GPU;
    /* A CPU through a runtime (PoCL, Intel's CPU runtime): a CPU, but not posenc's own path, so
     * AUTO leaves it alone unless asked for. */
    if (type & CL_DEVICE_TYPE_CPU)
        return POSENC_DEVICE_CPU;
    return POSENC_DEVICE_OTHER;
}

posenc_status posenc_cl_describe_device(const posenc_cl_api *cl, cl_platform_id platform,
                                        cl_device_id id, posenc__device *out,
                                        posenc__gpu_failure *failure)
{
    memset(out, 0, sizeof *out);
    cl_bool available, compiler, unified;
    char version[128];
    /* Whether the device is usable, asked first: an unusable one is asked nothing more. */
    const device_query usable[] = {
        VALUE_(CL_DEVICE_AVAILABLE, available),
        VALUE_(CL_DEVICE_COMPILER_AVAILABLE, compiler),
        TEXT_(CL_DEVICE_VERSION, version),
    };
    cl_int err = query_all(cl, id, usable, sizeof usable / sizeof usable[0], failure);
    if (err != CL_SUCCESS)
        return posenc_cl_status(err);
    if (!available || !compiler || parse_version(version) < 102)
        return POSENC_UNSUPPORTED;
    posenc_cl_device *device = calloc(1, sizeof *device);
    if (!device)
        return POSENC_OUT_OF_MEMORY;

    posenc_device_info *info = &out->info;
    cl_device_type type;
    cl_uint base_align_bits, compute_units;
    cl_ulong memory, max_alloc;
    cl_device_fp_config fp64;
    size_t work_group, item_sizes[3];
    const device_query properties[] = {
        TEXT_(CL_DRIVER_VERSION, device->driver_version),
        VALUE_(CL_DEVICE_TYPE, type),
        VALUE_(CL_DEVICE_HOST_UNIFIED_MEMORY, unified),
        VALUE_(CL_DEVICE_GLOBAL_MEM_SIZE, memory),
        VALUE_(CL_DEVICE_MEM_BASE_ADDR_ALIGN, base_align_bits),
        VALUE_(CL_DEVICE_MAX_MEM_ALLOC_SIZE, max_alloc),
        VALUE_(CL_DEVICE_MAX_COMPUTE_UNITS, compute_units),
        VALUE_(CL_DEVICE_DOUBLE_FP_CONFIG, fp64),
        VALUE_(CL_DEVICE_MAX_WORK_GROUP_SIZE, work_group),
        /* The first dimension's limit; a device of more than 3 dimensions fails this query,
         * and the work-group limit stands in. */
        VALUE_(CL_DEVICE_MAX_WORK_ITEM_SIZES, item_sizes),
        TEXT_(CL_DEVICE_NAME, info->name),
        TEXT_(CL_DEVICE_VENDOR, info->vendor),
    };
    err = query_all(cl, id, properties, sizeof properties / sizeof properties[0], failure);
    char *extensions = NULL;
    if (err == CL_SUCCESS)
        err = query_extensions(cl, id, &extensions, failure);
    if (err != CL_SUCCESS) {
        free(device);
        return posenc_cl_status(err);
    }
    device->platform = platform;
    device->device = id;
    if (cl->GetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof device->platform_name - 1,
                            device->platform_name, NULL) != CL_SUCCESS)
        device->platform_name[0] = '\0';
    trim(device->platform_name);
    trim(device->driver_version);
    trim(info->name);
    trim(info->vendor);
    if (!info->name[0])
        posenc__copy_string(info->name, sizeof info->name, "OpenCL device");
    posenc__copy_string(device->device_version, sizeof device->device_version, version);
    work_group = work_group ? work_group : 1;
    device->max_local_size = item_sizes[0] && item_sizes[0] < work_group ? item_sizes[0]
                                                                          : work_group;
    device->base_alignment = base_align_bits / 8 ? base_align_bits / 8 : 128;

    int v = parse_version(version);
    char driver[sizeof device->driver_version + sizeof device->platform_name + 64];
    snprintf(driver, sizeof driver, "%s (%s, OpenCL %d.%d)",
             device->driver_version[0] ? device->driver_version : "unknown version",
             device->platform_name[0] ? device->platform_name : "unknown platform", v / 100,
             v % 100);
    posenc__copy_string(info->driver, sizeof info->driver, driver);
    info->type = device_type(type, unified);
    info->memory_bytes = memory;
    info->unified_memory = unified != CL_FALSE;
    /* CL_MEM_USE_HOST_PTR is in place only where the device shares host memory; elsewhere the
     * driver copies the whole range, as staging does, but outside posenc's control. */
    info->host_memory_import =
        posenc__gpu_host_importable(info->unified_memory, device->base_alignment);
    info->fp16_storage = true; /* vload_half / vstore_half are core OpenCL */
    info->fp16_arithmetic = has_extension(extensions, "cl_khr_fp16");
    info->bf16 = has_extension(extensions, "cl_intel_bfloat16_conversions");
    info->fp64 = fp64 != 0 || has_extension(extensions, "cl_khr_fp64");
    info->compute_units = compute_units ? compute_units : 1;
    info->max_workgroup_size = work_group > UINT32_MAX ? UINT32_MAX : (uint32_t)work_group;
    info->max_buffer_bytes = max_alloc ? max_alloc : 1;
    info->max_binding_bytes = info->max_buffer_bytes < MAX_BINDING_BYTES
                                  ? info->max_buffer_bytes
                                  : MAX_BINDING_BYTES;
    free(extensions);
    out->handle = device;
    return POSENC_OK;
}

/* Every failure of the runtime while listing (its own CL_OUT_OF_HOST_MEMORY included) is the
 * runtime's: a platform or device it fails to list is left out, and with nothing listed the
 * backend is absent for the process, the call and its error as the reason (core/gpu_devices.h). */
static posenc_status enumerate_devices(const posenc_cl_api *cl, posenc__device_list *list,
                                       const char **reason)
{
    static char why[192];
    cl_uint platform_count = 0;
    cl_int err = cl->GetPlatformIDs(0, NULL, &platform_count);
    cl_platform_id *platforms = NULL;
    if (err == CL_SUCCESS && platform_count) {
        platforms = calloc(platform_count, sizeof *platforms);
        if (!platforms) {
            *reason = "out of host memory";
            return POSENC_OUT_OF_MEMORY;
        }
        err = cl->GetPlatformIDs(platform_count, platforms, &platform_count);
    }
    if (err != CL_SUCCESS || platform_count == 0) {
        free(platforms);
        if (err == CL_SUCCESS || err == CL_PLATFORM_NOT_FOUND_KHR)
            snprintf(why, sizeof why, "no OpenCL platform is installed (clGetPlatformIDs: %s)",
                     err == CL_SUCCESS ? "none" : posenc_cl_error_name(err));
        else
            snprintf(why, sizeof why, "clGetPlatformIDs failed: %s", posenc_cl_error_name(err));
        *reason = why;
        return POSENC_BACKEND_UNAVAILABLE;
    }

    posenc__gpu_listing listing = {
        .api = "OpenCL",
        .lacks = "lack OpenCL 1.2, a compiler or availability",
        .none = "no OpenCL device",
    };
    posenc_status status = POSENC_OK;
    for (cl_uint p = 0; p < platform_count && status == POSENC_OK; p++) {
        cl_uint device_count = 0;
        err = cl->GetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, NULL, &device_count);
        cl_device_id *ids = NULL;
        if (err == CL_SUCCESS && device_count) {
            ids = calloc(device_count, sizeof *ids);
            if (!ids) {
                status = POSENC_OUT_OF_MEMORY;
                break;
            }
            err = cl->GetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, device_count, ids,
                                   &device_count);
        }
        /* CL_DEVICE_NOT_FOUND: a platform without devices, not a failure. */
        if (err != CL_SUCCESS && err != CL_DEVICE_NOT_FOUND && listing.failed++ == 0)
            snprintf(listing.failure, sizeof listing.failure, "clGetDeviceIDs failed: %s",
                     posenc_cl_error_name(err));
        if (err != CL_SUCCESS)
            device_count = 0;
        for (cl_uint d = 0; d < device_count && status == POSENC_OK; d++) {
            posenc__device device;
            posenc__gpu_failure failure = {0};
            status = posenc_cl_describe_device(cl, platforms[p], ids[d], &device, &failure);
            status = posenc__gpu_listing_add(&listing, list, status, &failure, &device);
        }
        free(ids);
    }
    free(platforms);
    return posenc__gpu_listing_end(&listing, list, status, why, sizeof why, reason);
}

posenc_status posenc_cl_enumerate(posenc__device_list *list, const char **reason)
{
    const posenc_cl_api *cl = posenc_cl_load(reason);
    if (!cl)
        return POSENC_BACKEND_UNAVAILABLE;
    /* Platform initialisation may start a driver's compiler (PoCL's LLVM). */
    posenc__signal_stack stack;
    posenc__signal_stack_save(&stack);
    posenc_status status = enumerate_devices(cl, list, reason);
    posenc__signal_stack_restore(&stack);
    return status;
}
