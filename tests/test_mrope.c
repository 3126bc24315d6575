/* SPDX-License-Identifier: MIT */
/* Multimodal RoPE on every device: Qwen2-VL M-RoPE, Qwen3-VL interleaved M-RoPE and the 2-D
 * vision RoPE of the Qwen2-VL vision tower and of Pixtral, against the float64 reference
 * (reference.c transcribes HF transformers' component rules), plus values checkable by hand,
 * text tokens equal to plain RoPE bit for bit, HF's [3, batch, tokens] position_ids passed with
 * permuted strides, and the relative-position property of each component.
 *
 * Tolerance (reference.h): |out - ref| <= 8 * 2^-24 * |ref pair| for f32, the header's promise;
 * f16/bf16 add one ulp of the output type. Pass-through dims must be bit-exact copies. */
#include "reference.h"
#include "test_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PROMISE (8.0 * 0x1p-24)
#define MAX_DIM 128
#define MAX_REPORTS 6

#define F32 POSENC_DTYPE_F32
#define F16 POSENC_DTYPE_F16
#define BF16 POSENC_DTYPE_BF16
#define I32 POSENC_DTYPE_I32

typedef struct mm_case {
    const char *name;
    posenc_rope_multimodal kind;
    uint32_t section[3];
    posenc_rope_style style;
    posenc_dtype dtype;
    posenc_dtype positions_dtype; /* I32 or F32; DEFAULT: positions absent */
    bool hf_layout;               /* stored [C, rows, tokens], passed as [rows, tokens, C] */
    bool per_batch;               /* positions [batch, tokens, C], else [tokens, C] */
    int64_t batch, tokens, q_heads, k_heads;
    uint32_t head_dim, rotary_dim;
    double theta, attention_factor;
    bool inverse;
    int32_t position_offset;
    posenc_rope_scaling scaling;
    test_memory_kind memory; /* of the positions */
} mm_case;

/* Component c of token t in positions row r: every third token a text token (all components
 * equal), the others image patches on a grid, one of them far out (a large w). */
static double mm_position(const mm_case *c, uint32_t components, int64_t r, int64_t t,
                          uint32_t component)
{
    double text = 40.0 * (double)r + 3.0 + (double)t;
    if (t % 3 == 0)
        return text;
    double fraction = c->positions_dtype == F32 ? 0.25 : 0.0;
    if (components == 3 && component == 0)
        return 40.0 * (double)r + 3.0; /* one frame: the temporal index stays */
    uint32_t spatial = components == 3 ? component - 1 : component;
    if (spatial == 1 && t == 1)
        return 123457.0 + fraction;
    return (double)((t * (spatial ? 5 : 7) + r) % 13) + fraction;
}

/* DYNAMIC_NTK's table for a length, as HF computes it (test_scaling transcribes the same). */
static void dynamic_ntk_frequencies(const mm_case *c, uint32_t rot, uint32_t length,
                                    double *inv_freq)
{
    const posenc_rope_scaling *s = &c->scaling;
    double len = length > s->original_max_positions ? length : s->original_max_positions;
    double theta = c->theta != 0 ? c->theta : 10000.0;
    double base = theta * pow(s->factor * len / s->original_max_positions - (s->factor - 1),
                              (double)rot / (rot - 2));
    for (uint32_t j = 0; j < rot / 2; j++)
        inv_freq[j] = 1.0 / pow(base, (double)(2 * j) / rot);
}

static void run_case(posenc_context *context, const mm_case *c, size_t index)
{
    uint32_t C = ref_rope_components(c->kind);
    uint32_t D = c->head_dim, rot = c->rotary_dim ? c->rotary_dim : c->head_dim;
    int64_t B = c->batch, T = c->tokens, HQ = c->q_heads, HK = c->k_heads;
    size_t e = posenc_dtype_size(c->dtype);
    size_t q_count = (size_t)(B * T * HQ * D), k_count = (size_t)(B * T * HK * D);
    unsigned char *q = calloc(q_count, e), *q_out = calloc(q_count, e);
    unsigned char *k = calloc(k_count ? k_count : 1, e), *k_out = calloc(k_count ? k_count : 1, e);
    double *q_values = calloc(q_count, sizeof(double)), *k_values = calloc(k_count + 1, sizeof(double));
    int64_t P = c->per_batch ? B : 1;
    bool has_positions = c->positions_dtype != POSENC_DTYPE_DEFAULT;
    test_memory positions = {0};
    bool ok = q && q_out && k && k_out && q_values && k_values;
    if (ok && has_positions)
        ok = test_memory_create(&positions, context, c->memory, (size_t)(P * T * C) * 4);
    if (!ok) {
        test_failures++;
        goto done;
    }

    test_rng rng = {0x51ed2701u + index};
    for (size_t i = 0; i < q_count; i++) {
        ref_store(c->dtype, q + i * e, test_rng_uniform(&rng, -1, 1));
        q_values[i] = ref_load(c->dtype, q + i * e);
    }
    for (size_t i = 0; i < k_count; i++) {
        ref_store(c->dtype, k + i * e, test_rng_uniform(&rng, -1, 1));
        k_values[i] = ref_load(c->dtype, k + i * e);
    }
    int64_t pos_shape[3] = {P, T, C}, pos_strides[3];
    if (c->hf_layout) {
        pos_strides[0] = T * 4;
        pos_strides[1] = 4;
        pos_strides[2] = P * T * 4;
    } else {
        pos_strides[0] = T * C * 4;
        pos_strides[1] = C * 4;
        pos_strides[2] = 4;
    }
    if (has_positions) {
        for (int64_t r = 0; r < P; r++)
            for (int64_t t = 0; t < T; t++)
                for (uint32_t comp = 0; comp < C; comp++)
                    ref_store(c->positions_dtype,
                              positions.bytes + r * pos_strides[0] + t * pos_strides[1] +
                                  comp * pos_strides[2],
                              mm_position(c, C, r, t, comp));
        test_memory_upload(&positions);
    }

    int64_t q_shape[4] = {B, T, HQ, D}, k_shape[4] = {B, T, HK, D};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(q, c->dtype, 4, q_shape),
        .q_out = posenc_tensor_of_host(q_out, c->dtype, 4, q_shape),
        .rotary_dim = c->rotary_dim,
        .style = c->style,
        .theta = c->theta,
        .attention_factor = c->attention_factor,
        .inverse = c->inverse,
        .position_offset = c->position_offset,
        .scaling = c->scaling,
        .multimodal = c->kind,
        .mrope_section = {c->section[0], c->section[1], c->section[2]},
    };
    if (HK) {
        desc.k = posenc_tensor_of_host(k, c->dtype, 4, k_shape);
        desc.k_out = posenc_tensor_of_host(k_out, c->dtype, 4, k_shape);
    }
    if (has_positions)
        desc.positions = c->per_batch
                             ? test_memory_tensor(&positions, c->positions_dtype, 0, 3, pos_shape,
                                                  pos_strides)
                             : test_memory_tensor(&positions, c->positions_dtype, 0, 2,
                                                  pos_shape + 1, pos_strides + 1);
    posenc_status status = posenc_rope(context, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  case %zu '%s': %s: %s\n", index, c->name, posenc_status_name(status),
                posenc_context_last_error(context));
        goto done;
    }

    double inv_freq[MAX_DIM / 2], pair_positions[MAX_DIM / 2];
    uint32_t component[MAX_DIM / 2];
    double factor = ref_rope_frequencies(&desc, rot, inv_freq);
    if (c->scaling.type == POSENC_ROPE_SCALING_DYNAMIC_NTK) {
        double largest = -1; /* over every component, as HF's max(position_ids) */
        for (int64_t r = 0; r < P; r++)
            for (int64_t t = 0; t < T; t++)
                for (uint32_t comp = 0; comp < C; comp++)
                    largest = fmax(largest, floor(mm_position(c, C, r, t, comp)));
        dynamic_ntk_frequencies(c, rot, (uint32_t)largest + 1, inv_freq);
    }
    ref_rope_multimodal(&desc, rot, inv_freq, component);

    ref_stats stats = {0};
    int reports = 0;
    for (int which = 0; which < 2; which++) {
        int64_t H = which ? HK : HQ;
        const unsigned char *in = which ? k : q, *out = which ? k_out : q_out;
        const double *values = which ? k_values : q_values;
        for (int64_t b = 0; b < B; b++) {
            for (int64_t t = 0; t < T; t++) {
                for (uint32_t j = 0; j < rot / 2; j++)
                    pair_positions[j] = has_positions
                                            ? mm_position(c, C, c->per_batch ? b : 0, t,
                                                          component[j])
                                            : (double)c->position_offset + (double)t;
                for (int64_t h = 0; h < H; h++) {
                    size_t at = (size_t)(((b * T + t) * H + h) * D);
                    double ref[MAX_DIM];
                    ref_rope_head_pairs(values + at, ref, D, rot, c->style, inv_freq,
                                        pair_positions, factor, c->inverse);
                    for (uint32_t d = 0; d < D; d++) {
                        bool good;
                        double got = ref_load(c->dtype, out + (at + d) * e);
                        if (d < rot) {
                            uint32_t j = c->style == POSENC_ROPE_GPTJ ? d / 2 : d % (rot / 2);
                            uint32_t ia, ib;
                            ref_rope_pair(c->style, rot, j, &ia, &ib);
                            good = ref_check(&stats, c->dtype, got, ref[d],
                                             hypot(ref[ia], ref[ib]), 0.0);
                        } else {
                            good = memcmp(out + (at + d) * e, in + (at + d) * e, e) == 0;
                        }
                        if (!good) {
                            test_failures++;
                            if (reports++ < MAX_REPORTS)
                                fprintf(stderr,
                                        "  case %zu '%s' %s[%lld,%lld,%lld,%u]: got %.9g, "
                                        "expected %.9g\n",
                                        index, c->name, which ? "k" : "q", (long long)b,
                                        (long long)t, (long long)h, d, got, ref[d]);
                        }
                    }
                }
            }
        }
    }
done:
    free(q);
    free(q_out);
    free(k);
    free(k_out);
    free(q_values);
    free(k_values);
    if (has_positions)
        test_memory_destroy(&positions);
}

/* Every kind x style x dtype x positions dtype, with layouts, memories and batch sharing varied
 * along the way; then partial rotary dims, absent positions, scalings, the attention factor and
 * the inverse. */
static void test_matrix(posenc_context *context)
{
    const posenc_rope_multimodal kinds[4] = {POSENC_ROPE_MROPE, POSENC_ROPE_MROPE_INTERLEAVED,
                                             POSENC_ROPE_VISION_2D,
                                             POSENC_ROPE_VISION_2D_PIXTRAL};
    const char *names[4] = {"mrope", "mrope interleaved", "vision 2d", "pixtral"};
    const uint32_t sections[4][3] = {{4, 6, 6}, {8, 4, 4}, {0, 0, 0}, {0, 0, 0}};
    const posenc_dtype dtypes[3] = {F32, F16, BF16};
    size_t index = 0;
    for (int kind = 0; kind < 4; kind++)
        for (int style = 0; style < 2; style++)
            for (int dtype = 0; dtype < 3; dtype++)
                for (int pos = 0; pos < 2; pos++, index++) {
                    mm_case c = {
                        .name = names[kind],
                        .kind = kinds[kind],
                        .section = {sections[kind][0], sections[kind][1], sections[kind][2]},
                        .style = style ? POSENC_ROPE_GPTJ : POSENC_ROPE_NEOX,
                        .dtype = dtypes[dtype],
                        .positions_dtype = pos ? F32 : I32,
                        .hf_layout = index % 2 == 0,
                        .per_batch = index % 4 < 2,
                        .batch = 2,
                        .tokens = 7,
                        .q_heads = 4,
                        .k_heads = 2, /* grouped-query attention */
                        .head_dim = 32,
                        .theta = kind >= 2 ? 10000 : 1e6,
                        .memory = (test_memory_kind)(index % 3),
                    };
                    run_case(context, &c, index);
                }

    mm_case more[] = {
        {.name = "mrope partial rotary_dim", .kind = POSENC_ROPE_MROPE, .section = {4, 4, 4},
         .dtype = F32, .positions_dtype = I32, .batch = 1, .tokens = 9, .q_heads = 2,
         .k_heads = 1, .head_dim = 40, .rotary_dim = 24, .hf_layout = true},
        {.name = "interleaved partial rotary_dim gptj", .kind = POSENC_ROPE_MROPE_INTERLEAVED,
         .section = {4, 4, 4}, .style = POSENC_ROPE_GPTJ, .dtype = BF16, .positions_dtype = F32,
         .batch = 2, .tokens = 5, .q_heads = 3, .k_heads = 1, .head_dim = 32, .rotary_dim = 24,
         .per_batch = true, .memory = TEST_MEMORY_BUFFER},
        {.name = "pixtral partial rotary_dim", .kind = POSENC_ROPE_VISION_2D_PIXTRAL,
         .dtype = F16, .positions_dtype = I32, .batch = 1, .tokens = 6, .q_heads = 2,
         .head_dim = 32, .rotary_dim = 24, .memory = TEST_MEMORY_WRAPPED},
        {.name = "vision 2d partial rotary_dim", .kind = POSENC_ROPE_VISION_2D, .dtype = F32,
         .positions_dtype = F32, .batch = 1, .tokens = 6, .q_heads = 1, .k_heads = 1,
         .head_dim = 24, .rotary_dim = 16, .hf_layout = true},
        {.name = "mrope absent positions", .kind = POSENC_ROPE_MROPE, .section = {16, 24, 24},
         .dtype = F32, .batch = 2, .tokens = 5, .q_heads = 2, .k_heads = 1, .head_dim = 128,
         .position_offset = 1000},
        {.name = "mrope linear scaling, attention factor, inverse", .kind = POSENC_ROPE_MROPE,
         .section = {2, 3, 3}, .dtype = F32, .positions_dtype = I32, .batch = 1, .tokens = 8,
         .q_heads = 2, .k_heads = 2, .head_dim = 16, .attention_factor = 0.75, .inverse = true,
         .scaling = {.type = POSENC_ROPE_SCALING_LINEAR, .factor = 4}},
        {.name = "interleaved dynamic ntk, length from every component",
         .kind = POSENC_ROPE_MROPE_INTERLEAVED, .section = {24, 20, 20}, .dtype = F32,
         .positions_dtype = I32, .batch = 2, .tokens = 6, .q_heads = 2, .k_heads = 1,
         .head_dim = 128, .per_batch = true, .hf_layout = true, .memory = TEST_MEMORY_BUFFER,
         .scaling = {.type = POSENC_ROPE_SCALING_DYNAMIC_NTK, .factor = 2,
                     .original_max_positions = 64}},
        {.name = "vision 2d bf16, attention factor", .kind = POSENC_ROPE_VISION_2D, .dtype = BF16,
         .positions_dtype = I32, .batch = 1, .tokens = 10, .q_heads = 2, .k_heads = 2,
         .head_dim = 64, .attention_factor = 1.25},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        run_case(context, &more[i], 100 + i);
}

/* Text tokens (t = h = w) of M-RoPE are plain RoPE: the same bits on the same device. */
static void test_text_equals_plain(posenc_context *context)
{
    enum { T = 6, H = 2, D = 64 };
    const posenc_dtype dtypes[2] = {F32, BF16};
    for (int kind = 0; kind < 2; kind++) {
        for (int dt = 0; dt < 2; dt++) {
            size_t e = posenc_dtype_size(dtypes[dt]);
            unsigned char q[T * H * D * 4], plain[T * H * D * 4], multi[T * H * D * 4];
            int32_t positions1[T], positions3[T][3];
            test_rng rng = {77u + (uint64_t)kind};
            for (size_t i = 0; i < (size_t)T * H * D; i++)
                ref_store(dtypes[dt], q + i * e, test_rng_uniform(&rng, -2, 2));
            for (int t = 0; t < T; t++)
                positions1[t] = positions3[t][0] = positions3[t][1] = positions3[t][2] =
                    t * 977 + (t == 5 ? 2000000000 : 0);
            int64_t shape[3] = {T, H, D}, p1[1] = {T}, p3[2] = {T, 3};
            posenc_rope_desc desc = {
                .q = posenc_tensor_of_host(q, dtypes[dt], 3, shape),
                .q_out = posenc_tensor_of_host(plain, dtypes[dt], 3, shape),
                .positions = posenc_tensor_of_host(positions1, I32, 1, p1),
                .theta = 1e6,
            };
            CHECK_OK(posenc_rope(context, &desc));
            desc.q_out = posenc_tensor_of_host(multi, dtypes[dt], 3, shape);
            desc.positions = posenc_tensor_of_host(positions3, I32, 2, p3);
            desc.multimodal = kind ? POSENC_ROPE_MROPE_INTERLEAVED : POSENC_ROPE_MROPE;
            desc.mrope_section[0] = kind ? 12 : 8;
            desc.mrope_section[1] = 10;
            desc.mrope_section[2] = kind ? 10 : 14;
            CHECK_OK(posenc_rope(context, &desc));
            CHECK(memcmp(plain, multi, (size_t)T * H * D * e) == 0);
        }
    }
}

/* For each kind and each component c: shifting component c of both q's and k's positions by
 * the same amount leaves q.k unchanged. Each rotated row is within the promise of exact, so two
 * scores of exact equal value differ by at most 4 * promise * |q| |k| (attention factor 1). */
static void test_relative(posenc_context *context)
{
    enum { D = 48 };
    const posenc_rope_multimodal kinds[4] = {POSENC_ROPE_MROPE, POSENC_ROPE_MROPE_INTERLEAVED,
                                             POSENC_ROPE_VISION_2D,
                                             POSENC_ROPE_VISION_2D_PIXTRAL};
    const uint32_t sections[4][3] = {{6, 9, 9}, {8, 8, 8}, {0, 0, 0}, {0, 0, 0}};
    for (int kind = 0; kind < 4; kind++) {
        uint32_t C = ref_rope_components(kinds[kind]);
        for (uint32_t shifted = 0; shifted < C; shifted++) {
            float rows[4][D];
            double q_norm = 0, k_norm = 0;
            for (int d = 0; d < D; d++) {
                rows[0][d] = rows[2][d] = (float)sin(1.0 + 0.37 * d);
                rows[1][d] = rows[3][d] = (float)cos(2.0 + 0.91 * d);
                q_norm += (double)rows[0][d] * rows[0][d];
                k_norm += (double)rows[1][d] * rows[1][d];
            }
            /* q at (5, 17, 301), k at (2, 40, 9); then both shifted along one component. */
            const int32_t q_at[3] = {5, 17, 301}, k_at[3] = {2, 40, 9};
            int32_t positions[4][3] = {{0}};
            for (uint32_t comp = 0; comp < C; comp++) {
                int32_t shift = comp == shifted ? 123457 : 0;
                positions[0][comp] = q_at[comp];
                positions[1][comp] = k_at[comp];
                positions[2][comp] = q_at[comp] + shift;
                positions[3][comp] = k_at[comp] + shift;
            }
            int64_t shape[2] = {4, D}, p_shape[2] = {4, C}, p_strides[2] = {12, 4};
            posenc_rope_desc desc = {
                .q = posenc_tensor_of_host(rows, F32, 2, shape),
                .positions = posenc_tensor_of_host(positions, I32, 2, p_shape),
                .theta = 10000,
                .multimodal = kinds[kind],
                .mrope_section = {sections[kind][0], sections[kind][1], sections[kind][2]},
            };
            memcpy(desc.positions.strides, p_strides, sizeof p_strides);
            posenc_status status = posenc_rope(context, &desc);
            CHECK_OK(status);
            if (status != POSENC_OK)
                continue;
            double near = 0, far = 0;
            for (int d = 0; d < D; d++) {
                near += (double)rows[0][d] * rows[1][d];
                far += (double)rows[2][d] * rows[3][d];
            }
            double tolerance = 4 * PROMISE * sqrt(q_norm * k_norm);
            if (!(fabs(near - far) <= tolerance)) {
                test_failures++;
                fprintf(stderr,
                        "  relative, kind %d component %u: score %.9g, shifted %.9g "
                        "(tolerance %.3g)\n",
                        kind, shifted, near, far, tolerance);
            }
        }
    }
}

/* q holds unit pairs (1, 0) in the NeoX style, so pair j comes out as (cos t_j, sin t_j): the
 * angle shows which component and which inv_freq drive each pair. */
static void angles_of(posenc_context *context, posenc_rope_desc *desc, uint32_t rot,
                      const void *positions, uint32_t components, double *angles)
{
    float q[MAX_DIM] = {0};
    for (uint32_t j = 0; j < rot / 2; j++)
        q[j] = 1.0f;
    int64_t shape[2] = {1, rot}, p_shape[2] = {1, components};
    desc->q = posenc_tensor_of_host(q, F32, 2, shape);
    desc->positions = posenc_tensor_of_host((void *)positions, I32, 2, p_shape);
    CHECK_OK(posenc_rope(context, desc));
    for (uint32_t j = 0; j < rot / 2; j++)
        angles[j] = atan2(q[j + rot / 2], q[j]);
}

static void check_angles(const char *what, const double *got, const double *want, uint32_t n)
{
    for (uint32_t j = 0; j < n; j++) {
        if (!(fabs(got[j] - want[j]) <= 1e-6)) {
            test_failures++;
            fprintf(stderr, "  %s: pair %u turned by %.9g, expected %.9g\n", what, j, got[j],
                    want[j]);
        }
    }
}

static void test_by_hand(posenc_context *context)
{
    /* rotary_dim 8, inv_freq all 1, positions (t, h, w) = (1, 2, 3): the angle of pair j is
     * the position it uses. mrope_section [2, 1, 1]: contiguous t t h w; interleaved t h w t
     * (j = 1 and 2 are below 3 * 1). */
    static const double ones[4] = {1, 1, 1, 1};
    const int32_t thw[3] = {1, 2, 3};
    double got[4];
    posenc_rope_desc desc = {.multimodal = POSENC_ROPE_MROPE,
                             .mrope_section = {2, 1, 1},
                             .inv_freq = ones,
                             .inv_freq_count = 4};
    angles_of(context, &desc, 8, thw, 3, got);
    check_angles("mrope [2,1,1]", got, (const double[]){1, 1, 2, 3}, 4);
    desc.multimodal = POSENC_ROPE_MROPE_INTERLEAVED;
    angles_of(context, &desc, 8, thw, 3, got);
    check_angles("interleaved [2,1,1]", got, (const double[]){1, 2, 3, 1}, 4);
    /* rotary_dim 12, [4, 1, 1]: contiguous t t t t h w; interleaved t h w t t t, since j = 4
     * and 5 are past 3 * 1 and fall back to t. */
    static const double six_ones[6] = {1, 1, 1, 1, 1, 1};
    double got6[6];
    posenc_rope_desc wide = {.multimodal = POSENC_ROPE_MROPE,
                             .mrope_section = {4, 1, 1},
                             .inv_freq = six_ones,
                             .inv_freq_count = 6};
    angles_of(context, &wide, 12, thw, 3, got6);
    check_angles("mrope [4,1,1]", got6, (const double[]){1, 1, 1, 1, 2, 3}, 6);
    wide.multimodal = POSENC_ROPE_MROPE_INTERLEAVED;
    angles_of(context, &wide, 12, thw, 3, got6);
    check_angles("interleaved [4,1,1]", got6, (const double[]){1, 2, 3, 1, 1, 1}, 6);

    /* rotary_dim 8, theta 10000. Qwen2-VL vision: VisionRotaryEmbedding(4) has inv_freq
     * [1, 0.01], for h then for w: [1, 0.01, 1, 0.01]. Pixtral: f = [1, 0.1, 0.01, 0.001],
     * h takes f0 and f2, w f1 and f3: [1, 0.01, 0.1, 0.001]. Positions (h, w) = (1, 1) show
     * the frequencies; (1, 0) shows that the second half is w's. */
    const int32_t one_one[2] = {1, 1}, one_zero[2] = {1, 0};
    posenc_rope_desc vision = {.multimodal = POSENC_ROPE_VISION_2D, .theta = 10000};
    angles_of(context, &vision, 8, one_one, 2, got);
    check_angles("vision 2d inv_freq", got, (const double[]){1, 0.01, 1, 0.01}, 4);
    angles_of(context, &vision, 8, one_zero, 2, got);
    check_angles("vision 2d h only", got, (const double[]){1, 0.01, 0, 0}, 4);
    vision.multimodal = POSENC_ROPE_VISION_2D_PIXTRAL;
    angles_of(context, &vision, 8, one_one, 2, got);
    check_angles("pixtral inv_freq", got, (const double[]){1, 0.01, 0.1, 0.001}, 4);
    angles_of(context, &vision, 8, one_zero, 2, got);
    check_angles("pixtral h only", got, (const double[]){1, 0.01, 0, 0}, 4);
}

static void test_device(posenc_context *context, const posenc_device_info *info)
{
    (void)info;
    test_by_hand(context);
    test_matrix(context);
    test_text_equals_plain(context);
    test_relative(context);
}

int main(void)
{
    printf("test_mrope: M-RoPE, interleaved M-RoPE and 2-D vision RoPE against the reference\n");
    if (test_for_each_device(test_device) == 0)
        test_failures++;
    return test_finish("test_mrope");
}
