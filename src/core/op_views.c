/* SPDX-License-Identifier: MIT */
/* The tensor views of an operation, and the device-memory rule for work that outlives the call
 * (see op_views.h). */
#include "core/op_views.h"
#include "core/gpu_staging.h"
#include "core/tensor.h"

const char *const posenc__rope_view_names[POSENC__ROPE_VIEWS] = {
    "q", "q_out",   "k",   "k_out", "positions",     "slot_mapping", "k_cache",
    "v", "v_cache", "cos", "sin",   "q_norm_weight", "k_norm_weight"};
const char *const posenc__sinusoidal_view_names[POSENC__SINUSOIDAL_VIEWS] = {"out", "x",
                                                                             "positions"};

void posenc__rope_views(const posenc__rope_op *op, const posenc__view *views[POSENC__ROPE_VIEWS])
{
    views[0] = &op->q;
    views[1] = op->q_in_place ? NULL : &op->q_out;
    views[2] = op->has_k ? &op->k : NULL;
    views[3] = op->k_out_written && !op->k_in_place ? &op->k_out : NULL;
    views[4] = op->has_positions ? &op->positions : NULL;
    views[5] = op->has_k_cache ? &op->slots : NULL;
    views[6] = op->has_k_cache ? &op->k_cache : NULL;
    views[7] = op->has_v ? &op->v : NULL;
    views[8] = op->has_v ? &op->v_cache : NULL;
    views[9] = op->has_tables ? &op->cos : NULL;
    views[10] = op->has_tables ? &op->sin : NULL;
    views[11] = op->has_q_norm ? &op->q_norm_weight : NULL;
    views[12] = op->has_k_norm ? &op->k_norm_weight : NULL;
}

void posenc__sinusoidal_views(posenc_context *ctx, const posenc__sinusoidal_op *op,
                              const posenc__view *views[POSENC__SINUSOIDAL_VIEWS])
{
    bool x_is_out = op->has_x && posenc__views_identical(ctx, &op->out, &op->x);
    views[0] = &op->out;
    views[1] = op->has_x && !x_is_out ? &op->x : NULL;
    views[2] = op->has_positions ? &op->positions : NULL;
}

void posenc__rope_view_access(const posenc__rope_op *op, unsigned access[POSENC__ROPE_VIEWS])
{
    enum { R = POSENC__GPU_READ, W = POSENC__GPU_WRITE };
    access[0] = op->q_in_place ? R | W : R;
    access[1] = op->q_in_place ? 0 : W;
    access[2] = !op->has_k ? 0 : op->k_in_place ? R | W : R;
    access[3] = op->k_out_written && !op->k_in_place ? W : 0;
    access[4] = op->has_positions ? R : 0;
    /* The caches are written at the rows of the slots only: staged, their other rows are
     * copied in and back unchanged, like a view that is read and written. */
    access[5] = op->has_k_cache ? R : 0;
    access[6] = op->has_k_cache ? R | W : 0;
    access[7] = op->has_v ? R : 0;
    access[8] = op->has_v ? R | W : 0;
    access[9] = access[10] = op->has_tables ? R : 0;
    access[11] = op->has_q_norm ? R : 0;
    access[12] = op->has_k_norm ? R : 0;
}

void posenc__sinusoidal_view_access(const posenc__sinusoidal_op *op,
                                    const posenc__view *const views[POSENC__SINUSOIDAL_VIEWS],
                                    unsigned access[POSENC__SINUSOIDAL_VIEWS])
{
    bool x_is_out = op->has_x && !views[1];
    access[0] = POSENC__GPU_WRITE | (x_is_out ? POSENC__GPU_READ : 0u);
    access[1] = views[1] ? POSENC__GPU_READ : 0u;
    access[2] = op->has_positions ? POSENC__GPU_READ : 0u;
}

void posenc__rope_given_views(const posenc__rope_op *op,
                              const posenc__view *views[POSENC__ROPE_VIEWS])
{
    views[0] = &op->q;
    views[1] = &op->q_out; /* q itself when the caller left q_out out */
    views[2] = op->has_k ? &op->k : NULL;
    views[3] = op->k_out_written ? &op->k_out : NULL;
    views[4] = op->has_positions ? &op->positions : NULL;
    views[5] = op->has_k_cache ? &op->slots : NULL;
    views[6] = op->has_k_cache ? &op->k_cache : NULL;
    views[7] = op->has_v ? &op->v : NULL;
    views[8] = op->has_v ? &op->v_cache : NULL;
    views[9] = op->has_tables ? &op->cos : NULL;
    views[10] = op->has_tables ? &op->sin : NULL;
    views[11] = op->has_q_norm ? &op->q_norm_weight : NULL;
    views[12] = op->has_k_norm ? &op->k_norm_weight : NULL;
}

void posenc__sinusoidal_given_views(const posenc__sinusoidal_op *op,
                                    const posenc__view *views[POSENC__SINUSOIDAL_VIEWS])
{
    views[0] = &op->out;
    views[1] = op->has_x ? &op->x : NULL;
    views[2] = op->has_positions ? &op->positions : NULL;
}

posenc_status posenc__check_device_views(posenc_context *ctx, const posenc__view *const *views,
                                         const char *const *names, uint32_t count,
                                         bool wrapped_host_ok, const char *call)
{
    for (uint32_t i = 0; i < count; i++) {
        const posenc__view *view = views[i];
        if (!view)
            continue;
        if (view->host)
            return posenc__fail(ctx, POSENC_INVALID_ARGUMENT,
                                "%s.host: %s needs a posenc_buffer view, not host memory (use "
                                "the synchronous call for host tensors)",
                                names[i], call);
        if (!wrapped_host_ok && view->buffer && view->buffer->host_memory &&
            !view->buffer->host_imported)
            return posenc__fail(ctx, POSENC_UNSUPPORTED,
                                "%s.buffer: wraps host_memory, which this device copies at each "
                                "operation (it could not import it: see the log); %s needs "
                                "a buffer the device owns",
                                names[i], call);
    }
    return POSENC_OK;
}
