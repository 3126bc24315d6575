/* SPDX-License-Identifier: MIT */
/* `posenc bench` warm-up on an OpenCL context and queue of the bench's own, as an engine has
 * them: the ICD loader opened at run time, one buffer wrapped, enqueues timed one at a time. */
#include "bench_engine.h"

#include "support.h"

#include <posenc/posenc_opencl.h>

#include <stdio.h>
#include <string.h>

#define CL_FUNCTIONS(X)                                                                         \
    X(GetPlatformIDs, cl_int, (cl_uint, cl_platform_id *, cl_uint *))                           \
    X(GetDeviceIDs, cl_int,                                                                     \
      (cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *))                     \
    X(GetDeviceInfo, cl_int, (cl_device_id, cl_device_info, size_t, void *, size_t *))         \
    X(CreateContext, cl_context,                                                                \
      (const cl_context_properties *, cl_uint, const cl_device_id *,                            \
       void(CL_CALLBACK *)(const char *, const void *, size_t, void *), void *, cl_int *))      \
    X(CreateCommandQueue, cl_command_queue,                                                     \
      (cl_context, cl_device_id, cl_command_queue_properties, cl_int *))                        \
    X(CreateBuffer, cl_mem, (cl_context, cl_mem_flags, size_t, void *, cl_int *))               \
    X(ReleaseMemObject, cl_int, (cl_mem))                                                       \
    X(ReleaseCommandQueue, cl_int, (cl_command_queue))                                          \
    X(ReleaseContext, cl_int, (cl_context))                                                     \
    X(WaitForEvents, cl_int, (cl_uint, const cl_event *))                                       \
    X(ReleaseEvent, cl_int, (cl_event))

typedef struct engine {
    void *library;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    cl_mem mem;
#define MEMBER_(name, result, params) result(CL_API_CALL *name) params;
    CL_FUNCTIONS(MEMBER_)
#undef MEMBER_
} engine;

static const char *const loader_names[] = {
#if defined(_WIN32)
    "OpenCL.dll",
#elif defined(__APPLE__)
    "/System/Library/Frameworks/OpenCL.framework/OpenCL", "libOpenCL.1.dylib", "libOpenCL.dylib",
#else
    "libOpenCL.so.1", "libOpenCL.so",
#endif
};

/* The device named like posenc's `info` (the first of that name), its context, queue and a
 * buffer for the tensors. */
static const char *open_engine(engine *e, const posenc_device_info *info)
{
    e->library = support_library_open_first(loader_names,
                                             sizeof loader_names / sizeof loader_names[0]);
    if (!e->library)
        return "the OpenCL loader did not open";
#define LOAD_(name, result, params)                                                             \
    do {                                                                                        \
        void *symbol = support_library_symbol(e->library, "cl" #name);                          \
        if (!symbol)                                                                            \
            return "cl" #name " is missing";                                                    \
        memcpy(&e->name, &symbol, sizeof symbol);                                               \
    } while (0);
    CL_FUNCTIONS(LOAD_)
#undef LOAD_
    cl_platform_id platforms[8];
    cl_uint platform_count = 0;
    if (e->GetPlatformIDs(8, platforms, &platform_count) != CL_SUCCESS)
        return "clGetPlatformIDs failed";
    for (cl_uint p = 0; p < platform_count && p < 8 && !e->device; p++) {
        cl_device_id devices[16];
        cl_uint count = 0;
        if (e->GetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &count) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < count && d < 16 && !e->device; d++) {
            char name[256] = "";
            e->GetDeviceInfo(devices[d], CL_DEVICE_NAME, sizeof name - 1, name, NULL);
            if (strcmp(name, info->name) == 0)
                e->device = devices[d];
        }
    }
    if (!e->device)
        return "the device is not among the loader's";
    cl_int err = CL_SUCCESS;
    e->context = e->CreateContext(NULL, 1, &e->device, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return "clCreateContext failed";
    e->queue = e->CreateCommandQueue(e->context, e->device, 0, &err);
    if (err != CL_SUCCESS)
        return "clCreateCommandQueue failed";
    e->mem = e->CreateBuffer(e->context, CL_MEM_READ_WRITE, BENCH_ENGINE_BYTES, NULL, &err);
    return err == CL_SUCCESS ? NULL : "clCreateBuffer failed";
}

static void close_engine(engine *e)
{
    if (e->mem)
        e->ReleaseMemObject(e->mem);
    if (e->queue)
        e->ReleaseCommandQueue(e->queue);
    if (e->context)
        e->ReleaseContext(e->context);
    /* The loader stays loaded, as the library leaves it: ICDs do not all survive unloading. */
}

/* The context on the engine's handles, prepare, and the enqueues, each waited for before the
 * next; NULL or the failure. */
static const char *time_enqueues(engine *e, const char *cache_dir, bench_engine_times *times,
                                 char *error, size_t error_size)
{
    posenc_context_desc desc = {
        .cache_dir = cache_dir,
        .opencl = posenc_opencl_external_of(e->context, e->device, e->queue),
    };
    posenc_context *context = NULL;
    double start = support_seconds_now();
    posenc_status status = posenc_context_create(&desc, &context);
    times->context_seconds = support_seconds_now() - start;
    posenc_buffer *buffer = NULL;
    const char *call = "posenc_context_create";
    if (status == POSENC_OK) {
        call = "posenc_cl_buffer_wrap";
        status = posenc_cl_buffer_wrap(context, e->mem, &buffer);
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
    for (int i = 0; i <= BENCH_ENGINE_LATER && status == POSENC_OK; i++) {
        call = "posenc_cl_enqueue_rope";
        cl_event done = NULL;
        start = support_seconds_now();
        status = posenc_cl_enqueue_rope(context, &rope, 0, NULL, &done);
        double seconds = support_seconds_now() - start;
        if (done) {
            e->WaitForEvents(1, &done);
            e->ReleaseEvent(done);
        }
        bench_engine_keep(times, later, i, seconds);
    }
    return bench_engine_finish(context, buffer, status, call, kernels, later, times, error,
                               error_size);
}

bool bench_engine_time_opencl(const posenc_device_info *info, const char *cache_dir,
                              bench_engine_times *times, char *error, size_t error_size)
{
    memset(times, 0, sizeof *times);
    times->call = "posenc_cl_enqueue_rope";
    engine e;
    memset(&e, 0, sizeof e);
    const char *failure = open_engine(&e, info);
    if (!failure)
        failure = time_enqueues(&e, cache_dir, times, error, error_size);
    if (failure && failure != error)
        snprintf(error, error_size, "%s", failure);
    close_engine(&e);
    return failure == NULL;
}
