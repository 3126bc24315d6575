/* SPDX-License-Identifier: MIT */
/* The backend registry: the backends of core/backend_list.h built into this library, and the
 * device list built from them once per process (again after a listing that ran out of host
 * memory). */
#include "backend.h"
#include "core/backend_list.h"
#include "core/platform.h"

#include <stdlib.h>
#include <string.h>

#define DECLARE_TABLE(kind, name, table) extern const posenc__backend table;
POSENC__BACKEND_LIST(DECLARE_TABLE)

/* In the list's order, those built in. */
#define COMPILED_TABLE(kind, name, table) POSENC__IF_##kind(&table)
static const posenc__backend *const backends[] = {POSENC__BACKEND_LIST(COMPILED_TABLE)};

#define BACKEND_COUNT (sizeof backends / sizeof backends[0])

typedef struct backend_state {
    posenc_status status;
    const char *reason;
} backend_state;

/* The device list is kept once it is complete; a listing that ran out of host memory is undone
 * and made again on the next call, so a passing shortage does not hide a backend (or every
 * device) for the rest of the process. `built`, `devices` and `states` are written only under
 * `lock`, and never again once `built` is set: callers keep pointers into `devices`. */
static struct {
    posenc__once once; /* makes the lock */
    bool lock_made;
    posenc__mutex lock;
    bool built;
    posenc__device_list devices;
    backend_state states[BACKEND_COUNT];
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

static void make_lock(void) { registry.lock_made = posenc__mutex_init(&registry.lock); }

/* Gives back what the backends listed before `failed` made, after a shortage in `failed` (or,
 * with failed == BACKEND_COUNT, in joining the lists). */
static void undo_listing(posenc__device_list *lists, size_t failed)
{
    for (size_t i = 0; i < failed; i++) {
        if (lists[i].count && backends[i]->release_devices)
            backends[i]->release_devices(&lists[i]);
        free(lists[i].items);
    }
}

/* Lists every backend's devices into the registry; under the lock. Each backend lists into a
 * list of its own, joined at the end, so that a shortage anywhere leaves the registry as it
 * was. */
static posenc_status build_registry(void)
{
    posenc__device_list lists[BACKEND_COUNT];
    backend_state states[BACKEND_COUNT];
    memset(lists, 0, sizeof lists);
    uint32_t total = 0;
    for (size_t i = 0; i < BACKEND_COUNT; i++) {
        const char *reason = NULL;
        posenc_status status = backends[i]->enumerate(&lists[i], &reason);
        if (status == POSENC_OUT_OF_MEMORY) {
            free(lists[i].items); /* a failed enumerate leaves no devices in it */
            undo_listing(lists, i);
            return posenc__fail(NULL, POSENC_OUT_OF_MEMORY,
                                "device list: out of host memory while listing %s devices",
                                posenc_backend_name(backends[i]->kind));
        }
        if (status != POSENC_OK)
            lists[i].count = 0; /* a failed backend contributes nothing */
        else if (lists[i].count == 0) {
            status = POSENC_BACKEND_UNAVAILABLE;
            reason = reason ? reason : "no devices";
        }
        states[i] = (backend_state){status, reason ? reason : ""};
        total += lists[i].count;
    }
    posenc__device *items = total ? malloc(total * sizeof *items) : NULL;
    if (total && !items) {
        undo_listing(lists, BACKEND_COUNT);
        return posenc__fail(NULL, POSENC_OUT_OF_MEMORY, "device list: out of host memory");
    }
    uint32_t at = 0;
    for (size_t i = 0; i < BACKEND_COUNT; i++) {
        for (uint32_t d = 0; d < lists[i].count; d++, at++) {
            items[at] = lists[i].items[d];
            items[at].backend = backends[i];
            items[at].info.backend = backends[i]->kind;
            items[at].info.backend_index = d;
        }
        free(lists[i].items);
    }
    registry.devices = (posenc__device_list){items, total, total};
    memcpy(registry.states, states, sizeof states);
    registry.built = true;
    return POSENC_OK;
}

/* The registry, complete: built by this call if no earlier one finished it. */
static posenc_status ensure_registry(void)
{
    posenc__run_once(&registry.once, make_lock);
    if (!registry.lock_made)
        return posenc__fail(NULL, POSENC_OUT_OF_MEMORY,
                            "device list: the system could not create a lock");
    posenc__mutex_lock(&registry.lock);
    posenc_status status = registry.built ? POSENC_OK : build_registry();
    posenc__mutex_unlock(&registry.lock);
    return status;
}

posenc_status posenc__registry_devices(const posenc__device **devices, uint32_t *count)
{
    posenc_status status = ensure_registry();
    if (status != POSENC_OK)
        return status;
    *devices = registry.devices.items;
    *count = registry.devices.count;
    return POSENC_OK;
}

posenc_status posenc__registry_backend(posenc_backend kind, const posenc__backend **backend,
                                       const char **reason)
{
    *backend = NULL;
    posenc_status status = ensure_registry();
    if (status != POSENC_OK) {
        *reason = "out of host memory";
        return status;
    }
    for (size_t i = 0; i < BACKEND_COUNT; i++) {
        if (backends[i]->kind != kind)
            continue;
        *reason = registry.states[i].reason;
        if (registry.states[i].status != POSENC_OK)
            return POSENC_BACKEND_UNAVAILABLE;
        *backend = backends[i];
        return POSENC_OK;
    }
    *reason = "not compiled in";
    return POSENC_BACKEND_UNAVAILABLE;
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
    if (backend == POSENC_BACKEND_AUTO || !posenc__backend_known(backend)) {
        why = backend == POSENC_BACKEND_AUTO ? "auto is not a backend" : "unknown backend";
        if (reason)
            *reason = why;
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "backend: %s (%d)", why,
                            (int)backend);
    }
    const posenc__backend *found;
    posenc_status status = posenc__registry_backend(backend, &found, &why);
    if (reason)
        *reason = why;
    return status;
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
    posenc_status status = posenc__registry_devices(&devices, &count);
    if (status != POSENC_OK)
        return status;
    if (index >= count)
        return posenc__fail(NULL, POSENC_DEVICE_NOT_FOUND,
                            "index: %u is out of range (%u devices)", index, count);
    *info = devices[index].info;
    return POSENC_OK;
}
