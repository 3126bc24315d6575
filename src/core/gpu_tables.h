/* SPDX-License-Identifier: MIT */
/* Frequency tables for GPU kernels: the words the kernels read, and the one cache policy every
 * GPU backend keeps its device copies by.
 *
 * Encoding: for each frequency j of `count`, words 3j..3j+2 are (int_turns, frac >> 32,
 * frac & 0xffffffff); then word 3*count + j is its position component (only RoPE reads it). A
 * table of no frequencies is four zero words, so that a kernel argument can still be bound.
 * A table with steps (sinusoidal_contiguous.cl's) goes on with step k = 0 .. steps - 1 of every
 * frequency: `count` words of cos(k f) then `count` of sin(k f), float bits, each computed
 * exactly (core/angle.h).
 *
 * Policy: least recently used, bounded in both tables (POSENC__GPU_MAX_TABLES) and bytes
 * (POSENC__GPU_TABLE_BYTES, one table larger than that is kept alone). An entry is found by the
 * front end's freqs_id first (no encoding: the decode step of a model's layers), then by the
 * encoded content, hashed into its cache key and compared word for word; entries hold the words,
 * so a hit never reads device memory. A small bound keeps device memory bounded for callers
 * that make many contexts; LRU keeps the tables of a model (one RoPE and one sinusoidal table,
 * or one per layer with per-layer scaling) while a caller cycles through fewer than the bound.
 *
 * A backend pins a table whose device copy may be bound by work posenc cannot see finish
 * (commands recorded into a caller's command buffer, which the caller may submit again at any
 * time). Pinned tables are never evicted. Once every table is pinned and the bound is reached, a
 * new table is not cached: its words are handed out as `uncached`, and the backend makes a copy
 * that lives only as long as the work it is bound to (Vulkan writes it from the command buffer
 * itself). So any number of distinct tables can be used, in bounded memory. */
#ifndef POSENC_CORE_GPU_TABLES_H
#define POSENC_CORE_GPU_TABLES_H

#include "core/internal.h"

#define POSENC__GPU_MAX_TABLES 256
#define POSENC__GPU_TABLE_BYTES (UINT64_C(4) << 20)
/* The slot of a table found but not cached (posenc__gpu_tables_find). */
#define POSENC__GPU_UNCACHED UINT32_MAX

/* Words of the encoded table of `count` frequencies. */
uint64_t posenc__gpu_freq_words(uint32_t count);
/* Writes the posenc__gpu_freq_words(count) words of `freqs`. */
void posenc__gpu_freq_encode(const posenc__freq *freqs, uint32_t count, uint32_t *words);
/* Words of `steps` steps of `count` frequencies, and their encoding. */
uint64_t posenc__gpu_step_words(uint32_t count, uint32_t steps);
void posenc__gpu_step_encode(const posenc__freq *freqs, uint32_t count, uint32_t steps,
                             uint32_t *words);
/* The cache key of an encoded table: FNV-1a 64 of its words. */
uint64_t posenc__gpu_freq_key(const uint32_t *words, uint64_t word_count);

/* What a kernel's table holds: `count` frequencies, encoded as above with `steps` steps (0:
 * none) and found by `id` (a freqs_id; 0: none) or by content, then `word_count` words as they
 * are (RoPE's QK norm words);
 * or, with freqs NULL, only the words (found by content: RoPE's caller cos/sin tables' layout,
 * core/gpu_rope.h). Neither: no table. */
#define POSENC__GPU_SOURCE_WORDS 16
typedef struct posenc__gpu_table_source {
    const posenc__freq *freqs;
    uint32_t count;
    uint32_t steps;
    uint64_t id;
    uint32_t words[POSENC__GPU_SOURCE_WORDS];
    uint32_t word_count;
} posenc__gpu_table_source;

static inline bool posenc__gpu_table_given(const posenc__gpu_table_source *source)
{
    return source->freqs || source->word_count;
}

typedef struct posenc__gpu_table {
    uint32_t *words;   /* the encoded table (owned); NULL: a free slot */
    uint64_t word_count;
    uint32_t count;    /* frequencies */
    uint64_t key;
    uint64_t id;       /* the freqs_id it was last found by (0: none) */
    uint64_t last_use; /* the cache's use counter at its last lookup */
    bool pinned;       /* set by the backend: never evicted, kept until posenc__gpu_tables_fini */
} posenc__gpu_table;

/* A backend keeps its device copy of table i in its own slot i. */
typedef struct posenc__gpu_tables {
    posenc__gpu_table slots[POSENC__GPU_MAX_TABLES];
    uint32_t held;    /* slots holding a table */
    uint64_t bytes;   /* words held, in bytes */
    uint64_t uses;
    /* The last table found while every slot was pinned (words, word_count and count only):
     * valid until the next find. */
    posenc__gpu_table uncached;
} posenc__gpu_tables;

/* Releases the backend's device copy of slot `slot` before the cache forgets it: OK, or a
 * status (with the context's error set) when it cannot (its work is still pending on a queue
 * posenc does not own). */
typedef posenc_status (*posenc__gpu_evict_fn)(posenc_context *ctx, uint32_t slot, void *user);

/* Finds the table of `source`. On a hit `*slot` is its slot and `*hit` true.
 * On a miss the least recently used unpinned tables are evicted (through `evict`) until the new
 * one fits, and `*slot` holds the new table's words: the backend makes its device copy from
 * them, or calls posenc__gpu_tables_drop if it cannot. When only pinned tables are left to
 * evict, `*slot` is POSENC__GPU_UNCACHED and the words are in `tables->uncached`. `what` names
 * the call in messages. */
posenc_status posenc__gpu_tables_find(posenc_context *ctx, posenc__gpu_tables *tables,
                                      const posenc__gpu_table_source *source, const char *what,
                                      posenc__gpu_evict_fn evict, void *user, uint32_t *slot,
                                      bool *hit);
/* Forgets slot `slot` (its device copy is gone or was never made). The context's statistics
 * count a table from its find to its drop. */
void posenc__gpu_tables_drop(posenc_context *ctx, posenc__gpu_tables *tables, uint32_t slot);
/* Forgets every table; the backend releases its device copies itself. */
void posenc__gpu_tables_fini(posenc_context *ctx, posenc__gpu_tables *tables);

#endif
