/* SPDX-License-Identifier: MIT */
/* The GPU planning layer on the CPU alone (no device): staging regions, their layout and the
 * element copies back (core/gpu_staging.h); bindings at the 2^32-element limit and the spreading
 * of RoPE heads (core/gpu_plan.h); binding windows within a binding's range
 * (core/gpu_split.h); the frequency-table encoding and the cache's eviction order
 * and bounds (core/gpu_tables.h). */
#include "test_common.h"

#include "core/gpu_plan.h"
#include "core/gpu_split.h"
#include "core/gpu_staging.h"
#include "core/gpu_tables.h"

#include <stdlib.h>
#include <string.h>

/* A host view of `dtype` over [d0, d1, d2, d3] with byte strides. */
static posenc__view host_view(uint8_t *host, posenc_dtype dtype, const int64_t shape[4],
                              const int64_t strides[4])
{
    posenc__view view = {.host = host, .dtype = dtype};
    memcpy(view.shape, shape, sizeof view.shape);
    memcpy(view.strides, strides, sizeof view.strides);
    return view;
}

/* A packed [1, 1, 1, n] view of `dtype`. */
static posenc__view packed(uint8_t *host, posenc_dtype dtype, int64_t n)
{
    int64_t e = (int64_t)posenc_dtype_size(dtype);
    return host_view(host, dtype, (const int64_t[4]){1, 1, 1, n},
                     (const int64_t[4]){n * e, n * e, n * e, e});
}

static bool aligned_to(uint64_t value, uint64_t alignment) { return value % alignment == 0; }

/* One packed output alone: written whole, never copied in, copied back as one range. */
static void check_packed_output(posenc_context *ctx)
{
    static float out[64];
    posenc__view view = packed((uint8_t *)out, POSENC_DTYPE_F32, 64);
    posenc__gpu_staging plan = {0};
    posenc__gpu_stage_add(&plan, &view, "out", POSENC__GPU_WRITE, (uint8_t *)out);
    CHECK_OK(posenc__gpu_stage_plan(ctx, &plan));
    CHECK(plan.region_count == 1);
    CHECK(plan.regions[0].whole && !plan.regions[0].upload && plan.regions[0].written);
    CHECK(plan.upload_bytes == 0);
    CHECK(plan.download_bytes == sizeof out);
    /* The view keeps its address modulo 16. */
    CHECK(plan.views[0].position % 16 == (uintptr_t)out % 16);
    CHECK(plan.bytes == plan.views[0].position + sizeof out);
    CHECK(posenc__gpu_stage_has_host(&plan));

    /* Read as well (in place): copied in, and back element by element. */
    posenc__gpu_staging in_place = {0};
    posenc__gpu_stage_add(&in_place, &view, "out", POSENC__GPU_READ | POSENC__GPU_WRITE,
                          (uint8_t *)out);
    CHECK_OK(posenc__gpu_stage_plan(ctx, &in_place));
    CHECK(in_place.regions[0].upload && !in_place.regions[0].whole);
    CHECK(in_place.upload_bytes == sizeof out && in_place.download_bytes == sizeof out);
}

/* Copying back's hooks over a region's device copy in host memory (`user`). */
static posenc_status map_device_copy(posenc_context *ctx, void *user, uint32_t region,
                                     const uint8_t **bytes)
{
    *bytes = user;
    return POSENC_OK;
}

static posenc_status map_fails(posenc_context *ctx, void *user, uint32_t region,
                               const uint8_t **bytes)
{
    return POSENC_DEVICE_ERROR;
}

/* q and k slices of one fused [tokens, 3 (q k v), heads, dim] f32 array, rotated in place:
 * one region, copied in whole, and only q's and k's elements copied back (v untouched). */
static void check_fused_qkv(posenc_context *ctx)
{
    enum { TOKENS = 3, HEADS = 2, DIM = 4 };
    static float qkv[TOKENS][3][HEADS][DIM];
    const int64_t e = 4, shape[4] = {1, TOKENS, HEADS, DIM};
    const int64_t strides[4] = {(int64_t)sizeof qkv, 3 * HEADS * DIM * e, DIM * e, e};
    posenc__view q = host_view((uint8_t *)&qkv[0][0], POSENC_DTYPE_F32, shape, strides);
    posenc__view k = host_view((uint8_t *)&qkv[0][1], POSENC_DTYPE_F32, shape, strides);
    posenc__gpu_staging plan = {0};
    uint32_t iq = posenc__gpu_stage_add(&plan, &q, "q", POSENC__GPU_READ, q.host);
    posenc__gpu_stage_add(&plan, &q, "q_out", POSENC__GPU_WRITE, q.host);
    uint32_t ik = posenc__gpu_stage_add(&plan, &k, "k", POSENC__GPU_READ, k.host);
    posenc__gpu_stage_add(&plan, &k, "k_out", POSENC__GPU_WRITE, k.host);
    posenc__view device = packed(NULL, POSENC_DTYPE_I32, 3);
    posenc__gpu_stage_add(&plan, &device, "positions", POSENC__GPU_READ, NULL);
    CHECK_OK(posenc__gpu_stage_plan(ctx, &plan));
    CHECK(plan.region_count == 1);
    const posenc__gpu_region *region = &plan.regions[0];
    CHECK(region->lo == q.host);
    CHECK(region->hi == (uint8_t *)&qkv[TOKENS - 1][1][HEADS - 1][DIM]);
    CHECK(region->upload && region->written && !region->whole);
    CHECK(plan.views[ik].position - plan.views[iq].position == HEADS * DIM * 4);
    CHECK(plan.upload_bytes == (uint64_t)(region->hi - region->lo));
    CHECK(plan.download_bytes == 2 * TOKENS * HEADS * DIM * 4); /* q_out and k_out */

    /* The device's copy: every byte changed, as if the kernel (and something else) wrote it. */
    size_t size = (size_t)(region->hi - region->lo);
    uint8_t *device_copy = malloc(size);
    CHECK(device_copy != NULL);
    if (!device_copy)
        return;
    memset(qkv, 0x11, sizeof qkv);
    memset(device_copy, 0x22, size);
    /* A runtime failure while mapping leaves the caller's memory as it was. */
    posenc__gpu_stage_out_hooks hooks = {.map = map_fails};
    CHECK(posenc__gpu_stage_out(ctx, &plan, &hooks, device_copy) == POSENC_DEVICE_ERROR);
    CHECK(((const uint8_t *)qkv)[0] == 0x11);
    hooks.map = map_device_copy;
    CHECK_OK(posenc__gpu_stage_out(ctx, &plan, &hooks, device_copy));
    bool q_k_written = true, v_untouched = true;
    for (int t = 0; t < TOKENS; t++) {
        for (int s = 0; s < 3; s++) {
            const uint8_t *bytes = (const uint8_t *)qkv[t][s];
            for (size_t b = 0; b < sizeof qkv[t][s]; b++) {
                if (s < 2)
                    q_k_written = q_k_written && bytes[b] == 0x22;
                else
                    v_untouched = v_untouched && bytes[b] == 0x11;
            }
        }
    }
    CHECK(q_k_written);
    CHECK(v_untouched);
    free(device_copy);
}

/* Disjoint host views: regions of their own, each on a 256-byte boundary plus its lead, and an
 * imported region takes no staging and no copies. */
static void check_layout_and_import(posenc_context *ctx)
{
    static uint32_t memory[1024];
    uint8_t *base = (uint8_t *)memory;
    posenc__view a = packed(base + 4, POSENC_DTYPE_F32, 10);
    posenc__view b = packed(base + 1000, POSENC_DTYPE_F16, 300);
    posenc__view c = packed(base + 3000, POSENC_DTYPE_I32, 5);
    posenc__gpu_staging plan = {0};
    posenc__gpu_stage_add(&plan, &a, "a", POSENC__GPU_READ, a.host);
    posenc__gpu_stage_add(&plan, &b, "b", POSENC__GPU_WRITE, b.host);
    posenc__gpu_stage_add(&plan, &c, "c", POSENC__GPU_READ, c.host);
    CHECK_OK(posenc__gpu_stage_plan(ctx, &plan));
    CHECK(plan.region_count == 3);
    uint64_t end = 0;
    for (uint32_t r = 0; r < plan.region_count; r++) {
        const posenc__gpu_region *region = &plan.regions[r];
        CHECK(region->offset >= end);
        CHECK(region->offset - region->lead == 0 ||
              aligned_to(region->offset - region->lead, POSENC__GPU_REGION_ALIGNMENT));
        CHECK(region->lead == (uintptr_t)region->lo % 16);
        end = region->offset + (uint64_t)(region->hi - region->lo);
    }
    CHECK(plan.bytes == end);
    CHECK(plan.upload_bytes == 40 + 20);
    CHECK(plan.download_bytes == 600);

    for (uint32_t r = 0; r < plan.region_count; r++)
        CHECK(posenc__gpu_stage_importable(&plan, r));
    uint64_t staged = plan.bytes;
    plan.regions[plan.views[1].region].imported = true;
    posenc__gpu_stage_layout(&plan);
    CHECK(plan.bytes < staged);
    CHECK(plan.upload_bytes == 40 + 20);
    CHECK(plan.download_bytes == 0);
    CHECK(plan.views[1].position == 0); /* from the imported region's own first byte */
    CHECK(posenc__gpu_stage_has_host(&plan));

    posenc__gpu_staging none = {0};
    posenc__view device = packed(NULL, POSENC_DTYPE_F32, 8);
    posenc__gpu_stage_add(&none, &device, "x", POSENC__GPU_READ, NULL);
    CHECK_OK(posenc__gpu_stage_plan(ctx, &none));
    CHECK(none.region_count == 0 && none.bytes == 0 && !posenc__gpu_stage_has_host(&none));
}

/* Host memory off its element boundary is realigned in staging; views of two dtypes that no
 * placement aligns together are refused, naming the first. */
static void check_alignment(posenc_context *ctx)
{
    static uint32_t memory[64];
    uint8_t *base = (uint8_t *)memory;
    posenc__view odd = packed(base + 1, POSENC_DTYPE_F32, 8);
    posenc__gpu_staging plan = {0};
    posenc__gpu_stage_add(&plan, &odd, "q", POSENC__GPU_READ, odd.host);
    CHECK_OK(posenc__gpu_stage_plan(ctx, &plan));
    CHECK(plan.views[0].position % 4 == 0);
    CHECK(!posenc__gpu_stage_importable(&plan, 0)); /* in place it would be off by a byte */

    posenc__view f32 = packed(base + 1, POSENC_DTYPE_F32, 8);
    posenc__view f16 = packed(base + 4, POSENC_DTYPE_F16, 8);
    posenc__gpu_staging clash = {0};
    posenc__gpu_stage_add(&clash, &f32, "q", POSENC__GPU_READ, f32.host);
    posenc__gpu_stage_add(&clash, &f16, "positions", POSENC__GPU_READ, f16.host);
    CHECK_STATUS(posenc__gpu_stage_plan(ctx, &clash), POSENC_UNSUPPORTED);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "q: host tensors sharing this memory");
}

/* Element offsets and strides, up to and past 2^32 elements. */
static void check_bindings(posenc_context *ctx)
{
    posenc__gpu_binding binding;
    /* 2^32 - 16 f32 elements from byte 64 end exactly at element 2^32. */
    int64_t n = (int64_t)(POSENC__GPU_ELEMENT_LIMIT - 16);
    posenc__view view = packed(NULL, POSENC_DTYPE_F32, n);
    CHECK_OK(posenc__gpu_bind(ctx, "Test", "q", &view, 64, POSENC__GPU_ELEMENT_LIMIT, &binding));
    CHECK(binding.offset == 16);
    CHECK(binding.strides[3] == 1 && binding.strides[0] == 0 && binding.strides[2] == 0);
    CHECK_STATUS(posenc__gpu_bind(ctx, "Test", "q", &view, 68, POSENC__GPU_ELEMENT_LIMIT,
                                  &binding),
                 POSENC_UNSUPPORTED);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "q: the view reaches element 4294967297");
    /* A limit above 2^32 is held to 2^32: the kernels' words. */
    CHECK_STATUS(posenc__gpu_bind(ctx, "Test", "q", &view, 68, UINT64_MAX, &binding),
                 POSENC_UNSUPPORTED);
    /* A smaller device limit. */
    posenc__view small = packed(NULL, POSENC_DTYPE_F16, 100);
    CHECK_OK(posenc__gpu_bind(ctx, "Test", "k", &small, 200, 200, &binding));
    CHECK(binding.offset == 100);
    CHECK_STATUS(posenc__gpu_bind(ctx, "Test", "k", &small, 202, 200, &binding),
                 POSENC_UNSUPPORTED);
    /* Strides of dims with more than one index, in elements. */
    posenc__view strided = host_view(NULL, POSENC_DTYPE_BF16, (const int64_t[4]){2, 3, 1, 8},
                                     (const int64_t[4]){1 << 20, 256, 1 << 30, 2});
    CHECK_OK(posenc__gpu_bind(ctx, "Test", "x", &strided, 0, POSENC__GPU_ELEMENT_LIMIT, &binding));
    CHECK(binding.strides[0] == 1 << 19 && binding.strides[1] == 128 && binding.strides[2] == 0 &&
          binding.strides[3] == 1);
}

static void check_head_split(void)
{
    /* Enough rows: one chunk, every head in one invocation. */
    posenc__gpu_head_split split = posenc__gpu_split_heads(4096, 64, 32, UINT64_C(1) << 18);
    CHECK(split.chunks == 1 && split.heads_per_unit == 32 && split.units == 4096 * 64);
    /* Exactly at the fill target: still one chunk; one unit below it: two. */
    split = posenc__gpu_split_heads(16, 64, 8, 1024);
    CHECK(split.chunks == 1 && split.heads_per_unit == 8);
    split = posenc__gpu_split_heads(16, 64, 8, 1025);
    CHECK(split.chunks == 2 && split.heads_per_unit == 4 && split.units == 2 * 1024);
    /* One token (decode): a chunk per head, never more chunks than heads. */
    split = posenc__gpu_split_heads(1, 32, 12, UINT64_C(1) << 18);
    CHECK(split.chunks == 12 && split.heads_per_unit == 1 && split.units == 12 * 32);
    /* Chunks that do not divide the heads: ceil, then the chunks those heads need. */
    split = posenc__gpu_split_heads(10, 10, 10, 350);
    CHECK(split.heads_per_unit == 3 && split.chunks == 4 && split.units == 400);
    split = posenc__gpu_split_heads(0, 10, 10, 350);
    CHECK(split.units == 0);
}

/* The boxes of a split, as the backend sees them. */
typedef struct boxes_seen {
    uint32_t count;
    int64_t cells;  /* cells covered, summed over boxes */
    int64_t next;   /* dim 0 start the next box must have: boxes come in order, no gaps */
    bool in_order;
    posenc__gpu_window windows[8];
    posenc__gpu_box boxes[8];
} boxes_seen;

static posenc_status see_box(posenc_context *ctx, const posenc__gpu_box *box,
                             const posenc__gpu_window *windows, void *user)
{
    (void)ctx;
    boxes_seen *seen = user;
    seen->in_order = seen->in_order && box->start[0] == seen->next;
    seen->next = box->start[0] + box->count[0];
    seen->cells += box->count[0] * box->count[1] * box->count[2];
    if (seen->count < 8) {
        seen->windows[seen->count] = windows[0];
        seen->boxes[seen->count] = *box;
    }
    seen->count++;
    return POSENC_OK;
}

static uint32_t split_1d(posenc_context *ctx, posenc__gpu_extent extent, int64_t cells,
                         uint64_t units_per_cell, const posenc__gpu_split_limits *limits,
                         boxes_seen *seen, posenc_status *status)
{
    *seen = (boxes_seen){.in_order = true};
    uint32_t boxes = 0;
    *status = posenc__gpu_split(ctx, &extent, 1, (const int64_t[3]){cells, 1, 1},
                                units_per_cell, limits, see_box, seen, &boxes);
    return boxes;
}

static void check_split(posenc_context *ctx)
{
    posenc__gpu_split_limits limits = {.binding_bytes = 1024, .alignment = 16,
                                       .max_units = UINT64_C(1) << 31};
    posenc__gpu_extent f32 = {.bound = true, .size = 1 << 20, .strides = {4, 0, 0}, .inner = 4,
                              .element_size = 4, .name = "q"};
    boxes_seen seen;
    posenc_status status;
    /* Exactly one binding's range: one box; one element more: two halves. */
    CHECK(split_1d(ctx, f32, 256, 1, &limits, &seen, &status) == 1);
    CHECK_OK(status);
    CHECK(seen.windows[0].base == 0 && seen.windows[0].range == 1024 && seen.windows[0].first == 0);
    CHECK(split_1d(ctx, f32, 257, 1, &limits, &seen, &status) == 2);
    CHECK_OK(status);
    CHECK(seen.in_order && seen.cells == 257);
    CHECK(seen.boxes[1].start[0] == 128 && seen.windows[1].base == 512 &&
          seen.windows[1].range == 129 * 4 && seen.windows[1].first == 0);
    /* A window starts aligned down from the box's first byte; the kernel indexes from there. */
    f32.offset = 20;
    CHECK(split_1d(ctx, f32, 100, 1, &limits, &seen, &status) == 1);
    CHECK(seen.windows[0].base == 16 && seen.windows[0].first == 1 &&
          seen.windows[0].range == 404);
    f32.offset = 0;
    /* 16-bit elements: the window ends on a whole word, within the allocation. */
    posenc__gpu_extent f16 = {.bound = true, .size = 6, .strides = {2, 0, 0}, .inner = 2,
                              .element_size = 2, .name = "k"};
    CHECK(split_1d(ctx, f16, 3, 1, &limits, &seen, &status) == 1);
    CHECK(seen.windows[0].range == 6);
    f16.size = 1000;
    CHECK(split_1d(ctx, f16, 3, 1, &limits, &seen, &status) == 1);
    CHECK(seen.windows[0].range == 8);
    /* Invocations: 3 per cell and at most 16 per box: boxes of 5 cells at most. */
    limits.max_units = 16;
    CHECK(split_1d(ctx, f32, 10, 3, &limits, &seen, &status) == 2);
    CHECK(split_1d(ctx, f32, 11, 3, &limits, &seen, &status) == 3);
    CHECK(seen.in_order && seen.cells == 11);
    limits.max_units = UINT64_C(1) << 31;
    /* One cell larger than a binding may be: refused, naming the view. */
    posenc__gpu_extent wide = f32;
    wide.inner = 2000;
    CHECK(split_1d(ctx, wide, 4, 1, &limits, &seen, &status) == 0);
    CHECK(status == POSENC_UNSUPPORTED);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "q: one unit of work spans");
    /* Absent bindings are never measured. */
    posenc__gpu_extent absent = wide;
    absent.bound = false;
    CHECK(split_1d(ctx, absent, 4, 1, &limits, &seen, &status) == 1);
    CHECK_OK(status);
}

/* ---------------------------------------------------------------------------------------------
 * Frequency tables
 */

static posenc__freq freq_of(uint32_t seed)
{
    return (posenc__freq){.frac = (uint64_t)seed * UINT64_C(0x9e3779b97f4a7c15),
                          .int_turns = seed * 7u,
                          .component = seed % 3};
}

static void check_encoding(void)
{
    posenc__freq freqs[3] = {freq_of(1), freq_of(2), freq_of(3)};
    uint32_t words[12];
    CHECK(posenc__gpu_freq_words(3) == 12);
    posenc__gpu_freq_encode(freqs, 3, words);
    for (uint32_t j = 0; j < 3; j++) {
        CHECK(words[3 * j] == freqs[j].int_turns);
        CHECK(words[3 * j + 1] == (uint32_t)(freqs[j].frac >> 32));
        CHECK(words[3 * j + 2] == (uint32_t)freqs[j].frac);
        CHECK(words[9 + j] == freqs[j].component);
    }
    uint32_t empty[4] = {1, 2, 3, 4};
    CHECK(posenc__gpu_freq_words(0) == 4);
    posenc__gpu_freq_encode(NULL, 0, empty);
    CHECK(empty[0] == 0 && empty[1] == 0 && empty[2] == 0 && empty[3] == 0);
    uint64_t key = posenc__gpu_freq_key(words, 12);
    words[11] ^= 1;
    CHECK(posenc__gpu_freq_key(words, 12) != key);
}

typedef struct evictions {
    uint32_t count;
    uint32_t last;
    bool refuse;
} evictions;

static posenc_status record_eviction(posenc_context *ctx, uint32_t slot, void *user)
{
    evictions *e = user;
    if (e->refuse)
        return posenc__fail(ctx, POSENC_UNSUPPORTED, "rotary_dim: all tables in use");
    e->count++;
    e->last = slot;
    return POSENC_OK;
}

/* Table `seed` of `count` frequencies. */
static posenc_status find(posenc_context *ctx, posenc__gpu_tables *tables, uint32_t seed,
                          uint32_t count, uint64_t id, evictions *e, uint32_t *slot, bool *hit)
{
    posenc__freq *freqs = malloc((count ? count : 1) * sizeof *freqs);
    if (!freqs)
        return POSENC_OUT_OF_MEMORY;
    for (uint32_t j = 0; j < count; j++)
        freqs[j] = freq_of(seed * 1000003u + j);
    posenc__gpu_table_source source = {.freqs = freqs, .count = count, .id = id};
    posenc_status status =
        posenc__gpu_tables_find(ctx, tables, &source, "test", record_eviction, e, slot, hit);
    free(freqs);
    return status;
}

static void check_table_cache(posenc_context *ctx)
{
    posenc__gpu_tables *tables = calloc(1, sizeof *tables);
    CHECK(tables != NULL);
    if (!tables)
        return;
    evictions e = {0};
    uint32_t slot, first;
    bool hit;

    /* A miss stores the table; its id finds it, and so does its content under a new id. */
    CHECK_OK(find(ctx, tables, 1, 8, 11, &e, &first, &hit));
    CHECK(!hit && tables->held == 1 && tables->bytes == 8 * 16);
    CHECK(tables->slots[first].words[0] == freq_of(1000003u).int_turns);
    CHECK_OK(find(ctx, tables, 99, 8, 11, &e, &slot, &hit)); /* the id alone decides */
    CHECK(hit && slot == first);
    CHECK_OK(find(ctx, tables, 1, 8, 12, &e, &slot, &hit));
    CHECK(hit && slot == first && tables->slots[first].id == 12);
    CHECK_OK(find(ctx, tables, 1, 8, 0, &e, &slot, &hit));
    CHECK(hit && slot == first);
    CHECK_OK(find(ctx, tables, 1, 7, 0, &e, &slot, &hit)); /* other count, other table */
    CHECK(!hit && slot != first && tables->held == 2);

    /* Full: the least recently used goes, not the one used a moment ago. */
    for (uint32_t seed = 2; tables->held < POSENC__GPU_MAX_TABLES; seed++)
        CHECK_OK(find(ctx, tables, seed + 100, 4, 0, &e, &slot, &hit));
    CHECK(e.count == 0);
    CHECK_OK(find(ctx, tables, 1, 8, 0, &e, &slot, &hit)); /* table 1 is used again */
    CHECK(hit && slot == first);
    uint32_t oldest = POSENC__GPU_MAX_TABLES;
    for (uint32_t i = 0; i < POSENC__GPU_MAX_TABLES; i++) {
        if (oldest == POSENC__GPU_MAX_TABLES ||
            tables->slots[i].last_use < tables->slots[oldest].last_use)
            oldest = i;
    }
    CHECK(oldest != first);
    CHECK_OK(find(ctx, tables, 5000, 4, 0, &e, &slot, &hit));
    CHECK(!hit && e.count == 1 && e.last == oldest && slot == oldest);
    CHECK(tables->held == POSENC__GPU_MAX_TABLES);

    /* A backend that cannot evict: the error comes back and nothing changes. */
    e.refuse = true;
    uint64_t bytes = tables->bytes;
    CHECK_STATUS(find(ctx, tables, 6000, 4, 0, &e, &slot, &hit), POSENC_UNSUPPORTED);
    CHECK_MESSAGE(posenc_context_last_error(ctx), "all tables in use");
    CHECK(tables->held == POSENC__GPU_MAX_TABLES && tables->bytes == bytes);
    e.refuse = false;

    /* Bytes: a table of 3/4 of the budget evicts until it fits; a second one evicts the first;
     * one larger than the whole budget is kept alone. */
    uint32_t big = (uint32_t)(POSENC__GPU_TABLE_BYTES / 16 * 3 / 4);
    CHECK_OK(find(ctx, tables, 7000, big, 0, &e, &slot, &hit));
    CHECK(!hit && tables->bytes <= POSENC__GPU_TABLE_BYTES);
    CHECK_OK(find(ctx, tables, 7001, big, 0, &e, &slot, &hit));
    CHECK(!hit && tables->held == 1 && tables->bytes == (uint64_t)big * 16);
    CHECK_OK(find(ctx, tables, 7002, (uint32_t)(POSENC__GPU_TABLE_BYTES / 16) + 1, 0, &e,
                  &slot, &hit));
    CHECK(!hit && tables->held == 1);

    posenc__gpu_tables_drop(ctx, tables, slot);
    CHECK(tables->held == 0 && tables->bytes == 0);
    CHECK_OK(find(ctx, tables, 1, 0, 0, &e, &slot, &hit));
    CHECK(!hit && tables->slots[slot].word_count == 4);
    posenc__gpu_tables_fini(ctx, tables);
    CHECK(tables->held == 0);
    free(tables);
}

/* Pinned tables are never evicted: the least recently used unpinned one goes instead, and once
 * every table is pinned a new one is handed out uncached, as often as asked. */
static void check_pinned_tables(posenc_context *ctx)
{
    posenc__gpu_tables *tables = calloc(1, sizeof *tables);
    CHECK(tables != NULL);
    if (!tables)
        return;
    evictions e = {0};
    uint32_t slot, unpinned = 0;
    bool hit;
    for (uint32_t seed = 0; seed < POSENC__GPU_MAX_TABLES; seed++) {
        CHECK_OK(find(ctx, tables, seed, 4, 0, &e, &slot, &hit));
        if (seed == 10)
            unpinned = slot; /* the only one left unpinned, and not the oldest */
        else
            tables->slots[slot].pinned = true;
    }
    CHECK_OK(find(ctx, tables, 1000, 4, 0, &e, &slot, &hit));
    CHECK(!hit && e.count == 1 && e.last == unpinned && slot == unpinned);
    tables->slots[slot].pinned = true;
    for (uint32_t seed = 2000; seed < 2000 + 3 * POSENC__GPU_MAX_TABLES; seed++) {
        CHECK_OK(find(ctx, tables, seed, 4, 0, &e, &slot, &hit));
        CHECK(!hit && slot == POSENC__GPU_UNCACHED && e.count == 1);
    }
    CHECK(tables->uncached.words && tables->uncached.count == 4 &&
          tables->uncached.words[0] == freq_of((2000 + 3 * POSENC__GPU_MAX_TABLES - 1) *
                                               1000003u).int_turns);
    CHECK(tables->held == POSENC__GPU_MAX_TABLES);
    CHECK_OK(find(ctx, tables, 5, 4, 0, &e, &slot, &hit)); /* pinned tables still hit */
    CHECK(hit && slot != POSENC__GPU_UNCACHED);
    posenc__gpu_tables_fini(ctx, tables);
    CHECK(tables->held == 0 && !tables->uncached.words);
    free(tables);
}

int main(void)
{
    posenc_context_desc desc = {
        .backend = POSENC_BACKEND_CPU, .num_threads = 1, .flags = POSENC_CONTEXT_IGNORE_ENV};
    posenc_context *ctx = NULL;
    CHECK_OK(posenc_context_create(&desc, &ctx));
    if (!ctx)
        return test_finish("test_gpu_plan");
    check_packed_output(ctx);
    check_fused_qkv(ctx);
    check_layout_and_import(ctx);
    check_alignment(ctx);
    check_bindings(ctx);
    check_head_split();
    check_split(ctx);
    check_encoding();
    check_table_cache(ctx);
    check_pinned_tables(ctx);
    posenc_context_destroy(ctx);
    return test_finish("test_gpu_plan");
}
