// SPDX-License-Identifier: MIT
// Where a token of rope.comp and rope_blocks.comp finds its position and its output row. The
// including shader declares the `positions` and `slots` bindings and the `params` push constants
// (POSENC_ROPE_PASS) first.
#ifndef POSENC_ROPE_ROWS_GLSL
#define POSENC_ROPE_ROWS_GLSL

// The Q31.32 position component `component` of token t of batch b; false for a float
// position that gives NaN. Absent positions give position_offset + t for every component.
bool token_position(uint b, uint t, uint component, out uvec2 position)
{
    uint kind = (params.flags >> POSENC_ROPE_FLAG_POSITIONS_SHIFT) & 3u;
    position = uvec2(0u, uint(params.position_offset) + t);
    if (kind == POSENC_POSITIONS_NONE)
        return true;
    uint word = positions[params.positions_offset + b * params.positions_stride_batch +
                          t * params.positions_stride_token +
                          component * params.positions_stride_component];
    return posenc_position_from_word(kind, word, position);
}

// The first output element of token (b, t): its own row, or with POSENC_ROPE_FLAG_SLOTS the
// KV cache row of its slot; false when the slot is outside [0, num_slots) (nothing written).
bool output_row(uint b, uint t, out uint out_row)
{
    uint out_b = b, out_t = t;
    if ((params.flags & POSENC_ROPE_FLAG_SLOTS) != 0u) {
        int slot = int(slots[params.slots_offset + b * params.slots_stride_batch +
                             t * params.slots_stride_token]);
        out_row = 0u;
        if (slot < 0 || uint(slot) >= params.num_slots)
            return false;
        out_b = uint(slot) / params.block_size;
        out_t = uint(slot) - out_b * params.block_size;
    }
    out_row = params.out_offset + out_b * params.out_stride_batch + out_t * params.out_stride_token;
    return true;
}

#endif
