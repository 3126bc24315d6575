/* SPDX-License-Identifier: MIT */
/* `posenc bench` memory rows: one RoPE on a device buffer, on a host tensor and on a buffer
 * wrapping host memory, timed side by side in one run on a unified-memory GPU device. */
#ifndef POSENC_BENCH_MEMORY_H
#define POSENC_BENCH_MEMORY_H

#include <posenc/posenc.h>
#include <stdbool.h>

#define BENCH_MEMORY_ROWS 3
#define BENCH_MEMORY_FORMS 3 /* device buffer, host tensor, wrapped host buffer */

typedef struct bench_memory_row {
    const char *name;        /* "rope decode", ... */
    int64_t tokens;
    uint64_t bytes;          /* of q and k together */
    posenc_status status;    /* not OK: `error` says why */
    char error[320];
    uint32_t runs, repeats;  /* timed runs, calls per run and form */
    double median[BENCH_MEMORY_FORMS];     /* seconds per call */
    /* Per run, device-buffer time / this form's time: 1.0 means as fast as a device buffer. */
    double ratio[BENCH_MEMORY_FORMS], ratio_p10[BENCH_MEMORY_FORMS],
        ratio_p90[BENCH_MEMORY_FORMS];
} bench_memory_row;

/* Whether the rows are measured on this device: a GPU backend on unified memory, where host
 * memory may be used in place. */
bool bench_memory_applies(const posenc_device_info *info);
/* Times the rows: `runs` runs, each a batch of calls of about `sample_seconds` per form, the
 * forms in rotating order. */
void bench_memory_run(posenc_context *context, uint32_t runs, double sample_seconds,
                      bench_memory_row rows[BENCH_MEMORY_ROWS]);
void bench_memory_print(const bench_memory_row rows[BENCH_MEMORY_ROWS]);
/* `, "memory_rows": [...]` inside a device's JSON object. */
void bench_memory_print_json(const bench_memory_row rows[BENCH_MEMORY_ROWS]);

#endif
