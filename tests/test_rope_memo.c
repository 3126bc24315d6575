/* SPDX-License-Identifier: MIT */
/* The remembered RoPE descriptor (core/rope_memo.c), on every device: one context taking the
 * same descriptors over and over (decode steps, with positions, pointers, shapes, dtypes and
 * caller frequencies changing between them) gives bit for bit what a fresh context gives, where
 * every call is prepared in full; and a descriptor changed after a remembered call is still
 * validated: the same error and message as a fresh context, outputs untouched. The same steps
 * at one position (a model's layers in one decode step) check the CPU's kept token table
 * (cpu_rope.c): every descriptor that changes the table (style, scales, frequencies) must not
 * take the one a descriptor before it left. */
#include "test_common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BYTES 65536
#define POSITIONS_AT 60000 /* bytes: the positions tensor's place in an arena */
#define VARIANTS 13

/* Caller memory of one context: every tensor of the descriptors lives in it. */
typedef struct arena {
    _Alignas(64) unsigned char bytes[ARENA_BYTES];
    double inv_freq[8];
} arena;

static arena memo_arena, fresh_arena, snapshot;

static const double base_inv_freq[8] = {1.0, 0.75, 0.3, 0.1, 0.031, 0.01, 1e-3, 1.5e-5};

static posenc_dtype variant_dtype(int variant)
{
    return variant == 2 ? POSENC_DTYPE_F16 : variant == 3 ? POSENC_DTYPE_BF16 : POSENC_DTYPE_F32;
}

static posenc_tensor host_tensor(arena *a, size_t at, posenc_dtype dtype, uint32_t ndim,
                                 const int64_t *shape)
{
    return posenc_tensor_of_host(a->bytes + at, dtype, ndim, shape);
}

/* Descriptor `variant` on arena `a` at `position`: each is a decode step of its own kind. */
static posenc_rope_desc make_desc(int variant, arena *a, int32_t position)
{
    const int64_t q1[3] = {1, 4, 64}, k1[3] = {1, 2, 64};
    const int64_t q3[3] = {3, 4, 64}, k3[3] = {3, 2, 64};
    const int64_t one[1] = {1}, three[1] = {3}, q2d[2] = {1, 64};
    posenc_rope_desc d = {
        .q = host_tensor(a, 0, POSENC_DTYPE_F32, 3, q1),
        .k = host_tensor(a, 4096, POSENC_DTYPE_F32, 3, k1),
        .theta = 500000.0,
        .position_offset = position,
    };
    switch (variant) {
    case 0: break; /* f32 NeoX in place */
    case 1: d.q = host_tensor(a, 1024, POSENC_DTYPE_F32, 3, q1); break; /* q moved */
    case 2:
        d.q = host_tensor(a, 0, POSENC_DTYPE_F16, 3, q1);
        d.k = host_tensor(a, 4096, POSENC_DTYPE_F16, 3, k1);
        break;
    case 3:
        d.q = host_tensor(a, 0, POSENC_DTYPE_BF16, 3, q1);
        d.k = host_tensor(a, 4096, POSENC_DTYPE_BF16, 3, k1);
        d.style = POSENC_ROPE_GPTJ;
        break;
    case 4: /* positions given: their contents change at every step */
        d.positions = host_tensor(a, POSITIONS_AT, POSENC_DTYPE_I32, 1, one);
        d.position_offset = 0;
        break;
    case 5: /* three tokens */
        d.q = host_tensor(a, 0, POSENC_DTYPE_F32, 3, q3);
        d.k = host_tensor(a, 8192, POSENC_DTYPE_F32, 3, k3);
        d.positions = host_tensor(a, POSITIONS_AT, POSENC_DTYPE_I32, 1, three);
        d.position_offset = 0;
        break;
    case 6: /* out of place */
        d.q_out = host_tensor(a, 16384, POSENC_DTYPE_F32, 3, q1);
        d.k_out = host_tensor(a, 20480, POSENC_DTYPE_F32, 3, k1);
        break;
    case 7: /* caller frequencies, whose values change in place between steps */
        d.theta = 0.0; /* replaced by them */
        d.inv_freq = a->inv_freq;
        d.inv_freq_count = 8;
        d.rotary_dim = 16;
        break;
    case 8:
        d.scaling.type = POSENC_ROPE_SCALING_LINEAR;
        d.scaling.factor = 2.0;
        d.attention_factor = 0.5;
        d.inverse = true;
        break;
    case 9: /* q only, [tokens, head_dim] */
        d.q = host_tensor(a, 0, POSENC_DTYPE_F32, 2, q2d);
        d.k = (posenc_tensor){0};
        break;
    case 10: /* the inverse rotation: the table's sin negated */
        d.inverse = true;
        break;
    case 11: d.attention_factor = 2.0; break; /* the table scaled */
    default: /* dynamic NTK with the length from the positions: never remembered */
        d.scaling.type = POSENC_ROPE_SCALING_DYNAMIC_NTK;
        d.scaling.factor = 2.0;
        d.scaling.original_max_positions = 64;
        break;
    }
    return d;
}

/* The same inputs in both arenas: random data of `dtype`, the positions, and the
 * frequencies of `step`. */
static void fill_arenas(test_rng *rng, posenc_dtype dtype, int32_t position, int step)
{
    for (size_t i = 0; i < POSITIONS_AT; i += 4) {
        float value = (float)test_rng_uniform(rng, -2.0, 2.0);
        /* 16-bit values of ordinary size (f16 about 1 to 2, bf16 about 2^-7), either sign */
        uint16_t half = (uint16_t)(0x3c00 + test_rng_u32(rng) % 0x400);
        uint16_t halves[2] = {half, (uint16_t)(half ^ 0x8000)};
        if (dtype == POSENC_DTYPE_F32)
            memcpy(memo_arena.bytes + i, &value, 4);
        else
            memcpy(memo_arena.bytes + i, halves, 4);
    }
    for (int t = 0; t < 3; t++) {
        int32_t p = position + 7 * t;
        memcpy(memo_arena.bytes + POSITIONS_AT + 4 * t, &p, 4);
    }
    for (int j = 0; j < 8; j++)
        memo_arena.inv_freq[j] = base_inv_freq[j] * ((step / 2) % 2 ? 1.5 : 1.0);
    memcpy(&fresh_arena, &memo_arena, sizeof memo_arena);
}

/* A context on the device of `info`, fresh: nothing remembered. */
static posenc_context *fresh_context(const posenc_device_info *info)
{
    uint32_t index = test_device_index(info);
    if (index != UINT32_MAX)
        return test_context_for_device(index);
    test_failures++;
    fprintf(stderr, "  %s: not found again\n", info->name);
    return NULL;
}

/* The descriptors over and over, at position 1000 + position_step * step. */
static void test_repeated_steps(posenc_context *context, const posenc_device_info *info,
                                int32_t position_step)
{
    /* Fresh contexts cost milliseconds on a GPU: fewer steps there. */
    const int steps = info->backend == POSENC_BACKEND_CPU ? 3 * 2 * VARIANTS : 2 * VARIANTS;
    test_rng rng = {0x5eed};
    int mismatches = 0;
    for (int step = 0; step < steps; step++) {
        /* Each variant a few steps running, then all of them again in another order, so that a
         * descriptor comes back after another replaced the remembered one. */
        int run = info->backend == POSENC_BACKEND_CPU ? 3 : 1;
        int variant = step < run * VARIANTS ? step / run : (step * 7) % VARIANTS;
        int32_t position = 1000 + position_step * step;
        fill_arenas(&rng, variant_dtype(variant), position, step);
        posenc_rope_desc memo_desc = make_desc(variant, &memo_arena, position);
        posenc_rope_desc fresh_desc = make_desc(variant, &fresh_arena, position);
        posenc_status memo_status = posenc_rope(context, &memo_desc);
        posenc_context *fresh = fresh_context(info);
        if (!fresh)
            return;
        posenc_status fresh_status = posenc_rope(fresh, &fresh_desc);
        posenc_context_destroy(fresh);
        CHECK_OK(memo_status);
        CHECK(memo_status == fresh_status);
        if (memcmp(&memo_arena, &fresh_arena, sizeof memo_arena) != 0 && mismatches++ < 4) {
            test_failures++;
            fprintf(stderr, "  step %d (descriptor %d at position %d): not the bits of a fresh "
                            "context\n",
                    step, variant, position);
        }
    }
}

/* One change made to a descriptor after the descriptor itself went through twice. */
typedef struct change {
    const char *what;
    int variant;
    void (*apply)(posenc_rope_desc *desc, arena *a);
} change;

static void odd_rotary_dim(posenc_rope_desc *d, arena *a)
{
    (void)a;
    d->rotary_dim = 63;
}
static void offset_with_positions(posenc_rope_desc *d, arena *a)
{
    (void)a;
    d->position_offset = 5;
}
static void offset_past_int32(posenc_rope_desc *d, arena *a)
{
    (void)a;
    d->position_offset = INT32_MAX - 1; /* three tokens: the last one passes INT32_MAX */
}
static void bad_frequency_in_place(posenc_rope_desc *d, arena *a)
{
    (void)d;
    a->inv_freq[3] = -1.0;
}
static void outputs_overlap(posenc_rope_desc *d, arena *a)
{
    d->k_out.host = a->bytes + 16384 + 512;
}
static void three_tokens_no_positions(posenc_rope_desc *d)
{
    d->positions = (posenc_tensor){0};
}

static void test_changes(posenc_context *context, const posenc_device_info *info)
{
    static const change changes[] = {
        {"odd rotary_dim", 0, odd_rotary_dim},
        {"position_offset with positions", 4, offset_with_positions},
        {"position_offset past INT32_MAX", 5, offset_past_int32},
        {"caller frequency changed in place", 7, bad_frequency_in_place},
        {"k_out over q_out", 6, outputs_overlap},
    };
    test_rng rng = {0xc4a6e};
    for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        const change *c = &changes[i];
        fill_arenas(&rng, variant_dtype(c->variant), 100, 0);
        posenc_rope_desc good = make_desc(c->variant, &memo_arena, 100);
        if (c->apply == offset_past_int32)
            three_tokens_no_positions(&good);
        CHECK_OK(posenc_rope(context, &good));
        CHECK_OK(posenc_rope(context, &good)); /* remembered */

        posenc_rope_desc bad = good;
        c->apply(&bad, &memo_arena);
        memcpy(&snapshot, &memo_arena, sizeof memo_arena);
        posenc_status memo_status = posenc_rope(context, &bad);
        char memo_message[512];
        snprintf(memo_message, sizeof memo_message, "%s", posenc_context_last_error(context));
        CHECK(memcmp(&snapshot, &memo_arena, sizeof memo_arena) == 0); /* untouched */

        memcpy(&fresh_arena, &snapshot, sizeof snapshot);
        posenc_rope_desc fresh_bad = make_desc(c->variant, &fresh_arena, 100);
        if (c->apply == offset_past_int32)
            three_tokens_no_positions(&fresh_bad);
        c->apply(&fresh_bad, &fresh_arena);
        posenc_context *fresh = fresh_context(info);
        if (!fresh)
            return;
        posenc_status fresh_status = posenc_rope(fresh, &fresh_bad);
        if (memo_status == POSENC_OK || memo_status != fresh_status ||
            strcmp(memo_message, posenc_context_last_error(fresh)) != 0) {
            test_failures++;
            fprintf(stderr, "  %s: %s \"%s\", a fresh context %s \"%s\"\n", c->what,
                    posenc_status_name(memo_status), memo_message,
                    posenc_status_name(fresh_status), posenc_context_last_error(fresh));
        }
        posenc_context_destroy(fresh);
        /* The remembered descriptor is still right after the failure. */
        memo_arena.inv_freq[3] = base_inv_freq[3];
        CHECK_OK(posenc_rope(context, &good));
    }
}

/* A buffer's state is read again at each call: mapped, or destroyed and another made (at the
 * same address, where the allocator gives it back) too small for the view. */
static void test_buffer_changes(posenc_context *context, const posenc_device_info *info)
{
    (void)info;
    const int64_t shape[3] = {1, 4, 64};
    const uint64_t size = 4 * 64 * 4;
    float initial[4 * 64];
    for (int i = 0; i < 4 * 64; i++)
        initial[i] = (float)(i % 13) - 6.0f;
    posenc_buffer *buffer = NULL;
    posenc_buffer_desc buffer_desc = {.size = size, .initial_data = initial};
    CHECK_OK(posenc_buffer_create(context, &buffer_desc, &buffer));
    if (!buffer)
        return;
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, shape),
        .position_offset = 3,
    };
    CHECK_OK(posenc_rope(context, &desc));
    CHECK_OK(posenc_rope(context, &desc)); /* remembered */
    void *mapped = NULL;
    if (posenc_buffer_map(buffer, &mapped) == POSENC_OK) {
        CHECK_STATUS(posenc_rope(context, &desc), POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(context), "q.buffer: is mapped");
        CHECK_OK(posenc_buffer_unmap(buffer));
        CHECK_OK(posenc_rope(context, &desc));
    }
    /* Buffers made until one takes the destroyed one's address; the others are kept
     * meanwhile, so that each try gets another block. Allocators hand a freed block back
     * soonest once their per-thread caches are full: a few buffers freed first fill them. */
    enum { FILLERS = 16, TRIES = 16 };
    posenc_buffer_desc small_desc = {.size = size / 2, .initial_data = initial};
    posenc_buffer *fillers[FILLERS] = {0};
    for (int i = 0; i < FILLERS; i++)
        CHECK_OK(posenc_buffer_create(context, &small_desc, &fillers[i]));
    for (int i = 0; i < FILLERS; i++)
        posenc_buffer_destroy(fillers[i]);
    uintptr_t old_address = (uintptr_t)buffer;
    posenc_buffer_destroy(buffer);
    posenc_buffer *tries[TRIES] = {0};
    buffer = NULL;
    for (int i = 0; i < TRIES && !buffer; i++) {
        CHECK_OK(posenc_buffer_create(context, &small_desc, &tries[i]));
        if ((uintptr_t)tries[i] == old_address)
            buffer = tries[i];
    }
    if (!buffer)
        buffer = tries[0];
    if (buffer) {
        desc.q.buffer = buffer; /* the same bytes as before when the address came back */
        CHECK_STATUS(posenc_rope(context, &desc), POSENC_OUT_OF_BOUNDS);
        CHECK_MESSAGE(posenc_context_last_error(context), "q");
        float after[4 * 64 / 2];
        CHECK_OK(posenc_buffer_download(buffer, 0, after, size / 2));
        CHECK(memcmp(after, initial, size / 2) == 0); /* untouched */
        printf("    a smaller buffer %s the address of the destroyed one\n",
               (uintptr_t)buffer == old_address ? "took" : "did not take");
    }
    for (int i = 0; i < TRIES; i++)
        posenc_buffer_destroy(tries[i]);
}

/* ---- the CPU's kept tables of many rows ---- */

enum { KEPT_TOKENS = 160, KEPT_HEADS = 5, KEPT_DIM = 128 }; /* q 4 heads, k 1 */

/* One call of test_kept_rows: what it changes from the call before. */
typedef struct kept_step {
    const char *what;
    int64_t tokens;
    posenc_dtype dtype;
    posenc_rope_style style;
    bool inverse;
    double attention_factor;
    bool float_positions;
    int32_t shift;       /* added to every position */
    int32_t moved_row;   /* -1, or a row whose position is changed */
    int32_t moved_to;
} kept_step;

static const kept_step kept_steps[] = {
    {"NeoX f32", 96, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, false, 0.0, false, 0, -1, 0},
    {"the same again", 96, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, false, 0.0, false, 0, -1, 0},
    {"one row moved", 96, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, false, 0.0, false, 0, 61, 7},
    {"every row moved", 96, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, false, 0.0, false, 1, 61, 7},
    {"more rows", 160, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, false, 0.0, false, 1, 61, 7},
    {"bf16", 160, POSENC_DTYPE_BF16, POSENC_ROPE_NEOX, false, 0.0, false, 1, 61, 7},
    {"inverse", 160, POSENC_DTYPE_BF16, POSENC_ROPE_NEOX, true, 0.0, false, 1, 61, 7},
    {"scaled", 160, POSENC_DTYPE_BF16, POSENC_ROPE_NEOX, true, 2.0, false, 1, 61, 7},
    {"GPT-J", 160, POSENC_DTYPE_F32, POSENC_ROPE_GPTJ, false, 0.0, false, 1, 61, 7},
    {"GPT-J, one row", 1, POSENC_DTYPE_F32, POSENC_ROPE_GPTJ, false, 0.0, false, 1, -1, 0},
    {"GPT-J again", 160, POSENC_DTYPE_F32, POSENC_ROPE_GPTJ, false, 0.0, false, 1, -1, 0},
    {"float positions, one out of range", 160, POSENC_DTYPE_F32, POSENC_ROPE_GPTJ, false, 0.0,
     true, 0, 3, 0},
    {"that one at 0.0", 160, POSENC_DTYPE_F32, POSENC_ROPE_GPTJ, false, 0.0, true, 0, 3, 1},
    {"NeoX f16 once more", 96, POSENC_DTYPE_F16, POSENC_ROPE_NEOX, false, 0.0, false, 0, -1, 0},
};

typedef struct kept_memory {
    _Alignas(64) uint16_t data[KEPT_TOKENS * KEPT_HEADS * KEPT_DIM * 2];
    float positions[KEPT_TOKENS]; /* i32 or f32 */
} kept_memory;

static kept_memory kept_memo, kept_fresh;

static posenc_rope_desc kept_desc(const kept_step *step, kept_memory *m)
{
    size_t element = step->dtype == POSENC_DTYPE_F32 ? 4 : 2;
    const int64_t q_shape[3] = {step->tokens, KEPT_HEADS - 1, KEPT_DIM};
    const int64_t k_shape[3] = {step->tokens, 1, KEPT_DIM};
    const int64_t positions_shape[1] = {step->tokens};
    return (posenc_rope_desc){
        .q = posenc_tensor_of_host(m->data, step->dtype, 3, q_shape),
        .k = posenc_tensor_of_host((uint8_t *)m->data +
                                       (size_t)step->tokens * (KEPT_HEADS - 1) * KEPT_DIM *
                                           element,
                                   step->dtype, 3, k_shape),
        .positions = posenc_tensor_of_host(m->positions, step->float_positions
                                                             ? POSENC_DTYPE_F32
                                                             : POSENC_DTYPE_I32,
                                           1, positions_shape),
        .style = step->style,
        .theta = 10000.0,
        .inverse = step->inverse,
        .attention_factor = step->attention_factor,
    };
}

/* A prefill's rows rotated by one context on two threads, call after call, changing what the
 * rows' tables depend on a little at a time (cpu_rope.c: a row takes its kept table only where
 * it was built at its position, for the same scales, direction and layout), give the bits of a
 * fresh context on one thread every time. */
static void test_kept_rows(void)
{
    posenc_context_desc desc = {.backend = POSENC_BACKEND_CPU,
                                .flags = POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_NO_FALLBACK,
                                .num_threads = 2};
    posenc_context *context = NULL;
    CHECK_OK(posenc_context_create(&desc, &context));
    if (!context)
        return;
    test_rng rng = {0x4b3e7};
    for (size_t i = 0; i < sizeof kept_steps / sizeof kept_steps[0]; i++) {
        const kept_step *step = &kept_steps[i];
        for (size_t e = 0; e < sizeof kept_memo.data / sizeof kept_memo.data[0]; e += 2) {
            float value = (float)test_rng_uniform(&rng, -2.0, 2.0);
            uint16_t half = (uint16_t)(0x3c00 + test_rng_u32(&rng) % 0x400);
            if (step->dtype == POSENC_DTYPE_F32)
                memcpy(&kept_memo.data[e], &value, 4);
            else
                kept_memo.data[e] = half, kept_memo.data[e + 1] = (uint16_t)(half ^ 0x8000);
        }
        for (int32_t t = 0; t < KEPT_TOKENS; t++) {
            int32_t p = 1000 + 3 * t + step->shift;
            if (t == step->moved_row)
                p = step->moved_to;
            if (!step->float_positions) {
                memcpy(&kept_memo.positions[t], &p, 4);
                continue;
            }
            /* moved_to 0: past the positions a float takes (that row is NaN) */
            kept_memo.positions[t] = t == step->moved_row && !step->moved_to ? 1e30f
                                     : t == step->moved_row                  ? 0.0f
                                                                              : (float)p;
        }
        memcpy(&kept_fresh, &kept_memo, sizeof kept_memo);
        posenc_rope_desc memo_desc = kept_desc(step, &kept_memo);
        posenc_rope_desc fresh_desc = kept_desc(step, &kept_fresh);
        posenc_context_desc one_thread = desc;
        one_thread.num_threads = 1;
        posenc_context *fresh = NULL;
        CHECK_OK(posenc_context_create(&one_thread, &fresh));
        if (!fresh)
            break;
        CHECK_OK(posenc_rope(context, &memo_desc));
        CHECK_OK(posenc_rope(fresh, &fresh_desc));
        posenc_context_destroy(fresh);
        if (memcmp(&kept_memo, &kept_fresh, sizeof kept_memo) != 0) {
            test_failures++;
            fprintf(stderr, "  kept rows, call %zu (%s): not the bits of a fresh context\n", i,
                    step->what);
        }
    }
    posenc_context_destroy(context);
}

static void test_device(posenc_context *context, const posenc_device_info *info)
{
    test_repeated_steps(context, info, 37);
    test_repeated_steps(context, info, 0);
    test_changes(context, info);
    test_buffer_changes(context, info);
}

int main(void)
{
    printf("test_rope_memo: repeated descriptors against fresh contexts\n");
    test_for_each_device(test_device);
    test_kept_rows();
    return test_finish("test_rope_memo");
}
