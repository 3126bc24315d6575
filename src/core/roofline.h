/* The copy roofline that `posenc bench` measures next to every operation. Not public API: the
 * benchmark links the static library and includes this header. */
#ifndef POSENC_CORE_ROOFLINE_H
#define POSENC_CORE_ROOFLINE_H

#include <posenc/posenc.h>

/* Copies `bytes` bytes of `buffer` from `offset` in place (read + write) or writes them
 * (write_only) with the device's plain copy kernel. UNSUPPORTED when the backend has none. */
posenc_status posenc__roofline(posenc_context *ctx, posenc_buffer *buffer, uint64_t offset,
                               uint64_t bytes, bool write_only);

#endif
