/* SPDX-License-Identifier: MIT */
/* The two Vulkan kernels of each operation give the same bits: rope_blocks.comp and
 * sinusoidal_blocks.comp run where every head or row is a run of whole 16-byte blocks (the
 * common, contiguous layout), rope.comp and sinusoidal.comp anywhere else. test_rope,
 * test_sinusoidal and the others check them against the float64 reference; this test checks
 * that they agree exactly. Each case runs twice on device buffers of the same contents: once
 * with every tensor at byte 0 (the block kernel) and once with every tensor one element further
 * on, off the 16-byte grid (the general kernel); the context's kernel count shows that each run
 * took its own kernel. Each case in f32, f16 and bf16. Under the vulkan_fallbacks environment
 * the general kernels are the variants that pack 16-bit elements two per word.
 * RoPE: both styles, in place and out of place, partial rotary dims with and without
 * rotary_offset, grouped k heads, positions absent, i32, fractional f32 and M-RoPE (sections
 * that change component inside a block), inverse and attention_factor, and the paged KV cache
 * writes of k and v.
 * Sinusoidal: the three layouts, tables and add mode (x apart and in place), positions absent
 * (rows many enough that an invocation steps through several, across a batch boundary), i32
 * and f32, and the scales.
 * And both kernels round f32 to f16 and bf16 as src/core/half.c, bit for bit: at position 0 a
 * RoPE output is a * attention_factor, rounded once, over every normal or infinite 16-bit input
 * a and factors that make ties, subnormal results and overflow. */
#include "required_devices.h"
#include "test_common.h"

#include "core/half.h"

#include <stdlib.h>
#include <string.h>

enum { POS_ABSENT, POS_I32, POS_F32, POS_MROPE };

typedef struct rope_kernels_case {
    const char *name;
    posenc_rope_style style;
    int64_t head_dim;
    uint32_t rotary_dim, rotary_offset; /* 0: the defaults */
    bool out_of_place;                  /* q_out and k_out */
    int positions;
    bool inverse;
    double attention_factor;
    bool cache; /* k into k_cache and v into v_cache by slot; k only read */
} rope_kernels_case;

#define BATCH 2
#define TOKENS 5
#define Q_HEADS 4
#define K_HEADS 2
#define BLOCKS 3
#define BLOCK_SIZE 4
#define VIEWS 7

static const rope_kernels_case rope_cases[] = {
    {.name = "neox in place, i32 positions", .style = POSENC_ROPE_NEOX, .head_dim = 64,
     .positions = POS_I32},
    {.name = "gptj out of place, f32 positions, inverse", .style = POSENC_ROPE_GPTJ,
     .head_dim = 64, .out_of_place = true, .positions = POS_F32, .inverse = true,
     .attention_factor = 0.75},
    {.name = "neox 32 dims at 16 of 64, out of place", .style = POSENC_ROPE_NEOX, .head_dim = 64,
     .rotary_dim = 32, .rotary_offset = 16, .out_of_place = true, .positions = POS_ABSENT},
    {.name = "gptj 16 of 48, out of place", .style = POSENC_ROPE_GPTJ, .head_dim = 48,
     .rotary_dim = 16, .out_of_place = true, .positions = POS_I32, .attention_factor = 1.25},
    {.name = "neox m-rope 6+13+13", .style = POSENC_ROPE_NEOX, .head_dim = 64,
     .positions = POS_MROPE},
    {.name = "neox kv cache", .style = POSENC_ROPE_NEOX, .head_dim = 64, .positions = POS_I32,
     .cache = true},
    {.name = "gptj kv cache, 32 dims at 32", .style = POSENC_ROPE_GPTJ, .head_dim = 64,
     .rotary_dim = 32, .rotary_offset = 32, .positions = POS_ABSENT, .attention_factor = 0.5,
     .cache = true},
};

/* The tensors of a case: q, q_out, k, k_out, k_cache, v, v_cache (absent ones size 0). */
typedef struct case_data {
    size_t bytes[VIEWS];
    unsigned char *host[VIEWS]; /* the inputs (outputs start as noise, which must stay where
                                 * nothing is written) */
} case_data;

enum { Q, Q_OUT, K, K_OUT, K_CACHE, V, V_CACHE };

static void fill(unsigned char *bytes, size_t size, posenc_dtype dtype, test_rng *rng)
{
    size_t element = posenc_dtype_size(dtype);
    for (size_t at = 0; at < size; at += element) {
        if (element == 4) {
            float value = (float)test_rng_uniform(rng, -2.0, 2.0);
            memcpy(bytes + at, &value, 4);
        } else {
            /* Finite f16 and bf16 values of either sign in [0.5, 2): random mantissa bits. */
            uint32_t r = test_rng_u32(rng);
            uint16_t base = dtype == POSENC_DTYPE_F16 ? 0x3800 : 0x3f00;
            uint16_t span = dtype == POSENC_DTYPE_F16 ? 0x800 : 0x100;
            uint16_t bits = (uint16_t)((r >> 31 ? 0x8000u : 0u) | (base + (r >> 8) % span));
            memcpy(bytes + at, &bits, 2);
        }
    }
}

/* One run: every tensor `skew` bytes into its own buffer. Outputs come back in `result`
 * (q, k, and the caches as they are after the call). */
static bool run_rope(posenc_context *ctx, const rope_kernels_case *c, posenc_dtype dtype,
                const case_data *data, size_t skew, unsigned char *result[VIEWS])
{
    posenc_buffer *buffers[VIEWS] = {0};
    posenc_tensor tensors[VIEWS];
    memset(tensors, 0, sizeof tensors);
    int64_t head_dim = c->head_dim;
    const int64_t shapes[VIEWS][4] = {
        {BATCH, TOKENS, Q_HEADS, head_dim},    {BATCH, TOKENS, Q_HEADS, head_dim},
        {BATCH, TOKENS, K_HEADS, head_dim},    {BATCH, TOKENS, K_HEADS, head_dim},
        {BLOCKS, BLOCK_SIZE, K_HEADS, head_dim}, {BATCH, TOKENS, K_HEADS, head_dim},
        {BLOCKS, BLOCK_SIZE, K_HEADS, head_dim},
    };
    bool ok = true;
    for (int v = 0; v < VIEWS && ok; v++) {
        if (!data->bytes[v])
            continue;
        unsigned char *initial = calloc(1, skew + data->bytes[v]);
        ok = initial != NULL;
        if (!ok)
            break;
        memcpy(initial + skew, data->host[v], data->bytes[v]);
        posenc_buffer_desc desc = {.size = skew + data->bytes[v], .initial_data = initial};
        CHECK_OK(posenc_buffer_create(ctx, &desc, &buffers[v]));
        free(initial);
        ok = buffers[v] != NULL;
        if (ok) {
            tensors[v] = posenc_tensor_of_buffer(buffers[v], dtype, 4, shapes[v]);
            tensors[v].offset = skew;
        }
    }

    /* Positions and slots: i32 or f32 words, always at byte 0. */
    int32_t positions_i32[BATCH * TOKENS * 3], slots[BATCH * TOKENS];
    float positions_f32[BATCH * TOKENS];
    for (int i = 0; i < BATCH * TOKENS; i++) {
        positions_f32[i] = (float)(i * 37) * 0.3125f - 20.0f;
        for (int component = 0; component < 3; component++)
            positions_i32[3 * i + component] = 1000 * (i + 1) + 977 * component - 3000;
        /* Slots in scrambled order; one -1 (padding) and one past the cache write nothing. */
        slots[i] = i == 3 ? -1 : i == 7 ? BLOCKS * BLOCK_SIZE : (i * 5 + 2) % (BLOCKS * BLOCK_SIZE);
    }
    posenc_buffer *positions = NULL, *slot_mapping = NULL;
    posenc_rope_desc desc = {
        .q = tensors[Q],
        .k = tensors[K],
        .style = c->style,
        .rotary_dim = c->rotary_dim,
        .rotary_offset = c->rotary_offset,
        .theta = 10000.0,
        .attention_factor = c->attention_factor,
        .inverse = c->inverse,
        .position_offset = c->positions == POS_ABSENT ? -7 : 0,
    };
    if (c->out_of_place) {
        desc.q_out = tensors[Q_OUT];
        desc.k_out = tensors[K_OUT];
    }
    if (ok && c->positions != POS_ABSENT) {
        bool f32 = c->positions == POS_F32;
        posenc_buffer_desc positions_desc = {
            .size = f32 ? sizeof positions_f32 : sizeof positions_i32,
            .initial_data = f32 ? (const void *)positions_f32 : positions_i32,
        };
        CHECK_OK(posenc_buffer_create(ctx, &positions_desc, &positions));
        ok = positions != NULL;
        const int64_t plain[2] = {BATCH, TOKENS}, mrope[3] = {BATCH, TOKENS, 3};
        if (ok && c->positions == POS_MROPE) {
            desc.positions = posenc_tensor_of_buffer(positions, POSENC_DTYPE_I32, 3, mrope);
            desc.multimodal = POSENC_ROPE_MROPE;
            /* Pairs 0-5 take t, 6-18 h and 19-31 w: a change inside blocks of 4 and 8 pairs. */
            desc.mrope_section[0] = 6;
            desc.mrope_section[1] = 13;
            desc.mrope_section[2] = 13;
        } else if (ok) {
            desc.positions = posenc_tensor_of_buffer(
                positions, f32 ? POSENC_DTYPE_F32 : POSENC_DTYPE_I32, 2, plain);
        }
    }
    if (ok && c->cache) {
        posenc_buffer_desc slots_desc = {.size = sizeof slots, .initial_data = slots};
        CHECK_OK(posenc_buffer_create(ctx, &slots_desc, &slot_mapping));
        ok = slot_mapping != NULL;
        const int64_t slots_shape[2] = {BATCH, TOKENS};
        if (ok)
            desc.slot_mapping =
                posenc_tensor_of_buffer(slot_mapping, POSENC_DTYPE_I32, 2, slots_shape);
        desc.k_cache = tensors[K_CACHE];
        desc.v = tensors[V];
        desc.v_cache = tensors[V_CACHE];
    }
    if (ok)
        CHECK_OK(posenc_rope(ctx, &desc));
    for (int v = 0; v < VIEWS && ok; v++) {
        if (!data->bytes[v])
            continue;
        unsigned char *bytes = malloc(skew + data->bytes[v]);
        result[v] = malloc(data->bytes[v]);
        ok = bytes && result[v];
        if (ok) {
            CHECK_OK(posenc_buffer_download(buffers[v], 0, bytes, skew + data->bytes[v]));
            memcpy(result[v], bytes + skew, data->bytes[v]);
        }
        free(bytes);
    }
    for (int v = 0; v < VIEWS; v++)
        posenc_buffer_destroy(buffers[v]);
    posenc_buffer_destroy(positions);
    posenc_buffer_destroy(slot_mapping);
    if (!ok)
        test_failures++;
    return ok;
}

static uint64_t kernels_built(posenc_context *ctx)
{
    posenc_stats stats;
    memset(&stats, 0, sizeof stats);
    CHECK_OK(posenc_context_stats(ctx, &stats));
    return stats.kernels_built;
}

static void run_rope_case(uint32_t device, const rope_kernels_case *c, posenc_dtype dtype)
{
    size_t element = posenc_dtype_size(dtype);
    size_t head = (size_t)c->head_dim * element;
    size_t q_bytes = BATCH * TOKENS * Q_HEADS * head, k_bytes = BATCH * TOKENS * K_HEADS * head;
    size_t cache_bytes = BLOCKS * BLOCK_SIZE * K_HEADS * head;
    case_data data = {.bytes = {q_bytes, c->out_of_place ? q_bytes : 0, k_bytes,
                                c->out_of_place ? k_bytes : 0, c->cache ? cache_bytes : 0,
                                c->cache ? k_bytes : 0, c->cache ? cache_bytes : 0}};
    test_rng rng = {0x9e3779b97f4a7c15ull ^ (uint64_t)(c - rope_cases) ^ ((uint64_t)dtype << 32)};
    bool ok = true;
    for (int v = 0; v < VIEWS && ok; v++) {
        if (!data.bytes[v])
            continue;
        data.host[v] = malloc(data.bytes[v]);
        ok = data.host[v] != NULL;
        if (ok)
            fill(data.host[v], data.bytes[v], dtype, &rng);
    }
    /* A fresh context, so that its kernel count tells which kernel each run built. */
    posenc_context *ctx = ok ? test_context_for_device(device) : NULL;
    unsigned char *blocks[VIEWS] = {0}, *general[VIEWS] = {0};
    if (ctx) {
        /* Every pass of the first run takes rope_blocks.comp, of the second rope.comp. */
        ok = run_rope(ctx, c, dtype, &data, 0, blocks);
        CHECK(kernels_built(ctx) == 1);
        ok = ok && run_rope(ctx, c, dtype, &data, element, general);
        CHECK(kernels_built(ctx) == 2);
        posenc_context_destroy(ctx);
    } else {
        test_failures++;
        ok = false;
    }
    for (int v = 0; v < VIEWS && ok; v++) {
        if (!data.bytes[v])
            continue;
        if (memcmp(blocks[v], general[v], data.bytes[v]) != 0) {
            test_failures++;
            size_t at = 0;
            while (blocks[v][at] == general[v][at])
                at++;
            fprintf(stderr, "  %s %s: tensor %d differs from byte %zu on\n", c->name,
                    posenc_dtype_name(dtype), v, at);
        }
    }
    /* The call did rotate: q's output is not its input. */
    if (ok)
        CHECK(memcmp(c->out_of_place ? blocks[Q_OUT] : blocks[Q], data.host[Q], q_bytes) != 0);
    for (int v = 0; v < VIEWS; v++) {
        free(data.host[v]);
        free(blocks[v]);
        free(general[v]);
    }
}

/* ---- Sinusoidal ------------------------------------------------------------------------------ */

enum { X_NONE, X_APART, X_IN_PLACE };

typedef struct sinusoidal_case {
    const char *name;
    int64_t batch, rows, d_model;
    posenc_sinusoidal_layout layout;
    int positions; /* POS_ABSENT, POS_I32 or POS_F32 */
    int x;
    double freq_shift, position_scale, input_scale, output_scale;
} sinusoidal_case;

static const sinusoidal_case sinusoidal_cases[] = {
    {.name = "interleaved table, offset rows", .batch = 2, .rows = 301, .d_model = 64,
     .layout = POSENC_SINUSOIDAL_INTERLEAVED, .positions = POS_ABSENT},
    {.name = "sin|cos, i32 positions, add", .batch = 2, .rows = 9, .d_model = 96,
     .layout = POSENC_SINUSOIDAL_SIN_COS, .positions = POS_I32, .x = X_APART,
     .input_scale = 8.0, .output_scale = 0.5},
    {.name = "cos|sin, f32 positions, shift, scale", .batch = 1, .rows = 37, .d_model = 32,
     .layout = POSENC_SINUSOIDAL_COS_SIN, .positions = POS_F32, .freq_shift = 1.0,
     .position_scale = 0.25},
    {.name = "interleaved, add in place", .batch = 3, .rows = 50, .d_model = 128,
     .layout = POSENC_SINUSOIDAL_INTERLEAVED, .positions = POS_ABSENT, .x = X_IN_PLACE,
     .input_scale = 2.0},
};

/* One run: out (and x) `skew` bytes into their buffers; out's bytes come back in `result`. */
static bool run_sinusoidal(posenc_context *ctx, const sinusoidal_case *c, posenc_dtype dtype,
                           const unsigned char *out_initial, const unsigned char *x_initial,
                           size_t bytes, size_t skew, unsigned char *result)
{
    const unsigned char *initial[2] = {out_initial, x_initial};
    posenc_buffer *buffers[2] = {0};
    const int64_t shape[3] = {c->batch, c->rows, c->d_model};
    bool ok = true;
    for (int i = 0; i < 2 && ok; i++) {
        if (i == 1 && c->x != X_APART)
            break;
        unsigned char *contents = calloc(1, skew + bytes);
        ok = contents != NULL;
        if (!ok)
            break;
        memcpy(contents + skew, initial[i], bytes);
        posenc_buffer_desc desc = {.size = skew + bytes, .initial_data = contents};
        CHECK_OK(posenc_buffer_create(ctx, &desc, &buffers[i]));
        free(contents);
        ok = buffers[i] != NULL;
    }
    int32_t positions_i32[3 * 301];
    float positions_f32[3 * 301];
    for (int i = 0; i < 3 * 301; i++) {
        positions_i32[i] = i * 7919 - 50000;
        positions_f32[i] = (float)i * 1.375f - 3.0f;
    }
    posenc_buffer *positions = NULL;
    posenc_sinusoidal_desc desc = {
        .layout = c->layout,
        .freq_shift = c->freq_shift,
        .position_scale = c->position_scale,
        .input_scale = c->input_scale,
        .output_scale = c->output_scale,
        .position_offset = c->positions == POS_ABSENT ? -130 : 0,
    };
    if (ok) {
        desc.out = posenc_tensor_of_buffer(buffers[0], dtype, 3, shape);
        desc.out.offset = skew;
        if (c->x == X_IN_PLACE)
            desc.x = desc.out;
        if (c->x == X_APART) {
            desc.x = posenc_tensor_of_buffer(buffers[1], dtype, 3, shape);
            desc.x.offset = skew;
        }
    }
    if (ok && c->positions != POS_ABSENT) {
        bool f32 = c->positions == POS_F32;
        posenc_buffer_desc positions_desc = {
            .size = (size_t)(c->batch * c->rows) * 4,
            .initial_data = f32 ? (const void *)positions_f32 : positions_i32,
        };
        CHECK_OK(posenc_buffer_create(ctx, &positions_desc, &positions));
        ok = positions != NULL;
        const int64_t positions_shape[2] = {c->batch, c->rows};
        if (ok)
            desc.positions = posenc_tensor_of_buffer(
                positions, f32 ? POSENC_DTYPE_F32 : POSENC_DTYPE_I32, 2, positions_shape);
    }
    if (ok)
        CHECK_OK(posenc_sinusoidal(ctx, &desc));
    unsigned char *contents = ok ? malloc(skew + bytes) : NULL;
    ok = ok && contents != NULL;
    if (ok) {
        CHECK_OK(posenc_buffer_download(buffers[0], 0, contents, skew + bytes));
        memcpy(result, contents + skew, bytes);
    }
    free(contents);
    posenc_buffer_destroy(buffers[0]);
    posenc_buffer_destroy(buffers[1]);
    posenc_buffer_destroy(positions);
    if (!ok)
        test_failures++;
    return ok;
}

static void run_sinusoidal_case(uint32_t device, const sinusoidal_case *c, posenc_dtype dtype)
{
    size_t element = posenc_dtype_size(dtype);
    size_t bytes = (size_t)(c->batch * c->rows * c->d_model) * element;
    unsigned char *out = malloc(bytes), *x = malloc(bytes);
    unsigned char *blocks = malloc(bytes), *general = malloc(bytes);
    test_rng rng = {0x243f6a8885a308d3ull ^ (uint64_t)(c - sinusoidal_cases) ^
                    ((uint64_t)dtype << 32)};
    bool ok = out && x && blocks && general;
    if (ok) {
        fill(out, bytes, dtype, &rng);
        fill(x, bytes, dtype, &rng);
    }
    posenc_context *ctx = ok ? test_context_for_device(device) : NULL;
    if (ctx) {
        ok = run_sinusoidal(ctx, c, dtype, out, x, bytes, 0, blocks);
        CHECK(kernels_built(ctx) == 1);
        ok = ok && run_sinusoidal(ctx, c, dtype, out, x, bytes, element, general);
        CHECK(kernels_built(ctx) == 2);
        posenc_context_destroy(ctx);
    } else {
        ok = false;
        test_failures++;
    }
    if (ok && memcmp(blocks, general, bytes) != 0) {
        test_failures++;
        size_t at = 0;
        while (blocks[at] == general[at])
            at++;
        fprintf(stderr, "  %s %s: differs from byte %zu on\n", c->name, posenc_dtype_name(dtype),
                at);
    }
    if (ok)
        CHECK(memcmp(blocks, out, bytes) != 0); /* the call did write */
    free(out);
    free(x);
    free(blocks);
    free(general);
}

/* ---- Rounding to 16 bits --------------------------------------------------------------------- */

/* Every 16-bit pattern of a normal value or an infinity (subnormal inputs and NaN payloads are
 * the device's own business: Vulkan may flush the first and is silent on the second). */
static bool normal_input(posenc_dtype dtype, uint16_t bits)
{
    bool f16 = dtype == POSENC_DTYPE_F16;
    uint16_t exponent = f16 ? (bits >> 10) & 0x1f : (bits >> 7) & 0xff;
    uint16_t mantissa = f16 ? bits & 0x3ff : bits & 0x7f;
    return exponent != 0 && (exponent != (f16 ? 0x1f : 0xff) || mantissa == 0);
}

/* q [1024 heads, 128 dims] holds all 65536 patterns in the first halves of its heads (NeoX: the
 * a of each pair), zeros in the second: at position 0, cos = 1 and sin = 0 exactly, so a
 * becomes a * attention_factor rounded to 16 bits once. */
static void check_rounding(uint32_t device, posenc_dtype dtype, double factor)
{
    enum { HEADS = 1024, DIM = 128, PAIRS = DIM / 2 };
    size_t bytes = (size_t)HEADS * DIM * 2;
    uint16_t *input = calloc(1, bytes), *got = malloc(bytes);
    posenc_context *ctx = input && got ? test_context_for_device(device) : NULL;
    for (int skew = 0; ctx && skew <= 2; skew += 2) { /* the block kernel, then rope.comp */
        for (uint32_t i = 0; i < 65536; i++)
            input[(i / PAIRS) * DIM + i % PAIRS] = (uint16_t)i;
        unsigned char *contents = calloc(1, bytes + (size_t)skew);
        posenc_buffer *buffer = NULL;
        if (contents) {
            memcpy(contents + skew, input, bytes);
            posenc_buffer_desc desc = {.size = bytes + (size_t)skew, .initial_data = contents};
            CHECK_OK(posenc_buffer_create(ctx, &desc, &buffer));
        }
        if (buffer) {
            const int64_t shape[3] = {1, HEADS, DIM};
            posenc_rope_desc desc = {.q = posenc_tensor_of_buffer(buffer, dtype, 3, shape),
                                     .attention_factor = factor};
            desc.q.offset = (uint64_t)skew;
            CHECK_OK(posenc_rope(ctx, &desc));
            CHECK_OK(posenc_buffer_download(buffer, (uint64_t)skew, got, bytes));
            int bad = 0;
            for (uint32_t i = 0; i < 65536; i++) {
                if (!normal_input(dtype, (uint16_t)i))
                    continue;
                bool f16 = dtype == POSENC_DTYPE_F16;
                float value = (f16 ? posenc__f16_to_f32((uint16_t)i)
                                   : posenc__bf16_to_f32((uint16_t)i)) *
                              (float)factor;
                uint16_t expected = f16 ? posenc__f32_to_f16(value) : posenc__f32_to_bf16(value);
                uint16_t out = got[(i / PAIRS) * DIM + i % PAIRS];
                if (out != expected && bad++ < 4)
                    fprintf(stderr, "  %s x %.9g (%s): 0x%04x gives 0x%04x, expected 0x%04x\n",
                            posenc_dtype_name(dtype), factor, skew ? "rope.comp" : "blocks",
                            (unsigned)i, (unsigned)out, (unsigned)expected);
            }
            if (bad)
                test_failures++;
        } else {
            test_failures++;
        }
        posenc_buffer_destroy(buffer);
        free(contents);
    }
    CHECK(ctx == NULL || kernels_built(ctx) == 2);
    if (!ctx)
        test_failures++;
    posenc_context_destroy(ctx);
    free(input);
    free(got);
}

int main(void)
{
    uint32_t count = 0, vulkan_devices = 0;
    CHECK_OK(posenc_device_count(&count));
    const posenc_dtype dtypes[3] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};
    for (uint32_t i = 0; i < count; i++) {
        posenc_device_info info;
        if (posenc_device_get(i, &info) != POSENC_OK || info.backend != POSENC_BACKEND_VULKAN)
            continue;
        vulkan_devices++;
        printf("  vulkan:%u %s\n", info.backend_index, info.name);
        for (int d = 0; d < 3; d++) {
            for (size_t c = 0; c < sizeof rope_cases / sizeof rope_cases[0]; c++)
                run_rope_case(i, &rope_cases[c], dtypes[d]);
            for (size_t c = 0; c < sizeof sinusoidal_cases / sizeof sinusoidal_cases[0]; c++)
                run_sinusoidal_case(i, &sinusoidal_cases[c], dtypes[d]);
        }
        /* 1 + 2^-11 puts f16 results half an ulp above a (ties), and takes 65504 past 65520
         * (infinity); 1 + 2^-8 the same for bf16; 0.75 and 0.6875 round into f16 subnormals
         * and through every mantissa. */
        const double factors[4] = {1.0 + 0x1p-11, 1.0 + 0x1p-8, 0.75, 0.6875};
        for (int d = 1; d < 3; d++) {
            for (int f = 0; f < 4; f++)
                check_rounding(i, dtypes[d], factors[f]);
        }
    }
    if (vulkan_devices == 0) {
        const char *reason = "";
        posenc_backend_status(POSENC_BACKEND_VULKAN, &reason);
        return test_device_absent("test_vulkan_kernels", "vulkan", reason);
    }
    return test_finish("test_vulkan_kernels");
}
