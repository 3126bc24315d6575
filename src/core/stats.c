/* SPDX-License-Identifier: MIT */
/* posenc_context_stats: a reading of the counters that calls keep in their context. */
#include "core/internal.h"

posenc_status posenc_context_stats(const posenc_context *ctx, posenc_stats *stats)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!stats) /* the message is the context's, set whole under its lock like any other */
        return posenc__fail((posenc_context *)ctx, POSENC_INVALID_ARGUMENT, "stats: is NULL");
    /* A success leaves the context's message alone: readings run beside every other call, and
     * would otherwise clear the message of one that just failed on another thread. */
    const posenc__stats *s = &ctx->stats;
    posenc_stats reading = {
        .rope_calls = posenc__atomic64_load(&s->rope_calls),
        .sinusoidal_calls = posenc__atomic64_load(&s->sinusoidal_calls),
        .staged_bytes = posenc__atomic64_load(&s->staged_bytes),
        .uploaded_bytes = posenc__atomic64_load(&s->uploaded_bytes),
        .downloaded_bytes = posenc__atomic64_load(&s->downloaded_bytes),
        .kernels_built = posenc__atomic64_load(&s->kernels_built),
        .kernels_loaded = posenc__atomic64_load(&s->kernels_loaded),
        .freq_tables = posenc__atomic64_load(&s->freq_tables),
        .buffer_bytes = posenc__atomic64_load(&s->buffer_bytes),
        .staging_bytes = posenc__atomic64_load(&s->staging_bytes),
        .table_bytes = posenc__atomic64_load(&s->table_bytes),
    };
    reading.device_bytes = reading.buffer_bytes + reading.staging_bytes + reading.table_bytes;
    *stats = reading;
    return POSENC_OK;
}
