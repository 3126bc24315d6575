/* SPDX-License-Identifier: MIT */
/* The diagnostics seam: what `posenc bench` measures and reports beside the operations. Not
 * public API and not exported: the CLI links the static library and includes this header, its
 * one library header besides the public ones and the platform layer (core/platform.h). */
#ifndef POSENC_DIAGNOSTICS_H
#define POSENC_DIAGNOSTICS_H

#include <posenc/posenc.h>

/* The copy roofline. Copies `bytes` bytes of `buffer` from `offset` in place (read + write) or
 * writes them (write_only) with the device's plain copy kernel. UNSUPPORTED when the backend
 * has none. */
posenc_status posenc__roofline(posenc_context *ctx, posenc_buffer *buffer, uint64_t offset,
                               uint64_t bytes, bool write_only);

/* The copy shaped like the operation `desc` describes (validated as posenc_rope and
 * posenc_sinusoidal validate it): its elements read and written back unchanged in place, or
 * written (the table's contents are then undefined), in the operation's order and split over
 * threads. UNSUPPORTED when the backend has no such copy: posenc__roofline is left. */
posenc_status posenc__roofline_rope(posenc_context *ctx, const posenc_rope_desc *desc);
posenc_status posenc__roofline_sinusoidal(posenc_context *ctx,
                                          const posenc_sinusoidal_desc *desc);

/* The 16-bit floor of RoPE: the elements of `desc` (f16 or bf16, rotated in place, whole heads
 * with contiguous dims, no KV cache) converted to f32 and back in place, in the operation's
 * order and split over threads, with the conversions its kernels use and no other work. The
 * values come back unchanged (NaNs as the library writes them). UNSUPPORTED for other
 * tensors, and on backends without it (only the native CPU path has it). */
posenc_status posenc__conversion_floor_rope(posenc_context *ctx, const posenc_rope_desc *desc);

/* The kernel variant `ctx` runs, for the report ("avx2": the CPU backend's instruction set);
 * NULL when `ctx` is NULL or its backend has no such choice. */
const char *posenc__kernel_variant(const posenc_context *ctx);

#endif
