/* SPDX-License-Identifier: MIT */
/* Float64 references for the demo's accuracy check. The angle position * frequency is formed
 * exactly as a double-double (fma), and k * 2*pi is subtracted with 2*pi split into three
 * doubles, so the reduced angle is accurate to a few 1e-16 radians even at position 2^31, far
 * below the 4.8e-7 being verified. */
#include "reference_check.h"

#include <math.h>
#include <stdlib.h>

/* 2*pi = TWO_PI_1 + TWO_PI_2 + TWO_PI_3, each the double nearest to what remains. */
static const double TWO_PI_1 = 6.283185307179586232e+00;
static const double TWO_PI_2 = 2.449293598294706414e-16;
static const double TWO_PI_3 = -5.989539619436679332e-33;

double cli_reduce_angle(double position, double frequency)
{
    double hi = position * frequency;
    double lo = fma(position, frequency, -hi); /* hi + lo == position * frequency exactly */
    double k = nearbyint(hi * (1.0 / TWO_PI_1));
    double ph = k * TWO_PI_1;
    double pl = fma(k, TWO_PI_1, -ph); /* ph + pl == k * TWO_PI_1 exactly */
    /* hi and ph are within a factor of 2 of each other (or k is 0), so hi - ph is exact. */
    double head = hi - ph;
    double tail = (lo - pl) - k * TWO_PI_2 - k * TWO_PI_3;
    return head + tail;
}

void cli_rope_inv_freq(double theta, uint32_t rotary_dim, double *inv_freq)
{
    for (uint32_t j = 0; j < rotary_dim / 2; j++) {
        inv_freq[j] = pow(theta, -(double)(2 * j) / (double)rotary_dim);
    }
}

double cli_rope_max_error(const cli_rope_check *c)
{
    int64_t half = c->rotary_dim / 2;
    double *cos_table = malloc((size_t)half * sizeof *cos_table);
    double *sin_table = malloc((size_t)half * sizeof *sin_table);
    if (!cos_table || !sin_table) {
        free(cos_table);
        free(sin_table);
        return -1.0;
    }
    double max_error = 0.0;
    for (int64_t b = 0; b < c->batch; b++) {
        for (int64_t t = 0; t < c->tokens; t++) {
            double position = c->positions ? (double)c->positions[b * c->tokens + t]
                                           : (double)c->position_offset + (double)t;
            /* The angle depends on the token only: one table serves every head. */
            for (int64_t j = 0; j < half; j++) {
                double angle = cli_reduce_angle(position, c->inv_freq[j]);
                if (c->inverse) {
                    angle = -angle;
                }
                cos_table[j] = cos(angle) * c->attention_factor;
                sin_table[j] = sin(angle) * c->attention_factor;
            }
            for (int64_t h = 0; h < c->heads; h++) {
                int64_t row = ((b * c->tokens + t) * c->heads + h) * c->head_dim;
                const float *x = c->in + row;
                const float *y = c->out + row;
                for (int64_t j = 0; j < half; j++) {
                    int64_t ia = c->style == POSENC_ROPE_GPTJ ? 2 * j : j;
                    int64_t ib = c->style == POSENC_ROPE_GPTJ ? 2 * j + 1 : j + half;
                    double xa = x[ia], xb = x[ib];
                    double ra = xa * cos_table[j] - xb * sin_table[j];
                    double rb = xa * sin_table[j] + xb * cos_table[j];
                    double norm = hypot(ra, rb);
                    double difference = hypot((double)y[ia] - ra, (double)y[ib] - rb);
                    /* A zero pair must stay zero; measure it absolutely. */
                    double error = norm > 0.0 ? difference / norm : difference;
                    if (!(error <= max_error)) {
                        max_error = isnan(error) ? INFINITY : error;
                    }
                }
                for (int64_t i = c->rotary_dim; i < c->head_dim; i++) {
                    if (x[i] != y[i] && !(isnan(x[i]) && isnan(y[i]))) {
                        max_error = INFINITY;
                    }
                }
            }
        }
    }
    free(cos_table);
    free(sin_table);
    return max_error;
}

double cli_sinusoidal_max_error(const float *out, int64_t rows, int64_t d_model,
                                int32_t position_offset, posenc_sinusoidal_layout layout,
                                double base, double freq_shift)
{
    int64_t half = d_model / 2;
    double *frequencies = malloc((size_t)(half ? half : 1) * sizeof *frequencies);
    if (!frequencies) {
        return -1.0;
    }
    for (int64_t i = 0; i < half; i++) {
        frequencies[i] = pow(base, -(double)i / ((double)half - freq_shift));
    }
    double max_error = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double position = (double)position_offset + (double)r;
        const float *y = out + r * d_model;
        for (int64_t i = 0; i < half; i++) {
            double angle = cli_reduce_angle(position, frequencies[i]);
            double s = sin(angle), c = cos(angle);
            double ys, yc;
            if (layout == POSENC_SINUSOIDAL_INTERLEAVED) {
                ys = y[2 * i];
                yc = y[2 * i + 1];
            } else if (layout == POSENC_SINUSOIDAL_SIN_COS) {
                ys = y[i];
                yc = y[half + i];
            } else {
                yc = y[i];
                ys = y[half + i];
            }
            double error = fmax(fabs(ys - s), fabs(yc - c));
            if (!(error <= max_error)) {
                max_error = isnan(error) ? INFINITY : error;
            }
        }
        if (d_model % 2 && y[d_model - 1] != 0.0f) {
            max_error = INFINITY;
        }
    }
    free(frequencies);
    return max_error;
}
