/* SPDX-License-Identifier: MIT */
/* The Vulkan backend beyond the matrix that test_rope, test_sinusoidal and the others already run
 * on every Vulkan device:
 * - work larger than one kernel binding may address (maxStorageBufferRange: 128 MiB on lavapipe)
 *   is split into several dispatches: a RoPE on a heads-first q above that size and a packed k,
 *   a sinusoidal table above it in host memory, and the copy roofline over it, checked against
 *   the float64 reference on sampled rows (every row would take minutes on a software device);
 * - the paged KV cache write of a k split over tokens, each dispatch finding its tokens' slots,
 *   and a cache larger than one binding refused, naming it;
 * - caller cos/sin tables with the work split over tokens, rows gathered per token and by
 *   position;
 * - the fused QK norm split over tokens, per head and per token, and over one token's heads per
 *   head (per token refused, naming the weights);
 * - host tensors off their element boundary, realigned in staging;
 * - the pipeline cache file: saved, loaded, a foreign one ignored, an unwritable path reported;
 * - layers named in VK_INSTANCE_LAYERS work together with posenc's own validation, and posenc's
 *   own instance then enables VK_EXT_debug_utils (which the layer offers) for debug names.
 * A machine without a Vulkan device skips this test, unless POSENC_TEST_REQUIRE_DEVICES names
 * vulkan (the Linux presets, which CI runs with lavapipe): then a skip would hide the backend, and
 * the test fails. */
#include "reference.h"
#include "required_devices.h"
#include "test_common.h"

#include <posenc/posenc_diagnostics.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MIB (UINT64_C(1) << 20)
/* Devices whose binding limit is above this are not given tensors larger than it. */
#define MAX_TEST_BINDING (512 * MIB)

/* A reproducible value in [-1, 1) for element `i` of tensor `seed`: no copy of the inputs is
 * kept, the check recomputes them. */
static float input_value(uint64_t seed, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return (float)((double)(x >> 40) / (double)(1u << 23) - 1.0);
}

static int32_t token_position(int64_t t)
{
    /* Spread over the whole int32 range, negative ones included. */
    return (int32_t)(uint32_t)((uint64_t)t * 2654435761u);
}

/* Whether token t is one of the checked samples. */
static bool sampled(int64_t t, int64_t tokens)
{
    return t < 3 || t >= tokens - 3 || t % 61 == 0;
}

/* Checks the heads of sampled tokens of a rotated tensor in `bytes` (f32, element [t, h, d] at
 * t * stride_token + h * stride_head + d * 4) against the reference. */
static void check_rope(const char *name, const float *out, int64_t tokens, int64_t heads,
                       uint32_t head_dim, int64_t stride_token, int64_t stride_head,
                       uint64_t seed, const double *inv_freq, ref_stats *stats)
{
    double x[128], ref[128];
    unsigned reported = 0;
    for (int64_t t = 0; t < tokens; t++) {
        if (!sampled(t, tokens))
            continue;
        for (int64_t h = 0; h < heads; h++) {
            int64_t base = t * stride_token + h * stride_head; /* in floats */
            for (uint32_t d = 0; d < head_dim; d++)
                x[d] = input_value(seed, (uint64_t)(base + d));
            ref_rope_head(x, ref, head_dim, head_dim, POSENC_ROPE_NEOX, inv_freq,
                          (double)token_position(t), 1.0, false);
            for (uint32_t d = 0; d < head_dim; d++) {
                uint32_t pair = d < head_dim / 2 ? d + head_dim / 2 : d - head_dim / 2;
                double norm = hypot(ref[d], ref[pair]);
                if (!ref_check(stats, POSENC_DTYPE_F32, out[base + d], ref[d], norm, 0.0)) {
                    test_failures++;
                    if (reported++ < 5)
                        fprintf(stderr, "  %s[%lld, %lld, %u]: got %.9g, expected %.9g\n", name,
                                (long long)t, (long long)h, d, out[base + d], ref[d]);
                }
            }
        }
    }
}

/* The log of the contexts here: test_count_warnings, and a count of the operations that the
 * backend split into several dispatches. */
static int split_operations;

static void log_splits(posenc_log_level level, const char *message, void *user_data)
{
    if (strstr(message, "vulkan: split into "))
        split_operations++;
    test_count_warnings(level, message, user_data);
}

/* Fills a device buffer of `floats` f32 values with input_value(seed, i), in chunks. */
static bool fill_buffer(posenc_buffer *buffer, uint64_t floats, uint64_t seed)
{
    enum { CHUNK = 1 << 20 };
    float *chunk = malloc(CHUNK * sizeof *chunk);
    if (!chunk)
        return false;
    bool ok = true;
    for (uint64_t done = 0; done < floats && ok; done += CHUNK) {
        uint64_t n = floats - done < CHUNK ? floats - done : CHUNK;
        for (uint64_t i = 0; i < n; i++)
            chunk[i] = input_value(seed, done + i);
        ok = posenc_buffer_upload(buffer, done * 4, chunk, n * 4) == POSENC_OK;
    }
    free(chunk);
    return ok;
}

/* RoPE on q [1, tokens, 32, 128] stored heads-first (so the split goes along heads) and k
 * [1, tokens, 8, 128] packed, both in place in device buffers, q larger than one binding. */
static void test_large_rope(posenc_context *ctx, uint64_t binding)
{
    const int64_t q_heads = 32, k_heads = 8, head_dim = 128;
    const int64_t row = q_heads * head_dim * 4;
    const int64_t tokens = (int64_t)(binding / (uint64_t)row) + 67;
    const uint64_t q_floats = (uint64_t)(tokens * q_heads * head_dim);
    const uint64_t k_floats = (uint64_t)(tokens * k_heads * head_dim);
    posenc_buffer *q = NULL, *k = NULL;
    int32_t *positions = malloc((size_t)tokens * sizeof *positions);
    float *q_out = malloc(q_floats * sizeof *q_out);
    float *k_out = malloc(k_floats * sizeof *k_out);
    CHECK(positions && q_out && k_out);
    posenc_buffer_desc q_desc = {.size = q_floats * 4}, k_desc = {.size = k_floats * 4};
    CHECK_OK(posenc_buffer_create(ctx, &q_desc, &q));
    CHECK_OK(posenc_buffer_create(ctx, &k_desc, &k));
    if (!positions || !q_out || !k_out || !q || !k)
        goto done;
    CHECK(fill_buffer(q, q_floats, 1) && fill_buffer(k, k_floats, 2));
    for (int64_t t = 0; t < tokens; t++)
        positions[t] = token_position(t);

    const int64_t q_shape[4] = {1, tokens, q_heads, head_dim};
    const int64_t q_strides[4] = {(int64_t)q_floats * 4, head_dim * 4, tokens * head_dim * 4, 4};
    const int64_t k_shape[3] = {tokens, k_heads, head_dim};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 4, q_shape),
        .k = posenc_tensor_of_buffer(k, POSENC_DTYPE_F32, 3, k_shape),
        .positions = posenc_tensor_of_host(positions, POSENC_DTYPE_I32, 1, &tokens),
        .theta = 500000.0,
    };
    memcpy(desc.q.strides, q_strides, sizeof q_strides);
    posenc_status status = posenc_rope(ctx, &desc);
    CHECK_OK(status);
    if (status != POSENC_OK) {
        fprintf(stderr, "  %s\n", posenc_context_last_error(ctx));
        goto done;
    }
    CHECK_OK(posenc_buffer_download(q, 0, q_out, q_floats * 4));
    CHECK_OK(posenc_buffer_download(k, 0, k_out, k_floats * 4));

    double inv_freq[64];
    ref_rope_frequencies(&desc, (uint32_t)head_dim, inv_freq);
    ref_stats stats = {0};
    check_rope("q", q_out, tokens, q_heads, (uint32_t)head_dim, head_dim, tokens * head_dim, 1,
               inv_freq, &stats);
    check_rope("k", k_out, tokens, k_heads, (uint32_t)head_dim, k_heads * head_dim, head_dim, 2,
               inv_freq, &stats);
    printf("    rope: q %.1f MiB heads-first, k %.1f MiB: max error %.2f x 2^-24 |pair| over "
           "%llu sampled values\n",
           (double)q_floats * 4 / MIB, (double)k_floats * 4 / MIB, stats.max_units,
           stats.values);

    /* The copy roofline over the same buffer: in place it rewrites every word unchanged;
     * write only it writes every word of its range and nothing past it. */
    CHECK_OK(posenc_diagnostics_roofline(ctx, k, 0, k_floats * 4, false));
    CHECK_OK(posenc_diagnostics_roofline(ctx, q, 0, q_floats * 4, false));
    float *again = malloc(q_floats * sizeof *again);
    if (again && posenc_buffer_download(q, 0, again, q_floats * 4) == POSENC_OK)
        CHECK(memcmp(again, q_out, q_floats * 4) == 0);
    free(again);
    /* Write only, over all but the first and last 16 bytes of a buffer of all-ones words: the
     * kernel writes element indices (below 2^31). */
    uint32_t *words = (uint32_t *)q_out;
    memset(words, 0xff, q_floats * 4);
    CHECK_OK(posenc_buffer_upload(q, 0, words, q_floats * 4));
    CHECK_OK(posenc_diagnostics_roofline(ctx, q, 16, q_floats * 4 - 32, true));
    if (posenc_buffer_download(q, 0, words, q_floats * 4) == POSENC_OK) {
        uint64_t written = 0, kept = 0;
        for (uint64_t w = 0; w < q_floats; w++) {
            if (w >= 4 && w < q_floats - 4)
                written += words[w] < (UINT32_C(1) << 31);
            else
                kept += words[w] == 0xffffffffu;
        }
        CHECK(written == q_floats - 8 && kept == 8);
    }

done:
    posenc_buffer_destroy(q);
    posenc_buffer_destroy(k);
    free(positions);
    free(q_out);
    free(k_out);
}

/* The paged KV cache write split over tokens: q and k [64, 1, 128] f32, one token row every
 * `stride` bytes of one device buffer so that each spans more than one binding, with a small
 * host cache [4, 16, 1, 128] that every split dispatch binds whole. Each dispatch must find its
 * own tokens' slots: the rows are checked against the reference and bit for bit against k
 * rotated by a plain RoPE. A cache larger than one binding is then refused, naming it, with q
 * left as it was. */
static void test_large_kv_cache(posenc_context *ctx, uint64_t binding)
{
    enum { TOKENS = 64, DIM = 128, BLOCKS = 4, BLOCK_SIZE = 16, ROW = DIM * 4 };
    const int64_t stride = (int64_t)((binding / (TOKENS - 2) + 1023) & ~(uint64_t)1023);
    posenc_buffer *qk = NULL, *large_cache = NULL;
    posenc_buffer_desc qk_desc = {.size = (uint64_t)(TOKENS * stride)};
    CHECK_OK(posenc_buffer_create(ctx, &qk_desc, &qk));
    if (!qk)
        return;
    static float rows[TOKENS][DIM], cache[BLOCKS * BLOCK_SIZE][DIM], rotated[TOKENS][DIM];
    static float q_before[TOKENS][DIM], q_after[TOKENS][DIM];
    int32_t positions[TOKENS], slots[TOKENS];
    for (int t = 0; t < TOKENS; t++) {
        for (int which = 0; which < 2; which++) {
            for (int d = 0; d < DIM; d++)
                rows[t][d] = input_value(20 + (uint64_t)which, (uint64_t)(t * DIM + d));
            CHECK_OK(posenc_buffer_upload(qk, (uint64_t)(t * stride + which * ROW), rows[t], ROW));
        }
        positions[t] = token_position(t);
        /* Reversed, so that no slot follows its token, and every third token without one. */
        slots[t] = t % 3 == 2 ? -1 : TOKENS - 1 - t;
    }
    memset(cache, 0x5a, sizeof cache);

    const int64_t shape[3] = {TOKENS, 1, DIM};
    const int64_t strides[3] = {stride, ROW, 4};
    const int64_t cache_shape[4] = {BLOCKS, BLOCK_SIZE, 1, DIM};
    const int64_t tokens = TOKENS;
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_buffer(qk, POSENC_DTYPE_F32, 3, shape),
        .k = posenc_tensor_of_buffer(qk, POSENC_DTYPE_F32, 3, shape),
        .positions = posenc_tensor_of_host(positions, POSENC_DTYPE_I32, 1, &tokens),
        .k_cache = posenc_tensor_of_host(cache, POSENC_DTYPE_F32, 4, cache_shape),
        .slot_mapping = posenc_tensor_of_host(slots, POSENC_DTYPE_I32, 1, &tokens),
        .theta = 500000.0,
    };
    memcpy(desc.q.strides, strides, sizeof strides);
    memcpy(desc.k.strides, strides, sizeof strides);
    desc.k.offset = ROW;
    split_operations = 0;
    posenc_status status = posenc_rope(ctx, &desc);
    CHECK_OK(status);
    if (status != POSENC_OK)
        fprintf(stderr, "  %s\n", posenc_context_last_error(ctx));
    CHECK(split_operations == 2); /* q, and k into the cache */

    /* k is only read; a plain RoPE then rotates it in place, for the bit comparison. */
    bool k_kept = true;
    for (int t = 0; t < TOKENS; t++) {
        CHECK_OK(posenc_buffer_download(qk, (uint64_t)(t * stride + ROW), rotated[t], ROW));
        for (int d = 0; d < DIM; d++)
            k_kept = k_kept && rotated[t][d] == input_value(21, (uint64_t)(t * DIM + d));
    }
    CHECK(k_kept);
    posenc_rope_desc plain = desc;
    plain.k_out = plain.k;
    plain.k_cache = plain.slot_mapping = (posenc_tensor){0};
    CHECK_OK(posenc_rope(ctx, &plain));
    for (int t = 0; t < TOKENS; t++)
        CHECK_OK(posenc_buffer_download(qk, (uint64_t)(t * stride + ROW), rotated[t], ROW));

    double inv_freq[DIM / 2];
    ref_rope_frequencies(&desc, DIM, inv_freq);
    ref_stats stats = {0};
    unsigned char fill[ROW];
    memset(fill, 0x5a, sizeof fill);
    bool written[BLOCKS * BLOCK_SIZE] = {false};
    int bad = 0;
    for (int t = 0; t < TOKENS; t++) {
        if (slots[t] < 0)
            continue;
        written[slots[t]] = true;
        const float *row = cache[slots[t]];
        if (memcmp(row, rotated[t], ROW) != 0 && bad++ < 5)
            fprintf(stderr, "  k_cache row %d: not token %d's k_out\n", slots[t], t);
        double x[DIM], ref[DIM];
        for (int d = 0; d < DIM; d++)
            x[d] = input_value(21, (uint64_t)(t * DIM + d));
        ref_rope_head(x, ref, DIM, DIM, POSENC_ROPE_NEOX, inv_freq, (double)positions[t], 1.0,
                      false);
        for (int d = 0; d < DIM; d++) {
            int pair = d < DIM / 2 ? d + DIM / 2 : d - DIM / 2;
            if (!ref_check(&stats, POSENC_DTYPE_F32, row[d], ref[d], hypot(ref[d], ref[pair]), 0.0) &&
                bad++ < 5)
                fprintf(stderr, "  k_cache[%d, %d]: got %.9g, expected %.9g\n", slots[t], d,
                        row[d], ref[d]);
        }
    }
    for (int s = 0; s < BLOCKS * BLOCK_SIZE; s++) {
        if (!written[s] && memcmp(cache[s], fill, ROW) != 0 && bad++ < 5)
            fprintf(stderr, "  k_cache row %d: written without a slot\n", s);
    }
    if (bad)
        test_failures++;
    printf("    kv cache: q and k spanning %.1f MiB each, split: max error %.2f x 2^-24 |pair| "
           "over %llu values\n",
           (double)((TOKENS - 1) * stride + ROW) / MIB, stats.max_units, stats.values);

    /* One head of this cache spans more than a binding. */
    const int64_t large_slots = (int64_t)(binding / ROW) + 1;
    posenc_buffer_desc large_desc = {.size = (uint64_t)large_slots * ROW};
    CHECK_OK(posenc_buffer_create(ctx, &large_desc, &large_cache));
    for (int t = 0; t < TOKENS; t++)
        CHECK_OK(posenc_buffer_download(qk, (uint64_t)(t * stride), q_before[t], ROW));
    if (large_cache) {
        const int64_t large_shape[3] = {large_slots, 1, DIM};
        desc.k_cache = posenc_tensor_of_buffer(large_cache, POSENC_DTYPE_F32, 3, large_shape);
        CHECK_STATUS(posenc_rope(ctx, &desc), POSENC_UNSUPPORTED);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "k_cache");
        for (int t = 0; t < TOKENS; t++)
            CHECK_OK(posenc_buffer_download(qk, (uint64_t)(t * stride), q_after[t], ROW));
        CHECK(memcmp(q_before, q_after, sizeof q_before) == 0);
    }
    posenc_buffer_destroy(large_cache);
    posenc_buffer_destroy(qk);
}

/* Caller cos/sin tables with the work split over tokens: q [64, 1, 128] f32, one token row
 * every `stride` bytes of a device buffer (more than one binding), rotated in place by host
 * tables of rows gathered per token, each split dispatch finding its own tokens' rows, and of
 * rows by position, bound whole by every dispatch. Checked against the float64 rotation by the
 * table values, within 2 * 2^-24 of |x_a c| + |x_b s|. */
static void test_large_rope_tables(posenc_context *ctx, uint64_t binding)
{
    enum { TOKENS = 64, DIM = 128, HALF = DIM / 2, ROW = DIM * 4, ROWS = 100 };
    const int64_t stride = (int64_t)((binding / (TOKENS - 2) + 1023) & ~(uint64_t)1023);
    posenc_buffer *q = NULL;
    posenc_buffer_desc q_desc = {.size = (uint64_t)(TOKENS * stride)};
    CHECK_OK(posenc_buffer_create(ctx, &q_desc, &q));
    if (!q)
        return;
    static float cos_table[ROWS][HALF], sin_table[ROWS][HALF], x[TOKENS][DIM], y[DIM];
    int32_t positions[TOKENS];
    for (int r = 0; r < ROWS; r++) {
        for (int j = 0; j < HALF; j++) {
            cos_table[r][j] = 1.5f * input_value(30, (uint64_t)(r * HALF + j));
            sin_table[r][j] = 1.5f * input_value(31, (uint64_t)(r * HALF + j));
        }
    }
    for (int t = 0; t < TOKENS; t++)
        positions[t] = (t * 37 + 5) % ROWS;
    int bad = 0;
    for (int gathered = 0; gathered < 2; gathered++) {
        for (int t = 0; t < TOKENS; t++) {
            for (int d = 0; d < DIM; d++)
                x[t][d] = input_value(32 + (uint64_t)gathered, (uint64_t)(t * DIM + d));
            CHECK_OK(posenc_buffer_upload(q, (uint64_t)(t * stride), x[t], ROW));
        }
        const int64_t shape[3] = {TOKENS, 1, DIM}, strides[3] = {stride, ROW, 4};
        const int64_t by_position[2] = {ROWS, HALF}, by_token[3] = {1, TOKENS, HALF};
        const int64_t tokens = TOKENS;
        posenc_rope_desc desc = {
            .q = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 3, shape),
            .cos = posenc_tensor_of_host(cos_table, POSENC_DTYPE_F32, gathered ? 3 : 2,
                                         gathered ? by_token : by_position),
            .sin = posenc_tensor_of_host(sin_table, POSENC_DTYPE_F32, gathered ? 3 : 2,
                                         gathered ? by_token : by_position),
        };
        memcpy(desc.q.strides, strides, sizeof strides);
        if (!gathered)
            desc.positions = posenc_tensor_of_host(positions, POSENC_DTYPE_I32, 1, &tokens);
        split_operations = 0;
        posenc_status status = posenc_rope(ctx, &desc);
        CHECK_OK(status);
        if (status != POSENC_OK)
            fprintf(stderr, "  %s\n", posenc_context_last_error(ctx));
        CHECK(split_operations == 1);
        for (int t = 0; t < TOKENS; t++) {
            CHECK_OK(posenc_buffer_download(q, (uint64_t)(t * stride), y, ROW));
            int row = gathered ? t : positions[t];
            for (int j = 0; j < HALF; j++) {
                double xa = x[t][j], xb = x[t][j + HALF];
                double c = cos_table[row][j], s = sin_table[row][j];
                double tolerance = 2 * 0x1p-24 * (fabs(xa * c) + fabs(xb * s) + fabs(xa * s) +
                                                  fabs(xb * c));
                if ((fabs(y[j] - (xa * c - xb * s)) > tolerance ||
                     fabs(y[j + HALF] - (xa * s + xb * c)) > tolerance) &&
                    bad++ < 5)
                    fprintf(stderr, "  cos/sin tables %s, token %d pair %d: got (%.9g, %.9g)\n",
                            gathered ? "gathered" : "by position", t, j, y[j], y[j + HALF]);
            }
        }
    }
    if (bad)
        test_failures++;
    printf("    cos/sin tables: q spanning %.1f MiB, split, rows gathered and by position %s\n",
           (double)((TOKENS - 1) * stride + ROW) / MIB, bad ? "FAILED" : "ok");
    posenc_buffer_destroy(q);
}

/* Heads of q [64, 2, 64] f32 normalized by `weights` per head (`per_token` false) or over the
 * token's two heads, x (w + 1) / sqrt(mean(x^2) + 1e-6), then rotated NeoX-style at position t
 * with theta 10000: the number of values off the float64 result by more than the GPU kernels'
 * bound (19 units of 2^-24 of |a| + |b|, tests/test_rope_norm.c). */
static int norm_failures(const float x[2][64], const float y[2][64], const float *weights,
                         bool per_token, int t)
{
    double sums[2] = {0.0, 0.0};
    for (int h = 0; h < 2; h++) {
        for (int d = 0; d < 64; d++)
            sums[h] += (double)x[h][d] * x[h][d];
    }
    int bad = 0;
    for (int h = 0; h < 2; h++) {
        double mean = per_token ? (sums[0] + sums[1]) / 128 : sums[h] / 64;
        double factor = 1.0 / sqrt(mean + 1e-6), xn[64];
        for (int d = 0; d < 64; d++)
            xn[d] = x[h][d] * factor * (weights[(per_token ? h * 64 : 0) + d] + 1.0);
        for (int j = 0; j < 32; j++) {
            double angle = t * pow(10000.0, -j / 32.0), c = cos(angle), s = sin(angle);
            double a = xn[j], b = xn[j + 32];
            double tolerance = 19 * 0x1p-24 * (fabs(a) + fabs(b));
            if (fabs(y[h][j] - (a * c - b * s)) > tolerance ||
                fabs(y[h][j + 32] - (a * s + b * c)) > tolerance)
                bad++;
        }
    }
    return bad;
}

/* The fused QK norm with the work split over tokens: q [64, 2, 64] f32, one token every
 * `stride` bytes of a device buffer (more than one binding), normalized per head and over the
 * token's two heads (each token's heads in one binding) by host weights, in place. Then one
 * token whose two heads lie a binding apart: per head it is split over them, and a norm over
 * the token, which needs both heads in one binding, is UNSUPPORTED, naming q_norm_weight; the
 * same for k into a cache whose heads lie a binding apart (naming k_norm_weight). */
static void test_large_rope_norm(posenc_context *ctx, uint64_t binding)
{
    enum { TOKENS = 64, HEADS = 2, DIM = 64, ROW = HEADS * DIM * 4 };
    const int64_t stride = (int64_t)((binding / (TOKENS - 2) + 1023) & ~(uint64_t)1023);
    posenc_buffer *q = NULL;
    posenc_buffer_desc q_desc = {.size = (uint64_t)(TOKENS * stride)};
    CHECK_OK(posenc_buffer_create(ctx, &q_desc, &q));
    if (!q)
        return;
    static float weights[HEADS * DIM], x[TOKENS][HEADS][DIM], y[HEADS][DIM];
    for (int i = 0; i < HEADS * DIM; i++)
        weights[i] = input_value(40, (uint64_t)i);
    int bad = 0;
    for (int per_token = 0; per_token < 2; per_token++) {
        for (int t = 0; t < TOKENS; t++) {
            for (int i = 0; i < HEADS * DIM; i++)
                x[t][i / DIM][i % DIM] = 2 * input_value(41 + (uint64_t)per_token,
                                                         (uint64_t)(t * HEADS * DIM + i));
            CHECK_OK(posenc_buffer_upload(q, (uint64_t)(t * stride), x[t], ROW));
        }
        const int64_t shape[3] = {TOKENS, HEADS, DIM}, strides[3] = {stride, DIM * 4, 4};
        const int64_t weight_count = per_token ? HEADS * DIM : DIM;
        posenc_rope_desc desc = {
            .q = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 3, shape),
            .q_norm_weight = posenc_tensor_of_host(weights, POSENC_DTYPE_F32, 1, &weight_count),
            .norm_weight_offset = 1.0,
        };
        memcpy(desc.q.strides, strides, sizeof strides);
        split_operations = 0;
        posenc_status status = posenc_rope(ctx, &desc);
        CHECK_OK(status);
        if (status != POSENC_OK)
            fprintf(stderr, "  %s\n", posenc_context_last_error(ctx));
        CHECK(split_operations == 1);
        for (int t = 0; t < TOKENS; t++) {
            CHECK_OK(posenc_buffer_download(q, (uint64_t)(t * stride), y, ROW));
            bad += norm_failures(x[t], y, weights, per_token, t);
        }
    }
    /* One token, its heads a binding apart. */
    const int64_t head_stride = (int64_t)((binding + 1023) & ~(uint64_t)1023);
    for (int per_token = 0; per_token < 2; per_token++) {
        for (int h = 0; h < HEADS; h++)
            CHECK_OK(posenc_buffer_upload(q, (uint64_t)(h * head_stride), x[0][h], DIM * 4));
        const int64_t shape[3] = {1, HEADS, DIM}, strides[3] = {ROW, head_stride, 4};
        const int64_t weight_count = per_token ? HEADS * DIM : DIM;
        posenc_rope_desc desc = {
            .q = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 3, shape),
            .q_norm_weight = posenc_tensor_of_host(weights, POSENC_DTYPE_F32, 1, &weight_count),
            .norm_weight_offset = 1.0,
        };
        memcpy(desc.q.strides, strides, sizeof strides);
        if (per_token) {
            CHECK_STATUS(posenc_rope(ctx, &desc), POSENC_UNSUPPORTED);
            CHECK_MESSAGE(posenc_context_last_error(ctx), "q_norm_weight");
            continue;
        }
        CHECK_OK(posenc_rope(ctx, &desc));
        for (int h = 0; h < HEADS; h++)
            CHECK_OK(posenc_buffer_download(q, (uint64_t)(h * head_stride), y[h], DIM * 4));
        bad += norm_failures(x[0], y, weights, false, 0);
    }
    /* k of one token into a cache whose two heads lie a binding apart: any slot may be written,
     * so a cache is bound whole for the heads of a box; per head it is split over them, and a
     * norm over the token is refused before anything runs, naming k_norm_weight. */
    for (int per_token = 0; per_token < 2; per_token++) {
        const int64_t shape[3] = {1, HEADS, DIM}, cache_shape[4] = {1, 1, HEADS, DIM};
        const int64_t cache_strides[4] = {2 * head_stride, 2 * head_stride, head_stride, 4};
        const int64_t weight_count = per_token ? HEADS * DIM : DIM, one = 1;
        int32_t slot = 0;
        posenc_rope_desc desc = {
            .q = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 3, shape),
            .k = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 3, shape),
            .k_cache = posenc_tensor_of_buffer(q, POSENC_DTYPE_F32, 4, cache_shape),
            .slot_mapping = posenc_tensor_of_host(&slot, POSENC_DTYPE_I32, 1, &one),
            .k_norm_weight = posenc_tensor_of_host(weights, POSENC_DTYPE_F32, 1, &weight_count),
        };
        desc.k.offset = ROW;
        desc.k_cache.offset = 4096;
        memcpy(desc.k_cache.strides, cache_strides, sizeof cache_strides);
        if (per_token) {
            CHECK_STATUS(posenc_rope(ctx, &desc), POSENC_UNSUPPORTED);
            CHECK_MESSAGE(posenc_context_last_error(ctx), "k_norm_weight");
        } else {
            CHECK_OK(posenc_rope(ctx, &desc));
        }
    }
    if (bad)
        test_failures++;
    printf("    QK norm: q spanning %.1f MiB, split, per head and per token %s\n",
           (double)((TOKENS - 1) * stride + ROW) / MIB, bad ? "FAILED" : "ok");
    posenc_buffer_destroy(q);
}

/* A sinusoidal table [rows, 256] f32 in host memory, larger than one binding. */
static void test_large_sinusoidal(posenc_context *ctx, uint64_t binding)
{
    const int64_t d_model = 256;
    const int64_t rows = (int64_t)(binding / (uint64_t)(d_model * 4)) + 131;
    float *table = malloc((size_t)(rows * d_model) * sizeof *table);
    CHECK(table != NULL);
    if (!table)
        return;
    const int64_t shape[2] = {rows, d_model};
    posenc_sinusoidal_desc desc = {
        .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, shape),
        .position_offset = 1000000,
        .layout = POSENC_SINUSOIDAL_SIN_COS,
    };
    posenc_status status = posenc_sinusoidal(ctx, &desc);
    CHECK_OK(status);
    if (status != POSENC_OK) {
        fprintf(stderr, "  %s\n", posenc_context_last_error(ctx));
        free(table);
        return;
    }
    double freq[128], pe[256];
    ref_sinusoidal_frequencies(&desc, (uint32_t)d_model, freq);
    ref_stats stats = {0};
    unsigned reported = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (!sampled(r, rows))
            continue;
        ref_sinusoidal_row(freq, (uint32_t)d_model, desc.layout, 1000000.0 + (double)r, pe);
        for (int64_t c = 0; c < d_model; c++) {
            float got = table[r * d_model + c];
            if (!ref_check(&stats, POSENC_DTYPE_F32, got, pe[c], 1.0, 0.0)) {
                test_failures++;
                if (reported++ < 5)
                    fprintf(stderr, "  table[%lld, %lld]: got %.9g, expected %.9g\n",
                            (long long)r, (long long)c, got, pe[c]);
            }
        }
    }
    printf("    sinusoidal: %.1f MiB in host memory: max error %.2f x 2^-24 over %llu sampled "
           "values\n",
           (double)(rows * d_model * 4) / MIB, stats.max_units, stats.values);
    free(table);
}

/* The roofline on a wrapped host buffer at an offset that is not a multiple of 16. */
static void test_small_roofline(posenc_context *ctx)
{
    uint32_t words[1000];
    for (int i = 0; i < 1000; i++)
        words[i] = 0xffffffffu;
    posenc_buffer *buffer = NULL;
    posenc_buffer_desc desc = {.size = sizeof words, .host_memory = words};
    CHECK_OK(posenc_buffer_create(ctx, &desc, &buffer));
    if (!buffer)
        return;
    CHECK_OK(posenc_diagnostics_roofline(ctx, buffer, 4, 4 * 990, true));
    CHECK(words[0] == 0xffffffffu && words[991] == 0xffffffffu);
    bool all = true;
    for (int i = 1; i <= 990; i++)
        all = all && words[i] == (uint32_t)(i - 1);
    CHECK(all);
    CHECK_OK(posenc_diagnostics_roofline(ctx, buffer, 4, 4 * 990, false));
    for (int i = 1; i <= 990; i++)
        all = all && words[i] == (uint32_t)(i - 1);
    CHECK(all);
    posenc_buffer_destroy(buffer);
}

/* Host tensors off their element boundary (f32 two bytes off, f16 and bf16 one byte off) are
 * realigned in staging: the result is bit for bit the one of the same tensor aligned, and the
 * bytes around the tensor are left alone. */
static void test_misaligned_host_memory(posenc_context *ctx)
{
    enum { TOKENS = 4, HEADS = 2, DIM = 16, N = TOKENS * HEADS * DIM };
    const int64_t shape[3] = {TOKENS, HEADS, DIM};
    const posenc_dtype dtypes[3] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    for (int d = 0; d < 3; d++) {
        size_t element = posenc_dtype_size(dtypes[d]);
        size_t bytes = N * element, skew = element == 4 ? 2 : 1;
        static uint32_t aligned_words[N], misaligned_words[N + 2];
        unsigned char *aligned = (unsigned char *)aligned_words;
        unsigned char *misaligned = (unsigned char *)misaligned_words + skew;
        for (int i = 0; i < N; i++) {
            float value = input_value(11, (uint64_t)i);
            uint16_t half = (uint16_t)(0x3c00u + (uint32_t)i); /* f16 and bf16 alike finite */
            memcpy(aligned + (size_t)i * element, element == 4 ? (const void *)&value : &half,
                   element);
        }
        memset(misaligned_words, 0x5a, sizeof misaligned_words);
        memcpy(misaligned, aligned, bytes);
        posenc_rope_desc desc = {.q = posenc_tensor_of_host(aligned, dtypes[d], 3, shape)};
        CHECK_OK(posenc_rope(ctx, &desc));
        desc.q = posenc_tensor_of_host(misaligned, dtypes[d], 3, shape);
        CHECK_OK(posenc_rope(ctx, &desc));
        CHECK(memcmp(aligned, misaligned, bytes) == 0);
        const unsigned char *all = (const unsigned char *)misaligned_words;
        bool around = true;
        for (size_t b = 0; b < sizeof misaligned_words; b++) {
            if (b < skew || b >= skew + bytes)
                around = around && all[b] == 0x5a;
        }
        CHECK(around);
    }
}

static void small_rope(posenc_context *ctx)
{
    float q[4][2][16];
    for (int i = 0; i < 128; i++)
        (&q[0][0][0])[i] = input_value(3, (uint64_t)i);
    const int64_t shape[3] = {4, 2, 16};
    posenc_rope_desc desc = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, shape)};
    CHECK_OK(posenc_rope(ctx, &desc));
}

static posenc_context *context_with(uint32_t index, const char *cache_path, posenc_log_fn log,
                                    void *log_user_data)
{
    posenc_device_info info;
    if (posenc_device_get(index, &info) != POSENC_OK)
        return NULL;
    char selector[16];
    snprintf(selector, sizeof selector, "%u", info.backend_index);
    posenc_context_desc desc = {
        .backend = POSENC_BACKEND_VULKAN,
        .device = selector,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_VALIDATION,
        .log = log,
        .log_user_data = log_user_data,
        .pipeline_cache_path = cache_path,
    };
    posenc_context *ctx = NULL;
    CHECK_OK(posenc_context_create(&desc, &ctx));
    return ctx;
}

static long file_size(const char *path)
{
    FILE *file = posenc__file_open(path, "rb");
    if (!file)
        return -1;
    long size = -1;
    if (fseek(file, 0, SEEK_END) == 0)
        size = ftell(file);
    fclose(file);
    return size;
}

/* Whether the file starts with a pipeline cache header (VK_PIPELINE_CACHE_HEADER_VERSION_ONE):
 * its size, then version 1. Drivers without a cache (lavapipe) save the header alone. */
static bool cache_header(const char *path)
{
    uint32_t words[2] = {0, 0};
    FILE *file = posenc__file_open(path, "rb");
    if (!file)
        return false;
    size_t got = fread(words, sizeof words[0], 2, file);
    fclose(file);
    return got == 2 && words[0] >= 32 && words[1] == 1;
}

static void count_all(posenc_log_level level, const char *message, void *user_data)
{
    (void)message;
    if (level >= POSENC_LOG_WARNING)
        (*(int *)user_data)++;
}

static void test_pipeline_cache(uint32_t index)
{
    /* Per process: test_vulkan and its reruns (test_vulkan_vulkan_fallbacks) may run at the
     * same time in the same directory. */
    char path[64];
    snprintf(path, sizeof path, "test_vulkan_pipeline_%llu.cache",
             (unsigned long long)posenc__process_id());
    posenc__file_remove(path);
    posenc_context *ctx = context_with(index, path, test_count_warnings, NULL);
    if (!ctx)
        return;
    small_rope(ctx);
    posenc_context_destroy(ctx);
    long saved = file_size(path);
    CHECK(saved >= 32 && cache_header(path)); /* the header alone is 32 bytes */

    ctx = context_with(index, path, test_count_warnings, NULL); /* loads it */
    if (ctx) {
        small_rope(ctx);
        posenc_context_destroy(ctx);
    }
    CHECK(file_size(path) >= saved);

    FILE *file = posenc__file_open(path, "wb"); /* a cache of some other device: ignored */
    if (file) {
        static const char junk[64] = "not a pipeline cache";
        fwrite(junk, 1, sizeof junk, file);
        fclose(file);
    }
    ctx = context_with(index, path, test_count_warnings, NULL);
    if (ctx) {
        small_rope(ctx);
        posenc_context_destroy(ctx);
    }
    CHECK(cache_header(path));
    posenc__file_remove(path);

    /* A path that cannot be written: the context still works and says so at destruction. */
    int warnings = 0;
    ctx = context_with(index, "no-such-directory/pipeline.cache", count_all, &warnings);
    if (ctx) {
        small_rope(ctx);
        posenc_context_destroy(ctx);
    }
    CHECK(warnings == 1);
    printf("    pipeline cache: saved (%ld bytes), loaded, foreign data ignored\n", saved);
}

/* Counts the contexts that say they name their objects (VK_EXT_debug_utils enabled). */
static void log_debug_names(posenc_log_level level, const char *message, void *user_data)
{
    if (strstr(message, "; debug names on"))
        ++*(int *)user_data;
    test_count_warnings(level, message, NULL);
}

/* Layers from VK_INSTANCE_LAYERS next to posenc's own validation layer. The layer offers
 * VK_EXT_debug_utils, so posenc's own instance enables it and names and labels its work; the
 * layer checks that each label is closed in its command buffer (any message fails the test). */
static void test_instance_layers(uint32_t index)
{
    static const char *const manifests[] = {
        "/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json",
        "/usr/local/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json",
        "/etc/vulkan/explicit_layer.d/VkLayer_khronos_validation.json",
    };
    bool installed = false;
    for (size_t i = 0; i < sizeof manifests / sizeof manifests[0]; i++)
        installed = installed || file_size(manifests[i]) > 0;
    if (!installed) {
        printf("    VK_INSTANCE_LAYERS: the Khronos validation layer is not installed, skipped\n");
        return;
    }
    const char *saved = posenc__env_get("VK_INSTANCE_LAYERS");
    char *restore = saved ? posenc__strdup(saved) : NULL;
    support_env_set("VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation");
    int named = 0;
    posenc_context *ctx = context_with(index, NULL, log_debug_names, &named);
    if (ctx) {
        small_rope(ctx);
        posenc_context_destroy(ctx);
    }
    CHECK(named == 1);
    if (restore)
        support_env_set("VK_INSTANCE_LAYERS", restore);
    else
        support_env_unset("VK_INSTANCE_LAYERS");
    free(restore);
    printf("    VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation, debug names on: ok\n");
}

int main(void)
{
    const char *reason = "";
    uint32_t count = 0;
    CHECK_OK(posenc_device_count(&count));
    uint32_t vulkan_devices = 0;
    for (uint32_t i = 0; i < count; i++) {
        posenc_device_info info;
        if (posenc_device_get(i, &info) != POSENC_OK || info.backend != POSENC_BACKEND_VULKAN)
            continue;
        vulkan_devices++;
        printf("  vulkan:%u %s (max binding %.0f MiB)\n", info.backend_index, info.name,
               (double)info.max_binding_bytes / MIB);
        posenc_context *ctx = context_with(i, NULL, log_splits, NULL);
        if (!ctx)
            continue;
        uint64_t binding = info.max_binding_bytes;
        /* The large tensors need a few binding ranges of memory. */
        if (binding <= MAX_TEST_BINDING && info.max_buffer_bytes > binding + 64 * MIB) {
            split_operations = 0;
            test_large_rope(ctx, binding);
            test_large_sinusoidal(ctx, binding);
            /* The RoPE (its q), the in-place and the write-only roofline over q, the table. */
            CHECK(split_operations == 4);
            test_large_kv_cache(ctx, binding);
            test_large_rope_tables(ctx, binding);
            test_large_rope_norm(ctx, binding);
        } else {
            printf("    tensors above the binding limit: too large to test on this device\n");
        }
        test_small_roofline(ctx);
        test_misaligned_host_memory(ctx);
        posenc_context_destroy(ctx);
        test_pipeline_cache(i);
        test_instance_layers(i);
    }
    if (vulkan_devices == 0) {
        posenc_backend_status(POSENC_BACKEND_VULKAN, &reason);
        return test_device_absent("test_vulkan", "vulkan", reason);
    }
    return test_finish("test_vulkan");
}
