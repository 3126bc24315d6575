/* SPDX-License-Identifier: MIT */
/* The lost-device tests' shared RoPE (lost_work.h). */
#include "lost_work.h"

#include "test_common.h"

#include <math.h>
#include <string.h>

const int64_t lost_shape[3] = {LOST_TOKENS, LOST_HEADS, LOST_DIM};

void lost_fill(float *values, float scale)
{
    for (int i = 0; i < LOST_ELEMENTS; i++)
        values[i] = scale * (float)((i * 7) % 13 - 6) / 6.0f;
}

/* The worst difference of q (rotated from `input`) from the float64 rotation. */
static double rope_error(const float *q, const float *input)
{
    double worst = 0.0;
    for (int t = 0; t < LOST_TOKENS; t++) {
        for (int h = 0; h < LOST_HEADS; h++) {
            const float *x = input + (t * LOST_HEADS + h) * LOST_DIM;
            const float *y = q + (t * LOST_HEADS + h) * LOST_DIM;
            for (int j = 0; j < LOST_DIM / 2; j++) {
                double angle = t * pow(10000.0, -2.0 * j / LOST_DIM);
                double a = x[j], b = x[j + LOST_DIM / 2];
                worst = fmax(worst, fabs(y[j] - (a * cos(angle) - b * sin(angle))));
                worst = fmax(worst,
                             fabs(y[j + LOST_DIM / 2] - (b * cos(angle) + a * sin(angle))));
            }
        }
    }
    return worst;
}

void lost_check_working(posenc_context *ctx, const char *test_name, const char *what)
{
    static float q[LOST_ELEMENTS], input[LOST_ELEMENTS];
    lost_fill(input, 1.0f);
    memcpy(q, input, sizeof q);
    posenc_rope_desc rope = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, lost_shape)};
    posenc_status status = posenc_rope(ctx, &rope);
    CHECK_OK(status);
    if (status != POSENC_OK)
        fprintf(stderr, "%s: %s: %s\n", test_name, what, posenc_context_last_error(ctx));
    else if (!(rope_error(q, input) <= 1e-5)) {
        test_failures++;
        fprintf(stderr, "%s: %s: RoPE is off by %g\n", test_name, what, rope_error(q, input));
    }
}
