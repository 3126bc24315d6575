/* SPDX-License-Identifier: MIT */
/* Loading the OpenCL ICD loader at run time into a function table (no link-time dependency),
 * and turning OpenCL error codes into posenc statuses and messages. */
#include "opencl/cl_internal.h"

#include "core/gpu_errors.h"
#include "core/platform.h"

#include <stdio.h>
#include <string.h>

static posenc_cl_api api;
static bool api_loaded;

/* The ICD loader's names, most specific first. */
#if defined(_WIN32)
#  define POSENC_CL_LIBRARY_HINT "OpenCL.dll"
static const char *const library_names[] = {"OpenCL.dll"};
#elif defined(__APPLE__)
/* Apple's framework where the system has it (it has no ICD loader: Apple's own devices only),
 * else an ICD loader on the dyld search paths (ocl-icd or the Khronos one, for PoCL). */
#  define POSENC_CL_LIBRARY_HINT "the OpenCL framework or libOpenCL.dylib"
static const char *const library_names[] = {
    "/System/Library/Frameworks/OpenCL.framework/OpenCL",
    "OpenCL.framework/OpenCL",
    "libOpenCL.1.dylib",
    "libOpenCL.dylib",
};
#else
#  define POSENC_CL_LIBRARY_HINT "libOpenCL.so.1 or libOpenCL.so"
static const char *const library_names[] = {"libOpenCL.so.1", "libOpenCL.so"};
#endif

static posenc__once load_once;
static const char *load_reason = "";

static void load_runtime(void)
{
    if (!posenc__library_loading(&load_reason))
        return;
    const char *name = library_names[0];
    void *library = posenc__library_open_first(
        library_names, sizeof library_names / sizeof library_names[0], &name);
    if (!library) {
        load_reason = "the OpenCL ICD loader (" POSENC_CL_LIBRARY_HINT ") was not found";
        return;
    }

    /* dlsym's object pointer is copied into the function pointer: ISO C has no cast between
     * them. A runtime missing any 1.2 entry point is treated as absent (the table is used only
     * once complete: api_loaded). */
    static char missing[96];
#define POSENC_CL_LOAD_(fn, result, params)                                                       \
    do {                                                                                        \
        void *symbol = posenc__library_symbol(library, "cl" #fn);                               \
        if (!symbol) {                                                                          \
            snprintf(missing, sizeof missing, "%s lacks the OpenCL 1.2 entry point cl" #fn,     \
                     name);                                                                     \
            load_reason = missing;                                                              \
            /* Left loaded: ICDs do not all survive being unloaded. */                          \
            return;                                                                             \
        }                                                                                       \
        memcpy(&api.fn, &symbol, sizeof symbol);                                                \
    } while (0);
    POSENC_CL_FUNCTIONS(POSENC_CL_LOAD_)
#undef POSENC_CL_LOAD_
    api_loaded = true;
}

const posenc_cl_api *posenc_cl_load(const char **reason)
{
    posenc__run_once(&load_once, load_runtime);
    if (!api_loaded) {
        *reason = load_reason;
        return NULL;
    }
    return &api;
}

const posenc_cl_api *posenc_cl_api_get(void) { return api_loaded ? &api : NULL; }

/* Every OpenCL error posenc names, with the status it reports for it; any other is a
 * DEVICE_ERROR, named "CL error". */
#define POSENC_CL_ERRORS(X)                                                                       \
    X(CL_SUCCESS, POSENC_OK)                                                                      \
    X(CL_DEVICE_NOT_FOUND, POSENC_DEVICE_NOT_FOUND)                                               \
    X(CL_DEVICE_NOT_AVAILABLE, POSENC_DEVICE_LOST)                                                \
    X(CL_COMPILER_NOT_AVAILABLE, POSENC_KERNEL_BUILD_FAILED)                                      \
    X(CL_MEM_OBJECT_ALLOCATION_FAILURE, POSENC_OUT_OF_DEVICE_MEMORY)                              \
    X(CL_OUT_OF_RESOURCES, POSENC_OUT_OF_DEVICE_MEMORY)                                           \
    X(CL_OUT_OF_HOST_MEMORY, POSENC_OUT_OF_MEMORY)                                                \
    X(CL_PROFILING_INFO_NOT_AVAILABLE, POSENC_DEVICE_ERROR)                                       \
    X(CL_MEM_COPY_OVERLAP, POSENC_DEVICE_ERROR)                                                   \
    X(CL_BUILD_PROGRAM_FAILURE, POSENC_KERNEL_BUILD_FAILED)                                       \
    X(CL_MAP_FAILURE, POSENC_DEVICE_ERROR)                                                        \
    X(CL_MISALIGNED_SUB_BUFFER_OFFSET, POSENC_DEVICE_ERROR)                                       \
    X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, POSENC_DEVICE_ERROR)                          \
    X(CL_COMPILE_PROGRAM_FAILURE, POSENC_KERNEL_BUILD_FAILED)                                     \
    X(CL_LINKER_NOT_AVAILABLE, POSENC_KERNEL_BUILD_FAILED)                                        \
    X(CL_LINK_PROGRAM_FAILURE, POSENC_KERNEL_BUILD_FAILED)                                        \
    X(CL_INVALID_VALUE, POSENC_DEVICE_ERROR)                                                      \
    X(CL_INVALID_DEVICE_TYPE, POSENC_DEVICE_ERROR)                                                \
    X(CL_INVALID_PLATFORM, POSENC_DEVICE_ERROR)                                                   \
    X(CL_INVALID_DEVICE, POSENC_DEVICE_ERROR)                                                     \
    X(CL_INVALID_CONTEXT, POSENC_DEVICE_ERROR)                                                    \
    X(CL_INVALID_QUEUE_PROPERTIES, POSENC_DEVICE_ERROR)                                           \
    X(CL_INVALID_COMMAND_QUEUE, POSENC_DEVICE_ERROR)                                              \
    X(CL_INVALID_HOST_PTR, POSENC_DEVICE_ERROR)                                                   \
    X(CL_INVALID_MEM_OBJECT, POSENC_DEVICE_ERROR)                                                 \
    X(CL_INVALID_BINARY, POSENC_KERNEL_BUILD_FAILED)                                              \
    X(CL_INVALID_BUILD_OPTIONS, POSENC_KERNEL_BUILD_FAILED)                                       \
    X(CL_INVALID_PROGRAM, POSENC_DEVICE_ERROR)                                                    \
    X(CL_INVALID_PROGRAM_EXECUTABLE, POSENC_KERNEL_BUILD_FAILED)                                  \
    X(CL_INVALID_KERNEL_NAME, POSENC_KERNEL_BUILD_FAILED)                                         \
    X(CL_INVALID_KERNEL_DEFINITION, POSENC_KERNEL_BUILD_FAILED)                                   \
    X(CL_INVALID_KERNEL, POSENC_DEVICE_ERROR)                                                     \
    X(CL_INVALID_ARG_INDEX, POSENC_DEVICE_ERROR)                                                  \
    X(CL_INVALID_ARG_VALUE, POSENC_DEVICE_ERROR)                                                  \
    X(CL_INVALID_ARG_SIZE, POSENC_DEVICE_ERROR)                                                   \
    X(CL_INVALID_KERNEL_ARGS, POSENC_DEVICE_ERROR)                                                \
    X(CL_INVALID_WORK_DIMENSION, POSENC_DEVICE_ERROR)                                             \
    X(CL_INVALID_WORK_GROUP_SIZE, POSENC_DEVICE_ERROR)                                            \
    X(CL_INVALID_WORK_ITEM_SIZE, POSENC_DEVICE_ERROR)                                             \
    X(CL_INVALID_GLOBAL_OFFSET, POSENC_DEVICE_ERROR)                                              \
    X(CL_INVALID_EVENT_WAIT_LIST, POSENC_DEVICE_ERROR)                                            \
    X(CL_INVALID_EVENT, POSENC_DEVICE_ERROR)                                                      \
    X(CL_INVALID_OPERATION, POSENC_DEVICE_ERROR)                                                  \
    X(CL_INVALID_BUFFER_SIZE, POSENC_DEVICE_ERROR)                                                \
    X(CL_INVALID_GLOBAL_WORK_SIZE, POSENC_DEVICE_ERROR)                                           \
    X(CL_INVALID_PROPERTY, POSENC_DEVICE_ERROR)                                                   \
    X(CL_INVALID_COMPILER_OPTIONS, POSENC_DEVICE_ERROR)                                           \
    X(CL_INVALID_LINKER_OPTIONS, POSENC_DEVICE_ERROR)                                             \
    X(CL_INVALID_DEVICE_PARTITION_COUNT, POSENC_DEVICE_ERROR)                                     \
    X(CL_PLATFORM_NOT_FOUND_KHR, POSENC_DEVICE_ERROR)

static const posenc__gpu_error errors[] = {POSENC_CL_ERRORS(POSENC__GPU_ERROR)};

const char *posenc_cl_error_name(cl_int error)
{
    return posenc__gpu_error_name(errors, sizeof errors / sizeof errors[0], error, "CL error");
}

posenc_status posenc_cl_status(cl_int error)
{
    return posenc__gpu_error_status(errors, sizeof errors / sizeof errors[0], error);
}

posenc_status posenc_cl_fail(posenc_context *ctx, cl_int error, const char *what,
                             const char *call)
{
    return posenc__fail(ctx, posenc_cl_status(error), "%s: %s failed: %s (%d)", what, call,
                        posenc_cl_error_name(error), (int)error);
}
