/* SPDX-License-Identifier: MIT */
/* Context-extension scalings (YaRN, Llama 3, LongRoPE, dynamic NTK) on every device, against
 * float64 transcriptions of the reference formulas (HF transformers modeling_rope_utils.py),
 * written here independently of the library, plus values checkable by hand.
 *
 * Also the relative-position property under each scaling: the score of two rotated vectors
 * depends only on the distance between their positions.
 *
 * Method: q holds unit pairs (1, 0), so RoPE writes attention_factor * (cos t, sin t) with
 * t = position * inv_freq[j]; every output is compared with the reference's. Tolerance: the
 * accuracy promise, 8 * 2^-24 of the pair norm (the attention factor). Positions stay below
 * 2^21 here so that float64 rounding differences between two correct frequency formulas
 * (a few ulps of inv_freq) stay far below it; accuracy at 2^31 is test_accuracy's job. */
#include "reference.h"
#include "test_common.h"

#include <math.h>
#include <string.h>

#define TWO_PI 6.283185307179586476925286766559
#define MAX_PAIRS 64
#define PROMISE (8.0 * 0x1p-24)

static const int32_t positions[] = {0, 1, 7, 1000, 4095, 4096, 8191, 100000, 1000003};
#define TOKENS ((int64_t)(sizeof positions / sizeof positions[0]))

typedef struct scaling_case {
    const char *name;
    uint32_t rotary_dim;
    double theta;
    posenc_rope_scaling scaling;
    bool derive_length; /* leave sequence_length 0: the library takes max position + 1 */
    double inv_freq[MAX_PAIRS];
    double attention_factor;
} scaling_case;

/* ---- the reference formulas ---- */

static double plain(double theta, uint32_t dim, uint32_t j)
{
    return 1.0 / pow(theta, (double)(2 * j) / dim);
}

static void yarn_reference(scaling_case *c)
{
    const posenc_rope_scaling *s = &c->scaling;
    uint32_t dim = c->rotary_dim;
    double beta_fast = s->beta_fast ? s->beta_fast : 32, beta_slow = s->beta_slow ? s->beta_slow : 1;
    double low = dim * log(s->original_max_positions / (beta_fast * TWO_PI)) / (2 * log(c->theta));
    double high = dim * log(s->original_max_positions / (beta_slow * TWO_PI)) / (2 * log(c->theta));
    if (!s->no_truncate) {
        low = floor(low);
        high = ceil(high);
    }
    if (low < 0)
        low = 0;
    if (high > dim - 1)
        high = dim - 1;
    if (low == high)
        high += 0.001;
    for (uint32_t j = 0; j < dim / 2; j++) {
        double ramp = (j - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double extrapolation_factor = 1 - ramp;
        double extrapolation = plain(c->theta, dim, j);
        double interpolation = 1.0 / (s->factor * pow(c->theta, (double)(2 * j) / dim));
        c->inv_freq[j] = interpolation * (1 - extrapolation_factor) +
                         extrapolation * extrapolation_factor;
    }
    /* HF transformers: the ratio only when both mscale and mscale_all_dim are given. */
#define GET_MSCALE(scale, m) ((scale) <= 1 ? 1.0 : 0.1 * (m) * log(scale) + 1.0)
    c->attention_factor = s->mscale && s->mscale_all_dim
                              ? GET_MSCALE(s->factor, s->mscale) /
                                    GET_MSCALE(s->factor, s->mscale_all_dim)
                              : GET_MSCALE(s->factor, 1.0);
#undef GET_MSCALE
}

static void llama3_reference(scaling_case *c)
{
    const posenc_rope_scaling *s = &c->scaling;
    double low_wavelen = s->original_max_positions / s->low_freq_factor;
    double high_wavelen = s->original_max_positions / s->high_freq_factor;
    for (uint32_t j = 0; j < c->rotary_dim / 2; j++) {
        double f = plain(c->theta, c->rotary_dim, j);
        double wavelen = TWO_PI / f;
        double scaled = wavelen > low_wavelen ? f / s->factor : f;
        double smooth = (s->original_max_positions / wavelen - s->low_freq_factor) /
                        (s->high_freq_factor - s->low_freq_factor);
        double smoothed = (1 - smooth) * scaled / s->factor + smooth * scaled;
        bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        c->inv_freq[j] = medium ? smoothed : scaled;
    }
    c->attention_factor = 1;
}

static void longrope_reference(scaling_case *c, uint32_t sequence_length)
{
    const posenc_rope_scaling *s = &c->scaling;
    const double *ext =
        sequence_length > s->original_max_positions ? s->long_factor : s->short_factor;
    for (uint32_t j = 0; j < c->rotary_dim / 2; j++)
        c->inv_freq[j] = 1.0 / (ext[j] * pow(c->theta, (double)(2 * j) / c->rotary_dim));
    c->attention_factor = s->factor <= 1 ? 1.0
                                         : sqrt(1 + log(s->factor) /
                                                        log(s->original_max_positions));
}

static void dynamic_ntk_reference(scaling_case *c, uint32_t sequence_length)
{
    const posenc_rope_scaling *s = &c->scaling;
    double length = sequence_length > s->original_max_positions ? sequence_length
                                                                : s->original_max_positions;
    double base = c->theta * pow(s->factor * length / s->original_max_positions - (s->factor - 1),
                                 (double)c->rotary_dim / (c->rotary_dim - 2));
    for (uint32_t j = 0; j < c->rotary_dim / 2; j++)
        c->inv_freq[j] = plain(base, c->rotary_dim, j);
    c->attention_factor = 1;
}

/* ---- running a case ---- */

static void run_case(posenc_context *context, const scaling_case *c)
{
    uint32_t dim = c->rotary_dim;
    float q[TOKENS][2 * MAX_PAIRS];
    memset(q, 0, sizeof q);
    for (int64_t t = 0; t < TOKENS; t++)
        for (uint32_t j = 0; j < dim / 2; j++)
            q[t][j] = 1.0f; /* NEOX: dim j pairs with j + dim/2, which stays 0 */
    int64_t shape[2] = {TOKENS, dim};
    int64_t positions_shape[1] = {TOKENS};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 2, shape),
        .positions = posenc_tensor_of_host((void *)positions, POSENC_DTYPE_I32, 1,
                                           positions_shape),
        .theta = c->theta,
        .scaling = c->scaling,
    };
    desc.q.strides[0] = (int64_t)sizeof q[0];
    posenc_status status = posenc_rope(context, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  %s: %s: %s\n", c->name, posenc_status_name(status),
                posenc_context_last_error(context));
        return;
    }
    double worst = 0;
    for (int64_t t = 0; t < TOKENS; t++) {
        for (uint32_t j = 0; j < dim / 2; j++) {
            double s, co;
            ref_sincos_product(positions[t], c->inv_freq[j], &s, &co);
            double error = hypot(q[t][j] - c->attention_factor * co,
                                 q[t][j + dim / 2] - c->attention_factor * s) /
                           c->attention_factor;
            if (error > worst)
                worst = error;
        }
    }
    if (!(worst <= PROMISE)) {
        test_failures++;
        fprintf(stderr, "  %s: worst error %.3g of the pair norm, promise %.3g\n", c->name,
                worst, PROMISE);
    }
}

/* <R(m) q, R(n) k> depends only on m - n under every scaling: rows (m, n) and (m + s, n + s)
 * give the same score. Each rotated row is within the promise of exact, so two scores of
 * exact equal value differ by at most 4 * promise * af^2 * |q| |k|. */
static void check_relative(posenc_context *context, const scaling_case *c)
{
    uint32_t dim = c->rotary_dim;
    int32_t shifted[4] = {1000, 37, 1000 + 123457, 37 + 123457};
    float rows[4][2 * MAX_PAIRS];
    double q_norm = 0, k_norm = 0;
    for (uint32_t d = 0; d < dim; d++) {
        rows[0][d] = rows[2][d] = (float)sin(1.0 + 0.37 * d);
        rows[1][d] = rows[3][d] = (float)cos(2.0 + 0.91 * d);
        q_norm += (double)rows[0][d] * rows[0][d];
        k_norm += (double)rows[1][d] * rows[1][d];
    }
    int64_t shape[2] = {4, dim}, positions_shape[1] = {4};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(rows, POSENC_DTYPE_F32, 2, shape),
        .positions = posenc_tensor_of_host(shifted, POSENC_DTYPE_I32, 1, positions_shape),
        .theta = c->theta,
        .scaling = c->scaling,
    };
    desc.q.strides[0] = (int64_t)sizeof rows[0];
    if (c->derive_length) /* keep the table of the main check: same length, not max + 1 */
        desc.scaling.sequence_length = (uint32_t)positions[TOKENS - 1] + 1;
    posenc_status status = posenc_rope(context, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  %s relative: %s\n", c->name, posenc_status_name(status));
        return;
    }
    double near = 0, far = 0;
    for (uint32_t d = 0; d < dim; d++) {
        near += (double)rows[0][d] * rows[1][d];
        far += (double)rows[2][d] * rows[3][d];
    }
    double tolerance = 4 * PROMISE * c->attention_factor * c->attention_factor *
                       sqrt(q_norm * k_norm);
    if (!(fabs(near - far) <= tolerance)) {
        test_failures++;
        fprintf(stderr, "  %s: score %.9g at (m, n), %.9g at (m + s, n + s), tolerance %.3g\n",
                c->name, near, far, tolerance);
    }
}

static double short_factor[MAX_PAIRS], long_factor[MAX_PAIRS];

static void test_device(posenc_context *context, const posenc_device_info *info)
{
    (void)info;
    /* YaRN, checkable by hand: rotary_dim 8, base 10000, factor 4, original 4096, betas 32/1
     * give inv_freq [1, 0.1, 0.00625, 0.00025] and attention factor 0.1 ln 4 + 1. */
    scaling_case hand = {
        .name = "yarn by hand",
        .rotary_dim = 8,
        .theta = 10000,
        .scaling = {.type = POSENC_ROPE_SCALING_YARN, .factor = 4,
                    .original_max_positions = 4096, .beta_fast = 32, .beta_slow = 1},
        .inv_freq = {1, 0.1, 0.00625, 0.00025},
        .attention_factor = 0.1 * log(4.0) + 1,
    };
    run_case(context, &hand);
    scaling_case check = hand;
    yarn_reference(&check);
    for (int j = 0; j < 4; j++)
        CHECK(fabs(check.inv_freq[j] - hand.inv_freq[j]) <= 1e-15 * hand.inv_freq[j]);

    /* YaRN's attention factor by hand, as HF transformers computes it: the mscale ratio only
     * when both mscale and mscale_all_dim are given, else 0.1 ln(factor) + 1 whatever the one
     * given says. Factor 40 gives inv_freq [1, 0.1, 0.005125, 0.000025] (the ramp as above). */
    struct {
        const char *name;
        double mscale, mscale_all_dim, attention_factor;
    } mscales[] = {
        {"yarn factor 40, mscale_all_dim alone", 0, 1, 1.3688879454113936},
        {"yarn factor 40, mscale alone", 0.707, 0, 1.3688879454113936},
        {"yarn factor 40, neither mscale", 0, 0, 1.3688879454113936},
        {"yarn factor 40, mscale = mscale_all_dim (DeepSeek-V3)", 1, 1, 1.0},
        {"yarn factor 40, mscale 1, mscale_all_dim 0.8", 1, 0.8, 1.0569662567531275},
    };
    for (size_t i = 0; i < sizeof mscales / sizeof mscales[0]; i++) {
        scaling_case by_hand = {
            .name = mscales[i].name,
            .rotary_dim = 8,
            .theta = 10000,
            .scaling = {.type = POSENC_ROPE_SCALING_YARN, .factor = 40,
                        .original_max_positions = 4096, .mscale = mscales[i].mscale,
                        .mscale_all_dim = mscales[i].mscale_all_dim},
            .inv_freq = {1, 0.1, 0.005125, 0.000025},
            .attention_factor = mscales[i].attention_factor,
        };
        run_case(context, &by_hand);
        scaling_case formula = by_hand;
        yarn_reference(&formula);
        CHECK(fabs(formula.attention_factor - by_hand.attention_factor) <= 1e-15);
    }

    scaling_case cases[] = {
        {.name = "yarn", .rotary_dim = 128, .theta = 10000,
         .scaling = {.type = POSENC_ROPE_SCALING_YARN, .factor = 16,
                     .original_max_positions = 4096}},
        {.name = "yarn mscale and no_truncate", .rotary_dim = 64, .theta = 1e6,
         .scaling = {.type = POSENC_ROPE_SCALING_YARN, .factor = 32,
                     .original_max_positions = 4096, .beta_fast = 24, .beta_slow = 2,
                     .mscale = 1, .mscale_all_dim = 0.8, .no_truncate = true}},
        {.name = "llama3", .rotary_dim = 128, .theta = 500000,
         .scaling = {.type = POSENC_ROPE_SCALING_LLAMA3, .factor = 8,
                     .original_max_positions = 8192, .low_freq_factor = 1,
                     .high_freq_factor = 4}},
        {.name = "longrope short", .rotary_dim = 96, .theta = 10000,
         .scaling = {.type = POSENC_ROPE_SCALING_LONGROPE, .factor = 32,
                     .original_max_positions = 4096, .sequence_length = 2048,
                     .short_factor = short_factor, .long_factor = long_factor,
                     .factor_count = 48}},
        {.name = "longrope long", .rotary_dim = 96, .theta = 10000,
         .scaling = {.type = POSENC_ROPE_SCALING_LONGROPE, .factor = 32,
                     .original_max_positions = 4096, .sequence_length = 131072,
                     .short_factor = short_factor, .long_factor = long_factor,
                     .factor_count = 48}},
        {.name = "longrope length from positions", .rotary_dim = 96, .theta = 10000,
         .scaling = {.type = POSENC_ROPE_SCALING_LONGROPE, .factor = 32,
                     .original_max_positions = 4096, .short_factor = short_factor,
                     .long_factor = long_factor, .factor_count = 48},
         .derive_length = true},
        {.name = "dynamic ntk below the original length", .rotary_dim = 128, .theta = 10000,
         .scaling = {.type = POSENC_ROPE_SCALING_DYNAMIC_NTK, .factor = 2,
                     .original_max_positions = 2048, .sequence_length = 1500}},
        {.name = "dynamic ntk length from positions", .rotary_dim = 128, .theta = 10000,
         .scaling = {.type = POSENC_ROPE_SCALING_DYNAMIC_NTK, .factor = 2,
                     .original_max_positions = 2048},
         .derive_length = true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        scaling_case *c = &cases[i];
        uint32_t length = c->derive_length ? (uint32_t)positions[TOKENS - 1] + 1
                                           : c->scaling.sequence_length;
        switch (c->scaling.type) {
        case POSENC_ROPE_SCALING_YARN: yarn_reference(c); break;
        case POSENC_ROPE_SCALING_LLAMA3: llama3_reference(c); break;
        case POSENC_ROPE_SCALING_LONGROPE: longrope_reference(c, length); break;
        default: dynamic_ntk_reference(c, length); break;
        }
        run_case(context, c);
        check_relative(context, c);
    }
}

/* Bad scaling fields: a clear status and a message naming the field. */
static void test_validation(posenc_context *context)
{
    float q[4][8] = {{0}};
    int64_t shape[2] = {4, 8};
    struct {
        posenc_rope_scaling scaling;
        const char *field;
    } bad[] = {
        {{.type = POSENC_ROPE_SCALING_YARN, .factor = 0.5, .original_max_positions = 4096},
         "scaling.factor"},
        {{.type = POSENC_ROPE_SCALING_YARN, .factor = 4}, "scaling.original_max_positions"},
        {{.type = POSENC_ROPE_SCALING_YARN, .factor = 4, .original_max_positions = 4096,
          .beta_fast = 1, .beta_slow = 32},
         "scaling.beta_slow"},
        {{.type = POSENC_ROPE_SCALING_LLAMA3, .factor = 8, .original_max_positions = 8192,
          .low_freq_factor = 4, .high_freq_factor = 1},
         "scaling.low_freq_factor"},
        {{.type = POSENC_ROPE_SCALING_LONGROPE, .original_max_positions = 4096,
          .short_factor = short_factor, .factor_count = 4},
         "scaling.long_factor"},
        {{.type = POSENC_ROPE_SCALING_LONGROPE, .original_max_positions = 4096,
          .short_factor = short_factor, .long_factor = long_factor, .factor_count = 3},
         "scaling.factor_count"},
        {{.type = POSENC_ROPE_SCALING_DYNAMIC_NTK, .factor = NAN, .original_max_positions = 2},
         "scaling.factor"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        posenc_rope_desc desc = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 2, shape),
                                 .scaling = bad[i].scaling};
        CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
        if (!strstr(posenc_context_last_error(context), bad[i].field)) {
            test_failures++;
            fprintf(stderr, "  message '%s' does not name %s\n",
                    posenc_context_last_error(context), bad[i].field);
        }
    }
    for (int t = 0; t < 4; t++)
        for (int d = 0; d < 8; d++)
            CHECK(q[t][d] == 0.0f); /* outputs untouched */
}

int main(void)
{
    for (int j = 0; j < MAX_PAIRS; j++) {
        short_factor[j] = 1.0 + 0.05 * j;
        long_factor[j] = 1.0 + 0.9 * j;
    }
    printf("test_scaling: YaRN, Llama 3, LongRoPE, dynamic NTK against the reference formulas\n");
    if (test_for_each_device(test_device) == 0)
        test_failures++;
    posenc_context *context = NULL;
    posenc_context_desc desc = {.backend = POSENC_BACKEND_CPU};
    CHECK_OK(posenc_context_create(&desc, &context));
    if (context)
        test_validation(context);
    posenc_context_destroy(context);
    return test_finish("test_scaling");
}
