/* SPDX-License-Identifier: MIT */
/* A command's output files, written all or nothing: each goes to a new temporary file beside
 * its destination, and only when every one is written and on the disk are they renamed into
 * place. A failure leaves every existing file as it was and no temporary file behind. */
#ifndef POSENC_CLI_OUTPUTS_H
#define POSENC_CLI_OUTPUTS_H

#include "npy.h"

#define CLI_MAX_OUTPUTS 4

typedef struct cli_output {
    const char *flag;            /* "--q-out": named in messages */
    const char *path;
    const cli_npy_array *array;  /* may be filled in after cli_outputs_add */
} cli_output;

typedef struct cli_outputs {
    const char *command;
    unsigned count;
    cli_output items[CLI_MAX_OUTPUTS];
} cli_outputs;

void cli_outputs_init(cli_outputs *outputs, const char *command);

/* Adds an output; a NULL path (the flag was not given) adds nothing. */
void cli_outputs_add(cli_outputs *outputs, const char *flag, const char *path,
                     const cli_npy_array *array);

/* Refuses, before any work is done, destinations that could not be replaced: two flags naming
 * one path (CLI_EXIT_USAGE) or a directory (CLI_EXIT_FAILURE). 0 when they are fine; the
 * reason is printed otherwise. */
int cli_outputs_check(const cli_outputs *outputs);

/* Writes every output, or none. Returns 0, or CLI_EXIT_FAILURE with the reason printed. */
int cli_outputs_write(const cli_outputs *outputs);

#endif
