/* SPDX-License-Identifier: MIT */
/* The CPU backend on each of its kernel variants (portable, AVX2, AVX-512, AVX-512 BF16, NEON),
 * forced one by one so a bug in one cannot hide behind another; variants this machine cannot
 * run are reported and left out. Through private headers:
 *   - the choice of variant (POSENC_CPU_VARIANT) and its errors;
 *   - the kernels themselves: f16/bf16 conversions bit for bit as core/half.c, sin/cos and the
 *     angle addition against libm in double, the fast turn computation against core/angle.c,
 *     the kernels' turns of integer and Q31.32 positions and GPT-J tables bit for bit at every
 *     length,
 *     the f16/bf16 RoPE kernels bit for bit as the f32 kernel rounded by core/half.c, and on
 *     tensors in cache bit for bit as on streaming ones;
 *   - through the public API: RoPE with head_dim and rotary_dim that are no multiple of any
 *     vector width, one token, one head, misaligned and strided views, in and out of place;
 *     sinusoidal tables long enough for the anchor + step rows, with offsets up to INT32_MAX,
 *     odd widths, add mode and strided rows; all against the float64 reference;
 *   - f16 RoPE outputs that are NaN written as core/half.c writes them (sign | 0x7e00),
 *     whatever the input NaN's payload, in every style and table size;
 *   - thread counts 1..7 giving bit-identical results;
 *   - the benchmark's copies shaped like an operation: RoPE's elements left unchanged and
 *     nothing else touched, every element of a table written and nothing else, on 1..3
 *     threads, strided views included, and a failed one leaving the next call a real one;
 *   - a steady-state call allocating nothing (allocations counted through the linker's --wrap
 *     on Linux), and the frequency table kept across calls and recomputed when an input changes.
 *
 * Tolerances: the promise, as in reference.h (8 * 2^-24 relative to the pair for RoPE, absolute
 * times |output_scale| for tables, plus one ulp of f16/bf16; add mode adds 4 * 2^-24 of the
 * magnitudes summed, as test_sinusoidal.c). The kernels' own sin/cos are held to
 * SINCOS_UNITS * 2^-24 and the angle addition to ROTATE_UNITS * 2^-24: the bounds cpu_simd.h
 * derives the promise from. */
#include "core/angle.h"
#include "core/half.h"
#include "core/internal.h"
#include "cpu/cpu_internal.h"
#include "cpu/cpu_kernels.h"
#include <posenc/posenc_diagnostics.h>
#include "reference.h"
#include "test_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SINCOS_UNITS 2.0
#define ROTATE_UNITS 7.25
#define MAX_REPORTS 8

static int reports;

#define REPORT(...)                                                                          \
    do {                                                                                     \
        test_failures++;                                                                     \
        if (reports++ < MAX_REPORTS)                                                         \
            fprintf(stderr, __VA_ARGS__);                                                    \
    } while (0)

/* ---- allocation counting ---- */

#if defined(TEST_CPU_COUNT_ALLOCATIONS)
void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *memory, size_t size);
int __real_posix_memalign(void **memory, size_t alignment, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *memory, size_t size);
int __wrap_posix_memalign(void **memory, size_t alignment, size_t size);

static volatile long allocations;

void *__wrap_malloc(size_t size)
{
    allocations++;
    return __real_malloc(size);
}
void *__wrap_calloc(size_t count, size_t size)
{
    allocations++;
    return __real_calloc(count, size);
}
void *__wrap_realloc(void *memory, size_t size)
{
    allocations++;
    return __real_realloc(memory, size);
}
int __wrap_posix_memalign(void **memory, size_t alignment, size_t size)
{
    allocations++;
    return __real_posix_memalign(memory, alignment, size);
}
#endif

/* ---- contexts on a forced variant ---- */

static posenc_status create_cpu_context(const char *variant, uint32_t threads,
                                        posenc_context **context)
{
    if (variant)
        support_env_set("POSENC_CPU_VARIANT", variant);
    else
        support_env_unset("POSENC_CPU_VARIANT");
    posenc_context_desc desc = {
        .backend = POSENC_BACKEND_CPU,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV,
        .num_threads = threads,
    };
    *context = NULL;
    posenc_status status = posenc_context_create(&desc, context);
    support_env_unset("POSENC_CPU_VARIANT");
    return status;
}

static posenc_context *variant_context(posenc_cpu_variant variant, uint32_t threads)
{
    posenc_context *context = NULL;
    const char *name = posenc_cpu_variant_name(variant);
    posenc_status status = create_cpu_context(name, threads, &context);
    if (status != POSENC_OK) {
        REPORT("context on %s with %u threads: %s: %s\n", name, threads,
               posenc_status_name(status), posenc_thread_last_error());
        return NULL;
    }
    const char *running = posenc_cpu_context_variant(context);
    if (!running || strcmp(running, name) != 0)
        REPORT("context forced to %s runs %s\n", name, running ? running : "(none)");
    return context;
}

static void test_variant_choice(void)
{
    posenc_context *context = NULL;
    posenc_status status = create_cpu_context(NULL, 0, &context);
    CHECK_OK(status);
    if (context) {
        const char *best = posenc_cpu_variant_name(posenc_cpu_best_variant());
        CHECK(strcmp(posenc_cpu_context_variant(context), best) == 0);
        /* What `posenc bench` reports, through the diagnostics seam. */
        CHECK(posenc_diagnostics_kernel_variant(context) &&
              strcmp(posenc_diagnostics_kernel_variant(context), best) == 0);
        printf("  default variant: %s\n", best);
        posenc_context_destroy(context);
    }
    CHECK_STATUS(create_cpu_context("sse9", 0, &context), POSENC_INVALID_ARGUMENT);
    CHECK(strstr(posenc_thread_last_error(), "POSENC_CPU_VARIANT") != NULL);
    CHECK(strstr(posenc_thread_last_error(), "sse9") != NULL);
    CHECK(context == NULL);
    for (int v = 0; v < POSENC_CPU_VARIANT_COUNT; v++) {
        const char *name = posenc_cpu_variant_name((posenc_cpu_variant)v);
        bool runs = posenc_cpu_kernels_for((posenc_cpu_variant)v) != NULL;
        status = create_cpu_context(name, 0, &context);
        CHECK_STATUS(status, runs ? POSENC_OK : POSENC_UNSUPPORTED);
        if (!runs) {
            CHECK(strstr(posenc_thread_last_error(), "POSENC_CPU_VARIANT") != NULL);
            CHECK(context == NULL);
        }
        printf("  %-11s %s\n", name,
               runs ? "runs here"
                    : posenc_cpu_variant_compiled((posenc_cpu_variant)v)
                          ? "not supported by this CPU: its tests are skipped"
                          : "not compiled for this architecture");
        posenc_context_destroy(context);
        context = NULL;
    }
    /* The device contexts of other backends are not CPU contexts. */
    CHECK(posenc_cpu_context_variant(NULL) == NULL);
    CHECK(posenc_diagnostics_kernel_variant(NULL) == NULL);
}

/* ---- turns ---- */

static uint64_t rng64(test_rng *rng)
{
    return ((uint64_t)test_rng_u32(rng) << 32) | test_rng_u32(rng);
}

static void test_turns(void)
{
    test_rng rng = {42};
    for (int i = 0; i < 200000; i++) {
        posenc__freq freq = {.frac = rng64(&rng), .int_turns = test_rng_u32(&rng) >> (i % 32)};
        int32_t p = (int32_t)test_rng_u32(&rng) >> (i % 31);
        int64_t fixed = i % 2 ? posenc__position_from_i32(p) : (int64_t)rng64(&rng) >> (i % 23);
        if (i % 2 == 0 && (fixed >= ((int64_t)1 << 62) || fixed < -((int64_t)1 << 62)))
            fixed /= 4; /* keep |position| < 2^31 */
        uint32_t expected = (uint32_t)((posenc__turns(fixed, freq) + (UINT64_C(1) << 31)) >> 32);
        uint32_t got = posenc_cpu_turns_hi(fixed, freq);
        if (got != expected)
            REPORT("turns_hi(%lld, %llx + %u): %u, expected %u\n", (long long)fixed,
                   (unsigned long long)freq.frac, freq.int_turns, got, expected);
        if (i % 2) {
            got = posenc_cpu_turns_hi_int(p, freq.frac);
            if (got != expected)
                REPORT("turns_hi_int(%d, %llx): %u, expected %u\n", p,
                       (unsigned long long)freq.frac, got, expected);
        }
    }
}

/* ---- kernels ---- */

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The kernels' turns of an integer position, bit for bit as posenc_cpu_turns_hi_int, for every
 * count up to 40 (vector steps and every tail), the extreme positions and random ones; nothing
 * written past the count. */
static void test_turns_int(const posenc_cpu_kernels *k)
{
    enum { MAX = 40 };
    static const int32_t fixed[] = {0, 1, -1, 2, INT32_MAX, INT32_MIN, INT32_MIN + 1, 65536};
    test_rng rng = {1234};
    uint64_t fracs[MAX];
    uint32_t turns[MAX + 1];
    for (int i = 0; i < 400; i++) {
        uint32_t count = (uint32_t)(i % (MAX + 1));
        int32_t p = i < 8 ? fixed[i] : (int32_t)test_rng_u32(&rng) >> (i % 31);
        for (uint32_t j = 0; j < count; j++)
            fracs[j] = j % 5 == 4 ? ~(uint64_t)0 >> (j % 64) : rng64(&rng);
        memset(turns, 0xa5, sizeof turns);
        k->turns_int(p, fracs, count, turns);
        for (uint32_t j = 0; j < count; j++)
            if (turns[j] != posenc_cpu_turns_hi_int(p, fracs[j]))
                REPORT("%s turns_int(%d, count %u)[%u] = %u, expected %u\n", k->name, p, count,
                       j, turns[j], posenc_cpu_turns_hi_int(p, fracs[j]));
        if (turns[count] != 0xa5a5a5a5u)
            REPORT("%s turns_int(count %u) wrote past its end\n", k->name, count);
    }
}

/* The kernels' turns of a Q31.32 position, bit for bit as core/angle.c's posenc__turns rounded,
 * for every count up to 40: positions with and without a fraction, negative ones, the extremes
 * of the int32 range, random ones and ones of few significant bits as floats give (m 2^s, m
 * either side of 2^31), with frequencies of any fraction, with whole turns and without; nothing
 * written past the count. */
static void test_turns_fixed(const posenc_cpu_kernels *k)
{
    enum { MAX = 40 };
    static const int64_t fixed[] = {0,
                                    1,
                                    -1,
                                    (int64_t)1 << 31,
                                    -((int64_t)1 << 31),
                                    ((int64_t)1 << 32) + 1,
                                    -((int64_t)3 << 31),
                                    INT64_MAX,
                                    INT64_MIN,
                                    INT64_MIN + 1,
                                    INT64_C(0x7fffffff) << 5,
                                    INT64_C(0x80000001) << 3,
                                    INT64_C(0xffffffff) << 3,
                                    INT64_C(0x00abcdef) << 32,
                                    INT64_C(0x7fffffff) << 32};
    const size_t fixed_count = sizeof fixed / sizeof fixed[0];
    test_rng rng = {4321};
    uint64_t fracs[MAX];
    uint32_t int_turns[MAX], turns[MAX + 1];
    for (int i = 0; i < 800; i++) {
        uint32_t count = (uint32_t)(i % (MAX + 1));
        int64_t p = (int64_t)rng64(&rng) >> (i % 33);
        if ((size_t)i < fixed_count) {
            p = fixed[i];
        } else if (i % 3 == 1) { /* m 2^s: m of 24 to 32 bits, s up to 32, either sign */
            uint64_t scaled = (rng64(&rng) >> (32 + i % 9)) << (i % 33);
            p = (int64_t)(i % 4 == 1 ? 0 - scaled : scaled);
        }
        for (uint32_t j = 0; j < count; j++) {
            fracs[j] = j % 5 == 4 ? ~(uint64_t)0 >> (j % 64) : rng64(&rng);
            int_turns[j] = j % 3 == 0 || i % 5 == 2 ? 0 : test_rng_u32(&rng) >> (j % 32);
        }
        memset(turns, 0xa5, sizeof turns);
        k->turns_fixed(p, fracs, int_turns, count, turns);
        for (uint32_t j = 0; j < count; j++) {
            posenc__freq freq = {.frac = fracs[j], .int_turns = int_turns[j]};
            uint32_t expected = (uint32_t)((posenc__turns(p, freq) + (UINT64_C(1) << 31)) >> 32);
            if (turns[j] != expected)
                REPORT("%s turns_fixed(%lld, count %u)[%u] = %u, expected %u\n", k->name,
                       (long long)p, count, j, turns[j], expected);
        }
        if (turns[count] != 0xa5a5a5a5u)
            REPORT("%s turns_fixed(count %u) wrote past its end\n", k->name, count);
    }
}

/* The GPT-J table as cpu_kernels.h lays it out (cos, cos, then -sin, sin per pair), for every
 * pair count up to 40, NaN and signed zeros included; nothing written past it. */
static void test_gptj_table(const posenc_cpu_kernels *k)
{
    enum { MAX = 40 };
    test_rng rng = {99};
    float sin_values[MAX], cos_values[MAX], table[4 * MAX + 1];
    for (uint32_t pairs = 0; pairs <= MAX; pairs++) {
        for (uint32_t j = 0; j < pairs; j++) {
            sin_values[j] = j % 7 == 3 ? -0.0f : (float)test_rng_uniform(&rng, -1.0, 1.0);
            cos_values[j] = j % 11 == 5 ? NAN : (float)test_rng_uniform(&rng, -1.0, 1.0);
        }
        for (uint32_t j = 0; j <= 4 * MAX; j++)
            table[j] = 1234.5f;
        k->gptj_table(sin_values, cos_values, pairs, table);
        for (uint32_t j = 0; j < pairs; j++) {
            const float expected[4] = {cos_values[j], cos_values[j], -sin_values[j], sin_values[j]};
            const float got[4] = {table[2 * j], table[2 * j + 1], table[2 * pairs + 2 * j],
                                  table[2 * pairs + 2 * j + 1]};
            for (int e = 0; e < 4; e++)
                if (float_bits(got[e]) != float_bits(expected[e]))
                    REPORT("%s gptj_table(%u pairs): pair %u value %d = %a, expected %a\n",
                           k->name, pairs, j, e, (double)got[e], (double)expected[e]);
        }
        if (table[4 * pairs] != 1234.5f)
            REPORT("%s gptj_table(%u pairs) wrote past its end\n", k->name, pairs);
    }
}

/* A table value with 12 significant bits in [-1, 1]. */
static float short_value(test_rng *rng)
{
    return (float)((int32_t)(test_rng_u32(rng) % 4097) - 2048) / 2048.0f;
}

/* A 16-bit value: mostly ordinary ones of either sign over a wide range of exponents (none so
 * small that a product with a table value would be subnormal in f32), and NaNs of any
 * payload, infinities, the largest finite values and zeros. */
static uint16_t sixteen_bit_value(test_rng *rng, posenc_dtype dtype)
{
    bool f16 = dtype == POSENC_DTYPE_F16;
    uint32_t r = test_rng_u32(rng);
    uint32_t sign = r >> 31 << 15, bits = f16 ? 10 : 7, top = f16 ? 0x1f : 0xff;
    uint32_t all = (1u << bits) - 1, mantissa = (r >> 8) & all, exponent;
    switch (r % 64) {
    case 0: return (uint16_t)(sign | top << bits | (mantissa ? mantissa : 1)); /* NaN */
    case 1: return (uint16_t)(sign | top << bits);
    case 2: return (uint16_t)(sign | (top - 1) << bits | all);
    case 3: return (uint16_t)sign;
    default:
        exponent = f16 ? 1 + (r >> 20) % 30 : 100 + (r >> 20) % 55;
        return (uint16_t)(sign | exponent << bits | mantissa);
    }
}

/* `pairs` random short sin and cos values and the kernels' table of them for `style`. */
static void random_rope_table(const posenc_cpu_kernels *k, posenc_rope_style style,
                              uint32_t pairs, test_rng *rng, float *sin_values, float *cos_values,
                              float *table)
{
    for (uint32_t j = 0; j < pairs; j++) {
        sin_values[j] = short_value(rng);
        cos_values[j] = short_value(rng);
    }
    if (style == POSENC_ROPE_NEOX) {
        memcpy(table, cos_values, pairs * sizeof(float));
        memcpy(table + pairs, sin_values, pairs * sizeof(float));
    } else {
        k->gptj_table(sin_values, cos_values, pairs, table);
    }
}

/* The 16-bit RoPE kernels bit for bit as the f32 kernel followed by core/half.c's rounding, in
 * both styles and at every table size the variants treat apart (held in registers or not, a
 * partial vector), three heads out of place with pass-through dims. Table values have 12
 * significant bits and the inputs at most 11: every product is exact, so a rotated value is the
 * exact rotation rounded once in any order or fusion a variant computes it. NaN inputs are
 * checked bit for bit in NeoX, whose f32 and 16-bit kernels compute the same operations in the
 * same order; in GPT-J, whose 16-bit and f32 kernels order them apart, a NaN must stay NaN. */
static void test_rope_heads_16bit(const posenc_cpu_kernels *k)
{
    enum { HEADS = 3, MAX_ROT = 128, PAD = 8, MAX_DIM = MAX_ROT + PAD };
    static const uint32_t rotary_dims[] = {16, 24, 32, 48, 64, 96, 128};
    static uint16_t in[HEADS * MAX_DIM], out[HEADS * MAX_DIM + 1];
    static float in32[HEADS * MAX_DIM], out32[HEADS * MAX_DIM];
    float sin_values[MAX_ROT / 2], cos_values[MAX_ROT / 2], table[2 * MAX_ROT];
    test_rng rng = {4242};
    const posenc_dtype dtypes[2] = {POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    const posenc_rope_style styles[2] = {POSENC_ROPE_NEOX, POSENC_ROPE_GPTJ};
    for (int d = 0; d < 2; d++) {
        for (int st = 0; st < 2; st++) {
            for (size_t r = 0; r < sizeof rotary_dims / sizeof rotary_dims[0]; r++) {
                posenc_dtype dtype = dtypes[d];
                posenc_rope_style style = styles[st];
                uint32_t rot = rotary_dims[r], pairs = rot / 2, dim = rot + PAD;
                random_rope_table(k, style, pairs, &rng, sin_values, cos_values, table);
                for (uint32_t i = 0; i < HEADS * dim; i++) {
                    in[i] = sixteen_bit_value(&rng, dtype);
                    in32[i] = dtype == POSENC_DTYPE_F16 ? posenc__f16_to_f32(in[i])
                                                        : posenc__bf16_to_f32(in[i]);
                }
                memset(out, 0xa5, sizeof out);
                posenc_cpu_rope_heads args = {
                    .table = table,
                    .pair_cos = cos_values,
                    .pair_sin = sin_values,
                    .in = (const uint8_t *)in,
                    .out = (uint8_t *)out,
                    .in_head_stride = dim * 2,
                    .out_head_stride = dim * 2,
                    .heads = HEADS,
                    .rotary_dim = rot,
                    .head_dim = dim,
                    .dtype = dtype,
                    .style = style,
                    .copy_rest = true,
                };
                k->rope_heads(&args);
                args.in = (const uint8_t *)in32;
                args.out = (uint8_t *)out32;
                args.in_head_stride = args.out_head_stride = dim * 4;
                args.dtype = POSENC_DTYPE_F32;
                k->rope_heads(&args);
                for (uint32_t i = 0; i < HEADS * dim; i++) {
                    bool rotated = i % dim < rot;
                    uint16_t expected = !rotated ? in[i]
                                        : dtype == POSENC_DTYPE_F16 ? posenc__f32_to_f16(out32[i])
                                                                    : posenc__f32_to_bf16(out32[i]);
                    bool nan = isnan(out32[i]);
                    bool ok = out[i] == expected;
                    if (rotated && nan && style == POSENC_ROPE_GPTJ)
                        ok = isnan(dtype == POSENC_DTYPE_F16 ? posenc__f16_to_f32(out[i])
                                                             : posenc__bf16_to_f32(out[i]));
                    if (!ok)
                        REPORT("%s %s %s rope_heads, rotary_dim %u: element %u of head %u is "
                               "0x%04x, expected 0x%04x\n",
                               k->name, posenc_dtype_name(dtype),
                               style == POSENC_ROPE_NEOX ? "NeoX" : "GPT-J", rot, i % dim,
                               i / dim, out[i], expected);
                }
                if (out[HEADS * dim] != 0xa5a5)
                    REPORT("%s %s rope_heads wrote past its heads\n", k->name,
                           posenc_dtype_name(dtype));
            }
        }
    }
}

/* The kernels on tensors in cache (a decode step: tables too large for the registers held a
 * chunk at a time, cpu_simd_rope_held.h) bit for bit as on streaming tensors (the table read
 * from memory for every vector), NaNs included: every dtype and style, tables of whole chunks
 * and of a partial last chunk (an odd one for GPT-J), five heads out of place with
 * pass-through dims and in place. */
static void test_rope_heads_cached(const posenc_cpu_kernels *k)
{
    enum { HEADS = 5, MAX_ROT = 256, PAD = 6, MAX_DIM = MAX_ROT + PAD, MAX_BYTES = 4 * MAX_DIM };
    static const uint32_t rotary_dims[] = {16, 40, 48, 64, 80, 96, 112, 128, 144, 200, 256};
    static uint8_t in[HEADS * MAX_BYTES], cached[HEADS * MAX_BYTES + 4],
        streamed[HEADS * MAX_BYTES + 4];
    float sin_values[MAX_ROT / 2], cos_values[MAX_ROT / 2], table[2 * MAX_ROT];
    test_rng rng = {777};
    const posenc_dtype dtypes[3] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    for (int d = 0; d < 3; d++) {
        for (int st = 0; st < 2; st++) {
            for (size_t r = 0; r < sizeof rotary_dims / sizeof rotary_dims[0]; r++) {
                const posenc_dtype dtype = dtypes[d];
                const posenc_rope_style style = st ? POSENC_ROPE_GPTJ : POSENC_ROPE_NEOX;
                const uint32_t rot = rotary_dims[r], pairs = rot / 2, dim = rot + PAD;
                const size_t es = posenc_dtype_size(dtype), bytes = HEADS * dim * es;
                random_rope_table(k, style, pairs, &rng, sin_values, cos_values, table);
                for (size_t i = 0; i < HEADS * dim; i++) {
                    if (es == 2) {
                        uint16_t h = sixteen_bit_value(&rng, dtype);
                        memcpy(in + 2 * i, &h, 2);
                    } else {
                        uint16_t h = sixteen_bit_value(&rng, POSENC_DTYPE_BF16);
                        uint32_t u = (uint32_t)h << 16 | (test_rng_u32(&rng) & 0xffff);
                        memcpy(in + 4 * i, &u, 4);
                    }
                }
                for (int in_place = 0; in_place < 2; in_place++) {
                    uint8_t *outs[2] = {cached, streamed};
                    for (int streaming = 0; streaming < 2; streaming++) {
                        uint8_t *out = outs[streaming];
                        memset(out, 0xa5, sizeof cached);
                        if (in_place)
                            memcpy(out, in, bytes);
                        posenc_cpu_rope_heads args = {
                            .table = table,
                            .pair_cos = cos_values,
                            .pair_sin = sin_values,
                            .in = in_place ? out : in,
                            .out = out,
                            .in_head_stride = (int64_t)(dim * es),
                            .out_head_stride = (int64_t)(dim * es),
                            .heads = HEADS,
                            .rotary_dim = rot,
                            .head_dim = dim,
                            .dtype = dtype,
                            .style = style,
                            .copy_rest = !in_place,
                            .streaming = streaming,
                        };
                        k->rope_heads(&args);
                    }
                    for (size_t i = 0; i < bytes + 4; i++) {
                        if (cached[i] != streamed[i]) {
                            REPORT("%s %s %s rope_heads, rotary_dim %u, %s: byte %zu differs "
                                   "in cache (0x%02x) and streaming (0x%02x)\n",
                                   k->name, posenc_dtype_name(dtype),
                                   style == POSENC_ROPE_NEOX ? "NeoX" : "GPT-J", rot,
                                   in_place ? "in place" : "out of place", i, cached[i],
                                   streamed[i]);
                            break;
                        }
                    }
                }
            }
        }
    }
}

/* Floats around every value and every rounding midpoint of a 16-bit type, the specials, and
 * random bit patterns. */
static size_t conversion_inputs(posenc_dtype dtype, float *inputs, size_t capacity)
{
    size_t n = 0;
    test_rng rng = {7};
    for (uint32_t h = 0; h < 65536 && n + 8 <= capacity; h++) {
        uint32_t u = dtype == POSENC_DTYPE_F16 ? float_bits(posenc__f16_to_f32((uint16_t)h))
                                               : (uint32_t)h << 16;
        if ((u & 0x7f800000u) == 0x7f800000u)
            continue;
        uint32_t next = dtype == POSENC_DTYPE_F16
                            ? float_bits(posenc__f16_to_f32((uint16_t)(h + 1)))
                            : (u + 0x10000u);
        uint32_t mid = u + (next - u) / 2; /* same sign: the midpoint's bits */
        const uint32_t around[8] = {u, u + 1, u - 1, mid, mid + 1, mid - 1, next - 1, u + 2};
        for (int i = 0; i < 8; i++)
            inputs[n++] = bits_float(around[i]);
    }
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
        0x7f800001u, 0xff800001u, 0x7fc12345u, 0x7fbfffffu, 0xffffffffu, 0x00000001u,
        0x80000001u, 0x007fffffu, 0x807fffffu, 0x00800000u, 0x7f7fffffu, 0xff7fffffu,
        0x477fefffu, 0x477ff000u, 0x477ff001u, 0x38800000u, 0x387fffffu, 0x33800000u,
        0x33000000u, 0x33000001u, 0x32ffffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x3f808000u,
    };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0] && n < capacity; i++)
        inputs[n++] = bits_float(specials[i]);
    while (n < capacity)
        inputs[n++] = bits_float(test_rng_u32(&rng));
    return n;
}

static void test_conversions(const posenc_cpu_kernels *k)
{
    static uint16_t halves[65536], converted[65536 * 9 + 64];
    static float floats[65536 * 9 + 64];
    const posenc_dtype dtypes[2] = {POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        posenc_dtype dtype = dtypes[d];
        const char *name = posenc_dtype_name(dtype);
        /* Every 16-bit pattern to f32. */
        for (uint32_t h = 0; h < 65536; h++)
            halves[h] = (uint16_t)h;
        k->to_f32(dtype, halves, 65536, floats);
        for (uint32_t h = 0; h < 65536; h++) {
            float expected = dtype == POSENC_DTYPE_F16 ? posenc__f16_to_f32((uint16_t)h)
                                                       : posenc__bf16_to_f32((uint16_t)h);
            if (float_bits(floats[h]) != float_bits(expected))
                REPORT("%s: %s to_f32(0x%04x) = 0x%08x, expected 0x%08x\n", k->name, name, h,
                       float_bits(floats[h]), float_bits(expected));
        }
        /* f32 to the 16-bit type, at the rounding boundaries. */
        size_t n = conversion_inputs(dtype, floats, sizeof floats / sizeof floats[0]);
        k->from_f32(dtype, floats, n, converted);
        for (size_t i = 0; i < n; i++) {
            uint16_t expected = dtype == POSENC_DTYPE_F16 ? posenc__f32_to_f16(floats[i])
                                                          : posenc__f32_to_bf16(floats[i]);
            if (converted[i] != expected)
                REPORT("%s: %s from_f32(0x%08x) = 0x%04x, expected 0x%04x\n", k->name, name,
                       float_bits(floats[i]), converted[i], expected);
        }
        /* Every tail length at an odd address: only the elements asked for are written. */
        for (size_t count = 0; count <= 40; count++) {
            uint16_t out[48];
            memset(out, 0xa5, sizeof out);
            k->from_f32(dtype, floats + 1, count, out + 1);
            for (size_t i = 0; i < 48; i++) {
                uint16_t expected =
                    i >= 1 && i <= count
                        ? (dtype == POSENC_DTYPE_F16 ? posenc__f32_to_f16(floats[i])
                                                     : posenc__f32_to_bf16(floats[i]))
                        : 0xa5a5;
                if (out[i] != expected)
                    REPORT("%s: %s from_f32 of %zu at +1: element %zu is 0x%04x, expected "
                           "0x%04x\n",
                           k->name, name, count, i, out[i], expected);
            }
            float back[48];
            memset(back, 0, sizeof back);
            k->to_f32(dtype, out + 1, count, back + 1);
            for (size_t i = 1; i <= count; i++) {
                float expected = dtype == POSENC_DTYPE_F16 ? posenc__f16_to_f32(out[i])
                                                           : posenc__bf16_to_f32(out[i]);
                if (float_bits(back[i]) != float_bits(expected))
                    REPORT("%s: %s to_f32 of %zu at +1: element %zu wrong\n", k->name, name,
                           count, i);
            }
            CHECK(float_bits(back[0]) == 0 && float_bits(back[count + 1]) == 0);
        }
    }
}

/* The copy between arrays: every length up to past four vectors of four steps, at every
 * alignment of both ends, writes exactly the bytes asked for. */
static void test_copy(const posenc_cpu_kernels *k)
{
    enum { MOST = 4 * 4 * 64 + 70, ROOM = MOST + 16 };
    static uint8_t in[ROOM], out[ROOM];
    for (size_t i = 0; i < ROOM; i++)
        in[i] = (uint8_t)(i * 37 + 11);
    int wrong = 0;
    for (size_t bytes = 0; bytes <= MOST; bytes += bytes < 80 ? 1 : 7)
        for (size_t from = 0; from < 4; from++)
            for (size_t to = 0; to < 4; to++) {
                memset(out, 0xa5, sizeof out);
                k->copy(in + from, out + to, bytes);
                for (size_t i = 0; i < ROOM; i++) {
                    uint8_t expected = i >= to && i < to + bytes ? in[from + i - to] : 0xa5;
                    if (out[i] != expected && wrong++ < 4)
                        REPORT("%s: copy of %zu bytes from +%zu to +%zu: byte %zu wrong\n",
                               k->name, bytes, from, to, i);
                }
            }
}

/* sin/cos over a sweep of turns (every quadrant, the octant edges where the remainder is
 * largest), against double precision. Every remainder was checked once exhaustively; this keeps
 * a sample of 2^20 plus the edges. */
static void test_sincos(const posenc_cpu_kernels *k)
{
    enum { N = 1 << 20, EDGES = 4 * 4 * 64 };
    uint32_t *turns = malloc((N + EDGES) * sizeof *turns);
    float *s = malloc((N + EDGES) * sizeof *s), *c = malloc((N + EDGES) * sizeof *c);
    if (!turns || !s || !c) {
        CHECK(!"out of memory");
        free(turns);
        free(s);
        free(c);
        return;
    }
    size_t n = 0;
    for (uint32_t i = 0; i < N; i++)
        turns[n++] = i * 0x9e3779b1u + 12345u;
    for (uint32_t q = 0; q < 4; q++)
        for (int e = 0; e < 4; e++) /* edges at q/4 turn + e/8 turn - 1/8 turn */
            for (int32_t d = -32; d < 32; d++)
                turns[n++] = q * (1u << 30) + (uint32_t)e * (1u << 29) - (1u << 29) + (uint32_t)d;
    k->sincos(turns, n, 1.0f, 1.0f, s, c);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double angle = (double)turns[i] * (6.283185307179586476925287 / 4294967296.0);
        double es = fabs(s[i] - sin(angle)) / REF_UNIT, ec = fabs(c[i] - cos(angle)) / REF_UNIT;
        double e = es > ec ? es : ec;
        worst = e > worst ? e : worst;
        if (!(e <= SINCOS_UNITS))
            REPORT("%s: sincos(0x%08x turns) = (%.9g, %.9g): error %.3g units\n", k->name,
                   turns[i], s[i], c[i], e);
    }
    /* Scales apply to sin and cos separately; a tail shorter than a vector writes only itself. */
    float s2[8], c2[8];
    memset(s2, 0, sizeof s2);
    memset(c2, 0, sizeof c2);
    k->sincos(turns, 5, -2.0f, 0.5f, s2, c2);
    for (int i = 0; i < 5; i++)
        CHECK(s2[i] == -2.0f * s[i] && c2[i] == 0.5f * c[i]);
    CHECK(s2[5] == 0.0f && c2[5] == 0.0f);
    printf("    %-11s sincos: worst %.3f x 2^-24 over %zu angles (bound %.2f)\n", k->name, worst,
           n, SINCOS_UNITS);

    /* Angle addition of two exact values stays within the bound the tables rely on. */
    float *sb = malloc(n * sizeof *sb), *cb = malloc(n * sizeof *cb);
    float *so = malloc(n * sizeof *so), *co = malloc(n * sizeof *co);
    uint32_t *other = malloc(n * sizeof *other);
    if (sb && cb && so && co && other) {
        for (size_t i = 0; i < n; i++)
            other[i] = turns[(i * 7919) % n] ^ 0x5a5a5a5au;
        k->sincos(other, n, 1.0f, 1.0f, sb, cb);
        k->rotate(s, c, sb, cb, n, so, co);
        worst = 0.0;
        for (size_t i = 0; i < n; i++) {
            double angle = (double)(uint32_t)(turns[i] + other[i]) *
                           (6.283185307179586476925287 / 4294967296.0);
            double e = fmax(fabs(so[i] - sin(angle)), fabs(co[i] - cos(angle))) / REF_UNIT;
            worst = e > worst ? e : worst;
            if (!(e <= ROTATE_UNITS))
                REPORT("%s: rotate: error %.3g units\n", k->name, e);
        }
        printf("    %-11s rotate: worst %.3f x 2^-24 (bound %.2f)\n", k->name, worst,
               ROTATE_UNITS);
    } else {
        CHECK(!"out of memory");
    }
    free(sb);
    free(cb);
    free(so);
    free(co);
    free(other);
    free(turns);
    free(s);
    free(c);
}

/* ---- RoPE through the API ---- */

typedef struct rope_shape {
    posenc_dtype dtype;
    posenc_rope_style style;
    int64_t tokens, q_heads, k_heads;
    uint32_t head_dim, rotary_dim;
    uint32_t inner_step;  /* elements between consecutive dims: 1 packed, 2 strided */
    uint32_t head_pad;    /* extra elements after each head */
    uint32_t offset;      /* elements before the first: misaligned views */
    bool out_of_place;
    bool positions;       /* i32 positions of every magnitude; else position_offset */
    int32_t position_offset;
} rope_shape;

typedef struct strided {
    int64_t inner, head, token; /* element strides */
    size_t bytes;
} strided;

static strided rope_layout(const rope_shape *r, int64_t heads)
{
    strided s;
    s.inner = r->inner_step;
    s.head = (int64_t)r->head_dim * r->inner_step + r->head_pad;
    s.token = heads * s.head + 3;
    s.bytes = ((size_t)(r->offset + r->tokens * s.token) + 8) * posenc_dtype_size(r->dtype);
    return s;
}

static posenc_tensor rope_tensor(void *memory, const rope_shape *r, int64_t heads,
                                 const strided *s)
{
    size_t e = posenc_dtype_size(r->dtype);
    posenc_tensor t = {.host = memory,
                       .offset = r->offset * e,
                       .dtype = r->dtype,
                       .ndim = 3,
                       .shape = {r->tokens, heads, r->head_dim},
                       .strides = {s->token * (int64_t)e, s->head * (int64_t)e,
                                   s->inner * (int64_t)e}};
    return t;
}

/* Checks one tensor of a RoPE call: rotated dims against the reference, passed-through dims and
 * every byte outside the view exactly. */
static void check_rope_tensor(const char *what, const rope_shape *r, int64_t heads,
                              const strided *s, const unsigned char *before,
                              const unsigned char *in_after, const unsigned char *out_after,
                              const double *inv_freq, const int32_t *positions, ref_stats *stats)
{
    size_t e = posenc_dtype_size(r->dtype);
    bool *inside = calloc(s->bytes, 1);
    double x[520], ref[520], norm[520];
    uint32_t rot = r->rotary_dim ? r->rotary_dim : r->head_dim;
    for (int64_t t = 0; t < r->tokens && inside; t++) {
        double position = r->positions ? positions[t] : (double)r->position_offset + t;
        for (int64_t h = 0; h < heads; h++) {
            size_t at[520];
            for (uint32_t d = 0; d < r->head_dim; d++) {
                at[d] = (size_t)(r->offset + t * s->token + h * s->head + d * s->inner) * e;
                x[d] = ref_load(r->dtype, before + at[d]);
            }
            ref_rope_head(x, ref, r->head_dim, rot, r->style, inv_freq, position, 1.0, false);
            for (uint32_t j = 0; j < rot / 2; j++) {
                uint32_t ia, ib;
                ref_rope_pair(r->style, rot, j, &ia, &ib);
                norm[ia] = norm[ib] = hypot(ref[ia], ref[ib]);
            }
            for (uint32_t d = 0; d < r->head_dim; d++) {
                for (size_t b = 0; b < e; b++)
                    inside[at[d] + b] = true;
                bool ok = d < rot ? ref_check(stats, r->dtype, ref_load(r->dtype, out_after + at[d]),
                                              ref[d], norm[d], 0.0)
                                  : memcmp(out_after + at[d], before + at[d], e) == 0;
                if (!ok)
                    REPORT("rope %s %s %s dim %u/%u rot %u tokens %lld heads %lld: [%lld,%lld,%u]"
                           " = %.9g, expected %.9g\n",
                           what, posenc_dtype_name(r->dtype), r->style ? "gptj" : "neox",
                           r->head_dim, r->inner_step, rot, (long long)r->tokens,
                           (long long)heads, (long long)t, (long long)h, d,
                           ref_load(r->dtype, out_after + at[d]), ref[d]);
            }
        }
    }
    if (!inside) {
        CHECK(!"out of memory");
        return;
    }
    for (size_t b = 0; b < s->bytes; b++) {
        if (!inside[b] && out_after[b] != before[b]) {
            REPORT("rope %s: byte %zu outside the view changed\n", what, b);
            break;
        }
    }
    if (in_after != out_after && memcmp(in_after, before, s->bytes) != 0)
        REPORT("rope %s: the input changed in an out-of-place call\n", what);
    free(inside);
}

static void fill_values(unsigned char *bytes, size_t size, posenc_dtype dtype, test_rng *rng)
{
    size_t e = posenc_dtype_size(dtype);
    for (size_t i = 0; i + e <= size; i += e)
        ref_store(dtype, bytes + i, test_rng_uniform(rng, -1.0, 1.0));
}

static void run_rope(posenc_context *context, const rope_shape *r, ref_stats *stats)
{
    test_rng rng = {(uint64_t)(r->head_dim * 131 + r->tokens * 7 + r->q_heads)};
    strided qs = rope_layout(r, r->q_heads), ks = rope_layout(r, r->k_heads ? r->k_heads : 1);
    unsigned char *q = malloc(qs.bytes), *k = malloc(ks.bytes);
    unsigned char *q_before = malloc(qs.bytes), *k_before = malloc(ks.bytes);
    unsigned char *q_out = malloc(qs.bytes), *k_out = malloc(ks.bytes);
    int32_t *positions = malloc((size_t)r->tokens * sizeof *positions);
    if (!q || !k || !q_before || !k_before || !q_out || !k_out || !positions) {
        CHECK(!"out of memory");
        goto done;
    }
    fill_values(q, qs.bytes, r->dtype, &rng);
    fill_values(k, ks.bytes, r->dtype, &rng);
    memcpy(q_before, q, qs.bytes);
    memcpy(k_before, k, ks.bytes);
    memcpy(q_out, q, qs.bytes); /* bytes outside the output view must keep these values */
    memcpy(k_out, k, ks.bytes);
    for (int64_t t = 0; t < r->tokens; t++) {
        uint32_t u = test_rng_u32(&rng);
        positions[t] = t % 3 == 0 ? (int32_t)u : t % 3 == 1 ? (int32_t)(u >> 12) : -(int32_t)(u >> 20);
    }
    posenc_rope_desc desc = {
        .q = rope_tensor(q, r, r->q_heads, &qs),
        .rotary_dim = r->rotary_dim,
        .style = r->style,
        .theta = 10000.0,
        .position_offset = r->positions ? 0 : r->position_offset,
    };
    if (r->k_heads)
        desc.k = rope_tensor(k, r, r->k_heads, &ks);
    if (r->out_of_place) {
        desc.q_out = rope_tensor(q_out, r, r->q_heads, &qs);
        if (r->k_heads)
            desc.k_out = rope_tensor(k_out, r, r->k_heads, &ks);
    }
    if (r->positions) {
        int64_t shape[1] = {r->tokens};
        desc.positions = posenc_tensor_of_host(positions, POSENC_DTYPE_I32, 1, shape);
    }
    posenc_status status = posenc_rope(context, &desc);
    if (status != POSENC_OK) {
        REPORT("posenc_rope: %s: %s\n", posenc_status_name(status),
               posenc_context_last_error(context));
        goto done;
    }
    double inv_freq[260];
    uint32_t rot = r->rotary_dim ? r->rotary_dim : r->head_dim;
    ref_rope_frequencies(&desc, rot, inv_freq);
    check_rope_tensor("q", r, r->q_heads, &qs, q_before, q, r->out_of_place ? q_out : q, inv_freq,
                      positions, stats);
    if (r->k_heads)
        check_rope_tensor("k", r, r->k_heads, &ks, k_before, k, r->out_of_place ? k_out : k,
                          inv_freq, positions, stats);
done:
    free(q);
    free(k);
    free(q_before);
    free(k_before);
    free(q_out);
    free(k_out);
    free(positions);
}

static void test_rope_shapes(posenc_context *context, const char *variant)
{
    static const uint32_t head_dims[] = {2, 4, 6, 10, 18, 34, 50, 66, 98, 130, 258};
    static const posenc_dtype dtypes[] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    ref_stats stats = {0};
    unsigned runs = 0;
    for (size_t d = 0; d < sizeof head_dims / sizeof head_dims[0]; d++) {
        uint32_t hd = head_dims[d];
        /* rotary_dim: all of it, two less, and a small even part */
        const uint32_t rotary[3] = {0, hd > 2 ? hd - 2 : 0, hd >= 8 ? (hd / 3) & ~1u : 0};
        for (int ri = 0; ri < 3; ri++) {
            if (ri && !rotary[ri])
                continue;
            for (size_t t = 0; t < 3; t++) {
                for (int style = 0; style < 2; style++) {
                    unsigned variation = (unsigned)(d * 7 + ri * 3 + t + style);
                    rope_shape r = {
                        .dtype = dtypes[variation % 3],
                        .style = (posenc_rope_style)style,
                        .tokens = variation % 4 == 0 ? 1 : 3 + (int64_t)(variation % 5),
                        .q_heads = variation % 3 == 0 ? 1 : 3,
                        .k_heads = variation % 2 ? 0 : 1 + (int64_t)(variation % 2),
                        .head_dim = hd,
                        .rotary_dim = rotary[ri],
                        .inner_step = t == 2 ? 2 : 1,
                        .head_pad = t == 1 ? 5 : 0,
                        .offset = t == 1 ? 1 : 0,
                        .out_of_place = variation % 5 == 1 || variation % 5 == 3,
                        .positions = variation % 2 == 0,
                        .position_offset = variation % 3 == 1 ? INT32_MAX - 16 : -5,
                    };
                    run_rope(context, &r, &stats);
                    runs++;
                }
            }
        }
    }
    /* Every table size the kernels may keep in registers (rotary_dim a multiple of 16 up to
     * 256), in each dtype and style, packed and with a padded head stride. */
    for (uint32_t rot = 16; rot <= 256; rot += 16) {
        for (int v = 0; v < 6; v++) {
            rope_shape r = {
                .dtype = dtypes[v % 3],
                .style = (posenc_rope_style)(v / 3),
                .tokens = 3,
                .q_heads = 3,
                .k_heads = 2,
                .head_dim = rot + (rot % 32 ? 2 : 0),
                .rotary_dim = rot,
                .inner_step = 1,
                .head_pad = rot % 64 ? 0 : 16,
                .out_of_place = rot % 48 == 0,
                .position_offset = 1000,
            };
            run_rope(context, &r, &stats);
            runs++;
        }
    }
    printf("    %-11s rope: %u shapes, worst f32 error %.2f x 2^-24 |pair|, worst %.3f of "
           "tolerance\n",
           variant, runs, stats.max_units, stats.max_ratio);
}

/* ---- sinusoidal through the API ---- */

typedef struct table_shape {
    posenc_dtype dtype;
    posenc_sinusoidal_layout layout;
    int64_t batch, rows;
    uint32_t d_model;
    int32_t position_offset;
    bool add;          /* out = x * input_scale + output_scale * PE */
    bool in_place;     /* add mode with x == out */
    uint32_t inner_step;
    double output_scale, input_scale;
} table_shape;

static void run_table(posenc_context *context, const table_shape *ts, ref_stats *stats)
{
    test_rng rng = {(uint64_t)(ts->rows * 31 + ts->d_model)};
    size_t e = posenc_dtype_size(ts->dtype);
    int64_t inner = ts->inner_step, row = (int64_t)ts->d_model * inner + 1,
            batch_stride = ts->rows * row + 2;
    size_t bytes = (size_t)(ts->batch * batch_stride + 4) * e;
    unsigned char *out = malloc(bytes), *x = malloc(bytes), *before = malloc(bytes);
    double *pe = malloc(ts->d_model * sizeof *pe), *freq = malloc(ts->d_model * sizeof *freq);
    if (!out || !x || !before || !pe || !freq) {
        CHECK(!"out of memory");
        goto done;
    }
    fill_values(out, bytes, ts->dtype, &rng);
    fill_values(x, bytes, ts->dtype, &rng);
    if (ts->in_place)
        memcpy(x, out, bytes);
    memcpy(before, out, bytes);
    posenc_tensor out_tensor = {.host = out,
                                .offset = e,
                                .dtype = ts->dtype,
                                .ndim = 3,
                                .shape = {ts->batch, ts->rows, ts->d_model},
                                .strides = {batch_stride * (int64_t)e, row * (int64_t)e,
                                            inner * (int64_t)e}};
    posenc_sinusoidal_desc desc = {
        .out = out_tensor,
        .layout = ts->layout,
        .position_offset = ts->position_offset,
        .output_scale = ts->output_scale,
        .input_scale = ts->input_scale,
    };
    if (ts->add) {
        desc.x = out_tensor;
        if (!ts->in_place)
            desc.x.host = x;
    }
    posenc_status status = posenc_sinusoidal(context, &desc);
    if (status != POSENC_OK) {
        REPORT("posenc_sinusoidal: %s: %s\n", posenc_status_name(status),
               posenc_context_last_error(context));
        goto done;
    }
    ref_sinusoidal_frequencies(&desc, ts->d_model, freq);
    double output_scale = ts->output_scale ? ts->output_scale : 1.0;
    double input_scale = ts->input_scale ? ts->input_scale : 1.0;
    bool *inside = calloc(bytes, 1);
    for (int64_t b = 0; b < ts->batch && inside; b++) {
        for (int64_t r = 0; r < ts->rows; r++) {
            ref_sinusoidal_row(freq, ts->d_model, ts->layout, (double)ts->position_offset + r, pe);
            for (uint32_t c = 0; c < ts->d_model; c++) {
                size_t at = (size_t)(1 + b * batch_stride + r * row + c * inner) * e;
                for (size_t i = 0; i < e; i++)
                    inside[at + i] = true;
                double got = ref_load(ts->dtype, out + at), ref = output_scale * pe[c], extra = 0;
                if (ts->add) {
                    double xs = ref_load(ts->dtype, (ts->in_place ? before : x) + at) * input_scale;
                    extra = 4.0 * REF_UNIT * (fabs(xs) + fabs(ref));
                    ref += xs;
                }
                if (!ref_check(stats, ts->dtype, got, ref, fabs(output_scale), extra))
                    REPORT("table %s %s d_model %u rows %lld offset %d%s: [%lld,%lld,%u] = %.9g, "
                           "expected %.9g\n",
                           posenc_dtype_name(ts->dtype),
                           ts->layout == 0 ? "interleaved" : ts->layout == 1 ? "sin|cos" : "cos|sin",
                           ts->d_model, (long long)ts->rows, ts->position_offset,
                           ts->add ? " add" : "", (long long)b, (long long)r, c, got, ref);
            }
        }
    }
    for (size_t i = 0; inside && i < bytes; i++) {
        if (!inside[i] && out[i] != before[i]) {
            REPORT("table: byte %zu outside the view changed\n", i);
            break;
        }
    }
    CHECK(inside != NULL);
    free(inside);
done:
    free(out);
    free(x);
    free(before);
    free(pe);
    free(freq);
}

static void test_tables(posenc_context *context, const char *variant)
{
    static const uint32_t widths[] = {1, 2, 3, 5, 17, 33, 64, 100, 320, 1030};
    static const int32_t offsets[] = {0, -100, 1000003, INT32_MAX - 200};
    ref_stats stats = {0};
    unsigned runs = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        for (int layout = 0; layout < 3; layout++) {
            unsigned v = (unsigned)(w * 3 + layout);
            table_shape ts = {
                .dtype = (posenc_dtype)(1 + v % 3),
                .layout = (posenc_sinusoidal_layout)layout,
                .batch = v % 4 == 0 ? 2 : 1,
                .rows = v % 2 ? 200 : 65 + (int64_t)(v % 7),
                .d_model = widths[w],
                .position_offset = offsets[v % 4],
                .add = v % 3 == 1,
                .in_place = v % 6 == 4,
                .inner_step = v % 5 == 2 ? 2 : 1,
                .output_scale = v % 4 == 3 ? -2.5 : 0.0,
                .input_scale = v % 3 == 1 ? 0.5 : 0.0,
            };
            run_table(context, &ts, &stats);
            runs++;
        }
    }
    printf("    %-11s sinusoidal: %u tables, worst f32 error %.2f x 2^-24, worst %.3f of "
           "tolerance\n",
           variant, runs, stats.max_units, stats.max_ratio);
}

/* ---- threads ---- */

/* The same calls on 1..7 threads give the same bits: work is split, never computed
 * differently. */
static void test_threads(posenc_cpu_variant variant)
{
    enum { TOKENS = 300, HEADS = 12, DIM = 96, ROWS = 1500, D_MODEL = 96 };
    size_t rope_floats = (size_t)TOKENS * HEADS * DIM, table_floats = (size_t)ROWS * D_MODEL;
    float *input = malloc(rope_floats * sizeof *input);
    float *first_rope = malloc(rope_floats * sizeof *first_rope);
    float *rope = malloc(rope_floats * sizeof *rope);
    float *first_table = malloc(table_floats * sizeof *first_table);
    float *table = malloc(table_floats * sizeof *table);
    if (!input || !first_rope || !rope || !first_table || !table) {
        CHECK(!"out of memory");
        goto done;
    }
    test_rng rng = {3};
    for (size_t i = 0; i < rope_floats; i++)
        input[i] = (float)test_rng_uniform(&rng, -1, 1);
    for (uint32_t threads = 1; threads <= 7; threads++) {
        posenc_context *context = variant_context(variant, threads);
        if (!context)
            continue;
        memcpy(rope, input, rope_floats * sizeof *rope);
        posenc_rope_desc r = {
            .q = posenc_tensor_of_host(rope, POSENC_DTYPE_F32, 3,
                                       (const int64_t[]){TOKENS, HEADS, DIM}),
            .position_offset = 77,
        };
        CHECK_OK(posenc_rope(context, &r));
        /* one token of many heads: split over heads */
        r.q = posenc_tensor_of_host(rope, POSENC_DTYPE_F32, 3,
                                    (const int64_t[]){1, TOKENS * HEADS, DIM});
        CHECK_OK(posenc_rope(context, &r));
        posenc_sinusoidal_desc s = {
            .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2,
                                         (const int64_t[]){ROWS, D_MODEL}),
            .position_offset = 1000,
        };
        CHECK_OK(posenc_sinusoidal(context, &s));
        if (threads == 1) {
            memcpy(first_rope, rope, rope_floats * sizeof *rope);
            memcpy(first_table, table, table_floats * sizeof *table);
        } else {
            if (memcmp(first_rope, rope, rope_floats * sizeof *rope) != 0)
                REPORT("rope on %u threads differs from 1 thread\n", threads);
            if (memcmp(first_table, table, table_floats * sizeof *table) != 0)
                REPORT("table on %u threads differs from 1 thread\n", threads);
        }
        posenc_context_destroy(context);
    }
done:
    free(input);
    free(first_rope);
    free(rope);
    free(first_table);
    free(table);
}

/* ---- f16 NaN outputs ---- */

static void test_f16_nans(posenc_context *context, const char *variant)
{
    enum { TOKENS = 3, HEADS = 3 };
    static const uint32_t dims[] = {16, 32, 64, 96, 128, 256};
    static const uint16_t payloads[] = {0x7d23, 0xfd55, 0x7c01, 0xfe7f};
    uint16_t data[TOKENS * HEADS * 256];
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        for (int style = 0; style < 2; style++) {
            const uint32_t dim = dims[d];
            const size_t count = (size_t)TOKENS * HEADS * dim;
            for (size_t i = 0; i < count; i++)
                data[i] = (uint16_t)(0x3800 + (i * 37) % 0x400); /* 0.5 .. 1 */
            /* One NaN in some heads, at a place that moves with the head. */
            for (size_t h = 0; h < TOKENS * HEADS; h += 2)
                data[h * dim + (h * 7) % dim] = payloads[h % 4];
            posenc_rope_desc r = {
                .q = posenc_tensor_of_host(data, POSENC_DTYPE_F16, 3,
                                           (const int64_t[]){TOKENS, HEADS, dim}),
                .style = (posenc_rope_style)style,
            };
            CHECK_OK(posenc_rope(context, &r));
            for (size_t i = 0; i < count; i++) {
                uint16_t h = data[i];
                bool nan = (h & 0x7fff) > 0x7c00;
                size_t head = i / dim;
                size_t at = head * 7 % dim; /* the head's NaN input */
                bool expected = head % 2 == 0 && (style == POSENC_ROPE_NEOX
                                                      ? i % (dim / 2) == at % (dim / 2)
                                                      : i % dim / 2 == at / 2);
                if (nan != expected || (nan && (h & 0x7fff) != 0x7e00))
                    REPORT("%s f16 NaN: dim %u style %d element %zu is 0x%04x\n", variant, dim,
                           style, i, h);
            }
        }
    }
}

/* ---- the benchmark's copies shaped like an operation ---- */

static void test_rooflines(posenc_cpu_variant variant)
{
    enum { TOKENS = 37, Q_HEADS = 5, K_HEADS = 3, DIM = 24, ROWS = 70, D_MODEL = 33 };
    /* q and k of one fused block, k's innermost dim strided (every other element). */
    const int64_t q_elements = TOKENS * Q_HEADS * DIM, k_elements = TOKENS * K_HEADS * DIM * 2;
    const size_t rope_bytes = (size_t)(q_elements + k_elements) * 2 + 64;
    const size_t table_bytes = (size_t)ROWS * (D_MODEL + 3) * 2;
    unsigned char *rope = malloc(rope_bytes), *before = malloc(rope_bytes);
    unsigned char *table = malloc(table_bytes);
    if (!rope || !before || !table) {
        CHECK(!"out of memory");
        goto done;
    }
    test_rng rng = {11};
    fill_values(rope, rope_bytes, POSENC_DTYPE_F16, &rng);
    memcpy(before, rope, rope_bytes);
    for (uint32_t threads = 1; threads <= 3; threads++) {
        posenc_context *context = variant_context(variant, threads);
        if (!context)
            continue;
        posenc_rope_desc r = {
            .q = posenc_tensor_of_host(rope, POSENC_DTYPE_F16, 3,
                                       (const int64_t[]){TOKENS, Q_HEADS, DIM}),
            .k = posenc_tensor_of_host(rope, POSENC_DTYPE_F16, 3,
                                       (const int64_t[]){TOKENS, K_HEADS, DIM}),
        };
        r.k.offset = (uint64_t)q_elements * 2;
        r.k.strides[0] = K_HEADS * DIM * 4;
        r.k.strides[1] = DIM * 4;
        r.k.strides[2] = 4;
        CHECK_OK(posenc_diagnostics_roofline_rope(context, &r));
        CHECK(memcmp(rope, before, rope_bytes) == 0);
        r.style = POSENC_ROPE_GPTJ;
        CHECK_OK(posenc_diagnostics_roofline_rope(context, &r));
        CHECK(memcmp(rope, before, rope_bytes) == 0);

        /* A failed copy is validated like the operation and leaves the next call a real one. */
        posenc_rope_desc bad = r;
        bad.rotary_dim = 3;
        CHECK_STATUS(posenc_diagnostics_roofline_rope(context, &bad), POSENC_INVALID_SHAPE);
        CHECK(strstr(posenc_context_last_error(context), "rotary_dim") != NULL);
        CHECK_OK(posenc_rope(context, &r));
        CHECK(memcmp(rope, before, rope_bytes) != 0);
        memcpy(rope, before, rope_bytes);

        /* A table, rows padded by 3 elements: every element written, the padding kept. */
        memset(table, 0xa5, table_bytes);
        posenc_sinusoidal_desc s = {
            .out = posenc_tensor_of_host(table, POSENC_DTYPE_F16, 2,
                                         (const int64_t[]){ROWS, D_MODEL}),
        };
        s.out.strides[0] = (D_MODEL + 3) * 2;
        CHECK_OK(posenc_diagnostics_roofline_sinusoidal(context, &s));
        for (size_t row = 0; row < ROWS; row++) {
            for (size_t e = 0; e < D_MODEL + 3; e++) {
                const unsigned char *p = table + (row * (D_MODEL + 3) + e) * 2;
                bool written = p[0] != 0xa5 || p[1] != 0xa5;
                if (written != (e < D_MODEL))
                    REPORT("table copy on %u threads: row %zu element %zu %s\n", threads, row,
                           e, written ? "written" : "not written");
            }
        }
        posenc_context_destroy(context);
    }
done:
    free(rope);
    free(before);
    free(table);
}

/* The 16-bit floor: every element widened and narrowed in place, each value back as it was
 * (NaNs as core/half.c writes them), on whole runs of heads and on heads one by one, with
 * partial vectors; anything else is refused with a message and left alone. */
static void test_conversion_floor(posenc_cpu_variant variant)
{
    enum { TOKENS = 37, Q_HEADS = 5, K_HEADS = 3, DIM = 26, PAD = 2 };
    /* q padded after each token's heads (not one run), k packed (one run). */
    const size_t q_count = TOKENS * (Q_HEADS * DIM + PAD), k_count = TOKENS * K_HEADS * DIM;
    const size_t count = q_count + k_count;
    uint16_t *data = malloc(count * 2), *expected = malloc(count * 2);
    if (!data || !expected) {
        CHECK(!"out of memory");
        goto done;
    }
    static const posenc_dtype dtypes[2] = {POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        posenc_dtype dtype = dtypes[d];
        bool f16 = dtype == POSENC_DTYPE_F16;
        test_rng rng = {29 + (uint64_t)d};
        for (size_t i = 0; i < count; i++)
            data[i] = (uint16_t)test_rng_u32(&rng);
        /* Every kind of value in the first vectors: NaNs with payloads, infinities, zeros,
         * subnormals. */
        const uint16_t special[] = {0x7d23, 0xfc01, 0x7c00, 0xfc00, 0x8000, 0x0000, 0x0001,
                                    0x83ff, 0x7f81, 0xffc1, 0x7f80, 0x0040};
        for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
            data[3 * i] = data[q_count + 5 * i] = special[i];
        for (size_t i = 0; i < count; i++) {
            bool pad = i < q_count && i % (Q_HEADS * DIM + PAD) >= Q_HEADS * DIM;
            expected[i] = pad  ? data[i]
                          : f16 ? posenc__f32_to_f16(posenc__f16_to_f32(data[i]))
                                : posenc__f32_to_bf16(posenc__bf16_to_f32(data[i]));
        }
        posenc_rope_desc r = {
            .q = posenc_tensor_of_host(data, dtype, 3, (const int64_t[]){TOKENS, Q_HEADS, DIM}),
            .k = posenc_tensor_of_host(data, dtype, 3, (const int64_t[]){TOKENS, K_HEADS, DIM}),
        };
        r.q.strides[0] = (Q_HEADS * DIM + PAD) * 2;
        r.k.offset = q_count * 2;
        for (uint32_t threads = 1; threads <= 3; threads += 2) {
            posenc_context *context = variant_context(variant, threads);
            if (!context)
                continue;
            uint16_t *before = malloc(count * 2);
            if (!before) {
                CHECK(!"out of memory");
                posenc_context_destroy(context);
                continue;
            }
            memcpy(before, data, count * 2);
            CHECK_OK(posenc_diagnostics_conversion_floor_rope(context, &r));
            for (size_t i = 0; i < count; i++)
                if (data[i] != expected[i])
                    REPORT("%s floor on %u threads: element %zu is 0x%04x, not 0x%04x\n",
                           posenc_dtype_name(dtype), threads, i, data[i], expected[i]);
            memcpy(data, before, count * 2);

            /* Refused, named and untouched: k strided, partial rotary dims, f32. */
            posenc_rope_desc k_strided = r;
            k_strided.k.shape[1] = 1; /* one head of every other element */
            k_strided.k.strides[1] = DIM * 4;
            k_strided.k.strides[2] = 4;
            CHECK_STATUS(posenc_diagnostics_conversion_floor_rope(context, &k_strided),
                         POSENC_UNSUPPORTED);
            CHECK_MESSAGE(posenc_context_last_error(context), "k");
            posenc_rope_desc partial = r;
            partial.rotary_dim = DIM - 2;
            CHECK_STATUS(posenc_diagnostics_conversion_floor_rope(context, &partial),
                         POSENC_UNSUPPORTED);
            CHECK_MESSAGE(posenc_context_last_error(context), "rotary_dim");
            CHECK(memcmp(data, before, count * 2) == 0);
            free(before);
            posenc_context_destroy(context);
        }
    }
    posenc_context *context = variant_context(variant, 1);
    if (context) {
        static float q32[2][4][8];
        posenc_rope_desc r32 = {
            .q = posenc_tensor_of_host(q32, POSENC_DTYPE_F32, 3, (const int64_t[]){2, 4, 8}),
        };
        CHECK_STATUS(posenc_diagnostics_conversion_floor_rope(context, &r32), POSENC_UNSUPPORTED);
        CHECK_MESSAGE(posenc_context_last_error(context), "q.dtype");
        posenc_context_destroy(context);
    }
done:
    free(data);
    free(expected);
}

/* ---- steady state ---- */

static void test_no_allocation(void)
{
#if defined(TEST_CPU_COUNT_ALLOCATIONS)
    posenc_context *context = variant_context(posenc_cpu_best_variant(), 0);
    if (!context)
        return;
    enum { TOKENS = 600 };
    static float q[TOKENS][32][128], k[TOKENS][8][128], table[1024][256];
    static const double inv_freq[64] = {0.5, 0.25, 0.125};
    for (int step = 0; step < 2; step++) {
        long before = allocations;
        for (int32_t pos = 0; pos < 50; pos++) {
            /* decode */
            posenc_rope_desc r = {
                .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, (const int64_t[]){1, 32, 128}),
                .k = posenc_tensor_of_host(k, POSENC_DTYPE_F32, 3, (const int64_t[]){1, 8, 128}),
                .theta = 500000.0,
                .position_offset = 4000 + pos,
            };
            CHECK_OK(posenc_rope(context, &r));
            /* caller frequencies, in a copy each time: compared by content */
            double copy[64];
            memcpy(copy, inv_freq, sizeof copy);
            r.theta = 0.0; /* replaced by them */
            r.inv_freq = copy;
            r.inv_freq_count = 64;
            CHECK_OK(posenc_rope(context, &r));
            /* prefill, on every thread */
            posenc_rope_desc p = {
                .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3,
                                           (const int64_t[]){TOKENS, 32, 128}),
                .k = posenc_tensor_of_host(k, POSENC_DTYPE_F32, 3,
                                           (const int64_t[]){TOKENS, 8, 128}),
                .theta = 500000.0,
                .position_offset = pos,
            };
            if (pos % 10 == 0)
                CHECK_OK(posenc_rope(context, &p));
            posenc_sinusoidal_desc s = {
                .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2,
                                             (const int64_t[]){1024, 256}),
                .position_offset = pos,
            };
            if (pos % 10 == 0)
                CHECK_OK(posenc_sinusoidal(context, &s));
        }
        long made = allocations - before;
        if (step == 1 && made != 0)
            REPORT("steady state: %ld allocations in 50 decode steps, 5 prefills and 5 tables\n",
                   made);
        if (step == 1)
            printf("  steady state: %ld allocations in 100 decode calls, 5 prefills, 5 tables\n",
                   made);
    }
    posenc_context_destroy(context);
#else
    printf("  steady-state allocation count: not available on this platform\n");
#endif
}

/* The frequency table is recomputed only when an input changes: by content, not pointer. */
static void test_frequency_cache(void)
{
    posenc_context *context = variant_context(posenc_cpu_best_variant(), 1);
    if (!context)
        return;
    float q[2][4][16], expected[2][4][16];
    double inv_freq[8] = {1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125};
    posenc_rope_desc r = {
        .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, (const int64_t[]){2, 4, 16}),
        .inv_freq = inv_freq,
        .inv_freq_count = 8,
        .position_offset = 10,
    };
    for (int i = 0; i < 2 * 4 * 16; i++)
        ((float *)q)[i] = (float)(i % 7) - 3.0f;
    memcpy(expected, q, sizeof q);
    CHECK_OK(posenc_rope(context, &r));
    uint64_t id = context->rope_freqs.id;
    CHECK(id != 0);
    double copy[8];
    memcpy(copy, inv_freq, sizeof copy);
    r.inv_freq = copy;
    CHECK_OK(posenc_rope(context, &r));
    CHECK(context->rope_freqs.id == id); /* same values elsewhere: kept */
    copy[5] = 0.03;
    CHECK_OK(posenc_rope(context, &r));
    CHECK(context->rope_freqs.id != id); /* one value changed in place: recomputed */
    id = context->rope_freqs.id;
    CHECK_OK(posenc_rope(context, &r));
    CHECK(context->rope_freqs.id == id); /* kept */
    r.theta = 1000.0;
    r.inv_freq = NULL;
    r.inv_freq_count = 0;
    CHECK_OK(posenc_rope(context, &r));
    CHECK(context->rope_freqs.id != id);
    id = context->rope_freqs.id;
    r.scaling.type = POSENC_ROPE_SCALING_LINEAR;
    r.scaling.factor = 2.0;
    CHECK_OK(posenc_rope(context, &r));
    CHECK(context->rope_freqs.id != id);
    /* A failed call (a bad entry) leaves no stale table behind. */
    copy[3] = -1.0;
    r.theta = 0.0; /* replaced by the caller's frequencies */
    r.inv_freq = copy;
    r.inv_freq_count = 8;
    r.scaling = (posenc_rope_scaling){0};
    memcpy(q, expected, sizeof q);
    CHECK_STATUS(posenc_rope(context, &r), POSENC_INVALID_ARGUMENT);
    CHECK_MESSAGE(posenc_context_last_error(context), "inv_freq[3]");
    CHECK(memcmp(q, expected, sizeof q) == 0);
    copy[3] = 0.125;
    copy[5] = 0.03125;
    CHECK_OK(posenc_rope(context, &r));
    /* the original frequencies again, so the same result as the first call */
    float first[2][4][16];
    memcpy(first, q, sizeof q);
    memcpy(q, expected, sizeof q);
    r.inv_freq = inv_freq;
    CHECK_OK(posenc_rope(context, &r));
    CHECK(memcmp(first, q, sizeof q) == 0);

    /* Sinusoidal tables keep their own. */
    float table[70][10];
    posenc_sinusoidal_desc s = {
        .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, (const int64_t[]){70, 10}),
    };
    CHECK_OK(posenc_sinusoidal(context, &s));
    uint64_t sid = context->sinusoidal_freqs.id;
    CHECK_OK(posenc_rope(context, &r));
    CHECK_OK(posenc_sinusoidal(context, &s));
    CHECK(context->sinusoidal_freqs.id == sid);
    s.base = 100.0;
    CHECK_OK(posenc_sinusoidal(context, &s));
    CHECK(context->sinusoidal_freqs.id != sid);
    posenc_context_destroy(context);
}

int main(void)
{
    printf("test_cpu: kernel variants\n");
    test_variant_choice();
    test_turns();
    for (int v = 0; v < POSENC_CPU_VARIANT_COUNT; v++) {
        const posenc_cpu_kernels *kernels = posenc_cpu_kernels_for((posenc_cpu_variant)v);
        if (!kernels)
            continue;
        printf("  %s (%u lanes)\n", kernels->name, kernels->lanes);
        test_conversions(kernels);
        test_copy(kernels);
        test_sincos(kernels);
        test_turns_int(kernels);
        test_turns_fixed(kernels);
        test_gptj_table(kernels);
        test_rope_heads_16bit(kernels);
        test_rope_heads_cached(kernels);
        posenc_context *context = variant_context((posenc_cpu_variant)v, 0);
        if (context) {
            test_rope_shapes(context, kernels->name);
            test_tables(context, kernels->name);
            test_f16_nans(context, kernels->name);
            posenc_context_destroy(context);
        }
        test_threads((posenc_cpu_variant)v);
        test_rooflines((posenc_cpu_variant)v);
        test_conversion_floor((posenc_cpu_variant)v);
    }
    test_no_allocation();
    test_frequency_cache();
    return test_finish("test_cpu");
}
