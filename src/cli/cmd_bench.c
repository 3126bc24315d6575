/* SPDX-License-Identifier: MIT */
/* `posenc bench`: its flags and the devices they select; the measuring and the output are the
 * bench's own (bench/bench.h). */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "device.h"

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
    "Calls apart, on the native CPU path: the timesteps and f32 NeoX RoPE of 16, 64 and 256\n"
    "tokens, each call made after 1 ms of the caller's own work (as between a model's layers;\n"
    "the worker threads sleep by then), 8 such calls per run against a batch back to back;\n"
    "'keeps' is the back-to-back time / the apart time (1.0: a pause costs a call nothing).\n"
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

#define MAX_SELECTORS 16
#define MAX_DEVICES 64

/* The command line: the bench's options and the devices asked for. */
typedef struct bench_command {
    bench_options options;
    const char *selectors[MAX_SELECTORS];
    uint32_t selector_count;
} bench_command;

/* Adds device `index` of posenc_device_get, with the selector that names it. */
static void add_device(bench_device *devices, uint32_t *count, uint32_t index)
{
    posenc_device_info info;
    if (*count == MAX_DEVICES || posenc_device_get(index, &info) != POSENC_OK)
        return;
    devices[*count].index = index;
    cli_device_selector(&info, devices[*count].selector, sizeof devices[*count].selector);
    (*count)++;
}

/* Returns -1 to go on, else the exit code (help printed, or a usage error reported). */
static int bench_parse(int argc, char **argv, bench_command *command)
{
    bench_options *options = &command->options;
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
            if (command->selector_count == MAX_SELECTORS)
                return cli_fail("bench", CLI_EXIT_USAGE, "--device: at most %d devices",
                                MAX_SELECTORS);
            command->selectors[command->selector_count++] = value;
        } else if (cli_is(&args, "--threads")) {
            if (cli_value_u32(&args, &options->threads, 1, "a positive integer"))
                return CLI_EXIT_USAGE;
        } else if (cli_is(&args, "--runs")) {
            if (cli_value_u32(&args, &options->runs, 3, "an integer from 3 to 1000"))
                return CLI_EXIT_USAGE;
            if (options->runs > BENCH_MAX_RUNS) {
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

/* The devices to run: every one, or those --device names. */
static int bench_devices(const bench_command *command, bench_device *devices, uint32_t *count)
{
    uint32_t total = 0;
    posenc_status status = posenc_device_count(&total);
    if (status != POSENC_OK)
        return cli_library_error("bench", NULL, status, "posenc_device_count");
    *count = 0;
    if (!command->selector_count) {
        /* The native CPU path first: software devices' runtimes (PoCL) leave threads behind
         * that would take CPU time from it. */
        for (int native = 1; native >= 0; native--) {
            for (uint32_t i = 0; i < total && *count < MAX_DEVICES; i++) {
                posenc_device_info info;
                if (posenc_device_get(i, &info) == POSENC_OK && info.native_cpu == (native == 1))
                    add_device(devices, count, i);
            }
        }
        return 0;
    }
    for (uint32_t s = 0; s < command->selector_count; s++) {
        posenc_context_desc desc = {
            .device = command->selectors[s],
            .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV |
                     POSENC_CONTEXT_ALLOW_SOFTWARE,
        };
        uint32_t index = 0;
        status = posenc_device_choose(&desc, &index, NULL);
        if (status != POSENC_OK) {
            const char *detail = posenc_thread_last_error();
            return cli_fail("bench", CLI_EXIT_FAILURE, "cannot find device '%s': %s: %s",
                            command->selectors[s], posenc_status_name(status),
                            detail && *detail ? detail : posenc_status_string(status));
        }
        bool seen = false;
        for (uint32_t i = 0; i < *count; i++)
            seen = seen || devices[i].index == index;
        if (!seen)
            add_device(devices, count, index);
    }
    return 0;
}

int cli_bench_main(int argc, char **argv)
{
    bench_command command = {0};
    int exit_code = bench_parse(argc, argv, &command);
    if (exit_code >= 0)
        return exit_code;
    bench_device devices[MAX_DEVICES];
    uint32_t count = 0;
    int rc = bench_devices(&command, devices, &count);
    if (rc)
        return rc;
    return bench_run(&command.options, devices, count) ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int cli_bench_parse_only(int argc, char **argv)
{
    bench_command command = {0};
    int exit_code = bench_parse(argc, argv, &command);
    return exit_code < 0 ? CLI_EXIT_OK : exit_code;
}
