/* SPDX-License-Identifier: MIT */
/* A GPU runtime's error codes (VkResult, cl_int) read as posenc statuses and named in messages:
 * each backend writes one list of its codes, each code beside the status it means, and looks a
 * code up here. */
#ifndef POSENC_CORE_GPU_ERRORS_H
#define POSENC_CORE_GPU_ERRORS_H

#include "core/internal.h"

typedef struct posenc__gpu_error {
    int32_t code;         /* the runtime's value */
    const char *name;     /* its name in the runtime's headers ("VK_ERROR_DEVICE_LOST") */
    posenc_status status; /* what posenc reports for it */
} posenc__gpu_error;

/* An entry of the list, built from the backend's X-macro list of (code, status) pairs. */
#define POSENC__GPU_ERROR(code, status) {(int32_t)(code), #code, (status)},

/* The name of `code` in the `count` entries of `list`; `unknown` when the list lacks it. */
const char *posenc__gpu_error_name(const posenc__gpu_error *list, size_t count, int32_t code,
                                   const char *unknown);
/* The status of `code` in the `count` entries of `list`; DEVICE_ERROR when the list lacks it. */
posenc_status posenc__gpu_error_status(const posenc__gpu_error *list, size_t count, int32_t code);

#endif
