/* SPDX-License-Identifier: MIT */
/* The accuracy promise at the far end of the position range, on every device: RoPE and
 * sinusoidal values for int32 positions up to 2^31 - 1 and down to INT32_MIN, and float positions
 * just below 2^31, against the float64 reference (whose angle reduction is exact to ~1e-15).
 * Prints the largest error seen per device in units of 2^-24.
 *
 * Tolerances (reference.h): f32 RoPE |out - ref| <= 8 * 2^-24 * |ref pair|; sinusoidal
 * |out - ref| <= 8 * 2^-24 absolute; f16/bf16 add one ulp of the output type. These are the
 * header's promise, which holds for any position because the library reduces angles exactly. */
#include "reference.h"
#include "test_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 320
#define MAX_DIM 128
#define HEADS 2
#define MAX_REPORTS 6

typedef struct positions {
    int32_t i32[MAX_TOKENS];
    float f32[MAX_TOKENS];
    int count;
    bool is_float;
} positions;

/* Edge positions, 2^30 + k, and random int32 values of every magnitude. */
static void int_positions(positions *p, test_rng *rng)
{
    static const int64_t edges[] = {
        2147483647,          2147483646, 2147483645, 2147483000,     1073741824,
        1073741825,          1073741823, 1073741824 + 12345, 1 << 24, (1 << 24) + 1,
        16777215,            0,          1,          -1,             -2,
        INT32_MIN,           INT32_MIN + 1, -1073741824, -2147483000, 999999937,
        -999999937,          123456789,
    };
    p->count = 0;
    p->is_float = false;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        p->i32[p->count++] = (int32_t)edges[i];
    for (int k = 0; k < 10; k++)
        p->i32[p->count++] = (int32_t)((1 << 30) + k * 7919);
    while (p->count < MAX_TOKENS) {
        /* every magnitude: a random shift spreads values over 2^0 .. 2^31, either sign */
        uint32_t magnitude = test_rng_u32(rng) >> (1 + test_rng_u32(rng) % 31);
        bool negative = test_rng_u32(rng) & 1u;
        p->i32[p->count++] = negative ? (int32_t)(-(int64_t)magnitude - 1) : (int32_t)magnitude;
    }
}

/* Float positions just below 2^31 (the largest float below it is 2^31 - 128), large negative
 * ones, and fractional ones of every magnitude. */
static void float_positions(positions *p, test_rng *rng)
{
    static const float edges[] = {
        2147483520.0f, 2147483392.0f, 2147483264.0f, 2.0e9f,      1.5e9f,        1073741824.0f,
        1073741760.0f, 16777216.0f,   16777215.0f,   8388607.5f,  4194303.75f,   1048576.25f,
        12345.678f,    0.5f,          1e-3f,         0.0f,        -2147483520.0f, -1.5e9f,
        -8388607.5f,   -0.25f,        3.14159265f,   6.2831853f,
    };
    p->count = 0;
    p->is_float = true;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        p->f32[p->count++] = edges[i];
    while (p->count < MAX_TOKENS) {
        double magnitude = ldexp(1.0, (int)(test_rng_u32(rng) % 31)); /* 1 .. 2^30 */
        float v = (float)test_rng_uniform(rng, -2.0 * magnitude, 2.0 * magnitude);
        if (fabsf(v) >= 2147483648.0f)
            v = 2147483520.0f;
        p->f32[p->count++] = v;
    }
}

static double position_value(const positions *p, int i)
{
    return p->is_float ? (double)p->f32[i] : (double)p->i32[i];
}

static posenc_tensor positions_tensor(positions *p)
{
    int64_t shape[1] = {p->count};
    return posenc_tensor_of_host(p->is_float ? (void *)p->f32 : (void *)p->i32,
                                 p->is_float ? POSENC_DTYPE_F32 : POSENC_DTYPE_I32, 1, shape);
}

typedef struct rope_config {
    const char *name;
    posenc_dtype dtype;
    uint32_t head_dim, rotary_dim;
    posenc_rope_style style;
    double theta;
    const double *inv_freq;
} rope_config;

/* High frequencies stress the reduction most: 3 radians per position at 2^31 is 1e9 turns. */
static const double fast_inv_freq[4] = {3.0, 1.0, 0.6180339887498949, 1e-9};

static const rope_config rope_configs[] = {
    {"theta 1e4, 128", POSENC_DTYPE_F32, 128, 0, POSENC_ROPE_NEOX, 0, NULL},
    {"theta 1e4, 64 of 128 gptj", POSENC_DTYPE_F32, 128, 64, POSENC_ROPE_GPTJ, 0, NULL},
    {"theta 5e5, 128", POSENC_DTYPE_F32, 128, 0, POSENC_ROPE_GPTJ, 500000.0, NULL},
    {"theta 1e6, 32 of 64", POSENC_DTYPE_F32, 64, 32, POSENC_ROPE_NEOX, 1e6, NULL},
    {"theta 10, 16", POSENC_DTYPE_F32, 16, 0, POSENC_ROPE_NEOX, 10.0, NULL},
    {"theta 1e4, 2 of 6", POSENC_DTYPE_F32, 6, 2, POSENC_ROPE_GPTJ, 0, NULL},
    {"caller inv_freq up to 3", POSENC_DTYPE_F32, 8, 0, POSENC_ROPE_NEOX, 0, fast_inv_freq},
    {"f16 theta 1e4, 64", POSENC_DTYPE_F16, 64, 0, POSENC_ROPE_NEOX, 0, NULL},
    {"bf16 theta 5e5, 64", POSENC_DTYPE_BF16, 64, 0, POSENC_ROPE_GPTJ, 500000.0, NULL},
};

static void rope_accuracy(posenc_context *context, const rope_config *config, positions *pos,
                          test_rng *rng, ref_stats *total)
{
    const posenc_dtype dtype = config->dtype;
    const uint32_t D = config->head_dim;
    const uint32_t rotary_dim = config->rotary_dim ? config->rotary_dim : D;
    const size_t e = posenc_dtype_size(dtype);
    const int T = pos->count;
    size_t count = (size_t)T * HEADS * D;
    unsigned char *data = malloc(count * e);
    double *values = malloc(count * sizeof(double));
    if (!data || !values) {
        test_failures++;
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        values[i] = ref_round_to(dtype, (float)test_rng_uniform(rng, -1.0, 1.0));
        ref_store(dtype, data + i * e, values[i]);
    }
    int64_t shape[3] = {T, HEADS, D};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(data, dtype, 3, shape),
        .positions = positions_tensor(pos),
        .rotary_dim = config->rotary_dim,
        .style = config->style,
        .theta = config->theta,
        .inv_freq = config->inv_freq,
        .inv_freq_count = config->inv_freq ? rotary_dim / 2 : 0,
    };
    posenc_status status = posenc_rope(context, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  rope '%s': %s: %s\n", config->name, posenc_status_name(status),
                posenc_context_last_error(context));
        goto done;
    }
    double inv_freq[MAX_DIM / 2], ref[MAX_DIM], norm[MAX_DIM];
    double attention_factor = ref_rope_frequencies(&desc, rotary_dim, inv_freq);
    ref_stats stats = {0};
    int reports = 0;
    for (int t = 0; t < T; t++) {
        double position = position_value(pos, t);
        for (int h = 0; h < HEADS; h++) {
            size_t head = ((size_t)t * HEADS + (size_t)h) * D;
            ref_rope_head(values + head, ref, D, rotary_dim, config->style, inv_freq, position,
                          attention_factor, false);
            for (uint32_t j = 0; j < rotary_dim / 2; j++) {
                uint32_t a, b;
                ref_rope_pair(config->style, rotary_dim, j, &a, &b);
                norm[a] = norm[b] = hypot(ref[a], ref[b]);
            }
            for (uint32_t d = 0; d < D; d++) {
                double out = ref_load(dtype, data + (head + d) * e);
                bool good = d < rotary_dim ? ref_check(&stats, dtype, out, ref[d], norm[d], 0.0)
                                           : out == values[head + d];
                if (!good) {
                    test_failures++;
                    if (reports++ < MAX_REPORTS)
                        fprintf(stderr,
                                "  rope '%s' %s position %.9g, token %d head %d dim %u: got "
                                "%.9g, expected %.9g (error %.2f x 2^-24 |pair|)\n",
                                config->name, pos->is_float ? "f32" : "i32", position, t, h, d,
                                out, ref[d],
                                d < rotary_dim ? fabs(out - ref[d]) / (REF_UNIT * norm[d]) : 0);
                }
            }
        }
    }
    if (dtype == POSENC_DTYPE_F32)
        printf("    rope %-28s %s positions: max error %5.2f x 2^-24 |pair|\n", config->name,
               pos->is_float ? "f32" : "i32", stats.max_units);
    else
        printf("    rope %-28s %s positions: max error %5.3f of tolerance\n", config->name,
               pos->is_float ? "f32" : "i32", stats.max_ratio);
    ref_stats_merge(total, &stats);
done:
    free(data);
    free(values);
}

typedef struct sin_config {
    const char *name;
    posenc_dtype dtype;
    uint32_t d_model;
    posenc_sinusoidal_layout layout;
    double base, freq_shift;
} sin_config;

static const sin_config sin_configs[] = {
    {"interleaved 64", POSENC_DTYPE_F32, 64, POSENC_SINUSOIDAL_INTERLEAVED, 0, 0},
    {"sin|cos 128 shift 1", POSENC_DTYPE_F32, 128, POSENC_SINUSOIDAL_SIN_COS, 0, 1},
    {"cos|sin 33 base 1e6", POSENC_DTYPE_F32, 33, POSENC_SINUSOIDAL_COS_SIN, 1e6, 0},
    {"f16 interleaved 32", POSENC_DTYPE_F16, 32, POSENC_SINUSOIDAL_INTERLEAVED, 0, 0},
    {"bf16 sin|cos 32", POSENC_DTYPE_BF16, 32, POSENC_SINUSOIDAL_SIN_COS, 0, 0},
};

static void sinusoidal_accuracy(posenc_context *context, const sin_config *config,
                                positions *pos, ref_stats *total)
{
    const posenc_dtype dtype = config->dtype;
    const uint32_t D = config->d_model;
    const size_t e = posenc_dtype_size(dtype);
    const int T = pos->count;
    unsigned char *data = calloc((size_t)T * D, e);
    double *freq = malloc((D / 2 + 1) * sizeof(double));
    double *pe = malloc(D * sizeof(double));
    if (!data || !freq || !pe) {
        test_failures++;
        goto done;
    }
    int64_t shape[2] = {T, D};
    posenc_sinusoidal_desc desc = {
        .out = posenc_tensor_of_host(data, dtype, 2, shape),
        .positions = positions_tensor(pos),
        .layout = config->layout,
        .base = config->base,
        .freq_shift = config->freq_shift,
    };
    posenc_status status = posenc_sinusoidal(context, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  sinusoidal '%s': %s: %s\n", config->name, posenc_status_name(status),
                posenc_context_last_error(context));
        goto done;
    }
    ref_sinusoidal_frequencies(&desc, D, freq);
    ref_stats stats = {0};
    int reports = 0;
    for (int t = 0; t < T; t++) {
        double position = position_value(pos, t);
        ref_sinusoidal_row(freq, D, config->layout, position, pe);
        for (uint32_t c = 0; c < D; c++) {
            double out = ref_load(dtype, data + ((size_t)t * D + c) * e);
            if (!ref_check(&stats, dtype, out, pe[c], 1.0, 0.0)) {
                test_failures++;
                if (reports++ < MAX_REPORTS)
                    fprintf(stderr,
                            "  sinusoidal '%s' %s position %.9g column %u: got %.9g, expected "
                            "%.9g (error %.2f x 2^-24)\n",
                            config->name, pos->is_float ? "f32" : "i32", position, c, out, pe[c],
                            fabs(out - pe[c]) / REF_UNIT);
            }
        }
    }
    if (dtype == POSENC_DTYPE_F32)
        printf("    sinusoidal %-22s %s positions: max error %5.2f x 2^-24\n", config->name,
               pos->is_float ? "f32" : "i32", stats.max_units);
    else
        printf("    sinusoidal %-22s %s positions: max error %5.3f of tolerance\n", config->name,
               pos->is_float ? "f32" : "i32", stats.max_ratio);
    ref_stats_merge(total, &stats);
done:
    free(data);
    free(freq);
    free(pe);
}

/* Float positions of magnitude 2^31 or more, infinities and NaN have no promise: the header
 * says their outputs are NaN. Pass-through dims still pass through. */
static void out_of_range_positions(posenc_context *context)
{
    float bad[6] = {2147483648.0f, -2147483648.0f, 3e9f, INFINITY, -INFINITY, NAN};
    const int64_t T = 6, D = 8;
    float q[6 * 8], table[6 * 8];
    for (int i = 0; i < T * D; i++)
        q[i] = 0.25f + (float)i / 64.0f;
    int64_t q_shape[3] = {T, 1, D}, table_shape[2] = {T, D}, p_shape[1] = {T};
    posenc_rope_desc rope = {
        .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, q_shape),
        .positions = posenc_tensor_of_host(bad, POSENC_DTYPE_F32, 1, p_shape),
        .rotary_dim = 6,
    };
    CHECK_OK(posenc_rope(context, &rope));
    for (int t = 0; t < T; t++) {
        for (int d = 0; d < D; d++) {
            float v = q[t * D + d];
            if (d < 6)
                CHECK(isnan(v));
            else
                CHECK(v == 0.25f + (float)(t * D + d) / 64.0f);
        }
    }
    posenc_sinusoidal_desc sin_desc = {
        .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, table_shape),
        .positions = posenc_tensor_of_host(bad, POSENC_DTYPE_F32, 1, p_shape),
    };
    CHECK_OK(posenc_sinusoidal(context, &sin_desc));
    for (int i = 0; i < T * D; i++)
        CHECK(isnan(table[i]));
}

static void run_device(posenc_context *context, const posenc_device_info *info)
{
    test_rng rng = {.state = 0x5eed0fac7ull};
    positions ints, floats;
    int_positions(&ints, &rng);
    float_positions(&floats, &rng);
    ref_stats rope_stats = {0}, sin_stats = {0};
    for (size_t i = 0; i < sizeof rope_configs / sizeof rope_configs[0]; i++) {
        rope_accuracy(context, &rope_configs[i], &ints, &rng, &rope_stats);
        rope_accuracy(context, &rope_configs[i], &floats, &rng, &rope_stats);
    }
    for (size_t i = 0; i < sizeof sin_configs / sizeof sin_configs[0]; i++) {
        sinusoidal_accuracy(context, &sin_configs[i], &ints, &sin_stats);
        sinusoidal_accuracy(context, &sin_configs[i], &floats, &sin_stats);
    }
    out_of_range_positions(context);
    printf("    %s: max f32 error: rope %.2f x 2^-24 |pair|, sinusoidal %.2f x 2^-24 "
           "(promise: 8); worst of tolerance %.3f / %.3f\n",
           info->name, rope_stats.max_units, sin_stats.max_units, rope_stats.max_ratio,
           sin_stats.max_ratio);
}

int main(void)
{
    printf("test_accuracy: positions up to 2^31 - 1 and down to -2^31\n");
    test_for_each_device(run_device);
    return test_finish("test_accuracy");
}
