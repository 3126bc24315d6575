/* SPDX-License-Identifier: MIT */
/* Mathematical properties the encodings must have, checked on every device by comparing the
 * library with itself (no reference): RoPE preserves norms, makes attention scores depend only on
 * the relative position, and its inverse undoes it; sinusoidal rows obey the angle-addition
 * rotation PE(p + k) = M(k) PE(p), are distinct, and stay within [-1, 1].
 *
 * Every tolerance is derived from the promise u8 = 8 * 2^-24: a rotated pair is within
 * u8 * |pair| of exact, a sinusoidal value within u8 absolute. */
#include "reference.h"
#include "test_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPORTS 6

/* The properties, for the per-device summary of the worst difference / tolerance seen. */
enum { P_NORM, P_RELATIVE, P_INVERSE, P_NEGATED, P_ADDITION, P_COUNT };
static const char *const property_names[P_COUNT] = {"norm", "relative position", "inverse",
                                                    "inverse = forward at -p",
                                                    "angle addition"};
static double worst[P_COUNT];
static int reports;

static void report(const char *what, double got, double expected, double tolerance)
{
    test_failures++;
    if (reports++ < MAX_REPORTS)
        fprintf(stderr, "  %s: %.12g vs %.12g, difference %.3g > tolerance %.3g\n", what, got,
                expected, fabs(got - expected), tolerance);
}

/* Checks |got - expected| <= tolerance (NaN fails) and records the ratio. */
static void expect_near(int property, const char *what, double got, double expected,
                        double tolerance)
{
    double difference = fabs(got - expected);
    double ratio = tolerance > 0 ? difference / tolerance : (difference > 0 ? INFINITY : 0);
    if (!(ratio <= worst[property]))
        worst[property] = ratio;
    if (!(difference <= tolerance))
        report(what, got, expected, tolerance);
}

static void fill_uniform(float *x, size_t n, test_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)test_rng_uniform(rng, -1.0, 1.0);
}

/* Random int32 position of any magnitude, either sign. */
static int32_t random_position(test_rng *rng)
{
    uint32_t magnitude = test_rng_u32(rng) >> (1 + test_rng_u32(rng) % 31);
    return (test_rng_u32(rng) & 1u) ? (int32_t)(-(int64_t)magnitude - 1) : (int32_t)magnitude;
}

static double dot(const float *a, const float *b, uint32_t n)
{
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += (double)a[i] * (double)b[i];
    return sum;
}

typedef struct rope_variant {
    posenc_rope_style style;
    uint32_t head_dim, rotary_dim;
    double theta;
} rope_variant;

static const rope_variant variants[] = {
    {POSENC_ROPE_NEOX, 128, 0, 0},
    {POSENC_ROPE_GPTJ, 64, 0, 500000.0},
    {POSENC_ROPE_NEOX, 96, 64, 1e6},
    {POSENC_ROPE_GPTJ, 6, 2, 0},
};

#define TOKENS 256

/* |R(p) x| = |x| for the rotated part (attention factor 1), and the rest is untouched. Each pair
 * norm is within u8 * |pair| of exact, so the rotated part's norm is within u8 * its norm. */
static void check_norms(posenc_context *context, const rope_variant *v, test_rng *rng)
{
    const uint32_t D = v->head_dim, R = v->rotary_dim ? v->rotary_dim : D;
    const int H = 2;
    size_t n = (size_t)TOKENS * H * D;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    int32_t positions[TOKENS];
    if (!x || !y) {
        test_failures++;
        goto done;
    }
    fill_uniform(x, n, rng);
    for (int t = 0; t < TOKENS; t++)
        positions[t] = random_position(rng);
    int64_t shape[3] = {TOKENS, H, D}, p_shape[1] = {TOKENS};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(x, POSENC_DTYPE_F32, 3, shape),
        .q_out = posenc_tensor_of_host(y, POSENC_DTYPE_F32, 3, shape),
        .positions = posenc_tensor_of_host(positions, POSENC_DTYPE_I32, 1, p_shape),
        .rotary_dim = v->rotary_dim,
        .style = v->style,
        .theta = v->theta,
    };
    CHECK_OK(posenc_rope(context, &desc));
    for (size_t head = 0; head < (size_t)TOKENS * H; head++) {
        const float *a = x + head * D, *b = y + head * D;
        /* the rotated dims are the first R for both styles */
        double before = sqrt(dot(a, a, R)), after = sqrt(dot(b, b, R));
        expect_near(P_NORM, "norm of rotated dims", after, before, REF_PROMISE * before);
        for (uint32_t d = R; d < D; d++)
            if (a[d] != b[d])
                report("pass-through dim", b[d], a[d], 0.0);
    }
done:
    free(x);
    free(y);
}

/* <R(m) q, R(n) k> = <R(m + s) q, R(n + s) k>. Each rotated vector is within u8 * |v| of exact,
 * so each score is within (2 u8 + u8^2) |q| |k| of the exact score, which is the same for both
 * pairs of positions: the two differ by at most 2 (2 u8 + u8^2) |q| |k| < 4.01 u8 |q| |k|. */
static void check_relative(posenc_context *context, const rope_variant *v, int32_t shift,
                           bool float_positions, test_rng *rng)
{
    const uint32_t D = v->head_dim;
    enum { TRIALS = 64 };
    /* token 4i: q_i at m, 4i+1: q_i at m+s, 4i+2: k_i at n, 4i+3: k_i at n+s */
    size_t n = (size_t)4 * TRIALS * D;
    float *x = malloc(n * sizeof *x);
    int32_t positions_i[4 * TRIALS];
    float positions_f[4 * TRIALS];
    if (!x) {
        test_failures++;
        return;
    }
    for (int i = 0; i < TRIALS; i++) {
        fill_uniform(x + (size_t)4 * i * D, D, rng);
        memcpy(x + (size_t)(4 * i + 1) * D, x + (size_t)4 * i * D, D * sizeof *x);
        fill_uniform(x + (size_t)(4 * i + 2) * D, D, rng);
        memcpy(x + (size_t)(4 * i + 3) * D, x + (size_t)(4 * i + 2) * D, D * sizeof *x);
        if (float_positions) {
            /* quarters below 2^20: m + s stays exact in f32 for |s| < 2^21 */
            float m = (float)floor(test_rng_uniform(rng, -4194304.0, 4194304.0)) * 0.25f;
            float k = (float)floor(test_rng_uniform(rng, -4194304.0, 4194304.0)) * 0.25f;
            positions_f[4 * i] = m;
            positions_f[4 * i + 1] = m + (float)shift;
            positions_f[4 * i + 2] = k;
            positions_f[4 * i + 3] = k + (float)shift;
        } else {
            /* m, n in [-100000, 100000]; m + s must stay an int32 */
            int32_t m = (int32_t)floor(test_rng_uniform(rng, -100000.0, 100000.0));
            int32_t k = (int32_t)floor(test_rng_uniform(rng, -100000.0, 100000.0));
            positions_i[4 * i] = m;
            positions_i[4 * i + 1] = (int32_t)((int64_t)m + shift);
            positions_i[4 * i + 2] = k;
            positions_i[4 * i + 3] = (int32_t)((int64_t)k + shift);
        }
    }
    int64_t shape[3] = {4 * TRIALS, 1, D}, p_shape[1] = {4 * TRIALS};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(x, POSENC_DTYPE_F32, 3, shape),
        .positions = float_positions
                         ? posenc_tensor_of_host(positions_f, POSENC_DTYPE_F32, 1, p_shape)
                         : posenc_tensor_of_host(positions_i, POSENC_DTYPE_I32, 1, p_shape),
        .rotary_dim = v->rotary_dim,
        .style = v->style,
        .theta = v->theta,
    };
    /* norms before rotating (rotation preserves them up to u8, which the bound absorbs) */
    double norms[TRIALS][2];
    for (int i = 0; i < TRIALS; i++) {
        const float *q = x + (size_t)4 * i * D, *k = x + (size_t)(4 * i + 2) * D;
        norms[i][0] = sqrt(dot(q, q, D));
        norms[i][1] = sqrt(dot(k, k, D));
    }
    CHECK_OK(posenc_rope(context, &desc));
    for (int i = 0; i < TRIALS; i++) {
        const float *q_m = x + (size_t)4 * i * D, *q_ms = q_m + D, *k_n = q_ms + D,
                    *k_ns = k_n + D;
        double near = dot(q_m, k_n, D), far = dot(q_ms, k_ns, D);
        double tolerance = 4.01 * REF_PROMISE * norms[i][0] * norms[i][1];
        char what[160];
        snprintf(what, sizeof what, "score at (m+s, n+s) vs (m, n), s = %ld, %s positions",
                 (long)shift, float_positions ? "f32" : "i32");
        expect_near(P_RELATIVE, what, far, near, tolerance);
    }
    free(x);
}

/* Forward then inverse gives x back: the forward result is within u8 |x| of exact, the inverse of
 * that within u8 |out| <= u8 (1 + u8) |x|, so the round trip is within u8 (2 + u8) |pair|. Also
 * inverse at p is forward at -p, both within u8 of the same exact value: 2 u8 apart at most. */
static void check_inverse(posenc_context *context, const rope_variant *v, bool float_positions,
                          test_rng *rng)
{
    const uint32_t D = v->head_dim, R = v->rotary_dim ? v->rotary_dim : D;
    const int H = 3;
    size_t n = (size_t)TOKENS * H * D;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
    int32_t positions_i[TOKENS], negated_i[TOKENS];
    float positions_f[TOKENS], negated_f[TOKENS];
    if (!x || !y || !z) {
        test_failures++;
        goto done;
    }
    fill_uniform(x, n, rng);
    for (int t = 0; t < TOKENS; t++) {
        int32_t p = random_position(rng);
        if (p == INT32_MIN)
            p = INT32_MAX;
        positions_i[t] = p;
        negated_i[t] = -p;
        positions_f[t] = (float)p * 0.75f;
        negated_f[t] = -positions_f[t];
    }
    int64_t shape[3] = {TOKENS, H, D}, p_shape[1] = {TOKENS};
    posenc_tensor positions =
        float_positions ? posenc_tensor_of_host(positions_f, POSENC_DTYPE_F32, 1, p_shape)
                        : posenc_tensor_of_host(positions_i, POSENC_DTYPE_I32, 1, p_shape);
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(x, POSENC_DTYPE_F32, 3, shape),
        .q_out = posenc_tensor_of_host(y, POSENC_DTYPE_F32, 3, shape),
        .positions = positions,
        .rotary_dim = v->rotary_dim,
        .style = v->style,
        .theta = v->theta,
    };
    CHECK_OK(posenc_rope(context, &desc)); /* y = R(p) x */
    posenc_rope_desc back = desc;
    back.q = desc.q_out;
    back.q_out = (posenc_tensor){0};
    back.inverse = true;
    memcpy(z, y, n * sizeof *z);
    CHECK_OK(posenc_rope(context, &back)); /* y = R(-p) R(p) x, in place */
    posenc_rope_desc negated = desc;
    negated.q = posenc_tensor_of_host(z, POSENC_DTYPE_F32, 3, shape);
    negated.q_out = (posenc_tensor){0};
    negated.positions =
        float_positions ? posenc_tensor_of_host(negated_f, POSENC_DTYPE_F32, 1, p_shape)
                        : posenc_tensor_of_host(negated_i, POSENC_DTYPE_I32, 1, p_shape);
    CHECK_OK(posenc_rope(context, &negated)); /* z = R(-p) R(p) x, by negated positions */
    for (size_t head = 0; head < (size_t)TOKENS * H; head++) {
        const float *a = x + head * D, *b = y + head * D, *c = z + head * D;
        for (uint32_t j = 0; j < R / 2; j++) {
            uint32_t ia, ib;
            ref_rope_pair(v->style, R, j, &ia, &ib);
            double pair = hypot(a[ia], a[ib]);
            double round_trip = REF_PROMISE * (2.0 + REF_PROMISE) * pair;
            double error = hypot((double)b[ia] - a[ia], (double)b[ib] - a[ib]);
            expect_near(P_INVERSE, "inverse after forward, pair error", error, 0.0, round_trip);
            /* both undo the same forward result, each within u8 (1 + u8) |pair| of exact */
            double twice = 2.0 * REF_PROMISE * (1.0 + REF_PROMISE) * pair;
            double apart = hypot((double)b[ia] - c[ia], (double)b[ib] - c[ib]);
            expect_near(P_NEGATED, "inverse vs forward at -p, pair difference", apart, 0.0,
                        twice);
        }
        for (uint32_t d = R; d < D; d++)
            if (b[d] != a[d] || c[d] != a[d])
                report("pass-through dim after round trip", b[d], a[d], 0.0);
    }
done:
    free(x);
    free(y);
    free(z);
}

/* Column of sin(p f_i) and cos(p f_i) in a row of the given layout. */
static void sin_cos_columns(posenc_sinusoidal_layout layout, uint32_t d_model, uint32_t i,
                            uint32_t *sin_col, uint32_t *cos_col)
{
    uint32_t half = d_model / 2;
    switch (layout) {
    case POSENC_SINUSOIDAL_SIN_COS:
        *sin_col = i, *cos_col = half + i;
        break;
    case POSENC_SINUSOIDAL_COS_SIN:
        *cos_col = i, *sin_col = half + i;
        break;
    default:
        *sin_col = 2 * i, *cos_col = 2 * i + 1;
        break;
    }
}

/* PE(p + k) = M(k) PE(p) from the library's own rows p, k and p + k. Each value is within u8 of
 * exact, so s(p)c(k) + c(p)s(k) errs by at most u8 (|s(p)| + |c(p)| + |s(k)| + |c(k)|) + 2 u8^2
 * <= 2 sqrt(2) u8 + 2 u8^2, and the row p + k by u8: 4 u8 covers the difference. */
static void check_addition(posenc_context *context, posenc_sinusoidal_layout layout,
                           uint32_t d_model, double freq_shift, bool float_positions,
                           test_rng *rng)
{
    enum { TRIALS = 100 };
    const uint32_t D = d_model;
    float *table = malloc((size_t)3 * TRIALS * D * sizeof *table);
    int32_t positions_i[3 * TRIALS];
    float positions_f[3 * TRIALS];
    if (!table) {
        test_failures++;
        return;
    }
    for (int t = 0; t < TRIALS; t++) {
        if (float_positions) {
            /* quarters below 2^20, so that p + k is exact in f32 */
            float p = (float)floor(test_rng_uniform(rng, -4194304.0, 4194304.0)) * 0.25f;
            float k = (float)floor(test_rng_uniform(rng, -4194304.0, 4194304.0)) * 0.25f;
            positions_f[3 * t] = p, positions_f[3 * t + 1] = k, positions_f[3 * t + 2] = p + k;
        } else {
            /* p, k of any magnitude with p + k an int32 */
            int32_t p = random_position(rng) / 2, k = random_position(rng) / 2;
            positions_i[3 * t] = p, positions_i[3 * t + 1] = k, positions_i[3 * t + 2] = p + k;
        }
    }
    int64_t shape[2] = {3 * TRIALS, D}, p_shape[1] = {3 * TRIALS};
    posenc_sinusoidal_desc desc = {
        .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, shape),
        .positions = float_positions
                         ? posenc_tensor_of_host(positions_f, POSENC_DTYPE_F32, 1, p_shape)
                         : posenc_tensor_of_host(positions_i, POSENC_DTYPE_I32, 1, p_shape),
        .layout = layout,
        .freq_shift = freq_shift,
    };
    CHECK_OK(posenc_sinusoidal(context, &desc));
    const double tolerance = 4.0 * REF_PROMISE;
    for (int t = 0; t < TRIALS; t++) {
        const float *row_p = table + (size_t)3 * t * D, *row_k = row_p + D, *row_pk = row_k + D;
        for (uint32_t i = 0; i < D / 2; i++) {
            uint32_t s, c;
            sin_cos_columns(layout, D, i, &s, &c);
            double sin_pk = (double)row_p[s] * row_k[c] + (double)row_p[c] * row_k[s];
            double cos_pk = (double)row_p[c] * row_k[c] - (double)row_p[s] * row_k[s];
            expect_near(P_ADDITION, "sin((p+k) f) by angle addition", row_pk[s], sin_pk,
                        tolerance);
            expect_near(P_ADDITION, "cos((p+k) f) by angle addition", row_pk[c], cos_pk,
                        tolerance);
        }
    }
    free(table);
}

/* Rows of positions 0..N-1 (and of N positions ending at INT32_MAX) are pairwise distinct and
 * every value lies in [-1, 1]. */
static void check_rows(posenc_context *context, posenc_sinusoidal_layout layout,
                       uint32_t d_model, int32_t first_position)
{
    enum { N = 1024 };
    const uint32_t D = d_model;
    float *table = malloc((size_t)N * D * sizeof *table);
    if (!table) {
        test_failures++;
        return;
    }
    int64_t shape[2] = {N, D};
    posenc_sinusoidal_desc desc = {
        .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, shape),
        .position_offset = first_position,
        .layout = layout,
    };
    CHECK_OK(posenc_sinusoidal(context, &desc));
    size_t out_of_range = 0, equal_rows = 0;
    for (size_t i = 0; i < (size_t)N * D; i++)
        if (!(table[i] >= -1.0f && table[i] <= 1.0f))
            out_of_range++;
    for (int a = 0; a < N; a++)
        for (int b = a + 1; b < N; b++)
            if (memcmp(table + (size_t)a * D, table + (size_t)b * D, D * sizeof *table) == 0)
                equal_rows++;
    if (out_of_range) {
        test_failures++;
        fprintf(stderr, "  sinusoidal rows from %ld: %zu values outside [-1, 1]\n",
                (long)first_position, out_of_range);
    }
    if (equal_rows) {
        test_failures++;
        fprintf(stderr, "  sinusoidal rows from %ld: %zu pairs of equal rows\n",
                (long)first_position, equal_rows);
    }
    free(table);
}

static void run_device(posenc_context *context, const posenc_device_info *info)
{
    test_rng rng = {.state = 0x0badc0ffeeull};
    for (int p = 0; p < P_COUNT; p++)
        worst[p] = 0.0;
    static const int32_t shifts[] = {1000000, 1 << 30, -(1 << 30), 2147383647};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        const rope_variant *v = &variants[i];
        check_norms(context, v, &rng);
        for (size_t s = 0; s < sizeof shifts / sizeof shifts[0]; s++)
            check_relative(context, v, shifts[s], false, &rng);
        check_relative(context, v, 1000000, true, &rng);
        check_relative(context, v, -(1 << 20), true, &rng);
        check_inverse(context, v, false, &rng);
        check_inverse(context, v, true, &rng);
    }
    static const posenc_sinusoidal_layout layouts[] = {POSENC_SINUSOIDAL_INTERLEAVED,
                                                       POSENC_SINUSOIDAL_SIN_COS,
                                                       POSENC_SINUSOIDAL_COS_SIN};
    for (size_t l = 0; l < 3; l++) {
        check_addition(context, layouts[l], 64, 0.0, false, &rng);
        check_addition(context, layouts[l], 33, 1.0, true, &rng);
        check_rows(context, layouts[l], 64, 0);
        check_rows(context, layouts[l], 31, INT32_MAX - 1023);
    }
    check_rows(context, POSENC_SINUSOIDAL_INTERLEAVED, 16, INT32_MIN);
    printf("    worst difference / tolerance:");
    for (int p = 0; p < P_COUNT; p++)
        printf("%s %s %.3f", p ? "," : "", property_names[p], worst[p]);
    printf("\n");
}

int main(void)
{
    printf("test_properties: RoPE norms, relative positions, inverse; sinusoidal rotations\n");
    test_for_each_device(run_device);
    return test_finish("test_properties");
}
