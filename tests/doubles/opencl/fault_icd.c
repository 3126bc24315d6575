/* SPDX-License-Identifier: MIT */
/* The tests' OpenCL ICD (fault_icd.h): the real ICD's platform behind a dispatch table of the
 * double's own, in which the entry points posenc and the tests use count their calls and can
 * fail. Every cl_khr_icd object starts with its dispatch table pointer, and the loader calls
 * through it: the double copies the real table, replaces the wrapped entries, and points each
 * object the real ICD hands out through a wrapper (platform, devices, contexts, queues,
 * buffers, programs, kernels, events) at its own table, so that every later call on it comes
 * back through the double. Linux: it stands in for a driver that ocl-icd loads, so it uses
 * the system's calls (dlopen, pthreads, getenv) as a driver does, and links nothing of posenc. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include "fault_icd.h"

#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <CL/cl_icd.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* The wrapped entry points: X(name, device), `device` 1 for those that report a failure of the
 * device (they fail on a lost context). */
#define WRAPPED_(X)                                                                              \
    X(clGetPlatformInfo, 0)                                                                      \
    X(clGetDeviceIDs, 0)                                                                         \
    X(clGetDeviceInfo, 0)                                                                        \
    X(clCreateContext, 1)                                                                        \
    X(clCreateContextFromType, 1)                                                                \
    X(clRetainContext, 0)                                                                        \
    X(clReleaseContext, 0)                                                                       \
    X(clGetContextInfo, 0)                                                                       \
    X(clCreateCommandQueue, 1)                                                                   \
    X(clCreateCommandQueueWithProperties, 1)                                                     \
    X(clRetainCommandQueue, 0)                                                                   \
    X(clReleaseCommandQueue, 0)                                                                  \
    X(clGetCommandQueueInfo, 0)                                                                  \
    X(clCreateBuffer, 1)                                                                         \
    X(clCreateSubBuffer, 1)                                                                      \
    X(clRetainMemObject, 0)                                                                      \
    X(clReleaseMemObject, 0)                                                                     \
    X(clGetMemObjectInfo, 0)                                                                     \
    X(clCreateProgramWithSource, 1)                                                              \
    X(clCreateProgramWithBinary, 1)                                                              \
    X(clBuildProgram, 1)                                                                         \
    X(clRetainProgram, 0)                                                                        \
    X(clReleaseProgram, 0)                                                                       \
    X(clGetProgramInfo, 0)                                                                       \
    X(clGetProgramBuildInfo, 0)                                                                  \
    X(clCreateKernel, 1)                                                                         \
    X(clRetainKernel, 0)                                                                         \
    X(clReleaseKernel, 0)                                                                        \
    X(clSetKernelArg, 0)                                                                         \
    X(clGetKernelInfo, 0)                                                                        \
    X(clGetKernelWorkGroupInfo, 0)                                                               \
    X(clWaitForEvents, 1)                                                                        \
    X(clGetEventInfo, 0)                                                                         \
    X(clCreateUserEvent, 0)                                                                      \
    X(clSetUserEventStatus, 0)                                                                   \
    X(clRetainEvent, 0)                                                                          \
    X(clReleaseEvent, 0)                                                                         \
    X(clFlush, 1)                                                                                \
    X(clFinish, 1)                                                                               \
    X(clEnqueueReadBuffer, 1)                                                                    \
    X(clEnqueueWriteBuffer, 1)                                                                   \
    X(clEnqueueCopyBuffer, 1)                                                                    \
    X(clEnqueueFillBuffer, 1)                                                                    \
    X(clEnqueueMapBuffer, 1)                                                                     \
    X(clEnqueueUnmapMemObject, 1)                                                                \
    X(clEnqueueNDRangeKernel, 1)                                                                 \
    X(clEnqueueMarkerWithWaitList, 1)                                                            \
    X(clEnqueueBarrierWithWaitList, 1)

enum {
#define ID_(name, device) ID_##name,
    WRAPPED_(ID_)
#undef ID_
    CALL_COUNT,
    CALL_ANY = CALL_COUNT, /* "*" */
    CALL_NONE,
};

static const char *const call_names[CALL_COUNT] = {
#define NAME_(name, device) #name,
    WRAPPED_(NAME_)
#undef NAME_
};

static const unsigned char reports_device[CALL_COUNT] = {
#define DEVICE_(name, device) device,
    WRAPPED_(DEVICE_)
#undef DEVICE_
};

/* The codes the environment may name. */
#define CODES_(X)                                                                                \
    X(CL_DEVICE_NOT_FOUND)                                                                       \
    X(CL_DEVICE_NOT_AVAILABLE)                                                                   \
    X(CL_COMPILER_NOT_AVAILABLE)                                                                 \
    X(CL_MEM_OBJECT_ALLOCATION_FAILURE)                                                          \
    X(CL_OUT_OF_RESOURCES)                                                                       \
    X(CL_OUT_OF_HOST_MEMORY)                                                                     \
    X(CL_MAP_FAILURE)                                                                            \
    X(CL_BUILD_PROGRAM_FAILURE)                                                                  \
    X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)                                              \
    X(CL_INVALID_VALUE)                                                                          \
    X(CL_INVALID_DEVICE)                                                                         \
    X(CL_INVALID_CONTEXT)                                                                        \
    X(CL_INVALID_COMMAND_QUEUE)                                                                  \
    X(CL_INVALID_MEM_OBJECT)                                                                     \
    X(CL_INVALID_BINARY)                                                                         \
    X(CL_INVALID_PROGRAM)                                                                        \
    X(CL_INVALID_PROGRAM_EXECUTABLE)                                                             \
    X(CL_INVALID_KERNEL)                                                                         \
    X(CL_INVALID_ARG_VALUE)                                                                      \
    X(CL_INVALID_WORK_GROUP_SIZE)                                                                \
    X(CL_INVALID_EVENT_WAIT_LIST)                                                                \
    X(CL_INVALID_EVENT)                                                                          \
    X(CL_INVALID_OPERATION)

enum { MAX_LOST = 32 };

static struct {
    pthread_mutex_t lock;
    int call;      /* the armed entry point (an ID_), CALL_ANY or CALL_NONE */
    uint32_t nth;  /* the armed call; 0: none */
    cl_int error;
    int as_status; /* the error is the commands' execution status */
    uint32_t counts[CALL_COUNT]; /* calls since the arm */
    uint32_t all;
    int fired;
    int fired_id;  /* the entry point the fault fired in */
    struct {
        cl_context context; /* NULL: a free entry */
        cl_int code;
    } lost[MAX_LOST];
} faults = {.lock = PTHREAD_MUTEX_INITIALIZER, .call = CALL_NONE};

/* The real ICD's table, and the double's: written once, before any object exists. */
static cl_icd_dispatch real;
static cl_icd_dispatch table;
static clIcdGetPlatformIDsKHR_fn real_platforms;
static int loaded;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* ---- Objects --------------------------------------------------------------------------------- */

/* Points `object` (any cl_khr_icd object, or NULL) at the double's table; returns it. */
static void *adopt(void *object)
{
    if (object) {
        cl_icd_dispatch *own = &table;
        memcpy(object, &own, sizeof own);
    }
    return object;
}

/* A created object refused: its errcode_ret, and no object. */
static void *refuse(cl_int *errcode_ret, cl_int error)
{
    if (errcode_ret)
        *errcode_ret = error;
    return NULL;
}

/* The context of an object, asked of the real ICD (uncounted); NULL when it cannot tell. */
static cl_context context_of_queue(cl_command_queue queue)
{
    cl_context context = NULL;
    if (queue && real.clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof context, &context,
                                            NULL) != CL_SUCCESS)
        context = NULL;
    return context;
}

static cl_context context_of_mem(cl_mem mem)
{
    cl_context context = NULL;
    if (mem &&
        real.clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof context, &context, NULL) != CL_SUCCESS)
        context = NULL;
    return context;
}

static cl_context context_of_program(cl_program program)
{
    cl_context context = NULL;
    if (program && real.clGetProgramInfo(program, CL_PROGRAM_CONTEXT, sizeof context, &context,
                                         NULL) != CL_SUCCESS)
        context = NULL;
    return context;
}

static cl_context context_of_event(cl_event event)
{
    cl_context context = NULL;
    if (event &&
        real.clGetEventInfo(event, CL_EVENT_CONTEXT, sizeof context, &context, NULL) != CL_SUCCESS)
        context = NULL;
    return context;
}

/* Waits for the real commands of `events` (not for user events: only their setter ends them),
 * so that a command reported failed no longer runs. */
static void drain(cl_uint count, const cl_event *events)
{
    for (cl_uint i = 0; events && i < count; i++) {
        cl_command_type type = 0;
        if (events[i] &&
            real.clGetEventInfo(events[i], CL_EVENT_COMMAND_TYPE, sizeof type, &type, NULL) ==
                CL_SUCCESS &&
            type != CL_COMMAND_USER)
            real.clWaitForEvents(1, &events[i]);
    }
}

/* ---- Faults ---------------------------------------------------------------------------------- */

/* The code a lost `context` reports; CL_SUCCESS when it is not lost. With faults.lock held. */
static cl_int lost_code(cl_context context)
{
    for (int i = 0; context && i < MAX_LOST; i++) {
        if (faults.lost[i].context == context)
            return faults.lost[i].code;
    }
    return CL_SUCCESS;
}

/* The real ICD destroys a lost context: its address may come back for a new one. */
static void CL_CALLBACK forget(cl_context context, void *user_data)
{
    (void)user_data;
    pthread_mutex_lock(&faults.lock);
    for (int i = 0; i < MAX_LOST; i++) {
        if (faults.lost[i].context == context)
            faults.lost[i].context = NULL;
    }
    pthread_mutex_unlock(&faults.lock);
}

/* Marks `context` lost with `code`. With faults.lock held. */
static void lose(cl_context context, cl_int code)
{
    if (!context || lost_code(context) != CL_SUCCESS)
        return;
    for (int i = 0; i < MAX_LOST; i++) {
        if (!faults.lost[i].context) {
            faults.lost[i].context = context;
            faults.lost[i].code = code;
            /* Called back from inside a release, never while the lock is held. */
            if (real.clSetContextDestructorCallback)
                real.clSetContextDestructorCallback(context, forget, NULL);
            return;
        }
    }
    fprintf(stderr, "posenc OpenCL fault ICD: more than %d lost contexts at once\n", MAX_LOST);
}

/* Counts a call of `id` made on `context` (NULL: none) and says what it reports instead of
 * going on: CL_SUCCESS (nothing), the armed fault when this call is due, or the loss of its
 * context. `reports_status`: the call reports commands' execution statuses (a wait, a finish,
 * a status query); only such calls take a status fault, and they report a lost context's
 * commands as failed. `*status` says whether the code is an execution status. */
static cl_int verdict(int id, cl_context context, int reports_status, int *status)
{
    cl_int result = CL_SUCCESS;
    *status = 0;
    pthread_mutex_lock(&faults.lock);
    faults.counts[id]++;
    faults.all++;
    /* "*" leaves retains and releases alone: no driver fails them, and a release refused would
     * only leak what the fault kept. */
    int any = faults.call == CALL_ANY && strncmp(call_names[id], "clRetain", 8) != 0 &&
               strncmp(call_names[id], "clRelease", 9) != 0;
    if (faults.nth && !faults.fired && (faults.call == id || any) &&
        (reports_status || !faults.as_status)) {
        uint32_t seen = faults.call == CALL_ANY ? faults.all : faults.counts[id];
        if (seen >= faults.nth) {
            faults.fired = 1;
            faults.fired_id = id;
            result = faults.error;
            *status = faults.as_status;
            if (faults.as_status || faults.error == CL_DEVICE_NOT_AVAILABLE)
                lose(context, faults.error);
        }
    }
    if (result == CL_SUCCESS && (reports_device[id] || reports_status)) {
        result = lost_code(context);
        *status = result != CL_SUCCESS;
    }
    pthread_mutex_unlock(&faults.lock);
    return result;
}

/* verdict() for calls that report no execution status. */
static cl_int check(int id, cl_context context)
{
    int status = 0;
    return verdict(id, context, 0, &status);
}

/* ---- The wrapped entry points ---------------------------------------------------------------- */

#define CHECK_(name, context)                                                                    \
    do {                                                                                         \
        cl_int injected_ = check(ID_##name, context);                                            \
        if (injected_ != CL_SUCCESS)                                                             \
            return injected_;                                                                    \
    } while (0)

#define CHECK_CREATE_(name, context, errcode_ret)                                                \
    do {                                                                                         \
        cl_int injected_ = check(ID_##name, context);                                            \
        if (injected_ != CL_SUCCESS)                                                             \
            return refuse(errcode_ret, injected_);                                               \
    } while (0)

/* An enqueue: checked on its queue's context; its event comes back adopted. */
#define ENQUEUE_(name, queue, event, call)                                                       \
    do {                                                                                         \
        CHECK_(name, context_of_queue(queue));                                                   \
        cl_int result_ = call;                                                                   \
        if (result_ == CL_SUCCESS && event)                                                      \
            adopt(*(event));                                                                     \
        return result_;                                                                          \
    } while (0)

static cl_int CL_API_CALL wrap_clGetPlatformInfo(cl_platform_id platform,
                                                 cl_platform_info name, size_t size,
                                                 void *value, size_t *size_ret)
{
    CHECK_(clGetPlatformInfo, NULL);
    return real.clGetPlatformInfo(platform, name, size, value, size_ret);
}

static cl_int CL_API_CALL wrap_clGetDeviceIDs(cl_platform_id platform, cl_device_type type,
                                              cl_uint num_entries, cl_device_id *devices,
                                              cl_uint *num_devices)
{
    CHECK_(clGetDeviceIDs, NULL);
    cl_uint count = 0;
    cl_int result = real.clGetDeviceIDs(platform, type, num_entries, devices, &count);
    if (num_devices)
        *num_devices = count;
    for (cl_uint i = 0; result == CL_SUCCESS && devices && i < count && i < num_entries; i++)
        adopt(devices[i]);
    return result;
}

static cl_int CL_API_CALL wrap_clGetDeviceInfo(cl_device_id device, cl_device_info name,
                                               size_t size, void *value, size_t *size_ret)
{
    CHECK_(clGetDeviceInfo, NULL);
    return real.clGetDeviceInfo(device, name, size, value, size_ret);
}

static cl_context CL_API_CALL wrap_clCreateContext(
    const cl_context_properties *properties, cl_uint num_devices, const cl_device_id *devices,
    void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *), void *user_data,
    cl_int *errcode_ret)
{
    CHECK_CREATE_(clCreateContext, NULL, errcode_ret);
    return adopt(
        real.clCreateContext(properties, num_devices, devices, notify, user_data, errcode_ret));
}

static cl_context CL_API_CALL wrap_clCreateContextFromType(
    const cl_context_properties *properties, cl_device_type type,
    void(CL_CALLBACK *notify)(const char *, const void *, size_t, void *), void *user_data,
    cl_int *errcode_ret)
{
    CHECK_CREATE_(clCreateContextFromType, NULL, errcode_ret);
    return adopt(real.clCreateContextFromType(properties, type, notify, user_data, errcode_ret));
}

static cl_int CL_API_CALL wrap_clRetainContext(cl_context context)
{
    CHECK_(clRetainContext, NULL);
    return real.clRetainContext(context);
}

static cl_int CL_API_CALL wrap_clReleaseContext(cl_context context)
{
    CHECK_(clReleaseContext, NULL);
    return real.clReleaseContext(context);
}

static cl_int CL_API_CALL wrap_clGetContextInfo(cl_context context, cl_context_info name,
                                                size_t size, void *value, size_t *size_ret)
{
    CHECK_(clGetContextInfo, NULL);
    return real.clGetContextInfo(context, name, size, value, size_ret);
}

static cl_command_queue CL_API_CALL wrap_clCreateCommandQueue(
    cl_context context, cl_device_id device, cl_command_queue_properties properties,
    cl_int *errcode_ret)
{
    CHECK_CREATE_(clCreateCommandQueue, context, errcode_ret);
    return adopt(real.clCreateCommandQueue(context, device, properties, errcode_ret));
}

static cl_command_queue CL_API_CALL wrap_clCreateCommandQueueWithProperties(
    cl_context context, cl_device_id device, const cl_queue_properties *properties,
    cl_int *errcode_ret)
{
    CHECK_CREATE_(clCreateCommandQueueWithProperties, context, errcode_ret);
    return adopt(real.clCreateCommandQueueWithProperties(context, device, properties,
                                                         errcode_ret));
}

static cl_int CL_API_CALL wrap_clRetainCommandQueue(cl_command_queue queue)
{
    CHECK_(clRetainCommandQueue, NULL);
    return real.clRetainCommandQueue(queue);
}

static cl_int CL_API_CALL wrap_clReleaseCommandQueue(cl_command_queue queue)
{
    CHECK_(clReleaseCommandQueue, NULL);
    return real.clReleaseCommandQueue(queue);
}

static cl_int CL_API_CALL wrap_clGetCommandQueueInfo(cl_command_queue queue,
                                                     cl_command_queue_info name, size_t size,
                                                     void *value, size_t *size_ret)
{
    CHECK_(clGetCommandQueueInfo, NULL);
    return real.clGetCommandQueueInfo(queue, name, size, value, size_ret);
}

static cl_mem CL_API_CALL wrap_clCreateBuffer(cl_context context, cl_mem_flags flags,
                                              size_t size, void *host, cl_int *errcode_ret)
{
    CHECK_CREATE_(clCreateBuffer, context, errcode_ret);
    return adopt(real.clCreateBuffer(context, flags, size, host, errcode_ret));
}

static cl_mem CL_API_CALL wrap_clCreateSubBuffer(cl_mem buffer, cl_mem_flags flags,
                                                 cl_buffer_create_type type, const void *info,
                                                 cl_int *errcode_ret)
{
    CHECK_CREATE_(clCreateSubBuffer, context_of_mem(buffer), errcode_ret);
    return adopt(real.clCreateSubBuffer(buffer, flags, type, info, errcode_ret));
}

static cl_int CL_API_CALL wrap_clRetainMemObject(cl_mem mem)
{
    CHECK_(clRetainMemObject, NULL);
    return real.clRetainMemObject(mem);
}

static cl_int CL_API_CALL wrap_clReleaseMemObject(cl_mem mem)
{
    CHECK_(clReleaseMemObject, NULL);
    return real.clReleaseMemObject(mem);
}

static cl_int CL_API_CALL wrap_clGetMemObjectInfo(cl_mem mem, cl_mem_info name, size_t size,
                                                  void *value, size_t *size_ret)
{
    CHECK_(clGetMemObjectInfo, NULL);
    return real.clGetMemObjectInfo(mem, name, size, value, size_ret);
}

static cl_program CL_API_CALL wrap_clCreateProgramWithSource(cl_context context, cl_uint count,
                                                             const char **strings,
                                                             const size_t *lengths,
                                                             cl_int *errcode_ret)
{
    CHECK_CREATE_(clCreateProgramWithSource, context, errcode_ret);
    return adopt(real.clCreateProgramWithSource(context, count, strings, lengths, errcode_ret));
}

static cl_program CL_API_CALL wrap_clCreateProgramWithBinary(
    cl_context context, cl_uint num_devices, const cl_device_id *devices, const size_t *lengths,
    const unsigned char **binaries, cl_int *binary_status, cl_int *errcode_ret)
{
    CHECK_CREATE_(clCreateProgramWithBinary, context, errcode_ret);
    return adopt(real.clCreateProgramWithBinary(context, num_devices, devices, lengths, binaries,
                                                binary_status, errcode_ret));
}

static cl_int CL_API_CALL wrap_clBuildProgram(cl_program program, cl_uint num_devices,
                                              const cl_device_id *devices, const char *options,
                                              void(CL_CALLBACK *notify)(cl_program, void *),
                                              void *user_data)
{
    CHECK_(clBuildProgram, context_of_program(program));
    return real.clBuildProgram(program, num_devices, devices, options, notify, user_data);
}

static cl_int CL_API_CALL wrap_clRetainProgram(cl_program program)
{
    CHECK_(clRetainProgram, NULL);
    return real.clRetainProgram(program);
}

static cl_int CL_API_CALL wrap_clReleaseProgram(cl_program program)
{
    CHECK_(clReleaseProgram, NULL);
    return real.clReleaseProgram(program);
}

static cl_int CL_API_CALL wrap_clGetProgramInfo(cl_program program, cl_program_info name,
                                                size_t size, void *value, size_t *size_ret)
{
    CHECK_(clGetProgramInfo, NULL);
    return real.clGetProgramInfo(program, name, size, value, size_ret);
}

static cl_int CL_API_CALL wrap_clGetProgramBuildInfo(cl_program program, cl_device_id device,
                                                     cl_program_build_info name, size_t size,
                                                     void *value, size_t *size_ret)
{
    CHECK_(clGetProgramBuildInfo, NULL);
    return real.clGetProgramBuildInfo(program, device, name, size, value, size_ret);
}

static cl_kernel CL_API_CALL wrap_clCreateKernel(cl_program program, const char *name,
                                                 cl_int *errcode_ret)
{
    CHECK_CREATE_(clCreateKernel, context_of_program(program), errcode_ret);
    return adopt(real.clCreateKernel(program, name, errcode_ret));
}

static cl_int CL_API_CALL wrap_clRetainKernel(cl_kernel kernel)
{
    CHECK_(clRetainKernel, NULL);
    return real.clRetainKernel(kernel);
}

static cl_int CL_API_CALL wrap_clReleaseKernel(cl_kernel kernel)
{
    CHECK_(clReleaseKernel, NULL);
    return real.clReleaseKernel(kernel);
}

static cl_int CL_API_CALL wrap_clSetKernelArg(cl_kernel kernel, cl_uint index, size_t size,
                                              const void *value)
{
    CHECK_(clSetKernelArg, NULL);
    return real.clSetKernelArg(kernel, index, size, value);
}

static cl_int CL_API_CALL wrap_clGetKernelInfo(cl_kernel kernel, cl_kernel_info name,
                                               size_t size, void *value, size_t *size_ret)
{
    CHECK_(clGetKernelInfo, NULL);
    return real.clGetKernelInfo(kernel, name, size, value, size_ret);
}

static cl_int CL_API_CALL wrap_clGetKernelWorkGroupInfo(cl_kernel kernel, cl_device_id device,
                                                        cl_kernel_work_group_info name,
                                                        size_t size, void *value,
                                                        size_t *size_ret)
{
    CHECK_(clGetKernelWorkGroupInfo, NULL);
    return real.clGetKernelWorkGroupInfo(kernel, device, name, size, value, size_ret);
}

static cl_int CL_API_CALL wrap_clWaitForEvents(cl_uint count, const cl_event *events)
{
    int status = 0;
    cl_int injected = verdict(ID_clWaitForEvents, count && events ? context_of_event(events[0])
                                                                  : NULL,
                              1, &status);
    if (injected == CL_SUCCESS)
        return real.clWaitForEvents(count, events);
    drain(count, events);
    return status ? CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST : injected;
}

static cl_int CL_API_CALL wrap_clGetEventInfo(cl_event event, cl_event_info name, size_t size,
                                              void *value, size_t *size_ret)
{
    int status = 0;
    int query = name == CL_EVENT_COMMAND_EXECUTION_STATUS;
    cl_int injected = verdict(ID_clGetEventInfo, context_of_event(event), query, &status);
    if (injected == CL_SUCCESS)
        return real.clGetEventInfo(event, name, size, value, size_ret);
    if (!status) {
        if (query) /* a poll that fails: the command is over first, as with a failed wait */
            drain(1, &event);
        return injected;
    }
    /* The command ended with `injected`: once the real one has ended. */
    drain(1, &event);
    cl_int result = real.clGetEventInfo(event, name, size, value, size_ret);
    if (result == CL_SUCCESS && value && size >= sizeof injected)
        memcpy(value, &injected, sizeof injected);
    return result;
}

static cl_event CL_API_CALL wrap_clCreateUserEvent(cl_context context, cl_int *errcode_ret)
{
    CHECK_CREATE_(clCreateUserEvent, NULL, errcode_ret);
    return adopt(real.clCreateUserEvent(context, errcode_ret));
}

static cl_int CL_API_CALL wrap_clSetUserEventStatus(cl_event event, cl_int execution_status)
{
    CHECK_(clSetUserEventStatus, NULL);
    return real.clSetUserEventStatus(event, execution_status);
}

static cl_int CL_API_CALL wrap_clRetainEvent(cl_event event)
{
    CHECK_(clRetainEvent, NULL);
    return real.clRetainEvent(event);
}

static cl_int CL_API_CALL wrap_clReleaseEvent(cl_event event)
{
    CHECK_(clReleaseEvent, NULL);
    return real.clReleaseEvent(event);
}

static cl_int CL_API_CALL wrap_clFlush(cl_command_queue queue)
{
    CHECK_(clFlush, context_of_queue(queue));
    return real.clFlush(queue);
}

static cl_int CL_API_CALL wrap_clFinish(cl_command_queue queue)
{
    int status = 0;
    cl_int injected = verdict(ID_clFinish, context_of_queue(queue), 1, &status);
    if (injected == CL_SUCCESS)
        return real.clFinish(queue);
    real.clFinish(queue); /* the real commands end before the failure is reported */
    return injected;
}

static cl_int CL_API_CALL wrap_clEnqueueReadBuffer(cl_command_queue queue, cl_mem mem,
                                                   cl_bool blocking, size_t offset, size_t size,
                                                   void *host, cl_uint num_waits,
                                                   const cl_event *waits, cl_event *event)
{
    ENQUEUE_(clEnqueueReadBuffer, queue, event,
             real.clEnqueueReadBuffer(queue, mem, blocking, offset, size, host, num_waits, waits,
                                      event));
}

static cl_int CL_API_CALL wrap_clEnqueueWriteBuffer(cl_command_queue queue, cl_mem mem,
                                                    cl_bool blocking, size_t offset, size_t size,
                                                    const void *host, cl_uint num_waits,
                                                    const cl_event *waits, cl_event *event)
{
    ENQUEUE_(clEnqueueWriteBuffer, queue, event,
             real.clEnqueueWriteBuffer(queue, mem, blocking, offset, size, host, num_waits,
                                       waits, event));
}

static cl_int CL_API_CALL wrap_clEnqueueCopyBuffer(cl_command_queue queue, cl_mem source,
                                                   cl_mem target, size_t source_offset,
                                                   size_t target_offset, size_t size,
                                                   cl_uint num_waits, const cl_event *waits,
                                                   cl_event *event)
{
    ENQUEUE_(clEnqueueCopyBuffer, queue, event,
             real.clEnqueueCopyBuffer(queue, source, target, source_offset, target_offset, size,
                                      num_waits, waits, event));
}

static cl_int CL_API_CALL wrap_clEnqueueFillBuffer(cl_command_queue queue, cl_mem mem,
                                                   const void *pattern, size_t pattern_size,
                                                   size_t offset, size_t size, cl_uint num_waits,
                                                   const cl_event *waits, cl_event *event)
{
    ENQUEUE_(clEnqueueFillBuffer, queue, event,
             real.clEnqueueFillBuffer(queue, mem, pattern, pattern_size, offset, size, num_waits,
                                      waits, event));
}

static void *CL_API_CALL wrap_clEnqueueMapBuffer(cl_command_queue queue, cl_mem mem,
                                                 cl_bool blocking, cl_map_flags flags,
                                                 size_t offset, size_t size, cl_uint num_waits,
                                                 const cl_event *waits, cl_event *event,
                                                 cl_int *errcode_ret)
{
    CHECK_CREATE_(clEnqueueMapBuffer, context_of_queue(queue), errcode_ret);
    cl_int result = CL_SUCCESS;
    void *mapped = real.clEnqueueMapBuffer(queue, mem, blocking, flags, offset, size, num_waits,
                                           waits, event, &result);
    if (result == CL_SUCCESS && event)
        adopt(*event);
    if (errcode_ret)
        *errcode_ret = result;
    return mapped;
}

static cl_int CL_API_CALL wrap_clEnqueueUnmapMemObject(cl_command_queue queue, cl_mem mem,
                                                       void *mapped, cl_uint num_waits,
                                                       const cl_event *waits, cl_event *event)
{
    ENQUEUE_(clEnqueueUnmapMemObject, queue, event,
             real.clEnqueueUnmapMemObject(queue, mem, mapped, num_waits, waits, event));
}

static cl_int CL_API_CALL wrap_clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel kernel,
                                                      cl_uint dims, const size_t *offset,
                                                      const size_t *global, const size_t *local,
                                                      cl_uint num_waits, const cl_event *waits,
                                                      cl_event *event)
{
    ENQUEUE_(clEnqueueNDRangeKernel, queue, event,
             real.clEnqueueNDRangeKernel(queue, kernel, dims, offset, global, local, num_waits,
                                         waits, event));
}

static cl_int CL_API_CALL wrap_clEnqueueMarkerWithWaitList(cl_command_queue queue,
                                                           cl_uint num_waits,
                                                           const cl_event *waits, cl_event *event)
{
    ENQUEUE_(clEnqueueMarkerWithWaitList, queue, event,
             real.clEnqueueMarkerWithWaitList(queue, num_waits, waits, event));
}

static cl_int CL_API_CALL wrap_clEnqueueBarrierWithWaitList(cl_command_queue queue,
                                                            cl_uint num_waits,
                                                            const cl_event *waits,
                                                            cl_event *event)
{
    ENQUEUE_(clEnqueueBarrierWithWaitList, queue, event,
             real.clEnqueueBarrierWithWaitList(queue, num_waits, waits, event));
}

/* ---- Steering -------------------------------------------------------------------------------- */

static int call_id(const char *name)
{
    if (!name)
        return CALL_NONE;
    if (strcmp(name, "*") == 0)
        return CALL_ANY;
    for (int i = 0; i < CALL_COUNT; i++) {
        if (strcmp(call_names[i], name) == 0)
            return i;
    }
    return CALL_NONE;
}

EXPORT void posenc_cl_faults_arm(const char *call, uint32_t nth, int32_t error, int as_status)
{
    int id = call_id(call);
    if (nth && id == CALL_NONE)
        fprintf(stderr, "posenc OpenCL fault ICD: %s is not an entry point it wraps\n",
                call ? call : "(null)");
    pthread_mutex_lock(&faults.lock);
    memset(faults.counts, 0, sizeof faults.counts);
    faults.all = 0;
    faults.fired = 0;
    faults.call = id;
    faults.nth = id == CALL_NONE ? 0 : nth;
    faults.error = error;
    faults.as_status = as_status != 0;
    pthread_mutex_unlock(&faults.lock);
}

EXPORT uint32_t posenc_cl_faults_count(const char *call)
{
    int id = call_id(call);
    pthread_mutex_lock(&faults.lock);
    uint32_t count = id == CALL_ANY ? faults.all : id == CALL_NONE ? 0 : faults.counts[id];
    pthread_mutex_unlock(&faults.lock);
    return count;
}

EXPORT int posenc_cl_faults_fired(void)
{
    pthread_mutex_lock(&faults.lock);
    int fired = faults.fired;
    pthread_mutex_unlock(&faults.lock);
    return fired;
}

EXPORT const char *posenc_cl_faults_fired_call(void)
{
    pthread_mutex_lock(&faults.lock);
    const char *call = faults.fired ? call_names[faults.fired_id] : "";
    pthread_mutex_unlock(&faults.lock);
    return call;
}

EXPORT int posenc_cl_faults_lost(const void *context)
{
    pthread_mutex_lock(&faults.lock);
    int lost = lost_code((cl_context)(uintptr_t)context) != CL_SUCCESS;
    pthread_mutex_unlock(&faults.lock);
    return lost;
}

/* A code of the environment: a name of CODES_ or a number; 0 when it is neither. */
static cl_int parse_code(const char *text)
{
#define CODE_(code)                                                                              \
    if (strcmp(text, #code) == 0)                                                                \
        return code;
    CODES_(CODE_)
#undef CODE_
    char *end = NULL;
    long value = strtol(text, &end, 0);
    return end != text && *end == '\0' ? (cl_int)value : 0;
}

/* The fault the environment describes, armed from the process start; 0 when it names none,
 * -1 (said on stderr) when it makes no sense. */
static int arm_from_environment(void)
{
    const char *call = getenv("POSENC_CL_FAULT_CALL");
    if (!call || !*call)
        return 0;
    const char *at = getenv("POSENC_CL_FAULT_AT");
    const char *status = getenv("POSENC_CL_FAULT_STATUS");
    const char *error = getenv("POSENC_CL_FAULT_ERROR");
    const char *code_text = status ? status : error ? error : "CL_DEVICE_NOT_AVAILABLE";
    char *end = NULL;
    unsigned long nth = at ? strtoul(at, &end, 10) : 1;
    cl_int code = parse_code(code_text);
    if (call_id(call) == CALL_NONE || (at && (end == at || *end)) || nth == 0 ||
        nth > UINT32_MAX || code >= 0 || (status && error)) {
        fprintf(stderr,
                "posenc OpenCL fault ICD: POSENC_CL_FAULT_CALL=%s AT=%s %s=%s is no fault "
                "it can make (an entry point it wraps, N from 1, one negative code)\n",
                call, at ? at : "", status ? "STATUS" : "ERROR", code_text);
        return -1;
    }
    posenc_cl_faults_arm(call, (uint32_t)nth, code, status != NULL);
    return 0;
}

/* ---- The ICD --------------------------------------------------------------------------------- */

static void load(void)
{
    const char *path = getenv("POSENC_CL_FAULT_ICD");
    if (!path || !*path)
        path = "libpocl.so.2";
    /* As the loader finds an ICD's platforms: through its clGetExtensionFunctionAddress. */
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *symbol = library ? dlsym(library, "clGetExtensionFunctionAddress") : NULL;
    cl_api_clGetExtensionFunctionAddress address = NULL;
    if (symbol)
        memcpy(&address, &symbol, sizeof symbol);
    symbol = address ? address("clIcdGetPlatformIDsKHR") : NULL;
    if (!symbol) {
        fprintf(stderr, "posenc OpenCL fault ICD: no real ICD in %s: %s\n", path,
                library ? "it gives no clIcdGetPlatformIDsKHR" : dlerror());
        return;
    }
    memcpy(&real_platforms, &symbol, sizeof symbol);
    cl_platform_id platform = NULL;
    cl_uint count = 0;
    if (real_platforms(1, &platform, &count) != CL_SUCCESS || count == 0 || !platform) {
        fprintf(stderr, "posenc OpenCL fault ICD: %s has no platform\n", path);
        return;
    }
    const cl_icd_dispatch *theirs = NULL;
    memcpy(&theirs, platform, sizeof theirs);
    real = *theirs;
    table = real;
#define INSTALL_(name, device) table.name = wrap_##name;
    WRAPPED_(INSTALL_)
#undef INSTALL_
    loaded = arm_from_environment() == 0;
}

EXPORT cl_int CL_API_CALL clIcdGetPlatformIDsKHR(cl_uint num_entries, cl_platform_id *platforms,
                                                 cl_uint *num_platforms)
{
    pthread_once(&load_once, load);
    if (!loaded)
        return CL_PLATFORM_NOT_FOUND_KHR;
    if ((num_entries == 0 && platforms) || (!platforms && !num_platforms))
        return CL_INVALID_VALUE;
    cl_uint count = 0;
    cl_int result = real_platforms(num_entries, platforms, &count);
    if (num_platforms)
        *num_platforms = count;
    for (cl_uint i = 0; result == CL_SUCCESS && platforms && i < count && i < num_entries; i++)
        adopt(platforms[i]);
    return result;
}

EXPORT void *CL_API_CALL clGetExtensionFunctionAddress(const char *name)
{
    if (name && strcmp(name, "clIcdGetPlatformIDsKHR") == 0) {
        clIcdGetPlatformIDsKHR_fn own = clIcdGetPlatformIDsKHR;
        void *address = NULL;
        memcpy(&address, &own, sizeof address);
        return address;
    }
    pthread_once(&load_once, load);
    return loaded && real.clGetExtensionFunctionAddress ? real.clGetExtensionFunctionAddress(name)
                                                        : NULL;
}

EXPORT cl_int CL_API_CALL clGetPlatformInfo(cl_platform_id platform, cl_platform_info name,
                                            size_t size, void *value, size_t *size_ret)
{
    pthread_once(&load_once, load);
    if (!loaded)
        return CL_INVALID_PLATFORM;
    return wrap_clGetPlatformInfo(platform, name, size, value, size_ret);
}
