/* SPDX-License-Identifier: MIT */
/* Device selection: parsing "vulkan:1"-style selectors, reading POSENC_DEVICE, ranking devices
 * for AUTO (discrete, integrated, virtual GPU, then the native CPU path; software emulation only
 * when asked for) and listing fallbacks. */
#include "core/select.h"
#include "core/platform.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct selector {
    posenc_backend backend; /* AUTO: any */
    bool has_index;
    uint32_t index;         /* within `backend`, or global when backend is AUTO */
    const char *name;       /* substring of the device name, or NULL */
    char name_storage[128];
} selector;

static bool parse_index(const char *text, uint32_t *index)
{
    if (!*text)
        return false;
    unsigned long value = 0;
    for (const char *c = text; *c; c++) {
        if (!isdigit((unsigned char)*c) || value > 100000)
            return false;
        value = value * 10 + (unsigned long)(*c - '0');
    }
    *index = (uint32_t)value;
    return true;
}

static bool parse_backend(const char *text, size_t length, posenc_backend *backend)
{
#define BACKEND_KIND(kind, value, name) POSENC_BACKEND_##kind,
    static const posenc_backend kinds[] = {POSENC_BACKEND_LIST(BACKEND_KIND)
                                               POSENC_BACKEND_AUTO};
#undef BACKEND_KIND
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const char *name = posenc_backend_name(kinds[i]);
        if (strlen(name) == length && posenc__strcasestr(text, name) == text) {
            *backend = kinds[i];
            return true;
        }
    }
    return false;
}

/* "cpu", "vulkan:1", "opencl", "3" (an index), anything else: a name substring. */
static posenc_status parse_selector(const char *text, posenc_backend backend, const char *source,
                                    selector *out)
{
    memset(out, 0, sizeof *out);
    out->backend = backend;
    const char *colon = strchr(text, ':');
    size_t head = colon ? (size_t)(colon - text) : strlen(text);
    posenc_backend named;
    if (parse_backend(text, head, &named)) {
        if (backend != POSENC_BACKEND_AUTO && named != POSENC_BACKEND_AUTO && named != backend)
            return posenc__fail(NULL, POSENC_INVALID_ARGUMENT,
                                "%s: '%s' names another backend than backend %s", source, text,
                                posenc_backend_name(backend));
        if (named != POSENC_BACKEND_AUTO)
            out->backend = named;
        if (colon && !parse_index(colon + 1, &out->index))
            return posenc__fail(NULL, POSENC_INVALID_ARGUMENT,
                                "%s: '%s': expected a device index after ':'", source, text);
        out->has_index = colon != NULL;
        return POSENC_OK;
    }
    if (parse_index(text, &out->index)) {
        out->has_index = true;
        return POSENC_OK;
    }
    posenc__copy_string(out->name_storage, sizeof out->name_storage, text);
    out->name = out->name_storage;
    return POSENC_OK;
}

/* AUTO's preference: lower is better; -1 never chosen by AUTO. */
static int auto_rank(const posenc__device *device, uint32_t flags)
{
    switch (device->info.type) {
    case POSENC_DEVICE_DISCRETE_GPU: return 0;
    case POSENC_DEVICE_INTEGRATED_GPU: return 1;
    case POSENC_DEVICE_VIRTUAL_GPU: return 2;
    case POSENC_DEVICE_CPU: return device->info.native_cpu ? 4 : -1;
    case POSENC_DEVICE_SOFTWARE:
    case POSENC_DEVICE_OTHER: return (flags & POSENC_CONTEXT_ALLOW_SOFTWARE) ? 3 : -1;
    }
    return -1;
}

static const char *auto_reason(const posenc__device *device)
{
    switch (device->info.type) {
    case POSENC_DEVICE_DISCRETE_GPU: return "AUTO: the best discrete GPU";
    case POSENC_DEVICE_INTEGRATED_GPU: return "AUTO: no discrete GPU; the best integrated GPU";
    case POSENC_DEVICE_VIRTUAL_GPU: return "AUTO: no physical GPU; the best virtual GPU";
    case POSENC_DEVICE_SOFTWARE:
    case POSENC_DEVICE_OTHER: return "AUTO: no GPU; a software device, allowed by the flags";
    case POSENC_DEVICE_CPU: break;
    }
    return "AUTO: no GPU found, so the native CPU path (software-emulated GPUs such as llvmpipe "
           "or PoCL are slower, and used only when asked for)";
}

static bool matches(const selector *sel, const posenc__device *device, uint32_t global_index)
{
    if (sel->backend != POSENC_BACKEND_AUTO && device->info.backend != sel->backend)
        return false;
    if (sel->has_index) {
        uint32_t index = sel->backend == POSENC_BACKEND_AUTO ? global_index
                                                             : device->info.backend_index;
        if (index != sel->index)
            return false;
    }
    return !sel->name || posenc__strcasestr(device->info.name, sel->name);
}

/* Preference among devices the caller asked for (a backend without an index): every type is
 * allowed, GPUs first. */
static int requested_rank(const posenc__device *device)
{
    switch (device->info.type) {
    case POSENC_DEVICE_DISCRETE_GPU: return 0;
    case POSENC_DEVICE_INTEGRATED_GPU: return 1;
    case POSENC_DEVICE_VIRTUAL_GPU: return 2;
    case POSENC_DEVICE_SOFTWARE: return 3;
    case POSENC_DEVICE_CPU: return 4;
    case POSENC_DEVICE_OTHER: break;
    }
    return 5;
}

/* Devices AUTO would use, best first: rank, then the registry's backend order, then memory. */
static uint32_t auto_order(const posenc__device *const *devices, uint32_t count, uint32_t flags,
                           const posenc__device **order)
{
    uint32_t n = 0;
    for (int rank = 0; rank <= 4; rank++) {
        uint32_t first = n;
        for (uint32_t i = 0; i < count; i++) {
            if (auto_rank(devices[i], flags) == rank)
                order[n++] = devices[i];
        }
        for (uint32_t a = first + 1; a < n; a++) { /* insertion sort by memory, stable */
            for (uint32_t b = a; b > first && order[b]->backend == order[b - 1]->backend &&
                                 order[b]->info.memory_bytes > order[b - 1]->info.memory_bytes;
                 b--) {
                const posenc__device *t = order[b];
                order[b] = order[b - 1];
                order[b - 1] = t;
            }
        }
    }
    return n;
}

/* The selector of `desc`: its device string, else POSENC_DEVICE (backend AUTO, unless
 * IGNORE_ENV), else its backend alone (`*text` NULL). `*source` names where the text came from,
 * for messages; `*requested` is false for AUTO's own choice. */
static posenc_status read_selector(const posenc_context_desc *desc, selector *sel,
                                   const char **text, const char **source, bool *requested)
{
    *text = desc->device;
    *source = "device";
    if (!*text && desc->backend == POSENC_BACKEND_AUTO &&
        !(desc->flags & POSENC_CONTEXT_IGNORE_ENV)) {
        const char *env = posenc__env_get("POSENC_DEVICE");
        if (env && *env) {
            *text = env;
            *source = "POSENC_DEVICE";
        }
    }
    *requested = *text || desc->backend != POSENC_BACKEND_AUTO;
    if (*text) {
        posenc_status status = parse_selector(*text, desc->backend, *source, sel);
        if (status != POSENC_OK)
            return status;
    } else {
        memset(sel, 0, sizeof *sel);
        sel->backend = desc->backend;
    }
    if (*text && sel->backend == POSENC_BACKEND_AUTO && !sel->has_index && !sel->name)
        *requested = false; /* "auto" */
    return POSENC_OK;
}

/* AUTO's first choice among every backend's devices. */
static posenc_status auto_choice(const posenc_context_desc *desc, const posenc__device **device)
{
    const posenc__device *const *devices;
    uint32_t count;
    posenc_status status = posenc__registry_devices(POSENC_BACKEND_AUTO, &devices, &count);
    if (status != POSENC_OK)
        return status;
    const posenc__device **order = malloc((count ? count : 1) * sizeof *order);
    if (!order)
        return posenc__fail(NULL, POSENC_OUT_OF_MEMORY, "device: out of host memory");
    uint32_t n = auto_order(devices, count, desc->flags, order);
    if (n)
        *device = order[0];
    free(order);
    if (n == 0)
        return posenc__fail(NULL, POSENC_DEVICE_NOT_FOUND, "device: no usable device");
    return POSENC_OK;
}

posenc_status posenc__select_device(const posenc_context_desc *desc,
                                    const posenc__device **device, const char **reason)
{
    selector sel;
    const char *text, *source;
    bool requested;
    posenc_status status = read_selector(desc, &sel, &text, &source, &requested);
    if (status != POSENC_OK)
        return status;
    if (!requested) {
        status = auto_choice(desc, device);
        if (status == POSENC_OK)
            *reason = auto_reason(*device);
        return status;
    }

    /* A backend named: its devices alone, so that no other runtime is loaded. A global index or
     * a name: every backend's. */
    const posenc__device *const *devices;
    uint32_t count;
    status = posenc__registry_devices(sel.backend, &devices, &count);
    if (status != POSENC_OK)
        return status;
    const posenc__device *best = NULL;
    for (uint32_t i = 0; i < count; i++) {
        /* "the best one" of the matches: keep the first of the best rank */
        if (matches(&sel, devices[i], i) &&
            (!best || requested_rank(devices[i]) < requested_rank(best)))
            best = devices[i];
    }
    if (!best) {
        const char *why = "";
        const posenc__backend *backend;
        status = POSENC_DEVICE_NOT_FOUND;
        if (sel.backend != POSENC_BACKEND_AUTO) {
            posenc_status available = posenc__registry_backend(sel.backend, &backend, &why);
            if (available == POSENC_OUT_OF_MEMORY)
                return posenc__fail(NULL, available, "device list: out of host memory");
            if (available == POSENC_BACKEND_UNAVAILABLE)
                status = POSENC_BACKEND_UNAVAILABLE;
        }
        if (!text)
            return posenc__fail(NULL, status, "backend: %s is unavailable (%s)",
                                posenc_backend_name(sel.backend), why);
        return posenc__fail(NULL, status, "%s: no device matches '%s'%s%s%s", source, text,
                            *why ? " (" : "", why, *why ? ")" : "");
    }
    *device = best;
    *reason = source[0] == 'P' ? "POSENC_DEVICE selects it" : "requested by the descriptor";
    return POSENC_OK;
}

posenc_status posenc__select_fallbacks(const posenc_context_desc *desc,
                                       const posenc__device *first,
                                       const posenc__device ***order, uint32_t *count)
{
    *order = NULL;
    *count = 0;
    if (desc->flags & POSENC_CONTEXT_NO_FALLBACK)
        return POSENC_OK;
    const posenc__device *const *devices;
    uint32_t device_count;
    posenc_status status = posenc__registry_devices(POSENC_BACKEND_AUTO, &devices, &device_count);
    if (status != POSENC_OK)
        return status;
    const posenc__device **ranked = malloc((device_count ? device_count : 1) * sizeof *ranked);
    if (!ranked)
        return posenc__fail(NULL, POSENC_OUT_OF_MEMORY, "device: out of host memory");
    uint32_t n = auto_order(devices, device_count, desc->flags, ranked), kept = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (ranked[i] != first)
            ranked[kept++] = ranked[i];
    }
    *order = ranked;
    *count = kept;
    return POSENC_OK;
}
