/* SPDX-License-Identifier: MIT */
/* Device selection: selector strings, POSENC_DEVICE, AUTO's ranking and the fallback order. */
#ifndef POSENC_CORE_SELECT_H
#define POSENC_CORE_SELECT_H

#include "core/internal.h"

/* The device to try first for `desc`, and why (a static string). A request that names a
 * backend (desc->backend, or a selector such as "cpu" or "vulkan:1" in desc->device or
 * POSENC_DEVICE) lists that backend's devices alone, loading no other runtime; AUTO, a global
 * index or a name lists every backend's. Fails (thread error set) with DEVICE_NOT_FOUND when
 * nothing matches, BACKEND_UNAVAILABLE when the backend asked for is absent. */
posenc_status posenc__select_device(const posenc_context_desc *desc,
                                    const posenc__device **device, const char **reason);

/* The devices to try after `first` failed, best first: AUTO's order without `first` (every
 * backend listed, only now that they are needed), none under NO_FALLBACK. `*order` is for
 * free(). */
posenc_status posenc__select_fallbacks(const posenc_context_desc *desc,
                                       const posenc__device *first,
                                       const posenc__device ***order, uint32_t *count);

#endif
