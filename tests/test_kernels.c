/* SPDX-License-Identifier: MIT */
/* The kernels embedded at build time and the angle code they mirror:
 * - the C angle steps (src/core/angle.c) against 128-bit integers and float64 sin/cos;
 * - every expected SPIR-V and OpenCL C variant is embedded and well formed (a path configured
 *   off is skipped);
 * - the sinusoidal kernels run on every OpenCL device (libOpenCL.so.1: sinusoidal.cl and
 *   sinusoidal_contiguous.cl) and every Vulkan device (libvulkan.so.1) present, in every dtype,
 *   layout, position kind and mode, and their outputs
 *   are compared with the C code element by element: bit for bit on OpenCL, within a few ulps
 *   on Vulkan (see compare_case); f32 tables are also held to the accuracy promise. Rows at the
 *   row index take sinusoidal_contiguous.cl's anchors and steps, which the C code here follows
 *   step by step too.
 * The runtimes are loaded with dlopen here; the library itself never links them. Where one is
 * absent its part says so and is not run (CI has PoCL and lavapipe, so everything runs there).
 */
#include "test_common.h"

#include "core/angle.h"
#include "core/half.h"
#include "core/kernels.h"
#include "posenc_kernel_params.h"
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The variants tested here, in the same order in both languages. */
static const posenc__spirv_id spirv_variants[] = {
    POSENC__SPIRV_SINUSOIDAL_F32, POSENC__SPIRV_SINUSOIDAL_F16, POSENC__SPIRV_SINUSOIDAL_BF16};
static const posenc__cl_id cl_variants[] = {POSENC__CL_SINUSOIDAL_F32, POSENC__CL_SINUSOIDAL_F16,
                                            POSENC__CL_SINUSOIDAL_BF16};
static const char *const variant_names[] = {"sinusoidal_f32", "sinusoidal_f16",
                                            "sinusoidal_bf16"};
/* OpenCL only: the kernel CPU-type devices run for contiguous columns, the same arguments and
 * the same results, in the same dtype order. */
static const posenc__cl_id cl_contiguous_variants[] = {POSENC__CL_SINUSOIDAL_CONTIGUOUS_F32,
                                                       POSENC__CL_SINUSOIDAL_CONTIGUOUS_F16,
                                                       POSENC__CL_SINUSOIDAL_CONTIGUOUS_BF16};
enum { VARIANT_COUNT = sizeof variant_names / sizeof variant_names[0] };
static const posenc_dtype variant_dtypes[VARIANT_COUNT] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16,
                                                           POSENC_DTYPE_BF16};

static uint32_t float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* a * b + c rounded once, as OpenCL's fma, without the C library's fmaf (MinGW's rounds
 * twice): the product is exact in double, the sum is rounded to odd (its error from Knuth's
 * two-sum), and a value rounded to odd with 29 bits to spare rounds to float as the exact
 * value would. */
static float fused_multiply_add(float a, float b, float c)
{
    double product = (double)a * (double)b, addend = c;
    double sum = product + addend;
    double product_part = sum - addend;
    double error = (product - product_part) + (addend - (sum - product_part));
    if (error != 0.0) {
        uint64_t bits;
        memcpy(&bits, &sum, sizeof bits);
        if ((error < 0.0) != (sum < 0.0))
            bits--; /* the exact value lies nearer zero than the sum */
        bits |= 1u;
        memcpy(&sum, &bits, sizeof bits);
    }
    return (float)sum;
}

/* ---------------------------------------------------------------------------------------------
 * The C angle steps
 */

static uint64_t rng_u64(test_rng *rng)
{
    uint64_t high = test_rng_u32(rng);
    return high << 32 | test_rng_u32(rng);
}

/* posenc__turns against the definition, ((P * F) >> 32) + ((P * I) << 32) mod 2^64, evaluated
 * with 128-bit integers. */
static void check_turns(void)
{
#if defined(__SIZEOF_INT128__)
    test_rng rng = {12345};
    unsigned mismatches = 0;
    for (int i = 0; i < 200000; i++) {
        int64_t position = (int64_t)rng_u64(&rng);
        if (i % 4 == 0) /* integer positions */
            position = posenc__position_from_i32((int32_t)test_rng_u32(&rng));
        posenc__freq freq = {.frac = rng_u64(&rng), .int_turns = test_rng_u32(&rng) >> (i % 32)};
        __int128 product = (__int128)position * (__int128)freq.frac;
        uint64_t expected = (uint64_t)(unsigned __int128)(product >> 32) +
                            (((uint64_t)position * freq.int_turns) << 32);
        if (posenc__turns(position, freq) != expected && mismatches++ < 5)
            fprintf(stderr, "posenc__turns(%lld, {%u, %llu}) wrong\n", (long long)position,
                    freq.int_turns, (unsigned long long)freq.frac);
    }
    CHECK(mismatches == 0);
#else
    printf("turns: no 128-bit integers on this compiler, skipped\n");
#endif
}

/* posenc__sincos_turns against float64 sin/cos of the same angle. The remainder is rounded to
 * 2^-33 turn (2^-30.3 rad), the conversion to radians is a float-float product, and each
 * polynomial is within about 1 ulp on [-pi/4, pi/4]: 2 units of 2^-24 bound the whole, well
 * inside the promise of 8 that the later steps (scaling, rounding to f16) draw on. */
#ifndef SINCOS_SAMPLES
#define SINCOS_SAMPLES 1000000
#endif
static void check_sincos_turns(void)
{
    test_rng rng = {777};
    double worst = 0;
    uint64_t worst_turns = 0;
    for (int i = 0; i < SINCOS_SAMPLES; i++) {
        uint64_t turns = rng_u64(&rng);
        uint64_t near = (uint64_t)(int64_t)(int32_t)test_rng_u32(&rng); /* within 2^-33 turn */
        if (i % 8 == 1) /* near a quadrant boundary, where the reduction switches */
            turns = ((uint64_t)test_rng_u32(&rng) << 62) + near;
        if (i % 8 == 2) /* near an octant boundary, the ends of the polynomial interval */
            turns = ((uint64_t)test_rng_u32(&rng) << 61) + near;
        float s, c;
        posenc__sincos_turns(turns, &s, &c);
        double angle = 6.283185307179586 * ((double)(int64_t)turns * 0x1p-64);
        double error = fmax(fabs(s - sin(angle)), fabs(c - cos(angle))) / REF_UNIT;
        if (!(error <= worst))
            worst = error, worst_turns = turns;
    }
    printf("sincos_turns: worst error %.2f units of 2^-24 (turns 0x%016llx)\n", worst,
           (unsigned long long)worst_turns);
    CHECK(worst <= 2.0);
}

/* Q31.32 conversion of float positions: round to nearest, ties to even; NaN from 2^31 up. */
static void check_positions(void)
{
    int64_t fixed = 1;
    CHECK(posenc__position_from_f32(1.5f, &fixed) && fixed == INT64_C(3) << 31);
    CHECK(posenc__position_from_f32(-2147483520.0f, &fixed) &&
          fixed == -(INT64_C(2147483520) << 32));
    CHECK(posenc__position_from_f32(0x1p-33f, &fixed) && fixed == 0);     /* tie: even */
    CHECK(posenc__position_from_f32(0x3p-33f, &fixed) && fixed == 2);     /* tie: even */
    CHECK(posenc__position_from_f32(-0x1.8p-32f, &fixed) && fixed == -2); /* tie: even */
    CHECK(!posenc__position_from_f32(2147483648.0f, &fixed));
    CHECK(!posenc__position_from_f32(-2147483648.0f, &fixed));
    CHECK(!posenc__position_from_f32(NAN, &fixed));
    CHECK(!posenc__position_from_f32(INFINITY, &fixed));
    CHECK(posenc__position_from_i32(-1) == -(INT64_C(1) << 32));
}

/* ---------------------------------------------------------------------------------------------
 * What the build embedded
 */

static void check_spirv(void)
{
    if (!posenc__spirv_enabled()) {
        printf("SPIR-V kernels: configured off, skipped\n");
        CHECK(posenc__spirv_count() == 0);
        CHECK(posenc__spirv_get(POSENC__SPIRV_SINUSOIDAL_F32) == NULL);
        return;
    }
    for (int i = 0; i < VARIANT_COUNT; i++) {
        const posenc__spirv *spirv = posenc__spirv_get(spirv_variants[i]);
        CHECK(spirv != NULL);
        if (!spirv)
            continue;
        CHECK(strcmp(spirv->name, variant_names[i]) == 0);
        CHECK(strcmp(spirv->source, "sinusoidal.comp") == 0);
        CHECK(spirv->word_count > 100);
        CHECK(spirv->words[0] == 0x07230203u);  /* magic, in host byte order */
        CHECK(spirv->words[1] == 0x00010300u);  /* SPIR-V 1.3: Vulkan 1.1 */
        CHECK(spirv->words[3] < 0x400000u);     /* id bound: sane */
        CHECK(spirv->defines && strstr(spirv->defines, "-DPOSENC_OUT_") != NULL);
    }
    /* Every variant of shaders/variants.cmake, at its id. */
    size_t count = posenc__spirv_count();
    CHECK(count == POSENC__SPIRV_VARIANT_COUNT);
    for (size_t i = 0; i < count; i++) {
        const posenc__spirv *spirv = posenc__spirv_at(i);
        CHECK(spirv && spirv->words[0] == 0x07230203u &&
              posenc__spirv_get((posenc__spirv_id)i) == spirv);
    }
    CHECK(posenc__spirv_at(count) == NULL);
    CHECK(posenc__spirv_get(POSENC__SPIRV_VARIANT_COUNT) == NULL);
    CHECK(strcmp(posenc__spirv_get(POSENC__SPIRV_ROPE_BF16_S16)->name, "rope_bf16_s16") == 0);
    printf("SPIR-V kernels: %zu variants embedded\n", count);
}

static void check_cl_sources(void)
{
    if (!posenc__cl_enabled()) {
        printf("OpenCL C kernels: configured off, skipped\n");
        CHECK(posenc__cl_kernel_count() == 0);
        CHECK(posenc__cl_kernel_get(POSENC__CL_SINUSOIDAL_F32) == NULL);
        CHECK(posenc__cl_source_find("sinusoidal.cl") == NULL);
        return;
    }
    for (int i = 0; i < VARIANT_COUNT; i++) {
        const posenc__cl_kernel *kernel = posenc__cl_kernel_get(cl_variants[i]);
        CHECK(kernel != NULL);
        if (!kernel)
            continue;
        CHECK(strcmp(kernel->name, variant_names[i]) == 0);
        CHECK(strcmp(kernel->entry, "posenc_sinusoidal") == 0);
        CHECK(strcmp(kernel->source_name, "sinusoidal.cl") == 0);
        CHECK(strstr(kernel->source, "kernel void posenc_sinusoidal(") != NULL);
        CHECK(strstr(kernel->source, "#include") == NULL);  /* includes inlined */
        CHECK(strstr(kernel->source, "posenc_sincos_turns") != NULL);
        CHECK(strstr(kernel->options, "-DPOSENC_OUT_") != NULL);
        CHECK(posenc__cl_source_find("sinusoidal.cl") == kernel->source);
        const posenc__cl_kernel *contiguous = posenc__cl_kernel_get(cl_contiguous_variants[i]);
        CHECK(contiguous && strcmp(contiguous->entry, "posenc_sinusoidal_contiguous") == 0 &&
              strcmp(contiguous->options, kernel->options) == 0);
    }
    size_t count = posenc__cl_kernel_count();
    CHECK(count == POSENC__CL_VARIANT_COUNT);
    for (size_t i = 0; i < count; i++) {
        const posenc__cl_kernel *kernel = posenc__cl_kernel_at(i);
        CHECK(kernel && posenc__cl_kernel_get((posenc__cl_id)i) == kernel);
    }
    CHECK(posenc__cl_kernel_at(count) == NULL);
    CHECK(posenc__cl_kernel_get(POSENC__CL_VARIANT_COUNT) == NULL);
    CHECK(strcmp(posenc__cl_kernel_get(POSENC__CL_COPY_U32)->name, "copy_u32") == 0);
    printf("OpenCL C kernels: %zu variants embedded\n", count);
}

/* ---------------------------------------------------------------------------------------------
 * The cases both runtimes run, and their expected outputs from the C code
 */

/* The test table: BATCH x ROWS x D_MODEL (odd, so the zero column is written), inside a larger
 * buffer with padding around and between rows that the kernel must leave alone. The odd row
 * stride gives 16-bit rows starting on both halves of a 32-bit word. */
enum {
    BATCH = 2,
    FIXED_ROWS = 12,
    ROWS = 64,
    HALF = 24, /* three blocks of 8 frequencies: a pair and one alone */
    D_MODEL = 2 * HALF + 1,
    OUT_OFFSET = 3,                       /* elements */
    ROW_STRIDE = D_MODEL + 2,             /* elements */
    BATCH_STRIDE = ROWS * ROW_STRIDE + 1, /* elements */
    OUT_ELEMENTS = OUT_OFFSET + BATCH * BATCH_STRIDE + 4,
    OUT_BYTES = OUT_ELEMENTS * 4,         /* enough for any dtype, a multiple of 4 */
    PARAM_WORDS = 18,                     /* push constants / kernel arguments 4.. */
};

/* Radians per position; the larger ones give whole turns per position (int_turns > 0). */
static const double test_frequencies[HALF] = {
    1.0, 0.31622776601683794, 1e-2, 1e-4, 6.5, 1000.0, 0.7853981633974483, 2.5e-3};

/* The first FIXED_ROWS positions are edge cases, the rest random (fill_positions). */
static int32_t int_positions[ROWS] = {
    0, 1, -1, 7, 1000, -123456, 65535, 123456789, 1 << 30, 2147483646, 2147483647,
    -2147483647 - 1};
static float float_positions[ROWS] = {
    0.0f, 0.5f, -0.25f, 1e-10f, 3.14159f, -1234.567f, 1048576.5f, 16777216.0f,
    2147483520.0f, -2147483520.0f, 2147483648.0f, NAN};
static posenc__freq test_freqs[HALF];

static void prepare_inputs(void)
{
    test_rng rng = {4242};
    for (int r = FIXED_ROWS; r < ROWS; r++) {
        int_positions[r] = (int32_t)test_rng_u32(&rng);
        /* Magnitudes from 2^-20 to 2^31, both signs. */
        int exponent = (int)(test_rng_u32(&rng) % 51) - 20;
        double magnitude = ldexp(test_rng_uniform(&rng, 1.0, 2.0), exponent);
        float_positions[r] = (float)(r % 2 ? magnitude : -magnitude);
    }
    for (int k = 0; k < HALF; k++)
        test_freqs[k] = posenc__freq_from_radians(test_frequencies[k]);
}

enum { POSITIONS_ROW_INDEX = 0, POSITIONS_I32 = 1, POSITIONS_F32 = 2 };
enum { MODE_TABLE, MODE_ADD, MODE_IN_PLACE };
static const char *const mode_names[] = {"table", "add", "in place"};
static const char *const positions_names[] = {"row index", "i32", "f32"};

typedef struct test_case {
    int variant;
    posenc_sinusoidal_layout layout;
    int positions;
    int mode;
    bool stepped; /* rows at the row index from anchors and steps (sinusoidal_contiguous.cl) */
} test_case;

/* The frequency table's words: triplets, components (zero), then the steps. */
enum { STEP_WORDS_AT = 4 * HALF, FREQ_WORDS = STEP_WORDS_AT + 2 * HALF * POSENC_SINUSOIDAL_STEPS };

/* Everything a runtime needs for one case, and what it must produce. */
typedef struct case_data {
    posenc_dtype dtype;
    size_t elem;                     /* bytes per element */
    uint8_t out[OUT_BYTES];          /* initial contents of out */
    uint8_t x[OUT_BYTES];
    uint8_t expected[OUT_BYTES];
    uint32_t positions[BATCH * ROWS];
    uint32_t freq_words[FREQ_WORDS];
    uint32_t params[PARAM_WORDS];    /* the Params block of sinusoidal.comp */
} case_data;

static size_t dtype_bytes(posenc_dtype dtype) { return dtype == POSENC_DTYPE_F32 ? 4 : 2; }

static float load_element(posenc_dtype dtype, const uint8_t *bytes, size_t index)
{
    if (dtype == POSENC_DTYPE_F32) {
        float value;
        memcpy(&value, bytes + 4 * index, 4);
        return value;
    }
    uint16_t bits;
    memcpy(&bits, bytes + 2 * index, 2);
    return dtype == POSENC_DTYPE_F16 ? posenc__f16_to_f32(bits) : posenc__bf16_to_f32(bits);
}

static void store_element(posenc_dtype dtype, uint8_t *bytes, size_t index, float value)
{
    if (dtype == POSENC_DTYPE_F32) {
        memcpy(bytes + 4 * index, &value, 4);
        return;
    }
    uint16_t bits = dtype == POSENC_DTYPE_F16 ? posenc__f32_to_f16(value)
                                              : posenc__f32_to_bf16(value);
    memcpy(bytes + 2 * index, &bits, 2);
}

/* Position of row r of batch b as the kernel sees it: its Q31.32 value (false: NaN) and, for
 * the float64 check, the value itself. Batch 1 sees the int positions rotated. */
static bool case_position(const test_case *test, int32_t position_offset, int b, int r,
                          int64_t *fixed, double *value)
{
    if (test->positions == POSITIONS_ROW_INDEX) {
        *value = (double)position_offset + r;
        *fixed = posenc__position_from_i32(position_offset + r);
        return true;
    }
    if (test->positions == POSITIONS_I32) {
        int32_t p = int_positions[(r + 5 * b) % ROWS];
        *value = p;
        *fixed = posenc__position_from_i32(p);
        return true;
    }
    float p = float_positions[r];
    *value = p;
    return posenc__position_from_f32(p, fixed);
}

static void prepare_case(const test_case *test, case_data *data)
{
    posenc_dtype dtype = variant_dtypes[test->variant];
    data->dtype = dtype;
    data->elem = dtype_bytes(dtype);
    const float input_scale = 1.5f, output_scale = test->mode == MODE_TABLE ? 1.0f : 0.75f;
    const int32_t position_offset = test->positions == POSITIONS_ROW_INDEX
                                        ? 2147483647 - (ROWS - 1) /* up to the largest int32 */
                                        : 0;

    test_rng rng = {(uint64_t)(test->variant * 100 + test->mode * 10 + test->positions + 1)};
    memset(data->out, 0x5a, sizeof data->out); /* padding the kernel must leave alone */
    memset(data->x, 0, sizeof data->x);
    for (size_t i = 0; i < OUT_ELEMENTS; i++)
        store_element(dtype, data->x, i, (float)test_rng_uniform(&rng, -4.0, 4.0));
    if (test->mode == MODE_IN_PLACE)
        memcpy(data->out, data->x, sizeof data->out);
    memcpy(data->expected, data->out, sizeof data->out);

    for (int b = 0; b < BATCH; b++) {
        for (int r = 0; r < ROWS; r++) {
            data->positions[b * ROWS + r] = test->positions == POSITIONS_F32
                                                ? float_bits(float_positions[r])
                                                : (uint32_t)int_positions[(r + 5 * b) % ROWS];
        }
    }
    memset(data->freq_words, 0, sizeof data->freq_words);
    for (int k = 0; k < HALF; k++) {
        data->freq_words[3 * k] = test_freqs[k].int_turns;
        data->freq_words[3 * k + 1] = (uint32_t)(test_freqs[k].frac >> 32);
        data->freq_words[3 * k + 2] = (uint32_t)test_freqs[k].frac;
        for (uint32_t step = 0; step < POSENC_SINUSOIDAL_STEPS; step++) {
            float s, c;
            posenc__sincos_turns(posenc__turns(posenc__position_from_i32((int32_t)step),
                                               test_freqs[k]),
                                 &s, &c);
            data->freq_words[STEP_WORDS_AT + 2 * HALF * step + k] = float_bits(c);
            data->freq_words[STEP_WORDS_AT + 2 * HALF * step + HALF + k] = float_bits(s);
        }
    }
    const posenc__sinusoidal_params params = {
        /* out and x: offset, strides in elements */
        .out_offset = OUT_OFFSET,
        .out_stride_batch = BATCH_STRIDE,
        .out_stride_row = ROW_STRIDE,
        .out_stride_col = 1,
        .x_offset = OUT_OFFSET,
        .x_stride_batch = BATCH_STRIDE,
        .x_stride_row = ROW_STRIDE,
        .x_stride_col = 1,
        .positions_stride_batch = ROWS, /* positions: [batch, rows] */
        .positions_stride_row = 1,
        .batch = BATCH,
        .rows = ROWS,
        .d_model = D_MODEL,
        .position_offset = position_offset,
        .flags = (uint32_t)test->layout |
                 (uint32_t)test->positions << POSENC_SINUSOIDAL_FLAG_POSITIONS_SHIFT |
                 (test->mode != MODE_TABLE ? POSENC_SINUSOIDAL_FLAG_ADD : 0u) |
                 (test->mode == MODE_IN_PLACE ? POSENC_SINUSOIDAL_FLAG_X_IN_OUT : 0u),
        .input_scale = input_scale,
        .output_scale = output_scale,
    };
    _Static_assert(sizeof params == sizeof data->params, "the kernels' parameter words");
    memcpy(data->params, &params, sizeof params);

    /* The expected outputs, from the C code step by step; f32 tables are also held to the
     * promise against the exact values. */
    double worst_units = 0;
    for (int b = 0; b < BATCH; b++) {
        for (int r = 0; r < ROWS; r++) {
            int64_t fixed = 0;
            double position = 0;
            bool valid = case_position(test, position_offset, b, r, &fixed, &position);
            float pe[D_MODEL];
            pe[D_MODEL - 1] = 0.0f;
            /* Stepped: the row's block of POSENC_SINUSOIDAL_BLOCK_ROWS, its anchor in the middle,
             * and the row's step from it. */
            const int block_rows = (int)POSENC_SINUSOIDAL_BLOCK_ROWS;
            int first = r / block_rows * block_rows;
            int length = ROWS - first < block_rows ? ROWS - first : block_rows;
            int anchor = first + length / 2, step = r - anchor;
            int64_t anchor_fixed = posenc__position_from_i32(position_offset + anchor);
            for (int k = 0; k < HALF; k++) {
                float s = NAN, c = NAN;
                if (valid && test->stepped) {
                    float as, ac, ss, sc;
                    posenc__sincos_turns(posenc__turns(anchor_fixed, test_freqs[k]), &as, &ac);
                    posenc__sincos_turns(posenc__turns(posenc__position_from_i32(abs(step)),
                                                       test_freqs[k]),
                                         &ss, &sc);
                    if (step < 0)
                        ss = -ss;
                    s = fminf(fmaxf(fused_multiply_add(as, sc, ac * ss), -1.0f), 1.0f);
                    c = fminf(fmaxf(fused_multiply_add(ac, sc, -(as * ss)), -1.0f), 1.0f);
                } else if (valid) {
                    posenc__sincos_turns(posenc__turns(fixed, test_freqs[k]), &s, &c);
                }
                size_t col_sin = 2 * k, col_cos = 2 * k + 1;
                if (test->layout == POSENC_SINUSOIDAL_SIN_COS)
                    col_sin = k, col_cos = HALF + k;
                else if (test->layout == POSENC_SINUSOIDAL_COS_SIN)
                    col_cos = k, col_sin = HALF + k;
                pe[col_sin] = s;
                pe[col_cos] = c;
                if (valid && test->mode == MODE_TABLE && dtype == POSENC_DTYPE_F32) {
                    double exact_s, exact_c;
                    ref_sincos_product(position, test_frequencies[k], &exact_s, &exact_c);
                    double units = fmax(fabs(s - exact_s), fabs(c - exact_c)) / REF_UNIT;
                    worst_units = fmax(worst_units, units);
                }
            }
            for (int col = 0; col < D_MODEL; col++) {
                size_t index = OUT_OFFSET + (size_t)b * BATCH_STRIDE + (size_t)r * ROW_STRIDE + col;
                float value = output_scale * pe[col];
                if (test->mode != MODE_TABLE)
                    value += load_element(dtype, data->x, index) * input_scale;
                store_element(dtype, data->expected, index, value);
            }
        }
    }
    if (worst_units > 8.0) {
        test_failures++;
        fprintf(stderr, "C angle steps: error %.2f units of 2^-24 exceeds the promise\n",
                worst_units);
    }
}

/* Whether element `index` of the out buffer belongs to the tensor (the rest is padding). */
static bool inside_tensor(size_t index)
{
    if (index < OUT_OFFSET)
        return false;
    size_t rest = index - OUT_OFFSET;
    size_t b = rest / BATCH_STRIDE, r = rest % BATCH_STRIDE / ROW_STRIDE;
    return b < BATCH && r < ROWS && rest % BATCH_STRIDE % ROW_STRIDE < D_MODEL;
}

/* `out` as the device left it against the C code's bytes. `exact`: bit for bit (OpenCL, where
 * FP_CONTRACT OFF keeps every step as the C code rounds it; a device flushing subnormals could
 * differ below 2^-126, which nothing here comes near). Otherwise the device may fuse a multiply
 * and an add (Vulkan implementations do, `precise` notwithstanding): within 4 f32 ulps of the
 * largest term, plus one ulp of a 16-bit output type. That still catches any error in the
 * integer steps, whose smallest effects are tens of ulps. Padding must be untouched either way.
 * Returns the number of tensor elements that are bit-identical. */
static size_t compare_case(const char *runtime, const test_case *test, const case_data *data,
                           const uint8_t *out, bool exact)
{
    unsigned mismatches = 0;
    size_t identical = 0;
    const float input_scale = 1.5f;
    for (size_t i = 0; i < OUT_ELEMENTS; i++) {
        if (memcmp(out + i * data->elem, data->expected + i * data->elem, data->elem) == 0) {
            identical += inside_tensor(i);
            continue;
        }
        float got = load_element(data->dtype, out, i);
        float want = load_element(data->dtype, data->expected, i);
        if (isnan(got) && isnan(want))
            continue; /* NaN bits may differ between devices */
        if (!exact && inside_tensor(i)) {
            double magnitude = fabs(want);
            if (test->mode != MODE_TABLE)
                magnitude = fmax(magnitude, fabs(load_element(data->dtype, data->x, i)) *
                                                input_scale);
            double tolerance = 4 * ref_ulp(POSENC_DTYPE_F32, magnitude);
            if (data->dtype != POSENC_DTYPE_F32)
                tolerance += ref_ulp(data->dtype, magnitude);
            if (fabs((double)got - want) <= tolerance)
                continue;
        }
        if (mismatches++ < 4)
            fprintf(stderr, "  %s %s, layout %d, %s positions, %s: element %zu: %.9g, not %.9g\n",
                    runtime, variant_names[test->variant], (int)test->layout,
                    positions_names[test->positions], mode_names[test->mode], i, (double)got,
                    (double)want);
    }
    if (mismatches) {
        test_failures++;
        fprintf(stderr, "  %s %s, layout %d, %s positions, %s: %u elements differ from C\n",
                runtime, variant_names[test->variant], (int)test->layout,
                positions_names[test->positions], mode_names[test->mode], mismatches);
    }
    return identical;
}

/* Runs every case of one variant through `run` (false: the runtime failed, stop). */
typedef bool (*case_runner)(void *runtime, const test_case *test, const case_data *data,
                            uint8_t *out);

/* `stepped`: the kernel takes rows at the row index from anchors and steps. */
static bool run_variant_cases(const char *runtime_name, int variant, case_runner run,
                              void *runtime, bool exact, bool stepped, size_t *identical,
                              size_t *total)
{
    case_data *data = malloc(sizeof *data);
    uint8_t *out = malloc(OUT_BYTES);
    bool ok = data && out;
    for (int layout = 0; layout < 3 && ok; layout++) {
        for (int positions = 0; positions < 3 && ok; positions++) {
            for (int mode = 0; mode < 3 && ok; mode++) {
                test_case test = {variant, (posenc_sinusoidal_layout)layout, positions, mode,
                                  stepped && positions == POSITIONS_ROW_INDEX};
                prepare_case(&test, data);
                memcpy(out, data->out, OUT_BYTES);
                ok = run(runtime, &test, data, out);
                if (ok) {
                    *identical += compare_case(runtime_name, &test, data, out, exact);
                    *total += BATCH * ROWS * D_MODEL;
                }
            }
        }
    }
    if (!ok)
        test_failures++;
    free(data);
    free(out);
    return ok;
}

/* ---------------------------------------------------------------------------------------------
 * Running sinusoidal.cl. The few OpenCL declarations needed are written out here, so the test
 * builds without OpenCL headers.
 */

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_bitfield;
typedef void *cl_handle;

#define CL_SUCCESS 0
#define CL_DEVICE_TYPE_ALL 0xffffffffu
#define CL_DEVICE_NAME 0x102b
#define CL_PROGRAM_BUILD_LOG 0x1183
#define CL_MEM_READ_WRITE (1u << 0)
#define CL_MEM_COPY_HOST_PTR (1u << 5)

typedef struct cl_api {
    void *library;
    cl_int (*GetPlatformIDs)(cl_uint, cl_handle *, cl_uint *);
    cl_int (*GetDeviceIDs)(cl_handle, cl_bitfield, cl_uint, cl_handle *, cl_uint *);
    cl_int (*GetDeviceInfo)(cl_handle, cl_uint, size_t, void *, size_t *);
    cl_handle (*CreateContext)(const intptr_t *, cl_uint, const cl_handle *,
                               void (*)(const char *, const void *, size_t, void *), void *,
                               cl_int *);
    cl_handle (*CreateCommandQueue)(cl_handle, cl_handle, cl_bitfield, cl_int *);
    cl_handle (*CreateProgramWithSource)(cl_handle, cl_uint, const char **, const size_t *,
                                         cl_int *);
    cl_int (*BuildProgram)(cl_handle, cl_uint, const cl_handle *, const char *,
                           void (*)(cl_handle, void *), void *);
    cl_int (*GetProgramBuildInfo)(cl_handle, cl_handle, cl_uint, size_t, void *, size_t *);
    cl_handle (*CreateKernel)(cl_handle, const char *, cl_int *);
    cl_handle (*CreateBuffer)(cl_handle, cl_bitfield, size_t, void *, cl_int *);
    cl_int (*SetKernelArg)(cl_handle, cl_uint, size_t, const void *);
    cl_int (*EnqueueNDRangeKernel)(cl_handle, cl_handle, cl_uint, const size_t *, const size_t *,
                                   const size_t *, cl_uint, const cl_handle *, cl_handle *);
    cl_int (*EnqueueReadBuffer)(cl_handle, cl_handle, cl_uint, size_t, size_t, void *, cl_uint,
                                const cl_handle *, cl_handle *);
    cl_int (*Finish)(cl_handle);
    cl_int (*ReleaseMemObject)(cl_handle);
    cl_int (*ReleaseKernel)(cl_handle);
    cl_int (*ReleaseProgram)(cl_handle);
    cl_int (*ReleaseCommandQueue)(cl_handle);
    cl_int (*ReleaseContext)(cl_handle);
} cl_api;

#if defined(_WIN32)
#  define OPENCL_LOADER "OpenCL.dll"
#  define VULKAN_LOADER "vulkan-1.dll"
#elif defined(__APPLE__)
#  define OPENCL_LOADER "/System/Library/Frameworks/OpenCL.framework/OpenCL"
#  define VULKAN_LOADER "libvulkan.1.dylib"
#else
#  define OPENCL_LOADER "libOpenCL.so.1"
#  define VULKAN_LOADER "libvulkan.so.1"
#endif

/* dlsym's object pointer into a function pointer, without a cast ISO C leaves undefined. */
#define LOAD_SYMBOL(library, prefix, table, name, ok)                                          \
    do {                                                                                       \
        void *symbol_ = posenc__library_symbol(library, prefix #name);                         \
        ok = ok && symbol_ != NULL;                                                            \
        memcpy(&(table)->name, &symbol_, sizeof symbol_);                                      \
    } while (0)

static bool cl_load(cl_api *cl)
{
    memset(cl, 0, sizeof *cl);
    cl->library = posenc__library_open(OPENCL_LOADER);
    if (!cl->library)
        return false;
    bool ok = true;
    LOAD_SYMBOL(cl->library, "cl", cl, GetPlatformIDs, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, GetDeviceIDs, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, GetDeviceInfo, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, CreateContext, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, CreateCommandQueue, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, CreateProgramWithSource, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, BuildProgram, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, GetProgramBuildInfo, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, CreateKernel, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, CreateBuffer, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, SetKernelArg, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, EnqueueNDRangeKernel, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, EnqueueReadBuffer, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, Finish, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, ReleaseMemObject, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, ReleaseKernel, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, ReleaseProgram, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, ReleaseCommandQueue, ok);
    LOAD_SYMBOL(cl->library, "cl", cl, ReleaseContext, ok);
    if (!ok) {
        fprintf(stderr, "libOpenCL.so.1 lacks an OpenCL 1.2 entry point\n");
        test_failures++;
        posenc__library_close(cl->library);
        cl->library = NULL;
    }
    return ok;
}

typedef struct cl_runtime {
    const cl_api *cl;
    cl_handle context, queue, kernel;
} cl_runtime;

static bool cl_run_case(void *runtime, const test_case *test, const case_data *data,
                        uint8_t *out)
{
    const cl_runtime *rt = runtime;
    const cl_api *cl = rt->cl;
    cl_int err = CL_SUCCESS, e2 = CL_SUCCESS, e3 = CL_SUCCESS, e4 = CL_SUCCESS;
    const cl_bitfield flags = CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR;
    cl_handle out_mem = cl->CreateBuffer(rt->context, flags, OUT_BYTES, out, &err);
    cl_handle x_mem = cl->CreateBuffer(rt->context, flags, OUT_BYTES, (void *)data->x, &e2);
    cl_handle positions_mem = cl->CreateBuffer(rt->context, flags, sizeof data->positions,
                                               (void *)data->positions, &e3);
    cl_handle freqs_mem = cl->CreateBuffer(rt->context, flags, sizeof data->freq_words,
                                           (void *)data->freq_words, &e4);
    bool ok = err == CL_SUCCESS && e2 == CL_SUCCESS && e3 == CL_SUCCESS && e4 == CL_SUCCESS;
    if (!ok)
        fprintf(stderr, "clCreateBuffer failed (%d %d %d %d)\n", err, e2, e3, e4);

    if (ok) {
        /* Unused buffers are passed as NULL, as the kernel's header allows. */
        cl_handle null_mem = NULL;
        const void *x_arg = test->mode == MODE_ADD ? (const void *)&x_mem : &null_mem;
        const void *positions_arg = test->positions != POSITIONS_ROW_INDEX
                                        ? (const void *)&positions_mem
                                        : &null_mem;
        err = cl->SetKernelArg(rt->kernel, 0, sizeof out_mem, &out_mem);
        err |= cl->SetKernelArg(rt->kernel, 1, sizeof x_mem, x_arg);
        err |= cl->SetKernelArg(rt->kernel, 2, sizeof positions_mem, positions_arg);
        err |= cl->SetKernelArg(rt->kernel, 3, sizeof freqs_mem, &freqs_mem);
        for (cl_uint i = 0; i < PARAM_WORDS; i++)
            err |= cl->SetKernelArg(rt->kernel, 4 + i, 4, &data->params[i]);
        /* Fewer work-items than frequencies x rows: the kernel's loop covers the rest. */
        size_t global = 32;
        if (err == CL_SUCCESS)
            err = cl->EnqueueNDRangeKernel(rt->queue, rt->kernel, 1, NULL, &global, NULL, 0,
                                           NULL, NULL);
        if (err == CL_SUCCESS)
            err = cl->EnqueueReadBuffer(rt->queue, out_mem, 1, 0, OUT_BYTES, out, 0, NULL, NULL);
        if (err == CL_SUCCESS)
            err = cl->Finish(rt->queue);
        ok = err == CL_SUCCESS;
        if (!ok)
            fprintf(stderr, "OpenCL call failed (%d)\n", err);
    }
    cl->ReleaseMemObject(out_mem);
    cl->ReleaseMemObject(x_mem);
    cl->ReleaseMemObject(positions_mem);
    cl->ReleaseMemObject(freqs_mem);
    return ok;
}

static void cl_run_device(const cl_api *cl, cl_handle device)
{
    char name[256] = "";
    cl->GetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    cl_int err = CL_SUCCESS;
    cl_runtime rt = {cl, NULL, NULL, NULL};
    rt.context = cl->CreateContext(NULL, 1, &device, NULL, NULL, &err);
    if (err == CL_SUCCESS)
        rt.queue = cl->CreateCommandQueue(rt.context, device, 0, &err);
    int before = test_failures;
    /* sinusoidal.cl, then sinusoidal_contiguous.cl (the columns here are contiguous and
     * d_model/2 is 24): both bit for bit the C code. */
    for (int run = 0; run < 2 * VARIANT_COUNT && err == CL_SUCCESS; run++) {
        int v = run % VARIANT_COUNT;
        const posenc__cl_kernel *variant = posenc__cl_kernel_get(
            run < VARIANT_COUNT ? cl_variants[v] : cl_contiguous_variants[v]);
        const char *source = variant->source;
        cl_handle program = cl->CreateProgramWithSource(rt.context, 1, &source, NULL, &err);
        if (err == CL_SUCCESS)
            err = cl->BuildProgram(program, 1, &device, variant->options, NULL, NULL);
        if (err != CL_SUCCESS && program) {
            static char log[16384];
            log[0] = '\0';
            cl->GetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log,
                                    NULL);
            fprintf(stderr, "OpenCL device %s: %s does not build (%d):\n%s\n", name,
                    variant->name, err, log);
        }
        if (err == CL_SUCCESS)
            rt.kernel = cl->CreateKernel(program, variant->entry, &err);
        size_t identical = 0, total = 0;
        if (err == CL_SUCCESS &&
            !run_variant_cases(run < VARIANT_COUNT ? "opencl" : "opencl contiguous", v,
                               cl_run_case, &rt, true, run >= VARIANT_COUNT, &identical, &total))
            err = -1;
        if (rt.kernel)
            cl->ReleaseKernel(rt.kernel);
        rt.kernel = NULL;
        if (program)
            cl->ReleaseProgram(program);
    }
    if (err != CL_SUCCESS && test_failures == before) {
        test_failures++;
        fprintf(stderr, "OpenCL device %s: setup failed (%d)\n", name, err);
    }
    printf("  opencl   %-40s %s\n", name, test_failures == before ? "ok" : "FAILED");
    if (rt.queue)
        cl->ReleaseCommandQueue(rt.queue);
    if (rt.context)
        cl->ReleaseContext(rt.context);
}

static void check_cl_runs(void)
{
    if (!posenc__cl_enabled())
        return;
    cl_api cl;
    if (!cl_load(&cl)) {
        printf("OpenCL kernels: libOpenCL.so.1 not loadable, not run\n");
        return;
    }
    cl_handle platforms[8];
    cl_uint platform_count = 0;
    if (cl.GetPlatformIDs(8, platforms, &platform_count) != CL_SUCCESS)
        platform_count = 0;
    unsigned devices_run = 0;
    for (cl_uint p = 0; p < platform_count && p < 8; p++) {
        cl_handle devices[8];
        cl_uint device_count = 0;
        if (cl.GetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 8, devices, &device_count) !=
            CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < device_count && d < 8; d++, devices_run++)
            cl_run_device(&cl, devices[d]);
    }
    if (!devices_run)
        printf("OpenCL kernels: no OpenCL device, not run\n");
    /* The library stays loaded: drivers do not all survive being unloaded, and LeakSanitizer
     * can then name the driver behind an allocation it still holds. */
}

/* ---------------------------------------------------------------------------------------------
 * Running sinusoidal.comp's SPIR-V through Vulkan, where the Vulkan headers are installed (for
 * the types; libvulkan.so.1 itself is loaded with dlopen).
 */
#if defined(__has_include)
#if __has_include(<vulkan/vulkan.h>)
#define TEST_VULKAN 1
#endif
#endif

#if TEST_VULKAN
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#define VK_FUNCTIONS(X)                                                                        \
    X(DestroyInstance)                                                                         \
    X(EnumeratePhysicalDevices)                                                                \
    X(GetPhysicalDeviceProperties)                                                             \
    X(GetPhysicalDeviceQueueFamilyProperties)                                                  \
    X(GetPhysicalDeviceMemoryProperties)                                                       \
    X(CreateDevice)                                                                            \
    X(DestroyDevice)                                                                           \
    X(GetDeviceQueue)                                                                          \
    X(CreateBuffer)                                                                            \
    X(DestroyBuffer)                                                                           \
    X(GetBufferMemoryRequirements)                                                             \
    X(AllocateMemory)                                                                          \
    X(FreeMemory)                                                                              \
    X(BindBufferMemory)                                                                        \
    X(MapMemory)                                                                               \
    X(CreateShaderModule)                                                                      \
    X(DestroyShaderModule)                                                                     \
    X(CreateDescriptorSetLayout)                                                               \
    X(DestroyDescriptorSetLayout)                                                              \
    X(CreatePipelineLayout)                                                                    \
    X(DestroyPipelineLayout)                                                                   \
    X(CreateComputePipelines)                                                                  \
    X(DestroyPipeline)                                                                         \
    X(CreateDescriptorPool)                                                                    \
    X(DestroyDescriptorPool)                                                                   \
    X(AllocateDescriptorSets)                                                                  \
    X(UpdateDescriptorSets)                                                                    \
    X(CreateCommandPool)                                                                       \
    X(DestroyCommandPool)                                                                      \
    X(AllocateCommandBuffers)                                                                  \
    X(ResetCommandBuffer)                                                                      \
    X(BeginCommandBuffer)                                                                      \
    X(EndCommandBuffer)                                                                        \
    X(CmdBindPipeline)                                                                         \
    X(CmdBindDescriptorSets)                                                                   \
    X(CmdPushConstants)                                                                        \
    X(CmdDispatch)                                                                             \
    X(CmdPipelineBarrier)                                                                      \
    X(QueueSubmit)                                                                             \
    X(QueueWaitIdle)

typedef struct vk_api {
    VkInstance instance;
#define VK_MEMBER(name) PFN_vk##name name;
    VK_FUNCTIONS(VK_MEMBER)
#undef VK_MEMBER
} vk_api;

enum { VK_BUFFERS = 4 }; /* out, x, positions, freqs: the bindings of sinusoidal.comp */

typedef struct vk_runtime {
    const vk_api *vk;
    VkDevice device;
    VkQueue queue;
    VkBuffer buffers[VK_BUFFERS];
    VkDeviceMemory memory[VK_BUFFERS];
    void *mapped[VK_BUFFERS];
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipeline_layout;
    VkDescriptorPool pool;
    VkDescriptorSet set;
    VkCommandPool command_pool;
    VkCommandBuffer commands;
    VkPipeline pipeline; /* of the variant being run */
} vk_runtime;

static bool vk_ok(VkResult result, const char *what)
{
    if (result == VK_SUCCESS)
        return true;
    fprintf(stderr, "Vulkan: %s failed (%d)\n", what, (int)result);
    return false;
}

static bool vk_run_case(void *runtime, const test_case *test, const case_data *data,
                        uint8_t *out)
{
    const vk_runtime *rt = runtime;
    const vk_api *vk = rt->vk;
    (void)test;
    memcpy(rt->mapped[0], out, OUT_BYTES);
    memcpy(rt->mapped[1], data->x, OUT_BYTES);
    memcpy(rt->mapped[2], data->positions, sizeof data->positions);
    memcpy(rt->mapped[3], data->freq_words, sizeof data->freq_words);

    VkCommandBufferBeginInfo begin = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    if (!vk_ok(vk->ResetCommandBuffer(rt->commands, 0), "vkResetCommandBuffer") ||
        !vk_ok(vk->BeginCommandBuffer(rt->commands, &begin), "vkBeginCommandBuffer"))
        return false;
    vk->CmdBindPipeline(rt->commands, VK_PIPELINE_BIND_POINT_COMPUTE, rt->pipeline);
    vk->CmdBindDescriptorSets(rt->commands, VK_PIPELINE_BIND_POINT_COMPUTE, rt->pipeline_layout,
                              0, 1, &rt->set, 0, NULL);
    vk->CmdPushConstants(rt->commands, rt->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                         sizeof data->params, data->params);
    /* Two groups of 64, fewer than frequencies x rows: the kernel's loop covers the rest. */
    vk->CmdDispatch(rt->commands, 2, 1, 1);
    VkMemoryBarrier to_host = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    vk->CmdPipelineBarrier(rt->commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0, NULL);
    if (!vk_ok(vk->EndCommandBuffer(rt->commands), "vkEndCommandBuffer"))
        return false;
    VkSubmitInfo submit = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &rt->commands,
    };
    if (!vk_ok(vk->QueueSubmit(rt->queue, 1, &submit, VK_NULL_HANDLE), "vkQueueSubmit") ||
        !vk_ok(vk->QueueWaitIdle(rt->queue), "vkQueueWaitIdle"))
        return false;
    memcpy(out, rt->mapped[0], OUT_BYTES);
    return true;
}

/* Buffers, descriptors and commands shared by every variant on one device. */
static bool vk_setup(vk_runtime *rt, VkPhysicalDevice physical, uint32_t queue_family)
{
    const vk_api *vk = rt->vk;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = queue_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    VkDeviceCreateInfo device_info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &queue_info,
    };
    if (!vk_ok(vk->CreateDevice(physical, &device_info, NULL, &rt->device), "vkCreateDevice"))
        return false;
    vk->GetDeviceQueue(rt->device, queue_family, 0, &rt->queue);

    VkPhysicalDeviceMemoryProperties memory_properties;
    vk->GetPhysicalDeviceMemoryProperties(physical, &memory_properties);
    const VkMemoryPropertyFlags wanted =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    const VkDeviceSize sizes[VK_BUFFERS] = {OUT_BYTES, OUT_BYTES, BATCH * ROWS * 4,
                                            FREQ_WORDS * 4};
    for (int i = 0; i < VK_BUFFERS; i++) {
        VkBufferCreateInfo buffer_info = {
            .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
            .size = sizes[i],
            .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
            .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
        };
        if (!vk_ok(vk->CreateBuffer(rt->device, &buffer_info, NULL, &rt->buffers[i]),
                   "vkCreateBuffer"))
            return false;
        VkMemoryRequirements requirements;
        vk->GetBufferMemoryRequirements(rt->device, rt->buffers[i], &requirements);
        uint32_t type = UINT32_MAX;
        for (uint32_t t = 0; t < memory_properties.memoryTypeCount && type == UINT32_MAX; t++) {
            if ((requirements.memoryTypeBits & (1u << t)) &&
                (memory_properties.memoryTypes[t].propertyFlags & wanted) == wanted)
                type = t;
        }
        if (type == UINT32_MAX) {
            fprintf(stderr, "Vulkan: no host-visible coherent memory for a storage buffer\n");
            return false;
        }
        VkMemoryAllocateInfo allocate = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
            .allocationSize = requirements.size,
            .memoryTypeIndex = type,
        };
        if (!vk_ok(vk->AllocateMemory(rt->device, &allocate, NULL, &rt->memory[i]),
                   "vkAllocateMemory") ||
            !vk_ok(vk->BindBufferMemory(rt->device, rt->buffers[i], rt->memory[i], 0),
                   "vkBindBufferMemory") ||
            !vk_ok(vk->MapMemory(rt->device, rt->memory[i], 0, VK_WHOLE_SIZE, 0, &rt->mapped[i]),
                   "vkMapMemory"))
            return false;
    }

    VkDescriptorSetLayoutBinding bindings[VK_BUFFERS];
    for (uint32_t i = 0; i < VK_BUFFERS; i++) {
        bindings[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    }
    VkDescriptorSetLayoutCreateInfo set_layout_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = VK_BUFFERS,
        .pBindings = bindings,
    };
    VkPushConstantRange push_range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, PARAM_WORDS * 4};
    if (!vk_ok(vk->CreateDescriptorSetLayout(rt->device, &set_layout_info, NULL,
                                             &rt->set_layout),
               "vkCreateDescriptorSetLayout"))
        return false;
    VkPipelineLayoutCreateInfo pipeline_layout_info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &rt->set_layout,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &push_range,
    };
    VkDescriptorPoolSize pool_size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_BUFFERS};
    VkDescriptorPoolCreateInfo pool_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = 1,
        .poolSizeCount = 1,
        .pPoolSizes = &pool_size,
    };
    if (!vk_ok(vk->CreatePipelineLayout(rt->device, &pipeline_layout_info, NULL,
                                        &rt->pipeline_layout),
               "vkCreatePipelineLayout") ||
        !vk_ok(vk->CreateDescriptorPool(rt->device, &pool_info, NULL, &rt->pool),
               "vkCreateDescriptorPool"))
        return false;
    VkDescriptorSetAllocateInfo set_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = rt->pool,
        .descriptorSetCount = 1,
        .pSetLayouts = &rt->set_layout,
    };
    if (!vk_ok(vk->AllocateDescriptorSets(rt->device, &set_info, &rt->set),
               "vkAllocateDescriptorSets"))
        return false;
    VkDescriptorBufferInfo buffer_infos[VK_BUFFERS];
    VkWriteDescriptorSet writes[VK_BUFFERS];
    for (uint32_t i = 0; i < VK_BUFFERS; i++) {
        buffer_infos[i] = (VkDescriptorBufferInfo){rt->buffers[i], 0, VK_WHOLE_SIZE};
        writes[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = rt->set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &buffer_infos[i],
        };
    }
    vk->UpdateDescriptorSets(rt->device, VK_BUFFERS, writes, 0, NULL);

    VkCommandPoolCreateInfo command_pool_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = queue_family,
    };
    if (!vk_ok(vk->CreateCommandPool(rt->device, &command_pool_info, NULL, &rt->command_pool),
               "vkCreateCommandPool"))
        return false;
    VkCommandBufferAllocateInfo commands_info = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = rt->command_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    return vk_ok(vk->AllocateCommandBuffers(rt->device, &commands_info, &rt->commands),
                 "vkAllocateCommandBuffers");
}

static void vk_teardown(vk_runtime *rt)
{
    const vk_api *vk = rt->vk;
    if (!rt->device)
        return;
    if (rt->command_pool)
        vk->DestroyCommandPool(rt->device, rt->command_pool, NULL);
    if (rt->pool)
        vk->DestroyDescriptorPool(rt->device, rt->pool, NULL);
    if (rt->pipeline_layout)
        vk->DestroyPipelineLayout(rt->device, rt->pipeline_layout, NULL);
    if (rt->set_layout)
        vk->DestroyDescriptorSetLayout(rt->device, rt->set_layout, NULL);
    for (int i = 0; i < VK_BUFFERS; i++) {
        if (rt->buffers[i])
            vk->DestroyBuffer(rt->device, rt->buffers[i], NULL);
        if (rt->memory[i])
            vk->FreeMemory(rt->device, rt->memory[i], NULL); /* unmaps too */
    }
    vk->DestroyDevice(rt->device, NULL);
}

static void vk_run_device(const vk_api *vk, VkPhysicalDevice physical)
{
    VkPhysicalDeviceProperties properties;
    vk->GetPhysicalDeviceProperties(physical, &properties);
    if (properties.apiVersion < VK_API_VERSION_1_1) {
        printf("  vulkan   %-40s skipped: Vulkan 1.0 only\n", properties.deviceName);
        return;
    }
    VkQueueFamilyProperties families[16];
    uint32_t family_count = 16;
    vk->GetPhysicalDeviceQueueFamilyProperties(physical, &family_count, families);
    uint32_t queue_family = UINT32_MAX;
    for (uint32_t f = 0; f < family_count && queue_family == UINT32_MAX; f++) {
        if (families[f].queueFlags & VK_QUEUE_COMPUTE_BIT)
            queue_family = f;
    }
    int before = test_failures;
    size_t identical = 0, total = 0;
    vk_runtime rt = {.vk = vk};
    bool ok = queue_family != UINT32_MAX && vk_setup(&rt, physical, queue_family);
    for (int v = 0; v < VARIANT_COUNT && ok; v++) {
        const posenc__spirv *spirv = posenc__spirv_get(spirv_variants[v]);
        VkShaderModuleCreateInfo module_info = {
            .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
            .codeSize = spirv->word_count * sizeof spirv->words[0],
            .pCode = spirv->words,
        };
        VkShaderModule module = VK_NULL_HANDLE;
        ok = vk_ok(vk->CreateShaderModule(rt.device, &module_info, NULL, &module),
                   "vkCreateShaderModule");
        VkComputePipelineCreateInfo pipeline_info = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage = {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main",
            },
            .layout = rt.pipeline_layout,
        };
        if (ok)
            ok = vk_ok(vk->CreateComputePipelines(rt.device, VK_NULL_HANDLE, 1, &pipeline_info,
                                                  NULL, &rt.pipeline),
                       "vkCreateComputePipelines");
        if (ok)
            ok = run_variant_cases("vulkan", v, vk_run_case, &rt, false, false, &identical,
                                   &total);
        if (rt.pipeline)
            vk->DestroyPipeline(rt.device, rt.pipeline, NULL);
        rt.pipeline = VK_NULL_HANDLE;
        if (module)
            vk->DestroyShaderModule(rt.device, module, NULL);
    }
    if (!ok && test_failures == before) {
        test_failures++;
        fprintf(stderr, "Vulkan device %s: setup failed\n", properties.deviceName);
    }
    printf("  vulkan   %-40s %s (%.1f%% of the values bit-identical to the C code)\n",
           properties.deviceName, test_failures == before ? "ok" : "FAILED",
           total ? 100.0 * (double)identical / (double)total : 0.0);
    vk_teardown(&rt);
}

static void check_vulkan_runs(void)
{
    if (!posenc__spirv_enabled())
        return;
    void *library = posenc__library_open(VULKAN_LOADER);
    if (!library) {
        printf("SPIR-V kernels: " VULKAN_LOADER " not loadable, not run\n");
        return;
    }
    vk_api vk = {0};
    PFN_vkGetInstanceProcAddr get_proc = NULL;
    PFN_vkCreateInstance create_instance = NULL;
    bool ok = true;
    void *symbol = posenc__library_symbol(library, "vkGetInstanceProcAddr");
    memcpy(&get_proc, &symbol, sizeof symbol);
    if (get_proc)
        create_instance = (PFN_vkCreateInstance)get_proc(VK_NULL_HANDLE, "vkCreateInstance");
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "posenc test_kernels",
        .apiVersion = VK_API_VERSION_1_1,
    };
    VkInstanceCreateInfo instance_info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pApplicationInfo = &app,
    };
    if (!create_instance || create_instance(&instance_info, NULL, &vk.instance) != VK_SUCCESS) {
        printf("SPIR-V kernels: no Vulkan instance, not run\n");
        return;
    }
#define VK_LOAD(name)                                                                          \
    vk.name = (PFN_vk##name)get_proc(vk.instance, "vk" #name);                                 \
    ok = ok && vk.name != NULL;
    VK_FUNCTIONS(VK_LOAD)
#undef VK_LOAD
    if (!ok) {
        test_failures++;
        fprintf(stderr, "Vulkan: an entry point of Vulkan 1.1 is missing\n");
        return;
    }
    VkPhysicalDevice devices[8];
    uint32_t device_count = 8;
    if (vk.EnumeratePhysicalDevices(vk.instance, &device_count, devices) < 0)
        device_count = 0;
    for (uint32_t d = 0; d < device_count; d++)
        vk_run_device(&vk, devices[d]);
    if (!device_count)
        printf("SPIR-V kernels: no Vulkan device, not run\n");
    /* The instance is kept until exit, as the library keeps its own: destroying the last one
     * unloads the driver, and a driver allocation made at first use then shows up as a leak
     * in an unloaded module, which no suppression can name. libvulkan.so.1 stays loaded too,
     * as libOpenCL.so.1 does. */
    static VkInstance kept_instance;
    kept_instance = vk.instance;
    (void)kept_instance;
}
#else
static void check_vulkan_runs(void)
{
    if (posenc__spirv_enabled())
        printf("SPIR-V kernels: built without the Vulkan headers, not run\n");
}
#endif

int main(void)
{
    check_turns();
    check_positions();
    check_sincos_turns();
    check_spirv();
    check_cl_sources();
    prepare_inputs();
    check_cl_runs();
    check_vulkan_runs();
    return test_finish("test_kernels");
}
