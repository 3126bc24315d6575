/* RoPE on the CPU: sin/cos once per token and frequency, reused by every q and k head. */
#include "cpu/cpu_internal.h"

typedef struct rope_plan {
    uint32_t pairs;
    int64_t second_offset; /* index distance from a pair's first dim to its second */
    int64_t first_step;    /* index distance between the first dims of consecutive pairs */
    int64_t head_dim;
    uint32_t rotary_dim;
} rope_plan;

/* One head: rotate the pairs, copy the pass-through dims when out of place. */
static void rotate_head(const rope_plan *plan, const float *sincos, const uint8_t *in,
                        int64_t in_stride, uint8_t *out, int64_t out_stride, posenc_dtype dtype,
                        bool in_place)
{
    for (uint32_t j = 0; j < plan->pairs; j++) {
        int64_t i = (int64_t)j * plan->first_step;
        const uint8_t *pa = in + i * in_stride;
        const uint8_t *pb = in + (i + plan->second_offset) * in_stride;
        float a = posenc_cpu_load(pa, dtype);
        float b = posenc_cpu_load(pb, dtype);
        float s = sincos[2 * j], c = sincos[2 * j + 1];
        posenc_cpu_store(out + i * out_stride, dtype, a * c - b * s);
        posenc_cpu_store(out + (i + plan->second_offset) * out_stride, dtype, a * s + b * c);
    }
    if (in_place)
        return;
    size_t element = posenc_dtype_size(dtype);
    for (int64_t d = plan->rotary_dim; d < plan->head_dim; d++)
        memcpy(out + d * out_stride, in + d * in_stride, element);
}

static void rotate_heads(posenc_context *ctx, const rope_plan *plan, const float *sincos,
                         const posenc__view *in, const posenc__view *out, bool in_place,
                         int64_t heads, int64_t b, int64_t t)
{
    uint8_t *in_base = posenc__view_host_base(ctx, in);
    uint8_t *out_base = posenc__view_host_base(ctx, out);
    for (int64_t h = 0; h < heads; h++) {
        rotate_head(plan, sincos, posenc_cpu_element(in_base, in, b, t, h, 0), in->strides[3],
                    posenc_cpu_element(out_base, out, b, t, h, 0), out->strides[3], in->dtype,
                    in_place);
    }
}

posenc_status posenc_cpu_rope(posenc_context *ctx, const posenc__rope_op *op)
{
    rope_plan plan = {
        .pairs = op->rotary_dim / 2,
        .second_offset = op->style == POSENC_ROPE_NEOX ? op->rotary_dim / 2 : 1,
        .first_step = op->style == POSENC_ROPE_NEOX ? 1 : 2,
        .head_dim = op->head_dim,
        .rotary_dim = op->rotary_dim,
    };
    float *sincos = posenc_cpu_scratch(ctx, 2 * (size_t)plan.pairs + 1);
    if (!sincos)
        return POSENC_OUT_OF_MEMORY;

    for (int64_t b = 0; b < op->batch; b++) {
        for (int64_t t = 0; t < op->tokens; t++) {
            int64_t position;
            bool valid = posenc_cpu_position(ctx, &op->positions, op->has_positions,
                                             op->positions_per_batch, op->position_offset, b, t,
                                             &position);
            posenc_cpu_sincos_row(op->freqs, plan.pairs, position, valid, sincos);
            for (uint32_t j = 0; j < plan.pairs; j++) {
                float s = op->inverse ? -sincos[2 * j] : sincos[2 * j];
                sincos[2 * j] = s * op->attention_factor;
                sincos[2 * j + 1] *= op->attention_factor;
            }
            rotate_heads(ctx, &plan, sincos, &op->q, &op->q_out, op->q_in_place, op->q_heads, b,
                         t);
            if (op->has_k)
                rotate_heads(ctx, &plan, sincos, &op->k, &op->k_out, op->k_in_place, op->k_heads,
                             b, t);
        }
    }
    return POSENC_OK;
}
