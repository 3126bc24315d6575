/* SPDX-License-Identifier: MIT */
/* The copy roofline of `posenc bench` on OpenCL: shaders/copy.cl over a buffer's bytes, in
 * place (read + write) or write only. Wrapped host memory is staged like a host tensor. */
#include "opencl/cl_internal.h"

#include "posenc_kernel_params.h"

/* CPU devices: words per work-item, each copying one contiguous run (see shaders/copy.cl). */
#define CPU_RUN_WORDS 1024

/* The launch's units and each work-item's run (0: interleaved, on GPUs). */
static uint64_t copy_units(const posenc_context *ctx, uint64_t words)
{
    if (ctx->device->info.type != POSENC_DEVICE_CPU)
        return words;
    return (words + CPU_RUN_WORDS - 1) / CPU_RUN_WORDS;
}

static uint32_t copy_chunk(const posenc_context *ctx, const posenc_cl_kernel *kernel,
                           uint64_t words)
{
    if (ctx->device->info.type != POSENC_DEVICE_CPU)
        return 0;
    uint64_t items = posenc_cl_launch_size(ctx, kernel, copy_units(ctx, words));
    uint64_t chunk = (words + items - 1) / items;
    return chunk ? (uint32_t)chunk : 1u;
}

static posenc_status copy_launch(posenc_context *ctx, const posenc_cl_op *run,
                                 const posenc_cl_kernel *kernel, cl_uint wait_count,
                                 const cl_event *wait_list, cl_event *event)
{
    uint64_t bytes = *(const uint64_t *)run->op;
    uint64_t words = bytes / 4;
    if (words > UINT32_MAX)
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "bytes: %llu bytes is more than one OpenCL launch indexes (2^32 "
                            "words)",
                            (unsigned long long)bytes);
    posenc_cl_binding data;
    posenc_cl_staging staging = {0};
    cl_mem none = NULL;
    posenc_status status = posenc_cl_stage_op(ctx, run, false, &data, &staging, &none);
    if (status != POSENC_OK)
        return status;
    posenc__copy_args params = {
        .offset = data.offset,
        .count = (uint32_t)words,
        .flags = run->gpu.access[0] == POSENC__GPU_WRITE ? POSENC_COPY_FLAG_WRITE_ONLY : 0u,
        .chunk = copy_chunk(ctx, kernel, words),
    };
    return posenc_cl_run(ctx, kernel, copy_units(ctx, words), "roofline", &data, 1, NULL,
                         &params, sizeof params, 4, &staging, wait_count, wait_list, event);
}

posenc_status posenc_cl_roofline(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                 uint64_t bytes, bool write_only)
{
    posenc_cl_context *state = ctx->backend_state;
    posenc__view view;
    posenc_cl_op run = {.kernel = POSENC__CL_COPY_U32, .launch = copy_launch, .op = &bytes};
    posenc__gpu_roofline_op(buf, offset, bytes, write_only, &view, &run.gpu);
    posenc__mutex_lock(&state->lock);
    posenc_status status = posenc_cl_run_op(ctx, &run, 0, NULL, NULL);
    posenc__mutex_unlock(&state->lock);
    return status;
}
