/* SPDX-License-Identifier: MIT */
/* The QK RMSNorm fused into RoPE (q_norm_weight, k_norm_weight, norm_eps, norm_weight_offset) on
 * every device: Qwen3's norm over each head, Gemma 3's x (1 + w), OLMo 2's norm over the token's
 * whole q or k, with exact angles or caller cos/sin tables, NeoX and GPT-J, partial rotary from
 * an offset, GQA, in place and out of place, the KV-cache write, f32/f16/bf16, against the float64
 * norm and rotation, synchronous and submitted. Bad descriptors are refused naming the field,
 * with nothing written; host weights are refused for work left running.
 *
 * Tolerance, in units of 2^-24: a normalized value x_n = x (w + offset) / sqrt(mean(x^2) + eps)
 * is within N units of |x_n|; pass-through dims are checked within N units of |ref|, and the
 * rotation keeps its promise (8 units of the pair's norm; 2 units of |a c| + |b s| by caller
 * tables) on inputs each within N units: |out - ref| <= (N + 9) * 2^-24 * (|a| + |b|) *
 * max(1, |c|, |s|) for f32 outputs. f16 and bf16 add one ulp of the output type at |ref|.
 * - CPU: the vector kernels sum the squares of a head in f32 lanes, each value's path to the sum
 *   at most D = ceil(head_dim / (4 L)) + 2 + log2(L) rounded additions of non-negative terms for
 *   L lanes (src/cpu/cpu_simd_norm.h), so the sum is within D units, relatively; the factor
 *   r = 1 / sqrt(mean + eps), taken from it in f32 lanes, within D / 2 + 3.5 (the product by
 *   1 / head_dim, eps rounded and added, the square root, the division; a per-token factor, in
 *   float64 from the heads' sums, within D / 2 + 1); w + offset rounds once to f32, then w r and
 *   x (w r): N = D / 2 + 6.5 (D the largest over the variants' 4, 8 and 16 lanes: 12 for
 *   head_dim 128, so N = 12.5).
 * - GPU kernels, in f32 (NORM_UNITS_GPU): the squares rounded (1 unit); the generic kernels sum
 *   them compensated (2 units, whatever the count), rope_blocks.comp's norm variants as a
 *   pairwise tree of an invocation's 8 or 16 (4), per token its heads' sums compensated (2),
 *   then the invocations' sums as compensated pairs (2): the sum within 9 units. Then the mean
 *   and eps added (2), the inverse square root (its input's 11 halved, and 2 ulp, 4 units, of
 *   OpenCL's rsqrt and Vulkan's inversesqrt), w + offset (1) and the two products (2): 12.5
 *   units, so N = 13. */
#include "reference.h"
#include "test_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define F32 POSENC_DTYPE_F32
#define F16 POSENC_DTYPE_F16
#define BF16 POSENC_DTYPE_BF16
#define I32 POSENC_DTYPE_I32
#define MAX_REPORTS 6
#define TABLE_ROWS 16
#define NORM_UNITS_GPU 13.0

typedef struct norm_case {
    const char *name;
    posenc_rope_style style;
    posenc_dtype dtype, weight_dtype;
    int64_t tokens, q_heads, k_heads, head_dim;
    uint32_t rotary_dim, rotary_offset;
    bool q_per_token, k_per_token; /* OLMo 2's norm over the token's whole q or k */
    bool k_norm;                   /* k normalized too */
    double eps, offset;
    bool out_of_place, tables, with_cache;
    int32_t first_position;
    test_memory_kind memory;
    int64_t weight_step; /* elements from one weight to the next (0: 1) */
} norm_case;

static const norm_case cases[] = {
    {"qwen3: per head, neox, f32, positions 2^20", POSENC_ROPE_NEOX, F32, F32, 5, 4, 2, 64, 0, 0,
     false, false, true, 1e-6, 0.0, false, false, false, 1 << 20, TEST_MEMORY_HOST, 0},
    {"gemma 3: x (1 + w), bf16, out of place", POSENC_ROPE_NEOX, BF16, BF16, 3, 4, 1, 32, 0, 0,
     false, false, true, 1e-6, 1.0, true, false, false, 7, TEST_MEMORY_BUFFER, 0},
    {"olmo 2: per token, f16", POSENC_ROPE_NEOX, F16, F32, 4, 3, 3, 16, 0, 0, true, true, true,
     1e-5, 0.0, true, false, false, 100, TEST_MEMORY_HOST, 0},
    {"gptj partial from dim 4, per head, KV cache", POSENC_ROPE_GPTJ, F32, F16, 3, 2, 2, 24, 16, 4,
     false, false, true, 1e-6, 0.0, false, false, true, 3, TEST_MEMORY_WRAPPED, 0},
    {"caller cos/sin tables, per head, f16", POSENC_ROPE_NEOX, F16, F32, 4, 2, 2, 16, 0, 0, false,
     false, true, 1e-6, 0.0, false, true, false, 0, TEST_MEMORY_HOST, 0},
    {"decode 32+8 x 128, per head, in place", POSENC_ROPE_NEOX, BF16, BF16, 1, 32, 8, 128, 0, 0,
     false, false, true, 1e-6, 0.0, false, false, false, 4000000, TEST_MEMORY_BUFFER, 0},
    {"prefill 64 tokens, per token, q only", POSENC_ROPE_GPTJ, F32, F32, 64, 4, 2, 32, 0, 0,
     true, false, false, 1e-6, 0.0, false, false, false, 0, TEST_MEMORY_HOST, 0},
    {"olmo 2 per token with the KV cache", POSENC_ROPE_NEOX, F32, BF16, 3, 2, 2, 16, 0, 0, true,
     true, true, 1e-6, 0.0, false, false, true, 9, TEST_MEMORY_HOST, 0},
    {"strided f16 weights (every third), KV cache", POSENC_ROPE_GPTJ, F32, F16, 3, 2, 2, 24, 16,
     4, false, false, true, 1e-6, 0.0, false, false, true, 3, TEST_MEMORY_HOST, 3},
    {"strided bf16 weights, per token, out of place", POSENC_ROPE_NEOX, F32, BF16, 3, 2, 2, 16,
     0, 0, true, true, true, 1e-6, 1.0, true, false, false, 5, TEST_MEMORY_HOST, 2},
    /* The vector kernels' edges: partial vectors (20 pairs: 16 + 4, 8 + 8 + 4), odd head
     * counts, dims before and after the rotated ones normalized in place, sums of squares over
     * more heads than lanes, heads as the table-in-registers kernels take them. */
    {"partial vectors, 5+3 heads, out of place", POSENC_ROPE_NEOX, F32, F32, 3, 5, 3, 40, 0, 0,
     false, false, true, 1e-6, 0.0, true, false, false, 11, TEST_MEMORY_HOST, 0},
    {"gptj from dim 2 of 36, in place, f16", POSENC_ROPE_GPTJ, F16, BF16, 2, 3, 1, 36, 32, 2,
     false, false, true, 1e-6, 1.0, false, false, false, 5, TEST_MEMORY_HOST, 0},
    {"neox 64 of 128 in place, bf16, rest normed", POSENC_ROPE_NEOX, BF16, F32, 2, 4, 2, 128,
     64, 0, false, false, true, 1e-6, 0.0, false, false, false, 77, TEST_MEMORY_HOST, 0},
    {"per token over 40+9 heads, f16, in place", POSENC_ROPE_NEOX, F16, F16, 3, 40, 9, 64, 0, 0,
     true, true, true, 1e-5, 0.0, false, false, false, 300, TEST_MEMORY_HOST, 0},
    {"gptj decode 32+8 x 128, bf16, in place", POSENC_ROPE_GPTJ, BF16, BF16, 1, 32, 8, 128, 0, 0,
     false, false, true, 1e-6, 1.0, false, false, false, 4095, TEST_MEMORY_HOST, 0},
    {"gptj f32 x 128 per token, tables, cache", POSENC_ROPE_GPTJ, F32, F32, 3, 6, 4, 128, 0, 0,
     true, false, true, 1e-6, 0.0, false, true, true, 2, TEST_MEMORY_HOST, 0},
    /* The one-pass kernels' instances (cpu_simd_rope_norm.h): whole NeoX heads of 2, 4 or 8
     * vectors a half, f32 and bf16, with groups of four heads cut short; the prefill streams
     * (software prefetch on the variants that take it). */
    {"neox f32 x 128, 6+3 heads, tables, KV cache", POSENC_ROPE_NEOX, F32, F32, 4, 6, 3, 128, 0,
     0, false, false, true, 1e-6, 0.0, false, true, true, 2, TEST_MEMORY_HOST, 0},
    {"neox bf16 x 256, 1+1 heads, out of place", POSENC_ROPE_NEOX, BF16, BF16, 2, 1, 1, 256, 0, 0,
     false, false, true, 1e-6, 1.0, true, false, false, 1 << 22, TEST_MEMORY_BUFFER, 0},
    {"neox f32 x 256 prefill of 600 tokens, 6+2 heads", POSENC_ROPE_NEOX, F32, BF16, 600, 6, 2,
     256, 0, 0, false, false, true, 1e-5, 0.0, false, false, false, 0, TEST_MEMORY_HOST, 0},
    {"neox f32 head 130, rotary 128: rest of 2", POSENC_ROPE_NEOX, F32, F32, 2, 3, 3, 130, 128,
     0, false, true, true, 1e-6, 0.0, true, false, false, 9, TEST_MEMORY_HOST, 0},
    /* Heads in units of 8 pairs or 8 pass-through dims, fewer units than a power of two: the
     * GPU block kernels' pass-through units and idle invocations. */
    {"neox f32 x 64, 32 from dim 8, in place, cache", POSENC_ROPE_NEOX, F32, F16, 3, 5, 2, 64,
     32, 8, false, false, true, 1e-6, 0.0, false, false, true, 11, TEST_MEMORY_HOST, 0},
    {"gptj f32 x 64, 32 from dim 8, per token", POSENC_ROPE_GPTJ, F32, F32, 4, 3, 2, 64, 32, 8,
     true, true, true, 1e-6, 1.0, true, false, false, 1 << 21, TEST_MEMORY_BUFFER, 0},
    {"neox bf16 x 96, 64 from dim 16, out of place", POSENC_ROPE_NEOX, BF16, F32, 2, 4, 2, 96,
     64, 16, false, false, true, 1e-6, 0.0, true, false, false, 5, TEST_MEMORY_HOST, 0},
};

typedef struct norm_run {
    test_memory q, k, q_out, k_out, q_w, k_w, cos, sin, k_cache, slots;
    posenc_rope_desc desc;
} norm_run;

static uint32_t rotary(const norm_case *c)
{
    return c->rotary_dim ? c->rotary_dim : (uint32_t)c->head_dim - c->rotary_offset;
}

/* The CPU's N of the tolerance (top of the file): units of 2^-24 of a normalized value. */
static double cpu_norm_units(int64_t head_dim)
{
    double worst = 0.0;
    for (int64_t lanes = 4, depth = 2; lanes <= 16; lanes *= 2, depth++) {
        double d = (double)((head_dim + 4 * lanes - 1) / (4 * lanes)) + 2.0 + (double)depth;
        worst = fmax(worst, d);
    }
    return worst / 2.0 + 6.5;
}

static void fill_random(test_rng *rng, posenc_dtype dtype, unsigned char *bytes, size_t count,
                        double lo, double hi)
{
    for (size_t i = 0; i < count; i++)
        ref_store(dtype, bytes + i * posenc_dtype_size(dtype), test_rng_uniform(rng, lo, hi));
}

static void free_run(norm_run *run)
{
    test_memory *all[] = {&run->q, &run->k, &run->q_out, &run->k_out, &run->q_w,
                          &run->k_w, &run->cos, &run->sin, &run->k_cache, &run->slots};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        test_memory_destroy(all[i]);
}

static bool make_run(posenc_context *ctx, const norm_case *c, test_rng *rng, norm_run *run)
{
    memset(run, 0, sizeof *run);
    size_t es = posenc_dtype_size(c->dtype), ws = posenc_dtype_size(c->weight_dtype);
    int64_t q_shape[3] = {c->tokens, c->q_heads, c->head_dim};
    int64_t k_shape[3] = {c->tokens, c->k_heads, c->head_dim};
    size_t q_count = (size_t)(c->tokens * c->q_heads * c->head_dim);
    size_t k_count = (size_t)(c->tokens * c->k_heads * c->head_dim);
    int64_t q_w = c->q_per_token ? c->q_heads * c->head_dim : c->head_dim;
    int64_t k_w = c->k_per_token ? c->k_heads * c->head_dim : c->head_dim;
    int64_t half = rotary(c) / 2, step = c->weight_step ? c->weight_step : 1;
    bool ok = test_memory_create(&run->q, ctx, c->memory, q_count * es) &&
              test_memory_create(&run->k, ctx, c->memory, k_count * es) &&
              test_memory_create(&run->q_w, ctx, c->memory, (size_t)(q_w * step) * ws) &&
              test_memory_create(&run->k_w, ctx, c->memory, (size_t)(k_w * step) * ws);
    if (ok && c->out_of_place)
        ok = test_memory_create(&run->q_out, ctx, c->memory, q_count * es) &&
             test_memory_create(&run->k_out, ctx, c->memory, k_count * es);
    if (ok && c->tables)
        ok = test_memory_create(&run->cos, ctx, c->memory, (size_t)(TABLE_ROWS * half) * 4) &&
             test_memory_create(&run->sin, ctx, c->memory, (size_t)(TABLE_ROWS * half) * 4);
    if (ok && c->with_cache)
        ok = test_memory_create(&run->k_cache, ctx, c->memory, k_count * es) &&
             test_memory_create(&run->slots, ctx, c->memory, (size_t)c->tokens * 4);
    if (!ok)
        return false;
    /* Heads of different scales, as real activations have. */
    fill_random(rng, c->dtype, run->q.bytes, q_count, -3.0, 3.0);
    fill_random(rng, c->dtype, run->k.bytes, k_count, -0.2, 0.2);
    fill_random(rng, c->weight_dtype, run->q_w.bytes, (size_t)(q_w * step), -1.5, 1.5);
    fill_random(rng, c->weight_dtype, run->k_w.bytes, (size_t)(k_w * step), 0.0, 2.0);
    if (c->tables) {
        fill_random(rng, F32, run->cos.bytes, (size_t)(TABLE_ROWS * half), -1.0, 1.0);
        fill_random(rng, F32, run->sin.bytes, (size_t)(TABLE_ROWS * half), -1.0, 1.0);
    }
    if (c->with_cache) { /* token t into cache row tokens - 1 - t */
        int32_t *slots = (int32_t *)(void *)run->slots.bytes;
        for (int64_t t = 0; t < c->tokens; t++)
            slots[t] = (int32_t)(c->tokens - 1 - t);
    }
    test_memory *all[] = {&run->q, &run->k, &run->q_w, &run->k_w, &run->cos, &run->sin,
                          &run->slots, &run->k_cache, &run->q_out, &run->k_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (all[i]->bytes && !test_memory_upload(all[i]))
            return false;
    }
    posenc_rope_desc *d = &run->desc;
    d->q = test_memory_tensor(&run->q, c->dtype, 0, 3, q_shape, NULL);
    d->k = test_memory_tensor(&run->k, c->dtype, 0, 3, k_shape, NULL);
    if (c->out_of_place) {
        d->q_out = test_memory_tensor(&run->q_out, c->dtype, 0, 3, q_shape, NULL);
        d->k_out = test_memory_tensor(&run->k_out, c->dtype, 0, 3, k_shape, NULL);
    }
    d->style = c->style;
    d->rotary_dim = c->rotary_dim;
    d->rotary_offset = c->rotary_offset;
    d->position_offset = c->first_position;
    int64_t weight_stride = step * (int64_t)ws;
    d->q_norm_weight = test_memory_tensor(&run->q_w, c->weight_dtype, 0, 1, &q_w, &weight_stride);
    if (c->k_norm)
        d->k_norm_weight =
            test_memory_tensor(&run->k_w, c->weight_dtype, 0, 1, &k_w, &weight_stride);
    d->norm_eps = c->eps;
    d->norm_weight_offset = c->offset;
    if (c->tables) {
        int64_t table_shape[2] = {TABLE_ROWS, half};
        d->cos = test_memory_tensor(&run->cos, F32, 0, 2, table_shape, NULL);
        d->sin = test_memory_tensor(&run->sin, F32, 0, 2, table_shape, NULL);
    }
    if (c->with_cache) {
        int64_t slots_shape[1] = {c->tokens};
        d->k_cache = test_memory_tensor(&run->k_cache, c->dtype, 0, 3, k_shape, NULL);
        d->slot_mapping = test_memory_tensor(&run->slots, I32, 0, 1, slots_shape, NULL);
    }
    return true;
}

/* Checks `heads` heads of every token of `out` (rows reversed for the cache) against the float64
 * norm of `in` (read before the call) by `weights`, then the rotation. */
static void check_tensor(const norm_case *c, const norm_run *run, const unsigned char *in,
                         const unsigned char *out, int64_t heads, const test_memory *weights,
                         bool normed, bool per_token, bool cache, double norm_units,
                         ref_stats *stats)
{
    size_t es = posenc_dtype_size(c->dtype), ws = posenc_dtype_size(c->weight_dtype);
    uint32_t rot = rotary(c), pairs = rot / 2, off = c->rotary_offset;
    double inv_freq[256];
    ref_rope_frequencies(&run->desc, rot, inv_freq);
    unsigned reported = 0;
    int64_t hd = c->head_dim;
    double units = norm_units > 0 ? norm_units : cpu_norm_units(hd);
    for (int64_t t = 0; t < c->tokens; t++) {
        const unsigned char *x0 = in + (size_t)(t * heads * hd) * es;
        const unsigned char *y0 = out + (size_t)((cache ? c->tokens - 1 - t : t) * heads * hd) * es;
        double token_sum = 0.0;
        for (int64_t i = 0; i < heads * hd; i++)
            token_sum += pow(ref_load(c->dtype, x0 + i * es), 2);
        double position = (double)c->first_position + (double)t;
        for (int64_t h = 0; h < heads; h++) {
            const unsigned char *x = x0 + (size_t)(h * hd) * es, *y = y0 + (size_t)(h * hd) * es;
            double sum = 0.0;
            for (int64_t d = 0; d < hd; d++)
                sum += pow(ref_load(c->dtype, x + d * es), 2);
            double r = per_token ? 1.0 / sqrt(token_sum / (double)(heads * hd) + c->eps)
                                 : 1.0 / sqrt(sum / (double)hd + c->eps);
            double xn[512];
            for (int64_t d = 0; d < hd; d++) {
                int64_t step = c->weight_step ? c->weight_step : 1;
                double w = ref_load(c->weight_dtype,
                                    weights->bytes +
                                        (size_t)(((per_token ? h * hd : 0) + d) * step) * ws);
                xn[d] = ref_load(c->dtype, x + d * es) * (normed ? r * (w + c->offset) : 1.0);
            }
            for (int64_t d = 0; d < hd; d++) {
                if (d >= off && d < off + rot)
                    continue;
                double got = ref_load(c->dtype, y + d * es);
                double tol = units * 0x1p-24 * fabs(xn[d]) +
                             (c->dtype == F32 ? 0 : ref_ulp(c->dtype, xn[d]));
                stats->values++;
                if (!(fabs(got - xn[d]) <= tol)) {
                    stats->failures++;
                    test_failures++;
                    if (reported++ < MAX_REPORTS)
                        fprintf(stderr, "  %s: token %lld head %lld dim %lld: %.9g, want %.9g\n",
                                c->name, (long long)t, (long long)h, (long long)d, got, xn[d]);
                }
            }
            for (uint32_t j = 0; j < pairs; j++) {
                uint32_t ia, ib;
                ref_rope_pair(c->style, rot, j, &ia, &ib);
                double a = xn[off + ia], b = xn[off + ib], s, co;
                if (c->tables) {
                    int64_t row = (int64_t)position;
                    co = ref_load(F32, run->cos.bytes + (size_t)(row * pairs + j) * 4);
                    s = ref_load(F32, run->sin.bytes + (size_t)(row * pairs + j) * 4);
                } else {
                    ref_sincos_product(position, inv_freq[j], &s, &co);
                }
                double ra = a * co - b * s, rb = a * s + b * co;
                double bound = (units + 9) * 0x1p-24 * (fabs(a) + fabs(b)) *
                               fmax(1.0, fmax(fabs(co), fabs(s)));
                double ya = ref_load(c->dtype, y + (off + ia) * es);
                double yb = ref_load(c->dtype, y + (off + ib) * es);
                bool ok = fabs(ya - ra) <= bound + (c->dtype == F32 ? 0 : ref_ulp(c->dtype, ra)) &&
                          fabs(yb - rb) <= bound + (c->dtype == F32 ? 0 : ref_ulp(c->dtype, rb));
                stats->values += 2;
                if (c->dtype == F32 && fabs(a) + fabs(b) > 0)
                    stats->max_units = fmax(stats->max_units, fmax(fabs(ya - ra), fabs(yb - rb)) /
                                                                  (0x1p-24 * (fabs(a) + fabs(b))));
                if (!ok) {
                    stats->failures++;
                    test_failures++;
                    if (reported++ < MAX_REPORTS)
                        fprintf(stderr,
                                "  %s: token %lld head %lld pair %u: (%.9g, %.9g), want "
                                "(%.9g, %.9g)\n",
                                c->name, (long long)t, (long long)h, j, ya, yb, ra, rb);
                }
            }
        }
    }
}

static void run_case(posenc_context *ctx, const norm_case *c, test_rng *rng, double norm_units,
                     bool submit)
{
    norm_run run;
    unsigned char *q_in = NULL, *k_in = NULL;
    if (!make_run(ctx, c, rng, &run) || !(q_in = malloc(run.q.size)) ||
        !(k_in = malloc(run.k.size))) {
        test_failures++;
        goto done;
    }
    memcpy(q_in, run.q.bytes, run.q.size);
    memcpy(k_in, run.k.bytes, run.k.size);
    if (submit) /* its kernel and table built ahead */
        CHECK_OK(posenc_prepare(ctx, &(posenc_prepare_desc){.rope = &run.desc, .rope_count = 1}));
    CHECK_OK(test_rope_call(ctx, &run.desc, submit));
    test_memory *q_out = c->out_of_place ? &run.q_out : &run.q;
    test_memory *k_out = c->out_of_place ? &run.k_out : &run.k;
    CHECK(test_memory_download(q_out) && test_memory_download(k_out));
    ref_stats stats = {0};
    check_tensor(c, &run, q_in, q_out->bytes, c->q_heads, &run.q_w, true, c->q_per_token, false,
                 norm_units, &stats);
    if (c->with_cache && !c->out_of_place) {
        CHECK(memcmp(run.k.bytes, k_in, run.k.size) == 0); /* only the cache takes k */
    } else {
        check_tensor(c, &run, k_in, k_out->bytes, c->k_heads, &run.k_w, c->k_norm,
                     c->k_per_token, false, norm_units, &stats);
    }
    if (c->with_cache) {
        CHECK(test_memory_download(&run.k_cache));
        check_tensor(c, &run, k_in, run.k_cache.bytes, c->k_heads, &run.k_w, c->k_norm,
                     c->k_per_token, true, norm_units, &stats);
    }
    printf("  %-48s %s  %llu values, worst %.2f units of 2^-24\n", c->name,
           stats.failures ? "FAIL" : submit ? "ok, submitted" : "ok", stats.values,
           stats.max_units);
done:
    free(q_in);
    free(k_in);
    free_run(&run);
}

/* A descriptor refused: the status, the field named, and q as it was. */
static void expect_refused(posenc_context *ctx, norm_run *run, posenc_status status,
                           const char *fields)
{
    unsigned char before[8192];
    size_t size = run->q.size < sizeof before ? run->q.size : sizeof before;
    CHECK(test_memory_download(&run->q));
    memcpy(before, run->q.bytes, size);
    CHECK_STATUS(posenc_rope(ctx, &run->desc), status);
    CHECK_MESSAGE(posenc_context_last_error(ctx), fields);
    CHECK(test_memory_download(&run->q));
    CHECK(memcmp(before, run->q.bytes, size) == 0);
}

static void check_refusals(posenc_context *ctx, test_rng *rng)
{
    norm_run run;
    if (!make_run(ctx, &cases[0], rng, &run)) {
        free_run(&run);
        return;
    }
    posenc_rope_desc good = run.desc;
    posenc_tensor none = {0};
    run.desc.q_norm_weight.shape[0] = 63;
    expect_refused(ctx, &run, POSENC_INVALID_SHAPE, "q_norm_weight.shape");
    run.desc = good;
    run.desc.k_norm_weight.ndim = 2;
    run.desc.k_norm_weight.shape[1] = 1;
    expect_refused(ctx, &run, POSENC_INVALID_SHAPE, "k_norm_weight.ndim");
    run.desc = good;
    run.desc.q_norm_weight.dtype = I32;
    expect_refused(ctx, &run, POSENC_INVALID_DTYPE, "q_norm_weight.dtype");
    run.desc = good;
    run.desc.k = none;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "k_norm_weight");
    run.desc = good;
    run.desc.norm_eps = -1e-6;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "norm_eps");
    run.desc = good;
    run.desc.norm_eps = NAN;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "norm_eps");
    run.desc = good;
    run.desc.norm_weight_offset = INFINITY;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "norm_weight_offset");
    run.desc = good;
    run.desc.q_norm_weight = run.desc.k_norm_weight = none;
    run.desc.norm_eps = 0.0;
    run.desc.norm_weight_offset = 1.0;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "norm_weight_offset");
    /* A weight inside an output. */
    run.desc = good;
    run.desc.q_norm_weight = test_memory_tensor(&run.q, F32, 0, 1, (int64_t[]){64}, NULL);
    expect_refused(ctx, &run, POSENC_INVALID_LAYOUT, "q|q_norm_weight");
    free_run(&run);
}

/* Work left running reads device memory only: host weights are refused, naming them. */
static void check_submit_refusal(posenc_context *ctx, test_rng *rng)
{
    norm_run run;
    if (make_run(ctx, &cases[1], rng, &run)) { /* in device buffers */
        static float weights[32];
        const int64_t count = 32;
        run.desc.q_norm_weight = posenc_tensor_of_host(weights, F32, 1, &count);
        posenc_event *event = NULL;
        CHECK_STATUS(posenc_rope_submit(ctx, &run.desc, &event), POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "q_norm_weight.host");
        posenc_event_destroy(event);
    }
    free_run(&run);
}

static void test_device(posenc_context *ctx, const posenc_device_info *info)
{
    test_rng rng = {0x2a0c};
    printf("%s (%s):\n", info->name, posenc_backend_name(info->backend));
    /* 0: the CPU's, from head_dim. */
    double norm_units = info->backend == POSENC_BACKEND_CPU ? 0.0 : NORM_UNITS_GPU;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_case(ctx, &cases[i], &rng, norm_units, false);
        /* Again in device buffers, prepared and submitted: work left running. */
        norm_case in_buffers = cases[i];
        in_buffers.memory = TEST_MEMORY_BUFFER;
        run_case(ctx, &in_buffers, &rng, norm_units, true);
    }
    check_refusals(ctx, &rng);
    check_submit_refusal(ctx, &rng);
}

int main(void)
{
    printf("test_rope_norm: QK RMSNorm fused into RoPE against the float64 norm and rotation\n");
    if (test_for_each_device(test_device) == 0)
        test_failures++;
    return test_finish("test_rope_norm");
}
