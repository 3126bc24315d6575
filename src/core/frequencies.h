/* SPDX-License-Identifier: MIT */
/* Host-side frequency tables in float64, turned into fixed-point turns for the kernels. */
#ifndef POSENC_CORE_FREQUENCIES_H
#define POSENC_CORE_FREQUENCIES_H

#include "core/internal.h"

/* Largest frequency accepted, in radians per position (2^32 turns). */
#define POSENC__MAX_RADIANS_PER_POSITION (6.283185307179586 * 4294967296.0)

/* Validates the rope descriptor's frequency fields (theta, inv_freq, scaling, attention_factor)
 * and leaves rotary_dim/2 frequencies in ctx->rope_freqs (recomputed only when an input
 * changed) and the attention factor in `*attention_factor`: the caller's, else the scaling's.
 * `sequence_length` is the current length DYNAMIC_NTK and LONGROPE scale by. */
posenc_status posenc__rope_frequencies(posenc_context *ctx, const posenc_rope_desc *desc,
                                       uint32_t rotary_dim, uint32_t sequence_length,
                                       float *attention_factor);

/* The first of the fields that shape the angles posenc computes (theta, inv_freq and its count,
 * attention_factor, the scaling's) that is set, written into `name` ("scaling.factor"); NULL
 * when none is: caller cos/sin tables replace them all. */
const char *posenc__rope_angle_field(const posenc_rope_desc *desc, char *name, size_t size);

/* Whether ctx->rope_freqs still holds table `id` and it is still the table of `desc`, when
 * `desc` equals field for field a descriptor posenc__rope_frequencies gave table `id` (with
 * this rotary_dim and a sequence length not taken from the positions): the caller's arrays
 * are compared by value, so new values in the same arrays are seen. */
bool posenc__rope_frequencies_current(const posenc_context *ctx, const posenc_rope_desc *desc,
                                      uint32_t rotary_dim, uint64_t id);

/* Leaves `half` frequencies base^(-i / (half - freq_shift)) * position_scale in
 * ctx->sinusoidal_freqs (recomputed only when an input changed). The caller has validated base,
 * freq_shift and position_scale. */
posenc_status posenc__sinusoidal_frequencies(posenc_context *ctx, uint32_t half, double base,
                                             double freq_shift, double position_scale);

/* Frees both caches' memory (context destruction). */
void posenc__free_freq_caches(posenc_context *ctx);

#endif
