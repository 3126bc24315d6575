/* SPDX-License-Identifier: MIT */
/* The CPU backend's thread pool on POSIX threads. Each worker has a slot: the caller writes a
 * part of the job there and bumps the slot's ticket; a worker that finished a part shortly
 * before spins on its ticket for a while (SPIN_SECONDS) before sleeping on a condition
 * variable, and the caller, once its own part is done, spins the same way on the count of parts
 * still running. A slot is rewritten only after its part has finished, so a worker never sees a
 * half-written job. Waking a sleeping thread can
 * take hundreds of microseconds (a virtual machine's idle CPU must be woken by the host), which
 * would dominate back-to-back calls of a millisecond. Idle workers sleep after that; they never
 * spin between calls that are further apart. Elsewhere (no pthreads) jobs run on the caller. */
#if !defined(_WIN32)
#  define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif

#include "cpu/cpu_pool.h"

#include <stdbool.h>
#include <stdlib.h>

#if !defined(_WIN32)
#  include <pthread.h>
#  include <stdatomic.h>
#  include <time.h>
#  define POOL_THREADS 1
#  if defined(__x86_64__) || defined(__i386__)
#    include <immintrin.h>
#    define CPU_RELAX() _mm_pause()
#  elif defined(__aarch64__)
#    define CPU_RELAX() __asm__ volatile("yield")
#  else
#    define CPU_RELAX() ((void)0)
#  endif
#else
#  define POOL_THREADS 0
#endif

/* How long a thread spins for the next event before it sleeps. */
#define SPIN_SECONDS 200e-6

struct posenc_cpu_pool {
    uint32_t workers;
#if POOL_THREADS
    pthread_t *threads;
    struct worker *slots;
    pthread_mutex_t lock;
    pthread_cond_t wake;        /* workers sleeping for a new ticket */
    pthread_cond_t done;        /* the caller sleeping for pending == 0 */
    atomic_uint pending;        /* worker parts of the current job not yet finished */
    atomic_bool stop;
    uint32_t sleepers;          /* workers in pthread_cond_wait; under the lock */
    bool caller_sleeping;       /* under the lock */
#endif
};

uint32_t posenc_cpu_pool_size(const posenc_cpu_pool *pool) { return pool ? pool->workers + 1 : 1; }

#if POOL_THREADS
struct worker {
    posenc_cpu_pool *pool;
    uint32_t part;               /* 1..workers */
    atomic_uint_fast64_t ticket; /* bumped (under the lock) when a part is given */
    /* The part, written before the ticket is bumped. */
    posenc_cpu_task task;
    void *arg;
    uint32_t parts;
    char padding[64];            /* keeps tickets of different workers off one cache line */
};

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Spins until the worker's ticket differs from `seen` (true) or SPIN_SECONDS have passed
 * (false). */
static bool spin_for_ticket(struct worker *self, uint64_t seen)
{
    double deadline = seconds_now() + SPIN_SECONDS;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(&self->ticket, memory_order_acquire) != seen ||
                atomic_load_explicit(&self->pool->stop, memory_order_relaxed))
                return true;
            CPU_RELAX();
        }
        if (seconds_now() > deadline)
            return false;
    }
}

static void *worker_main(void *opaque)
{
    struct worker *self = opaque;
    posenc_cpu_pool *pool = self->pool;
    uint64_t seen = 0;
    for (;;) {
        if (!spin_for_ticket(self, seen)) {
            pthread_mutex_lock(&pool->lock);
            while (atomic_load(&self->ticket) == seen && !atomic_load(&pool->stop)) {
                pool->sleepers++;
                pthread_cond_wait(&pool->wake, &pool->lock);
                pool->sleepers--;
            }
            pthread_mutex_unlock(&pool->lock);
        }
        if (atomic_load(&pool->stop))
            break;
        seen = atomic_load_explicit(&self->ticket, memory_order_acquire);
        self->task(self->arg, self->part, self->parts);
        if (atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->lock);
            if (pool->caller_sleeping)
                pthread_cond_signal(&pool->done);
            pthread_mutex_unlock(&pool->lock);
        }
    }
    return NULL;
}

static void stop_workers(posenc_cpu_pool *pool, uint32_t started)
{
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->stop, true);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(pool->threads[i], NULL);
}

static void free_pool(posenc_cpu_pool *pool, int synchronisation)
{
    if (synchronisation > 2)
        pthread_cond_destroy(&pool->done);
    if (synchronisation > 1)
        pthread_cond_destroy(&pool->wake);
    if (synchronisation > 0)
        pthread_mutex_destroy(&pool->lock);
    free(pool->slots);
    free(pool->threads);
    free(pool);
}
#endif

posenc_status posenc_cpu_pool_create(uint32_t workers, posenc_cpu_pool **out)
{
    posenc_cpu_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return POSENC_OUT_OF_MEMORY;
#if POOL_THREADS
    if (workers == 0) {
        *out = pool;
        return POSENC_OK;
    }
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->stop, false);
    pool->threads = calloc(workers, sizeof *pool->threads);
    pool->slots = calloc(workers, sizeof *pool->slots);
    if (!pool->threads || !pool->slots) {
        free_pool(pool, 0);
        return POSENC_OUT_OF_MEMORY;
    }
    int made = 0; /* mutex, then the two condition variables */
    if (pthread_mutex_init(&pool->lock, NULL) == 0 && ++made &&
        pthread_cond_init(&pool->wake, NULL) == 0 && ++made &&
        pthread_cond_init(&pool->done, NULL) == 0)
        ++made;
    if (made < 3) {
        free_pool(pool, made);
        return POSENC_INTERNAL;
    }
    for (uint32_t i = 0; i < workers; i++) {
        pool->slots[i].pool = pool;
        pool->slots[i].part = i + 1;
        atomic_init(&pool->slots[i].ticket, 0);
        if (pthread_create(&pool->threads[i], NULL, worker_main, &pool->slots[i]) != 0) {
            stop_workers(pool, i);
            free_pool(pool, 3);
            return POSENC_INTERNAL;
        }
    }
    pool->workers = workers;
#else
    (void)workers;
#endif
    *out = pool;
    return POSENC_OK;
}

void posenc_cpu_pool_destroy(posenc_cpu_pool *pool)
{
    if (!pool)
        return;
#if POOL_THREADS
    if (pool->workers) {
        stop_workers(pool, pool->workers);
        free_pool(pool, 3);
        return;
    }
#endif
    free(pool);
}

void posenc_cpu_pool_run(posenc_cpu_pool *pool, uint32_t parts, posenc_cpu_task task, void *arg)
{
#if POOL_THREADS
    if (pool && pool->workers && parts > 1) {
        for (uint32_t i = 1; i < parts; i++) {
            struct worker *slot = &pool->slots[i - 1];
            slot->task = task;
            slot->arg = arg;
            slot->parts = parts;
        }
        atomic_store_explicit(&pool->pending, parts - 1, memory_order_relaxed);
        pthread_mutex_lock(&pool->lock);
        for (uint32_t i = 1; i < parts; i++)
            atomic_fetch_add_explicit(&pool->slots[i - 1].ticket, 1, memory_order_release);
        bool wake = pool->sleepers > 0;
        pthread_mutex_unlock(&pool->lock);
        if (wake)
            pthread_cond_broadcast(&pool->wake);

        task(arg, 0, parts);

        double deadline = seconds_now() + SPIN_SECONDS;
        while (atomic_load_explicit(&pool->pending, memory_order_acquire)) {
            for (int i = 0; i < 64; i++)
                CPU_RELAX();
            if (seconds_now() > deadline) {
                pthread_mutex_lock(&pool->lock);
                while (atomic_load_explicit(&pool->pending, memory_order_acquire)) {
                    pool->caller_sleeping = true;
                    pthread_cond_wait(&pool->done, &pool->lock);
                }
                pool->caller_sleeping = false;
                pthread_mutex_unlock(&pool->lock);
                break;
            }
        }
        return;
    }
#else
    (void)pool;
#endif
    for (uint32_t i = 0; i < parts; i++)
        task(arg, i, parts);
}
