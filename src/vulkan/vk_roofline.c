/* SPDX-License-Identifier: MIT */
/* The copy roofline of `posenc bench` on Vulkan (shaders/copy.comp): the same bytes, the same
 * kind of dispatch and the same splitting as the operations, with nothing but loads and stores. */
#include "vulkan/vk_internal.h"

#include "posenc_kernel_params.h"

typedef struct copy_job {
    uint64_t bytes;
    bool write_only;
    posenc_vk_kernel kernel; /* chosen by where the range lies */
} copy_job;

static posenc_status record_copy(posenc_context *ctx, const posenc_vk_box *box,
                                 const posenc_vk_windows *windows, void *user)
{
    const copy_job *job = user;
    posenc__copy_push push = {
        .offset = windows->first[0],
        .count = (uint32_t)box->count[0],
        .mask = 0,
        .flags = job->write_only ? POSENC_COPY_FLAG_WRITE_ONLY : 0u,
    };
    return posenc_vk_dispatch(ctx, job->kernel, windows, &push, sizeof push,
                              (uint64_t)box->count[0]);
}

static posenc_status record_range(posenc_context *ctx, const void *range,
                                  const posenc_vk_place *place)
{
    copy_job job = *(const copy_job *)range;
    bool vec4 = place->offset % 16 == 0 && job.bytes % 16 == 0;
    uint32_t element = vec4 ? 16 : 4;
    posenc__gpu_extent extent = {
        .bound = true,
        .strides = {element, 0, 0},
        .inner = element,
        .element_size = element,
        .name = "buffer",
    };
    job.kernel = vec4 ? POSENC__SPIRV_COPY_U32X4 : POSENC__SPIRV_COPY_U32;
    int64_t shape[3] = {(int64_t)(job.bytes / element), 1, 1};
    return posenc_vk_split(ctx, &extent, place, 1, shape, 1, 0, record_copy, &job);
}

posenc_status posenc_vk_roofline(posenc_context *ctx, posenc_buffer *buf, uint64_t offset,
                                 uint64_t bytes, bool write_only)
{
    posenc__view view;
    copy_job job = {.bytes = bytes, .write_only = write_only};
    posenc_vk_op run = {.record = record_range, .op = &job};
    posenc__gpu_roofline_op(buf, offset, bytes, write_only, &view, &run.gpu);
    return posenc_vk_run(ctx, &run);
}
