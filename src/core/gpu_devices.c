/* SPDX-License-Identifier: MIT */
/* What every GPU backend decides alike about its devices (gpu_devices.h). */
#include "core/gpu_devices.h"

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
