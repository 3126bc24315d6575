/* SPDX-License-Identifier: MIT */
/* A long decode loop with dynamic NTK, for the tests of frequency-table recycling on a caller's
 * device: every step's sequence length gives a table of its own, so a context sees far more
 * distinct tables than it caches. Steps run DECODE_BATCH at a time, step i of a batch rotating
 * q [1, DECODE_HEADS, DECODE_DIM] (f32, in place) at byte DECODE_STEP_BYTES * i of one buffer. */
#ifndef POSENC_TESTS_DECODE_STEPS_H
#define POSENC_TESTS_DECODE_STEPS_H

#include <posenc/posenc.h>

#include <stdbool.h>

enum {
    DECODE_HEADS = 2,
    DECODE_DIM = 32,
    DECODE_BATCH = 1000,
    DECODE_STEPS = 100000,
    DECODE_START = 64, /* the original length: every later step has a table of its own */
};
#define DECODE_STEP_BYTES (DECODE_HEADS * DECODE_DIM * 4)
#define DECODE_BATCH_BYTES ((size_t)DECODE_BATCH * DECODE_STEP_BYTES)

/* Step `index` of a batch, at `position`, on `buffer` (which holds DECODE_BATCH_BYTES). */
posenc_rope_desc decode_step_desc(posenc_buffer *buffer, uint32_t index, int32_t position);
/* DECODE_BATCH steps' inputs, DECODE_BATCH_BYTES. */
void decode_fill(float *inputs, uint64_t seed);
/* Whether `out` holds the batch from position `first` rotated, each step against the float64
 * reference; on failure names the first wrong step. */
bool decode_batch_ok(const float *inputs, const float *out, int32_t first);

/* After the batch from step `done`: reads the context's counters into `now` (the first batch's
 * into `first` too) and whether device memory is what it was after the first batch. */
bool decode_memory_flat(posenc_context *ctx, int32_t done, posenc_stats *first,
                        posenc_stats *now);
/* The loop's summary line, after `steps` steps. */
void decode_report(int32_t steps, const posenc_stats *first, const posenc_stats *now, bool ok);

#endif
