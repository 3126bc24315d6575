/* SPDX-License-Identifier: MIT */
/* The paged KV cache write of posenc_rope (k_cache, slot_mapping, v, v_cache) on every device,
 * dtype and kind of memory: each cache row a slot names holds the rotated k of its token, bit
 * for bit what a plain RoPE writes to k_out and within the promise of the float64 reference,
 * and v bit for bit; every other byte of the caches, and k when only the cache takes it, is
 * left as it was. Bad descriptors are refused naming the field, with nothing written. */
#include "reference.h"
#include "test_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM 128
#define MAX_REPORTS 8
#define FILL 0x5a /* every cache byte before the call: rows without a slot must keep it */

enum k_mode { K_READ_ONLY, K_OUT, K_IN_PLACE };

typedef struct kv_case {
    const char *name;
    posenc_rope_style style;
    int64_t batch, tokens, q_heads, k_heads, head_dim;
    uint32_t rotary_dim;        /* 0: head_dim - rotary_offset */
    uint32_t rotary_offset;
    int64_t blocks, block_size; /* blocks 0: a 3-D cache of block_size slots */
    bool hnd;                   /* 4-D cache stored [blocks, heads, block_size, dim] */
    bool fused_kv;              /* k and v interleaved per token in one allocation */
    enum k_mode k_mode;
    bool with_v;
    const int32_t *positions;   /* batch * tokens, or NULL: the token index */
    const int32_t *slots;       /* batch * tokens */
} kv_case;

static const int32_t slots_mixed[] = {3, -1, 15, 0, 99};
static const int32_t slots_batch[] = {5, 12, -7, 0, 15, 9};
static const int32_t positions_batch[] = {100000, 7, 2000000, 3, 4, 5000000};
static const int32_t slots_edges[] = {7, 8, 5, INT32_MIN, 3, 2, 1};
static const int32_t slots_decode[] = {37};
static const int32_t positions_decode[] = {1048575};

static const kv_case cases[] = {
    {"neox, 3-D cache, k read only, v", POSENC_ROPE_NEOX, 1, 5, 4, 2, 64, 0, 0, 0, 16, false,
     false, K_READ_ONLY, true, NULL, slots_mixed},
    {"gptj partial, batch 2, HND blocks, k in place, v", POSENC_ROPE_GPTJ, 2, 3, 2, 2, 48, 32, 0,
     4, 4, true, false, K_IN_PLACE, true, positions_batch, slots_batch},
    {"neox 6 of 10 from dim 2, k_out, slot edges", POSENC_ROPE_NEOX, 1, 7, 3, 1, 10, 6, 2, 0, 8,
     false, false, K_OUT, false, NULL, slots_edges},
    {"gptj, fused kv, NHD blocks, v", POSENC_ROPE_GPTJ, 1, 5, 2, 3, 16, 0, 0, 4, 4, false, true,
     K_READ_ONLY, true, NULL, slots_mixed},
    {"decode 32+8 x 128 at 2^20", POSENC_ROPE_NEOX, 1, 1, 32, 8, 128, 0, 0, 0, 64, false, false,
     K_READ_ONLY, true, positions_decode, slots_decode},
};

static const posenc_dtype dtypes[] = {POSENC_DTYPE_F32, POSENC_DTYPE_F16, POSENC_DTYPE_BF16};

/* Everything one run of a case allocates. */
typedef struct kv_run {
    test_memory q, k, k_out, kv, positions, slots, k_cache, v_cache, v;
    test_memory plain_q, plain_k; /* the plain RoPE the fused call is compared with */
} kv_run;

static void run_destroy(kv_run *run)
{
    test_memory *all[] = {&run->q,       &run->k,       &run->k_out,   &run->kv,
                          &run->positions, &run->slots, &run->k_cache, &run->v_cache,
                          &run->v,       &run->plain_q, &run->plain_k};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->bytes)
            test_memory_destroy(all[i]);
}

static void fill_values(unsigned char *bytes, posenc_dtype dtype, size_t count, test_rng *rng)
{
    size_t e = posenc_dtype_size(dtype);
    for (size_t i = 0; i < count; i++)
        ref_store(dtype, bytes + i * e, test_rng_uniform(rng, -2.0, 2.0));
}

/* Byte offset of cache element (slot, h, d) in the case's cache layout. */
static size_t cache_at(const kv_case *c, size_t e, int64_t slot, int64_t h, int64_t d)
{
    int64_t bs = c->block_size, H = c->k_heads, D = c->head_dim;
    int64_t block = slot / bs, row = slot % bs;
    int64_t index = c->hnd ? ((block * H + h) * bs + row) * D + d
                           : ((block * bs + row) * H + h) * D + d;
    return (size_t)index * e;
}

static posenc_tensor cache_tensor(const kv_case *c, const test_memory *memory,
                                  posenc_dtype dtype)
{
    int64_t e = (int64_t)posenc_dtype_size(dtype), H = c->k_heads, D = c->head_dim;
    int64_t bs = c->block_size;
    if (!c->blocks)
        return test_memory_tensor(memory, dtype, 0, 3, (const int64_t[]){bs, H, D}, NULL);
    const int64_t shape[4] = {c->blocks, bs, H, D};
    if (!c->hnd)
        return test_memory_tensor(memory, dtype, 0, 4, shape, NULL);
    return test_memory_tensor(memory, dtype, 0, 4, shape,
                              (const int64_t[]){H * bs * D * e, D * e, bs * D * e, e});
}

static int64_t num_slots(const kv_case *c)
{
    return (c->blocks ? c->blocks : 1) * c->block_size;
}

/* The token (b * tokens + t) whose slot is `slot`, or -1. */
static int64_t token_of_slot(const kv_case *c, int64_t slot)
{
    for (int64_t i = 0; i < c->batch * c->tokens; i++)
        if (c->slots[i] == slot)
            return i;
    return -1;
}

static bool run_case(posenc_context *context, const kv_case *c, posenc_dtype dtype,
                     test_memory_kind kind)
{
    const size_t e = posenc_dtype_size(dtype);
    const int64_t B = c->batch, T = c->tokens, HQ = c->q_heads, HK = c->k_heads, D = c->head_dim;
    const uint32_t first = c->rotary_offset;
    const uint32_t rot = c->rotary_dim ? c->rotary_dim : (uint32_t)D - first;
    const size_t q_count = (size_t)(B * T * HQ * D), k_count = (size_t)(B * T * HK * D);
    const size_t cache_count = (size_t)(num_slots(c) * HK * D);
    int failures_before = test_failures;
    kv_run run;
    memset(&run, 0, sizeof run);
    test_rng rng = {0x9e3779b97f4a7c15ull ^ (uint64_t)(c->head_dim * 131 + c->tokens)};

    bool made = test_memory_create(&run.q, context, kind, q_count * e) &&
                test_memory_create(&run.plain_q, context, kind, q_count * e) &&
                test_memory_create(&run.plain_k, context, kind, k_count * e) &&
                test_memory_create(&run.slots, context, kind, (size_t)(B * T) * 4) &&
                test_memory_create(&run.k_cache, context, kind, cache_count * e);
    if (made && c->fused_kv)
        made = test_memory_create(&run.kv, context, kind, 2 * k_count * e);
    else if (made)
        made = test_memory_create(&run.k, context, kind, k_count * e) &&
               (!c->with_v || test_memory_create(&run.v, context, kind, k_count * e));
    if (made && c->with_v)
        made = test_memory_create(&run.v_cache, context, kind, cache_count * e);
    if (made && c->k_mode == K_OUT)
        made = test_memory_create(&run.k_out, context, kind, k_count * e);
    if (made && c->positions)
        made = test_memory_create(&run.positions, context, kind, (size_t)(B * T) * 4);
    if (!made) {
        run_destroy(&run);
        return false;
    }

    /* k (and v) values, packed [B, T, HK, D]; in a fused allocation each token holds k's heads
     * then v's. */
    unsigned char *k_values = malloc(k_count * e), *v_values = malloc(k_count * e);
    if (!k_values || !v_values) {
        test_failures++;
        free(k_values);
        free(v_values);
        run_destroy(&run);
        return false;
    }
    fill_values(run.q.bytes, dtype, q_count, &rng);
    fill_values(k_values, dtype, k_count, &rng);
    fill_values(v_values, dtype, k_count, &rng);
    memcpy(run.plain_q.bytes, run.q.bytes, q_count * e);
    memcpy(run.plain_k.bytes, k_values, k_count * e);
    size_t row_bytes = (size_t)(HK * D) * e;
    for (int64_t r = 0; r < B * T; r++) {
        if (c->fused_kv) {
            memcpy(run.kv.bytes + (size_t)(2 * r) * row_bytes, k_values + r * row_bytes,
                   row_bytes);
            memcpy(run.kv.bytes + (size_t)(2 * r + 1) * row_bytes, v_values + r * row_bytes,
                   row_bytes);
        }
    }
    if (!c->fused_kv) {
        memcpy(run.k.bytes, k_values, k_count * e);
        if (c->with_v)
            memcpy(run.v.bytes, v_values, k_count * e);
    }
    memcpy(run.slots.bytes, c->slots, (size_t)(B * T) * 4);
    if (c->positions)
        memcpy(run.positions.bytes, c->positions, (size_t)(B * T) * 4);
    memset(run.k_cache.bytes, FILL, run.k_cache.size);
    if (c->with_v)
        memset(run.v_cache.bytes, FILL, run.v_cache.size);
    if (c->k_mode == K_OUT)
        memset(run.k_out.bytes, FILL, run.k_out.size);
    test_memory *uploads[] = {&run.q, &run.plain_q, &run.plain_k, &run.slots, &run.k_cache,
                              &run.kv, &run.k, &run.v, &run.v_cache, &run.k_out,
                              &run.positions};
    for (size_t i = 0; i < sizeof uploads / sizeof uploads[0]; i++)
        if (uploads[i]->bytes)
            test_memory_upload(uploads[i]);

    const int64_t q_shape[4] = {B, T, HQ, D}, k_shape[4] = {B, T, HK, D};
    const int64_t bt_shape[2] = {B, T};
    int64_t ie = (int64_t)e;
    const int64_t fused_strides[4] = {T * 2 * HK * D * ie, 2 * HK * D * ie, D * ie, ie};
    posenc_rope_desc desc = {
        .q = test_memory_tensor(&run.q, dtype, 0, 4, q_shape, NULL),
        .rotary_dim = c->rotary_dim,
        .rotary_offset = c->rotary_offset,
        .style = c->style,
        .slot_mapping = test_memory_tensor(&run.slots, POSENC_DTYPE_I32, 0, 2, bt_shape, NULL),
        .k_cache = cache_tensor(c, &run.k_cache, dtype),
    };
    if (c->fused_kv) {
        desc.k = test_memory_tensor(&run.kv, dtype, 0, 4, k_shape, fused_strides);
        desc.v = test_memory_tensor(&run.kv, dtype, (uint64_t)row_bytes, 4, k_shape,
                                    fused_strides);
    } else {
        desc.k = test_memory_tensor(&run.k, dtype, 0, 4, k_shape, NULL);
        if (c->with_v)
            desc.v = test_memory_tensor(&run.v, dtype, 0, 4, k_shape, NULL);
    }
    if (c->with_v)
        desc.v_cache = cache_tensor(c, &run.v_cache, dtype);
    if (c->k_mode == K_OUT)
        desc.k_out = test_memory_tensor(&run.k_out, dtype, 0, 4, k_shape, NULL);
    else if (c->k_mode == K_IN_PLACE)
        desc.k_out = desc.k;
    if (c->positions)
        desc.positions = test_memory_tensor(&run.positions, POSENC_DTYPE_I32, 0, 2, bt_shape,
                                            NULL);
    posenc_rope_desc plain = {
        .q = test_memory_tensor(&run.plain_q, dtype, 0, 4, q_shape, NULL),
        .k = test_memory_tensor(&run.plain_k, dtype, 0, 4, k_shape, NULL),
        .positions = desc.positions,
        .rotary_dim = c->rotary_dim,
        .rotary_offset = c->rotary_offset,
        .style = c->style,
    };

    posenc_status status = posenc_rope(context, &desc);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "  '%s' %s %s: posenc_rope: %s: %s\n", c->name, posenc_dtype_name(dtype),
                test_memory_kind_name(kind), posenc_status_name(status),
                posenc_context_last_error(context));
        goto done;
    }
    CHECK_OK(posenc_rope(context, &plain));
    test_memory *downloads[] = {&run.q, &run.plain_q, &run.plain_k, &run.k_cache, &run.kv,
                                &run.k, &run.v, &run.v_cache, &run.k_out};
    for (size_t i = 0; i < sizeof downloads / sizeof downloads[0]; i++)
        if (downloads[i]->bytes)
            test_memory_download(downloads[i]);

    /* q as the plain call rotates it. */
    CHECK(memcmp(run.q.bytes, run.plain_q.bytes, q_count * e) == 0);
    /* k: untouched, rotated into k_out, or rotated in place, as the plain call does. */
    for (int64_t r = 0; r < B * T; r++) {
        const unsigned char *k_row = c->fused_kv ? run.kv.bytes + (size_t)(2 * r) * row_bytes
                                                 : run.k.bytes + (size_t)r * row_bytes;
        const unsigned char *rotated = run.plain_k.bytes + (size_t)r * row_bytes;
        const unsigned char *given = k_values + (size_t)r * row_bytes;
        CHECK(memcmp(k_row, c->k_mode == K_IN_PLACE ? rotated : given, row_bytes) == 0);
        if (c->k_mode == K_OUT)
            CHECK(memcmp(run.k_out.bytes + (size_t)r * row_bytes, rotated, row_bytes) == 0);
        if (c->with_v) {
            const unsigned char *v_row = c->fused_kv
                                             ? run.kv.bytes + (size_t)(2 * r + 1) * row_bytes
                                             : run.v.bytes + (size_t)r * row_bytes;
            CHECK(memcmp(v_row, v_values + (size_t)r * row_bytes, row_bytes) == 0);
        }
    }

    /* The caches, row by row, against the plain k, the float64 reference and v. */
    posenc_rope_desc freq_desc = {.rotary_dim = rot, .style = c->style};
    double inv_freq[MAX_DIM / 2];
    double factor = ref_rope_frequencies(&freq_desc, rot, inv_freq);
    ref_stats stats = {0};
    int reports = 0;
    for (int64_t slot = 0; slot < num_slots(c); slot++) {
        int64_t token = token_of_slot(c, slot);
        for (int64_t h = 0; h < HK; h++) {
            double x[MAX_DIM], ref[MAX_DIM];
            size_t at = (size_t)((token * HK + h) * D) * e;
            if (token >= 0) {
                for (int64_t d = 0; d < D; d++)
                    x[d] = ref_load(dtype, k_values + at + (size_t)d * e);
                double position = c->positions ? c->positions[token] : (double)(token % T);
                /* The head from rotary_offset on, rotated as a head of its own. */
                memcpy(ref, x, sizeof ref[0] * first);
                ref_rope_head(x + first, ref + first, (uint32_t)D - first, rot, c->style,
                              inv_freq, position, factor, false);
            }
            for (int64_t d = 0; d < D; d++) {
                const unsigned char *got = run.k_cache.bytes + cache_at(c, e, slot, h, d);
                const unsigned char *v_got = c->with_v
                                                 ? run.v_cache.bytes + cache_at(c, e, slot, h, d)
                                                 : NULL;
                bool good;
                if (token < 0) {
                    unsigned char fill[4] = {FILL, FILL, FILL, FILL};
                    good = memcmp(got, fill, e) == 0 && (!v_got || memcmp(v_got, fill, e) == 0);
                } else {
                    good = memcmp(got, run.plain_k.bytes + at + (size_t)d * e, e) == 0 &&
                           (!v_got || memcmp(v_got, v_values + at + (size_t)d * e, e) == 0);
                    if (d >= first && d < first + rot) {
                        uint32_t r = (uint32_t)d - first;
                        uint32_t j = c->style == POSENC_ROPE_GPTJ ? r / 2 : r % (rot / 2);
                        uint32_t ia, ib;
                        ref_rope_pair(c->style, rot, j, &ia, &ib);
                        good = ref_check(&stats, dtype, ref_load(dtype, got), ref[d],
                                         hypot(ref[first + ia], ref[first + ib]), 0.0) &&
                               good;
                    } else {
                        good = good && ref_load(dtype, got) == x[d];
                    }
                }
                if (!good) {
                    test_failures++;
                    if (reports++ < MAX_REPORTS)
                        fprintf(stderr,
                                "  '%s' %s %s: cache slot %lld head %lld dim %lld (token %lld) "
                                "wrong\n",
                                c->name, posenc_dtype_name(dtype), test_memory_kind_name(kind),
                                (long long)slot, (long long)h, (long long)d, (long long)token);
                }
            }
        }
    }
    if (dtype == POSENC_DTYPE_F32 && kind == TEST_MEMORY_BUFFER)
        printf("    %-48s f32  max error %5.2f x 2^-24 |pair|\n", c->name, stats.max_units);
done:
    free(k_values);
    free(v_values);
    run_destroy(&run);
    return test_failures == failures_before;
}

/* A descriptor that must be refused, with the status and the field the message names. */
typedef struct bad_case {
    const char *what, *field;
    posenc_status status;
    posenc_rope_desc desc;
} bad_case;

/* Appends a copy of `good` to the list, for the caller to spoil; returns it. */
static posenc_rope_desc *add_bad(bad_case *list, size_t *count, const posenc_rope_desc *good,
                                 const char *what, const char *field, posenc_status status)
{
    bad_case *added = &list[(*count)++];
    *added = (bad_case){what, field, status, *good};
    return &added->desc;
}

/* Bad descriptors: refused with the field named, and no byte of any output written. */
static void test_errors(posenc_context *context)
{
    enum { T = 2, H = 1, D = 4, SLOTS = 4 };
    float q[T * H * D], k[T * H * D], v[T * H * D], cache[SLOTS * H * D], v_cache[SLOTS * H * D];
    int32_t slots[T] = {1, 2};
    float slots_f32[T] = {1, 2};
    for (int i = 0; i < T * H * D; i++)
        q[i] = k[i] = v[i] = (float)i;
    const int64_t shape[3] = {T, H, D}, cache_shape[3] = {SLOTS, H, D}, slot_shape[1] = {T};
    posenc_rope_desc good = {
        .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, shape),
        .k = posenc_tensor_of_host(k, POSENC_DTYPE_F32, 3, shape),
        .k_cache = posenc_tensor_of_host(cache, POSENC_DTYPE_F32, 3, cache_shape),
        .slot_mapping = posenc_tensor_of_host(slots, POSENC_DTYPE_I32, 1, slot_shape),
        .v = posenc_tensor_of_host(v, POSENC_DTYPE_F32, 3, shape),
        .v_cache = posenc_tensor_of_host(v_cache, POSENC_DTYPE_F32, 3, cache_shape),
    };
    const posenc_tensor absent = {0};
    bad_case bad[12];
    size_t n = 0;
    posenc_rope_desc *d;
    d = add_bad(bad, &n, &good, "no slot_mapping", "slot_mapping", POSENC_INVALID_ARGUMENT);
    d->slot_mapping = absent;
    d = add_bad(bad, &n, &good, "f32 slot_mapping", "slot_mapping.dtype", POSENC_INVALID_DTYPE);
    d->slot_mapping = posenc_tensor_of_host(slots_f32, POSENC_DTYPE_F32, 1, slot_shape);
    d = add_bad(bad, &n, &good, "slot_mapping of 1 token", "slot_mapping.shape",
                POSENC_INVALID_SHAPE);
    d->slot_mapping.shape[0] = 1;
    d = add_bad(bad, &n, &good, "cache of 2 heads", "k_cache.shape", POSENC_INVALID_SHAPE);
    d->k_cache.shape[1] = 2;
    d = add_bad(bad, &n, &good, "2-D cache", "k_cache.ndim", POSENC_INVALID_SHAPE);
    d->k_cache.ndim = 2;
    d->k_cache.shape[0] = SLOTS * H;
    d = add_bad(bad, &n, &good, "f16 cache", "k_cache.dtype", POSENC_INVALID_DTYPE);
    d->k_cache.dtype = POSENC_DTYPE_F16;
    d = add_bad(bad, &n, &good, "v without v_cache", "v", POSENC_INVALID_ARGUMENT);
    d->v_cache = absent;
    d = add_bad(bad, &n, &good, "cache without k", "k_cache", POSENC_INVALID_ARGUMENT);
    d->k = absent;
    d = add_bad(bad, &n, &good, "slot_mapping without cache", "slot_mapping",
                POSENC_INVALID_ARGUMENT);
    d->k_cache = d->v = d->v_cache = absent;
    d = add_bad(bad, &n, &good, "v_cache over k_cache", "v_cache", POSENC_INVALID_LAYOUT);
    d->v_cache.host = cache;
    d = add_bad(bad, &n, &good, "k_cache over q", "k_cache", POSENC_INVALID_LAYOUT);
    d->k_cache.host = q;
    d->k_cache.shape[0] = T;
    d->v = d->v_cache = absent;
    d = add_bad(bad, &n, &good, "v of another shape", "v.shape", POSENC_INVALID_SHAPE);
    d->v.shape[2] = 2;

    for (size_t i = 0; i < n; i++) {
        float before_q[T * H * D], before_k[T * H * D], before_cache[SLOTS * H * D];
        for (size_t j = 0; j < SLOTS * H * D; j++)
            cache[j] = v_cache[j] = -1.0f;
        memcpy(before_q, q, sizeof q);
        memcpy(before_k, k, sizeof k);
        memcpy(before_cache, cache, sizeof cache);
        posenc_status status = posenc_rope(context, &bad[i].desc);
        if (status != bad[i].status)
            fprintf(stderr, "  %s: %s\n", bad[i].what, posenc_context_last_error(context));
        CHECK_STATUS(status, bad[i].status);
        CHECK_MESSAGE(posenc_context_last_error(context), bad[i].field);
        CHECK(memcmp(before_q, q, sizeof q) == 0);
        CHECK(memcmp(before_k, k, sizeof k) == 0);
        CHECK(memcmp(before_cache, cache, sizeof cache) == 0);
        for (size_t j = 0; j < SLOTS * H * D; j++)
            CHECK(v_cache[j] == -1.0f);
    }
    /* The good one writes rows 1 and 2 and nothing else. */
    for (size_t j = 0; j < SLOTS * H * D; j++)
        cache[j] = -1.0f;
    CHECK_OK(posenc_rope(context, &good));
    CHECK(cache[0] == -1.0f && cache[3 * D] == -1.0f && cache[D] == k[0]);
}

static void test_device(posenc_context *context, const posenc_device_info *info)
{
    (void)info;
    test_errors(context);
    static const test_memory_kind kinds[] = {TEST_MEMORY_BUFFER, TEST_MEMORY_HOST,
                                             TEST_MEMORY_WRAPPED};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
            for (size_t m = 0; m < sizeof kinds / sizeof kinds[0]; m++)
                run_case(context, &cases[i], dtypes[d], kinds[m]);
}

int main(void)
{
    printf("test_kv_cache: RoPE writing k and v into a paged KV cache, every device, dtype and "
           "memory\n");
    if (test_for_each_device(test_device) == 0)
        test_failures++;
    return test_finish("test_kv_cache");
}
