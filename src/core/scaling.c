/* SPDX-License-Identifier: MIT */
/* RoPE context-extension scalings (linear, NTK, dynamic NTK, YaRN, Llama 3, LongRoPE, ggml's
 * YaRN): the published formulas in float64, see scaling.h. */
#include "core/scaling.h"
#include "core/tensor.h"

#include <math.h>

#define TWO_PI 6.283185307179586476925286766559

static bool positive_finite(double v) { return isfinite(v) && v > 0.0; }

static posenc_status check_array(posenc_context *ctx, const double *values, uint32_t pairs,
                                 const char *name)
{
    if (!values)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "scaling.%s: is required", name);
    for (uint32_t j = 0; j < pairs; j++) {
        if (!positive_finite(values[j]))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.%s[%u]: must be a finite number > 0, got %g", name, j,
                                values[j]);
    }
    return POSENC_OK;
}

posenc_status posenc__scaling_resolve(posenc_context *ctx, const posenc_rope_scaling *scaling,
                                      uint32_t pairs, posenc_rope_scaling *resolved)
{
    posenc_rope_scaling r = *scaling;
    posenc_rope_scaling_type type = r.type;
    if (r.factor == 0.0)
        r.factor = 1.0;
    if (type == POSENC_ROPE_SCALING_YARN_GGML) {
        if (r.freq_scale == 0.0)
            r.freq_scale = 1.0;
        if (!positive_finite(r.freq_scale))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.freq_scale: must be a finite number > 0, got %g",
                                scaling->freq_scale);
        if (!isfinite(r.ext_factor))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.ext_factor: must be a finite number, got %g",
                                r.ext_factor);
    }
    bool factor_at_least_one = type != POSENC_ROPE_SCALING_LONGROPE;
    if (!isfinite(r.factor) || (factor_at_least_one ? r.factor < 1.0 : r.factor <= 0.0))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "scaling.factor: must be a finite number %s, got %g",
                            factor_at_least_one ? ">= 1" : "> 0", scaling->factor);

    bool needs_original = type == POSENC_ROPE_SCALING_DYNAMIC_NTK ||
                          type == POSENC_ROPE_SCALING_YARN || type == POSENC_ROPE_SCALING_LLAMA3 ||
                          type == POSENC_ROPE_SCALING_LONGROPE;
    if (needs_original && r.original_max_positions == 0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "scaling.original_max_positions: is required by this scaling type");

    if (type == POSENC_ROPE_SCALING_YARN || type == POSENC_ROPE_SCALING_YARN_GGML) {
        if (r.beta_fast == 0.0)
            r.beta_fast = 32.0;
        if (r.beta_slow == 0.0)
            r.beta_slow = 1.0;
        if (!positive_finite(r.beta_fast) || !positive_finite(r.beta_slow))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.%s: must be a finite number > 0, got %g",
                                positive_finite(r.beta_fast) ? "beta_slow" : "beta_fast",
                                positive_finite(r.beta_fast) ? r.beta_slow : r.beta_fast);
        if (type == POSENC_ROPE_SCALING_YARN && r.beta_slow >= r.beta_fast)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.beta_slow: %g must be below beta_fast %g", r.beta_slow,
                                r.beta_fast);
        /* mscale and mscale_all_dim stay 0 when not given: HF transformers tells "not given"
         * (None, or 0) apart from 1, see posenc__scaling_plan_make. */
        bool mscale_ok = isfinite(r.mscale) && r.mscale >= 0.0;
        if (!mscale_ok || !isfinite(r.mscale_all_dim) || r.mscale_all_dim < 0.0)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.%s: must be a finite number >= 0, got %g",
                                mscale_ok ? "mscale_all_dim" : "mscale",
                                mscale_ok ? r.mscale_all_dim : r.mscale);
    }
    if (type == POSENC_ROPE_SCALING_LLAMA3) {
        if (r.low_freq_factor == 0.0)
            r.low_freq_factor = 1.0;
        if (r.high_freq_factor == 0.0)
            r.high_freq_factor = 4.0;
        if (!positive_finite(r.low_freq_factor) || !positive_finite(r.high_freq_factor))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.%s: must be a finite number > 0",
                                positive_finite(r.low_freq_factor) ? "high_freq_factor"
                                                                   : "low_freq_factor");
        if (r.low_freq_factor >= r.high_freq_factor)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.low_freq_factor: %g must be below high_freq_factor %g",
                                r.low_freq_factor, r.high_freq_factor);
    }
    if (type == POSENC_ROPE_SCALING_LONGROPE) {
        posenc_status status = check_array(ctx, r.short_factor, pairs, "short_factor");
        if (status == POSENC_OK)
            status = check_array(ctx, r.long_factor, pairs, "long_factor");
        if (status != POSENC_OK)
            return status;
    }
    *resolved = r;
    return POSENC_OK;
}

/* YaRN's attention scale for a context `scale` times longer. */
static double yarn_mscale(double scale, double mscale)
{
    return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

/* The (fractional) dim index at which a frequency makes `rotations` turns over the original
 * context. */
static double yarn_correction_dim(double rotations, uint32_t rotary_dim, double theta,
                                  uint32_t original_max)
{
    return rotary_dim * log(original_max / (rotations * TWO_PI)) / (2.0 * log(theta));
}

void posenc__scaling_plan_make(const posenc_rope_scaling *s, uint32_t rotary_dim, double theta,
                               uint32_t sequence_length, posenc__scaling_plan *plan)
{
    posenc__scaling_plan p = {.scaling = *s, .rotary_dim = rotary_dim, .base = theta,
                              .attention_factor = 1.0};
    double exponent = (double)rotary_dim / (rotary_dim - 2.0);
    switch (s->type) {
    case POSENC_ROPE_SCALING_NTK:
        p.base = theta * pow(s->factor, exponent);
        break;
    case POSENC_ROPE_SCALING_DYNAMIC_NTK: {
        /* Plain RoPE up to the original length, then a base that grows with the length. */
        double length = fmax((double)sequence_length, (double)s->original_max_positions);
        p.base = theta * pow(s->factor * length / s->original_max_positions - (s->factor - 1.0),
                             exponent);
        break;
    }
    case POSENC_ROPE_SCALING_YARN: {
        double low = yarn_correction_dim(s->beta_fast, rotary_dim, theta,
                                         s->original_max_positions);
        double high = yarn_correction_dim(s->beta_slow, rotary_dim, theta,
                                          s->original_max_positions);
        if (!s->no_truncate) {
            low = floor(low);
            high = ceil(high);
        }
        p.ramp_low = fmax(low, 0.0);
        p.ramp_high = fmin(high, rotary_dim - 1.0);
        if (p.ramp_low == p.ramp_high)
            p.ramp_high += 0.001; /* as the reference: avoids dividing by zero */
        /* As HF transformers' _compute_yarn_parameters: the ratio only when both are given
         * (DeepSeek); with either missing (or 0) the paper's 0.1 ln(factor) + 1, whatever the
         * other says. */
        if (s->mscale != 0.0 && s->mscale_all_dim != 0.0)
            p.attention_factor =
                yarn_mscale(s->factor, s->mscale) / yarn_mscale(s->factor, s->mscale_all_dim);
        else
            p.attention_factor = yarn_mscale(s->factor, 1.0);
        break;
    }
    case POSENC_ROPE_SCALING_YARN_GGML: {
        /* ggml_rope_yarn_corr_dims, in float64. An original length of 0 gives -inf, which
         * ggml's clamps turn into low 0 and the 0.001 floor of the ramp's width. */
        double low = floor(yarn_correction_dim(s->beta_fast, rotary_dim, theta,
                                               s->original_max_positions));
        double high = ceil(yarn_correction_dim(s->beta_slow, rotary_dim, theta,
                                               s->original_max_positions));
        p.ramp_low = fmax(0.0, low);
        p.ramp_high = fmin(rotary_dim - 1.0, high);
        if (s->ext_factor != 0.0)
            p.attention_factor = 1.0 + 0.1 * log(1.0 / s->freq_scale);
        break;
    }
    case POSENC_ROPE_SCALING_LONGROPE:
        p.ext_factors =
            sequence_length > s->original_max_positions ? s->long_factor : s->short_factor;
        if (s->factor > 1.0)
            p.attention_factor =
                sqrt(1.0 + log(s->factor) / log((double)s->original_max_positions));
        break;
    default:
        break;
    }
    *plan = p;
}

double posenc__scaling_frequency(const posenc__scaling_plan *p, uint32_t i, uint32_t j)
{
    const posenc_rope_scaling *s = &p->scaling;
    double w = pow(p->base, -(double)(2 * (uint64_t)i) / (double)p->rotary_dim);
    switch (s->type) {
    case POSENC_ROPE_SCALING_LINEAR:
        return w / s->factor;
    case POSENC_ROPE_SCALING_YARN: {
        /* Blend from the unscaled frequency (fast dims) to the interpolated one (slow dims). */
        double ramp = fmin(fmax((j - p->ramp_low) / (p->ramp_high - p->ramp_low), 0.0), 1.0);
        double keep = 1.0 - ramp;
        return w / s->factor * (1.0 - keep) + w * keep;
    }
    case POSENC_ROPE_SCALING_YARN_GGML: {
        /* ggml's rope_yarn: theta_interp (1 - mix) + theta_extrap mix, per pair j. */
        double y = (j - p->ramp_low) / fmax(0.001, p->ramp_high - p->ramp_low);
        double mix = (1.0 - fmin(1.0, fmax(0.0, y))) * s->ext_factor;
        return w * (s->freq_scale * (1.0 - mix) + mix);
    }
    case POSENC_ROPE_SCALING_LLAMA3: {
        double original = s->original_max_positions;
        double wavelen = TWO_PI / w;
        if (wavelen > original / s->low_freq_factor)
            return w / s->factor;
        if (wavelen < original / s->high_freq_factor)
            return w;
        double smooth = (original / wavelen - s->low_freq_factor) /
                        (s->high_freq_factor - s->low_freq_factor);
        return (1.0 - smooth) * w / s->factor + smooth * w;
    }
    case POSENC_ROPE_SCALING_LONGROPE:
        return w / p->ext_factors[j];
    default:
        return w;
    }
}

posenc_status posenc__sequence_length(posenc_context *ctx, const posenc__view *positions,
                                      bool has_positions, int64_t rows, int64_t tokens,
                                      int32_t position_offset, uint32_t *length)
{
    double smallest, largest;
    posenc_status status = posenc__positions_range(ctx, positions, has_positions, rows, tokens,
                                                   position_offset, &smallest, &largest);
    if (status != POSENC_OK)
        return status;
    *length = largest < 0.0 ? 0 : largest >= 4294967294.0 ? UINT32_MAX : (uint32_t)largest + 1;
    return POSENC_OK;
}
