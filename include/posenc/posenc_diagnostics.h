/* SPDX-License-Identifier: MIT */
/* Measurement hooks for benchmarks: the yardsticks `posenc bench` times next to the operations,
 * for tools that measure posenc the same way.
 *
 * UNSTABLE: unlike the rest of the API, these functions may change or go in any release,
 * patch releases included (docs/abi.md). They do no operation's work and write nothing a
 * program should read: a copy's contents are left unchanged, a table's undefined. Each returns
 * UNSUPPORTED, naming the backend, where the device's backend has no such measurement. */
#ifndef POSENC_DIAGNOSTICS_H
#define POSENC_DIAGNOSTICS_H

#include <posenc/posenc.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The copy roofline: copies `bytes` bytes of `buffer` from `offset` in place (read + write), or
 * writes them (`write_only`), with the device's plain copy kernel. `bytes` and `offset` are
 * multiples of 4 within the buffer (INVALID_ARGUMENT, OUT_OF_BOUNDS). */
POSENC_API posenc_status posenc_diagnostics_roofline(posenc_context *context,
                                                     posenc_buffer *buffer, uint64_t offset,
                                                     uint64_t bytes, bool write_only);

/* The copy shaped like the operation `desc` describes (validated as posenc_rope and
 * posenc_sinusoidal validate it): its elements read and written back unchanged in place, or
 * written (a table's contents are then undefined), in the operation's order and split over
 * threads. The native CPU path has them; elsewhere posenc_diagnostics_roofline is left. */
POSENC_API posenc_status posenc_diagnostics_roofline_rope(posenc_context *context,
                                                          const posenc_rope_desc *desc);
POSENC_API posenc_status posenc_diagnostics_roofline_sinusoidal(
    posenc_context *context, const posenc_sinusoidal_desc *desc);

/* The 16-bit floor of RoPE: the elements of `desc` (f16 or bf16, rotated in place, whole heads
 * with contiguous dims, no KV cache) converted to f32 and back in place, in the operation's
 * order and split over threads, with the conversions its kernels use and no other work. The
 * values come back unchanged (NaNs as the library writes them). UNSUPPORTED for other tensors,
 * and on backends without it (only the native CPU path has it). */
POSENC_API posenc_status posenc_diagnostics_conversion_floor_rope(posenc_context *context,
                                                                  const posenc_rope_desc *desc);

/* The kernel variant `context` runs ("avx2": the CPU backend's instruction set); NULL when
 * `context` is NULL or its backend has no such choice. */
POSENC_API const char *posenc_diagnostics_kernel_variant(const posenc_context *context);

#ifdef __cplusplus
}
#endif

#endif
