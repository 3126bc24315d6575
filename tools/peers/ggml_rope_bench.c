/* SPDX-License-Identifier: MIT */
/* posenc against ggml's RoPE (ggml_rope_ext, the operator llama.cpp runs) on the CPU, in one
 * process: q [T, 32, 128] and k [T, 8, 128] rotated in place, theta 500000, for a decode step
 * (T = 1 at position 4095) and a prefill (T = 4096 at positions 0..4095), f32 and f16, NeoX and
 * GPT-J pairs. Both get the same threads, the same i32 positions and their own copy of the same
 * random values. ggml runs as llama.cpp runs it: a graph of the two ropes, computed on a
 * persistent thread pool, paused while posenc runs so that its spinning workers take no core
 * from posenc.
 *
 * The "norm" rows add Qwen3's QK RMSNorm (a weight of [128] for q and one for k, eps 1e-6),
 * f32 NeoX: ggml's graph of rms_norm, mul and rope as llama.cpp builds it for Qwen3 (rms_norm
 * out of place, then mul and rope in place on its result), posenc's one posenc_rope with
 * q_norm_weight and k_norm_weight in place.
 *
 * First each side's single call is checked against a float64 rotation of the same input (the
 * worst error relative to the pair's norm is printed for both), then the two are timed in
 * alternating rounds, the order swapped every round; each row gives the median time per call
 * of each and ggml / posenc. Built and run by tools/peers/ggml-bench.sh. */
#include <posenc/posenc.h>

#include <ggml-cpu.h>
#include <ggml.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q_HEADS 32
#define K_HEADS 8
#define HEAD_DIM 128
#define THETA 500000.0
#define DECODE_POSITION 4095
#define ROUNDS 15
#define NORM_EPS 1e-6

typedef struct bench_case {
    const char *name;
    int tokens;
    posenc_dtype dtype;
    posenc_rope_style style;
    bool norm; /* the QK RMSNorm first */
} bench_case;

static const bench_case cases[] = {
    {"decode", 1, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, false},
    {"decode", 1, POSENC_DTYPE_F32, POSENC_ROPE_GPTJ, false},
    {"decode", 1, POSENC_DTYPE_F16, POSENC_ROPE_NEOX, false},
    {"decode", 1, POSENC_DTYPE_F16, POSENC_ROPE_GPTJ, false},
    {"prefill", 4096, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, false},
    {"prefill", 4096, POSENC_DTYPE_F32, POSENC_ROPE_GPTJ, false},
    {"prefill", 4096, POSENC_DTYPE_F16, POSENC_ROPE_NEOX, false},
    {"prefill", 4096, POSENC_DTYPE_F16, POSENC_ROPE_GPTJ, false},
    {"decode", 1, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, true},
    {"prefill", 4096, POSENC_DTYPE_F32, POSENC_ROPE_NEOX, true},
};

/* ggml's monotonic clock, on every system (ggml_time_init, called first in main). */
static double seconds(void) { return 1e-6 * (double)ggml_time_us(); }

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int n)
{
    qsort(values, (size_t)n, sizeof *values, compare_doubles);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* One side's tensors: q then k in one allocation, as float values or f16 bits. */
typedef struct side {
    void *q, *k;
} side;

/* The norms' weights, the same for both sides: q's then k's; and weights of 1 for posenc's
 * timed calls, which normalize the same tensors in place call after call: weights that differ
 * from dim to dim would shrink some dims each time, into subnormals, whose arithmetic is slow
 * (ggml's graph reads its input unchanged). The work does not depend on the values. */
static float norm_weights[2][HEAD_DIM], unit_weights[HEAD_DIM];

typedef struct ggml_side {
    struct ggml_context *ctx;
    struct ggml_cgraph *graph;
    struct ggml_cplan plan;
    struct ggml_threadpool *pool;
    void *work;
    side data;
    side out; /* == data but with the norm, whose graph writes the rms_norm's result */
} ggml_side;

static size_t element_size(posenc_dtype dtype) { return dtype == POSENC_DTYPE_F32 ? 4 : 2; }

static float load_value(const void *data, posenc_dtype dtype, size_t i)
{
    if (dtype == POSENC_DTYPE_F32)
        return ((const float *)data)[i];
    return ggml_fp16_to_fp32(((const ggml_fp16_t *)data)[i]);
}

static void store_value(void *data, posenc_dtype dtype, size_t i, float value)
{
    if (dtype == POSENC_DTYPE_F32)
        ((float *)data)[i] = value;
    else
        ((ggml_fp16_t *)data)[i] = ggml_fp32_to_fp16(value);
}

/* The worst error of `out` against the float64 rotation of `in` (`heads` heads per token;
 * normalized first by `weights`, unless NULL), relative to each pair's norm. */
static double worst_error(const bench_case *c, const void *in, const void *out, int heads,
                          const int32_t *positions, const float *weights)
{
    double worst = 0.0;
    for (int t = 0; t < c->tokens; t++) {
        for (int h = 0; h < heads; h++) {
            size_t head = ((size_t)t * (size_t)heads + (size_t)h) * HEAD_DIM;
            double sum = 0.0;
            for (int d = 0; d < HEAD_DIM; d++)
                sum += pow(load_value(in, c->dtype, head + (size_t)d), 2);
            double factor = weights ? 1.0 / sqrt(sum / HEAD_DIM + NORM_EPS) : 1.0;
            for (int j = 0; j < HEAD_DIM / 2; j++) {
                size_t a = head + (c->style == POSENC_ROPE_NEOX ? (size_t)j : 2 * (size_t)j);
                size_t b = a + (c->style == POSENC_ROPE_NEOX ? HEAD_DIM / 2 : 1);
                double angle = positions[t] * pow(THETA, -2.0 * j / HEAD_DIM);
                double xa = load_value(in, c->dtype, a), xb = load_value(in, c->dtype, b);
                if (weights) {
                    xa *= factor * weights[a - head];
                    xb *= factor * weights[b - head];
                }
                double ya = xa * cos(angle) - xb * sin(angle);
                double yb = xa * sin(angle) + xb * cos(angle);
                double norm = sqrt(xa * xa + xb * xb);
                double error = fmax(fabs(load_value(out, c->dtype, a) - ya),
                                    fabs(load_value(out, c->dtype, b) - yb));
                if (norm > 0 && error / norm > worst)
                    worst = error / norm;
            }
        }
    }
    return worst;
}

static bool ggml_prepare(ggml_side *g, const bench_case *c, const int32_t *positions, int threads)
{
    enum ggml_type type = c->dtype == POSENC_DTYPE_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
    size_t bytes = (size_t)c->tokens * (Q_HEADS + K_HEADS) * HEAD_DIM * element_size(c->dtype);
    struct ggml_init_params params = {
        .mem_size = 2 * bytes + (size_t)c->tokens * sizeof(int32_t) +
                    16 * ggml_tensor_overhead() + ggml_graph_overhead() + (1 << 20),
        .mem_buffer = NULL,
        .no_alloc = false,
    };
    g->ctx = ggml_init(params);
    if (!g->ctx)
        return false;
    struct ggml_tensor *q = ggml_new_tensor_3d(g->ctx, type, HEAD_DIM, Q_HEADS, c->tokens);
    struct ggml_tensor *k = ggml_new_tensor_3d(g->ctx, type, HEAD_DIM, K_HEADS, c->tokens);
    struct ggml_tensor *pos = ggml_new_tensor_1d(g->ctx, GGML_TYPE_I32, c->tokens);
    memcpy(pos->data, positions, (size_t)c->tokens * sizeof(int32_t));
    int mode = c->style == POSENC_ROPE_NEOX ? GGML_ROPE_TYPE_NEOX : 0;
    struct ggml_tensor *q_in = q, *k_in = k;
    if (c->norm) { /* llama.cpp's Qwen3: rms_norm, then mul by the weight, then rope */
        struct ggml_tensor *q_w = ggml_new_tensor_1d(g->ctx, GGML_TYPE_F32, HEAD_DIM);
        struct ggml_tensor *k_w = ggml_new_tensor_1d(g->ctx, GGML_TYPE_F32, HEAD_DIM);
        memcpy(q_w->data, norm_weights[0], sizeof norm_weights[0]);
        memcpy(k_w->data, norm_weights[1], sizeof norm_weights[1]);
        q_in = ggml_mul_inplace(g->ctx, ggml_rms_norm(g->ctx, q, (float)NORM_EPS), q_w);
        k_in = ggml_mul_inplace(g->ctx, ggml_rms_norm(g->ctx, k, (float)NORM_EPS), k_w);
    }
    struct ggml_tensor *q_rotated = ggml_rope_ext_inplace(g->ctx, q_in, pos, NULL, HEAD_DIM,
                                                          mode, 0, (float)THETA, 1, 0, 1, 32, 1);
    struct ggml_tensor *k_rotated = ggml_rope_ext_inplace(g->ctx, k_in, pos, NULL, HEAD_DIM,
                                                          mode, 0, (float)THETA, 1, 0, 1, 32, 1);
    g->graph = ggml_new_graph(g->ctx);
    ggml_build_forward_expand(g->graph, q_rotated);
    ggml_build_forward_expand(g->graph, k_rotated);
    struct ggml_threadpool_params pool_params = ggml_threadpool_params_default(threads);
    g->pool = ggml_threadpool_new(&pool_params);
    if (!g->pool)
        return false;
    g->plan = ggml_graph_plan(g->graph, threads, g->pool);
    g->work = g->plan.work_size ? malloc(g->plan.work_size) : NULL;
    g->plan.work_data = g->work;
    g->data.q = q->data;
    g->data.k = k->data;
    g->out.q = q_rotated->data;
    g->out.k = k_rotated->data;
    return !g->plan.work_size || g->work;
}

static void ggml_release(ggml_side *g)
{
    if (g->pool)
        ggml_threadpool_free(g->pool);
    free(g->work);
    if (g->ctx)
        ggml_free(g->ctx);
}

static bool ggml_call(ggml_side *g)
{
    return ggml_graph_compute(g->graph, &g->plan) == GGML_STATUS_SUCCESS;
}

static posenc_rope_desc posenc_describe(const bench_case *c, side *data, const int32_t *positions)
{
    static const int64_t weight_shape[1] = {HEAD_DIM};
    int64_t q_shape[3] = {c->tokens, Q_HEADS, HEAD_DIM};
    int64_t k_shape[3] = {c->tokens, K_HEADS, HEAD_DIM};
    int64_t positions_shape[1] = {c->tokens};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(data->q, c->dtype, 3, q_shape),
        .k = posenc_tensor_of_host(data->k, c->dtype, 3, k_shape),
        .positions = posenc_tensor_of_host((void *)positions, POSENC_DTYPE_I32, 1, positions_shape),
        .style = c->style,
        .theta = THETA,
    };
    if (c->norm) {
        desc.q_norm_weight = posenc_tensor_of_host(norm_weights[0], POSENC_DTYPE_F32, 1,
                                                   weight_shape);
        desc.k_norm_weight = posenc_tensor_of_host(norm_weights[1], POSENC_DTYPE_F32, 1,
                                                   weight_shape);
        desc.norm_eps = NORM_EPS;
    }
    return desc;
}

/* Calls per round: about 20 ms of posenc. */
static int calls_per_round(posenc_context *ctx, const posenc_rope_desc *desc)
{
    double start = seconds();
    int calls = 0;
    while (seconds() - start < 0.02 || calls < 1) {
        posenc_rope(ctx, desc);
        calls++;
    }
    return calls;
}

static int run_case(posenc_context *ctx, const bench_case *c, int threads)
{
    size_t q_count = (size_t)c->tokens * Q_HEADS * HEAD_DIM;
    size_t k_count = (size_t)c->tokens * K_HEADS * HEAD_DIM;
    size_t element = element_size(c->dtype);
    int32_t *positions = malloc((size_t)c->tokens * sizeof *positions);
    side input = {malloc(q_count * element), malloc(k_count * element)};
    side mine = {malloc(q_count * element), malloc(k_count * element)};
    ggml_side theirs = {0};
    int failed = 1;
    if (!positions || !input.q || !input.k || !mine.q || !mine.k)
        goto done;
    for (int t = 0; t < c->tokens; t++)
        positions[t] = c->tokens == 1 ? DECODE_POSITION : t;
    uint32_t state = 12345u;
    for (size_t i = 0; i < q_count + k_count; i++) {
        state = state * 1664525u + 1013904223u;
        float value = (float)(state >> 8) * 0x1p-23f - 1.0f;
        store_value(i < q_count ? input.q : input.k, c->dtype, i < q_count ? i : i - q_count,
                    value);
    }
    if (!ggml_prepare(&theirs, c, positions, threads)) {
        fprintf(stderr, "ggml: could not set up the graph\n");
        goto done;
    }
    memcpy(mine.q, input.q, q_count * element);
    memcpy(mine.k, input.k, k_count * element);
    memcpy(theirs.data.q, input.q, q_count * element);
    memcpy(theirs.data.k, input.k, k_count * element);

    posenc_rope_desc desc = posenc_describe(c, &mine, positions);
    if (posenc_rope(ctx, &desc) != POSENC_OK) {
        fprintf(stderr, "posenc: %s\n", posenc_context_last_error(ctx));
        goto done;
    }
    if (!ggml_call(&theirs)) {
        fprintf(stderr, "ggml: graph compute failed\n");
        goto done;
    }
    const float *q_w = c->norm ? norm_weights[0] : NULL, *k_w = c->norm ? norm_weights[1] : NULL;
    double mine_error = fmax(worst_error(c, input.q, mine.q, Q_HEADS, positions, q_w),
                             worst_error(c, input.k, mine.k, K_HEADS, positions, k_w));
    double theirs_error = fmax(worst_error(c, input.q, theirs.out.q, Q_HEADS, positions, q_w),
                               worst_error(c, input.k, theirs.out.k, K_HEADS, positions, k_w));

    if (c->norm) {
        int64_t weight_shape[1] = {HEAD_DIM};
        desc.q_norm_weight = desc.k_norm_weight =
            posenc_tensor_of_host(unit_weights, POSENC_DTYPE_F32, 1, weight_shape);
    }
    int calls = calls_per_round(ctx, &desc);
    double mine_times[ROUNDS], theirs_times[ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        for (int turn = 0; turn < 2; turn++) {
            bool posenc_turn = (turn == 0) == (round % 2 == 0);
            if (!posenc_turn)
                ggml_threadpool_resume(theirs.pool);
            double start = seconds();
            for (int i = 0; i < calls; i++) {
                if (posenc_turn)
                    posenc_rope(ctx, &desc);
                else
                    ggml_call(&theirs);
            }
            double per_call = (seconds() - start) / calls;
            if (posenc_turn) {
                mine_times[round] = per_call;
            } else {
                theirs_times[round] = per_call;
                ggml_threadpool_pause(theirs.pool);
            }
        }
    }
    double mine_median = median(mine_times, ROUNDS), theirs_median = median(theirs_times, ROUNDS);
    printf("%-8s %-5s %-10s %12.2f us %12.2f us %8.1fx   %9.1e %9.1e\n", c->name,
           posenc_dtype_name(c->dtype),
           c->norm ? "norm+neox" : c->style == POSENC_ROPE_NEOX ? "neox" : "gptj",
           1e6 * mine_median, 1e6 * theirs_median, theirs_median / mine_median, mine_error,
           theirs_error);
    failed = 0;
done:
    ggml_release(&theirs);
    free(positions);
    free(input.q);
    free(input.k);
    free(mine.q);
    free(mine.k);
    return failed;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    for (int i = 0; i < HEAD_DIM; i++) { /* in [0.5, 1.5), as trained weights sit near 1 */
        norm_weights[0][i] = 0.5f + (float)((i * 37) % 64) / 64.0f;
        norm_weights[1][i] = 0.5f + (float)((i * 29 + 11) % 64) / 64.0f;
        unit_weights[i] = 1.0f;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* each row as it is measured, into a pipe too */
    ggml_time_init();
    posenc_context_desc context_desc = {.backend = POSENC_BACKEND_CPU,
                                        .num_threads = (uint32_t)(threads > 0 ? threads : 0)};
    posenc_context *ctx = NULL;
    if (posenc_context_create(&context_desc, &ctx) != POSENC_OK) {
        fprintf(stderr, "posenc: no CPU context: %s\n", posenc_thread_last_error());
        return 1;
    }
    posenc_device_info info;
    posenc_context_device(ctx, &info);
    if (threads <= 0)
        threads = (int)info.compute_units;
    printf("posenc %s against ggml %s, %d threads each, median of %d alternating rounds\n",
           posenc_version(), ggml_version(), threads, ROUNDS);
    printf("q [T, %d, %d] and k [T, %d, %d] in place, theta %.0f; error = worst |y - y64| / "
           "|pair| against float64\n", Q_HEADS, HEAD_DIM, K_HEADS, HEAD_DIM, THETA);
    printf("%-8s %-5s %-10s %15s %15s %9s   %9s %9s\n", "row", "dtype", "style", "posenc",
           "ggml", "ggml/posenc", "err posenc", "err ggml");
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        failed |= run_case(ctx, &cases[i], threads);
    posenc_context_destroy(ctx);
    return failed;
}
