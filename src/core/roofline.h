/* SPDX-License-Identifier: MIT */
/* The copy roofline that `posenc bench` measures next to every operation. Not public API: the
 * benchmark links the static library and includes this header. */
#ifndef POSENC_CORE_ROOFLINE_H
#define POSENC_CORE_ROOFLINE_H

#include <posenc/posenc.h>

/* Copies `bytes` bytes of `buffer` from `offset` in place (read + write) or writes them
 * (write_only) with the device's plain copy kernel. UNSUPPORTED when the backend has none. */
posenc_status posenc__roofline(posenc_context *ctx, posenc_buffer *buffer, uint64_t offset,
                               uint64_t bytes, bool write_only);

/* The copy shaped like the operation `desc` describes (validated as posenc_rope and
 * posenc_sinusoidal validate it): its elements read and written back unchanged in place, or
 * written (the table's contents are then undefined), in the operation's order and split over
 * threads. UNSUPPORTED when the backend has no such copy: posenc__roofline is left. */
posenc_status posenc__roofline_rope(posenc_context *ctx, const posenc_rope_desc *desc);
posenc_status posenc__roofline_sinusoidal(posenc_context *ctx,
                                          const posenc_sinusoidal_desc *desc);

#endif
