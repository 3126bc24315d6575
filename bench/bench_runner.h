/* SPDX-License-Identifier: MIT */
/* How the bench times what bench_cases.c sets up: warm-up runs, then timed runs of batches of
 * calls, each next to a batch of copies; and a device's first call (a fresh context with an
 * empty and a filled kernel cache, a posenc_prepare warm-up, an engine's own device and a fresh
 * process). The figures it gives, which bench_report.c prints. */
#ifndef POSENC_BENCH_RUNNER_H
#define POSENC_BENCH_RUNNER_H

#include <posenc/posenc.h>
#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "bench_cases.h"
#include "bench_engine.h"
#include "bench_fresh_process.h"

/* Calls timed after the first, for the warm-up figures. */
#define BENCH_LATER_CALLS 9

/* Data caches of the host CPU, 0 where unknown. */
typedef struct bench_caches {
    uint64_t l1d, l2, l3;
} bench_caches;

typedef struct bench_result {
    posenc_status status;  /* of the operation; not OK: `error` says why */
    char error[320];
    uint64_t bytes;        /* read + written per call */
    uint64_t footprint;    /* bytes of the tensors */
    uint32_t runs;
    uint32_t repeats;      /* calls per timed run */
    double median, p10, p90; /* seconds per call */
    bool has_copy;
    bool shaped_copy;      /* the copy is shaped like the operation (else: the tensors' bytes) */
    char copy_note[160];   /* why there is no copy figure */
    double copy_median, copy_p10, copy_p90;
    double ratio;          /* median over the runs of copy time / operation time */
    double ratio_p10, ratio_p90;
} bench_result;

typedef struct bench_first_call {
    posenc_status status;
    char error[320];
    double context_seconds;
    double first_op_seconds;
    bool has_warm;
    double warm_context_seconds;
    double warm_first_op_seconds;
    /* Warm-up: posenc_prepare on a fresh context, then the first call and later ones. */
    bool has_prepared;
    double prepare_seconds;
    double prepared_first_op_seconds;
    double later_op_seconds; /* median of BENCH_LATER_CALLS */
    /* The same on an engine's own device (GPU backends): records or enqueues. */
    bool has_engine;
    bench_engine_times engine;
    char engine_error[320];
    /* The same RoPE as a new process of its own makes it, the runtime's loading included. */
    bench_fresh_process fresh;
} bench_first_call;

/* The host CPU's data caches (support_cpu_caches). */
bench_caches bench_read_caches(void);

/* "  <device>: <what> (done/total)" on stderr, over the previous one, where options->progress;
 * bench_progress_clear wipes it. */
void bench_progress(const bench_options *options, const char *device, const char *what,
                    unsigned done, unsigned total);
void bench_progress_clear(const bench_options *options);

/* A context on exactly that device (no fallback, the environment ignored), with the kernel
 * cache `cache_dir` and the Vulkan pipeline cache `pipeline_cache` (either may be NULL). */
posenc_status bench_open_device(const posenc_device_info *info, const bench_options *options,
                                const char *cache_dir, const char *pipeline_cache,
                                posenc_context **context);

/* Times row `c` (the `index`th of the device's rows, for the progress line) on `context`:
 * warm-up runs of the operation and of its copy, then timed runs, each a batch of calls and a
 * batch of as many copies. */
void bench_run_case(posenc_context *context, const bench_case *c, const bench_options *options,
                    const char *device, unsigned index, bench_result *result);

/* The first-call figures of a device: cold with the empty kernel cache `dir` (NULL: none, as on
 * the CPU) and warm with the cache the cold run filled, the posenc_prepare warm-up, an engine's
 * device and the fresh process that `selector` names. */
void bench_measure_first_call(const posenc_device_info *info, const bench_options *options,
                              const char *selector, const char *dir, bench_first_call *first);

#endif
