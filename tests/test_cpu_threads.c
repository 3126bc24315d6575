/* SPDX-License-Identifier: MIT */
/* The CPU backend's threads, on every system the library builds for (POSIX, and Windows, where
 * the pool once ran every part on the caller):
 *   - through the private pool API, that each part of a job runs exactly once, part 0 on the
 *     caller and part p on its own worker or on the caller (whichever took it first), whether
 *     the workers were spinning or asleep; that all parts of one job can run at the same time
 *     (each waits until every other has arrived), on as many threads; that a short job after a
 *     pause runs on the caller without waking the workers, and short jobs back to back and long
 *     jobs after a pause wake them;
 *   - through the public API, that RoPE and sinusoidal tables on 4 threads give the same bits as
 *     on 1: work is split, never computed differently. */
#include "core/atomics.h"
#include "core/platform.h"
#include "cpu/cpu_pool.h"
#include "test_common.h"

#include <stdlib.h>
#include <string.h>

enum { WORKERS = 3, PARTS = WORKERS + 1 };

/* Job costs (posenc_cpu_pool_run): parts that must run together (workers always woken), none
 * (a job too short to measure, which never wakes them after a pause), and that of a job of
 * WORK_SECONDS a part, the only one the pool learns a time per cost from. */
#define TOGETHER POSENC_CPU_POOL_TOGETHER
#define SHORT_JOB 0
#define WORK_COST ((uint64_t)1000)
#define WORK_SECONDS 10e-3

/* ---- the pool ---- */

typedef struct record_job {
    uint64_t ids[PARTS];
    uint32_t runs[PARTS]; /* each part writes only its own; read after the job returned */
    uint32_t parts_seen[PARTS];
} record_job;

static void record_part(void *arg, uint32_t part, uint32_t parts)
{
    record_job *job = arg;
    job->ids[part] = support_thread_id();
    job->runs[part]++;
    job->parts_seen[part] = parts;
}

/* Each part works (spins) for WORK_SECONDS and records its thread. */
static void work_part(void *arg, uint32_t part, uint32_t parts)
{
    (void)parts;
    uint64_t *ids = arg;
    ids[part] = support_thread_id();
    double end = posenc__seconds_now() + WORK_SECONDS;
    while (posenc__seconds_now() < end)
        posenc__cpu_pause();
}

/* Every part of one job waits until all have arrived: the job can only finish (before the
 * deadline) if its parts run at the same time, on as many threads. */
typedef struct meet_job {
    posenc__atomic_u32 arrived;
    posenc__atomic_u32 missed;
    double deadline;
    uint64_t ids[PARTS];
} meet_job;

static void meet_part(void *arg, uint32_t part, uint32_t parts)
{
    meet_job *job = arg;
    job->ids[part] = support_thread_id();
    posenc__atomic_fetch_add(&job->arrived, 1);
    while (posenc__atomic_load_acquire(&job->arrived) < parts) {
        /* Once one part gave up, the rest of a failing job need not wait for the deadline. */
        if (posenc__atomic_load_relaxed(&job->missed) || posenc__seconds_now() > job->deadline) {
            posenc__atomic_fetch_add(&job->missed, 1);
            return;
        }
        posenc__cpu_pause();
    }
}

/* Runs a meet_job of every part on `pool`: true when all parts ran at once within `seconds`,
 * each part p > 0 on another thread than the caller's (its worker's, recorded in `worker_ids`
 * on the first such job and the same on the next ones). */
static bool meet(posenc_cpu_pool *pool, uint64_t cost, double seconds,
                 uint64_t worker_ids[PARTS])
{
    meet_job job;
    memset(&job, 0, sizeof job);
    job.deadline = posenc__seconds_now() + seconds;
    posenc_cpu_pool_run(pool, PARTS, cost, meet_part, &job);
    bool ok = posenc__atomic_load_acquire(&job.arrived) == PARTS &&
              posenc__atomic_load_acquire(&job.missed) == 0;
    for (uint32_t p = 1; p < PARTS; p++) {
        if (worker_ids[p] == 0)
            worker_ids[p] = job.ids[p];
        ok = ok && job.ids[p] == worker_ids[p];
    }
    return ok;
}

/* Runs a record_job of `parts` on `pool`: true when each part ran once and saw `parts`, part 0
 * on the caller and part p > 0 on the caller or its worker (from `worker_ids`, where known).
 * `*on_caller` counts the parts the caller ran. */
static bool record(posenc_cpu_pool *pool, uint32_t parts, uint64_t cost, uint64_t caller,
                   const uint64_t worker_ids[PARTS], uint32_t *on_caller)
{
    record_job job;
    memset(&job, 0, sizeof job);
    posenc_cpu_pool_run(pool, parts, cost, record_part, &job);
    bool all_ok = true;
    *on_caller = 0;
    for (uint32_t p = 0; p < PARTS; p++) {
        bool ok = job.runs[p] == (p < parts ? 1u : 0u);
        if (p < parts) {
            *on_caller += job.ids[p] == caller;
            ok = ok && job.parts_seen[p] == parts &&
                 (job.ids[p] == caller ||
                  (p > 0 && (worker_ids[p] == 0 || job.ids[p] == worker_ids[p])));
        }
        if (!ok)
            fprintf(stderr, "%u parts: part %u ran %u times, saw %u parts, on thread %llx "
                    "(caller %llx, its worker %llx)\n", parts, p, job.runs[p],
                    job.parts_seen[p], (unsigned long long)job.ids[p],
                    (unsigned long long)caller, (unsigned long long)worker_ids[p]);
        all_ok = all_ok && ok;
    }
    return all_ok;
}

static void test_pool(void)
{
    posenc_cpu_pool *pool = NULL;
    CHECK_OK(posenc_cpu_pool_create(WORKERS, &pool));
    if (!pool)
        return;
    CHECK(posenc_cpu_pool_size(pool) == PARTS);
    uint64_t caller = support_thread_id();
    uint64_t worker_ids[PARTS] = {0};

    /* Jobs whose parts meet, back to back (the workers still spinning) and after pauses longer
     * than their spin (asleep on the condition variable): the workers are woken and run them. */
    int failed_meets = 0;
    for (int round = 0; round < 20; round++) {
        if (round >= 10)
            posenc__sleep_seconds(2e-3);
        /* Generous: threads of a loaded machine (or under ThreadSanitizer) start late. */
        if (!meet(pool, TOGETHER, 10.0, worker_ids) && failed_meets++ == 0)
            fprintf(stderr, "round %d: the parts of one job did not all run at once, each on "
                    "its own thread\n", round);
    }
    CHECK(failed_meets == 0);
    /* Distinct threads: the caller and each worker. */
    worker_ids[0] = caller;
    uint32_t distinct = 0;
    for (uint32_t p = 0; p < PARTS; p++) {
        bool seen_before = false;
        for (uint32_t q = 0; q < p; q++)
            seen_before = seen_before || worker_ids[q] == worker_ids[p];
        distinct += !seen_before && worker_ids[p] != 0;
    }
    printf("  pool of %u workers: parts ran on %u distinct threads\n", WORKERS, distinct);
    CHECK(distinct == PARTS);

    /* Jobs of 1..PARTS parts, long and short, back to back and after pauses: each part once. */
    int mismatches = 0;
    for (int round = 0; round < 400; round++) {
        if (round >= 300)
            posenc__sleep_seconds(2e-3);
        uint32_t on_caller;
        if (!record(pool, 1 + (uint32_t)round % PARTS, round % 2 ? SHORT_JOB : TOGETHER, caller,
                    worker_ids, &on_caller) &&
            mismatches++ == 0)
            fprintf(stderr, "  (round %d)\n", round);
    }
    CHECK(mismatches == 0);

    /* A long job after a pause wakes the workers: once the pool has timed such jobs and a
     * wake-up, it knows that PARTS parts of WORK_SECONDS take far longer on the caller alone. The first
     * rounds teach it; then most rounds, not all (a loaded machine wakes threads late). */
    int helped = 0;
    for (int round = 0; round < 12; round++) {
        posenc__sleep_seconds(20e-3);
        uint64_t ids[PARTS] = {0};
        posenc_cpu_pool_run(pool, PARTS, WORK_COST, work_part, ids);
        bool worker_ran = false;
        for (uint32_t p = 1; p < PARTS; p++)
            worker_ran = worker_ran || ids[p] != caller;
        helped += round >= 2 && worker_ran;
    }
    printf("  long jobs after a pause: %d of 10 woke the workers\n", helped);
    CHECK(helped >= 5);

    /* A short job after a pause: every part on the caller, the workers left asleep; and a short
     * job right after it wakes them (its parts meet). On a loaded machine a worker scheduled
     * late may still be spinning after the pause and take its part, and the caller may be held
     * back past the workers' spin between two jobs: most rounds, not all. */
    int alone = 0, met = 0;
    for (int round = 0; round < 10; round++) {
        posenc__sleep_seconds(20e-3);
        uint32_t on_caller;
        CHECK(record(pool, PARTS, SHORT_JOB, caller, worker_ids, &on_caller));
        alone += on_caller == PARTS;
        met += meet(pool, SHORT_JOB, 1.0, worker_ids);
    }
    printf("  short jobs after a pause: %d of 10 ran on the caller alone, %d of 10 right after "
           "woke the workers\n", alone, met);
    CHECK(alone >= 5);
    CHECK(met >= 5);
    posenc_cpu_pool_destroy(pool);

    /* No workers: every part on the caller, in order. */
    pool = NULL;
    CHECK_OK(posenc_cpu_pool_create(0, &pool));
    CHECK(posenc_cpu_pool_size(pool) == 1);
    record_job job;
    memset(&job, 0, sizeof job);
    posenc_cpu_pool_run(pool, 3, TOGETHER, record_part, &job);
    for (uint32_t p = 0; p < 3; p++)
        CHECK(job.runs[p] == 1 && job.ids[p] == caller);
    posenc_cpu_pool_destroy(pool);
}

/* ---- the public calls ---- */

static posenc_context *cpu_context(uint32_t threads)
{
    posenc_context_desc desc = {
        .backend = POSENC_BACKEND_CPU,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV,
        .num_threads = threads,
    };
    posenc_context *context = NULL;
    CHECK_OK(posenc_context_create(&desc, &context));
    return context;
}

/* Sizes of a few MiB, so that the CPU backend splits each call over every thread. */
enum { TOKENS = 256, Q_HEADS = 32, K_HEADS = 8, DIM = 128, ROWS = 2048, D_MODEL = 512 };

typedef struct results {
    float *q, *k, *q_one_token, *table, *added;
} results;

#define Q_FLOATS ((size_t)TOKENS * Q_HEADS * DIM)
#define K_FLOATS ((size_t)TOKENS * K_HEADS * DIM)
#define TABLE_FLOATS ((size_t)ROWS * D_MODEL)

static bool results_alloc(results *r)
{
    r->q = malloc(Q_FLOATS * sizeof(float));
    r->k = malloc(K_FLOATS * sizeof(float));
    r->q_one_token = malloc(Q_FLOATS * sizeof(float));
    r->table = malloc(TABLE_FLOATS * sizeof(float));
    r->added = malloc(TABLE_FLOATS * sizeof(float));
    return r->q && r->k && r->q_one_token && r->table && r->added;
}

static void results_free(results *r)
{
    free(r->q);
    free(r->k);
    free(r->q_one_token);
    free(r->table);
    free(r->added);
}

static void run_calls(uint32_t threads, const float *q_in, const float *k_in, results *out)
{
    posenc_context *context = cpu_context(threads);
    if (!context)
        return;
    memcpy(out->q, q_in, Q_FLOATS * sizeof(float));
    memcpy(out->k, k_in, K_FLOATS * sizeof(float));
    memcpy(out->q_one_token, q_in, Q_FLOATS * sizeof(float));
    /* Prefill: q and k (grouped-query), in place. */
    posenc_rope_desc rope = {
        .q = posenc_tensor_of_host(out->q, POSENC_DTYPE_F32, 3,
                                   (const int64_t[]){TOKENS, Q_HEADS, DIM}),
        .k = posenc_tensor_of_host(out->k, POSENC_DTYPE_F32, 3,
                                   (const int64_t[]){TOKENS, K_HEADS, DIM}),
        .position_offset = 1234,
    };
    /* Twice, as a model's layers do: the second call takes the rows' kept tables, which the
     * first wrote from every thread. */
    CHECK_OK(posenc_rope(context, &rope));
    CHECK_OK(posenc_rope(context, &rope));
    /* One token of many heads, GPT-J pairing: split over heads. */
    posenc_rope_desc one = {
        .q = posenc_tensor_of_host(out->q_one_token, POSENC_DTYPE_F32, 3,
                                   (const int64_t[]){1, TOKENS * Q_HEADS, DIM}),
        .position_offset = 99999,
        .style = POSENC_ROPE_GPTJ,
    };
    CHECK_OK(posenc_rope(context, &one));
    posenc_sinusoidal_desc table = {
        .out = posenc_tensor_of_host(out->table, POSENC_DTYPE_F32, 2,
                                     (const int64_t[]){ROWS, D_MODEL}),
        .position_offset = 1000,
    };
    CHECK_OK(posenc_sinusoidal(context, &table));
    /* Add mode, in place, [sin | cos]. */
    memcpy(out->added, q_in, TABLE_FLOATS * sizeof(float));
    posenc_sinusoidal_desc add = {
        .out = posenc_tensor_of_host(out->added, POSENC_DTYPE_F32, 2,
                                     (const int64_t[]){ROWS, D_MODEL}),
        .layout = POSENC_SINUSOIDAL_SIN_COS,
        .input_scale = 2.0,
    };
    add.x = add.out;
    CHECK_OK(posenc_sinusoidal(context, &add));
    posenc_context_destroy(context);
}

static void compare(const char *what, const float *one, const float *many, size_t count)
{
    if (memcmp(one, many, count * sizeof(float)) == 0)
        return;
    size_t i = 0;
    while (i < count && memcmp(&one[i], &many[i], sizeof(float)) == 0)
        i++;
    fprintf(stderr, "%s: 4 threads differ from 1 first at element %zu: %.9g vs %.9g\n", what, i,
            (double)many[i], (double)one[i]);
    test_failures++;
}

static void test_public_calls(void)
{
    _Static_assert(TABLE_FLOATS <= Q_FLOATS, "add mode's input is taken from q's");
    float *q_in = malloc(Q_FLOATS * sizeof(float));
    float *k_in = malloc(K_FLOATS * sizeof(float));
    results one = {0}, many = {0};
    if (!q_in || !k_in || !results_alloc(&one) || !results_alloc(&many)) {
        CHECK(!"out of memory");
        goto done;
    }
    test_rng rng = {12};
    for (size_t i = 0; i < Q_FLOATS; i++)
        q_in[i] = (float)test_rng_uniform(&rng, -2, 2);
    for (size_t i = 0; i < K_FLOATS; i++)
        k_in[i] = (float)test_rng_uniform(&rng, -2, 2);
    run_calls(1, q_in, k_in, &one);
    run_calls(4, q_in, k_in, &many);
    compare("rope q", one.q, many.q, Q_FLOATS);
    compare("rope k", one.k, many.k, K_FLOATS);
    compare("rope, one token", one.q_one_token, many.q_one_token, Q_FLOATS);
    compare("sinusoidal table", one.table, many.table, TABLE_FLOATS);
    compare("sinusoidal add", one.added, many.added, TABLE_FLOATS);
    /* The calls did something: a rotation moves q, a table is not all zeros. */
    CHECK(memcmp(one.q, q_in, Q_FLOATS * sizeof(float)) != 0);
    CHECK(one.table[D_MODEL + 1] != 0.0f);
done:
    free(q_in);
    free(k_in);
    results_free(&one);
    results_free(&many);
}

int main(void)
{
    uint32_t cores = posenc__cpu_count();
    printf("  cores this process may use: %u\n", cores);
    CHECK(cores >= 1);
    test_pool();
    test_public_calls();
    return test_finish("test_cpu_threads");
}
