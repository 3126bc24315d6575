/* SPDX-License-Identifier: MIT */
/* The dynamic-NTK decode loop of the table-recycling tests (decode_steps.h). */
#include "decode_steps.h"

#include "reference.h"
#include "test_common.h"

#include <stdio.h>

posenc_rope_desc decode_step_desc(posenc_buffer *buffer, uint32_t index, int32_t position)
{
    const int64_t shape[3] = {1, DECODE_HEADS, DECODE_DIM};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, shape),
        .position_offset = position,
        .theta = 10000.0,
        .scaling = {.type = POSENC_ROPE_SCALING_DYNAMIC_NTK,
                    .factor = 2.0,
                    .original_max_positions = DECODE_START,
                    .sequence_length = (uint32_t)position + 1},
    };
    desc.q.offset = (uint64_t)index * DECODE_STEP_BYTES;
    return desc;
}

void decode_fill(float *inputs, uint64_t seed)
{
    test_rng rng = {seed};
    for (size_t i = 0; i < DECODE_BATCH_BYTES / 4; i++)
        inputs[i] = (float)test_rng_uniform(&rng, -2.0, 2.0);
}

bool decode_batch_ok(const float *inputs, const float *out, int32_t first)
{
    for (uint32_t i = 0; i < DECODE_BATCH; i++) {
        posenc_rope_desc desc = decode_step_desc(NULL, i, first + (int32_t)i);
        size_t at = (size_t)i * DECODE_STEP_BYTES / 4;
        if (!ref_rope_desc_rows_f32_ok(&desc, inputs + at, out + at, DECODE_DIM, 1, DECODE_HEADS,
                                       DECODE_DIM, first + (int32_t)i)) {
            fprintf(stderr, "  decode step at position %d is wrong\n", first + (int32_t)i);
            return false;
        }
    }
    return true;
}
