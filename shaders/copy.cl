/* SPDX-License-Identifier: MIT */
/* The copy roofline of `posenc bench` (the backend's `roofline` entry): the plainest kernel with
 * an operation's access pattern, over 32-bit words.
 *   read + write in place: data[i] = data[i] + 0.0f (like an in-place RoPE; the addition keeps
 *     the compiler from removing a store of the value just loaded)
 *   write only:            data[i] = i (like a sinusoidal table)
 *
 * Arguments:
 *   0  data        global float words
 *   1..4  POSENC_COPY_ARGS of posenc_kernel_params.h: offset (the first word), count (words),
 *         flags (POSENC_COPY_FLAG_WRITE_ONLY, else read + write in place), chunk (0: work-items
 *         interleave word by word, on GPUs; n: each copies a contiguous run of n words, on CPU
 *         devices)
 * Global size: any; one dimension (the kernel loops over the rest).
 */
#pragma OPENCL FP_CONTRACT OFF

#include "posenc_kernel_params.h"

kernel void posenc_copy(global float *data POSENC_COPY_ARGS(POSENC_PARAM_ARGUMENT))
{
    uint write_mode = flags & POSENC_COPY_FLAG_WRITE_ONLY;
    global float *words = data + offset;
    uint id = (uint)get_global_id(0);
    if (chunk != 0u) {
        /* CPU devices: a contiguous run per work-item. CPU implementations run the work-items
         * of a group one after another, so the strided walk below would stream the whole
         * buffer through the cache once per work-item. */
        uint begin = id <= count / chunk ? id * chunk : count; /* no overflow */
        uint end = count - begin < chunk ? count : begin + chunk;
        if (write_mode != 0u) {
            for (uint i = begin; i < end; i++)
                words[i] = (float)i;
        } else {
            for (uint i = begin; i < end; i++)
                words[i] = words[i] + 0.0f;
        }
        return;
    }
    /* GPUs: consecutive work-items take consecutive words (coalesced), the same trip count in
     * every work-item, then one partial round. */
    uint stride = (uint)get_global_size(0);
    uint rounds = count / stride;
    if (write_mode != 0u) {
        for (uint r = 0u; r < rounds; r++)
            words[r * stride + id] = (float)(r * stride + id);
    } else {
        for (uint r = 0u; r < rounds; r++)
            words[r * stride + id] = words[r * stride + id] + 0.0f;
    }
    uint last = rounds * stride + id;
    if (last < count)
        words[last] = write_mode != 0u ? (float)last : words[last] + 0.0f;
}
