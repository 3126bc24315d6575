/* SPDX-License-Identifier: MIT */
/* `posenc bench`: times RoPE and sinusoidal encodings on every selected device next to a plain
 * copy of the same bytes on the same device (the backend's roofline kernel), and the first-call
 * latency of each device (context creation, first operation including kernel builds, with a cold
 * and a warm kernel cache on GPU backends). Text or --json. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_engine.h"
#include "bench_fresh_process.h"
#include "bench_conversion.h"
#include "bench_kv_cache.h"
#include "bench_memory.h"
#include "bench_stats.h"
#include "cli.h"
#include "device.h"
#include <posenc/posenc_diagnostics.h>

static const char bench_help[] =
    "usage: posenc bench [--device SEL]... [--threads N] [--runs N] [--quick] [--json]\n"
    "\n"
    "Times each operation on each selected device (default: every device found, the native CPU\n"
    "path first) and, in the same run on the same device, a plain copy of the same bytes in the\n"
    "same mode: read and write in place for RoPE, write-only for tables. Rows:\n"
    "  rope decode    q [1, 32, 128] and k [1, 8, 128] in place: one token, grouped-query\n"
    "  rope prefill   q [4096, 32, 128] and k [4096, 8, 128] in place\n"
    "                 (each in f32, f16 and bf16, NEOX and GPT-J pairing)\n"
    "  rope call      q [1, 1, 2] in place, f32: one pair, so the time is what a call costs\n"
    "                 besides its work (checks, frequency table, dispatch, one angle)\n"
    "  sinusoidal table       [4096, 1024], interleaved, f32 and f16\n"
    "  sinusoidal timesteps   256 float diffusion timesteps, d_model 320, [sin | cos], shift 1\n"
    "Each row gives the median time of the timed runs after warm-up runs, their spread (10th to\n"
    "90th percentile), the bandwidth (bytes read + written / median time), the copy's bandwidth\n"
    "(its median and spread), the ratio copy time / operation time (the median over the runs and\n"
    "its 10th to 90th percentile; each run times the operation and its copy back to back, in\n"
    "alternating order), and where the tensors live: L1, L2, L3, DRAM, or L3+DRAM for tensors\n"
    "between one and two times the last-level cache, partly cached from call to call (the CPU's\n"
    "caches also hold for software devices). The copy runs on the same device with the same\n"
    "access pattern: on the native CPU path it is shaped like the operation (the same elements,\n"
    "order, threads and split over them, read and written back in place, or written only for\n"
    "tables); elsewhere it copies the tensors' bytes. The ratio is what counts: 1.0 means the\n"
    "operation runs as fast as memory allows. Backends without a copy kernel show '-' there.\n"
    "First call: context creation, then the first RoPE (decode, f32) including kernel builds;\n"
    "GPU backends twice, with an empty kernel cache directory and again with it filled.\n"
    "Fresh process: `posenc rope` on that decode step, run as a new process and timed from its\n"
    "start to its exit (median of 5 runs after one that fills the default kernel cache; 3\n"
    "with --quick): the first call as an application makes it, the runtime's loading included.\n"
    "Warm-up: on a fresh context, posenc_prepare for that RoPE, then its first call and the\n"
    "median of the next 9 (equal when the first call builds nothing); and on GPU devices the\n"
    "same on a Vulkan device or OpenCL queue the bench makes itself, as an engine's, with the\n"
    "first posenc_vk_cmd_rope / posenc_cl_enqueue_rope against the later ones.\n"
    "Where the tensors live, on GPU devices with unified memory: the same RoPE (f32, in place,\n"
    "decode, a 64-token chunk and a prefill) on a device buffer, a page-aligned host tensor and\n"
    "a buffer wrapping page-aligned host memory, timed in turn in each run; 'vs buffer' is the\n"
    "device buffer's time / the form's time (1.0: host memory costs nothing extra).\n"
    "Paged KV cache, on the native CPU path: RoPE of q in place with k and v written into\n"
    "caches of 4096 slots in one call (k_cache, slot_mapping, v_cache), against RoPE of q and k\n"
    "in place followed by a copy of each token's k and v rows into the caches; 'saves' is the\n"
    "separate time / the fused time, for a decode step and a 4096-token prefill.\n"
    "16-bit floor, on the native CPU path: the f16 and bf16 decode and prefill tensors in place,\n"
    "timed in turn in each run as the copy, the floor (the copy with each element converted to\n"
    "f32 and back: what a 16-bit RoPE costs before any arithmetic) and RoPE NeoX and GPT-J;\n"
    "'vs copy' is the copy time / the floor time, 'neox' and 'gptj' the floor time / RoPE's.\n"
    "\n"
    "flags:\n"
    "  --device SEL   cpu, vulkan, vulkan:1, opencl:0 or a name substring; repeat for more\n"
    "  --threads N    CPU worker threads (default: every core this process may use)\n"
    "  --runs N       timed runs per row, 3..1000 (default: 21, more until a row's calls last\n"
    "                 0.25 s; --quick 5)\n"
    "  --quick        fewer and shorter runs: a rough figure in a few seconds per device\n"
    "  --json         one JSON object on stdout instead of the table\n"
    "  --help         this text\n"
    "\n"
    "A progress line is shown on stderr when it is a terminal.\n";

#define Q_HEADS 32
#define K_HEADS 8
#define HEAD_DIM 128
#define PREFILL_TOKENS 4096
#define DECODE_POSITION 4095
#define TABLE_ROWS 4096
#define TABLE_D_MODEL 1024
#define TIMESTEPS 256
#define TIMESTEP_D_MODEL 320
#define MAX_SELECTORS 16
#define LATER_CALLS 9
#define MAX_RUNS 1000

typedef enum bench_kind {
    BENCH_ROPE = 0,
    BENCH_TABLE = 1,
    BENCH_TIMESTEPS = 2,
} bench_kind;

/* The heads of a RoPE row. */
typedef struct bench_heads {
    int64_t q, k, dim;
} bench_heads;

static const bench_heads layer_heads = {Q_HEADS, K_HEADS, HEAD_DIM};
/* One pair of one q head: next to no work, so the row times a call's fixed cost. */
static const bench_heads one_pair = {1, 0, 2};

typedef struct bench_case {
    const char *name;
    bench_kind kind;
    int64_t rows; /* tokens or table rows */
    posenc_dtype dtype;
    posenc_rope_style style;
    const bench_heads *heads; /* RoPE; NULL for the tables */
} bench_case;

#define F32 POSENC_DTYPE_F32
#define F16 POSENC_DTYPE_F16
#define BF16 POSENC_DTYPE_BF16
#define NEOX POSENC_ROPE_NEOX
#define GPTJ POSENC_ROPE_GPTJ

static const bench_case bench_cases[] = {
    {"rope decode", BENCH_ROPE, 1, F32, NEOX, &layer_heads},
    {"rope decode", BENCH_ROPE, 1, F32, GPTJ, &layer_heads},
    {"rope decode", BENCH_ROPE, 1, F16, NEOX, &layer_heads},
    {"rope decode", BENCH_ROPE, 1, F16, GPTJ, &layer_heads},
    {"rope decode", BENCH_ROPE, 1, BF16, NEOX, &layer_heads},
    {"rope decode", BENCH_ROPE, 1, BF16, GPTJ, &layer_heads},
    {"rope call", BENCH_ROPE, 1, F32, NEOX, &one_pair},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, F32, NEOX, &layer_heads},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, F32, GPTJ, &layer_heads},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, F16, NEOX, &layer_heads},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, F16, GPTJ, &layer_heads},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, BF16, NEOX, &layer_heads},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, BF16, GPTJ, &layer_heads},
    {"sinusoidal table", BENCH_TABLE, TABLE_ROWS, F32, NEOX, NULL},
    {"sinusoidal table", BENCH_TABLE, TABLE_ROWS, F16, NEOX, NULL},
    {"sinusoidal timesteps", BENCH_TIMESTEPS, TIMESTEPS, F32, NEOX, NULL},
};
#define CASE_COUNT (sizeof bench_cases / sizeof bench_cases[0])

typedef struct bench_options {
    const char *selectors[MAX_SELECTORS];
    uint32_t selector_count;
    uint32_t threads;
    uint32_t runs;
    uint32_t warmup;
    double sample_seconds; /* a timed run repeats the call until it lasts about this long */
    double min_row_seconds; /* without --runs: more runs until a row's calls last this long */
    bool runs_given;
    bool quick;
    bool json;
    bool progress;
} bench_options;

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
    double later_op_seconds; /* median of LATER_CALLS */
    /* The same on an engine's own device (GPU backends): records or enqueues. */
    bool has_engine;
    bench_engine_times engine;
    char engine_error[320];
    /* The same RoPE as a new process of its own makes it, the runtime's loading included. */
    bench_fresh_process fresh;
} bench_first_call;

/* ---- time, caches, temporary directories ---- */

static bench_caches bench_read_caches(void)
{
    bench_caches caches = {0};
    support_cpu_caches(&caches.l1d, &caches.l2, &caches.l3);
    return caches;
}

/* Where the tensors live while an operation runs: the smallest cache that holds them, "DRAM"
 * when they are at least twice the last level (a streaming pass then finds nothing of its
 * previous pass cached), and "L3+DRAM" in between, where part of them stays cached from one
 * call to the next and both the operation and its copy run faster than from memory alone. */
static const char *bench_regime(const bench_caches *caches, const posenc_device_info *info,
                                uint64_t footprint)
{
    if (!info->unified_memory)
        return "VRAM";
    if (caches->l1d && footprint <= caches->l1d)
        return "L1";
    if (caches->l2 && footprint <= caches->l2)
        return "L2";
    if (caches->l3 && footprint <= caches->l3)
        return "L3";
    if (caches->l3 && footprint < 2 * caches->l3)
        return "L3+DRAM";
    return caches->l3 ? "DRAM" : "?";
}

/* A fresh empty directory for a cold kernel cache; false where that is not possible. */
static bool bench_make_temp_dir(char *path, size_t size)
{
    return support_temp_directory_create("posenc-bench", path, size);
}

/* ---- progress on a terminal ---- */

static void bench_progress(const bench_options *options, const char *device, const char *what,
                           unsigned done, unsigned total)
{
    if (!options->progress)
        return;
    fprintf(stderr, "\r\033[K  %s: %s (%u/%u)", device, what, done, total);
    fflush(stderr);
}

static void bench_progress_clear(const bench_options *options)
{
    if (options->progress) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
}

/* ---- one workload ---- */

typedef struct bench_workload {
    posenc_context *context;
    const bench_case *c;
    posenc_buffer *data;      /* q then k (RoPE), or the output table */
    posenc_buffer *positions; /* timesteps */
    uint64_t data_bytes;
    posenc_rope_desc rope;
    posenc_sinusoidal_desc sinusoidal;
    bool shaped_copy; /* the backend's copy shaped like the operation, until it says it has none */
} bench_workload;

static void fill_random(void *data, uint64_t bytes, posenc_dtype dtype, uint32_t seed)
{
    uint32_t state = seed * 2654435761u + 12345u;
    if (dtype == F32) {
        float *f = data;
        for (uint64_t i = 0; i < bytes / 4; i++) {
            state = state * 1664525u + 1013904223u;
            f[i] = (float)(state >> 8) * 0x1p-23f - 1.0f;
        }
    } else {
        /* Values in [1, 2) of f16 (0x3c00..0x3fff) or bf16 (0x3f80..0x3fff), random sign. */
        uint16_t *h = data;
        for (uint64_t i = 0; i < bytes / 2; i++) {
            state = state * 1664525u + 1013904223u;
            uint16_t base = dtype == F16 ? 0x3c00 : 0x3f80, span = dtype == F16 ? 0x400 : 0x80;
            h[i] = (uint16_t)((state >> 31 ? 0x8000u : 0u) | (base + (state >> 8) % span));
        }
    }
}

static void workload_free(bench_workload *w)
{
    posenc_buffer_destroy(w->data);
    posenc_buffer_destroy(w->positions);
    w->data = w->positions = NULL;
}

/* Buffers and the descriptor of one case. */
static posenc_status workload_prepare(bench_workload *w, posenc_context *context,
                                      const bench_case *c, bench_result *result)
{
    memset(w, 0, sizeof *w);
    w->context = context;
    w->c = c;
    w->shaped_copy = true;
    size_t element = posenc_dtype_size(c->dtype);
    uint64_t q_bytes = 0, k_bytes = 0, d_model = 0;
    const bench_heads *heads = c->heads;
    if (c->kind == BENCH_ROPE) {
        q_bytes = (uint64_t)(c->rows * heads->q * heads->dim) * element;
        k_bytes = (uint64_t)(c->rows * heads->k * heads->dim) * element;
        w->data_bytes = q_bytes + k_bytes;
        result->bytes = 2 * w->data_bytes; /* in place: read and write */
    } else {
        d_model = c->kind == BENCH_TABLE ? TABLE_D_MODEL : TIMESTEP_D_MODEL;
        w->data_bytes = (uint64_t)c->rows * d_model * element;
        result->bytes = w->data_bytes; /* write only */
    }
    result->footprint = w->data_bytes;

    void *host = malloc((size_t)w->data_bytes);
    if (!host)
        return POSENC_OUT_OF_MEMORY;
    fill_random(host, w->data_bytes, c->dtype, (uint32_t)c->rows);
    posenc_buffer_desc desc = {.size = w->data_bytes, .initial_data = host};
    posenc_status status = posenc_buffer_create(context, &desc, &w->data);
    free(host);
    if (status != POSENC_OK)
        return status;

    if (c->kind == BENCH_ROPE) {
        int64_t q_shape[3] = {c->rows, heads->q, heads->dim};
        int64_t k_shape[3] = {c->rows, heads->k, heads->dim};
        w->rope.q = posenc_tensor_of_buffer(w->data, c->dtype, 3, q_shape);
        if (heads->k) {
            w->rope.k = posenc_tensor_of_buffer(w->data, c->dtype, 3, k_shape);
            w->rope.k.offset = q_bytes;
        }
        w->rope.style = c->style;
        w->rope.theta = 500000.0;
        w->rope.position_offset = c->rows == 1 ? DECODE_POSITION : 0;
        return POSENC_OK;
    }
    int64_t shape[2] = {c->rows, (int64_t)d_model};
    w->sinusoidal.out = posenc_tensor_of_buffer(w->data, c->dtype, 2, shape);
    if (c->kind == BENCH_TABLE)
        return POSENC_OK;
    float timesteps[TIMESTEPS];
    uint32_t state = 7;
    for (int i = 0; i < TIMESTEPS; i++) {
        state = state * 1664525u + 1013904223u;
        timesteps[i] = (float)(state >> 8) * (1000.0f / 16777216.0f);
    }
    posenc_buffer_desc positions_desc = {.size = sizeof timesteps, .initial_data = timesteps};
    status = posenc_buffer_create(context, &positions_desc, &w->positions);
    if (status != POSENC_OK)
        return status;
    int64_t positions_shape[1] = {TIMESTEPS};
    w->sinusoidal.positions =
        posenc_tensor_of_buffer(w->positions, POSENC_DTYPE_F32, 1, positions_shape);
    w->sinusoidal.layout = POSENC_SINUSOIDAL_SIN_COS;
    w->sinusoidal.freq_shift = 1.0;
    return POSENC_OK;
}

static posenc_status workload_call(const bench_workload *w)
{
    return w->c->kind == BENCH_ROPE ? posenc_rope(w->context, &w->rope)
                                    : posenc_sinusoidal(w->context, &w->sinusoidal);
}

/* The copy shaped like the operation where the backend has one (the same elements in the same
 * order on the same threads with the same split), else a copy of the tensors' bytes. */
static posenc_status workload_copy(bench_workload *w)
{
    if (w->shaped_copy) {
        posenc_status status =
            w->c->kind == BENCH_ROPE
                ? posenc_diagnostics_roofline_rope(w->context, &w->rope)
                : posenc_diagnostics_roofline_sinusoidal(w->context, &w->sinusoidal);
        if (status != POSENC_UNSUPPORTED)
            return status;
        w->shaped_copy = false;
    }
    return posenc_diagnostics_roofline(w->context, w->data, 0, w->data_bytes,
                                       w->c->kind != BENCH_ROPE);
}

static void case_label(const bench_case *c, char *text, size_t size)
{
    if (c->kind == BENCH_ROPE)
        snprintf(text, size, "%s %s %s", c->name, posenc_dtype_name(c->dtype),
                 posenc_rope_style_name(c->style));
    else
        snprintf(text, size, "%s %s", c->name, posenc_dtype_name(c->dtype));
}

/* A batch of `repeats` calls of the operation (copy false) or of its copy; seconds per call. */
static double time_batch(bench_workload *w, bool copy, uint32_t repeats, posenc_status *status)
{
    double start = support_seconds_now();
    for (uint32_t r = 0; r < repeats && *status == POSENC_OK; r++)
        *status = copy ? workload_copy(w) : workload_call(w);
    return (support_seconds_now() - start) / repeats;
}

/* Warm-up runs of the operation and of its copy (every page of the tensors mapped, both paths'
 * code and tables hot), then timed runs, each a batch of calls lasting about sample_seconds
 * and a batch of as many copies, so both see the same machine state. Without --runs, a row
 * takes at least min_row_seconds of operation time, so that the medians of large tensors rest
 * on more than a handful of calls. */
static void run_case(posenc_context *context, const bench_case *c, const bench_options *options,
                     const char *device, unsigned index, bench_result *result)
{
    memset(result, 0, sizeof *result);
    bench_workload w;
    char label[96];
    case_label(c, label, sizeof label);
    bench_progress(options, device, label, index + 1, (unsigned)CASE_COUNT);

    posenc_status status = workload_prepare(&w, context, c, result);
    posenc_status copy_status = POSENC_OK;
    for (uint32_t i = 0; status == POSENC_OK && i < options->warmup; i++) {
        status = workload_call(&w);
        if (copy_status == POSENC_OK)
            copy_status = workload_copy(&w);
    }
    double single = 0.0;
    if (status == POSENC_OK)
        single = time_batch(&w, false, 1, &status);
    if (status != POSENC_OK) {
        result->status = status;
        bench_format_error(context, status, result->error, sizeof result->error);
        workload_free(&w);
        return;
    }
    uint32_t repeats = single > 0.0 ? (uint32_t)(options->sample_seconds / single) : 1000;
    repeats = repeats < 1 ? 1 : repeats > 100000 ? 100000 : repeats;
    result->repeats = repeats;
    uint32_t runs = options->runs;
    if (!options->runs_given && single > 0.0) {
        double wanted = options->min_row_seconds / (single * repeats);
        runs = wanted > MAX_RUNS ? MAX_RUNS : wanted > runs ? (uint32_t)wanted + 1 : runs;
    }

    if (copy_status == POSENC_OK)
        copy_status = workload_copy(&w);
    result->has_copy = copy_status == POSENC_OK;
    result->shaped_copy = w.shaped_copy;
    if (!result->has_copy)
        bench_format_error(context, copy_status, result->copy_note, sizeof result->copy_note);

    /* Odd runs time the copy first: neither always finds the caches as the other left them. */
    double times[MAX_RUNS], copies[MAX_RUNS], ratios[MAX_RUNS];
    uint32_t run = 0;
    for (; run < runs && status == POSENC_OK; run++) {
        bool copy_first = result->has_copy && (run & 1);
        if (copy_first)
            copies[run] = time_batch(&w, true, repeats, &copy_status);
        times[run] = time_batch(&w, false, repeats, &status);
        if (result->has_copy && !copy_first)
            copies[run] = time_batch(&w, true, repeats, &copy_status);
        if (result->has_copy && copy_status != POSENC_OK) {
            result->has_copy = false;
            bench_format_error(context, copy_status, result->copy_note, sizeof result->copy_note);
        }
    }
    if (status != POSENC_OK) {
        result->status = status;
        bench_format_error(context, status, result->error, sizeof result->error);
        workload_free(&w);
        return;
    }
    result->runs = run;
    if (result->has_copy) {
        /* Each run against its own copy: drifts in what else the machine does cancel out,
         * where a ratio of two medians would keep them. */
        for (uint32_t i = 0; i < run; i++)
            ratios[i] = copies[i] / times[i];
        bench_spread(ratios, run, &result->ratio, &result->ratio_p10, &result->ratio_p90);
        bench_spread(copies, run, &result->copy_median, &result->copy_p10, &result->copy_p90);
    }
    bench_spread(times, run, &result->median, &result->p10, &result->p90);
    workload_free(&w);
}

/* ---- first call ---- */

static posenc_status open_device(const posenc_device_info *info, const bench_options *options,
                                 const char *cache_dir, const char *pipeline_cache,
                                 posenc_context **context)
{
    char selector[16];
    snprintf(selector, sizeof selector, "%u", info->backend_index);
    posenc_context_desc desc = {
        .backend = info->backend,
        .device = selector,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV |
                 POSENC_CONTEXT_ALLOW_SOFTWARE,
        .num_threads = options->threads,
        .cache_dir = cache_dir,
        .pipeline_cache_path = pipeline_cache,
    };
    return posenc_context_create(&desc, context);
}

/* Context creation and the first decode RoPE, on a fresh context. */
static posenc_status time_first_call(const posenc_device_info *info, const bench_options *options,
                                     const char *cache_dir, const char *pipeline_cache,
                                     double *context_seconds, double *op_seconds, char *error,
                                     size_t error_size)
{
    posenc_context *context = NULL;
    double start = support_seconds_now();
    posenc_status status = open_device(info, options, cache_dir, pipeline_cache, &context);
    *context_seconds = support_seconds_now() - start;
    if (status != POSENC_OK) {
        const char *detail = posenc_thread_last_error();
        snprintf(error, error_size, "%s: %s", posenc_status_name(status),
                 detail && *detail ? detail : posenc_status_string(status));
        return status;
    }
    bench_result unused;
    bench_workload w;
    status = workload_prepare(&w, context, &bench_cases[0], &unused);
    if (status == POSENC_OK) {
        start = support_seconds_now();
        status = workload_call(&w);
        *op_seconds = support_seconds_now() - start;
    }
    if (status != POSENC_OK)
        bench_format_error(context, status, error, error_size);
    workload_free(&w);
    posenc_context_destroy(context);
    return status;
}

/* A fresh context made ready by posenc_prepare (in the cache state `dir` is in), then its first
 * decode RoPE and the median of the later ones: what a first frame costs after a warm-up. */
static bool time_prepared_call(const posenc_device_info *info, const bench_options *options,
                               const char *cache_dir, const char *pipeline_cache,
                               bench_first_call *first)
{
    posenc_context *context = NULL;
    if (open_device(info, options, cache_dir, pipeline_cache, &context) != POSENC_OK)
        return false;
    bench_result unused;
    bench_workload w;
    posenc_status status = workload_prepare(&w, context, &bench_cases[0], &unused);
    posenc_prepare_desc prepare = {.rope = &w.rope, .rope_count = 1};
    double start = support_seconds_now();
    if (status == POSENC_OK)
        status = posenc_prepare(context, &prepare);
    first->prepare_seconds = support_seconds_now() - start;
    double later[LATER_CALLS];
    for (int i = 0; i <= LATER_CALLS && status == POSENC_OK; i++) {
        start = support_seconds_now();
        status = workload_call(&w);
        double seconds = support_seconds_now() - start;
        if (i == 0)
            first->prepared_first_op_seconds = seconds;
        else
            later[i - 1] = seconds;
    }
    if (status == POSENC_OK) {
        bench_spread(later, LATER_CALLS, &first->later_op_seconds, NULL, NULL);
    }
    workload_free(&w);
    posenc_context_destroy(context);
    return status == POSENC_OK;
}

/* Cold: a fresh context with the empty kernel cache `dir` (NULL: none, as on the CPU); warm:
 * again with the cache the cold run filled. */
static void measure_first_call(const posenc_device_info *info, const bench_options *options,
                               const char *selector, const char *dir, bench_first_call *first)
{
    memset(first, 0, sizeof *first);
    char pipeline[600] = "";
    if (dir && info->backend == POSENC_BACKEND_VULKAN)
        snprintf(pipeline, sizeof pipeline, "%s/pipeline-cache.bin", dir);
    first->status = time_first_call(info, options, dir, pipeline[0] ? pipeline : NULL,
                                    &first->context_seconds, &first->first_op_seconds,
                                    first->error, sizeof first->error);
    if (first->status == POSENC_OK && dir) {
        char ignored[320];
        first->has_warm = time_first_call(info, options, dir, pipeline[0] ? pipeline : NULL,
                                          &first->warm_context_seconds,
                                          &first->warm_first_op_seconds, ignored,
                                          sizeof ignored) == POSENC_OK;
    }
    if (first->status == POSENC_OK)
        first->has_prepared = time_prepared_call(info, options, dir,
                                                 pipeline[0] ? pipeline : NULL, first);
    if (first->status == POSENC_OK && dir)
        first->has_engine = bench_engine_time(info, dir, &first->engine, first->engine_error,
                                              sizeof first->engine_error);
    if (first->status == POSENC_OK)
        bench_fresh_process_run(selector, options->quick ? 3 : 5, &first->fresh);
}

/* ---- output ---- */

static void shape_text(const bench_case *c, char *text, size_t size)
{
    if (c->kind == BENCH_ROPE)
        snprintf(text, size, "%lldx(%lld+%lld)x%lld", (long long)c->rows, (long long)c->heads->q,
                 (long long)c->heads->k, (long long)c->heads->dim);
    else
        snprintf(text, size, "%lldx%d", (long long)c->rows,
                 c->kind == BENCH_TABLE ? TABLE_D_MODEL : TIMESTEP_D_MODEL);
}

static void print_device_header(const posenc_device_info *info, const char *selector,
                                const char *variant, const bench_options *options)
{
    printf("\n%s  %s  [%s]", selector, info->name, info->driver);
    if (variant) {
        if (options->threads)
            printf("  %s kernels, %u threads", variant, options->threads);
        else
            printf("  %s kernels, %u threads (all cores)", variant, info->compute_units);
    }
    printf("\n");
}

static void print_first_call(const posenc_device_info *info, const bench_first_call *first)
{
    if (first->status != POSENC_OK) {
        printf("  first call: failed: %s\n", first->error);
        return;
    }
    char a[32], b[32];
    bench_format_time(first->context_seconds, a, sizeof a);
    bench_format_time(first->first_op_seconds, b, sizeof b);
    printf("  first call: context %s, first RoPE %s", a, b);
    if (first->has_warm) {
        bench_format_time(first->warm_context_seconds, a, sizeof a);
        bench_format_time(first->warm_first_op_seconds, b, sizeof b);
        printf(" (empty kernel cache); with the cache filled: context %s, first RoPE %s", a, b);
    }
    printf("\n");
    bench_fresh_process_print(&first->fresh, info->backend == POSENC_BACKEND_VULKAN);
    if (first->has_prepared) {
        char c[32];
        bench_format_time(first->prepare_seconds, a, sizeof a);
        bench_format_time(first->prepared_first_op_seconds, b, sizeof b);
        bench_format_time(first->later_op_seconds, c, sizeof c);
        printf("  warm-up: posenc_prepare %s%s, then first RoPE %s, later RoPE %s (median of "
               "%d)\n",
               a, first->has_warm ? " (cache filled)" : "", b, c, LATER_CALLS);
    }
    if (first->has_engine) {
        const bench_engine_times *e = &first->engine;
        char c[32], d[32];
        bench_format_time(e->context_seconds, a, sizeof a);
        bench_format_time(e->prepare_seconds, b, sizeof b);
        bench_format_time(e->first_seconds, c, sizeof c);
        bench_format_time(e->later_seconds, d, sizeof d);
        printf("  warm-up on an engine's device: context %s, posenc_prepare %s, then first %s "
               "%s, later %s (median of %d); kernels built by the calls: %llu\n",
               a, b, e->call, c, d, BENCH_ENGINE_LATER, (unsigned long long)e->built_by_calls);
    } else if (first->engine_error[0]) {
        printf("  warm-up on an engine's device: not measured: %s\n", first->engine_error);
    }
    printf("  %-22s %-5s %-5s %-16s %9s %-7s %11s %7s %8s %9s %7s %7s %-11s\n", "operation",
           "dtype", "style", "shape", "bytes", "cache", "median", "spread", "GB/s", "copy GB/s",
           "spread", "vs copy", "p10-p90");
}

static void print_row(const bench_case *c, const bench_result *r, const char *regime)
{
    char shape[48], bytes[32], median[32], spread[16], gbps[16], copy[16], copy_spread[16],
        ratio[16], ratio_range[24];
    shape_text(c, shape, sizeof shape);
    cli_format_bytes(r->bytes, bytes, sizeof bytes);
    const char *style = c->kind == BENCH_ROPE ? posenc_rope_style_name(c->style) : "-";
    if (r->status != POSENC_OK) {
        printf("  %-22s %-5s %-5s %-16s %9s %-7s failed: %s\n", c->name,
               posenc_dtype_name(c->dtype), style, shape, bytes, regime, r->error);
        return;
    }
    bench_format_time(r->median, median, sizeof median);
    snprintf(spread, sizeof spread, "+-%.0f%%", 50.0 * (r->p90 - r->p10) / r->median);
    snprintf(gbps, sizeof gbps, "%.1f", (double)r->bytes / r->median * 1e-9);
    if (r->has_copy) {
        snprintf(copy, sizeof copy, "%.1f", (double)r->bytes / r->copy_median * 1e-9);
        snprintf(copy_spread, sizeof copy_spread, "+-%.0f%%",
                 50.0 * (r->copy_p90 - r->copy_p10) / r->copy_median);
        snprintf(ratio, sizeof ratio, "%.2f", r->ratio);
        snprintf(ratio_range, sizeof ratio_range, "%.2f-%.2f", r->ratio_p10, r->ratio_p90);
    } else {
        snprintf(copy, sizeof copy, "-");
        snprintf(copy_spread, sizeof copy_spread, "-");
        snprintf(ratio, sizeof ratio, "-");
        snprintf(ratio_range, sizeof ratio_range, "-");
    }
    printf("  %-22s %-5s %-5s %-16s %9s %-7s %11s %7s %8s %9s %7s %7s %-11s\n", c->name,
           posenc_dtype_name(c->dtype), style, shape, bytes, regime, median, spread, gbps, copy,
           copy_spread, ratio, ratio_range);
}

static void print_json_device(const posenc_device_info *info, const char *selector,
                              const char *variant, const bench_options *options,
                              const bench_first_call *first, const bench_result *results,
                              const bench_caches *caches, bool first_device)
{
    printf("%s\n    {\"selector\": ", first_device ? "" : ",");
    bench_print_json_string(selector);
    printf(", \"name\": ");
    bench_print_json_string(info->name);
    printf(", \"backend\": ");
    bench_print_json_string(posenc_backend_name(info->backend));
    printf(", \"driver\": ");
    bench_print_json_string(info->driver);
    if (variant) {
        printf(", \"cpu_variant\": ");
        bench_print_json_string(variant);
        printf(", \"threads\": %u", options->threads ? options->threads : info->compute_units);
    }
    printf(",\n     \"first_call\": {\"ok\": %s", first->status == POSENC_OK ? "true" : "false");
    if (first->status == POSENC_OK) {
        printf(", \"context_ms\": %.4f, \"first_rope_ms\": %.4f", first->context_seconds * 1e3,
               first->first_op_seconds * 1e3);
        if (first->has_warm)
            printf(", \"warm_cache\": {\"context_ms\": %.4f, \"first_rope_ms\": %.4f}",
                   first->warm_context_seconds * 1e3, first->warm_first_op_seconds * 1e3);
        if (first->has_prepared)
            printf(", \"prepared\": {\"prepare_ms\": %.4f, \"first_rope_ms\": %.4f, "
                   "\"later_rope_ms\": %.4f}",
                   first->prepare_seconds * 1e3, first->prepared_first_op_seconds * 1e3,
                   first->later_op_seconds * 1e3);
        if (first->has_engine)
            printf(", \"engine\": {\"call\": \"%s\", \"context_ms\": %.4f, "
                   "\"prepare_ms\": %.4f, \"first_call_ms\": %.4f, \"later_call_ms\": %.4f, "
                   "\"kernels_built_by_calls\": %llu}",
                   first->engine.call, first->engine.context_seconds * 1e3,
                   first->engine.prepare_seconds * 1e3, first->engine.first_seconds * 1e3,
                   first->engine.later_seconds * 1e3,
                   (unsigned long long)first->engine.built_by_calls);
        bench_fresh_process_print_json(&first->fresh);
    } else {
        printf(", \"error\": ");
        bench_print_json_string(first->error);
    }
    printf("},\n     \"rows\": [");
    for (size_t i = 0; i < CASE_COUNT; i++) {
        const bench_case *c = &bench_cases[i];
        const bench_result *r = &results[i];
        char shape[48];
        shape_text(c, shape, sizeof shape);
        printf("%s\n      {\"operation\": ", i ? "," : "");
        bench_print_json_string(c->name);
        printf(", \"dtype\": ");
        bench_print_json_string(posenc_dtype_name(c->dtype));
        printf(", \"style\": ");
        bench_print_json_string(c->kind == BENCH_ROPE ? posenc_rope_style_name(c->style) : "");
        printf(", \"shape\": ");
        bench_print_json_string(shape);
        printf(", \"bytes\": %llu, \"footprint_bytes\": %llu, \"cache\": ",
               (unsigned long long)r->bytes, (unsigned long long)r->footprint);
        bench_print_json_string(bench_regime(caches, info, r->footprint));
        printf(", \"ok\": %s", r->status == POSENC_OK ? "true" : "false");
        if (r->status != POSENC_OK) {
            printf(", \"error\": ");
            bench_print_json_string(r->error);
            printf("}");
            continue;
        }
        printf(", \"runs\": %u, \"calls_per_run\": %u, \"median_us\": %.4f, \"p10_us\": %.4f, "
               "\"p90_us\": %.4f, \"gb_per_s\": %.3f",
               r->runs, r->repeats, r->median * 1e6, r->p10 * 1e6, r->p90 * 1e6,
               (double)r->bytes / r->median * 1e-9);
        if (r->has_copy) {
            printf(", \"copy\": \"%s\", \"copy_median_us\": %.4f, \"copy_p10_us\": %.4f, "
                   "\"copy_p90_us\": %.4f, \"copy_gb_per_s\": %.3f, \"ratio_to_copy\": %.4f, "
                   "\"ratio_p10\": %.4f, \"ratio_p90\": %.4f",
                   r->shaped_copy ? "shaped like the operation" : "the tensors' bytes",
                   r->copy_median * 1e6, r->copy_p10 * 1e6, r->copy_p90 * 1e6,
                   (double)r->bytes / r->copy_median * 1e-9, r->ratio, r->ratio_p10,
                   r->ratio_p90);
        } else {
            printf(", \"copy_gb_per_s\": null, \"ratio_to_copy\": null, \"copy_note\": ");
            bench_print_json_string(r->copy_note);
        }
        printf("}");
    }
    printf("]");
}

/* ---- the command ---- */

/* Returns -1 to go on, else the exit code (help printed, or a usage error reported). */
static int bench_parse(int argc, char **argv, bench_options *options)
{
    cli_args args;
    cli_args_init(&args, "bench", argc, argv);
    bool runs_given = false;
    int more;
    while ((more = cli_next_flag(&args)) > 0) {
        if (cli_is(&args, "--help") || cli_is(&args, "-h")) {
            fputs(bench_help, stdout);
            return CLI_EXIT_OK;
        } else if (cli_is(&args, "--device")) {
            const char *value = NULL;
            if (cli_value(&args, &value))
                return CLI_EXIT_USAGE;
            if (options->selector_count == MAX_SELECTORS)
                return cli_fail("bench", CLI_EXIT_USAGE, "--device: at most %d devices",
                                MAX_SELECTORS);
            options->selectors[options->selector_count++] = value;
        } else if (cli_is(&args, "--threads")) {
            if (cli_value_u32(&args, &options->threads, 1, "a positive integer"))
                return CLI_EXIT_USAGE;
        } else if (cli_is(&args, "--runs")) {
            if (cli_value_u32(&args, &options->runs, 3, "an integer from 3 to 1000"))
                return CLI_EXIT_USAGE;
            if (options->runs > MAX_RUNS) {
                char text[16];
                snprintf(text, sizeof text, "%u", options->runs);
                return cli_bad_value(&args, text, "an integer from 3 to 1000");
            }
            runs_given = true;
        } else if (cli_is(&args, "--quick")) {
            if (cli_no_value(&args))
                return CLI_EXIT_USAGE;
            options->quick = true;
        } else if (cli_is(&args, "--json")) {
            if (cli_no_value(&args))
                return CLI_EXIT_USAGE;
            options->json = true;
        } else {
            return cli_unknown_flag(&args);
        }
    }
    if (more < 0)
        return CLI_EXIT_USAGE;
    options->runs_given = runs_given;
    if (!runs_given)
        options->runs = options->quick ? 5 : 21;
    options->warmup = options->quick ? 1 : 3;
    options->sample_seconds = options->quick ? 0.5e-3 : 2e-3;
    options->min_row_seconds = options->quick ? 0.0 : 0.25;
    options->progress = support_is_terminal(stderr);
    return -1;
}

/* The devices to run, as posenc_device_get indices: every one, or those --device names. */
static int bench_devices(const bench_options *options, uint32_t *indices, uint32_t *count)
{
    uint32_t total = 0;
    posenc_status status = posenc_device_count(&total);
    if (status != POSENC_OK)
        return cli_library_error("bench", NULL, status, "posenc_device_count");
    *count = 0;
    if (!options->selector_count) {
        /* The native CPU path first: software devices' runtimes (PoCL) leave threads behind
         * that would take CPU time from it. */
        for (int native = 1; native >= 0; native--) {
            for (uint32_t i = 0; i < total && *count < 64; i++) {
                posenc_device_info info;
                if (posenc_device_get(i, &info) == POSENC_OK && info.native_cpu == (native == 1))
                    indices[(*count)++] = i;
            }
        }
        return 0;
    }
    for (uint32_t s = 0; s < options->selector_count; s++) {
        posenc_context_desc desc = {
            .device = options->selectors[s],
            .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV |
                     POSENC_CONTEXT_ALLOW_SOFTWARE,
        };
        uint32_t index = 0;
        status = posenc_device_choose(&desc, &index, NULL);
        if (status != POSENC_OK) {
            const char *detail = posenc_thread_last_error();
            return cli_fail("bench", CLI_EXIT_FAILURE, "cannot find device '%s': %s: %s",
                            options->selectors[s], posenc_status_name(status),
                            detail && *detail ? detail : posenc_status_string(status));
        }
        bool seen = false;
        for (uint32_t i = 0; i < *count; i++)
            seen = seen || indices[i] == index;
        if (!seen)
            indices[(*count)++] = index;
    }
    return 0;
}

int cli_bench_main(int argc, char **argv)
{
    bench_options options = {0};
    int exit_code = bench_parse(argc, argv, &options);
    if (exit_code >= 0)
        return exit_code;

    uint32_t indices[64], count = 0;
    int rc = bench_devices(&options, indices, &count);
    if (rc)
        return rc;

    bench_caches caches = bench_read_caches();
    if (options.json) {
        printf("{\"version\": \"%s\", \"quick\": %s, \"runs\": %u, \"warmup_runs\": %u, "
               "\"caches\": {\"l1d_bytes\": %llu, \"l2_bytes\": %llu, \"l3_bytes\": %llu},\n "
               "\"devices\": [",
               posenc_version(), options.quick ? "true" : "false", options.runs, options.warmup,
               (unsigned long long)caches.l1d, (unsigned long long)caches.l2,
               (unsigned long long)caches.l3);
    } else {
        char l2[32] = "?", l3[32] = "?";
        if (caches.l2)
            cli_format_bytes(caches.l2, l2, sizeof l2);
        if (caches.l3)
            cli_format_bytes(caches.l3, l3, sizeof l3);
        printf("posenc bench: %u device%s, %s%u timed runs per row after %u warm-up run%s\n",
               count, count == 1 ? "" : "s", options.runs_given || options.quick ? "" : "at least ",
               options.runs,
               options.warmup, options.warmup == 1 ? "" : "s");
        printf("median time per call, spread = half the 10th-90th percentile range; GB/s = bytes "
               "read + written / median;\n'vs copy' = copy time / operation time (median of the "
               "runs, and its p10-p90), the copy moving\nthe same elements the same way on the "
               "same device next to each run; 'cache' = where the tensors live\n(this CPU: L2 %s "
               "per core, L3 %s; L3+DRAM: up to twice L3, partly cached)\n",
               l2, l3);
    }

    bool any_failed = false;
    for (uint32_t d = 0; d < count; d++) {
        posenc_device_info info;
        if (posenc_device_get(indices[d], &info) != POSENC_OK)
            continue;
        char selector[32];
        cli_device_selector(&info, selector, sizeof selector);

        /* GPU backends build kernels: time that with an empty cache, then a filled one. */
        char dir[512] = "";
        bool gpu = info.backend == POSENC_BACKEND_VULKAN || info.backend == POSENC_BACKEND_OPENCL;
        bool have_dir = gpu && bench_make_temp_dir(dir, sizeof dir);
        bench_first_call first;
        bench_progress(&options, selector, "first call", 0, (unsigned)CASE_COUNT);
        measure_first_call(&info, &options, selector, have_dir ? dir : NULL, &first);

        bench_result results[CASE_COUNT];
        memset(results, 0, sizeof results);
        posenc_context *context = NULL;
        posenc_status status = open_device(&info, &options, have_dir ? dir : NULL, NULL,
                                           &context);
        const char *variant =
            status == POSENC_OK ? posenc_diagnostics_kernel_variant(context) : NULL;
        for (size_t i = 0; i < CASE_COUNT; i++) {
            if (status != POSENC_OK) {
                results[i].status = status;
                snprintf(results[i].error, sizeof results[i].error, "%s: %s",
                         posenc_status_name(status), posenc_thread_last_error());
                continue;
            }
            run_case(context, &bench_cases[i], &options, selector, (unsigned)i, &results[i]);
        }
        bench_memory_row memory_rows[BENCH_MEMORY_ROWS];
        bool memory = status == POSENC_OK && bench_memory_applies(&info);
        if (memory) {
            bench_progress(&options, selector, "host memory", (unsigned)CASE_COUNT,
                           (unsigned)CASE_COUNT);
            bench_memory_run(context, options.runs, options.sample_seconds, memory_rows);
            for (int i = 0; i < BENCH_MEMORY_ROWS; i++)
                any_failed = any_failed || memory_rows[i].status != POSENC_OK;
        }
        bench_kv_cache_row kv_rows[BENCH_KV_CACHE_ROWS];
        bool kv_cache = status == POSENC_OK && bench_kv_cache_applies(&info);
        if (kv_cache) {
            bench_progress(&options, selector, "kv cache", (unsigned)CASE_COUNT,
                           (unsigned)CASE_COUNT);
            bench_kv_cache_run(context, options.runs, options.sample_seconds, kv_rows);
            for (int i = 0; i < BENCH_KV_CACHE_ROWS; i++)
                any_failed = any_failed || kv_rows[i].status != POSENC_OK;
        }
        bench_conversion_row floor_rows[BENCH_CONVERSION_ROWS];
        bool conversion = status == POSENC_OK && bench_conversion_applies(&info);
        if (conversion) {
            bench_progress(&options, selector, "16-bit floor", (unsigned)CASE_COUNT,
                           (unsigned)CASE_COUNT);
            bench_conversion_run(context, options.runs, options.sample_seconds, floor_rows);
            for (int i = 0; i < BENCH_CONVERSION_ROWS; i++)
                any_failed = any_failed || floor_rows[i].status != POSENC_OK;
        }
        bench_progress_clear(&options);
        for (size_t i = 0; i < CASE_COUNT; i++)
            any_failed = any_failed || results[i].status != POSENC_OK;
        any_failed = any_failed || first.status != POSENC_OK;

        if (options.json) {
            print_json_device(&info, selector, variant, &options, &first, results, &caches,
                              d == 0);
            if (memory)
                bench_memory_print_json(memory_rows);
            if (kv_cache)
                bench_kv_cache_print_json(kv_rows);
            if (conversion)
                bench_conversion_print_json(floor_rows);
            printf("}");
        } else {
            print_device_header(&info, selector, variant, &options);
            print_first_call(&info, &first);
            for (size_t i = 0; i < CASE_COUNT; i++)
                print_row(&bench_cases[i], &results[i],
                          bench_regime(&caches, &info, results[i].footprint));
            bool missing_copy = false;
            for (size_t i = 0; i < CASE_COUNT; i++)
                if (results[i].status == POSENC_OK && !results[i].has_copy && !missing_copy) {
                    printf("  no copy figures: %s\n", results[i].copy_note);
                    missing_copy = true;
                }
            if (memory)
                bench_memory_print(memory_rows);
            if (kv_cache)
                bench_kv_cache_print(kv_rows);
            if (conversion)
                bench_conversion_print(floor_rows);
        }
        fflush(stdout);
        posenc_context_destroy(context);
        if (have_dir)
            support_remove_tree(dir);
    }
    if (options.json)
        printf("\n ],\n \"ok\": %s}\n", any_failed ? "false" : "true");
    return any_failed ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

int cli_bench_parse_only(int argc, char **argv)
{
    bench_options options = {0};
    int exit_code = bench_parse(argc, argv, &options);
    return exit_code < 0 ? CLI_EXIT_OK : exit_code;
}
