/* SPDX-License-Identifier: MIT */
/* ggml's RoPE operator (ggml_rope_ext, as llama.cpp calls it) expressed with descriptor fields
 * alone, on every device: the cases ggml's own operator tests generate (freq_scale above and
 * below 1, a fractional ext_factor, attn_factor, n_ctx_orig 0 or 512, freq_factors, normal and
 * NeoX modes, partial rotary dims), each checked against a float64 transcription of ggml's
 * formulas (docs/ggml.md), written here from ggml's source independently of the library.
 * With ggml_rope_set_offset's rotary offset too (the rotated dims at the end of a head, or
 * inside it), in place and out of place. ggml_rope_multi too: its M-RoPE section rules as a
 * component map, and its vision mode natively (VISION_GGML, with ggml's sections and YaRN).
 *
 * Also measured, not asserted: how far ggml's own float32 evaluation (theta multiplied up pair
 * by pair, then sinf/cosf) drifts from the exact rotation at large positions, next to posenc's
 * error on the same cases. */
#include "reference.h"
#include "test_common.h"

#include <math.h>
#include <string.h>

#define TWO_PI 6.283185307179586476925286766559
#define PROMISE (8.0 * 0x1p-24)
enum { HEAD_DIM = 64, MAX_PAIRS = HEAD_DIM / 2 };

static const int32_t positions[] = {0, 1, 5, 511, 512, 4097, 65535, 1000003, 2000000000};
#define TOKENS ((int)(sizeof positions / sizeof positions[0]))

/* One ggml_rope_ext call's arguments. */
typedef struct ggml_case {
    int n_dims;
    int mode; /* 0: normal (adjacent pairs), 2: NeoX */
    int n_ctx_orig;
    double freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    const double *freq_factors;
    int offset;        /* ggml_rope_set_offset: the first rotated dim */
    bool out_of_place; /* into a separate output (ggml's graph tensor) rather than in place */
} ggml_case;

/* ---- ggml's formulas, in float64 ---- */

static double corr_dim(const ggml_case *c, double n_rot)
{
    return c->n_dims * log(c->n_ctx_orig / (n_rot * TWO_PI)) / (2 * log(c->freq_base));
}

/* Radians per position of pair j, and the magnitude (mscale) ggml applies to cos and sin. */
static double ggml_frequency(const ggml_case *c, int j, double *mscale)
{
    double low = fmax(0.0, floor(corr_dim(c, c->beta_fast)));
    double high = fmin(c->n_dims - 1.0, ceil(corr_dim(c, c->beta_slow)));
    double extrap = pow(c->freq_base, -2.0 * j / c->n_dims);
    if (c->freq_factors)
        extrap /= c->freq_factors[j];
    double interp = c->freq_scale * extrap;
    *mscale = c->attn_factor;
    if (c->ext_factor == 0.0)
        return interp;
    double y = (j - low) / fmax(0.001, high - low);
    double mix = (1.0 - fmin(1.0, fmax(0.0, y))) * c->ext_factor;
    *mscale *= 1.0 + 0.1 * log(1.0 / c->freq_scale);
    return interp * (1.0 - mix) + extrap * mix;
}

/* ggml's own float32 evaluation of the angle of pair j (ggml_rope_cache_init). */
static void ggml_float32_sincos(const ggml_case *c, int32_t position, int j, float *s, float *co)
{
    float theta_scale = powf((float)c->freq_base, -2.0f / (float)c->n_dims);
    float theta = (float)position;
    for (int i = 0; i < j; i++)
        theta *= theta_scale;
    float low = fmaxf(0.0f, floorf((float)corr_dim(c, c->beta_fast)));
    float high = fminf((float)c->n_dims - 1, ceilf((float)corr_dim(c, c->beta_slow)));
    float ff = c->freq_factors ? (float)c->freq_factors[j] : 1.0f;
    float extrap = theta / ff, interp = (float)c->freq_scale * extrap, angle = interp;
    float mscale = (float)c->attn_factor;
    if (c->ext_factor != 0.0) {
        float y = ((float)j - low) / fmaxf(0.001f, high - low);
        float mix = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * (float)c->ext_factor;
        angle = interp * (1 - mix) + extrap * mix;
        mscale *= 1.0f + 0.1f * logf(1.0f / (float)c->freq_scale);
    }
    *s = sinf(angle) * mscale;
    *co = cosf(angle) * mscale;
}

/* ---- the same call through posenc ---- */

static posenc_rope_desc desc_of(const ggml_case *c, float *q, float *q_out, int32_t *pos)
{
    int64_t shape[2] = {TOKENS, HEAD_DIM}, positions_shape[1] = {TOKENS};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 2, shape),
        .q_out = q_out ? posenc_tensor_of_host(q_out, POSENC_DTYPE_F32, 2, shape)
                       : (posenc_tensor){0},
        .positions = posenc_tensor_of_host(pos, POSENC_DTYPE_I32, 1, positions_shape),
        .rotary_dim = (uint32_t)c->n_dims,
        .rotary_offset = (uint32_t)c->offset,
        .style = c->mode == 2 ? POSENC_ROPE_NEOX : POSENC_ROPE_GPTJ,
        .theta = c->freq_base,
        .attention_factor = c->attn_factor,
        .scaling = {.type = POSENC_ROPE_SCALING_YARN_GGML,
                    .original_max_positions = (uint32_t)c->n_ctx_orig,
                    .beta_fast = c->beta_fast,
                    .beta_slow = c->beta_slow,
                    .freq_scale = c->freq_scale,
                    .ext_factor = c->ext_factor,
                    .freq_factors = c->freq_factors,
                    .factor_count = c->freq_factors ? (uint32_t)c->n_dims / 2 : 0},
    };
    return desc;
}

typedef struct errors {
    double posenc;    /* worst |out - exact| / |x| of any pair, posenc */
    double ggml_f32;  /* the same for ggml's float32 evaluation, up to position 1000003 */
    int cases;
} errors;

/* Runs one case: q holds unit pairs (1, 0), so each output pair is mscale (cos t, sin t). */
static void run_case(posenc_context *context, const ggml_case *c, errors *e)
{
    static int32_t pos[TOKENS];
    memcpy(pos, positions, sizeof pos);
    float input[TOKENS][HEAD_DIM], output[TOKENS][HEAD_DIM];
    int pairs = c->n_dims / 2, first = c->offset, end = c->offset + c->n_dims;
    for (int t = 0; t < TOKENS; t++) {
        for (int d = 0; d < HEAD_DIM; d++) {
            bool rotated = d >= first && d < end;
            input[t][d] = rotated ? 0.0f : (float)(d + 0.5); /* pass-through dims */
            output[t][d] = -1.0f;
        }
        for (int j = 0; j < pairs; j++)
            input[t][first + (c->mode == 2 ? j : 2 * j)] = 1.0f;
    }
    posenc_rope_desc desc =
        desc_of(c, &input[0][0], c->out_of_place ? &output[0][0] : NULL, pos);
    posenc_status status = posenc_rope(context, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  n_dims %d offset %d mode %d fs %g ef %g: %s: %s\n", c->n_dims,
                c->offset, c->mode, c->freq_scale, c->ext_factor, posenc_status_name(status),
                posenc_context_last_error(context));
        return;
    }
    float (*q)[HEAD_DIM] = c->out_of_place ? output : input;
    double worst = 0;
    for (int t = 0; t < TOKENS; t++) {
        for (int j = 0; j < pairs; j++) {
            double mscale, s, co;
            double w = ggml_frequency(c, j, &mscale);
            ref_sincos_product(positions[t], w, &s, &co);
            int a = first + (c->mode == 2 ? j : 2 * j);
            int b = first + (c->mode == 2 ? j + pairs : 2 * j + 1);
            double error = hypot(q[t][a] - mscale * co, q[t][b] - mscale * s) / fabs(mscale);
            worst = fmax(worst, error);
            float fs, fc;
            ggml_float32_sincos(c, positions[t], j, &fs, &fc);
            if (positions[t] <= 1000003) /* a long context, not the int32 range */
                e->ggml_f32 = fmax(e->ggml_f32, hypot(fc - mscale * co, fs - mscale * s) /
                                                    fabs(mscale));
        }
        for (int d = 0; d < HEAD_DIM; d++)
            if (d < first || d >= end)
                CHECK(q[t][d] == (float)(d + 0.5));
    }
    e->posenc = fmax(e->posenc, worst);
    e->cases++;
    if (!(worst <= PROMISE)) {
        test_failures++;
        fprintf(stderr,
                "  n_dims %d offset %d mode %d n_ctx_orig %d fs %g ef %g af %g ff %s: worst "
                "error %.3g, promise %.3g\n",
                c->n_dims, c->offset, c->mode, c->n_ctx_orig, c->freq_scale, c->ext_factor, c->attn_factor,
                c->freq_factors ? "yes" : "no", worst, PROMISE);
    }
}

static double freq_factors[64];

/* The grid of ggml's test-backend-ops ROPE cases, with its betas 32 and 1. */
static void test_device(posenc_context *context, const posenc_device_info *info)
{
    static const double scales[] = {1.0, 1.4245, 0.7465};
    static const double ext_factors[] = {0.0, 0.7465};
    static const double attn_factors[] = {1.0, 1.4245};
    static const int n_dims[] = {HEAD_DIM, HEAD_DIM / 2};
    static const int modes[] = {0, 2};
    static const int contexts[] = {0, 512};
    errors e = {0};
    for (size_t a = 0; a < 2; a++)
        for (size_t b = 0; b < 2; b++)
            for (size_t f = 0; f < 3; f++)
                for (size_t x = 0; x < 2; x++)
                    for (size_t m = 0; m < 2; m++)
                        for (size_t n = 0; n < 2; n++)
                            for (int ff = 0; ff < 2; ff++) {
                                ggml_case c = {
                                    .n_dims = n_dims[n],
                                    .mode = modes[m],
                                    .n_ctx_orig = contexts[b],
                                    .freq_base = 10000.0,
                                    .freq_scale = scales[f],
                                    .ext_factor = ext_factors[x],
                                    .attn_factor = attn_factors[a],
                                    .beta_fast = 32.0,
                                    .beta_slow = 1.0,
                                    .freq_factors = ff ? freq_factors : NULL,
                                };
                                run_case(context, &c, &e);
                                if (c.n_dims == HEAD_DIM / 2) {
                                    /* The rotated dims at the end of the head (in place),
                                     * then inside it (out of place). */
                                    c.offset = HEAD_DIM - c.n_dims;
                                    run_case(context, &c, &e);
                                    c.offset = 8;
                                    c.out_of_place = true;
                                    run_case(context, &c, &e);
                                }
                            }
    printf("  %-9s %-40s %d cases, worst error in units of 2^-24 of the pair norm: posenc %.2f "
           "(positions to 2e9), ggml's float32 formula %.3g (positions to 1000003)\n",
           posenc_backend_name(info->backend), info->name, e.cases, e.posenc / 0x1p-24,
           e.ggml_f32 / 0x1p-24);
}

/* ---- M-RoPE: ggml_rope_multi's section rules, written out as a component map ---- */

enum { MM_DIM = 128, MM_PAIRS = MM_DIM / 2, COMPONENTS = 4 };

/* The position component (t, h, w, e) ggml gives pair j (ggml_mrope_cache_init). */
static uint8_t ggml_mrope_component(const int sections[4], bool interleaved, int j)
{
    int sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
    int sec_w = sections[0] + sections[1];
    int sector = j % sect_dims; /* sections that do not cover every pair wrap */
    if (interleaved) { /* Qwen3-VL */
        if (sector % 3 == 1 && sector < 3 * sections[1])
            return 1;
        if (sector % 3 == 2 && sector < 3 * sections[2])
            return 2;
        if (sector % 3 == 0 && sector < 3 * sections[0])
            return 0;
        return 3;
    }
    if (sector >= sections[0] && sector < sec_w)
        return 1;
    if (sector >= sec_w && sector < sec_w + sections[2])
        return 2;
    return sector >= sec_w + sections[2] ? 3 : 0;
}

/* ggml's vision mode (independent sections): the exponent restarts in each section. */
static int ggml_vision_exponent(const int sections[4], int j)
{
    int sect_dims = sections[0] + sections[1] + sections[2] + sections[3], start = 0;
    int sector = j % sect_dims;
    for (int s = 0; s < 4 && sector >= start + sections[s]; s++)
        start += sections[s];
    return sector - start;
}

/* ggml's vision mode with YaRN (docs/ggml.md): freq_base^(-2 k / n_dims) (freq_scale (1 -
 * mix_j) + mix_j), k restarting per section, mix_j at the global pair j, n_dims being half the
 * rotated dims; the attention factor is ggml's mscale. freq_factors are divided by the caller. */
static double ggml_vision_frequency(const ggml_case *g, const int sections[4], int j,
                                    double *mscale)
{
    double extrap = pow(g->freq_base, -2.0 * ggml_vision_exponent(sections, j) / g->n_dims);
    double scale = g->freq_scale;
    if (g->ext_factor != 0.0) {
        double low = fmax(0.0, floor(corr_dim(g, g->beta_fast)));
        double high = fmin(g->n_dims - 1.0, ceil(corr_dim(g, g->beta_slow)));
        double y = (j - low) / fmax(0.001, high - low);
        double mix = (1.0 - fmin(1.0, fmax(0.0, y))) * g->ext_factor;
        scale = g->freq_scale * (1.0 - mix) + mix;
    }
    *mscale = g->attn_factor;
    if (g->ext_factor != 0.0)
        *mscale *= 1.0 + 0.1 * log(1.0 / g->freq_scale);
    return extrap * scale;
}

/* How a case reaches posenc. */
typedef enum mrope_path {
    SECTIONS_AS_MAP,  /* M-RoPE: POSITIONS_MAP with ggml's section rules written out */
    VISION_NATIVE,    /* the vision mode: VISION_GGML with ggml's sections and YaRN fields */
    VISION_INV_FREQ,  /* the vision mode the older way: POSITIONS_MAP, the engine computing
                       * the frequencies (YaRN folded in) and passing them as inv_freq */
} mrope_path;

enum { BATCH = 2 };

typedef struct mrope_case {
    const char *name;
    int sections[4];
    bool interleaved;
    mrope_path path;
    bool batch;           /* positions [batch, tokens, 4] (a different position per batch row) */
    ggml_case scaling;    /* freq_base, YaRN and freq_factors, as for plain RoPE */
} mrope_case;

/* Positions in ggml's layout, a plane of tokens per component ([4, batch, tokens]), passed as
 * the [batch, tokens, 4] view with permuted strides; without batch the [tokens, 4] view of the
 * first batch row's planes, ggml's pos[c * n_tokens + t]. */
static int32_t mrope_positions[COMPONENTS][BATCH][TOKENS];

static posenc_tensor mrope_positions_view(bool batch)
{
    posenc_tensor view = {.host = mrope_positions, .dtype = POSENC_DTYPE_I32};
    int64_t plane = (int64_t)sizeof mrope_positions[0], row = (int64_t)sizeof(int32_t) * TOKENS;
    if (batch) {
        view.ndim = 3;
        view.shape[0] = BATCH, view.shape[1] = TOKENS, view.shape[2] = COMPONENTS;
        view.strides[0] = row, view.strides[1] = sizeof(int32_t), view.strides[2] = plane;
    } else {
        view.ndim = 2;
        view.shape[0] = TOKENS, view.shape[1] = COMPONENTS;
        view.strides[0] = sizeof(int32_t), view.strides[1] = plane;
    }
    return view;
}

/* The descriptor of one case; map and inv_freq are the engine's arrays where the path takes
 * them. */
static posenc_rope_desc mrope_desc(const mrope_case *m, float *q, const uint8_t *map,
                                   const double *inv_freq, double vision_mscale)
{
    const ggml_case *g = &m->scaling;
    int64_t shape[4] = {m->batch ? BATCH : 1, TOKENS, 1, MM_DIM};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 4, shape),
        .positions = mrope_positions_view(m->batch),
        .theta = g->freq_base,
        .attention_factor = g->attn_factor,
        .multimodal = POSENC_ROPE_POSITIONS_MAP,
        .component_map = map,
        .components = COMPONENTS,
    };
    ggml_case full = *g;
    full.n_dims = MM_DIM; /* the vision mode's n_dims is half of it: the library halves it */
    float unused;
    desc.scaling = desc_of(&full, &unused, NULL, NULL).scaling;
    if (m->path == VISION_NATIVE) {
        /* ggml_rope_multi(ctx, a, pos, c, n_dims = MM_DIM / 2, sections, VISION, ...) */
        desc.multimodal = POSENC_ROPE_VISION_GGML;
        desc.component_map = NULL;
        desc.components = 0;
        for (int s = 0; s < 4; s++)
            desc.mrope_section[s] = (uint32_t)m->sections[s];
    } else if (m->path == VISION_INV_FREQ) {
        desc.theta = 0.0; /* the caller's frequencies replace theta and the scaling */
        desc.attention_factor = vision_mscale;
        desc.inv_freq = inv_freq;
        desc.inv_freq_count = MM_PAIRS;
        desc.scaling = (posenc_rope_scaling){.freq_factors = g->freq_factors,
                                             .factor_count = g->freq_factors ? MM_PAIRS : 0};
    }
    return desc;
}

static void run_mrope_case(posenc_context *context, const mrope_case *m)
{
    static float q[BATCH][TOKENS][MM_DIM];
    uint8_t map[MM_PAIRS];
    double inv_freq[MM_PAIRS];
    for (int c = 0; c < COMPONENTS; c++)
        for (int b = 0; b < BATCH; b++)
            for (int t = 0; t < TOKENS; t++)
                mrope_positions[c][b][t] =
                    (int32_t)(((int64_t)positions[t] * (c + 1) + 97 * c + 31 * b) % 2000000000);
    const ggml_case *g = &m->scaling;
    bool vision = m->path != SECTIONS_AS_MAP;
    ggml_case half_dims = *g;
    half_dims.n_dims = MM_PAIRS; /* ggml's n_dims in vision mode: half the rotated dims */
    double vision_mscale = g->attn_factor;
    for (int j = 0; j < MM_PAIRS; j++) {
        map[j] = ggml_mrope_component(m->sections, m->interleaved, j);
        inv_freq[j] = ggml_vision_frequency(&half_dims, m->sections, j, &vision_mscale);
    }
    int batch = m->batch ? BATCH : 1;
    for (int b = 0; b < batch; b++)
        for (int t = 0; t < TOKENS; t++)
            for (int d = 0; d < MM_DIM; d++)
                q[b][t][d] = d < MM_PAIRS ? 1.0f : 0.0f; /* NeoX: (1, 0) pairs */
    posenc_rope_desc desc = mrope_desc(m, &q[0][0][0], map, inv_freq, vision_mscale);
    posenc_status status = posenc_rope(context, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  %s: %s: %s\n", m->name, posenc_status_name(status),
                posenc_context_last_error(context));
        return;
    }
    double worst = 0;
    for (int b = 0; b < batch; b++) {
        for (int t = 0; t < TOKENS; t++) {
            for (int j = 0; j < MM_PAIRS; j++) {
                double mscale = g->attn_factor, s, co;
                double w;
                if (vision)
                    w = ggml_vision_frequency(&half_dims, m->sections, j, &mscale) /
                        (g->freq_factors ? g->freq_factors[j] : 1.0);
                else {
                    ggml_case full = *g;
                    full.n_dims = MM_DIM;
                    w = ggml_frequency(&full, j, &mscale);
                }
                ref_sincos_product(mrope_positions[map[j]][b][t], w, &s, &co);
                worst = fmax(worst, hypot(q[b][t][j] - mscale * co,
                                          q[b][t][j + MM_PAIRS] - mscale * s) /
                                        fabs(mscale));
            }
        }
    }
    if (!(worst <= PROMISE)) {
        test_failures++;
        fprintf(stderr, "  %s: worst error %.3g, promise %.3g\n", m->name, worst, PROMISE);
    }
}

/* Qwen2-VL's sections with a fourth component, sections that wrap, Qwen3-VL's {24, 20, 20} as
 * llama.cpp runs it (pairs 61 and 62 use the fourth component, where HF uses t), and the vision
 * mode natively: test-backend-ops' {n/4, n/4, 0, 0} and Qwen2-VL's vision tower {d/4 x 4} (the
 * sections summing to the rotated dims, twice the pairs), with its restarting exponents, YaRN
 * with and without a ramp, freq_factors, wrapping sections and batch positions; and one case as
 * engines passed it before, with the frequencies computed by the engine. */
static void test_mrope_device(posenc_context *context, const posenc_device_info *info)
{
    (void)info;
    const ggml_case plain = {.freq_base = 10000, .freq_scale = 1, .attn_factor = 1,
                             .beta_fast = 32, .beta_slow = 1};
    ggml_case yarn = plain;
    yarn.n_ctx_orig = 512;
    yarn.freq_scale = 0.7465;
    yarn.ext_factor = 0.7465;
    yarn.attn_factor = 1.4245;
    ggml_case factors = plain;
    factors.freq_factors = freq_factors;
    ggml_case half = plain; /* linear: no ramp, ggml's mscale stays attn_factor */
    half.freq_scale = 0.5;
    ggml_case stretch = half; /* test-backend-ops' freq_scale above 1, without a ramp */
    stretch.freq_scale = 1.4245;
    stretch.attn_factor = 1.4245;
    ggml_case yarn_factors = yarn;
    yarn_factors.freq_factors = freq_factors;
    yarn_factors.freq_scale = 1.4245;
    yarn_factors.n_ctx_orig = 0; /* only pair 0 extrapolates */
    const mrope_case cases[] = {
        {"qwen2-vl sections {16, 24, 24, 0}", {16, 24, 24, 0}, false, SECTIONS_AS_MAP, false,
         plain},
        {"four sections {16, 16, 16, 16}, YaRN", {16, 16, 16, 16}, false, SECTIONS_AS_MAP,
         false, yarn},
        {"wrapping sections {3, 2, 1, 1}", {3, 2, 1, 1}, false, SECTIONS_AS_MAP, false, plain},
        {"qwen3-vl interleaved {24, 20, 20, 0}", {24, 20, 20, 0}, true, SECTIONS_AS_MAP, false,
         plain},
        {"vision {32, 32, 0, 0}", {32, 32, 0, 0}, false, VISION_NATIVE, false, plain},
        {"vision {32, 32, 32, 32} (qwen2-vl's tower)", {32, 32, 32, 32}, false, VISION_NATIVE,
         false, plain},
        {"vision {16, 16, 16, 16}, freq_factors", {16, 16, 16, 16}, false, VISION_NATIVE, false,
         factors},
        {"vision {16, 16, 16, 16}, YaRN", {16, 16, 16, 16}, false, VISION_NATIVE, false, yarn},
        {"vision {32, 32, 0, 0}, freq_scale 0.5", {32, 32, 0, 0}, false, VISION_NATIVE, false,
         half},
        {"vision {32, 32, 0, 0}, freq_scale 1.4245, attn_factor", {32, 32, 0, 0}, false,
         VISION_NATIVE, false, stretch},
        {"vision {10, 6, 0, 3} wrapping, YaRN + freq_factors, n_ctx_orig 0", {10, 6, 0, 3},
         false, VISION_NATIVE, false, yarn_factors},
        {"vision {3, 2, 1, 1} wrapping, batch positions, YaRN", {3, 2, 1, 1}, false,
         VISION_NATIVE, true, yarn},
        {"vision {0, 24, 8, 16}, batch positions, freq_factors", {0, 24, 8, 16}, false,
         VISION_NATIVE, true, factors},
        {"vision {16, 16, 16, 16}, YaRN folded into inv_freq", {16, 16, 16, 16}, false,
         VISION_INV_FREQ, false, yarn},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_mrope_case(context, &cases[i]);
}

/* ggml's vision mode refuses a scaling other than its own and sections ggml would assert on,
 * naming the field, with nothing written. */
static void test_vision_validation(posenc_context *context)
{
    static float q[TOKENS][MM_DIM], before[TOKENS][MM_DIM];
    for (int t = 0; t < TOKENS; t++)
        for (int d = 0; d < MM_DIM; d++)
            q[t][d] = before[t][d] = (float)(d + 1);
    const mrope_case good = {"", {16, 16, 16, 16}, false, VISION_NATIVE, false,
                             {.freq_base = 10000, .freq_scale = 0.5, .ext_factor = 1,
                              .attn_factor = 1, .n_ctx_orig = 512}};
    posenc_rope_desc ok = mrope_desc(&good, &q[0][0], NULL, NULL, 1.0);
    posenc_rope_desc desc = ok;
    const posenc_rope_scaling_type others[] = {
        POSENC_ROPE_SCALING_LINEAR, POSENC_ROPE_SCALING_YARN, POSENC_ROPE_SCALING_LONGROPE};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        desc.scaling = (posenc_rope_scaling){.type = others[i], .factor = 2,
                                             .original_max_positions = 512};
        CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(context), "scaling.type");
    }
    /* Sections: summing to 1 to rotary_dim (ggml: sect_dims <= ne0), and not only the fourth
     * (ggml asserts one of the first three). */
    static const uint32_t bad_sections[][4] = {
        {0, 0, 0, 0}, {0, 0, 0, 8}, {64, 64, 1, 0}, {0, 0, 0, MM_DIM}, {UINT32_MAX, 1, 0, 0}};
    desc = ok;
    for (size_t i = 0; i < sizeof bad_sections / sizeof bad_sections[0]; i++) {
        memcpy(desc.mrope_section, bad_sections[i], sizeof desc.mrope_section);
        CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(context), "mrope_section");
    }
    /* Four components per token; a map is POSITIONS_MAP's. */
    desc = ok;
    const int64_t three[2] = {TOKENS, 3};
    desc.positions = posenc_tensor_of_host(mrope_positions, POSENC_DTYPE_I32, 2, three);
    CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_SHAPE);
    CHECK_MESSAGE(posenc_context_last_error(context), "positions.shape[1]");
    desc = ok;
    desc.components = COMPONENTS;
    CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "components");
    /* The M-RoPE kinds have three components: their fourth section stays 0. */
    desc = ok;
    desc.multimodal = POSENC_ROPE_MROPE;
    desc.scaling = (posenc_rope_scaling){0};
    desc.positions = posenc_tensor_of_host(mrope_positions, POSENC_DTYPE_I32, 2, three);
    memcpy(desc.mrope_section, (uint32_t[4]){16, 24, 24, 0}, sizeof desc.mrope_section);
    CHECK_OK(posenc_rope(context, &desc)); /* rotates q: the copy below starts again */
    memcpy(q, before, sizeof q);
    desc.mrope_section[3] = 1;
    CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "mrope_section[3]");
    desc.multimodal = POSENC_ROPE_VISION_2D;
    memcpy(desc.mrope_section, (uint32_t[4]){0, 0, 0, 8}, sizeof desc.mrope_section);
    CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "mrope_section");
    CHECK(memcmp(q, before, sizeof q) == 0); /* every refused call left q alone */

    /* What ggml accepts: sections covering every rotated dim, or a single pair, wrapping. */
    memcpy(ok.mrope_section, (uint32_t[4]){0, 0, 0, 0}, sizeof ok.mrope_section);
    ok.mrope_section[2] = MM_DIM;
    CHECK_OK(posenc_rope(context, &ok));
    ok.mrope_section[2] = 0;
    ok.mrope_section[1] = 1;
    CHECK_OK(posenc_rope(context, &ok));
}

/* Arguments ggml accepts that no other scaling type does, and the ones it refuses. */
static void test_validation(posenc_context *context)
{
    float q[TOKENS][HEAD_DIM] = {{0}};
    int32_t pos[TOKENS] = {0};
    ggml_case c = {.n_dims = HEAD_DIM, .mode = 2, .freq_base = 10000, .freq_scale = 4.0,
                   .ext_factor = -0.5, .attn_factor = 1, .beta_fast = 32, .beta_slow = 64};
    posenc_rope_desc desc = desc_of(&c, &q[0][0], NULL, pos);
    CHECK_OK(posenc_rope(context, &desc)); /* freq_scale > 1, ext_factor < 0, betas swapped */
    for (int t = 0; t < TOKENS; t++)
        for (int d = 0; d < HEAD_DIM; d++)
            q[t][d] = 1.0f;

    desc.scaling.freq_scale = -1;
    CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "scaling.freq_scale");
    desc.scaling.freq_scale = 1e6; /* 1 + 0.1 ln(1e-6) < 0 */
    desc.scaling.ext_factor = 1;
    CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "scaling.freq_scale");
    desc.scaling.freq_scale = 1;
    desc.scaling.ext_factor = NAN;
    CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "scaling.ext_factor");
    desc.scaling.ext_factor = 0;
    desc.scaling.factor = 2; /* YARN's field, not ggml's */
    CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "scaling.factor");

    /* ggml's fields on another type are a mistake, not something to ignore. */
    posenc_rope_desc yarn = desc;
    yarn.scaling = (posenc_rope_scaling){.type = POSENC_ROPE_SCALING_YARN, .factor = 4,
                                         .original_max_positions = 4096, .ext_factor = 1};
    CHECK_STATUS(posenc_rope(context, &yarn), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "scaling.ext_factor");
    yarn.scaling.ext_factor = 0;
    yarn.scaling.freq_scale = 0.25;
    CHECK_STATUS(posenc_rope(context, &yarn), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "scaling.freq_scale");

    /* Caller frequencies (ggml's vision mode) replace theta and the scaling: a value left there
     * would be ignored, so it is refused with its field named. */
    static const double vision_freq[HEAD_DIM / 2] = {1.0, 0.5, 0.25};
    posenc_rope_desc given = desc;
    given.inv_freq = vision_freq;
    given.inv_freq_count = HEAD_DIM / 2;
    given.scaling = (posenc_rope_scaling){.type = POSENC_ROPE_SCALING_YARN_GGML};
    CHECK_STATUS(posenc_rope(context, &given), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "theta");
    given.theta = 0;
    CHECK_STATUS(posenc_rope(context, &given), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "scaling.type");
    given.scaling.type = POSENC_ROPE_SCALING_NONE;
    given.scaling.freq_scale = 0.5; /* ggml's vision mode at freq_scale 0.5, left unfolded */
    CHECK_STATUS(posenc_rope(context, &given), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "scaling.freq_scale");
    given.scaling.freq_scale = 0;
    given.scaling.ext_factor = 1;
    CHECK_STATUS(posenc_rope(context, &given), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "scaling.ext_factor");
    given.scaling.ext_factor = 0;
    given.scaling.original_max_positions = 4096;
    CHECK_STATUS(posenc_rope(context, &given), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "scaling.original_max_positions");
    given.scaling.original_max_positions = 0;
    static float rotated[TOKENS][HEAD_DIM]; /* q stays as it is, for the check below */
    const int64_t q_shape[2] = {TOKENS, HEAD_DIM};
    given.q = posenc_tensor_of_host(rotated, POSENC_DTYPE_F32, 2, q_shape);
    CHECK_OK(posenc_rope(context, &given)); /* what is left applies: inv_freq alone */

    /* Rotary offsets: even, inside the head, with the rotated dims inside it too. */
    posenc_rope_desc offset = desc;
    offset.scaling = (posenc_rope_scaling){0};
    offset.rotary_dim = 16;
    const uint32_t bad_offsets[] = {3, HEAD_DIM, HEAD_DIM - 8};
    for (size_t i = 0; i < sizeof bad_offsets / sizeof bad_offsets[0]; i++) {
        offset.rotary_offset = bad_offsets[i];
        CHECK_STATUS(posenc_rope(context, &offset), POSENC_INVALID_SHAPE);
        CHECK_MESSAGE(posenc_context_last_error(context),
                      i < 2 ? "rotary_offset" : "rotary_dim");
    }
    for (int t = 0; t < TOKENS; t++)
        for (int d = 0; d < HEAD_DIM; d++)
            CHECK(q[t][d] == 1.0f); /* every refused call left q alone */
    /* Without rotary_dim, every dim from the offset on is rotated. */
    offset.rotary_dim = 0;
    offset.rotary_offset = HEAD_DIM - 2;
    pos[1] = 5;
    CHECK_OK(posenc_rope(context, &offset));
    for (int d = 0; d < HEAD_DIM - 2; d++)
        CHECK(q[1][d] == 1.0f);
    CHECK(q[1][HEAD_DIM - 2] != 1.0f || q[1][HEAD_DIM - 1] != 1.0f);
}

int main(void)
{
    for (int j = 0; j < 64; j++)
        freq_factors[j] = 1.0 + 0.25 * (j % 32);
    printf("test_ggml: ggml_rope_ext's arguments as descriptor fields, against a float64 "
           "transcription of ggml's formulas\n");
    if (test_for_each_device(test_device) == 0 ||
        test_for_each_device(test_mrope_device) == 0)
        test_failures++;
    posenc_context *context = NULL;
    posenc_context_desc desc = {.backend = POSENC_BACKEND_CPU};
    CHECK_OK(posenc_context_create(&desc, &context));
    if (context) {
        test_validation(context);
        test_vision_validation(context);
    }
    posenc_context_destroy(context);
    return test_finish("test_ggml");
}
