/* SPDX-License-Identifier: MIT */
/* RoPE's two Vulkan kernels give the same bits. shaders/rope_blocks.comp runs where every head
 * is a run of whole 16-byte blocks (the common, contiguous layout), shaders/rope.comp anywhere
 * else; test_rope and the others check both against the float64 reference, this test checks
 * that they agree exactly. Each case runs twice on device buffers of the same contents: once
 * with every tensor at byte 0 (rope_blocks.comp) and once with every tensor one element further
 * on, off the 16-byte grid (rope.comp); the context's kernel count shows that each run took its
 * own kernel. Cases: both styles, in place and out of place, partial rotary dims with and
 * without rotary_offset, grouped k heads, positions absent, i32, fractional f32 and M-RoPE
 * (sections that change component inside a block), inverse and attention_factor, and the paged
 * KV cache writes of k and v; each in f32, f16 and bf16. Under the vulkan_fallbacks
 * environment rope.comp is the variant that packs 16-bit elements two per word. */
#include "required_devices.h"
#include "test_common.h"

#include <stdlib.h>
#include <string.h>

enum { POS_ABSENT, POS_I32, POS_F32, POS_MROPE };

typedef struct kernels_case {
    const char *name;
    posenc_rope_style style;
    int64_t head_dim;
    uint32_t rotary_dim, rotary_offset; /* 0: the defaults */
    bool out_of_place;                  /* q_out and k_out */
    int positions;
    bool inverse;
    double attention_factor;
    bool cache; /* k into k_cache and v into v_cache by slot; k only read */
} kernels_case;

#define BATCH 2
#define TOKENS 5
#define Q_HEADS 4
#define K_HEADS 2
#define BLOCKS 3
#define BLOCK_SIZE 4
#define VIEWS 7

static const kernels_case cases[] = {
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
static bool run(posenc_context *ctx, const kernels_case *c, posenc_dtype dtype,
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

static void run_case(uint32_t device, const kernels_case *c, posenc_dtype dtype)
{
    size_t element = posenc_dtype_size(dtype);
    size_t head = (size_t)c->head_dim * element;
    size_t q_bytes = BATCH * TOKENS * Q_HEADS * head, k_bytes = BATCH * TOKENS * K_HEADS * head;
    size_t cache_bytes = BLOCKS * BLOCK_SIZE * K_HEADS * head;
    case_data data = {.bytes = {q_bytes, c->out_of_place ? q_bytes : 0, k_bytes,
                                c->out_of_place ? k_bytes : 0, c->cache ? cache_bytes : 0,
                                c->cache ? k_bytes : 0, c->cache ? cache_bytes : 0}};
    test_rng rng = {0x9e3779b97f4a7c15ull ^ (uint64_t)(c - cases) ^ ((uint64_t)dtype << 32)};
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
        ok = run(ctx, c, dtype, &data, 0, blocks);
        CHECK(kernels_built(ctx) == 1);
        ok = ok && run(ctx, c, dtype, &data, element, general);
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
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            for (int d = 0; d < 3; d++)
                run_case(i, &cases[c], dtypes[d]);
        }
    }
    if (vulkan_devices == 0) {
        const char *reason = "";
        posenc_backend_status(POSENC_BACKEND_VULKAN, &reason);
        return test_device_absent("test_vulkan_rope_kernels", "vulkan", reason);
    }
    return test_finish("test_vulkan_rope_kernels");
}
