/* SPDX-License-Identifier: MIT */
/* Contexts: choosing a device, initialising it with fallback, and tearing everything down. */
#include "backend.h"
#include "core/frequencies.h"
#include "core/platform.h"
#include "core/rope_memo.h"
#include "core/select.h"

#include <stdlib.h>
#include <string.h>

#define KNOWN_FLAGS                                                                     \
    (POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_ALLOW_SOFTWARE | \
     POSENC_CONTEXT_VALIDATION)

/* What posenc_device_choose and posenc_context_create both refuse before choosing. */
static posenc_status validate_desc(const posenc_context_desc *desc)
{
    if (desc->backend != POSENC_BACKEND_AUTO && !posenc__backend_known(desc->backend))
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "backend: unknown value %d",
                            (int)desc->backend);
    if (desc->flags & ~(uint32_t)KNOWN_FLAGS)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "flags: unknown bits 0x%x",
                            desc->flags & ~(uint32_t)KNOWN_FLAGS);
    return POSENC_OK;
}

static bool has_vulkan_handles(const posenc_context_desc *desc)
{
    const posenc_vulkan_external *vk = &desc->vulkan;
    return vk->instance || vk->physical_device || vk->device || vk->queue ||
           vk->get_instance_proc_addr || vk->enabled_features || vk->allocation_callbacks ||
           vk->pipeline_cache;
}

static bool has_opencl_handles(const posenc_context_desc *desc)
{
    return desc->opencl.context || desc->opencl.device || desc->opencl.queue;
}

static void free_context(posenc_context *ctx)
{
    free(ctx->cache_dir);
    free(ctx->pipeline_cache_path);
    posenc__free_freq_caches(ctx);
    posenc__rope_memo_free(ctx);
    posenc__mutex_destroy(&ctx->shared_lock);
    free(ctx);
}

/* A context with the descriptor's settings and no backend state yet. */
static posenc_context *new_context(const posenc_context_desc *desc,
                                   const posenc__backend *backend,
                                   const posenc__device *device)
{
    posenc_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    if (!posenc__mutex_init(&ctx->shared_lock)) {
        free(ctx);
        return NULL;
    }
    ctx->backend = backend;
    ctx->device = device;
    ctx->log = desc->log;
    ctx->log_user_data = desc->log_user_data;
    ctx->flags = desc->flags;
    ctx->num_threads = desc->num_threads ? desc->num_threads : posenc__cpu_count();
    ctx->cache_dir = posenc__strdup(desc->cache_dir);
    ctx->pipeline_cache_path = posenc__strdup(desc->pipeline_cache_path);
    if ((desc->cache_dir && !ctx->cache_dir) ||
        (desc->pipeline_cache_path && !ctx->pipeline_cache_path)) {
        free_context(ctx);
        return NULL;
    }
    return ctx;
}

/* A context on one device, or NULL with the reason in `message`. */
static posenc_status try_device(const posenc_context_desc *desc, const posenc__device *device,
                                posenc_context **out, char *message, size_t message_size)
{
    posenc_context *ctx = new_context(desc, device->backend, device);
    if (!ctx) {
        posenc__copy_string(message, message_size, "out of host memory");
        return POSENC_OUT_OF_MEMORY;
    }
    posenc_status status = ctx->backend->context_init(ctx, device);
    if (status != POSENC_OK) {
        posenc__copy_string(message, message_size, ctx->last_error);
        free_context(ctx);
        return status;
    }
    *out = ctx;
    return POSENC_OK;
}

/* An engine's own device: the backend of those handles builds the context on them, without the
 * device list, so no runtime loader is opened for it and nothing falls back elsewhere. */
static posenc_status create_external(const posenc_context_desc *desc, posenc_context **context)
{
    bool vulkan = has_vulkan_handles(desc);
    posenc_backend kind = vulkan ? POSENC_BACKEND_VULKAN : POSENC_BACKEND_OPENCL;
    const char *field = vulkan ? "vulkan" : "opencl";
    if (vulkan && has_opencl_handles(desc))
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT,
                            "vulkan/opencl: handles of both APIs are set; set one");
    if (desc->backend != POSENC_BACKEND_AUTO && desc->backend != kind)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT,
                            "backend: is %s but the %s handles are set",
                            posenc_backend_name(desc->backend), field);
    if (desc->device)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT,
                            "device: must be NULL when the %s handles name the device", field);
    const posenc__backend *backend = posenc__registry_compiled_backend(kind);
    if (!backend || !backend->context_init_external)
        return posenc__fail(NULL, POSENC_UNSUPPORTED,
                            "%s: this build of posenc has no %s backend for caller-owned "
                            "devices",
                            field, posenc_backend_name(kind));
    posenc_context *ctx = new_context(desc, backend, NULL);
    if (!ctx)
        return posenc__fail(NULL, POSENC_OUT_OF_MEMORY, "context: out of host memory");
    posenc_status status = backend->context_init_external(ctx, desc);
    if (status != POSENC_OK) {
        posenc__fail(NULL, status, "%s", ctx->last_error);
        free_context(ctx);
        return status;
    }
    *context = ctx;
    return POSENC_OK;
}

posenc_status posenc_device_choose(const posenc_context_desc *desc, uint32_t *index,
                                   const char **reason)
{
    if (!index)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "index: is NULL");
    posenc_context_desc defaults = {0};
    if (!desc)
        desc = &defaults;
    posenc_status status = validate_desc(desc);
    if (status != POSENC_OK)
        return status;
    if (has_vulkan_handles(desc) || has_opencl_handles(desc))
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT,
                            "vulkan/opencl: the caller's handles name the device; there is "
                            "nothing to choose");
    const posenc__device *device;
    const char *why = "";
    status = posenc__select_device(desc, &device, &why);
    if (status != POSENC_OK)
        return status;
    /* The index is in the list of every device, which posenc_device_get reads. */
    const posenc__device *const *devices;
    uint32_t count;
    status = posenc__registry_devices(POSENC_BACKEND_AUTO, &devices, &count);
    if (status != POSENC_OK)
        return status;
    for (uint32_t i = 0; i < count; i++) {
        if (devices[i] == device) {
            *index = i;
            if (reason)
                *reason = why;
            return POSENC_OK;
        }
    }
    return posenc__fail(NULL, POSENC_INTERNAL, "device: the chosen device is not listed");
}

posenc_status posenc_context_create(const posenc_context_desc *desc, posenc_context **context)
{
    if (!context)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    posenc_context_desc defaults = {0};
    if (!desc)
        desc = &defaults;
    posenc__clear_error(NULL);
    posenc_status status = validate_desc(desc);
    if (status != POSENC_OK)
        return status;
    if (has_vulkan_handles(desc) || has_opencl_handles(desc))
        return create_external(desc, context);

    /* The first choice lists only what it needs (a CPU context loads no GPU runtime); the
     * fallbacks, every backend, only once it has failed. */
    const posenc__device *device;
    const char *reason = "";
    status = posenc__select_device(desc, &device, &reason);
    if (status != POSENC_OK)
        return status;

    const posenc__device **fallbacks = NULL;
    uint32_t fallback_count = 0, next = 0;
    char message[512] = "";
    for (;;) {
        posenc_context *ctx = NULL;
        status = try_device(desc, device, &ctx, message, sizeof message);
        if (status == POSENC_OK) {
            posenc__log(ctx, POSENC_LOG_INFO, "using %s device %u: %s (%s)",
                        posenc_backend_name(device->info.backend), device->info.backend_index,
                        device->info.name, next == 0 ? reason : "fallback");
            free(fallbacks);
            *context = ctx;
            return POSENC_OK;
        }
        if (next == 0) {
            posenc_status listed =
                posenc__select_fallbacks(desc, device, &fallbacks, &fallback_count);
            if (listed != POSENC_OK) {
                posenc__log_to(desc->log, desc->log_user_data, POSENC_LOG_ERROR,
                               "%s device %u (%s) failed to initialise: %s",
                               posenc_backend_name(device->info.backend),
                               device->info.backend_index, device->info.name, message);
                return listed;
            }
        }
        bool more = next < fallback_count;
        posenc__log_to(desc->log, desc->log_user_data,
                       more ? POSENC_LOG_WARNING : POSENC_LOG_ERROR,
                       "%s device %u (%s) failed to initialise: %s%s",
                       posenc_backend_name(device->info.backend), device->info.backend_index,
                       device->info.name, message, more ? "; trying the next device" : "");
        if (!more)
            break;
        device = fallbacks[next++];
    }
    free(fallbacks);
    /* A message that starts with an environment variable ("POSENC_CPU_VARIANT=neon: ...") names
     * the setting at fault, which no device would have accepted: kept as the field, rather than
     * blaming the device. */
    if (strncmp(message, "POSENC_", 7) == 0)
        return posenc__fail(NULL, status, "%s", message);
    return posenc__fail(NULL, status, "device: %s", message);
}

void posenc_context_destroy(posenc_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->backend->finish && !posenc__is_lost(ctx))
        ctx->backend->finish(ctx); /* a lost device has nothing left to finish */
    while (ctx->events)
        posenc_event_destroy(ctx->events);
    while (ctx->buffers)
        posenc_buffer_destroy(ctx->buffers);
    ctx->backend->context_fini(ctx);
    free_context(ctx);
}

posenc_status posenc_context_device(const posenc_context *ctx, posenc_device_info *info)
{
    if (!ctx)
        return posenc__fail(NULL, POSENC_INVALID_ARGUMENT, "context: is NULL");
    if (!info)
        return posenc__fail((posenc_context *)ctx, POSENC_INVALID_ARGUMENT, "info: is NULL");
    *info = ctx->device->info;
    return POSENC_OK;
}
