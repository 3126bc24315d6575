/* SPDX-License-Identifier: MIT */
/* RoPE by caller cos/sin tables (posenc_rope_desc.cos and .sin) on every device: each form of
 * table (rows by position from positions or position_offset, rows gathered per token, HF's
 * unsqueezed 4-D form, vLLM's cos_sin_cache as two views of one tensor), half and full width,
 * NeoX and GPT-J, partial rotary from an offset, GQA, the inverse, in place and out of place,
 * the KV-cache write, table dtypes apart from q's, and strided tables, against the float64
 * rotation by the table values as given (random, not unit rotations); the cases in device
 * buffers again as work left running (posenc_prepare, then posenc_rope_submit), where a position
 * outside the tables leaves its token unwritten. Bad descriptors are refused naming the field,
 * with nothing written.
 *
 * Tolerance: |out - ref| <= 2 * 2^-24 * (|x_a c| + |x_b s|) for f32 outputs (the products and
 * the sum each rounded once), plus one ulp of the output type at |ref| for f16 and bf16 (computed
 * in f32, rounded once). Pass-through dims must be bit-exact copies. */
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

typedef enum table_form {
    BY_POSITIONS,  /* [rows, width], positions given */
    BY_OFFSET,     /* [rows, width], position_offset + token */
    GATHERED,      /* [batch or 1, tokens, width] */
    GATHERED_HF,   /* [batch, 1, tokens, width] */
    VLLM_CACHE,    /* one [rows, rotary_dim] tensor: cos columns then sin columns; positions */
} table_form;

typedef struct tables_case {
    const char *name;
    table_form form;
    posenc_rope_style style;
    bool full_width;
    posenc_dtype dtype, table_dtype;
    int64_t batch, tokens, q_heads, k_heads, head_dim;
    uint32_t rotary_dim, rotary_offset;
    bool inverse, out_of_place, shared_batch, padded_rows, with_cache;
    test_memory_kind memory;
} tables_case;

static const tables_case cases[] = {
    {"neox half, positions, f32", BY_POSITIONS, POSENC_ROPE_NEOX, false, F32, F32, 2, 5, 4, 2,
     64, 0, 0, false, false, false, false, false, TEST_MEMORY_HOST},
    {"neox full (HF halves), gathered, f16 tables", GATHERED, POSENC_ROPE_NEOX, true, F32, F16, 2,
     4, 3, 1, 32, 0, 0, false, true, false, false, false, TEST_MEMORY_BUFFER},
    {"gptj half, offset, inverse, bf16", BY_OFFSET, POSENC_ROPE_GPTJ, false, BF16, F32, 1, 6, 2,
     2, 16, 0, 0, true, false, false, true, false, TEST_MEMORY_WRAPPED},
    {"gptj full, HF 4-D gathered, f16", GATHERED_HF, POSENC_ROPE_GPTJ, true, F16, BF16, 2, 3, 2,
     1, 24, 16, 4, false, true, false, false, false, TEST_MEMORY_HOST},
    {"vLLM cos_sin_cache, neox, partial", VLLM_CACHE, POSENC_ROPE_NEOX, false, F16, F32, 1, 7, 4,
     2, 40, 24, 8, false, false, false, false, false, TEST_MEMORY_BUFFER},
    {"neox half, gathered shared by the batch, f16", GATHERED, POSENC_ROPE_NEOX, false, F16, F16,
     3, 2, 2, 2, 8, 0, 0, true, true, true, false, false, TEST_MEMORY_HOST},
    {"gptj half, positions, padded rows, KV cache", BY_POSITIONS, POSENC_ROPE_GPTJ, false, F32,
     BF16, 1, 5, 2, 2, 16, 0, 0, false, false, false, true, true, TEST_MEMORY_HOST},
    {"neox full, offset, decode 32+8 x 128", BY_OFFSET, POSENC_ROPE_NEOX, true, BF16, BF16, 1, 1,
     32, 8, 128, 0, 0, false, false, false, false, true, TEST_MEMORY_BUFFER},
};

#define TABLE_ROWS 50

/* Everything one run of a case allocates. */
typedef struct tables_run {
    test_memory q, k, q_out, k_out, cos, sin, positions, k_cache, slots;
    posenc_rope_desc desc;
    int64_t cos_offset, sin_offset;       /* bytes, in cos / sin (VLLM_CACHE: both in cos) */
    int64_t table_row_stride, table_batch_stride; /* bytes */
    int32_t positions_host[64];
    int32_t offset;
} tables_run;

static uint32_t rotary(const tables_case *c)
{
    return c->rotary_dim ? c->rotary_dim : (uint32_t)c->head_dim - c->rotary_offset;
}
static uint32_t pair_first(const tables_case *c, uint32_t j)
{
    return c->style == POSENC_ROPE_GPTJ ? 2 * j : j;
}
static uint32_t pair_second(const tables_case *c, uint32_t j)
{
    return c->style == POSENC_ROPE_GPTJ ? 2 * j + 1 : j + rotary(c) / 2;
}
static int64_t table_width(const tables_case *c)
{
    return c->full_width ? rotary(c) : rotary(c) / 2;
}
static bool gathered(const tables_case *c)
{
    return c->form == GATHERED || c->form == GATHERED_HF;
}

/* The table value (cos or sin) of token (b, t) for pair j, read as the library should. */
static double table_value(const tables_case *c, const tables_run *run, bool sin, int64_t b,
                          int64_t t, uint32_t j)
{
    int64_t row = gathered(c) ? t : c->form == BY_OFFSET ? run->offset + t
                                                          : run->positions_host[b * c->tokens + t];
    int64_t batch = gathered(c) && !c->shared_batch ? b : 0;
    uint32_t column = c->full_width ? (c->style == POSENC_ROPE_GPTJ ? 2 * j : j) : j;
    const test_memory *memory = sin && c->form != VLLM_CACHE ? &run->sin : &run->cos;
    int64_t at = (sin ? run->sin_offset : run->cos_offset) + batch * run->table_batch_stride +
                 row * run->table_row_stride + column * (int64_t)posenc_dtype_size(c->table_dtype);
    return ref_load(c->table_dtype, memory->bytes + at);
}

static void fill_random(test_rng *rng, posenc_dtype dtype, unsigned char *bytes, size_t count,
                        double lo, double hi)
{
    for (size_t i = 0; i < count; i++)
        ref_store(dtype, bytes + i * posenc_dtype_size(dtype), test_rng_uniform(rng, lo, hi));
}

static bool make_run(posenc_context *ctx, const tables_case *c, test_rng *rng, tables_run *run)
{
    memset(run, 0, sizeof *run);
    size_t es = posenc_dtype_size(c->dtype), ts = posenc_dtype_size(c->table_dtype);
    int64_t q_shape[4] = {c->batch, c->tokens, c->q_heads, c->head_dim};
    int64_t k_shape[4] = {c->batch, c->tokens, c->k_heads, c->head_dim};
    size_t q_count = (size_t)(c->batch * c->tokens * c->q_heads * c->head_dim);
    size_t k_count = (size_t)(c->batch * c->tokens * c->k_heads * c->head_dim);
    int64_t width = table_width(c);
    int64_t rows = gathered(c) ? c->tokens : TABLE_ROWS;
    int64_t table_batches = gathered(c) && !c->shared_batch ? c->batch : 1;
    int64_t row_values = c->form == VLLM_CACHE ? 2 * width : c->padded_rows ? width + 3 : width;
    run->table_row_stride = row_values * (int64_t)ts;
    run->table_batch_stride = rows * run->table_row_stride;
    size_t table_bytes = (size_t)(table_batches * run->table_batch_stride);
    bool ok = test_memory_create(&run->q, ctx, c->memory, q_count * es) &&
              test_memory_create(&run->k, ctx, c->memory, k_count * es) &&
              test_memory_create(&run->cos, ctx, c->memory, table_bytes) &&
              test_memory_create(&run->positions, ctx, c->memory, sizeof run->positions_host);
    if (ok && c->form != VLLM_CACHE)
        ok = test_memory_create(&run->sin, ctx, c->memory, table_bytes);
    if (ok && c->out_of_place)
        ok = test_memory_create(&run->q_out, ctx, c->memory, q_count * es) &&
             test_memory_create(&run->k_out, ctx, c->memory, k_count * es);
    if (ok && c->with_cache)
        ok = test_memory_create(&run->k_cache, ctx, c->memory, k_count * es) &&
             test_memory_create(&run->slots, ctx, c->memory, sizeof run->positions_host);
    if (!ok)
        return false;
    fill_random(rng, c->dtype, run->q.bytes, q_count, -1.0, 1.0);
    fill_random(rng, c->dtype, run->k.bytes, k_count, -1.0, 1.0);
    /* Values as a caller may give them: not unit rotations. */
    fill_random(rng, c->table_dtype, run->cos.bytes, table_bytes / ts, -1.5, 1.5);
    if (run->sin.bytes)
        fill_random(rng, c->table_dtype, run->sin.bytes, table_bytes / ts, -1.5, 1.5);
    for (int64_t i = 0; i < c->batch * c->tokens; i++)
        run->positions_host[i] = (int32_t)(test_rng_u32(rng) % TABLE_ROWS);
    run->positions_host[0] = TABLE_ROWS - 1; /* the last row is in the table */
    memcpy(run->positions.bytes, run->positions_host, sizeof run->positions_host);
    if (c->with_cache) { /* token i into cache row count - 1 - i */
        int32_t *slots = (int32_t *)(void *)run->slots.bytes;
        for (int64_t i = 0; i < c->batch * c->tokens; i++)
            slots[i] = (int32_t)(c->batch * c->tokens - 1 - i);
    }
    run->offset = c->form == BY_OFFSET ? (int32_t)(TABLE_ROWS - c->tokens) : 0;
    run->sin_offset = c->form == VLLM_CACHE ? width * (int64_t)ts : 0;
    const test_memory *all[] = {&run->q, &run->k, &run->cos, &run->sin, &run->positions,
                                &run->slots, &run->k_cache, &run->q_out, &run->k_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (all[i]->bytes && !test_memory_upload((test_memory *)all[i]))
            return false;
    }

    posenc_rope_desc *d = &run->desc;
    d->q = test_memory_tensor(&run->q, c->dtype, 0, 4, q_shape, NULL);
    d->k = test_memory_tensor(&run->k, c->dtype, 0, 4, k_shape, NULL);
    if (c->out_of_place) {
        d->q_out = test_memory_tensor(&run->q_out, c->dtype, 0, 4, q_shape, NULL);
        d->k_out = test_memory_tensor(&run->k_out, c->dtype, 0, 4, k_shape, NULL);
    }
    d->style = c->style;
    d->rotary_dim = c->rotary_dim;
    d->rotary_offset = c->rotary_offset;
    d->inverse = c->inverse;
    int64_t strides4[4] = {run->table_batch_stride, run->table_batch_stride,
                           run->table_row_stride, (int64_t)ts};
    int64_t shape[4];
    uint32_t ndim;
    if (gathered(c)) {
        ndim = c->form == GATHERED_HF ? 4 : 3;
        int64_t b = table_batches;
        int64_t s3[4] = {b, c->tokens, width}, s4[4] = {b, 1, c->tokens, width};
        memcpy(shape, ndim == 4 ? s4 : s3, sizeof shape);
        if (ndim == 3) {
            strides4[0] = run->table_batch_stride;
            strides4[1] = run->table_row_stride;
            strides4[2] = (int64_t)ts;
        }
    } else {
        ndim = 2;
        shape[0] = rows;
        shape[1] = width;
        strides4[0] = run->table_row_stride;
        strides4[1] = (int64_t)ts;
    }
    d->cos = test_memory_tensor(&run->cos, c->table_dtype, (uint64_t)run->cos_offset, ndim, shape,
                                strides4);
    d->sin = test_memory_tensor(c->form == VLLM_CACHE ? &run->cos : &run->sin, c->table_dtype,
                                (uint64_t)run->sin_offset, ndim, shape, strides4);
    if (c->form == BY_POSITIONS || c->form == VLLM_CACHE) {
        int64_t p_shape[2] = {c->batch, c->tokens};
        d->positions = test_memory_tensor(&run->positions, I32, 0, 2, p_shape, NULL);
    }
    d->position_offset = run->offset;
    if (c->with_cache) {
        int64_t cache_shape[3] = {c->batch * c->tokens, c->k_heads, c->head_dim};
        int64_t slots_shape[2] = {c->batch, c->tokens};
        d->k_cache = test_memory_tensor(&run->k_cache, c->dtype, 0, 3, cache_shape, NULL);
        d->slot_mapping = test_memory_tensor(&run->slots, I32, 0, 2, slots_shape, NULL);
    }
    return true;
}

static void free_run(tables_run *run)
{
    test_memory *all[] = {&run->q, &run->k, &run->cos, &run->sin, &run->positions,
                          &run->slots, &run->k_cache, &run->q_out, &run->k_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        test_memory_destroy(all[i]);
}

/* Checks one output tensor of `heads` heads (out of `in`, read before the call) against the
 * float64 rotation, a cache's row i holding token count - 1 - i; the tokens of the mask
 * `unwritten` must have kept the bytes of `before` (out as it was before the call) instead. */
static unsigned check_heads(const tables_case *c, const tables_run *run, const unsigned char *in,
                            const unsigned char *before, const unsigned char *out, int64_t heads,
                            bool cache, uint64_t unwritten, ref_stats *stats)
{
    unsigned reported = 0;
    size_t es = posenc_dtype_size(c->dtype);
    uint32_t rot = rotary(c), pairs = rot / 2, off = c->rotary_offset;
    for (int64_t b = 0; b < c->batch; b++) {
        for (int64_t t = 0; t < c->tokens; t++) {
            int64_t token = b * c->tokens + t;
            int64_t row = cache ? c->batch * c->tokens - 1 - token : token;
            for (int64_t h = 0; h < heads; h++) {
                const unsigned char *x = in + (size_t)((token * heads + h) * c->head_dim) * es;
                size_t at = (size_t)((row * heads + h) * c->head_dim) * es;
                const unsigned char *y = out + at;
                if (unwritten >> token & 1) {
                    if (memcmp(y, before + at, (size_t)c->head_dim * es) != 0 &&
                        reported++ < MAX_REPORTS) {
                        fprintf(stderr, "  %s: token %lld written\n", c->name, (long long)token);
                        test_failures++;
                    }
                    continue;
                }
                for (uint32_t d = 0; d < c->head_dim; d++) {
                    bool rotated = d >= off && d < off + rot;
                    if (!rotated && memcmp(x + d * es, y + d * es, es) != 0 &&
                        reported++ < MAX_REPORTS) {
                        fprintf(stderr, "  %s: pass-through dim %u changed\n", c->name, d);
                        test_failures++;
                    }
                }
                for (uint32_t j = 0; j < pairs; j++) {
                    uint32_t da = off + pair_first(c, j), db = off + pair_second(c, j);
                    double xa = ref_load(c->dtype, x + da * es);
                    double xb = ref_load(c->dtype, x + db * es);
                    double cs = table_value(c, run, false, b, t, j);
                    double sn = table_value(c, run, true, b, t, j) * (c->inverse ? -1.0 : 1.0);
                    double ra = xa * cs - xb * sn, rb = xa * sn + xb * cs;
                    double scale = fabs(xa * cs) + fabs(xb * sn) + fabs(xa * sn) + fabs(xb * cs);
                    double ya = ref_load(c->dtype, y + da * es);
                    double yb = ref_load(c->dtype, y + db * es);
                    double ta = 2 * 0x1p-24 * scale + (c->dtype == F32 ? 0 : ref_ulp(c->dtype, ra));
                    double tb = 2 * 0x1p-24 * scale + (c->dtype == F32 ? 0 : ref_ulp(c->dtype, rb));
                    bool ok = fabs(ya - ra) <= ta && fabs(yb - rb) <= tb;
                    stats->values += 2;
                    if (c->dtype == F32 && scale > 0)
                        stats->max_units = fmax(stats->max_units,
                                                fmax(fabs(ya - ra), fabs(yb - rb)) /
                                                    (0x1p-24 * scale));
                    if (!ok) {
                        stats->failures++;
                        test_failures++;
                        if (reported++ < MAX_REPORTS)
                            fprintf(stderr,
                                    "  %s: token %lld head %lld pair %u: got (%.9g, %.9g), "
                                    "want (%.9g, %.9g)\n",
                                    c->name, (long long)token, (long long)h, j, ya, yb, ra, rb);
                    }
                }
            }
        }
    }
    return reported;
}

static void run_case(posenc_context *ctx, const tables_case *c, test_rng *rng, bool submit)
{
    tables_run run;
    if (!make_run(ctx, c, rng, &run)) {
        free_run(&run);
        return;
    }
    size_t q_bytes = run.q.size, k_bytes = run.k.size;
    unsigned char *q_in = malloc(q_bytes), *k_in = malloc(k_bytes);
    if (!q_in || !k_in) {
        test_failures++;
        free(q_in);
        free(k_in);
        free_run(&run);
        return;
    }
    memcpy(q_in, run.q.bytes, q_bytes);
    memcpy(k_in, run.k.bytes, k_bytes);
    if (submit) /* its kernel and table built ahead */
        CHECK_OK(posenc_prepare(ctx, &(posenc_prepare_desc){.rope = &run.desc, .rope_count = 1}));
    CHECK_OK(test_rope_call(ctx, &run.desc, submit));
    /* The same descriptor again (a remembered one): the same result. */
    CHECK_OK(test_rope_call(ctx, &run.desc, submit));
    test_memory *q_out = c->out_of_place ? &run.q_out : &run.q;
    test_memory *k_out = c->out_of_place ? &run.k_out : &run.k;
    ref_stats stats = {0};
    if (!c->out_of_place) {
        /* In place the second call rotated twice: from the inputs once more. */
        memcpy(run.q.bytes, q_in, q_bytes);
        memcpy(run.k.bytes, k_in, k_bytes);
        CHECK(test_memory_upload(&run.q) && test_memory_upload(&run.k));
        CHECK_OK(test_rope_call(ctx, &run.desc, submit));
    }
    CHECK(test_memory_download(q_out) && test_memory_download(k_out));
    check_heads(c, &run, q_in, NULL, q_out->bytes, c->q_heads, false, 0, &stats);
    if (!c->with_cache || c->out_of_place)
        check_heads(c, &run, k_in, NULL, k_out->bytes, c->k_heads, false, 0, &stats);
    else /* k only read when only the cache takes it */
        CHECK(memcmp(run.k.bytes, k_in, k_bytes) == 0);
    if (c->with_cache) {
        CHECK(test_memory_download(&run.k_cache));
        check_heads(c, &run, k_in, NULL, run.k_cache.bytes, c->k_heads, true, 0, &stats);
    }
    printf("  %-48s %s  %llu values, worst %.2f units of 2^-24\n", c->name,
           stats.failures ? "FAIL" : submit ? "ok, submitted" : "ok", stats.values,
           stats.max_units);
    free(q_in);
    free(k_in);
    free_run(&run);
}

/* A descriptor refused: the status, the field named, and q as it was. */
static void expect_refused(posenc_context *ctx, tables_run *run, posenc_status status,
                           const char *fields)
{
    unsigned char before[4096];
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
    const tables_case *c = &cases[0]; /* [rows, width] tables by positions, f32 */
    tables_run run;
    if (!make_run(ctx, c, rng, &run)) {
        free_run(&run);
        return;
    }
    posenc_rope_desc good = run.desc;
    posenc_tensor none = {0};

    run.desc.sin = none;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "cos");
    run.desc = good;
    run.desc.theta = 500000.0;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "theta");
    run.desc = good;
    run.desc.scaling.factor = 4.0;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "scaling.factor");
    run.desc = good;
    run.desc.attention_factor = 2.0;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "attention_factor");
    run.desc = good;
    run.desc.multimodal = POSENC_ROPE_VISION_2D;
    run.desc.positions = none; /* vision positions would be [tokens, 2] */
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "multimodal");
    run.desc = good;
    run.desc.cos.shape[1] = run.desc.sin.shape[1] = 3; /* neither rotary_dim/2 nor rotary_dim */
    expect_refused(ctx, &run, POSENC_INVALID_SHAPE, "cos.shape");
    run.desc = good;
    run.desc.sin.shape[0] = TABLE_ROWS - 1;
    expect_refused(ctx, &run, POSENC_INVALID_SHAPE, "sin.shape");
    run.desc = good;
    run.desc.positions.dtype = POSENC_DTYPE_F32;
    expect_refused(ctx, &run, POSENC_INVALID_DTYPE, "positions.dtype");

    /* Positions outside the table: first prepared in full, then as a remembered descriptor
     * whose positions' contents changed. */
    int32_t *positions = (int32_t *)(void *)run.positions.bytes;
    run.desc = good;
    positions[3] = TABLE_ROWS;
    CHECK(test_memory_upload(&run.positions));
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "positions");
    positions[3] = 0;
    CHECK(test_memory_upload(&run.positions));
    CHECK_OK(posenc_rope(ctx, &run.desc));
    positions[1] = -1;
    CHECK(test_memory_upload(&run.positions));
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "positions");
    positions[1] = 0;
    CHECK(test_memory_upload(&run.positions));

    /* position_offset past the last row. */
    run.desc = good;
    run.desc.positions = none;
    run.desc.position_offset = TABLE_ROWS - (int32_t)c->tokens;
    CHECK_OK(posenc_rope(ctx, &run.desc));
    run.desc.position_offset++;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "position_offset");

    /* Gathered rows: one per token, and no positions. */
    run.desc = good;
    int64_t gathered_shape[3] = {1, c->tokens + 1, rotary(c) / 2};
    run.desc.cos = test_memory_tensor(&run.cos, F32, 0, 3, gathered_shape, NULL);
    run.desc.sin = test_memory_tensor(&run.sin, F32, 0, 3, gathered_shape, NULL);
    run.desc.positions = none;
    expect_refused(ctx, &run, POSENC_INVALID_SHAPE, "cos.shape");
    gathered_shape[1] = c->tokens;
    run.desc.cos = test_memory_tensor(&run.cos, F32, 0, 3, gathered_shape, NULL);
    run.desc.sin = test_memory_tensor(&run.sin, F32, 0, 3, gathered_shape, NULL);
    run.desc.positions = good.positions;
    expect_refused(ctx, &run, POSENC_INVALID_ARGUMENT, "positions");

    /* An output over a table. */
    if (c->memory == TEST_MEMORY_HOST) {
        run.desc = good;
        int64_t q_shape[4] = {c->batch, c->tokens, c->q_heads, c->head_dim};
        if (run.cos.size >= run.q.size) {
            run.desc.q_out = test_memory_tensor(&run.cos, c->dtype, 0, 4, q_shape, NULL);
            CHECK_STATUS(posenc_rope(ctx, &run.desc), POSENC_INVALID_LAYOUT);
            CHECK_MESSAGE(posenc_context_last_error(ctx), "q_out|cos");
        }
    }
    free_run(&run);
}

/* Work left running cannot have its positions read at the call (they may be written later):
 * on a device queue a token whose position picks no row of the tables is left unwritten (q and
 * its cache row; k is only read), the others rotated. A backend that runs a submit at once
 * (the CPU backend) refuses it as posenc_rope does, writing nothing. */
static void check_outside_left_running(posenc_context *ctx, const posenc_device_info *info,
                                       test_rng *rng)
{
    tables_case c = cases[6]; /* [rows, width] by positions, in place, into a KV cache */
    c.memory = TEST_MEMORY_BUFFER;
    int failures = test_failures;
    tables_run run;
    unsigned char q_in[4096], k_in[4096], cache_in[4096];
    if (!make_run(ctx, &c, rng, &run) || run.q.size > sizeof q_in || run.k.size > sizeof k_in ||
        run.k_cache.size > sizeof cache_in) {
        test_failures++;
        free_run(&run);
        return;
    }
    int32_t *positions = (int32_t *)(void *)run.positions.bytes;
    positions[1] = TABLE_ROWS;
    positions[3] = -1;
    CHECK(test_memory_upload(&run.positions));
    memcpy(q_in, run.q.bytes, run.q.size);
    memcpy(k_in, run.k.bytes, run.k.size);
    memcpy(cache_in, run.k_cache.bytes, run.k_cache.size);
    posenc_status status = test_rope_call(ctx, &run.desc, true);
    bool run_at_once = info->backend == POSENC_BACKEND_CPU;
    if (run_at_once) {
        CHECK_STATUS(status, POSENC_INVALID_ARGUMENT);
        CHECK_MESSAGE(posenc_context_last_error(ctx), "positions");
    }
    CHECK(test_memory_download(&run.q) && test_memory_download(&run.k) &&
          test_memory_download(&run.k_cache));
    CHECK(memcmp(run.k.bytes, k_in, run.k.size) == 0);
    if (run_at_once) {
        CHECK(memcmp(run.q.bytes, q_in, run.q.size) == 0);
        CHECK(memcmp(run.k_cache.bytes, cache_in, run.k_cache.size) == 0);
    } else {
        CHECK_OK(status);
        ref_stats stats = {0};
        uint64_t unwritten = 1u << 1 | 1u << 3;
        check_heads(&c, &run, q_in, q_in, run.q.bytes, c.q_heads, false, unwritten, &stats);
        check_heads(&c, &run, k_in, cache_in, run.k_cache.bytes, c.k_heads, true, unwritten,
                    &stats);
    }
    printf("  %-48s %s\n", "positions outside the tables, submitted",
           test_failures != failures ? "FAIL" : "ok");
    free_run(&run);
}

static void test_device(posenc_context *ctx, const posenc_device_info *info)
{
    test_rng rng = {0x7ab1e5};
    printf("%s (%s):\n", info->name, posenc_backend_name(info->backend));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(ctx, &cases[i], &rng, false);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].memory == TEST_MEMORY_BUFFER)
            run_case(ctx, &cases[i], &rng, true);
    }
    check_outside_left_running(ctx, info, &rng);
    check_refusals(ctx, &rng);
}

int main(void)
{
    printf("test_rope_tables: RoPE by caller cos/sin tables against the float64 rotation\n");
    if (test_for_each_device(test_device) == 0)
        test_failures++;
    return test_finish("test_rope_tables");
}
