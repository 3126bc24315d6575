/* SPDX-License-Identifier: MIT */
/* Sinusoidal encodings planned once for every GPU backend: the kernels' parameter block
 * (posenc_kernel_params.h) with its strides and flag word, the layout tests that pick a fast
 * kernel, and the launch-size check. Backends place the views and dispatch. */
#ifndef POSENC_CORE_GPU_SINUSOIDAL_H
#define POSENC_CORE_GPU_SINUSOIDAL_H

#include "core/gpu_plan.h"
#include "core/gpu_split.h"
#include "core/op_views.h"

#include "posenc_kernel_params.h"

/* The operation's views, their use and its table. */
void posenc__gpu_sinusoidal_op(posenc_context *ctx, const posenc__sinusoidal_op *op,
                               posenc__gpu_op *gpu);

/* Whether x is added from out itself: the kernels then read x through out's binding. */
bool posenc__gpu_sinusoidal_x_in_out(posenc_context *ctx, const posenc__sinusoidal_op *op);

/* The parameters of the box `box` of [batch, rows] (the whole operation: start 0, count
 * {batch, rows}), with each view's element 0 at `first[i]` elements into its binding, in
 * posenc__sinusoidal_views' order (x's entry unused when x is in out). */
void posenc__gpu_sinusoidal_params(const posenc__sinusoidal_op *op, bool x_in_out,
                                   const posenc__gpu_box *box, const uint32_t *first,
                                   posenc__sinusoidal_params *params);

/* What the kernels bind over [batch, rows] cells: out, x (unbound when in out or absent) and
 * positions (unbound when absent), in posenc__sinusoidal_views' order. The backend sets where
 * each view lies. */
void posenc__gpu_sinusoidal_extents(const posenc__sinusoidal_op *op, bool x_in_out,
                                    posenc__gpu_extent extents[POSENC__SINUSOIDAL_VIEWS]);

/* Whether sinusoidal_blocks.comp, which takes 16 bytes of frequencies a unit, may run: out and
 * a separate x in 16-byte blocks, even d_model, and whole units of frequencies. */
bool posenc__gpu_sinusoidal_in_blocks(const posenc__sinusoidal_op *op, bool x_in_out);

/* Whether kernels that take `frequencies` consecutive columns a work-item
 * (sinusoidal_contiguous.cl) may run: whole groups of frequencies, columns one element apart. */
bool posenc__gpu_sinusoidal_contiguous(const posenc__sinusoidal_op *op, uint32_t frequencies);

/* Invocations of the generic kernels over `rows` rows: one per frequency, plus the odd column. */
uint64_t posenc__gpu_sinusoidal_units(const posenc__sinusoidal_op *op, int64_t rows);

/* UNSUPPORTED, naming out.shape, when the work is more than one launch indexes (2^32). */
posenc_status posenc__gpu_sinusoidal_check_launch(posenc_context *ctx, const char *backend,
                                                  const posenc__sinusoidal_op *op);

#endif
