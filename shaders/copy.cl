/* The copy roofline of `posenc bench` (the backend's `roofline` entry): the plainest kernel with
 * an operation's access pattern, one 32-bit word per work-item and step.
 *   read + write in place: data[i] = data[i] + 0.0f (like an in-place RoPE; the addition keeps
 *     the compiler from removing a store of the value just loaded)
 *   write only:            data[i] = i (like a sinusoidal table)
 *
 * Arguments:
 *   0  data        global float words
 *   1  offset      first word
 *   2  count       words
 *   3  write_mode  0: read + write in place; 1: write only
 * Global size: any; one dimension (the kernel loops over the rest).
 */
#pragma OPENCL FP_CONTRACT OFF

kernel void posenc_copy(global float *data, uint offset, uint count, uint write_mode)
{
    uint stride = (uint)get_global_size(0);
    if (write_mode != 0u) {
        for (uint i = (uint)get_global_id(0); i < count; i = count - i <= stride ? count : i + stride)
            data[offset + i] = (float)i;
    } else {
        for (uint i = (uint)get_global_id(0); i < count; i = count - i <= stride ? count : i + stride)
            data[offset + i] = data[offset + i] + 0.0f;
    }
}
