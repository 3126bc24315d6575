// SPDX-License-Identifier: MIT
// The engine's own pass after posenc in examples/vulkan_engine.c: attention logits
// scores[h][i][j] = q[i, h] . k[j, h / group] / sqrt(head_dim) from the rotated q and k.
#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Q { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float k[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Scores { float scores[]; };
layout(push_constant) uniform Shape { uint tokens; uint q_heads; uint k_heads; uint head_dim; };

void main()
{
    uint index = gl_GlobalInvocationID.x;
    if (index >= q_heads * tokens * tokens)
        return;
    uint h = index / (tokens * tokens), i = index / tokens % tokens, j = index % tokens;
    uint kh = h / (q_heads / k_heads);
    float sum = 0.0;
    for (uint d = 0u; d < head_dim; d++)
        sum += q[(i * q_heads + h) * head_dim + d] * k[(j * k_heads + kh) * head_dim + d];
    scores[index] = sum / sqrt(float(head_dim));
}
