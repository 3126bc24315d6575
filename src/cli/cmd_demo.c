/* SPDX-License-Identifier: MIT */
/* `posenc demo`: runs RoPE and the sinusoidal table on a Llama-sized layer on the chosen device,
 * checks every output element against a float64 reference, and reports accuracy and speed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "data.h"
#include "device.h"
#include "reference_check.h"

static const char demo_help[] =
    "usage: posenc demo [--device SEL] [--theta X] [--runs N]\n"
    "\n"
    "Picks a device (like any posenc program: --device, else POSENC_DEVICE, else the automatic\n"
    "choice) and says why; then on a Llama-sized attention layer, f32:\n"
    "  RoPE   q [1, 2048, 32, 128] and k [1, 2048, 8, 128] (grouped-query), NEOX style, at\n"
    "         positions 0..2047 and again at 2147481599..2147483646 (just below 2^31), where\n"
    "         the angles are largest;\n"
    "  table  a sinusoidal table [2048, 4096] (d_model 4096) at the same two position ranges.\n"
    "Every output element is checked against a float64 reference whose angles are reduced\n"
    "modulo 2*pi in double-double. The error is |out - ref| / |ref pair| for RoPE and |out - ref|\n"
    "for the table; posenc promises at most 8 * 2^-24 (4.77e-7) on every device. Prints the\n"
    "maximum error, the median time per call after a warm-up call, and the throughput (bytes\n"
    "read + written per call / time). The data lives in device buffers, and each timed call\n"
    "includes waiting for the device to finish. Exits 1 if any error exceeds the promise.\n"
    "\n"
    "flags:\n"
    "  --device SEL   cpu, vulkan, vulkan:1, opencl:0 or a name substring\n"
    "  --theta X      RoPE frequency base (default 500000, Llama 3; Llama 2 uses 10000)\n"
    "  --runs N       timed calls per measurement, 1..100 (default 5)\n"
    "  --help         this text\n";

#define DEMO_TOKENS 2048
#define DEMO_Q_HEADS 32
#define DEMO_K_HEADS 8
#define DEMO_HEAD_DIM 128
#define DEMO_D_MODEL 4096
/* The far range ends at INT32_MAX - 1: the largest angles an int32 position gives. */
#define DEMO_FAR_OFFSET (INT32_MAX - DEMO_TOKENS)

typedef struct demo_options {
    const char *device;
    double theta;
    uint32_t runs;
} demo_options;

typedef struct demo_result {
    double max_error;   /* negative: the check ran out of memory */
    double seconds;     /* median per call */
    uint64_t elements;  /* output elements checked */
} demo_result;

static int demo_compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One operation of the demo: a call on the context, then a 4-byte download from `sync` so that
 * the time includes the device finishing the work (the API has no separate wait call). */
typedef struct demo_op {
    posenc_context *context;
    const posenc_rope_desc *rope;
    const posenc_sinusoidal_desc *sinusoidal;
    posenc_buffer *sync;
} demo_op;

static posenc_status demo_call(const demo_op *op)
{
    posenc_status status = op->rope ? posenc_rope(op->context, op->rope)
                                    : posenc_sinusoidal(op->context, op->sinusoidal);
    if (status == POSENC_OK) {
        unsigned char word[4];
        status = posenc_buffer_download(op->sync, 0, word, sizeof word);
    }
    return status;
}

/* A warm-up call (kernel builds, first-touch allocations), then up to `runs` timed calls; stops
 * early after 3 once 2 s have passed so slow devices keep the demo short. */
static posenc_status demo_time(const demo_op *op, uint32_t runs, double *median)
{
    double times[100];
    uint32_t done = 0;
    posenc_status status = demo_call(op);
    double total = 0.0;
    while (status == POSENC_OK && done < runs) {
        double start = support_seconds_now();
        status = demo_call(op);
        times[done] = support_seconds_now() - start;
        total += times[done++];
        if (done >= 3 && total > 2.0) {
            break;
        }
    }
    if (status == POSENC_OK) {
        qsort(times, done, sizeof times[0], demo_compare_double);
        *median = done % 2 ? times[done / 2] : 0.5 * (times[done / 2 - 1] + times[done / 2]);
    }
    return status;
}

static posenc_status demo_buffer(posenc_context *context, const void *data, uint64_t size,
                                 posenc_buffer **buffer)
{
    posenc_buffer_desc desc = {.size = size, .initial_data = data};
    return posenc_buffer_create(context, &desc, buffer);
}

typedef struct demo_rope {
    cli_npy_array q, k, q_result, k_result;
    int32_t *positions;
    posenc_buffer *q_buffer, *k_buffer, *q_out_buffer, *k_out_buffer, *positions_buffer;
} demo_rope;

static void demo_rope_free(demo_rope *r)
{
    posenc_buffer_destroy(r->q_buffer);
    posenc_buffer_destroy(r->k_buffer);
    posenc_buffer_destroy(r->q_out_buffer);
    posenc_buffer_destroy(r->k_out_buffer);
    posenc_buffer_destroy(r->positions_buffer);
    cli_npy_free(&r->q);
    cli_npy_free(&r->k);
    cli_npy_free(&r->q_result);
    cli_npy_free(&r->k_result);
    free(r->positions);
}

/* Runs RoPE at positions `offset` .. `offset` + 2047, explicit (an i32 positions tensor) or
 * implicit (position_offset). Returns 0 or an exit code with the error printed. */
static int demo_rope_run(posenc_context *context, demo_rope *r, const demo_options *o,
                         int32_t offset, bool explicit_positions, demo_result *result)
{
    const int64_t q_shape[4] = {1, DEMO_TOKENS, DEMO_Q_HEADS, DEMO_HEAD_DIM};
    const int64_t k_shape[4] = {1, DEMO_TOKENS, DEMO_K_HEADS, DEMO_HEAD_DIM};
    const int64_t positions_shape[1] = {DEMO_TOKENS};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_buffer(r->q_buffer, POSENC_DTYPE_F32, 4, q_shape),
        .q_out = posenc_tensor_of_buffer(r->q_out_buffer, POSENC_DTYPE_F32, 4, q_shape),
        .k = posenc_tensor_of_buffer(r->k_buffer, POSENC_DTYPE_F32, 4, k_shape),
        .k_out = posenc_tensor_of_buffer(r->k_out_buffer, POSENC_DTYPE_F32, 4, k_shape),
        .style = POSENC_ROPE_NEOX,
        .theta = o->theta,
    };
    if (explicit_positions) {
        for (int32_t t = 0; t < DEMO_TOKENS; t++) {
            r->positions[t] = offset + t;
        }
        posenc_status status = posenc_buffer_upload(r->positions_buffer, 0, r->positions,
                                                    DEMO_TOKENS * sizeof(int32_t));
        if (status != POSENC_OK) {
            return cli_library_error("demo", context, status, "posenc_buffer_upload");
        }
        desc.positions =
            posenc_tensor_of_buffer(r->positions_buffer, POSENC_DTYPE_I32, 1, positions_shape);
    } else {
        desc.position_offset = offset;
    }

    demo_op op = {.context = context, .rope = &desc, .sync = r->q_out_buffer};
    posenc_status status = demo_time(&op, o->runs, &result->seconds);
    if (status != POSENC_OK) {
        return cli_library_error("demo", context, status, "posenc_rope");
    }
    status = posenc_buffer_download(r->q_out_buffer, 0, r->q_result.data,
                                    r->q_result.count * sizeof(float));
    if (status == POSENC_OK) {
        status = posenc_buffer_download(r->k_out_buffer, 0, r->k_result.data,
                                        r->k_result.count * sizeof(float));
    }
    if (status != POSENC_OK) {
        return cli_library_error("demo", context, status, "posenc_buffer_download");
    }

    double inv_freq[DEMO_HEAD_DIM / 2];
    cli_rope_inv_freq(o->theta, DEMO_HEAD_DIM, inv_freq);
    cli_rope_check check = {
        .batch = 1,
        .tokens = DEMO_TOKENS,
        .head_dim = DEMO_HEAD_DIM,
        .positions = explicit_positions ? r->positions : NULL,
        .position_offset = offset,
        .rotary_dim = DEMO_HEAD_DIM,
        .style = POSENC_ROPE_NEOX,
        .inv_freq = inv_freq,
        .attention_factor = 1.0,
    };
    check.in = r->q.data;
    check.out = r->q_result.data;
    check.heads = DEMO_Q_HEADS;
    double q_error = cli_rope_max_error(&check);
    check.in = r->k.data;
    check.out = r->k_result.data;
    check.heads = DEMO_K_HEADS;
    double k_error = cli_rope_max_error(&check);
    if (q_error < 0 || k_error < 0) {
        return cli_fail("demo", CLI_EXIT_FAILURE, "out of memory in the reference check");
    }
    result->max_error = fmax(q_error, k_error);
    result->elements = r->q.count + r->k.count;
    return 0;
}

static void demo_print(const char *label, const demo_result *result, double bytes)
{
    printf("  %-36s max error %.3g = %.3f x promise   %8.3f ms/call %8.2f GB/s\n", label,
           result->max_error, result->max_error / CLI_PROMISE, result->seconds * 1e3,
           bytes / result->seconds * 1e-9);
}

static int demo_rope_section(posenc_context *context, const demo_options *o, double *max_error)
{
    const int64_t q_shape[4] = {1, DEMO_TOKENS, DEMO_Q_HEADS, DEMO_HEAD_DIM};
    const int64_t k_shape[4] = {1, DEMO_TOKENS, DEMO_K_HEADS, DEMO_HEAD_DIM};
    demo_rope r;
    memset(&r, 0, sizeof r);
    int rc = 0;
    if (cli_npy_alloc(&r.q, CLI_NPY_F32, 4, q_shape) != 0 ||
        cli_npy_alloc(&r.k, CLI_NPY_F32, 4, k_shape) != 0 ||
        cli_npy_alloc(&r.q_result, CLI_NPY_F32, 4, q_shape) != 0 ||
        cli_npy_alloc(&r.k_result, CLI_NPY_F32, 4, k_shape) != 0 ||
        !(r.positions = malloc(DEMO_TOKENS * sizeof *r.positions))) {
        demo_rope_free(&r);
        return cli_fail("demo", CLI_EXIT_FAILURE, "out of host memory");
    }
    cli_fill_random(&r.q, 1);
    cli_fill_random(&r.k, 2);
    uint64_t q_bytes = r.q.count * sizeof(float), k_bytes = r.k.count * sizeof(float);
    posenc_status status = demo_buffer(context, r.q.data, q_bytes, &r.q_buffer);
    if (status == POSENC_OK) {
        status = demo_buffer(context, r.k.data, k_bytes, &r.k_buffer);
    }
    if (status == POSENC_OK) {
        status = demo_buffer(context, NULL, q_bytes, &r.q_out_buffer);
    }
    if (status == POSENC_OK) {
        status = demo_buffer(context, NULL, k_bytes, &r.k_out_buffer);
    }
    if (status == POSENC_OK) {
        status = demo_buffer(context, NULL, DEMO_TOKENS * sizeof(int32_t), &r.positions_buffer);
    }
    if (status != POSENC_OK) {
        rc = cli_library_error("demo", context, status, "posenc_buffer_create");
        demo_rope_free(&r);
        return rc;
    }

    const char *note = o->theta == 500000.0  ? " (Llama 3; Llama 2 uses --theta 10000)"
                       : o->theta == 10000.0 ? " (Llama 2 and the original RoPE)"
                                             : "";
    printf("rope: q [1, %d, %d, %d] and k [1, %d, %d, %d], f32, NEOX, theta %g%s\n", DEMO_TOKENS,
           DEMO_Q_HEADS, DEMO_HEAD_DIM, DEMO_TOKENS, DEMO_K_HEADS, DEMO_HEAD_DIM, o->theta, note);
    double bytes = 2.0 * (double)(q_bytes + k_bytes);
    demo_result near = {0}, far = {0};
    rc = demo_rope_run(context, &r, o, 0, false, &near);
    if (rc == 0) {
        demo_print("positions 0 .. 2047", &near, bytes);
        rc = demo_rope_run(context, &r, o, DEMO_FAR_OFFSET, true, &far);
    }
    if (rc == 0) {
        char label[64];
        snprintf(label, sizeof label, "positions %d .. %d", DEMO_FAR_OFFSET,
                 DEMO_FAR_OFFSET + DEMO_TOKENS - 1);
        demo_print(label, &far, bytes + DEMO_TOKENS * sizeof(int32_t));
        *max_error = fmax(near.max_error, far.max_error);
    }
    demo_rope_free(&r);
    return rc;
}

static int demo_sinusoidal_section(posenc_context *context, const demo_options *o,
                                   double *max_error)
{
    const int64_t shape[2] = {DEMO_TOKENS, DEMO_D_MODEL};
    cli_npy_array table;
    if (cli_npy_alloc(&table, CLI_NPY_F32, 2, shape) != 0) {
        return cli_fail("demo", CLI_EXIT_FAILURE, "out of host memory");
    }
    uint64_t bytes = table.count * sizeof(float);
    posenc_buffer *buffer = NULL;
    posenc_status status = demo_buffer(context, NULL, bytes, &buffer);
    if (status != POSENC_OK) {
        cli_npy_free(&table);
        return cli_library_error("demo", context, status, "posenc_buffer_create");
    }
    printf("sinusoidal: table [%d, %d], f32, interleaved, base 10000\n", DEMO_TOKENS,
           DEMO_D_MODEL);
    int rc = 0;
    *max_error = 0.0;
    const int32_t offsets[2] = {0, DEMO_FAR_OFFSET};
    for (int i = 0; i < 2 && rc == 0; i++) {
        posenc_sinusoidal_desc desc = {
            .out = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 2, shape),
            .position_offset = offsets[i],
        };
        demo_op op = {.context = context, .sinusoidal = &desc, .sync = buffer};
        demo_result result = {0};
        status = demo_time(&op, o->runs, &result.seconds);
        if (status == POSENC_OK) {
            status = posenc_buffer_download(buffer, 0, table.data, bytes);
        }
        if (status != POSENC_OK) {
            rc = cli_library_error("demo", context, status, "posenc_sinusoidal");
            break;
        }
        result.max_error = cli_sinusoidal_max_error(table.data, DEMO_TOKENS, DEMO_D_MODEL,
                                                    offsets[i], POSENC_SINUSOIDAL_INTERLEAVED,
                                                    10000.0, 0.0);
        if (result.max_error < 0) {
            rc = cli_fail("demo", CLI_EXIT_FAILURE, "out of memory in the reference check");
            break;
        }
        char label[64];
        snprintf(label, sizeof label, "positions %d .. %d", offsets[i],
                 offsets[i] + DEMO_TOKENS - 1);
        demo_print(label, &result, (double)bytes);
        *max_error = fmax(*max_error, result.max_error);
    }
    posenc_buffer_destroy(buffer);
    cli_npy_free(&table);
    return rc;
}

/* Says which device runs the demo and why: the library's reason for its choice, whether
 * POSENC_DEVICE steered it, and whether initialisation fell back to another device. */
static void demo_print_device(const demo_options *o, const posenc_device_info *info)
{
    char selector[64];
    cli_device_selector(info, selector, sizeof selector);
    printf("device: %s, %s (%s%s)\n", selector, info->name, posenc_device_type_name(info->type),
           info->native_cpu ? ", posenc's own CPU path" : "");

    posenc_context_desc desc = {.device = o->device};
    uint32_t index = 0;
    const char *reason = NULL;
    posenc_status status = posenc_device_choose(&desc, &index, &reason);
    const char *env = support_env_get("POSENC_DEVICE");
    if (o->device) {
        printf("  why: --device ");
        cli_put_escaped(stdout, o->device);
    } else if (env && env[0]) {
        printf("  why: POSENC_DEVICE=");
        cli_put_escaped(stdout, env);
    } else {
        printf("  why: automatic choice (POSENC_DEVICE not set)");
    }
    if (status == POSENC_OK && reason && reason[0]) {
        printf(": %s", reason);
    }
    printf("\n");
    posenc_device_info chosen;
    if (status == POSENC_OK && posenc_device_get(index, &chosen) == POSENC_OK &&
        (chosen.backend != info->backend || chosen.backend_index != info->backend_index)) {
        char first[64];
        cli_device_selector(&chosen, first, sizeof first);
        printf("  note: %s (%s) was chosen first but did not initialise; fell back to %s\n",
               first, chosen.name, selector);
    }
}

/* What the demo cost the context (posenc_context_stats), before the buffers are freed. */
static void demo_print_stats(posenc_context *context)
{
    posenc_stats s;
    if (posenc_context_stats(context, &s) != POSENC_OK) {
        return;
    }
    printf("counters: %llu rope and %llu sinusoidal calls; %.1f MB staged, %.1f MB uploaded, "
           "%.1f MB downloaded; %llu kernels built, %llu loaded from the cache; %llu frequency "
           "tables; %.1f MB held for the device\n",
           (unsigned long long)s.rope_calls, (unsigned long long)s.sinusoidal_calls,
           (double)s.staged_bytes / 1e6, (double)s.uploaded_bytes / 1e6,
           (double)s.downloaded_bytes / 1e6, (unsigned long long)s.kernels_built,
           (unsigned long long)s.kernels_loaded, (unsigned long long)s.freq_tables,
           (double)s.device_bytes / 1e6);
}

static int demo_parse(int argc, char **argv, demo_options *o)
{
    cli_args args;
    int rc;
    cli_args_init(&args, "demo", argc, argv);
    o->theta = 500000.0;
    o->runs = 5;
    while ((rc = cli_next_flag(&args)) > 0) {
        if (cli_is(&args, "--help")) {
            fputs(demo_help, stdout);
            return -1;
        } else if (cli_is(&args, "--device")) {
            rc = cli_value(&args, &o->device);
        } else if (cli_is(&args, "--theta")) {
            rc = cli_value_double(&args, &o->theta, 0.0, true, "a positive number");
        } else if (cli_is(&args, "--runs")) {
            const char *text = NULL;
            rc = cli_value(&args, &text);
            if (rc == 0 && (!cli_parse_u32(text, &o->runs) || o->runs < 1 || o->runs > 100)) {
                return cli_bad_value(&args, text, "an integer from 1 to 100");
            }
        } else {
            return cli_unknown_flag(&args);
        }
        if (rc) {
            return CLI_EXIT_USAGE;
        }
    }
    return rc < 0 ? CLI_EXIT_USAGE : 0;
}

int cli_demo_main(int argc, char **argv)
{
    demo_options options;
    memset(&options, 0, sizeof options);
    int rc = demo_parse(argc, argv, &options);
    if (rc != 0) {
        return rc < 0 ? CLI_EXIT_OK : rc;
    }
    printf("posenc %d.%d.%d demo: RoPE and sinusoidal encodings checked element by element "
           "against float64\n",
           POSENC_VERSION_MAJOR, POSENC_VERSION_MINOR, POSENC_VERSION_PATCH);

    posenc_context *context = NULL;
    posenc_device_info info;
    rc = cli_open_context("demo", options.device, &context, &info);
    if (rc) {
        return rc;
    }
    demo_print_device(&options, &info);
    printf("promise: error <= 8 * 2^-24 = %.3g (relative to the rotated pair for RoPE, absolute "
           "for sinusoidal)\n",
           CLI_PROMISE);
    printf("time: median of up to %u calls after a warm-up; GB/s counts bytes read + written\n",
           options.runs);

    double rope_error = 0.0, sinusoidal_error = 0.0;
    rc = demo_rope_section(context, &options, &rope_error);
    if (rc == 0) {
        rc = demo_sinusoidal_section(context, &options, &sinusoidal_error);
    }
    if (rc == 0) {
        demo_print_stats(context);
    }
    posenc_context_destroy(context);
    if (rc) {
        return rc;
    }
    double worst = fmax(rope_error, sinusoidal_error);
    if (!(worst <= CLI_PROMISE)) {
        printf("result: FAIL\n");
        return cli_fail("demo", CLI_EXIT_FAILURE,
                        "max error %.3g exceeds the promise %.3g (%s)", worst, CLI_PROMISE,
                        rope_error > CLI_PROMISE ? "rope" : "sinusoidal");
    }
    printf("result: PASS: every element within the promise (worst %.3f x)\n",
           worst / CLI_PROMISE);
    return CLI_EXIT_OK;
}

int cli_demo_parse_only(int argc, char **argv)
{
    demo_options options;
    memset(&options, 0, sizeof options);
    int rc = demo_parse(argc, argv, &options);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
