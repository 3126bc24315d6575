/* SPDX-License-Identifier: MIT */
/* Running this program again as a child process, timed from its start to its exit. */
#ifndef POSENC_CLI_RUN_SELF_H
#define POSENC_CLI_RUN_SELF_H

#include <stdbool.h>
#include <stddef.h>

/* Runs the executable this process runs with `args` (NULL-terminated, the arguments after the
 * program name), its standard output and error discarded, and waits for it. Gives its exit
 * code and the seconds from just before it was started to just after it exited. Returns false,
 * with a message in `error`, when it could not be started (no path to this executable, or the
 * system refused, as under a user-mode emulator without binfmt). */
bool cli_run_self(const char *const *args, int *exit_code, double *seconds, char *error,
                  size_t error_size);

#endif
