/* SPDX-License-Identifier: MIT */
/* Opening a context on the device a --device selector names, describing devices, and turning
 * library failures into one-line messages. */
#include "device.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_library_error(const char *command, const posenc_context *context, posenc_status status,
                      const char *call)
{
    const char *detail = context ? posenc_context_last_error(context) : posenc_thread_last_error();
    if (!detail || !detail[0]) {
        detail = posenc_status_string(status);
    }
    return cli_fail(command, CLI_EXIT_FAILURE, "%s: %s: %s", call, posenc_status_name(status),
                    detail);
}

/* Whether a library message starts with an environment setting it names as the field at
 * fault: "POSENC_CPU_VARIANT=neon: ...". */
static bool names_setting(const char *detail)
{
    if (strncmp(detail, "POSENC_", 7) != 0) {
        return false;
    }
    const char *c = detail + 7;
    while ((*c >= 'A' && *c <= 'Z') || *c == '_') {
        c++;
    }
    return *c == '=';
}

int cli_open_context(const char *command, const char *selector, posenc_context **context,
                     posenc_device_info *info)
{
    posenc_context_desc desc = {.backend = POSENC_BACKEND_AUTO, .device = selector};
    posenc_status status = posenc_context_create(&desc, context);
    if (status != POSENC_OK) {
        const char *detail = posenc_thread_last_error();
        if (!detail || !detail[0]) {
            detail = posenc_status_string(status);
        }
        const char *env = support_env_get("POSENC_DEVICE");
        if (names_setting(detail)) {
            /* POSENC_CPU_VARIANT and the like: the setting is at fault, whatever device. */
            return cli_fail(command, CLI_EXIT_FAILURE, "%s: %s", posenc_status_name(status),
                            detail);
        }
        if (selector) {
            return cli_fail(command, CLI_EXIT_FAILURE, "cannot open device '%s': %s: %s",
                            selector, posenc_status_name(status), detail);
        }
        if (env && env[0]) {
            return cli_fail(command, CLI_EXIT_FAILURE,
                            "cannot open device POSENC_DEVICE=%s: %s: %s", env,
                            posenc_status_name(status), detail);
        }
        return cli_fail(command, CLI_EXIT_FAILURE, "cannot open a device: %s: %s",
                        posenc_status_name(status), detail);
    }
    status = posenc_context_device(*context, info);
    if (status != POSENC_OK) {
        int rc = cli_library_error(command, *context, status, "posenc_context_device");
        posenc_context_destroy(*context);
        *context = NULL;
        return rc;
    }
    return 0;
}

void cli_device_selector(const posenc_device_info *info, char *text, size_t text_size)
{
    snprintf(text, text_size, "%s:%u", posenc_backend_name(info->backend), info->backend_index);
}

void cli_format_bytes(uint64_t bytes, char *text, size_t text_size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double value = (double)bytes;
    int unit = 0;
    while (value >= 1024.0 && unit < 5) {
        value /= 1024.0;
        unit++;
    }
    if (unit == 0) {
        snprintf(text, text_size, "%llu B", (unsigned long long)bytes);
    } else if (value == (double)(uint64_t)value) {
        snprintf(text, text_size, "%.0f %s", value, units[unit]);
    } else {
        snprintf(text, text_size, "%.1f %s", value, units[unit]);
    }
}
