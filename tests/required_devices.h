/* SPDX-License-Identifier: MIT */
/* What a test does when the device it needs is absent: skip, or fail where the build asked for
 * that backend's devices (POSENC_TEST_REQUIRE_DEVICES, docs/testing.md). */
#ifndef POSENC_TEST_REQUIRED_DEVICES_H
#define POSENC_TEST_REQUIRED_DEVICES_H

#include <stdbool.h>

/* Whether the environment variable POSENC_TEST_REQUIRE_DEVICES (backend names separated by
 * commas, semicolons or spaces, e.g. "vulkan,opencl") names `backend`. */
bool test_device_required(const char *backend);

/* A test found no device of `backend` ("vulkan", "opencl"), for `reason`. Prints why and returns
 * the test's exit code: EXIT_FAILURE, naming the backend, when it is required, so that a run
 * meant to test it cannot pass by skipping; TEST_SKIP_CODE otherwise. */
int test_device_absent(const char *test_name, const char *backend, const char *reason);

#endif
