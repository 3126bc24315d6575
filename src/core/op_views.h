/* SPDX-License-Identifier: MIT */
/* The tensor views an operation binds, listed once for every entry point that treats them
 * alike, and the rule for work that runs on device memory only. */
#ifndef POSENC_CORE_OP_VIEWS_H
#define POSENC_CORE_OP_VIEWS_H

#include "core/internal.h"

/* q, q_out, k, k_out, positions, slot_mapping, k_cache, v, v_cache, cos, sin, q_norm_weight,
 * k_norm_weight: the index of each in the lists below. */
#define POSENC__ROPE_VIEWS 13
enum {
    POSENC__ROPE_Q,
    POSENC__ROPE_Q_OUT,
    POSENC__ROPE_K,
    POSENC__ROPE_K_OUT,
    POSENC__ROPE_POSITIONS,
    POSENC__ROPE_SLOTS,
    POSENC__ROPE_K_CACHE,
    POSENC__ROPE_V,
    POSENC__ROPE_V_CACHE,
    POSENC__ROPE_COS,
    POSENC__ROPE_SIN,
    POSENC__ROPE_Q_NORM,
    POSENC__ROPE_K_NORM
};
#define POSENC__SINUSOIDAL_VIEWS 3 /* out, x, positions */

/* The names messages use, in the order of the lists below. */
extern const char *const posenc__rope_view_names[POSENC__ROPE_VIEWS];
extern const char *const posenc__sinusoidal_view_names[POSENC__SINUSOIDAL_VIEWS];

/* Fills `views` with the operation's views; NULL where a view is absent or is its own input
 * (an output rotated in place, x added into out itself) or is not written (k_out standing for k
 * when only k_cache takes the rotated k), so each memory appears once. Each of those stands
 * right after the view it is (q_out after q, k_out after k, x after out): a backend that must
 * bind every entry binds a NULL one as the one before it. */
void posenc__rope_views(const posenc__rope_op *op, const posenc__view *views[POSENC__ROPE_VIEWS]);
void posenc__sinusoidal_views(posenc_context *ctx, const posenc__sinusoidal_op *op,
                              const posenc__view *views[POSENC__SINUSOIDAL_VIEWS]);

/* How the kernels use each view of those lists, as POSENC__GPU_READ | POSENC__GPU_WRITE
 * (core/gpu_staging.h): a view that is its own output (rotated in place, x added into out
 * itself) is read and written. Absent views get 0. GPU backends stage and bind by these. */
void posenc__rope_view_access(const posenc__rope_op *op, unsigned access[POSENC__ROPE_VIEWS]);
void posenc__sinusoidal_view_access(const posenc__sinusoidal_op *op,
                                    const posenc__view *const views[POSENC__SINUSOIDAL_VIEWS],
                                    unsigned access[POSENC__SINUSOIDAL_VIEWS]);

/* Every view the caller set, outputs in place included: an output given as a view of its own
 * is checked as what it is, even where it addresses its input's memory (a host view over the
 * host memory of a buffer input is still a host view). For the checks below. */
void posenc__rope_given_views(const posenc__rope_op *op,
                              const posenc__view *views[POSENC__ROPE_VIEWS]);
void posenc__sinusoidal_given_views(const posenc__sinusoidal_op *op,
                                    const posenc__view *views[POSENC__SINUSOIDAL_VIEWS]);

/* Work that outlives the call (submits, commands recorded or enqueued for the caller to run)
 * reads and writes device memory only: a host view is INVALID_ARGUMENT, and, unless
 * `wrapped_host_ok`, a buffer wrapping host_memory that the device did not import is
 * UNSUPPORTED (GPU backends copy that memory around each synchronous call, which they cannot do
 * after work they do not wait for).
 * The message names the view and `call`. NULL entries are skipped. */
posenc_status posenc__check_device_views(posenc_context *ctx, const posenc__view *const *views,
                                         const char *const *names, uint32_t count,
                                         bool wrapped_host_ok, const char *call);

#endif
