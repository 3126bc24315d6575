/* SPDX-License-Identifier: MIT */
/* Caller host memory bound in place on devices that share host memory: a CL_MEM_USE_HOST_PTR
 * buffer over it, which such devices use without a copy. */
#include "opencl/cl_internal.h"

cl_mem posenc_cl_import(posenc_context *ctx, void *host, uint64_t size, const char *name)
{
    posenc_cl_context *state = ctx->backend_state;
    uint64_t alignment = ((const posenc_cl_device *)ctx->device->handle)->base_alignment;
    const char *why = NULL;
    cl_int err = CL_SUCCESS;
    cl_mem mem = NULL;
    if ((uintptr_t)host % alignment != 0)
        why = "its address is not a multiple of CL_DEVICE_MEM_BASE_ADDR_ALIGN";
    else if (size > ctx->device->info.max_buffer_bytes || size > SIZE_MAX)
        why = "larger than one allocation";
    if (!why) {
        mem = state->cl->CreateBuffer(state->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                                      (size_t)size, host, &err);
        if (err != CL_SUCCESS || !mem) {
            if (mem)
                state->cl->ReleaseMemObject(mem);
            mem = NULL;
            why = "clCreateBuffer (CL_MEM_USE_HOST_PTR) failed";
        }
    }
    if (!why)
        posenc__log(ctx, POSENC_LOG_DEBUG, "opencl: %s: host memory at %p (%llu bytes) imported",
                    name, host, (unsigned long long)size);
    else
        posenc__log(ctx, POSENC_LOG_DEBUG,
                    "opencl: %s: host memory at %p (%llu bytes, alignment %llu) is staged, not "
                    "imported: %s%s%s",
                    name, host, (unsigned long long)size,
                    (unsigned long long)alignment, why,
                    err != CL_SUCCESS ? ": " : "",
                    err != CL_SUCCESS ? posenc_cl_error_name(err) : "");
    return mem;
}
