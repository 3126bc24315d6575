/* SPDX-License-Identifier: MIT */
/* The bench's rows and, for one row on one context, its tensors (random values in a device
 * buffer), the operation's descriptor and the copy it is set against, through
 * posenc/posenc_diagnostics.h's roofline calls. */
#include "bench_cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <posenc/posenc_diagnostics.h>

#define Q_HEADS 32
#define K_HEADS 8
#define HEAD_DIM 128
#define PREFILL_TOKENS 4096
#define DECODE_POSITION 4095
#define TABLE_ROWS 4096
#define TIMESTEPS 256

#define F32 POSENC_DTYPE_F32
#define F16 POSENC_DTYPE_F16
#define BF16 POSENC_DTYPE_BF16
#define NEOX POSENC_ROPE_NEOX
#define GPTJ POSENC_ROPE_GPTJ

static const bench_heads layer_heads = {Q_HEADS, K_HEADS, HEAD_DIM};
/* One pair of one q head: next to no work, so the row times a call's fixed cost. */
static const bench_heads one_pair = {1, 0, 2};

const bench_case bench_cases[] = {
    {"rope decode", BENCH_ROPE, 1, F32, NEOX, &layer_heads},
    {"rope decode", BENCH_ROPE, 1, F32, GPTJ, &layer_heads},
    {"rope decode", BENCH_ROPE, 1, F16, NEOX, &layer_heads},
    {"rope decode", BENCH_ROPE, 1, F16, GPTJ, &layer_heads},
    {"rope decode", BENCH_ROPE, 1, BF16, NEOX, &layer_heads},
    {"rope decode", BENCH_ROPE, 1, BF16, GPTJ, &layer_heads},
    {"rope call", BENCH_ROPE, 1, F32, NEOX, &one_pair},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, F32, NEOX, &layer_heads},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, F32, GPTJ, &layer_heads},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, F16, NEOX, &layer_heads},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, F16, GPTJ, &layer_heads},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, BF16, NEOX, &layer_heads},
    {"rope prefill", BENCH_ROPE, PREFILL_TOKENS, BF16, GPTJ, &layer_heads},
    {"sinusoidal table", BENCH_TABLE, TABLE_ROWS, F32, NEOX, NULL},
    {"sinusoidal table", BENCH_TABLE, TABLE_ROWS, F16, NEOX, NULL},
    {"sinusoidal timesteps", BENCH_TIMESTEPS, TIMESTEPS, F32, NEOX, NULL},
};
_Static_assert(sizeof bench_cases / sizeof bench_cases[0] == BENCH_CASE_COUNT,
               "BENCH_CASE_COUNT counts bench_cases");

static void fill_random(void *data, uint64_t bytes, posenc_dtype dtype, uint32_t seed)
{
    uint32_t state = seed * 2654435761u + 12345u;
    if (dtype == F32) {
        float *f = data;
        for (uint64_t i = 0; i < bytes / 4; i++) {
            state = state * 1664525u + 1013904223u;
            f[i] = (float)(state >> 8) * 0x1p-23f - 1.0f;
        }
    } else {
        /* Values in [1, 2) of f16 (0x3c00..0x3fff) or bf16 (0x3f80..0x3fff), random sign. */
        uint16_t *h = data;
        for (uint64_t i = 0; i < bytes / 2; i++) {
            state = state * 1664525u + 1013904223u;
            uint16_t base = dtype == F16 ? 0x3c00 : 0x3f80, span = dtype == F16 ? 0x400 : 0x80;
            h[i] = (uint16_t)((state >> 31 ? 0x8000u : 0u) | (base + (state >> 8) % span));
        }
    }
}

void bench_workload_free(bench_workload *w)
{
    posenc_buffer_destroy(w->data);
    posenc_buffer_destroy(w->positions);
    w->data = w->positions = NULL;
}

posenc_status bench_workload_prepare(bench_workload *w, posenc_context *context,
                                     const bench_case *c, uint64_t *bytes, uint64_t *footprint)
{
    memset(w, 0, sizeof *w);
    w->context = context;
    w->c = c;
    w->shaped_copy = true;
    size_t element = posenc_dtype_size(c->dtype);
    uint64_t q_bytes = 0, k_bytes = 0, d_model = 0;
    const bench_heads *heads = c->heads;
    if (c->kind == BENCH_ROPE) {
        q_bytes = (uint64_t)(c->rows * heads->q * heads->dim) * element;
        k_bytes = (uint64_t)(c->rows * heads->k * heads->dim) * element;
        w->data_bytes = q_bytes + k_bytes;
        *bytes = 2 * w->data_bytes; /* in place: read and write */
    } else {
        d_model = c->kind == BENCH_TABLE ? BENCH_TABLE_D_MODEL : BENCH_TIMESTEP_D_MODEL;
        w->data_bytes = (uint64_t)c->rows * d_model * element;
        *bytes = w->data_bytes; /* write only */
    }
    *footprint = w->data_bytes;

    void *host = malloc((size_t)w->data_bytes);
    if (!host)
        return POSENC_OUT_OF_MEMORY;
    fill_random(host, w->data_bytes, c->dtype, (uint32_t)c->rows);
    posenc_buffer_desc desc = {.size = w->data_bytes, .initial_data = host};
    posenc_status status = posenc_buffer_create(context, &desc, &w->data);
    free(host);
    if (status != POSENC_OK)
        return status;

    if (c->kind == BENCH_ROPE) {
        int64_t q_shape[3] = {c->rows, heads->q, heads->dim};
        int64_t k_shape[3] = {c->rows, heads->k, heads->dim};
        w->rope.q = posenc_tensor_of_buffer(w->data, c->dtype, 3, q_shape);
        if (heads->k) {
            w->rope.k = posenc_tensor_of_buffer(w->data, c->dtype, 3, k_shape);
            w->rope.k.offset = q_bytes;
        }
        w->rope.style = c->style;
        w->rope.theta = 500000.0;
        w->rope.position_offset = c->rows == 1 ? DECODE_POSITION : 0;
        return POSENC_OK;
    }
    int64_t shape[2] = {c->rows, (int64_t)d_model};
    w->sinusoidal.out = posenc_tensor_of_buffer(w->data, c->dtype, 2, shape);
    if (c->kind == BENCH_TABLE)
        return POSENC_OK;
    float timesteps[TIMESTEPS];
    uint32_t state = 7;
    for (int i = 0; i < TIMESTEPS; i++) {
        state = state * 1664525u + 1013904223u;
        timesteps[i] = (float)(state >> 8) * (1000.0f / 16777216.0f);
    }
    posenc_buffer_desc positions_desc = {.size = sizeof timesteps, .initial_data = timesteps};
    status = posenc_buffer_create(context, &positions_desc, &w->positions);
    if (status != POSENC_OK)
        return status;
    int64_t positions_shape[1] = {TIMESTEPS};
    w->sinusoidal.positions =
        posenc_tensor_of_buffer(w->positions, POSENC_DTYPE_F32, 1, positions_shape);
    w->sinusoidal.layout = POSENC_SINUSOIDAL_SIN_COS;
    w->sinusoidal.freq_shift = 1.0;
    return POSENC_OK;
}

posenc_status bench_workload_call(const bench_workload *w)
{
    return w->c->kind == BENCH_ROPE ? posenc_rope(w->context, &w->rope)
                                    : posenc_sinusoidal(w->context, &w->sinusoidal);
}

posenc_status bench_workload_copy(bench_workload *w)
{
    if (w->shaped_copy) {
        posenc_status status =
            w->c->kind == BENCH_ROPE
                ? posenc_diagnostics_roofline_rope(w->context, &w->rope)
                : posenc_diagnostics_roofline_sinusoidal(w->context, &w->sinusoidal);
        if (status != POSENC_UNSUPPORTED)
            return status;
        w->shaped_copy = false;
    }
    return posenc_diagnostics_roofline(w->context, w->data, 0, w->data_bytes,
                                       w->c->kind != BENCH_ROPE);
}

void bench_case_label(const bench_case *c, char *text, size_t size)
{
    if (c->kind == BENCH_ROPE)
        snprintf(text, size, "%s %s %s", c->name, posenc_dtype_name(c->dtype),
                 posenc_rope_style_name(c->style));
    else
        snprintf(text, size, "%s %s", c->name, posenc_dtype_name(c->dtype));
}

void bench_case_shape(const bench_case *c, char *text, size_t size)
{
    if (c->kind == BENCH_ROPE)
        snprintf(text, size, "%lldx(%lld+%lld)x%lld", (long long)c->rows, (long long)c->heads->q,
                 (long long)c->heads->k, (long long)c->heads->dim);
    else
        snprintf(text, size, "%lldx%d", (long long)c->rows,
                 c->kind == BENCH_TABLE ? BENCH_TABLE_D_MODEL : BENCH_TIMESTEP_D_MODEL);
}
