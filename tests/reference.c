/* SPDX-License-Identifier: MIT */
/* The float64 reference: exactly reduced sin/cos, RoPE and sinusoidal encodings, f16/bf16
 * conversions and the tolerances of the accuracy promise. Independent of the library's code. */
#include "reference.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* 2*pi = REF_2PI_1 + REF_2PI_2 + REF_2PI_3, each the double nearest to what remains (error below
 * 1e-48). Computed with 300-bit arithmetic. */
static const double REF_2PI_1 = 0x1.921fb54442d18p+2;
static const double REF_2PI_2 = 0x1.1a62633145c07p-52;
static const double REF_2PI_3 = -0x1.f1976b7ed8fbcp-108;

/* ---------------------------------------------------------------------------------------------
 * Element types
 */

uint16_t ref_f16_from_float(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (magnitude >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to infinity */
    if (magnitude < 0x38800000u) {
        /* Below 2^-14: a multiple of 2^-24. Scaling by 2^24 is exact; nearbyintf rounds to
         * nearest even in the default rounding mode, and 0x400 is the smallest normal's code. */
        float m;
        memcpy(&m, &magnitude, sizeof m);
        return (uint16_t)(sign | (uint16_t)nearbyintf(m * 16777216.0f));
    }
    uint32_t h = ((magnitude >> 23) - 127u + 15u) << 10 | ((magnitude & 0x7fffffu) >> 13);
    uint32_t rest = magnitude & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++; /* a carry into the exponent is the correct rounding, up to infinity */
    return (uint16_t)(sign | h);
}

float ref_f16_to_float(uint16_t bits)
{
    uint32_t exponent = (bits >> 10) & 0x1fu;
    uint32_t mantissa = bits & 0x3ffu;
    float magnitude;
    if (exponent == 0)
        magnitude = ldexpf((float)mantissa, -24);
    else if (exponent == 31)
        magnitude = mantissa ? NAN : INFINITY;
    else
        magnitude = ldexpf((float)(mantissa | 0x400u), (int)exponent - 25);
    return (bits & 0x8000u) ? -magnitude : magnitude;
}

uint16_t ref_bf16_from_float(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x40u); /* NaN stays NaN */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

float ref_bf16_to_float(uint16_t bits)
{
    uint32_t wide = (uint32_t)bits << 16;
    float value;
    memcpy(&value, &wide, sizeof value);
    return value;
}

float ref_round_to(posenc_dtype dtype, float value)
{
    switch (dtype) {
    case POSENC_DTYPE_F16:
        return ref_f16_to_float(ref_f16_from_float(value));
    case POSENC_DTYPE_BF16:
        return ref_bf16_to_float(ref_bf16_from_float(value));
    default:
        return value;
    }
}

double ref_load(posenc_dtype dtype, const void *at)
{
    switch (dtype) {
    case POSENC_DTYPE_F16: {
        uint16_t bits;
        memcpy(&bits, at, sizeof bits);
        return ref_f16_to_float(bits);
    }
    case POSENC_DTYPE_BF16: {
        uint16_t bits;
        memcpy(&bits, at, sizeof bits);
        return ref_bf16_to_float(bits);
    }
    case POSENC_DTYPE_I32: {
        int32_t value;
        memcpy(&value, at, sizeof value);
        return value;
    }
    default: {
        float value;
        memcpy(&value, at, sizeof value);
        return value;
    }
    }
}

void ref_store(posenc_dtype dtype, void *at, double value)
{
    switch (dtype) {
    case POSENC_DTYPE_F16: {
        uint16_t bits = ref_f16_from_float((float)value);
        memcpy(at, &bits, sizeof bits);
        break;
    }
    case POSENC_DTYPE_BF16: {
        uint16_t bits = ref_bf16_from_float((float)value);
        memcpy(at, &bits, sizeof bits);
        break;
    }
    case POSENC_DTYPE_I32: {
        int32_t v = (int32_t)value;
        memcpy(at, &v, sizeof v);
        break;
    }
    default: {
        float v = (float)value;
        memcpy(at, &v, sizeof v);
        break;
    }
    }
}

double ref_ulp(posenc_dtype dtype, double value)
{
    int mantissa_bits = 23, min_exponent = -126;
    if (dtype == POSENC_DTYPE_F16) {
        mantissa_bits = 10;
        min_exponent = -14;
    } else if (dtype == POSENC_DTYPE_BF16) {
        mantissa_bits = 7;
    }
    int exponent = min_exponent;
    if (value != 0 && isfinite(value)) {
        frexp(fabs(value), &exponent); /* |value| = m * 2^exponent, m in [0.5, 1) */
        exponent -= 1;
        if (exponent < min_exponent)
            exponent = min_exponent;
    }
    return ldexp(1.0, exponent - mantissa_bits);
}

/* ---------------------------------------------------------------------------------------------
 * Angles
 */

void ref_sincos_product(double position, double frequency, double *sin_out, double *cos_out)
{
    /* position * frequency = hi + lo exactly. */
    double hi = position * frequency;
    double lo = fma(position, frequency, -hi);
    /* hi - k * 2pi: k * REF_2PI_1 = p1 + e1 exactly, and hi - p1 is exact by Sterbenz's lemma
     * (for k != 0, p1 lies within [hi/2, 2*hi]). The remaining terms are below 2^-12 for
     * |hi| <= 2^41, so rounding them costs below 2^-64, far less than one ulp of the result. */
    double k = nearbyint(hi / REF_2PI_1);
    double p1 = k * REF_2PI_1;
    double e1 = fma(k, REF_2PI_1, -p1);
    double head = hi - p1;
    double tail = ((lo - e1) - k * REF_2PI_2) - k * REF_2PI_3;
    double reduced = head + tail;
    *sin_out = sin(reduced);
    *cos_out = cos(reduced);
}

/* ---------------------------------------------------------------------------------------------
 * RoPE
 */

double ref_rope_frequencies(const posenc_rope_desc *desc, uint32_t rotary_dim, double *inv_freq)
{
    uint32_t half = rotary_dim / 2;
    const posenc_rope_scaling *scaling = &desc->scaling;
    double factor = scaling->factor != 0 ? scaling->factor : 1.0;
    if (desc->inv_freq) {
        for (uint32_t j = 0; j < half; j++)
            inv_freq[j] = desc->inv_freq[j];
    } else {
        double theta = desc->theta != 0 ? desc->theta : 10000.0;
        if (scaling->type == POSENC_ROPE_SCALING_NTK)
            theta = theta * pow(factor, (double)rotary_dim / (rotary_dim - 2.0));
        if (scaling->type == POSENC_ROPE_SCALING_DYNAMIC_NTK) { /* HF, at sequence_length */
            double original = scaling->original_max_positions;
            double length = scaling->sequence_length > original ? scaling->sequence_length
                                                                : original;
            theta = theta * pow(factor * length / original - (factor - 1),
                                (double)rotary_dim / (rotary_dim - 2.0));
        }
        for (uint32_t j = 0; j < half; j++) {
            inv_freq[j] = pow(theta, -(double)(2 * j) / (double)rotary_dim);
            if (scaling->type == POSENC_ROPE_SCALING_LINEAR)
                inv_freq[j] = inv_freq[j] / factor;
        }
    }
    if (scaling->freq_factors) {
        for (uint32_t j = 0; j < half; j++)
            inv_freq[j] = inv_freq[j] / scaling->freq_factors[j];
    }
    return desc->attention_factor != 0 ? desc->attention_factor : 1.0;
}

void ref_rope_pair(posenc_rope_style style, uint32_t rotary_dim, uint32_t j, uint32_t *first,
                   uint32_t *second)
{
    if (style == POSENC_ROPE_GPTJ) {
        *first = 2 * j;
        *second = 2 * j + 1;
    } else {
        *first = j;
        *second = j + rotary_dim / 2;
    }
}

void ref_rope_head(const double *x, double *out, uint32_t head_dim, uint32_t rotary_dim,
                   posenc_rope_style style, const double *inv_freq, double position,
                   double attention_factor, bool inverse)
{
    for (uint32_t i = rotary_dim; i < head_dim; i++)
        out[i] = x[i];
    for (uint32_t j = 0; j < rotary_dim / 2; j++) {
        uint32_t ia, ib;
        ref_rope_pair(style, rotary_dim, j, &ia, &ib);
        double s, c;
        ref_sincos_product(position, inv_freq[j], &s, &c);
        if (inverse)
            s = -s;
        double a = x[ia], b = x[ib];
        out[ia] = attention_factor * (a * c - b * s);
        out[ib] = attention_factor * (a * s + b * c);
    }
}

uint32_t ref_rope_components(posenc_rope_multimodal kind)
{
    switch (kind) {
    case POSENC_ROPE_MROPE:
    case POSENC_ROPE_MROPE_INTERLEAVED: return 3;
    case POSENC_ROPE_VISION_2D:
    case POSENC_ROPE_VISION_2D_PIXTRAL: return 2;
    default: return 1;
    }
}

void ref_rope_multimodal(const posenc_rope_desc *desc, uint32_t rotary_dim, double *inv_freq,
                         uint32_t *component)
{
    uint32_t n = rotary_dim / 2;
    const uint32_t *section = desc->mrope_section;
    double theta = desc->theta != 0 ? desc->theta : 10000.0;
    for (uint32_t j = 0; j < n; j++)
        component[j] = 0;
    switch (desc->multimodal) {
    case POSENC_ROPE_MROPE: {
        /* Qwen2-VL: cos.split(mrope_section) and chunk i takes component i % 3. */
        uint32_t j = 0;
        for (uint32_t c = 0; c < 3; c++)
            for (uint32_t k = 0; k < section[c] && j < n; k++)
                component[j++] = c;
        break;
    }
    case POSENC_ROPE_MROPE_INTERLEAVED:
        /* Qwen3-VL: freqs_t[..., offset:3 * section[dim]:3] = freqs[dim, ...] for H, W. */
        for (uint32_t dim = 1; dim <= 2; dim++)
            for (uint32_t idx = dim; idx < 3 * section[dim] && idx < n; idx += 3)
                component[idx] = dim;
        break;
    case POSENC_ROPE_VISION_2D: {
        /* VisionRotaryEmbedding(dim = rotary_dim / 2): 1 / theta^(arange(0, dim, 2) / dim),
         * indexed by h for the first half of the frequencies and by w for the second. */
        uint32_t dim = rotary_dim / 2;
        for (uint32_t i = 0; i < dim / 2; i++) {
            double f = 1.0 / pow(theta, (double)(2 * i) / dim);
            inv_freq[i] = inv_freq[dim / 2 + i] = f;
            component[dim / 2 + i] = 1;
        }
        break;
    }
    case POSENC_ROPE_VISION_2D_PIXTRAL: {
        /* freqs = 1 / theta^(arange(0, dim, 2) / dim); h takes freqs[::2], w freqs[1::2]. */
        for (uint32_t i = 0; i < n / 2; i++) {
            inv_freq[i] = 1.0 / pow(theta, (double)(4 * i) / rotary_dim);
            inv_freq[n / 2 + i] = 1.0 / pow(theta, (double)(4 * i + 2) / rotary_dim);
            component[n / 2 + i] = 1;
        }
        break;
    }
    default:
        break;
    }
}

void ref_rope_head_pairs(const double *x, double *out, uint32_t head_dim, uint32_t rotary_dim,
                         posenc_rope_style style, const double *inv_freq,
                         const double *pair_positions, double attention_factor, bool inverse)
{
    for (uint32_t i = rotary_dim; i < head_dim; i++)
        out[i] = x[i];
    for (uint32_t j = 0; j < rotary_dim / 2; j++) {
        uint32_t ia, ib;
        ref_rope_pair(style, rotary_dim, j, &ia, &ib);
        double s, c;
        ref_sincos_product(pair_positions[j], inv_freq[j], &s, &c);
        if (inverse)
            s = -s;
        double a = x[ia], b = x[ib];
        out[ia] = attention_factor * (a * c - b * s);
        out[ib] = attention_factor * (a * s + b * c);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Sinusoidal
 */

void ref_sinusoidal_frequencies(const posenc_sinusoidal_desc *desc, uint32_t d_model,
                                double *freq)
{
    uint32_t half = d_model / 2;
    double base = desc->base != 0 ? desc->base : 10000.0;
    double position_scale = desc->position_scale != 0 ? desc->position_scale : 1.0;
    for (uint32_t i = 0; i < half; i++)
        freq[i] = pow(base, -(double)i / ((double)half - desc->freq_shift)) * position_scale;
}

void ref_sinusoidal_row(const double *freq, uint32_t d_model, posenc_sinusoidal_layout layout,
                        double position, double *pe)
{
    uint32_t half = d_model / 2;
    for (uint32_t i = 0; i < half; i++) {
        double s, c;
        ref_sincos_product(position, freq[i], &s, &c);
        switch (layout) {
        case POSENC_SINUSOIDAL_SIN_COS:
            pe[i] = s;
            pe[half + i] = c;
            break;
        case POSENC_SINUSOIDAL_COS_SIN:
            pe[i] = c;
            pe[half + i] = s;
            break;
        default:
            pe[2 * i] = s;
            pe[2 * i + 1] = c;
            break;
        }
    }
    if (d_model % 2)
        pe[d_model - 1] = 0.0;
}

/* ---------------------------------------------------------------------------------------------
 * Checking
 */

double ref_tolerance(posenc_dtype dtype, double ref, double scale, double extra)
{
    double tolerance = REF_PROMISE * fabs(scale) + extra;
    if (dtype == POSENC_DTYPE_F16 || dtype == POSENC_DTYPE_BF16)
        tolerance += ref_ulp(dtype, ref);
    return tolerance;
}

bool ref_check(ref_stats *stats, posenc_dtype dtype, double out, double ref, double scale,
               double extra)
{
    double error = fabs(out - ref);
    double tolerance = ref_tolerance(dtype, ref, scale, extra);
    bool ok = error <= tolerance; /* false for NaN */
    stats->values++;
    if (!ok)
        stats->failures++;
    double ratio = tolerance > 0 ? error / tolerance : (error > 0 ? INFINITY : 0.0);
    if (!(ratio <= stats->max_ratio))
        stats->max_ratio = ratio;
    if ((dtype == POSENC_DTYPE_F32 || dtype == POSENC_DTYPE_DEFAULT) && scale != 0) {
        double units = error / (REF_UNIT * fabs(scale));
        if (!(units <= stats->max_units))
            stats->max_units = units;
    }
    return ok;
}

void ref_stats_merge(ref_stats *into, const ref_stats *from)
{
    if (!(from->max_units <= into->max_units))
        into->max_units = from->max_units;
    if (!(from->max_ratio <= into->max_ratio))
        into->max_ratio = from->max_ratio;
    into->values += from->values;
    into->failures += from->failures;
}

bool ref_rope_desc_rows_f32_ok(const posenc_rope_desc *desc, const float *in, const float *out,
                               int64_t out_stride, uint32_t tokens, uint32_t heads,
                               uint32_t head_dim, int32_t offset)
{
    enum { MAX_HEAD_DIM = 512 };
    if (head_dim > MAX_HEAD_DIM || head_dim % 2) {
        fprintf(stderr, "  ref_rope_rows_f32_ok: head_dim %u is not even and at most %d\n",
                head_dim, MAX_HEAD_DIM);
        return false;
    }
    double inv_freq[MAX_HEAD_DIM / 2];
    double factor = ref_rope_frequencies(desc, head_dim, inv_freq);
    ref_stats stats = {0};
    bool ok = true;
    for (uint32_t row = 0; row < tokens * heads; row++) {
        double x[MAX_HEAD_DIM], ref[MAX_HEAD_DIM];
        for (uint32_t i = 0; i < head_dim; i++)
            x[i] = in[(size_t)row * head_dim + i];
        ref_rope_head(x, ref, head_dim, head_dim, desc->style, inv_freq,
                      (double)offset + row / heads, factor, false);
        for (uint32_t j = 0; j < head_dim / 2; j++) {
            uint32_t a, b;
            ref_rope_pair(desc->style, head_dim, j, &a, &b);
            /* The promise is relative to the rotated pair's norm. */
            double scale = factor * sqrt(x[a] * x[a] + x[b] * x[b]);
            scale = scale > 0.0 ? scale : 1.0;
            ok &= ref_check(&stats, POSENC_DTYPE_F32, out[(int64_t)row * out_stride + a], ref[a],
                            scale, 0.0);
            ok &= ref_check(&stats, POSENC_DTYPE_F32, out[(int64_t)row * out_stride + b], ref[b],
                            scale, 0.0);
        }
    }
    if (!ok)
        fprintf(stderr, "  %llu of %llu values outside the tolerance\n", stats.failures,
                stats.values);
    return ok;
}

bool ref_rope_rows_f32_ok(const float *in, const float *out, int64_t out_stride, uint32_t tokens,
                          uint32_t heads, uint32_t head_dim, int32_t offset)
{
    posenc_rope_desc desc = {.theta = 10000.0};
    return ref_rope_desc_rows_f32_ok(&desc, in, out, out_stride, tokens, heads, head_dim, offset);
}
