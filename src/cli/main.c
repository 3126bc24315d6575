/* SPDX-License-Identifier: MIT */
/* posenc command-line tool: dispatches the commands (devices, rope, sinusoidal, demo, bench) and
 * answers --help and --version. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: posenc COMMAND [FLAGS]\n"
    "\n"
    "Transformer position encodings (RoPE, sinusoidal) on Vulkan, OpenCL or the CPU.\n"
    "\n"
    "commands:\n"
    "  devices      list every device, the backends that are unavailable and why, and the\n"
    "               device the automatic choice picks\n"
    "  rope         rotate q (and k) from .npy files or generated data; write .npy results\n"
    "  sinusoidal   write a sinusoidal table, or add it to x, as .npy\n"
    "  demo         run both encodings on a Llama-sized layer, check every element against a\n"
    "               float64 reference and report accuracy and speed\n"
    "  bench        time both encodings on every device next to a plain copy of the same\n"
    "               bytes, and each device's first-call latency\n"
    "\n"
    "  posenc COMMAND --help   describes each command's flags\n"
    "  posenc --version        prints the version\n"
    "\n"
    "environment:\n"
    "  POSENC_DEVICE   device for the automatic choice: cpu, vulkan, vulkan:1, opencl:0, or a\n"
    "                  name substring (a --device flag takes precedence)\n"
    "  POSENC_CPU_VARIANT   CPU kernels: portable, avx2, avx512, avx512bf16 or neon (default:\n"
    "                  the best this CPU runs)\n"
    "\n"
    "exit status: 0 success, 1 failure (device, file or accuracy), 2 bad usage\n";

int main(int argc, char **argv)
{
    argv = support_utf8_arguments(argc, argv); /* file names reach the platform layer in UTF-8 */
#ifdef SIGXFSZ
    /* A write past the file size limit (ulimit -f) then fails with EFBIG, as on a full disk,
     * and the temporary output is removed, instead of the signal killing the process with the
     * temporary file left beside the destination. */
    signal(SIGXFSZ, SIG_IGN);
#endif
    if (argc < 2) {
        return cli_fail(NULL, CLI_EXIT_USAGE, "missing command (see posenc --help)");
    }
    const char *command = argv[1];
    if (strcmp(command, "--help") == 0 || strcmp(command, "-h") == 0 ||
        strcmp(command, "help") == 0) {
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(command, "--version") == 0) {
        printf("posenc %d.%d.%d\n", POSENC_VERSION_MAJOR, POSENC_VERSION_MINOR,
               POSENC_VERSION_PATCH);
        return CLI_EXIT_OK;
    }
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } commands[] = {
        {"devices", cli_devices_main},
        {"rope", cli_rope_main},
        {"sinusoidal", cli_sinusoidal_main},
        {"demo", cli_demo_main},
        {"bench", cli_bench_main},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(command, commands[i].name) == 0) {
            return commands[i].run(argc - 2, argv + 2);
        }
    }
    return cli_fail(NULL, CLI_EXIT_USAGE, "unknown command '%s' (see posenc --help)", command);
}
