/* SPDX-License-Identifier: MIT */
/* What every GPU backend decides alike about its devices (gpu_devices.h). */
#include "core/gpu_devices.h"

#include "core/platform.h"

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
