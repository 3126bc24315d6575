/* SPDX-License-Identifier: MIT */
/* What every GPU backend decides alike about its devices: which features the environment turns
 * off (to run a device through the code paths of devices without them), whether caller host
 * memory is used in place, and the device records a listing owns. */
#ifndef POSENC_CORE_GPU_DEVICES_H
#define POSENC_CORE_GPU_DEVICES_H

#include "core/internal.h"

/* Whether the comma-separated list in environment variable `variable` (POSENC_VULKAN_DISABLE,
 * POSENC_OPENCL_DISABLE: docs/backends.md) names `feature` exactly: posenc then leaves that
 * feature of the device unused. */
bool posenc__gpu_feature_disabled(const char *variable, const char *feature);

/* Whether a device may use caller host memory in place (import it): only where it shares host
 * memory (`unified`), since a discrete GPU would read it across the bus in every kernel, which
 * the staging copy does once; and with `alignment`, the address alignment an import needs, a
 * power of two (a zero or odd one is a driver's error, and the memory is staged). */
bool posenc__gpu_host_importable(bool unified, uint64_t alignment);

/* Frees the record each device of `list` holds in its `handle` (one allocation each, as both
 * GPU backends make them) and empties the list: a listing abandoned or given back. */
void posenc__gpu_devices_free(posenc__device_list *list);

#endif
