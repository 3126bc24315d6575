/* SPDX-License-Identifier: MIT */
/* The CPU backend's thread pool, on the platform layer's threads and condition variables and
 * core/atomics.h (so one code for POSIX and Windows). Each worker has a slot: the caller writes
 * a part of the job there and bumps the slot's ticket; a worker that finished a part shortly
 * before spins on its ticket for a while (SPIN_SECONDS) before sleeping on a condition
 * variable, and the caller, once its own part is done, spins the same way on the count of parts
 * still running. A slot is rewritten only after its part has finished, so a worker never sees a
 * half-written job. Waking a sleeping thread can take hundreds of microseconds (a virtual
 * machine's idle CPU must be woken by the host), which would dominate back-to-back calls of a
 * millisecond. Idle workers sleep after that; they never spin between calls that are further
 * apart. Waking them is not free for the caller either: on a 2-core virtual machine the system
 * call took 10 us and the worker started 25 us or more after it. So a part belongs to whoever
 * takes it first, its worker or the caller once its own part is done; and a call that finds
 * workers asleep wakes them only when that makes the job finish sooner (worth_waking, from
 * what the pool measured of its jobs and wake-ups), or when it comes soon after the last job:
 * calls back to back, which the workers then keep up with, spinning. A small job after a
 * pause, as a model makes between its other work, costs its parts one after another on the
 * caller: a timestep call of 25 us on one thread took 45 when it woke a worker. */
#include "cpu/cpu_pool.h"

#include "core/atomics.h"
#include "core/platform.h"

#include <stdbool.h>
#include <stdlib.h>

/* How long a thread spins for the next event before it sleeps. */
#define SPIN_SECONDS 200e-6

struct worker {
    posenc_cpu_pool *pool;
    uint32_t part;             /* 1..workers */
    posenc__atomic_u32 ticket; /* bumped (under the lock) when a part is given; it only has to
                                * differ from the last one seen, so wrapping is harmless */
    posenc__atomic_u32 taken;  /* the last ticket whose part someone took (take_part) */
    /* The part, written before the ticket is bumped. */
    posenc_cpu_task task;
    void *arg;
    uint32_t parts;
    char padding[64];          /* keeps tickets of different workers off one cache line */
};

struct posenc_cpu_pool {
    uint32_t workers;
    posenc__thread *threads;
    struct worker *slots;
    posenc__mutex lock;
    posenc__condition wake;     /* workers sleeping for a new ticket */
    posenc__condition done;     /* the caller sleeping for pending == 0 */
    posenc__atomic_u32 pending; /* worker parts of the current job not yet finished */
    posenc__atomic_u32 stop;    /* 1 once the pool is being destroyed */
    uint32_t sleepers;          /* workers in posenc__condition_wait; under the lock */
    bool caller_sleeping;       /* under the lock */
    /* The caller's own, for worth_waking: */
    double last_job;         /* when the caller finished its parts of the last job */
    double seconds_per_cost; /* a job's time on one thread per unit of its cost */
    double wake_seconds;     /* how much longer than the caller's own part a job that woke
                              * workers took */
};

uint32_t posenc_cpu_pool_size(const posenc_cpu_pool *pool) { return pool ? pool->workers + 1 : 1; }

/* Spins until the worker's ticket differs from `seen` (true) or SPIN_SECONDS have passed
 * (false). */
static bool spin_for_ticket(struct worker *self, uint32_t seen)
{
    double deadline = posenc__seconds_now() + SPIN_SECONDS;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (posenc__atomic_load_acquire(&self->ticket) != seen ||
                posenc__atomic_load_relaxed(&self->pool->stop))
                return true;
            posenc__cpu_pause();
        }
        if (posenc__seconds_now() > deadline)
            return false;
    }
}

/* Takes the part of `ticket` in `slot` for the thread that calls it: true for exactly one of
 * the worker and the caller. A part is taken only while its ticket is the slot's last, and the
 * caller gives the next only once every part of a job is done, so `taken` is one behind. */
static bool take_part(struct worker *slot, uint32_t ticket)
{
    return posenc__atomic_compare_exchange(&slot->taken, ticket - 1, ticket);
}

static void worker_main(void *opaque)
{
    struct worker *self = opaque;
    posenc_cpu_pool *pool = self->pool;
    uint32_t seen = 0;
    posenc__thread_spread(self->part);
    for (;;) {
        if (!spin_for_ticket(self, seen)) {
            posenc__mutex_lock(&pool->lock);
            while (posenc__atomic_load_acquire(&self->ticket) == seen &&
                   !posenc__atomic_load_acquire(&pool->stop)) {
                pool->sleepers++;
                posenc__condition_wait(&pool->wake, &pool->lock);
                pool->sleepers--;
            }
            posenc__mutex_unlock(&pool->lock);
        }
        if (posenc__atomic_load_acquire(&pool->stop))
            break;
        seen = posenc__atomic_load_acquire(&self->ticket);
        if (!take_part(self, seen))
            continue; /* the caller ran it */
        self->task(self->arg, self->part, self->parts);
        if (posenc__atomic_fetch_sub(&pool->pending, 1) == 1) {
            posenc__mutex_lock(&pool->lock);
            if (pool->caller_sleeping)
                posenc__condition_wake_one(&pool->done);
            posenc__mutex_unlock(&pool->lock);
        }
    }
}

static void stop_workers(posenc_cpu_pool *pool, uint32_t started)
{
    posenc__mutex_lock(&pool->lock);
    posenc__atomic_store_release(&pool->stop, 1);
    posenc__condition_wake_all(&pool->wake);
    posenc__mutex_unlock(&pool->lock);
    for (uint32_t i = 0; i < started; i++)
        posenc__thread_join(&pool->threads[i]);
}

static void free_pool(posenc_cpu_pool *pool, int synchronisation)
{
    if (synchronisation > 2)
        posenc__condition_destroy(&pool->done);
    if (synchronisation > 1)
        posenc__condition_destroy(&pool->wake);
    if (synchronisation > 0)
        posenc__mutex_destroy(&pool->lock);
    free(pool->slots);
    free(pool->threads);
    free(pool);
}

posenc_status posenc_cpu_pool_create(uint32_t workers, posenc_cpu_pool **out)
{
    posenc_cpu_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return POSENC_OUT_OF_MEMORY;
    if (workers == 0) {
        *out = pool;
        return POSENC_OK;
    }
    pool->threads = calloc(workers, sizeof *pool->threads);
    pool->slots = calloc(workers, sizeof *pool->slots);
    if (!pool->threads || !pool->slots) {
        free_pool(pool, 0);
        return POSENC_OUT_OF_MEMORY;
    }
    int made = 0; /* mutex, then the two condition variables */
    if (posenc__mutex_init(&pool->lock) && ++made && posenc__condition_init(&pool->wake) &&
        ++made && posenc__condition_init(&pool->done))
        ++made;
    if (made < 3) {
        free_pool(pool, made);
        return POSENC_INTERNAL;
    }
    for (uint32_t i = 0; i < workers; i++) {
        pool->slots[i].pool = pool;
        pool->slots[i].part = i + 1;
        if (!posenc__thread_start(&pool->threads[i], worker_main, &pool->slots[i])) {
            stop_workers(pool, i);
            free_pool(pool, 3);
            return POSENC_INTERNAL;
        }
    }
    pool->workers = workers;
    *out = pool;
    return POSENC_OK;
}

void posenc_cpu_pool_destroy(posenc_cpu_pool *pool)
{
    if (!pool)
        return;
    if (pool->workers) {
        stop_workers(pool, pool->workers);
        free_pool(pool, 3);
        return;
    }
    free(pool);
}

/* Whether waking the sleeping workers makes a job of `cost` in `parts` finish sooner than the
 * caller alone: woken, it lasts the caller's part and wake_seconds more (the wake-up's system
 * call, the workers' start, and their parts, which run slower on a core that was idle), so
 * alone > alone / parts + wake. Until the pool has measured a job, waking is taken to pay. */
static bool worth_waking(const posenc_cpu_pool *pool, uint32_t parts, uint64_t cost)
{
    if (pool->seconds_per_cost == 0 || cost == POSENC_CPU_POOL_TOGETHER)
        return true;
    double alone = (double)cost * pool->seconds_per_cost;
    return alone * (parts - 1) > pool->wake_seconds * parts;
}

/* What a job taught the pool: its time on one thread per unit of cost, from the caller's part
 * (`own` seconds, one of `parts`); and where it woke workers at `start`, when it ended (`end`),
 * or that they started after `stolen_at` (if at all) where the caller ran some of their parts.
 * Moving averages, a quarter of each new figure, as single calls are noisy and a virtual
 * machine's host may hold a thread back now and then. */
static void learn(posenc_cpu_pool *pool, uint32_t parts, uint64_t cost, double own, double start,
                  double end, double stolen_at)
{
    if (cost > 0 && cost != POSENC_CPU_POOL_TOGETHER) {
        double sample = own * parts / (double)cost;
        pool->seconds_per_cost += pool->seconds_per_cost > 0
                                      ? (sample - pool->seconds_per_cost) / 4
                                      : sample;
    }
    if (stolen_at > 0) {
        /* A lower bound: it only ever raises the average. */
        if (stolen_at - start > pool->wake_seconds)
            pool->wake_seconds += (stolen_at - start - pool->wake_seconds) / 4;
    } else if (end > 0) {
        double longer = end - start - own;
        pool->wake_seconds += ((longer > 0 ? longer : 0) - pool->wake_seconds) / 4;
    }
}

void posenc_cpu_pool_run(posenc_cpu_pool *pool, uint32_t parts, uint64_t cost,
                         posenc_cpu_task task, void *arg)
{
    if (!pool || !pool->workers || parts < 2) {
        for (uint32_t i = 0; i < parts; i++)
            task(arg, i, parts);
        return;
    }
    double start = posenc__seconds_now();
    for (uint32_t i = 1; i < parts; i++) {
        struct worker *slot = &pool->slots[i - 1];
        slot->task = task;
        slot->arg = arg;
        slot->parts = parts;
    }
    /* Published by the tickets' release below. */
    posenc__atomic_store_relaxed(&pool->pending, parts - 1);
    posenc__mutex_lock(&pool->lock);
    for (uint32_t i = 1; i < parts; i++)
        posenc__atomic_fetch_add(&pool->slots[i - 1].ticket, 1);
    bool wake = pool->sleepers > 0 && (start - pool->last_job < SPIN_SECONDS ||
                                       worth_waking(pool, parts, cost));
    posenc__mutex_unlock(&pool->lock);
    double own_start = start;
    if (wake) {
        posenc__condition_wake_all(&pool->wake);
        own_start = posenc__seconds_now();
    }

    task(arg, 0, parts);

    /* The parts no worker has taken yet, the last first: their workers are asleep or still
     * waking up. */
    double own_end = posenc__seconds_now();
    bool stole = false;
    for (uint32_t i = parts - 1; i >= 1; i--) {
        struct worker *slot = &pool->slots[i - 1];
        if (take_part(slot, posenc__atomic_load_relaxed(&slot->ticket))) {
            task(arg, i, parts);
            posenc__atomic_fetch_sub(&pool->pending, 1);
            stole = true;
        }
    }

    pool->last_job = posenc__seconds_now();
    double deadline = pool->last_job + SPIN_SECONDS;
    while (posenc__atomic_load_acquire(&pool->pending)) {
        for (int i = 0; i < 64; i++)
            posenc__cpu_pause();
        if (posenc__seconds_now() > deadline) {
            posenc__mutex_lock(&pool->lock);
            while (posenc__atomic_load_acquire(&pool->pending)) {
                pool->caller_sleeping = true;
                posenc__condition_wait(&pool->done, &pool->lock);
            }
            pool->caller_sleeping = false;
            posenc__mutex_unlock(&pool->lock);
            break;
        }
    }

    learn(pool, parts, cost, own_end - own_start, start, wake ? posenc__seconds_now() : 0,
          wake && stole ? own_end : 0);
}
