/* SPDX-License-Identifier: MIT */
/* Device selection: selector strings, POSENC_DEVICE, AUTO's ranking and the fallback order. */
#ifndef POSENC_CORE_SELECT_H
#define POSENC_CORE_SELECT_H

#include "core/internal.h"

/* The devices to try, in order: the chosen one first, then the fallbacks (which are dropped
 * under NO_FALLBACK). `order` holds at least as many entries as there are devices. Fails with
 * DEVICE_NOT_FOUND (thread error set) when nothing matches. */
posenc_status posenc__select_devices(const posenc_context_desc *desc, uint32_t *order,
                                     uint32_t *count, const char **reason);

#endif
