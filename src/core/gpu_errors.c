/* SPDX-License-Identifier: MIT */
/* Looking up a GPU runtime's error code in its backend's list (gpu_errors.h). */
#include "core/gpu_errors.h"

static const posenc__gpu_error *find(const posenc__gpu_error *list, size_t count, int32_t code)
{
    for (size_t i = 0; i < count; i++) {
        if (list[i].code == code)
            return &list[i];
    }
    return NULL;
}

const char *posenc__gpu_error_name(const posenc__gpu_error *list, size_t count, int32_t code,
                                   const char *unknown)
{
    const posenc__gpu_error *known = find(list, count, code);
    return known ? known->name : unknown;
}

posenc_status posenc__gpu_error_status(const posenc__gpu_error *list, size_t count, int32_t code)
{
    const posenc__gpu_error *known = find(list, count, code);
    return known ? known->status : POSENC_DEVICE_ERROR;
}
