// SPDX-License-Identifier: MIT
// The engine's own pass before posenc in examples/vulkan_engine.c: writes q and k from a formula
// whose values are exact in f32, so that the example's float64 reference starts from the same
// numbers.
#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) writeonly buffer Q { float q[]; };
layout(std430, set = 0, binding = 1) writeonly buffer K { float k[]; };
layout(push_constant) uniform Counts { uint q_count; uint k_count; };

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i < q_count)
        q[i] = float((i * 7u + 3u) % 17u) / 8.0 - 1.0;
    if (i < k_count)
        k[i] = float((i * 5u + 1u) % 13u) / 4.0 - 1.5;
}
