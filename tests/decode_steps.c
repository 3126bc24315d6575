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

bool decode_memory_flat(posenc_context *ctx, int32_t done, posenc_stats *first,
                        posenc_stats *now)
{
    CHECK_OK(posenc_context_stats(ctx, now));
    if (done == 0)
        *first = *now;
    if (now->device_bytes == first->device_bytes)
        return true;
    test_failures++;
    fprintf(stderr, "  after %d steps: %llu bytes of device memory, %llu after %d\n",
            done + DECODE_BATCH, (unsigned long long)now->device_bytes,
            (unsigned long long)first->device_bytes, DECODE_BATCH);
    return false;
}

void decode_report(int32_t steps, const posenc_stats *first, const posenc_stats *now, bool ok)
{
    CHECK(now->freq_tables <= 256 && now->rope_calls == (uint64_t)steps);
    printf("  decode loop: %d steps of dynamic NTK, %llu tables cached, %llu bytes of device "
           "memory throughout: %s\n",
           steps, (unsigned long long)now->freq_tables, (unsigned long long)first->device_bytes,
           ok ? "ok" : "FAILED");
}
