/* SPDX-License-Identifier: MIT */
/* Run-time builds of the embedded OpenCL C kernels, each on first use in a context, through the
 * on-disk binary cache (core/kernel_cache.h): keyed by the source's hash, the build options, the
 * device name and vendor, the device and driver versions and the platform. A cache that cannot be
 * read or written never fails an operation: the program is built from source and the reason
 * logged. */
#include "core/kernel_cache.h"
#include "opencl/cl_internal.h"

#include "core/kernels.h"
#include "core/platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Work-items per work-group when the kernel and device allow it. */
#define PREFERRED_LOCAL_SIZE 256

static double now_ms(void) { return posenc__seconds_now() * 1e3; }

/* The cache entry of a build: its key is everything that makes a binary valid for it. */
static bool cache_open(posenc_context *ctx, posenc__kernel_cache_entry *entry,
                       const char *source, const char *options)
{
    const posenc_cl_device *dev = ctx->device->handle;
    size_t length = strlen(source);
    return posenc__kernel_cache_open(
        ctx, entry,
        "posenc OpenCL program binary\n"
        "source %016llx %zu\n"
        "options %s\n"
        "device %s\n"
        "vendor %s\n"
        "device version %s\n"
        "driver %s\n"
        "platform %s\n",
        (unsigned long long)posenc__kernel_cache_hash(POSENC__KERNEL_CACHE_HASH_SEED, source,
                                                      length),
        length, options, ctx->device->info.name, ctx->device->info.vendor, dev->device_version,
        dev->driver_version, dev->platform_name);
}

/* The start of the build log, for the error message. */
static void build_log(const posenc_cl_api *cl, cl_device_id device, cl_program program,
                      char *out, size_t size)
{
    out[0] = '\0';
    size_t length = 0;
    if (cl->GetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &length) !=
            CL_SUCCESS ||
        length == 0)
        return;
    char *log = malloc(length + 1);
    if (!log)
        return;
    if (cl->GetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, length, log, NULL) ==
        CL_SUCCESS) {
        log[length] = '\0';
        /* One line: runs of blanks and line breaks become one space. */
        size_t n = 0;
        for (const char *c = log; *c && n + 1 < size; c++) {
            bool blank = *c == '\n' || *c == '\r' || *c == ' ' || *c == '\t';
            if (blank && (n == 0 || out[n - 1] == ' '))
                continue;
            out[n++] = blank ? ' ' : *c;
        }
        while (n > 0 && out[n - 1] == ' ')
            n--;
        out[n] = '\0';
    }
    free(log);
}

/* A program from a cached binary, or NULL (the reason logged) when the driver refuses it. */
static cl_program program_from_binary(posenc_context *ctx, const char *label,
                                      const unsigned char *binary, size_t size,
                                      const char *options, const char *path)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_api *cl = state->cl;
    cl_int err = CL_SUCCESS, binary_status = CL_SUCCESS;
    const posenc_cl_device *dev = ctx->device->handle;
    cl_program program = cl->CreateProgramWithBinary(state->context, 1, &dev->device, &size,
                                                     &binary, &binary_status, &err);
    if (err == CL_SUCCESS && binary_status == CL_SUCCESS && program)
        err = cl->BuildProgram(program, 1, &dev->device, options, NULL, NULL);
    if (err == CL_SUCCESS && binary_status == CL_SUCCESS && program)
        return program;
    if (program)
        cl->ReleaseProgram(program);
    posenc__log(ctx, POSENC_LOG_INFO,
                "opencl: %s: the driver refused the cached binary %s (%s); building from source",
                label, path, posenc_cl_error_name(err != CL_SUCCESS ? err : binary_status));
    return NULL;
}

static void cache_store(posenc_context *ctx, cl_program program,
                        const posenc__kernel_cache_entry *entry)
{
    posenc_cl_context *state = ctx->backend_state;
    size_t size = 0;
    if (state->cl->GetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) !=
            CL_SUCCESS ||
        size == 0) {
        posenc__log(ctx, POSENC_LOG_DEBUG, "opencl: %s: the driver gives no program binary; "
                    "not cached", entry->label);
        return;
    }
    unsigned char *binary = malloc(size);
    if (!binary)
        return;
    if (state->cl->GetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof binary, &binary, NULL) !=
        CL_SUCCESS)
        posenc__log(ctx, POSENC_LOG_DEBUG, "opencl: %s: the program binary cannot be read; "
                    "not cached", entry->label);
    else
        posenc__kernel_cache_write(ctx, entry, binary, size);
    free(binary);
}

static posenc_status program_build(posenc_context *ctx, const char *label, const char *source,
                                   const char *options, cl_program *out)
{
    posenc_cl_context *state = ctx->backend_state;
    const posenc_cl_api *cl = state->cl;
    double start = now_ms();

    posenc__kernel_cache_entry entry = {.backend = "opencl", .label = label};
    bool cached = cache_open(ctx, &entry, source, options);
    unsigned char *binary = NULL;
    size_t size = 0;
    if (cached && posenc__kernel_cache_read(ctx, &entry, &binary, &size)) {
        cl_program program = program_from_binary(ctx, label, binary, size, options, entry.path);
        free(binary);
        if (program) {
            posenc__log(ctx, POSENC_LOG_DEBUG,
                        "opencl: %s: loaded from the binary cache %s in %.1f ms", label,
                        entry.path, now_ms() - start);
            posenc__atomic64_add(&ctx->stats.kernels_loaded, 1);
            *out = program;
            return POSENC_OK;
        }
    }

    cl_int err = CL_SUCCESS;
    cl_program program = cl->CreateProgramWithSource(state->context, 1, &source, NULL, &err);
    if (err != CL_SUCCESS || !program) {
        if (program)
            cl->ReleaseProgram(program);
        posenc_status status = posenc_cl_fail(ctx, err == CL_SUCCESS ? CL_INVALID_PROGRAM : err,
                                              label, "clCreateProgramWithSource");
        return status == POSENC_DEVICE_ERROR ? POSENC_KERNEL_BUILD_FAILED : status;
    }
    cl_device_id device = ((const posenc_cl_device *)ctx->device->handle)->device;
    err = cl->BuildProgram(program, 1, &device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        char log[384];
        build_log(cl, device, program, log, sizeof log);
        cl->ReleaseProgram(program);
        posenc_status status = posenc_cl_status(err);
        if (status == POSENC_DEVICE_ERROR)
            status = POSENC_KERNEL_BUILD_FAILED;
        return posenc__fail(ctx, status, "%s: clBuildProgram(\"%s\") failed: %s (%d)%s%s", label,
                            options, posenc_cl_error_name(err), (int)err, log[0] ? ": " : "",
                            log);
    }
    posenc__log(ctx, POSENC_LOG_INFO, "opencl: %s: built from source in %.1f ms", label,
                now_ms() - start);
    posenc__atomic64_add(&ctx->stats.kernels_built, 1);
    if (cached)
        cache_store(ctx, program, &entry);
    *out = program;
    return POSENC_OK;
}

posenc_status posenc_cl_program_build(posenc_context *ctx, const char *label, const char *source,
                                      const char *options, cl_program *out)
{
    posenc__signal_stack stack;
    posenc__signal_stack_save(&stack);
    posenc_status status = program_build(ctx, label, source, options, out);
    posenc__signal_stack_restore(&stack);
    return status;
}

static size_t choose_local_size(const posenc_cl_api *cl, const posenc_cl_device *dev,
                                cl_kernel kernel)
{
    size_t kernel_max = 0, multiple = 0;
    if (cl->GetKernelWorkGroupInfo(kernel, dev->device, CL_KERNEL_WORK_GROUP_SIZE,
                                   sizeof kernel_max, &kernel_max, NULL) != CL_SUCCESS)
        kernel_max = 1;
    if (cl->GetKernelWorkGroupInfo(kernel, dev->device,
                                   CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof multiple,
                                   &multiple, NULL) != CL_SUCCESS)
        multiple = 1;
    size_t local = PREFERRED_LOCAL_SIZE;
    if (local > kernel_max)
        local = kernel_max;
    if (local > dev->max_local_size)
        local = dev->max_local_size;
    if (multiple > 1 && local >= multiple)
        local -= local % multiple;
    return local ? local : 1;
}

posenc_status posenc_cl_kernel_get(posenc_context *ctx, posenc__cl_id id,
                                   const posenc_cl_kernel **kernel)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc_cl_kernel *entry = &state->kernels[id];
    if (entry->kernel) {
        *kernel = entry;
        return POSENC_OK;
    }
    const posenc__cl_kernel *variant = posenc__cl_kernel_get(id);
    if (!variant)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "opencl: kernel %d is not in this build (POSENC_OPENCL=OFF?)",
                            (int)id);
    cl_program program = NULL;
    posenc_status status = posenc_cl_program_build(ctx, variant->name, variant->source,
                                                   variant->options, &program);
    if (status != POSENC_OK)
        return status;
    cl_int err = CL_SUCCESS;
    cl_kernel created = state->cl->CreateKernel(program, variant->entry, &err);
    if (err != CL_SUCCESS || !created) {
        if (created)
            state->cl->ReleaseKernel(created);
        state->cl->ReleaseProgram(program);
        return posenc_cl_fail(ctx, err == CL_SUCCESS ? CL_INVALID_KERNEL : err, variant->name,
                              "clCreateKernel");
    }
    entry->program = program;
    entry->kernel = created;
    entry->local_size = choose_local_size(state->cl, ctx->device->handle, created);
    *kernel = entry;
    return POSENC_OK;
}
