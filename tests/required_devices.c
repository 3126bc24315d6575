/* SPDX-License-Identifier: MIT */
/* Skip or fail for an absent device, as POSENC_TEST_REQUIRE_DEVICES asks (required_devices.h). */
#include "required_devices.h"

#include "test_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool test_device_required(const char *backend)
{
    const char *list = posenc__env_get("POSENC_TEST_REQUIRE_DEVICES");
    size_t length = strlen(backend);
    while (list && *list) {
        size_t word = strcspn(list, ",; ");
        if (word == length && strncmp(list, backend, length) == 0)
            return true;
        list += word;
        list += strspn(list, ",; ");
    }
    return false;
}

int test_device_absent(const char *test_name, const char *backend, const char *reason)
{
    if (test_device_required(backend)) {
        const char *driver = strcmp(backend, "vulkan") == 0   ? "; lavapipe: mesa-vulkan-drivers"
                             : strcmp(backend, "opencl") == 0 ? "; PoCL: pocl-opencl-icd"
                                                              : "";
        fprintf(stderr,
                "%s: no %s device (%s), but POSENC_TEST_REQUIRE_DEVICES requires %s: the %s "
                "backend would go untested (install a driver%s)\n",
                test_name, backend, reason && *reason ? reason : "none found", backend, backend,
                driver);
        return EXIT_FAILURE;
    }
    printf("%s: no %s device (%s): skipped\n", test_name, backend,
           reason && *reason ? reason : "none found");
    return TEST_SKIP_CODE;
}
