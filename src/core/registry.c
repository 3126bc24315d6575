/* SPDX-License-Identifier: MIT */
/* The backend registry: the backends of posenc.h's POSENC_BACKEND_LIST built into this library,
 * each one's devices listed on first need (loading only that backend's runtime) and kept for the
 * process, and the list of every device joined from them. */
#include "backend.h"
#include "core/backend_list.h"
#include "core/platform.h"

#include <stdlib.h>
#include <string.h>

#define DECLARE_TABLE(kind, value, name)                                                          \
    extern const posenc__backend POSENC__BACKEND_TABLE_##kind;
POSENC_BACKEND_LIST(DECLARE_TABLE)

/* In the list's order, those built in. */
#define COMPILED_TABLE(kind, value, name) POSENC__IF_##kind(&POSENC__BACKEND_TABLE_##kind)
static const posenc__backend *const backends[] = {POSENC_BACKEND_LIST(COMPILED_TABLE)};

#define BACKEND_COUNT (sizeof backends / sizeof backends[0])

/* One backend's devices. A context for one backend lists that backend alone, so that a CPU
 * context neither loads nor probes the GPU runtimes (whose drivers take tens to hundreds of
 * milliseconds to start); the list of every device lists them all. */
typedef struct backend_listing {
    bool listed;
    posenc_status status; /* OK, or BACKEND_UNAVAILABLE with `reason` */
    const char *reason;
    posenc__device_list devices;
    const posenc__device **pointers; /* into `devices`, for posenc__registry_devices */
} backend_listing;

/* A listing is kept once it is complete, a backend's runtime failure included (the backend is
 * then absent, with the runtime's reason); one that ran out of posenc's own host memory is
 * undone, together with every other listing made by the same call, and made again on the next
 * call, so that a passing shortage does not hide a backend (or every device) for the rest of
 * the process. What
 * is kept is written only under `lock`, and never again: callers keep pointers into it. */
static struct {
    posenc__once once; /* makes the lock */
    bool lock_made;
    posenc__mutex lock;
    backend_listing listings[BACKEND_COUNT];
    bool joined;
    const posenc__device **all; /* every backend's devices, in the list's order */
    uint32_t all_count;
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

/* Gives back a listing made by the current call, so that the next call makes it afresh. */
static void undo_listing(size_t i)
{
    backend_listing *listing = &registry.listings[i];
    if (listing->devices.count && backends[i]->release_devices)
        backends[i]->release_devices(&listing->devices);
    free(listing->devices.items);
    free(listing->pointers);
    memset(listing, 0, sizeof *listing);
}

/* Lists backend `i`'s devices into its listing; under the lock. */
static posenc_status list_backend(size_t i)
{
    backend_listing *listing = &registry.listings[i];
    posenc__device_list devices = {0};
    const char *reason = NULL;
    posenc_status status = backends[i]->enumerate(&devices, &reason);
    if (status == POSENC_OUT_OF_MEMORY) {
        free(devices.items); /* a failed enumerate leaves no devices in it */
        return POSENC_OUT_OF_MEMORY;
    }
    if (status != POSENC_OK) {
        /* Whatever else failed is the runtime's: the backend is absent for the process. */
        devices.count = 0;
        reason = reason && *reason ? reason : posenc_status_string(status);
        status = POSENC_BACKEND_UNAVAILABLE;
    } else if (devices.count == 0) {
        status = POSENC_BACKEND_UNAVAILABLE;
        reason = reason ? reason : "no devices";
    }
    const posenc__device **pointers = NULL;
    if (devices.count) {
        pointers = malloc(devices.count * sizeof *pointers);
        if (!pointers) {
            if (backends[i]->release_devices)
                backends[i]->release_devices(&devices);
            free(devices.items);
            return POSENC_OUT_OF_MEMORY;
        }
    }
    for (uint32_t d = 0; d < devices.count; d++) {
        devices.items[d].backend = backends[i];
        devices.items[d].info.backend = backends[i]->kind;
        devices.items[d].info.backend_index = d;
        pointers[d] = &devices.items[d];
    }
    *listing = (backend_listing){true, status, reason ? reason : "", devices, pointers};
    return POSENC_OK;
}

/* Joins every backend's devices into registry.all; under the lock, all listed. */
static posenc_status join_listings(void)
{
    uint32_t total = 0;
    for (size_t i = 0; i < BACKEND_COUNT; i++)
        total += registry.listings[i].devices.count;
    const posenc__device **all = total ? malloc(total * sizeof *all) : NULL;
    if (total && !all)
        return POSENC_OUT_OF_MEMORY;
    uint32_t at = 0;
    for (size_t i = 0; i < BACKEND_COUNT; i++) {
        const backend_listing *listing = &registry.listings[i];
        for (uint32_t d = 0; d < listing->devices.count; d++)
            all[at++] = listing->pointers[d];
    }
    registry.all = all;
    registry.all_count = total;
    registry.joined = true;
    return POSENC_OK;
}

/* Lists the backend of `kind` (BACKEND_COUNT: every backend, joined) unless an earlier call did;
 * a shortage undoes what this call listed. */
static posenc_status ensure_listed(size_t which)
{
    posenc__run_once(&registry.once, make_lock);
    if (!registry.lock_made)
        return posenc__fail(NULL, POSENC_OUT_OF_MEMORY,
                            "device list: the system could not create a lock");
    posenc__mutex_lock(&registry.lock);
    bool listed_now[BACKEND_COUNT] = {false};
    posenc_status status = POSENC_OK;
    size_t failed = BACKEND_COUNT;
    for (size_t i = 0; i < BACKEND_COUNT && status == POSENC_OK; i++) {
        if ((which != BACKEND_COUNT && which != i) || registry.listings[i].listed)
            continue;
        status = list_backend(i);
        listed_now[i] = status == POSENC_OK;
        failed = i;
    }
    if (status == POSENC_OK && which == BACKEND_COUNT && !registry.joined) {
        status = join_listings();
        failed = BACKEND_COUNT;
    }
    if (status != POSENC_OK) {
        for (size_t i = 0; i < BACKEND_COUNT; i++) {
            if (listed_now[i])
                undo_listing(i);
        }
    }
    posenc__mutex_unlock(&registry.lock);
    if (status != POSENC_OK && failed < BACKEND_COUNT)
        return posenc__fail(NULL, POSENC_OUT_OF_MEMORY,
                            "device list: out of host memory while listing %s devices",
                            posenc_backend_name(backends[failed]->kind));
    if (status != POSENC_OK)
        return posenc__fail(NULL, POSENC_OUT_OF_MEMORY, "device list: out of host memory");
    return POSENC_OK;
}

/* Where `kind` is in the list; BACKEND_COUNT when it was not compiled in. */
static size_t position_of(posenc_backend kind)
{
    for (size_t i = 0; i < BACKEND_COUNT; i++) {
        if (backends[i]->kind == kind)
            return i;
    }
    return BACKEND_COUNT;
}

posenc_status posenc__registry_devices(posenc_backend kind, const posenc__device *const **devices,
                                       uint32_t *count)
{
    size_t which = kind == POSENC_BACKEND_AUTO ? BACKEND_COUNT : position_of(kind);
    if (kind != POSENC_BACKEND_AUTO && which == BACKEND_COUNT) {
        *devices = NULL;
        *count = 0;
        return POSENC_OK;
    }
    posenc_status status = ensure_listed(which);
    if (status != POSENC_OK)
        return status;
    if (which == BACKEND_COUNT) {
        *devices = registry.all;
        *count = registry.all_count;
    } else {
        *devices = registry.listings[which].pointers;
        *count = registry.listings[which].devices.count;
    }
    return POSENC_OK;
}

posenc_status posenc__registry_backend(posenc_backend kind, const posenc__backend **backend,
                                       const char **reason)
{
    *backend = NULL;
    size_t which = position_of(kind);
    if (which == BACKEND_COUNT) {
        *reason = "not compiled in";
        return POSENC_BACKEND_UNAVAILABLE;
    }
    posenc_status status = ensure_listed(which);
    if (status != POSENC_OK) {
        *reason = "out of host memory";
        return status;
    }
    *reason = registry.listings[which].reason;
    if (registry.listings[which].status != POSENC_OK)
        return POSENC_BACKEND_UNAVAILABLE;
    *backend = backends[which];
    return POSENC_OK;
}

bool posenc__registry_listed(posenc_backend kind)
{
    size_t which = position_of(kind);
    if (which == BACKEND_COUNT)
        return false;
    posenc__run_once(&registry.once, make_lock);
    if (!registry.lock_made)
        return false;
    posenc__mutex_lock(&registry.lock);
    bool listed = registry.listings[which].listed;
    posenc__mutex_unlock(&registry.lock);
    return listed;
}

const posenc__backend *posenc__registry_compiled_backend(posenc_backend kind)
{
    size_t which = position_of(kind);
    return which == BACKEND_COUNT ? NULL : backends[which];
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
    const posenc__device *const *devices;
    return posenc__registry_devices(POSENC_BACKEND_AUTO, &devices, count);
}

posenc_status posenc_device_get(uint32_t index, posenc_device_info *info)
{
    if (!info)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "info: is NULL");
    const posenc__device *const *devices;
    uint32_t count;
    posenc_status status = posenc__registry_devices(POSENC_BACKEND_AUTO, &devices, &count);
    if (status != POSENC_OK)
        return status;
    if (index >= count)
        return posenc__fail(NULL, POSENC_DEVICE_NOT_FOUND,
                            "index: %u is out of range (%u devices)", index, count);
    *info = devices[index]->info;
    return POSENC_OK;
}
