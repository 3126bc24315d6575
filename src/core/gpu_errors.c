/* SPDX-License-Identifier: MIT */
/* Looking up a GPU runtime's error code in its backend's list (gpu_errors.h). */
#include "core/gpu_errors.h"

const posenc__gpu_error *posenc__gpu_error_find(const posenc__gpu_error *list, size_t count,
                                                int32_t code)
{
    for (size_t i = 0; i < count; i++) {
        if (list[i].code == code)
            return &list[i];
    }
    return NULL;
}
