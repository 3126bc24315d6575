/* SPDX-License-Identifier: MIT */
/* The small RoPE both lost-device tests run (test_lost_vulkan, test_lost_opencl): its shape,
 * its inputs, and the check that a context on a device that is not lost gets it right
 * (lost_work.c). */
#ifndef POSENC_TESTS_LOST_WORK_H
#define POSENC_TESTS_LOST_WORK_H

#include <posenc/posenc.h>

/* q of [TOKENS, HEADS, DIM] f32: 1536 bytes, below the size from which OpenCL imports host
 * memory, so host tensors are staged there and a failed call leaves them as they were. */
enum { LOST_TOKENS = 6, LOST_HEADS = 2, LOST_DIM = 32 };
#define LOST_ELEMENTS (LOST_TOKENS * LOST_HEADS * LOST_DIM)
extern const int64_t lost_shape[3];

/* Inputs of LOST_ELEMENTS values, scaled by `scale`. */
void lost_fill(float *values, float scale);

/* RoPE on host tensors (NeoX, theta 10000, positions 0..LOST_TOKENS-1) is right on `ctx`,
 * within 1e-5: far above the f32 promise (8 units of 2^-24 of the pair's norm, about 1e-6
 * here) and far below any wrong angle's error. A failure is counted and named with
 * `test_name` and `what`. */
void lost_check_working(posenc_context *ctx, const char *test_name, const char *what);

#endif
