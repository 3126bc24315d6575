/* SPDX-License-Identifier: MIT */
/* What the bench measures: its rows (RoPE decode, prefill and call, the sinusoidal tables) and,
 * for one row on one context, the buffers and descriptors of its operation and of the copy it
 * is set against. */
#ifndef POSENC_BENCH_CASES_H
#define POSENC_BENCH_CASES_H

#include <posenc/posenc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_TABLE_D_MODEL 1024
#define BENCH_TIMESTEP_D_MODEL 320

typedef enum bench_kind {
    BENCH_ROPE = 0,
    BENCH_TABLE = 1,
    BENCH_TIMESTEPS = 2,
} bench_kind;

/* The heads of a RoPE row. */
typedef struct bench_heads {
    int64_t q, k, dim;
} bench_heads;

typedef struct bench_case {
    const char *name;
    bench_kind kind;
    int64_t rows; /* tokens or table rows */
    posenc_dtype dtype;
    posenc_rope_style style;
    const bench_heads *heads; /* RoPE; NULL for the tables */
} bench_case;

/* The rows, in the order they print; the first is the decode step the first-call figures
 * time. */
extern const bench_case bench_cases[];
#define BENCH_CASE_COUNT 16

/* One row's operation on one context. */
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

/* Buffers (filled with random values) and the descriptor of case `c` on `context`; `*bytes` the
 * bytes read and written per call, `*footprint` those of the tensors. Free with
 * bench_workload_free, failed or not. */
posenc_status bench_workload_prepare(bench_workload *w, posenc_context *context,
                                     const bench_case *c, uint64_t *bytes, uint64_t *footprint);
void bench_workload_free(bench_workload *w);
/* One call of the operation. */
posenc_status bench_workload_call(const bench_workload *w);
/* One copy of its tensors: shaped like the operation where the backend has such a copy (the
 * same elements in the same order on the same threads with the same split), else a copy of the
 * tensors' bytes (w->shaped_copy turns false). */
posenc_status bench_workload_copy(bench_workload *w);

/* "rope decode f32 neox", "sinusoidal table f16": the progress line's name of a row. */
void bench_case_label(const bench_case *c, char *text, size_t size);
/* "1x(32+8)x128", "4096x1024": the shape column. */
void bench_case_shape(const bench_case *c, char *text, size_t size);

#endif
