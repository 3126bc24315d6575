/* SPDX-License-Identifier: MIT */
/* posenc_prepare: every descriptor validated as its operation validates it, then the backend
 * builds each one's kernel and frequency table ahead of the first call. */
#include "backend.h"

/* The message the front end or the backend just set, with the descriptor's place before it:
 * "rope[2].rotary_dim: ..." for a field, "rope[2]: vulkan: ..." for a device error. */
static posenc_status fail_at(posenc_context *ctx, posenc_status status, const char *list,
                             size_t index, bool field)
{
    char message[POSENC__MESSAGE_BYTES];
    posenc__copy_string(message, sizeof message, posenc_context_last_error(ctx));
    return posenc__fail(ctx, status, "%s[%zu]%s%s", list, index, field ? "." : ": ", message);
}

/* Validates every descriptor of one list, `count` of them at `descs` (posenc_rope_desc when
 * `rope`), with build == false, or builds for each with build == true. */
static posenc_status each(posenc_context *ctx, bool rope, const void *descs, size_t count,
                          bool build)
{
    const char *list = rope ? "rope" : "sinusoidal";
    for (size_t i = 0; i < count; i++) {
        const void *desc = rope ? (const void *)&((const posenc_rope_desc *)descs)[i]
                                : (const void *)&((const posenc_sinusoidal_desc *)descs)[i];
        posenc__op_storage storage;
        posenc__op op;
        posenc_status status = posenc__op_resolve(ctx, rope, desc, &storage, &op);
        if (status != POSENC_OK)
            return fail_at(ctx, status, list, i, true);
        if (build && ctx->backend->prepare) {
            status = ctx->backend->prepare(ctx, &op);
            if (status != POSENC_OK)
                return fail_at(ctx, status, list, i, false);
        }
    }
    return POSENC_OK;
}

posenc_status posenc_prepare(posenc_context *ctx, const posenc_prepare_desc *desc)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!desc)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "desc: is NULL");
    if (desc->rope_count && !desc->rope)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT, "rope: is NULL but rope_count is %zu",
                            desc->rope_count);
    if (desc->sinusoidal_count && !desc->sinusoidal)
        return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                            "sinusoidal: is NULL but sinusoidal_count is %zu",
                            desc->sinusoidal_count);
    /* All validated first, so that a bad descriptor anywhere builds nothing. The second pass
     * resolves each again: an operation's frequencies live in the context's one-entry cache,
     * valid only until the next descriptor is resolved. */
    posenc_status status = POSENC_OK;
    for (int build = 0; build < 2 && status == POSENC_OK; build++) {
        status = each(ctx, true, desc->rope, desc->rope_count, build);
        if (status == POSENC_OK)
            status = each(ctx, false, desc->sinusoidal, desc->sinusoidal_count, build);
    }
    return status;
}
