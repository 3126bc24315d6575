/* SPDX-License-Identifier: MIT */
/* `posenc bench` warm-up on an engine's device: the choice of API, and what both halves share
 * (bench_engine_vk.c, bench_engine_cl.c). */
#include "bench_engine.h"

#include "support.h"

#include <stdio.h>
#include <stdlib.h>

posenc_rope_desc bench_engine_rope(posenc_buffer *buffer)
{
    const int64_t q_shape[3] = {1, 32, 128}, k_shape[3] = {1, 8, 128};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, q_shape),
        .k = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, k_shape),
        .position_offset = 4095,
    };
    desc.k.offset = BENCH_ENGINE_K_OFFSET;
    return desc;
}

static int compare_seconds(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_engine_median(double *seconds, size_t count)
{
    qsort(seconds, count, sizeof seconds[0], compare_seconds);
    return seconds[count / 2];
}

uint64_t bench_engine_kernels(posenc_context *context)
{
    posenc_stats stats = {0};
    posenc_context_stats(context, &stats);
    return stats.kernels_built + stats.kernels_loaded;
}

void bench_engine_keep(bench_engine_times *times, double *later, int i, double seconds)
{
    if (i == 0)
        times->first_seconds = seconds;
    else
        later[i - 1] = seconds;
}

const char *bench_engine_finish(posenc_context *context, posenc_buffer *buffer,
                                posenc_status status, const char *call, uint64_t kernels_before,
                                double *later, bench_engine_times *times, char *error,
                                size_t error_size)
{
    if (status == POSENC_OK) {
        times->later_seconds = bench_engine_median(later, BENCH_ENGINE_LATER);
        times->built_by_calls = bench_engine_kernels(context) - kernels_before;
    } else {
        snprintf(error, error_size, "%s: %s: %s", call, posenc_status_name(status),
                 context ? posenc_context_last_error(context) : posenc_thread_last_error());
    }
    posenc_buffer_destroy(buffer);
    posenc_context_destroy(context);
    return status == POSENC_OK ? NULL : error;
}

bool bench_engine_time(const posenc_device_info *info, const char *cache_dir,
                       bench_engine_times *times, char *error, size_t error_size)
{
    if (info->backend == POSENC_BACKEND_VULKAN)
        return bench_engine_time_vulkan(info, times, error, error_size);
    if (info->backend == POSENC_BACKEND_OPENCL)
        return bench_engine_time_opencl(info, cache_dir, times, error, error_size);
    snprintf(error, error_size, "no engine interop on the %s backend",
             posenc_backend_name(info->backend));
    return false;
}

#if !defined(POSENC_BENCH_VULKAN_ENGINE)
bool bench_engine_time_vulkan(const posenc_device_info *info, bench_engine_times *times,
                              char *error, size_t error_size)
{
    (void)info;
    (void)times;
    snprintf(error, error_size, "not in this build (built without the Vulkan headers)");
    return false;
}
#endif

#if !defined(POSENC_BENCH_OPENCL_ENGINE)
bool bench_engine_time_opencl(const posenc_device_info *info, const char *cache_dir,
                              bench_engine_times *times, char *error, size_t error_size)
{
    (void)info;
    (void)cache_dir;
    (void)times;
    snprintf(error, error_size, "not in this build (built without the OpenCL headers)");
    return false;
}
#endif
