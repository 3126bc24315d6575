/* SPDX-License-Identifier: MIT */
/* Frequency tables for GPU kernels: their encoding and the cache of them (gpu_tables.h). */
#include "core/gpu_tables.h"

#include <stdlib.h>
#include <string.h>

uint64_t posenc__gpu_freq_words(uint32_t count)
{
    return 4 * (uint64_t)(count ? count : 1);
}

void posenc__gpu_freq_encode(const posenc__freq *freqs, uint32_t count, uint32_t *words)
{
    if (count == 0)
        memset(words, 0, 4 * sizeof *words);
    for (uint32_t j = 0; j < count; j++) {
        words[3 * j] = freqs[j].int_turns;
        words[3 * j + 1] = (uint32_t)(freqs[j].frac >> 32);
        words[3 * j + 2] = (uint32_t)freqs[j].frac;
        words[3 * count + j] = freqs[j].component; /* after the triplets */
    }
}

uint64_t posenc__gpu_step_words(uint32_t count, uint32_t steps)
{
    return 2 * (uint64_t)count * steps;
}

void posenc__gpu_step_encode(const posenc__freq *freqs, uint32_t count, uint32_t steps,
                             uint32_t *words)
{
    for (uint32_t k = 0; k < steps; k++) {
        uint32_t *cos_words = words + 2 * (size_t)count * k, *sin_words = cos_words + count;
        int64_t position = posenc__position_from_i32((int32_t)k);
        for (uint32_t j = 0; j < count; j++) {
            float s, c;
            posenc__sincos_turns(posenc__turns(position, freqs[j]), &s, &c);
            memcpy(&cos_words[j], &c, sizeof c);
            memcpy(&sin_words[j], &s, sizeof s);
        }
    }
}

uint64_t posenc__gpu_freq_key(const uint32_t *words, uint64_t word_count)
{
    uint64_t hash = UINT64_C(0xcbf29ce484222325);
    for (uint64_t i = 0; i < word_count; i++) {
        for (int b = 0; b < 32; b += 8) {
            hash ^= (words[i] >> b) & 0xffu;
            hash *= UINT64_C(0x100000001b3);
        }
    }
    return hash;
}

void posenc__gpu_tables_drop(posenc_context *ctx, posenc__gpu_tables *tables, uint32_t slot)
{
    posenc__gpu_table *table = &tables->slots[slot];
    if (!table->words)
        return;
    free(table->words);
    uint64_t bytes = table->word_count * sizeof(uint32_t);
    tables->bytes -= bytes;
    tables->held--;
    posenc__atomic64_sub(&ctx->stats.table_bytes, bytes);
    posenc__atomic64_sub(&ctx->stats.freq_tables, 1);
    *table = (posenc__gpu_table){0};
}

void posenc__gpu_tables_fini(posenc_context *ctx, posenc__gpu_tables *tables)
{
    for (uint32_t i = 0; i < POSENC__GPU_MAX_TABLES; i++)
        posenc__gpu_tables_drop(ctx, tables, i);
    free(tables->uncached.words);
    tables->uncached = (posenc__gpu_table){0};
}

static void use(posenc__gpu_tables *tables, uint32_t slot, uint64_t id)
{
    tables->slots[slot].last_use = tables->uses;
    if (id)
        tables->slots[slot].id = id;
}

posenc_status posenc__gpu_tables_find(posenc_context *ctx, posenc__gpu_tables *tables,
                                      const posenc__gpu_table_source *source, const char *what,
                                      posenc__gpu_evict_fn evict, void *user, uint32_t *slot,
                                      bool *hit)
{
    uint32_t count = source->freqs ? source->count : 0;
    uint64_t id = source->freqs ? source->id : 0;
    tables->uses++;
    uint32_t steps = source->freqs ? source->steps : 0;
    uint64_t word_count = (source->freqs ? posenc__gpu_freq_words(count) : 0) +
                          posenc__gpu_step_words(count, steps) + source->word_count;
    uint64_t tail = word_count - source->word_count; /* where the words given as they are go */
    for (uint32_t i = 0; i < POSENC__GPU_MAX_TABLES && id; i++) {
        const posenc__gpu_table *table = &tables->slots[i];
        if (table->words && table->id == id && table->count == count &&
            table->word_count == word_count &&
            memcmp(table->words + tail, source->words, source->word_count * 4) == 0) {
            use(tables, i, id);
            *slot = i;
            *hit = true;
            return POSENC_OK;
        }
    }
    uint64_t bytes = word_count * sizeof(uint32_t);
    uint32_t *words = bytes <= SIZE_MAX ? malloc((size_t)bytes) : NULL;
    if (!words)
        return posenc__fail(ctx, POSENC_OUT_OF_MEMORY,
                            "%s: out of host memory for a frequency table of %llu bytes", what,
                            (unsigned long long)bytes);
    if (source->freqs) {
        posenc__gpu_freq_encode(source->freqs, count, words);
        posenc__gpu_step_encode(source->freqs, count, steps,
                                words + posenc__gpu_freq_words(count));
    }
    memcpy(words + tail, source->words, source->word_count * sizeof *words);
    uint64_t key = posenc__gpu_freq_key(words, word_count);
    for (uint32_t i = 0; i < POSENC__GPU_MAX_TABLES; i++) {
        const posenc__gpu_table *table = &tables->slots[i];
        if (table->words && table->key == key && table->word_count == word_count &&
            memcmp(table->words, words, (size_t)bytes) == 0) {
            free(words);
            use(tables, i, id);
            *slot = i;
            *hit = true;
            return POSENC_OK;
        }
    }

    /* Room: the least recently used go first, pinned ones never. */
    while (tables->held >= POSENC__GPU_MAX_TABLES ||
           (tables->held > 0 && tables->bytes + bytes > POSENC__GPU_TABLE_BYTES)) {
        uint32_t oldest = POSENC__GPU_MAX_TABLES;
        for (uint32_t i = 0; i < POSENC__GPU_MAX_TABLES; i++) {
            if (tables->slots[i].words && !tables->slots[i].pinned &&
                (oldest == POSENC__GPU_MAX_TABLES ||
                 tables->slots[i].last_use < tables->slots[oldest].last_use))
                oldest = i;
        }
        if (oldest == POSENC__GPU_MAX_TABLES) { /* all pinned: handed out, not cached */
            free(tables->uncached.words);
            tables->uncached = (posenc__gpu_table){
                .words = words, .word_count = word_count, .count = count, .key = key};
            *slot = POSENC__GPU_UNCACHED;
            *hit = false;
            return POSENC_OK;
        }
        posenc_status status = evict(ctx, oldest, user);
        if (status != POSENC_OK) {
            free(words);
            return status;
        }
        posenc__gpu_tables_drop(ctx, tables, oldest);
    }
    uint32_t free_slot = 0;
    while (tables->slots[free_slot].words)
        free_slot++;
    tables->slots[free_slot] = (posenc__gpu_table){
        .words = words, .word_count = word_count, .count = count, .key = key, .id = id};
    tables->held++;
    tables->bytes += bytes;
    /* Counted as the device copy the backend makes now, or drops again if it cannot. */
    posenc__atomic64_add(&ctx->stats.table_bytes, bytes);
    posenc__atomic64_add(&ctx->stats.freq_tables, 1);
    use(tables, free_slot, id);
    *slot = free_slot;
    *hit = false;
    return POSENC_OK;
}
