/* Host-side frequency tables in float64, turned into fixed-point turns for the kernels. */
#ifndef POSENC_CORE_FREQUENCIES_H
#define POSENC_CORE_FREQUENCIES_H

#include "core/internal.h"

/* Largest frequency accepted, in radians per position (2^32 turns). */
#define POSENC__MAX_RADIANS_PER_POSITION (6.283185307179586 * 4294967296.0)

/* Validates the rope descriptor's frequency fields (theta, inv_freq, scaling, attention_factor)
 * and writes rotary_dim/2 frequencies to ctx->freqs and the attention factor to
 * `*attention_factor`. */
posenc_status posenc__rope_frequencies(posenc_context *ctx, const posenc_rope_desc *desc,
                                       uint32_t rotary_dim, float *attention_factor);

/* Writes `half` frequencies base^(-i / (half - freq_shift)) * position_scale to ctx->freqs. The
 * caller has validated base, freq_shift and position_scale. */
posenc_status posenc__sinusoidal_frequencies(posenc_context *ctx, uint32_t half, double base,
                                             double freq_shift, double position_scale);

#endif
