/* RoPE and sinusoidal frequencies: theta, caller tables and context-extension scalings, all in
 * float64 on the host, then rounded once to fixed-point turns (core/angle.h). */
#include "core/frequencies.h"

#include <math.h>
#include <stdlib.h>

posenc_status posenc__reserve_freqs(posenc_context *ctx, uint32_t count)
{
    if (count <= ctx->freqs_capacity)
        return POSENC_OK;
    posenc__freq *grown = realloc(ctx->freqs, (size_t)count * sizeof *grown);
    if (!grown)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "frequencies: cannot allocate %u entries",
                            count);
    ctx->freqs = grown;
    ctx->freqs_capacity = count;
    return POSENC_OK;
}

static bool valid_frequency(double w)
{
    return isfinite(w) && w >= 0.0 && w < POSENC__MAX_RADIANS_PER_POSITION;
}

static const char *scaling_name(posenc_rope_scaling_type type)
{
    switch (type) {
    case POSENC_ROPE_SCALING_NONE: return "NONE";
    case POSENC_ROPE_SCALING_LINEAR: return "LINEAR";
    case POSENC_ROPE_SCALING_NTK: return "NTK";
    case POSENC_ROPE_SCALING_DYNAMIC_NTK: return "DYNAMIC_NTK";
    case POSENC_ROPE_SCALING_YARN: return "YARN";
    case POSENC_ROPE_SCALING_LLAMA3: return "LLAMA3";
    case POSENC_ROPE_SCALING_LONGROPE: return "LONGROPE";
    }
    return "unknown";
}

/* Which scaling fields each type reads; the others must stay zero, since a value there is a
 * mistake (a field meant for another type) rather than something to ignore silently. */
enum {
    USES_FACTOR = 1 << 0,
    USES_ORIGINAL_MAX = 1 << 1,
    USES_SEQUENCE_LENGTH = 1 << 2,
    USES_YARN = 1 << 3,
    USES_LLAMA3 = 1 << 4,
    USES_LONGROPE = 1 << 5,
};

static unsigned scaling_fields(posenc_rope_scaling_type type)
{
    switch (type) {
    case POSENC_ROPE_SCALING_NONE: return 0;
    case POSENC_ROPE_SCALING_LINEAR:
    case POSENC_ROPE_SCALING_NTK: return USES_FACTOR;
    case POSENC_ROPE_SCALING_DYNAMIC_NTK:
        return USES_FACTOR | USES_ORIGINAL_MAX | USES_SEQUENCE_LENGTH;
    case POSENC_ROPE_SCALING_YARN: return USES_FACTOR | USES_ORIGINAL_MAX | USES_YARN;
    case POSENC_ROPE_SCALING_LLAMA3: return USES_FACTOR | USES_ORIGINAL_MAX | USES_LLAMA3;
    case POSENC_ROPE_SCALING_LONGROPE:
        return USES_FACTOR | USES_ORIGINAL_MAX | USES_SEQUENCE_LENGTH | USES_LONGROPE;
    }
    return 0;
}

static posenc_status check_unused_scaling_fields(posenc_context *ctx,
                                                 const posenc_rope_scaling *scaling)
{
    unsigned uses = scaling_fields(scaling->type);
    const char *field = NULL;
    if (!(uses & USES_FACTOR) && scaling->factor != 0.0)
        field = "factor";
    else if (!(uses & USES_ORIGINAL_MAX) && scaling->original_max_positions)
        field = "original_max_positions";
    else if (!(uses & USES_SEQUENCE_LENGTH) && scaling->sequence_length)
        field = "sequence_length";
    else if (!(uses & USES_YARN) && scaling->beta_fast != 0.0)
        field = "beta_fast";
    else if (!(uses & USES_YARN) && scaling->beta_slow != 0.0)
        field = "beta_slow";
    else if (!(uses & USES_YARN) && scaling->mscale != 0.0)
        field = "mscale";
    else if (!(uses & USES_YARN) && scaling->mscale_all_dim != 0.0)
        field = "mscale_all_dim";
    else if (!(uses & USES_YARN) && scaling->no_truncate)
        field = "no_truncate";
    else if (!(uses & USES_LLAMA3) && scaling->low_freq_factor != 0.0)
        field = "low_freq_factor";
    else if (!(uses & USES_LLAMA3) && scaling->high_freq_factor != 0.0)
        field = "high_freq_factor";
    else if (!(uses & USES_LONGROPE) && scaling->short_factor)
        field = "short_factor";
    else if (!(uses & USES_LONGROPE) && scaling->long_factor)
        field = "long_factor";
    if (!field)
        return POSENC_OK;
    return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                        "scaling.%s: is not used by scaling type %s and must be 0", field,
                        scaling_name(scaling->type));
}

posenc_status posenc__rope_frequencies(posenc_context *ctx, const posenc_rope_desc *desc,
                                       uint32_t rotary_dim, float *attention_factor)
{
    const posenc_rope_scaling *scaling = &desc->scaling;
    uint32_t pairs = rotary_dim / 2;

    double theta = desc->theta == 0.0 ? 10000.0 : desc->theta;
    if (!isfinite(theta) || theta <= 0.0)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "theta: must be a finite number > 0, got %g", desc->theta);
    double factor_out = desc->attention_factor == 0.0 ? 1.0 : desc->attention_factor;
    if (!isfinite(factor_out) || factor_out <= 0.0 || factor_out > 3.4e38)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "attention_factor: must be a finite number > 0, got %g",
                            desc->attention_factor);

    if ((unsigned)scaling->type > POSENC_ROPE_SCALING_LONGROPE)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "scaling.type: unknown value %d",
                            (int)scaling->type);
    posenc_status status = check_unused_scaling_fields(ctx, scaling);
    if (status != POSENC_OK)
        return status;

    double factor = scaling->factor == 0.0 ? 1.0 : scaling->factor;
    switch (scaling->type) {
    case POSENC_ROPE_SCALING_NONE:
        break;
    case POSENC_ROPE_SCALING_LINEAR:
    case POSENC_ROPE_SCALING_NTK:
        if (!isfinite(factor) || factor < 1.0)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.factor: must be a finite number >= 1, got %g",
                                scaling->factor);
        if (scaling->type == POSENC_ROPE_SCALING_NTK) {
            if (rotary_dim <= 2)
                return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                    "scaling.type: NTK needs rotary_dim > 2, got %u", rotary_dim);
            theta *= pow(factor, (double)rotary_dim / (rotary_dim - 2.0));
        }
        break;
    case POSENC_ROPE_SCALING_DYNAMIC_NTK:
    case POSENC_ROPE_SCALING_YARN:
    case POSENC_ROPE_SCALING_LLAMA3:
    case POSENC_ROPE_SCALING_LONGROPE:
        return posenc__fail(ctx, POSENC_UNSUPPORTED,
                            "scaling.type: %s is not implemented in this version",
                            scaling_name(scaling->type));
    default:
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "scaling.type: unknown value %d",
                            (int)scaling->type);
    }

    if (desc->inv_freq && desc->inv_freq_count != pairs)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "inv_freq_count: must be rotary_dim/2 = %u, got %u", pairs,
                            desc->inv_freq_count);
    if ((scaling->freq_factors || scaling->short_factor || scaling->long_factor) &&
        scaling->factor_count != pairs)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "scaling.factor_count: must be rotary_dim/2 = %u, got %u", pairs,
                            scaling->factor_count);

    status = posenc__reserve_freqs(ctx, pairs);
    if (status != POSENC_OK)
        return status;
    /* Validate everything before writing, so a bad entry leaves no half-made table behind. */
    for (uint32_t j = 0; j < pairs; j++) {
        if (desc->inv_freq && !valid_frequency(desc->inv_freq[j]))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "inv_freq[%u]: must be finite, >= 0 and < 2^32 turns, got %g", j,
                                desc->inv_freq[j]);
        if (scaling->freq_factors &&
            !(isfinite(scaling->freq_factors[j]) && scaling->freq_factors[j] > 0.0))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.freq_factors[%u]: must be a finite number > 0, got %g",
                                j, scaling->freq_factors[j]);
    }
    for (uint32_t j = 0; j < pairs; j++) {
        double w = desc->inv_freq ? desc->inv_freq[j]
                                  : pow(theta, -(double)(2 * j) / (double)rotary_dim);
        if (!desc->inv_freq && scaling->type == POSENC_ROPE_SCALING_LINEAR)
            w /= factor;
        if (scaling->freq_factors)
            w /= scaling->freq_factors[j];
        if (!valid_frequency(w)) {
            if (scaling->freq_factors)
                return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                    "scaling.freq_factors[%u]: makes frequency %u too large (%g)",
                                    j, j, w);
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "theta: %g gives frequency %u = %g radians per position, too "
                                "large",
                                theta, j, w);
        }
        ctx->freqs[j] = posenc__freq_from_radians(w);
    }
    *attention_factor = (float)factor_out;
    return POSENC_OK;
}

posenc_status posenc__sinusoidal_frequencies(posenc_context *ctx, uint32_t half, double base,
                                             double freq_shift, double position_scale)
{
    posenc_status status = posenc__reserve_freqs(ctx, half);
    if (status != POSENC_OK)
        return status;
    for (uint32_t i = 0; i < half; i++) {
        double w = pow(base, -(double)i / ((double)half - freq_shift)) * position_scale;
        if (!valid_frequency(w))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "%s: frequency %u is too large (%g radians per position)",
                                position_scale != 1.0 ? "position_scale" : "base", i, w);
        ctx->freqs[i] = posenc__freq_from_radians(w);
    }
    return POSENC_OK;
}
