/* SPDX-License-Identifier: MIT */
/* bench_fresh_process: the first call as a new process makes it, through support_run_self. */
#include "bench_fresh_process.h"

#include <stdio.h>
#include <string.h>

#include "bench_stats.h"
#include "support.h"

void bench_fresh_process_run(const char *selector, uint32_t runs, bench_fresh_process *result)
{
    memset(result, 0, sizeof *result);
    if (runs > BENCH_FRESH_PROCESS_MAX_RUNS)
        runs = BENCH_FRESH_PROCESS_MAX_RUNS;
    const char *args[] = {"rope", "--generate", "1,1,32,8,128", "--device", selector, "--quiet",
                          NULL};
    double seconds[BENCH_FRESH_PROCESS_MAX_RUNS];
    for (uint32_t run = 0; run <= runs; run++) {
        int exit_code = 0;
        double elapsed = 0.0;
        char error[256];
        if (!support_run_self(args, &exit_code, &elapsed, error, sizeof error)) {
            snprintf(result->note, sizeof result->note, "%s", error);
            return;
        }
        if (exit_code != 0) {
            /* 127: started, but the system could not execute this program in the child (a
             * user-mode emulator without binfmt, for one). */
            snprintf(result->note, sizeof result->note, "posenc rope --device %s exited with %d%s",
                     selector, exit_code,
                     exit_code == 127 ? ": the system could not run this program again" : "");
            return;
        }
        if (run > 0)
            seconds[run - 1] = elapsed;
    }
    result->runs = runs;
    bench_spread(seconds, runs, &result->median_seconds, &result->p10_seconds,
                 &result->p90_seconds);
    result->measured = true;
}

void bench_fresh_process_print(const bench_fresh_process *result, bool pipelines_built)
{
    if (!result->measured) {
        printf("  fresh process: not measured: %s\n", result->note);
        return;
    }
    char median[32], p10[32], p90[32];
    bench_format_time(result->median_seconds, median, sizeof median);
    bench_format_time(result->p10_seconds, p10, sizeof p10);
    bench_format_time(result->p90_seconds, p90, sizeof p90);
    printf("  fresh process: %s from start to exit (p10-p90 %s-%s, %u runs of `posenc rope` on "
           "one decode step, kernel cache filled; the runtime's own loading included%s)\n",
           median, p10, p90, result->runs,
           pipelines_built ? "; Vulkan pipelines compiled in each: no pipeline cache file" : "");
}

void bench_fresh_process_print_json(const bench_fresh_process *result)
{
    printf(", \"fresh_process\": {\"ok\": %s", result->measured ? "true" : "false");
    if (result->measured)
        printf(", \"runs\": %u, \"median_ms\": %.4f, \"p10_ms\": %.4f, \"p90_ms\": %.4f",
               result->runs, result->median_seconds * 1e3, result->p10_seconds * 1e3,
               result->p90_seconds * 1e3);
    else {
        printf(", \"note\": ");
        bench_print_json_string(result->note);
    }
    printf("}");
}
