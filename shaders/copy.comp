// SPDX-License-Identifier: MIT
// The copy roofline of `posenc bench`: the plainest kernel with the operations' access pattern
// over the same bytes, in place (each word read and written back, like an in-place RoPE) or
// write only (like a sinusoidal table).
//
// Variants (-D): POSENC_COPY_VEC4 moves 16-byte uvec4 elements (for ranges of whole, aligned
// 16-byte blocks), otherwise uint words.
//
// Bindings (descriptor set 0): 0  data, the words copied. Bindings 1-3 are not used.
// Push constants: POSENC_COPY_PUSH of posenc_kernel_params.h, with POSENC_COPY_FLAG_WRITE_ONLY.
// Offset and count are in elements from the start of binding 0 (count fits in 32 bits: the host
// splits larger ranges); `mask` is 0 at run time, so the in-place copy rewrites each word
// unchanged, but unknown to the compiler, so the load cannot be folded away.
// Dispatch: local size 64; any number of work groups in x (the kernel loops over the rest).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "posenc_kernel_params.h"

#if defined(POSENC_COPY_VEC4)
#define ELEMENT uvec4
#else
#define ELEMENT uint
#endif

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) buffer Data { ELEMENT data[]; };

layout(push_constant) uniform Params { POSENC_COPY_PUSH(POSENC_PARAM_FIELD) } params;

void main()
{
    uint total = params.count;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    bool write_only = (params.flags & POSENC_COPY_FLAG_WRITE_ONLY) != 0u;
    for (uint i = gl_GlobalInvocationID.x; i < total;
         i = total - i <= stride ? total : i + stride) {
        uint index = params.offset + i;
        if (write_only)
            data[index] = ELEMENT(i ^ params.mask);
        else
            data[index] = data[index] ^ ELEMENT(params.mask);
    }
}
