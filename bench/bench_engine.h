/* SPDX-License-Identifier: MIT */
/* `posenc bench` warm-up on an engine's own device: a context on a VkDevice or OpenCL queue the
 * bench makes itself, posenc_prepare, then the first record or enqueue against later ones. */
#ifndef POSENC_BENCH_ENGINE_H
#define POSENC_BENCH_ENGINE_H

#include <posenc/posenc.h>
#include <stdbool.h>
#include <stddef.h>

/* Later records or enqueues timed after the first; their median is reported. */
#define BENCH_ENGINE_LATER 9

typedef struct bench_engine_times {
    const char *call;        /* "posenc_vk_cmd_rope", "posenc_cl_enqueue_rope" */
    double context_seconds;  /* posenc_context_create on the engine's handles */
    double prepare_seconds;  /* posenc_prepare of the RoPE below */
    double first_seconds;    /* the first call after it */
    double later_seconds;    /* median of the next BENCH_ENGINE_LATER */
    uint64_t built_by_calls; /* kernels built or loaded by the calls (0 after a warm-up) */
} bench_engine_times;

/* Times the decode RoPE of the bench (q [1, 32, 128] and k [1, 8, 128] f32, in place) on the
 * device of `info` (Vulkan or OpenCL) through its interop header; each record goes into a
 * command buffer of its own, each enqueue after the previous one finished. `cache_dir` is the
 * kernel cache (OpenCL) or NULL. False, with the reason in `error`, where this build or this
 * machine has no such path (another backend, API absent, set-up failed). */
bool bench_engine_time(const posenc_device_info *info, const char *cache_dir,
                       bench_engine_times *times, char *error, size_t error_size);

/* Shared by the halves: the decode RoPE over one buffer of BENCH_ENGINE_BYTES (q, then k at
 * BENCH_ENGINE_K_OFFSET), and the median of `count` times (sorted in place). */
#define BENCH_ENGINE_K_OFFSET (32 * 128 * 4)
#define BENCH_ENGINE_BYTES (BENCH_ENGINE_K_OFFSET + 8 * 128 * 4)
posenc_rope_desc bench_engine_rope(posenc_buffer *buffer);
double bench_engine_median(double *seconds, size_t count);
/* posenc_context_stats' kernels_built + kernels_loaded. */
uint64_t bench_engine_kernels(posenc_context *context);
/* Keeps call `i`'s time: the first in times->first_seconds, the later ones in `later` for their
 * median. */
void bench_engine_keep(bench_engine_times *times, double *later, int i, double seconds);
/* The end of a timing, whatever happened: on success the later calls' median and the kernels
 * built since `kernels_before`, else the failure of `call` in `error`; then the buffer and the
 * context are destroyed. NULL, or `error`. */
const char *bench_engine_finish(posenc_context *context, posenc_buffer *buffer,
                                posenc_status status, const char *call, uint64_t kernels_before,
                                double *later, bench_engine_times *times, char *error,
                                size_t error_size);

/* The two halves, each in its own file; false with "not in this build" where the API's headers
 * were absent at build time. */
bool bench_engine_time_vulkan(const posenc_device_info *info, bench_engine_times *times,
                              char *error, size_t error_size);
bool bench_engine_time_opencl(const posenc_device_info *info, const char *cache_dir,
                              bench_engine_times *times, char *error, size_t error_size);

#endif
