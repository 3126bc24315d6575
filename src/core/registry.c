/* SPDX-License-Identifier: MIT */
/* The backend registry: the one place that lists the backends, and the device list built from
 * them once per process. Adding a backend is one line in `backends`. */
#include "backend.h"
#include "core/platform.h"

#include <stdlib.h>
#include <string.h>

extern const posenc__backend posenc_cpu_backend;
#if defined(POSENC_HAVE_VULKAN_BACKEND)
extern const posenc__backend posenc_vk_backend;
#endif
#if defined(POSENC_HAVE_OPENCL_BACKEND)
extern const posenc__backend posenc_opencl_backend;
#endif

/* Order matters: it is the order of posenc_device_get, and AUTO prefers earlier backends among
 * devices of the same type. The native CPU path comes last. */
static const posenc__backend *const backends[] = {
#if defined(POSENC_HAVE_VULKAN_BACKEND)
    &posenc_vk_backend,
#endif
#if defined(POSENC_HAVE_OPENCL_BACKEND)
    &posenc_opencl_backend,
#endif
    &posenc_cpu_backend,
};

typedef struct backend_state {
    posenc_status status;
    const char *reason;
} backend_state;

static struct {
    posenc__once once;
    posenc__device_list devices;
    backend_state states[sizeof backends / sizeof backends[0]];
} registry;

posenc_status posenc__device_list_append(posenc__device_list *list, const posenc__device *device)
{
    if (list->count == list->capacity) {
        uint32_t capacity = list->capacity ? list->capacity * 2 : 8;
        posenc__device *grown = realloc(list->items, capacity * sizeof *grown);
        if (!grown)
            return POSENC_OUT_OF_MEMORY;
        list->items = grown;
        list->capacity = capacity;
    }
    list->items[list->count++] = *device;
    return POSENC_OK;
}

static void build_registry(void)
{
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        const char *reason = NULL;
        uint32_t first = registry.devices.count;
        posenc_status status = backends[i]->enumerate(&registry.devices, &reason);
        if (status != POSENC_OK)
            registry.devices.count = first; /* a failed backend contributes nothing */
        else if (registry.devices.count == first) {
            status = POSENC_BACKEND_UNAVAILABLE;
            reason = reason ? reason : "no devices";
        }
        for (uint32_t d = first; d < registry.devices.count; d++) {
            registry.devices.items[d].backend = backends[i];
            registry.devices.items[d].info.backend = backends[i]->kind;
            registry.devices.items[d].info.backend_index = d - first;
        }
        registry.states[i] = (backend_state){status, reason ? reason : ""};
    }
}

posenc_status posenc__registry_devices(const posenc__device **devices, uint32_t *count)
{
    posenc__run_once(&registry.once, build_registry);
    *devices = registry.devices.items;
    *count = registry.devices.count;
    return POSENC_OK;
}

const posenc__backend *posenc__registry_backend(posenc_backend kind, const char **reason)
{
    posenc__run_once(&registry.once, build_registry);
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        if (backends[i]->kind != kind)
            continue;
        *reason = registry.states[i].reason;
        return registry.states[i].status == POSENC_OK ? backends[i] : NULL;
    }
    *reason = "not compiled in";
    return NULL;
}

const posenc__backend *posenc__registry_compiled_backend(posenc_backend kind)
{
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        if (backends[i]->kind == kind)
            return backends[i];
    }
    return NULL;
}

posenc_status posenc_backend_status(posenc_backend backend, const char **reason)
{
    const char *why = "";
    if (backend == POSENC_BACKEND_AUTO || (unsigned)backend > POSENC_BACKEND_OPENCL) {
        why = backend == POSENC_BACKEND_AUTO ? "auto is not a backend" : "unknown backend";
        if (reason)
            *reason = why;
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "backend: %s (%d)", why,
                            (int)backend);
    }
    const posenc__backend *found = posenc__registry_backend(backend, &why);
    if (reason)
        *reason = why;
    return found ? POSENC_OK : POSENC_BACKEND_UNAVAILABLE;
}

posenc_status posenc_device_count(uint32_t *count)
{
    if (!count)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "count: is NULL");
    const posenc__device *devices;
    return posenc__registry_devices(&devices, count);
}

posenc_status posenc_device_get(uint32_t index, posenc_device_info *info)
{
    if (!info)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "info: is NULL");
    const posenc__device *devices;
    uint32_t count;
    posenc__registry_devices(&devices, &count);
    if (index >= count)
        return posenc__fail(NULL, POSENC_DEVICE_NOT_FOUND,
                            "index: %u is out of range (%u devices)", index, count);
    *info = devices[index].info;
    return POSENC_OK;
}
