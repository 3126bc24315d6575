/* SPDX-License-Identifier: MIT */
/* Opening a context on the device a --device selector names, describing devices, and turning
 * library failures into one-line messages. */
#ifndef POSENC_CLI_DEVICE_H
#define POSENC_CLI_DEVICE_H

#include <posenc/posenc.h>
#include <stddef.h>

/* Opens a context with backend AUTO and `selector` (NULL: the automatic choice, which honours
 * POSENC_DEVICE). Returns 0, or CLI_EXIT_FAILURE with the library's message printed. */
int cli_open_context(const char *command, const char *selector, posenc_context **context,
                     posenc_device_info *info);

/* "posenc CMD: CALL: POSENC_X: <detail>"; the detail is the context's last error, or the
 * thread's when `context` is NULL, or the status string when neither has one. Returns
 * CLI_EXIT_FAILURE. */
int cli_library_error(const char *command, const posenc_context *context, posenc_status status,
                      const char *call);

/* "vulkan:1". */
void cli_device_selector(const posenc_device_info *info, char *text, size_t text_size);

/* "15.6 GiB", "512 MiB", "64 KiB", "100 B". */
void cli_format_bytes(uint64_t bytes, char *text, size_t text_size);

#endif
