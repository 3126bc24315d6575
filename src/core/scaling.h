/* SPDX-License-Identifier: MIT */
/* Context-extension scalings of RoPE frequencies, on the host in float64, with the semantics of
 * HF transformers' modeling_rope_utils.py (the reference most checkpoints are converted from).
 * Deviation: HF evaluates the YaRN ramp and the LongRoPE/Llama 3 factors in float32; here
 * everything is float64, so tables agree to float32 rounding, not bit for bit. */
#ifndef POSENC_CORE_SCALING_H
#define POSENC_CORE_SCALING_H

#include "core/internal.h"

/* Fills `defaults` from `scaling` with the published defaults applied (beta_fast 32,
 * beta_slow 1, low_freq_factor 1, high_freq_factor 4, factor 1; mscale and mscale_all_dim stay 0
 * when not given, which HF tells apart from 1) and validates every
 * field the type uses (a factor below 1, a missing original_max_positions, low >= high, an
 * array entry that is not a finite number > 0, ...). Fields the type does not use must be 0.
 * `pairs` is rotary_dim / 2. */
posenc_status posenc__scaling_resolve(posenc_context *ctx, const posenc_rope_scaling *scaling,
                                      uint32_t pairs, posenc_rope_scaling *resolved);

/* Everything a scaled frequency table needs, worked out once per table. */
typedef struct posenc__scaling_plan {
    posenc_rope_scaling scaling; /* resolved: defaults applied */
    uint32_t rotary_dim;
    double base;                 /* theta after NTK / dynamic NTK */
    double ramp_low, ramp_high;  /* YaRN: the dims between which it blends */
    const double *ext_factors;   /* LongRoPE: the short or long factors in use */
    double attention_factor;     /* what the scaling implies (1 for most types) */
} posenc__scaling_plan;

/* Plans the table for base `theta` and the current `sequence_length` (DYNAMIC_NTK, LONGROPE;
 * ignored by the others). `scaling` comes from posenc__scaling_resolve. */
void posenc__scaling_plan_make(const posenc_rope_scaling *scaling, uint32_t rotary_dim,
                               double theta, uint32_t sequence_length,
                               posenc__scaling_plan *plan);

/* Frequency j (radians per position) of the planned table, at exponent i: base^(-2i /
 * rotary_dim), scaled as pair j (the YaRN ramps and LongRoPE's factors read j). i is j itself
 * except for ggml's vision mode, whose exponents restart in each section while its ramp runs
 * over the pairs. */
double posenc__scaling_frequency(const posenc__scaling_plan *plan, uint32_t i, uint32_t j);

/* The sequence length the positions imply, as the reference derives it: the largest position
 * plus one (0 when all are negative), over every position component (HF takes the max of the
 * whole [3, batch, tokens] position_ids of M-RoPE). Reads the positions (downloading them from
 * a device buffer); without positions it is position_offset + tokens. */
posenc_status posenc__sequence_length(posenc_context *ctx, const posenc__view *positions,
                                      bool has_positions, int64_t rows, int64_t tokens,
                                      int32_t position_offset, uint32_t *length);

#endif
