/* SPDX-License-Identifier: MIT */
/* Loading the OpenCL ICD loader at run time into a function table (no link-time dependency),
 * and turning OpenCL error codes into posenc statuses and messages. */
#include "opencl/cl_internal.h"

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
    void *library = NULL;
    const char *name = library_names[0];
    for (size_t i = 0; i < sizeof library_names / sizeof library_names[0] && !library; i++) {
        name = library_names[i];
        library = posenc__library_open(name);
    }
    if (!library) {
        load_reason = "the OpenCL ICD loader (" POSENC_CL_LIBRARY_HINT ") was not found";
        return;
    }

    /* dlsym's object pointer is copied into the function pointer: ISO C has no cast between
     * them. A runtime missing any 1.2 entry point is treated as absent. */
    static char missing[96];
    posenc_cl_api loaded;
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
        memcpy(&loaded.fn, &symbol, sizeof symbol);                                             \
    } while (0);
    POSENC_CL_FUNCTIONS(POSENC_CL_LOAD_)
#undef POSENC_CL_LOAD_
    api = loaded;
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

#define POSENC_CL_ERRORS(X)                                                                       \
    X(CL_DEVICE_NOT_FOUND)                                                                      \
    X(CL_DEVICE_NOT_AVAILABLE)                                                                  \
    X(CL_COMPILER_NOT_AVAILABLE)                                                                \
    X(CL_MEM_OBJECT_ALLOCATION_FAILURE)                                                         \
    X(CL_OUT_OF_RESOURCES)                                                                      \
    X(CL_OUT_OF_HOST_MEMORY)                                                                    \
    X(CL_PROFILING_INFO_NOT_AVAILABLE)                                                          \
    X(CL_MEM_COPY_OVERLAP)                                                                      \
    X(CL_BUILD_PROGRAM_FAILURE)                                                                 \
    X(CL_MAP_FAILURE)                                                                           \
    X(CL_MISALIGNED_SUB_BUFFER_OFFSET)                                                          \
    X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)                                             \
    X(CL_COMPILE_PROGRAM_FAILURE)                                                               \
    X(CL_LINKER_NOT_AVAILABLE)                                                                  \
    X(CL_LINK_PROGRAM_FAILURE)                                                                  \
    X(CL_INVALID_VALUE)                                                                         \
    X(CL_INVALID_DEVICE_TYPE)                                                                   \
    X(CL_INVALID_PLATFORM)                                                                      \
    X(CL_INVALID_DEVICE)                                                                        \
    X(CL_INVALID_CONTEXT)                                                                       \
    X(CL_INVALID_QUEUE_PROPERTIES)                                                              \
    X(CL_INVALID_COMMAND_QUEUE)                                                                 \
    X(CL_INVALID_HOST_PTR)                                                                      \
    X(CL_INVALID_MEM_OBJECT)                                                                    \
    X(CL_INVALID_BINARY)                                                                        \
    X(CL_INVALID_BUILD_OPTIONS)                                                                 \
    X(CL_INVALID_PROGRAM)                                                                       \
    X(CL_INVALID_PROGRAM_EXECUTABLE)                                                            \
    X(CL_INVALID_KERNEL_NAME)                                                                   \
    X(CL_INVALID_KERNEL_DEFINITION)                                                             \
    X(CL_INVALID_KERNEL)                                                                        \
    X(CL_INVALID_ARG_INDEX)                                                                     \
    X(CL_INVALID_ARG_VALUE)                                                                     \
    X(CL_INVALID_ARG_SIZE)                                                                      \
    X(CL_INVALID_KERNEL_ARGS)                                                                   \
    X(CL_INVALID_WORK_DIMENSION)                                                                \
    X(CL_INVALID_WORK_GROUP_SIZE)                                                               \
    X(CL_INVALID_WORK_ITEM_SIZE)                                                                \
    X(CL_INVALID_GLOBAL_OFFSET)                                                                 \
    X(CL_INVALID_EVENT_WAIT_LIST)                                                               \
    X(CL_INVALID_EVENT)                                                                         \
    X(CL_INVALID_OPERATION)                                                                     \
    X(CL_INVALID_BUFFER_SIZE)                                                                   \
    X(CL_INVALID_GLOBAL_WORK_SIZE)                                                              \
    X(CL_INVALID_PROPERTY)                                                                      \
    X(CL_INVALID_COMPILER_OPTIONS)                                                              \
    X(CL_INVALID_LINKER_OPTIONS)                                                                \
    X(CL_INVALID_DEVICE_PARTITION_COUNT)

const char *posenc_cl_error_name(cl_int error)
{
    switch (error) {
#define POSENC_CL_ERROR_CASE_(code)                                                               \
    case code:                                                                                  \
        return #code;
        POSENC_CL_ERRORS(POSENC_CL_ERROR_CASE_)
#undef POSENC_CL_ERROR_CASE_
    case -1001:
        return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
        return "CL error";
    }
}

posenc_status posenc_cl_status(cl_int error)
{
    switch (error) {
    case CL_SUCCESS:
        return POSENC_OK;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
        return POSENC_OUT_OF_DEVICE_MEMORY;
    case CL_OUT_OF_HOST_MEMORY:
        return POSENC_OUT_OF_MEMORY;
    case CL_COMPILER_NOT_AVAILABLE:
    case CL_BUILD_PROGRAM_FAILURE:
    case CL_COMPILE_PROGRAM_FAILURE:
    case CL_LINKER_NOT_AVAILABLE:
    case CL_LINK_PROGRAM_FAILURE:
    case CL_INVALID_BINARY:
    case CL_INVALID_BUILD_OPTIONS:
    case CL_INVALID_PROGRAM_EXECUTABLE:
    case CL_INVALID_KERNEL_NAME:
    case CL_INVALID_KERNEL_DEFINITION:
        return POSENC_KERNEL_BUILD_FAILED;
    case CL_DEVICE_NOT_AVAILABLE:
        return POSENC_DEVICE_LOST;
    case CL_DEVICE_NOT_FOUND:
        return POSENC_DEVICE_NOT_FOUND;
    default:
        return POSENC_DEVICE_ERROR;
    }
}

posenc_status posenc_cl_fail(posenc_context *ctx, cl_int error, const char *what,
                             const char *call)
{
    return posenc__fail(ctx, posenc_cl_status(error), "%s: %s failed: %s (%d)", what, call,
                        posenc_cl_error_name(error), (int)error);
}
