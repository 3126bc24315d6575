/* SPDX-License-Identifier: MIT */
/* RoPE and sinusoidal frequencies: theta, caller tables and context-extension scalings, all in
 * float64 on the host, then rounded once to fixed-point turns (core/angle.h). */
#include "core/frequencies.h"
#include "core/scaling.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One piece of a cache key: the key is the concatenation of its pieces. */
typedef struct key_piece {
    const void *data;
    size_t size;
} key_piece;

/* Makes room for `count` frequencies and empties the cache: from here until it is filled again
 * no call can hit it. */
static posenc_status reserve(posenc_context *ctx, posenc__freq_cache *cache, uint32_t count)
{
    cache->id = 0;
    if (count <= cache->capacity)
        return POSENC_OK;
    posenc__freq *grown = realloc(cache->freqs, (size_t)count * sizeof *grown);
    if (!grown)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY, "frequencies: cannot allocate %u entries",
                            count);
    /* The CPU kernels read this table itself; GPU backends count their device copies. */
    if (!cache->freqs && ctx->device->info.native_cpu)
        posenc__atomic64_add(&ctx->stats.freq_tables, 1);
    cache->freqs = grown;
    cache->capacity = count;
    return POSENC_OK;
}

/* Whether the cache holds the table of this key, compared byte for byte, so an array is
 * compared by value: a caller reusing one buffer with new values, or new buffers with the same
 * values, is right. */
static bool cache_hit(const posenc__freq_cache *cache, const key_piece *pieces, size_t count)
{
    if (!cache->id)
        return false;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        if (cache->key_size - at < pieces[i].size ||
            memcmp(cache->key + at, pieces[i].data, pieces[i].size) != 0)
            return false;
        at += pieces[i].size;
    }
    return at == cache->key_size;
}

/* Records the key of the table just computed and gives the table a new id. Without memory for
 * the key the table is used once, uncached (id 0). */
static void cache_fill(posenc_context *ctx, posenc__freq_cache *cache, uint32_t count,
                       const key_piece *pieces, size_t piece_count)
{
    size_t size = 0;
    for (size_t i = 0; i < piece_count; i++)
        size += pieces[i].size;
    if (size > cache->key_capacity) {
        unsigned char *grown = realloc(cache->key, size);
        if (!grown)
            return;
        cache->key = grown;
        cache->key_capacity = size;
    }
    size_t at = 0;
    for (size_t i = 0; i < piece_count; i++) {
        memcpy(cache->key + at, pieces[i].data, pieces[i].size);
        at += pieces[i].size;
    }
    cache->key_size = size;
    cache->count = count;
    cache->id = ++ctx->freqs_ids;
}

void posenc__free_freq_caches(posenc_context *ctx)
{
    free(ctx->rope_freqs.freqs);
    free(ctx->rope_freqs.key);
    free(ctx->sinusoidal_freqs.freqs);
    free(ctx->sinusoidal_freqs.key);
}

/* Everything a RoPE table can depend on, padding zeroed so that it compares byte for byte; the
 * caller's arrays follow it in the key by value. A scaling that derives an input from the call
 * itself (a sequence length taken from the positions) must add that input here too. */
typedef struct rope_key {
    double theta;
    double factor, beta_fast, beta_slow, mscale, mscale_all_dim, low_freq_factor,
        high_freq_factor, freq_scale, ext_factor;
    uint32_t type, original_max_positions, sequence_length, factor_count;
    uint32_t rotary_dim;
    uint32_t arrays; /* which arrays follow: 1 inv_freq, 2 freq_factors, 4 short, 8 long,
                      * 16 component_map */
    uint32_t no_truncate;
    uint32_t multimodal, mrope_section[4], components; /* each frequency's component and,
                                                         * for VISION_GGML, exponent */
    uint32_t padding;
} rope_key;

/* The caller's arrays, the key's pieces after the first: pieces[1..], the count of all
 * pieces; `*arrays` gets their bits. */
static size_t rope_array_pieces(const posenc_rope_desc *desc, uint32_t rotary_dim,
                                key_piece pieces[6], uint32_t *arrays)
{
    const posenc_rope_scaling *scaling = &desc->scaling;
    size_t bytes = (size_t)(rotary_dim / 2) * sizeof(double);
    const double *doubles[4] = {desc->inv_freq, scaling->freq_factors, scaling->short_factor,
                                scaling->long_factor};
    size_t count = 1;
    for (int i = 0; i < 4; i++) {
        if (!doubles[i])
            continue;
        *arrays |= 1u << i;
        pieces[count++] = (key_piece){doubles[i], bytes};
    }
    if (desc->component_map) {
        *arrays |= 16u;
        pieces[count++] = (key_piece){desc->component_map, rotary_dim / 2};
    }
    return count;
}

static size_t rope_key_pieces(const posenc_rope_desc *desc, uint32_t rotary_dim, rope_key *key,
                              key_piece pieces[6])
{
    const posenc_rope_scaling *scaling = &desc->scaling;
    memset(key, 0, sizeof *key);
    key->theta = desc->theta;
    key->factor = scaling->factor;
    key->beta_fast = scaling->beta_fast;
    key->beta_slow = scaling->beta_slow;
    key->mscale = scaling->mscale;
    key->mscale_all_dim = scaling->mscale_all_dim;
    key->low_freq_factor = scaling->low_freq_factor;
    key->high_freq_factor = scaling->high_freq_factor;
    key->freq_scale = scaling->freq_scale;
    key->ext_factor = scaling->ext_factor;
    key->type = (uint32_t)scaling->type;
    key->original_max_positions = scaling->original_max_positions;
    key->sequence_length = scaling->sequence_length;
    key->factor_count = scaling->factor_count;
    key->rotary_dim = rotary_dim;
    key->no_truncate = scaling->no_truncate;
    key->multimodal = (uint32_t)desc->multimodal;
    memcpy(key->mrope_section, desc->mrope_section, sizeof key->mrope_section);
    key->components = desc->components;
    pieces[0] = (key_piece){key, sizeof *key};
    return rope_array_pieces(desc, rotary_dim, pieces, &key->arrays);
}

/* ggml's vision mode: the component of frequency j, and in `exponent` its place in its
 * section, where the exponent starts again (ggml_mrope_cache_init with indep_sects). The
 * sector wraps when the sections cover fewer frequencies than there are. */
static uint32_t ggml_vision_component(const uint32_t section[4], uint32_t j, uint32_t *exponent)
{
    uint32_t sector = j % (section[0] + section[1] + section[2] + section[3]);
    uint32_t component = 0, start = 0;
    while (component < 3 && sector >= start + section[component])
        start += section[component++];
    *exponent = sector - start;
    return component;
}

/* Frequency j of `pairs` under a multimodal kind: the position component it uses, and in
 * `index` the entry of the plain table theta^(-2i / rotary_dim) it takes (j itself except for
 * the vision kinds, whose h and w halves each take every other frequency of a table as wide as
 * the whole rotary_dim, and ggml's, whose exponents restart per section over a table of
 * rotary_dim / 2: see frequency_dim). The front end has validated the kind and the sections. */
static uint32_t multimodal_frequency(const posenc_rope_desc *desc, uint32_t pairs, uint32_t j,
                                     uint32_t *index)
{
    const uint32_t *section = desc->mrope_section;
    uint32_t half = pairs / 2;
    *index = j;
    switch (desc->multimodal) {
    case POSENC_ROPE_MROPE:
        return j < section[0] ? 0 : j < section[0] + section[1] ? 1 : 2;
    case POSENC_ROPE_MROPE_INTERLEAVED:
        if (j % 3 == 1 && j < 3 * section[1])
            return 1;
        if (j % 3 == 2 && j < 3 * section[2])
            return 2;
        return 0;
    case POSENC_ROPE_VISION_2D:
        /* HF: VisionRotaryEmbedding(head_dim / 2) indexed by h, then by w, concatenated. */
        *index = 2 * (j % half);
        return j < half ? 0 : 1;
    case POSENC_ROPE_VISION_2D_PIXTRAL:
        /* HF: freqs[::2] for h, freqs[1::2] for w. */
        *index = j < half ? 2 * j : 2 * (j - half) + 1;
        return j < half ? 0 : 1;
    case POSENC_ROPE_POSITIONS_MAP:
        return desc->component_map[j];
    case POSENC_ROPE_VISION_GGML:
        return ggml_vision_component(section, j, index);
    default:
        return 0;
    }
}

/* The d of the exponents -2i / d, which YARN_GGML's correction dims also take: ggml's n_dims,
 * which its vision mode sets to half the rotated dims. */
static uint32_t frequency_dim(const posenc_rope_desc *desc, uint32_t rotary_dim)
{
    return desc->multimodal == POSENC_ROPE_VISION_GGML ? rotary_dim / 2 : rotary_dim;
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
    case POSENC_ROPE_SCALING_YARN_GGML: return "YARN_GGML";
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
    USES_BETAS = 1 << 6,
    USES_GGML = 1 << 7,
};

static unsigned scaling_fields(posenc_rope_scaling_type type)
{
    switch (type) {
    case POSENC_ROPE_SCALING_NONE: return 0;
    case POSENC_ROPE_SCALING_LINEAR:
    case POSENC_ROPE_SCALING_NTK: return USES_FACTOR;
    case POSENC_ROPE_SCALING_DYNAMIC_NTK:
        return USES_FACTOR | USES_ORIGINAL_MAX | USES_SEQUENCE_LENGTH;
    case POSENC_ROPE_SCALING_YARN:
        return USES_FACTOR | USES_ORIGINAL_MAX | USES_YARN | USES_BETAS;
    case POSENC_ROPE_SCALING_YARN_GGML: return USES_ORIGINAL_MAX | USES_BETAS | USES_GGML;
    case POSENC_ROPE_SCALING_LLAMA3: return USES_FACTOR | USES_ORIGINAL_MAX | USES_LLAMA3;
    case POSENC_ROPE_SCALING_LONGROPE:
        return USES_FACTOR | USES_ORIGINAL_MAX | USES_SEQUENCE_LENGTH | USES_LONGROPE;
    }
    return 0;
}

/* The first scaling field that is set but not among `uses`; NULL when none. freq_factors and
 * factor_count are read by every type (and with caller frequencies), so never named. */
static const char *unused_scaling_field(const posenc_rope_scaling *scaling, unsigned uses)
{
    const char *field = NULL;
    if (!(uses & USES_FACTOR) && scaling->factor != 0.0)
        field = "factor";
    else if (!(uses & USES_ORIGINAL_MAX) && scaling->original_max_positions)
        field = "original_max_positions";
    else if (!(uses & USES_SEQUENCE_LENGTH) && scaling->sequence_length)
        field = "sequence_length";
    else if (!(uses & USES_BETAS) && scaling->beta_fast != 0.0)
        field = "beta_fast";
    else if (!(uses & USES_BETAS) && scaling->beta_slow != 0.0)
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
    else if (!(uses & USES_GGML) && scaling->freq_scale != 0.0)
        field = "freq_scale";
    else if (!(uses & USES_GGML) && scaling->ext_factor != 0.0)
        field = "ext_factor";
    return field;
}

static posenc_status check_unused_scaling_fields(posenc_context *ctx,
                                                 const posenc_rope_scaling *scaling)
{
    const char *field = unused_scaling_field(scaling, scaling_fields(scaling->type));
    if (!field)
        return POSENC_OK;
    return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                        "scaling.%s: is not used by scaling type %s and must be 0", field,
                        scaling_name(scaling->type));
}

const char *posenc__rope_angle_field(const posenc_rope_desc *desc, char *name, size_t size)
{
    const posenc_rope_scaling *scaling = &desc->scaling;
    const char *field = unused_scaling_field(scaling, 0);
    if (desc->theta != 0.0)
        return "theta";
    if (desc->inv_freq || desc->inv_freq_count)
        return desc->inv_freq ? "inv_freq" : "inv_freq_count";
    if (desc->attention_factor != 0.0)
        return "attention_factor";
    if (scaling->type != POSENC_ROPE_SCALING_NONE)
        return "scaling.type";
    if (!field && (scaling->freq_factors || scaling->factor_count))
        field = scaling->freq_factors ? "freq_factors" : "factor_count";
    if (!field)
        return NULL;
    snprintf(name, size, "scaling.%s", field);
    return name;
}

/* Caller frequencies replace theta and the scaling: a value given there would have no effect,
 * and a call that looks scaled (ggml's vision mode with freq_scale != 1) would rotate by the
 * unscaled table and return OK. Only freq_factors (and attention_factor) still apply. */
static posenc_status check_unused_with_inv_freq(posenc_context *ctx, const posenc_rope_desc *desc)
{
    const posenc_rope_scaling *scaling = &desc->scaling;
    const char *field = NULL;
    char name[48];
    if (desc->theta != 0.0)
        field = "theta";
    else if (scaling->type != POSENC_ROPE_SCALING_NONE)
        field = "scaling.type";
    else if ((field = unused_scaling_field(scaling, 0)) != NULL) {
        snprintf(name, sizeof name, "scaling.%s", field);
        field = name;
    }
    if (!field)
        return POSENC_OK;
    return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                        "%s: has no effect with inv_freq (the caller's frequencies replace theta "
                        "and the scaling: fold it into inv_freq) and must be 0",
                        field);
}

posenc_status posenc__rope_frequencies(posenc_context *ctx, const posenc_rope_desc *desc,
                                       uint32_t rotary_dim, uint32_t sequence_length,
                                       float *attention_factor)
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

    if ((unsigned)scaling->type > POSENC_ROPE_SCALING_YARN_GGML)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "scaling.type: unknown value %d",
                            (int)scaling->type);
    posenc_status status = desc->inv_freq ? check_unused_with_inv_freq(ctx, desc)
                                          : check_unused_scaling_fields(ctx, scaling);
    if (status != POSENC_OK)
        return status;

    if (desc->inv_freq && desc->inv_freq_count != pairs)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "inv_freq_count: must be rotary_dim/2 = %u, got %u", pairs,
                            desc->inv_freq_count);
    /* A count without its array is a caller who forgot the pointer: say so rather than
     * silently rotating with the default frequencies. */
    if (!desc->inv_freq && desc->inv_freq_count)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "inv_freq: is NULL but inv_freq_count is %u", desc->inv_freq_count);
    if (!scaling->freq_factors && !scaling->short_factor && !scaling->long_factor &&
        scaling->factor_count)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "scaling.factor_count: is %u but no factor array is set",
                            scaling->factor_count);
    if ((scaling->freq_factors || scaling->short_factor || scaling->long_factor) &&
        scaling->factor_count != pairs)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "scaling.factor_count: must be rotary_dim/2 = %u, got %u", pairs,
                            scaling->factor_count);
    if ((scaling->type == POSENC_ROPE_SCALING_NTK ||
         scaling->type == POSENC_ROPE_SCALING_DYNAMIC_NTK) &&
        rotary_dim <= 2)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "scaling.type: NTK scaling needs rotary_dim > 2, got %u", rotary_dim);
    posenc_rope_scaling resolved;
    status = posenc__scaling_resolve(ctx, scaling, pairs, &resolved);
    if (status != POSENC_OK)
        return status;
    /* Only these two read the length; keying the others on it would only cost misses. */
    bool length_matters = scaling->type == POSENC_ROPE_SCALING_DYNAMIC_NTK ||
                          scaling->type == POSENC_ROPE_SCALING_LONGROPE;
    posenc__scaling_plan plan;
    posenc__scaling_plan_make(&resolved, frequency_dim(desc, rotary_dim), theta,
                              sequence_length, &plan);
    if (scaling->type == POSENC_ROPE_SCALING_YARN_GGML && !desc->inv_freq)
        factor_out *= plan.attention_factor; /* ggml: attn_factor times its own correction */
    else if (desc->attention_factor == 0.0 && !desc->inv_freq)
        factor_out = plan.attention_factor;
    if (!(factor_out > 0.0 && factor_out <= 3.4e38))
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "scaling.freq_scale: %g makes the attention factor %g (ggml's "
                            "attn_factor %g times 1 + 0.1 ln(1 / freq_scale)), not a float > 0",
                            plan.scaling.freq_scale, factor_out,
                            desc->attention_factor == 0.0 ? 1.0 : desc->attention_factor);

    /* The attention factor is applied by the kernels, so it is not part of the table. */
    *attention_factor = (float)factor_out;
    posenc__freq_cache *cache = &ctx->rope_freqs;
    const double *freq_factors = scaling->freq_factors;
    rope_key key;
    key_piece pieces[6];
    size_t piece_count = rope_key_pieces(desc, rotary_dim, &key, pieces);
    key.sequence_length = length_matters ? sequence_length : 0;
    if (cache_hit(cache, pieces, piece_count))
        return POSENC_OK;

    status = reserve(ctx, cache, pairs);
    if (status != POSENC_OK)
        return status;
    /* Validate everything before computing, so a bad entry is reported by its own name. */
    for (uint32_t j = 0; j < pairs; j++) {
        if (desc->inv_freq && !valid_frequency(desc->inv_freq[j]))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "inv_freq[%u]: must be finite, >= 0 and < 2^32 turns, got %g", j,
                                desc->inv_freq[j]);
        if (freq_factors && !(isfinite(freq_factors[j]) && freq_factors[j] > 0.0))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "scaling.freq_factors[%u]: must be a finite number > 0, got %g",
                                j, freq_factors[j]);
    }
    for (uint32_t j = 0; j < pairs; j++) {
        uint32_t index;
        uint32_t component = multimodal_frequency(desc, pairs, j, &index);
        double w =
            desc->inv_freq ? desc->inv_freq[j] : posenc__scaling_frequency(&plan, index, j);
        if (freq_factors)
            w /= freq_factors[j];
        if (!valid_frequency(w)) {
            if (freq_factors)
                return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                    "scaling.freq_factors[%u]: makes frequency %u too large (%g)",
                                    j, j, w);
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "theta: %g gives frequency %u = %g radians per position, too "
                                "large",
                                theta, j, w);
        }
        cache->freqs[j] = posenc__freq_from_radians(w);
        cache->freqs[j].component = component;
    }
    cache_fill(ctx, cache, pairs, pieces, piece_count);
    return POSENC_OK;
}

bool posenc__rope_frequencies_current(const posenc_context *ctx, const posenc_rope_desc *desc,
                                      uint32_t rotary_dim, uint64_t id)
{
    const posenc__freq_cache *cache = &ctx->rope_freqs;
    if (id == 0 || cache->id != id || cache->key_size < sizeof(rope_key))
        return false;
    /* The key's first piece is made of the descriptor's fields, the same by the caller's
     * promise: only the arrays' values can have changed. */
    key_piece pieces[6];
    uint32_t arrays = 0;
    size_t count = rope_array_pieces(desc, rotary_dim, pieces, &arrays);
    size_t at = sizeof(rope_key);
    for (size_t i = 1; i < count; i++) {
        if (cache->key_size - at < pieces[i].size ||
            memcmp(cache->key + at, pieces[i].data, pieces[i].size) != 0)
            return false;
        at += pieces[i].size;
    }
    return at == cache->key_size;
}

posenc_status posenc__sinusoidal_frequencies(posenc_context *ctx, uint32_t half, double base,
                                             double freq_shift, double position_scale)
{
    posenc__freq_cache *cache = &ctx->sinusoidal_freqs;
    struct {
        double base, freq_shift, position_scale;
        uint32_t half, padding;
    } key;
    memset(&key, 0, sizeof key);
    key.base = base;
    key.freq_shift = freq_shift;
    key.position_scale = position_scale;
    key.half = half;
    key_piece piece = {&key, sizeof key};
    if (cache_hit(cache, &piece, 1))
        return POSENC_OK;
    posenc_status status = reserve(ctx, cache, half);
    if (status != POSENC_OK)
        return status;
    for (uint32_t i = 0; i < half; i++) {
        double w = pow(base, -(double)i / ((double)half - freq_shift)) * position_scale;
        if (!valid_frequency(w))
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "%s: frequency %u is too large (%g radians per position)",
                                position_scale != 1.0 ? "position_scale" : "base", i, w);
        cache->freqs[i] = posenc__freq_from_radians(w);
    }
    cache_fill(ctx, cache, half, &piece, 1);
    return POSENC_OK;
}
