/* SPDX-License-Identifier: MIT */
/* The CPU backend's thread pool: worker threads started with the context and reused by every
 * call. A job runs as `count` parts, part 0 on the calling thread; the call returns when all are
 * done. The same pool runs on POSIX and Windows (cpu_pool.c, over core/platform.h). */
#ifndef POSENC_CPU_POOL_H
#define POSENC_CPU_POOL_H

#include <posenc/posenc.h>

#include <stdint.h>

typedef struct posenc_cpu_pool posenc_cpu_pool;

/* One part of a job: `part` of `parts`. */
typedef void (*posenc_cpu_task)(void *arg, uint32_t part, uint32_t parts);

/* Starts `workers` threads (0 is allowed: every job then runs on the caller). On failure returns
 * OUT_OF_MEMORY or INTERNAL, with nothing left running or allocated. */
posenc_status posenc_cpu_pool_create(uint32_t workers, posenc_cpu_pool **pool);
/* Stops and joins the workers. NULL is a no-op. */
void posenc_cpu_pool_destroy(posenc_cpu_pool *pool);
/* The number of parts a job can run at once: workers + 1. */
uint32_t posenc_cpu_pool_size(const posenc_cpu_pool *pool);
/* Runs task(arg, i, parts) for every i < parts (parts <= posenc_cpu_pool_size), part 0 on the
 * calling thread and each other part on whichever of its worker and the caller takes it first,
 * and returns when all have finished. `cost` is the job's size in any unit its time on one
 * thread is about proportional to (the CPU backend's: bytes of memory traffic): workers asleep
 * are woken only where the pool's measurements say the job then ends sooner, or when the job
 * comes soon after the last one; awake workers take their parts either way. No allocation. */
void posenc_cpu_pool_run(posenc_cpu_pool *pool, uint32_t parts, uint64_t cost,
                         posenc_cpu_task task, void *arg);

/* The cost of a job whose parts must run at once, each on its own thread (they wait for each
 * other): it wakes sleeping workers always, and teaches the pool nothing. */
#define POSENC_CPU_POOL_TOGETHER UINT64_MAX

#endif
