/* SPDX-License-Identifier: MIT */
/* Float64 references for the demo's accuracy check: angles reduced modulo 2*pi in
 * double-double (accurate to about 1e-15 even at position 2^31), RoPE error relative to the
 * rotated pair's norm, sinusoidal absolute error. */
#ifndef POSENC_CLI_REFERENCE_CHECK_H
#define POSENC_CLI_REFERENCE_CHECK_H

#include <posenc/posenc.h>
#include <stdbool.h>
#include <stdint.h>

/* position * frequency reduced to about [-pi, pi]; position * frequency must be below 2^50. */
double cli_reduce_angle(double position, double frequency);

/* inv_freq[j] = theta^(-2j / rotary_dim), j < rotary_dim / 2. */
void cli_rope_inv_freq(double theta, uint32_t rotary_dim, double *inv_freq);

/* An f32 RoPE result to check: `in` and `out` packed [batch, tokens, heads, head_dim]. */
typedef struct cli_rope_check {
    const float *in;
    const float *out;
    int64_t batch, tokens, heads, head_dim;
    const int32_t *positions;  /* [batch, tokens]; NULL: position_offset + token index */
    int32_t position_offset;
    uint32_t rotary_dim;
    posenc_rope_style style;
    const double *inv_freq;    /* rotary_dim / 2 frequencies */
    bool inverse;
    double attention_factor;   /* 1 when unused */
} cli_rope_check;

/* max |out - ref| / |ref| over rotated pairs (vector norms of the pair); pass-through dims must
 * be copied exactly (any difference counts as an infinite error). Negative if out of memory. */
double cli_rope_max_error(const cli_rope_check *check);

/* max |out - ref| of an f32 table out[rows, d_model] at positions position_offset + row;
 * negative if out of memory. */
double cli_sinusoidal_max_error(const float *out, int64_t rows, int64_t d_model,
                                int32_t position_offset, posenc_sinusoidal_layout layout,
                                double base, double freq_shift);

#endif
