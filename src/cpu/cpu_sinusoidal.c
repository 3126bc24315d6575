/* Sinusoidal tables and their addition into embeddings on the CPU. */
#include "cpu/cpu_internal.h"

/* Column of frequency i's sin and cos in each layout. */
static void columns(posenc_sinusoidal_layout layout, uint32_t half, uint32_t i, int64_t *sin_col,
                    int64_t *cos_col)
{
    switch (layout) {
    case POSENC_SINUSOIDAL_SIN_COS:
        *sin_col = i;
        *cos_col = (int64_t)half + i;
        break;
    case POSENC_SINUSOIDAL_COS_SIN:
        *cos_col = i;
        *sin_col = (int64_t)half + i;
        break;
    default:
        *sin_col = 2 * (int64_t)i;
        *cos_col = 2 * (int64_t)i + 1;
        break;
    }
}

static void write_value(uint8_t *out_base, const posenc__view *out, const uint8_t *x_base,
                        const posenc__view *x, const posenc__sinusoidal_op *op, int64_t b,
                        int64_t r, int64_t col, float pe)
{
    float value = op->output_scale * pe;
    if (op->has_x)
        value += posenc_cpu_load(posenc_cpu_element((uint8_t *)x_base, x, 0, b, r, col),
                                 x->dtype) * op->input_scale;
    posenc_cpu_store(posenc_cpu_element(out_base, out, 0, b, r, col), out->dtype, value);
}

posenc_status posenc_cpu_sinusoidal(posenc_context *ctx, const posenc__sinusoidal_op *op)
{
    float *sincos = posenc_cpu_scratch(ctx, 2 * (size_t)op->half + 1);
    if (!sincos)
        return POSENC_OUT_OF_MEMORY;
    uint8_t *out_base = posenc__view_host_base(ctx, &op->out);
    const uint8_t *x_base = op->has_x ? posenc__view_host_base(ctx, &op->x) : NULL;

    for (int64_t b = 0; b < op->batch; b++) {
        for (int64_t r = 0; r < op->rows; r++) {
            int64_t position;
            bool valid = posenc_cpu_position(ctx, &op->positions, op->has_positions,
                                             op->positions_per_batch, op->position_offset, b, r,
                                             &position);
            posenc_cpu_sincos_row(op->freqs, op->half, position, valid, sincos);
            for (uint32_t i = 0; i < op->half; i++) {
                int64_t sin_col, cos_col;
                columns(op->layout, op->half, i, &sin_col, &cos_col);
                write_value(out_base, &op->out, x_base, &op->x, op, b, r, sin_col, sincos[2 * i]);
                write_value(out_base, &op->out, x_base, &op->x, op, b, r, cos_col,
                            sincos[2 * i + 1]);
            }
            if (op->d_model % 2) /* odd d_model: the last column is zero padding */
                write_value(out_base, &op->out, x_base, &op->x, op, b, r, op->d_model - 1, 0.0f);
        }
    }
    return POSENC_OK;
}
