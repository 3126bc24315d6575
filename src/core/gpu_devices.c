/* SPDX-License-Identifier: MIT */
/* What every GPU backend decides alike about its devices (gpu_devices.h). */
#include "core/gpu_devices.h"

#include "backend.h"
#include "core/platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool posenc__gpu_feature_disabled(const char *variable, const char *feature)
{
    const char *list = posenc__env_get(variable);
    size_t length = strlen(feature);
    while (list && *list) {
        const char *end = strchr(list, ',');
        size_t item = end ? (size_t)(end - list) : strlen(list);
        if (item == length && strncmp(list, feature, length) == 0)
            return true;
        list = end ? end + 1 : NULL;
    }
    return false;
}

bool posenc__gpu_host_importable(bool unified, uint64_t alignment)
{
    return unified && alignment > 0 && (alignment & (alignment - 1)) == 0;
}

void posenc__gpu_devices_free(posenc__device_list *list)
{
    for (uint32_t d = 0; d < list->count; d++)
        free(list->items[d].handle);
    list->count = 0;
}

posenc_status posenc__gpu_external_device(posenc_context *ctx, posenc__device *device,
                                          posenc_status status,
                                          const posenc__gpu_failure *failure, const char *field,
                                          const char *lacks)
{
    if (failure->call)
        return posenc__fail(ctx, status, "%s: %s failed: %s (%d)", field, failure->call,
                            failure->error, (int)failure->code);
    if (status == POSENC_OUT_OF_MEMORY)
        return posenc__fail(ctx, status, "context: out of host memory");
    if (status != POSENC_OK)
        return posenc__fail(ctx, POSENC_UNSUPPORTED, "%s: %s", field, lacks);
    device->backend = ctx->backend;
    device->info.backend = ctx->backend->kind;
    device->info.backend_index = 0; /* not one of the enumerated devices */
    ctx->device = device;
    return POSENC_OK;
}

posenc_status posenc__gpu_listing_add(posenc__gpu_listing *listing, posenc__device_list *list,
                                      posenc_status status, const posenc__gpu_failure *failure,
                                      const posenc__device *device)
{
    if (status == POSENC_OK)
        status = posenc__device_list_append(list, device);
    if (status == POSENC_OK)
        return POSENC_OK;
    free(device->handle);
    if (!failure->call && status != POSENC_UNSUPPORTED)
        return status; /* posenc's own shortage, describing or appending */
    if (!failure->call)
        listing->unusable++;
    else if (listing->failed++ == 0)
        snprintf(listing->failure, sizeof listing->failure, "%s failed: %s", failure->call,
                 failure->error);
    return POSENC_OK;
}

posenc_status posenc__gpu_listing_end(const posenc__gpu_listing *listing,
                                      posenc__device_list *list, posenc_status status, char *why,
                                      size_t why_size, const char **reason)
{
    if (status != POSENC_OK) {
        posenc__gpu_devices_free(list); /* nothing listed, nothing kept */
        *reason = "out of host memory";
        return status;
    }
    if (list->count > 0)
        return POSENC_OK;
    if (listing->failed)
        snprintf(why, why_size, "no usable %s device (%s; %u such failure%s)", listing->api,
                 listing->failure, listing->failed, listing->failed == 1 ? "" : "s");
    else if (listing->unusable)
        snprintf(why, why_size, "no usable %s device (%u %s)", listing->api, listing->unusable,
                 listing->lacks);
    else
        posenc__copy_string(why, why_size, listing->none);
    *reason = why;
    return POSENC_BACKEND_UNAVAILABLE;
}
