/* SPDX-License-Identifier: MIT */
/* `posenc bench` rows of calls apart (bench_apart.h). Each run times a batch of calls back to
 * back, and APART_CALLS calls each made PAUSE_SECONDS after the last returned, the caller busy
 * in between (as with a model's other work, not asleep); the apart figure is their median. */
#include "bench_apart.h"

#include <stdio.h>
#include <string.h>

#include "bench_cases.h"
#include "bench_stats.h"
#include "support.h"

#define PAUSE_SECONDS 1e-3
#define APART_CALLS 8
#define MAX_RUNS 1000

static const bench_heads layer_heads = {32, 8, 128};

static const bench_case apart_cases[BENCH_APART_ROWS] = {
    {"timesteps apart", BENCH_TIMESTEPS, 256, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, NULL},
    {"rope apart", BENCH_ROPE, 16, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, &layer_heads},
    {"rope apart", BENCH_ROPE, 64, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, &layer_heads},
    {"rope apart", BENCH_ROPE, 256, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, &layer_heads},
};

bool bench_apart_applies(const posenc_device_info *info)
{
    return info->backend == POSENC_BACKEND_CPU;
}

static double time_together(const bench_workload *w, uint32_t repeats, posenc_status *status)
{
    double start = support_seconds_now();
    for (uint32_t r = 0; r < repeats && *status == POSENC_OK; r++)
        *status = bench_workload_call(w);
    return (support_seconds_now() - start) / repeats;
}

static double time_apart(const bench_workload *w, posenc_status *status)
{
    double calls[APART_CALLS];
    for (int i = 0; i < APART_CALLS; i++) {
        double resume = support_seconds_now() + PAUSE_SECONDS;
        while (support_seconds_now() < resume) {
        }
        double start = support_seconds_now();
        if (*status == POSENC_OK)
            *status = bench_workload_call(w);
        calls[i] = support_seconds_now() - start;
    }
    double median;
    bench_spread(calls, APART_CALLS, &median, NULL, NULL);
    return median;
}

static void run_row(posenc_context *context, uint32_t runs, double sample_seconds,
                    bench_apart_row *row, const bench_case *c)
{
    bench_workload w;
    uint64_t bytes, footprint;
    posenc_status status = bench_workload_prepare(&w, context, c, &bytes, &footprint);
    for (int i = 0; i < 3 && status == POSENC_OK; i++) /* every page touched, tables kept */
        status = bench_workload_call(&w);
    double single = status == POSENC_OK ? time_together(&w, 1, &status) : 0.0;
    uint32_t repeats = bench_calls_per_run(single, sample_seconds);
    runs = runs > MAX_RUNS ? MAX_RUNS : runs;
    double together[MAX_RUNS], apart[MAX_RUNS], ratios[MAX_RUNS];
    uint32_t run = 0;
    for (; run < runs && status == POSENC_OK; run++) {
        together[run] = time_together(&w, repeats, &status);
        apart[run] = time_apart(&w, &status);
        ratios[run] = together[run] / apart[run];
    }
    row->status = status;
    if (status != POSENC_OK) {
        bench_format_error(context, status, row->error, sizeof row->error);
    } else {
        row->runs = run;
        row->repeats = repeats;
        bench_spread(ratios, run, &row->ratio, &row->ratio_p10, &row->ratio_p90);
        bench_spread(together, run, &row->together, NULL, NULL);
        bench_spread(apart, run, &row->apart, NULL, NULL);
    }
    bench_workload_free(&w);
}

void bench_apart_run(posenc_context *context, uint32_t runs, double sample_seconds,
                     bench_apart_row rows[BENCH_APART_ROWS])
{
    for (int r = 0; r < BENCH_APART_ROWS; r++) {
        memset(&rows[r], 0, sizeof rows[r]);
        rows[r].name = apart_cases[r].name;
        bench_case_shape(&apart_cases[r], rows[r].shape, sizeof rows[r].shape);
        run_row(context, runs, sample_seconds, &rows[r], &apart_cases[r]);
    }
}

void bench_apart_print(const bench_apart_row rows[BENCH_APART_ROWS])
{
    printf("  calls apart (f32; each call 1 ms of the caller's own work after the last, against "
           "calls back to back; 'keeps' = back-to-back time / apart time, median and p10-p90):\n");
    printf("  %-16s %-16s %12s %11s %6s %-11s\n", "operation", "shape", "back to back", "apart",
           "keeps", "p10-p90");
    for (int r = 0; r < BENCH_APART_ROWS; r++) {
        const bench_apart_row *row = &rows[r];
        if (row->status != POSENC_OK) {
            printf("  %-16s %-16s failed: %s\n", row->name, row->shape, row->error);
            continue;
        }
        char together[32], apart[32], range[32];
        bench_format_time(row->together, together, sizeof together);
        bench_format_time(row->apart, apart, sizeof apart);
        snprintf(range, sizeof range, "%.2f-%.2f", row->ratio_p10, row->ratio_p90);
        printf("  %-16s %-16s %12s %11s %6.2f %-11s\n", row->name, row->shape, together, apart,
               row->ratio, range);
    }
}

void bench_apart_print_json(const bench_apart_row rows[BENCH_APART_ROWS])
{
    printf(",\n     \"apart_rows\": [");
    for (int r = 0; r < BENCH_APART_ROWS; r++) {
        const bench_apart_row *row = &rows[r];
        printf("%s\n      {\"operation\": \"%s\", \"shape\": \"%s\", \"ok\": %s", r ? "," : "",
               row->name, row->shape, row->status == POSENC_OK ? "true" : "false");
        if (row->status != POSENC_OK)
            printf(", \"error\": \"%s\"", posenc_status_name(row->status));
        else
            printf(", \"runs\": %u, \"calls_per_run\": %u, \"apart_calls_per_run\": %d, "
                   "\"pause_us\": %.0f, \"together_us\": %.4f, \"apart_us\": %.4f, "
                   "\"together_over_apart\": %.4f, \"ratio_p10\": %.4f, \"ratio_p90\": %.4f",
                   row->runs, row->repeats, APART_CALLS, PAUSE_SECONDS * 1e6,
                   row->together * 1e6, row->apart * 1e6, row->ratio, row->ratio_p10,
                   row->ratio_p90);
        printf("}");
    }
    printf("]");
}
