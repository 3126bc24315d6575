/* SPDX-License-Identifier: MIT */
/* A command's output files, written all or nothing: temporary files beside the destinations,
 * committed to the disk, then renamed over them. */
#include "outputs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "support.h"

/* Room for a destination path and the temporary name's suffix. */
#define OUTPUTS_PATH_MAX 4096

void cli_outputs_init(cli_outputs *outputs, const char *command)
{
    memset(outputs, 0, sizeof *outputs);
    outputs->command = command;
}

void cli_outputs_add(cli_outputs *outputs, const char *flag, const char *path,
                     const cli_npy_array *array)
{
    if (path && outputs->count < CLI_MAX_OUTPUTS) {
        cli_output *o = &outputs->items[outputs->count++];
        o->flag = flag;
        o->path = path;
        o->array = array;
    }
}

int cli_outputs_check(const cli_outputs *outputs)
{
    for (unsigned i = 0; i < outputs->count; i++) {
        const cli_output *o = &outputs->items[i];
        for (unsigned j = 0; j < i; j++) {
            /* The same spelling only: two spellings of one file still end well, the later
             * output replacing the earlier as a whole. */
            if (strcmp(outputs->items[j].path, o->path) == 0) {
                return cli_fail(outputs->command, CLI_EXIT_USAGE, "%s and %s both name %s",
                                outputs->items[j].flag, o->flag, o->path);
            }
        }
        if (support_is_directory(o->path)) {
            return cli_fail(outputs->command, CLI_EXIT_FAILURE, "%s %s: is a directory", o->flag,
                            o->path);
        }
    }
    return 0;
}

static void outputs_remove(char (*temp_paths)[OUTPUTS_PATH_MAX], unsigned from, unsigned to)
{
    for (unsigned i = from; i < to; i++) {
        support_file_remove(temp_paths[i]);
    }
}

int cli_outputs_write(const cli_outputs *outputs)
{
    char temp_paths[CLI_MAX_OUTPUTS][OUTPUTS_PATH_MAX];
    int rc = cli_outputs_check(outputs);
    if (rc) {
        return rc;
    }
    for (unsigned i = 0; i < outputs->count; i++) {
        const cli_output *o = &outputs->items[i];
        char error[256];
        FILE *file = support_temp_file_create(o->path, temp_paths[i], sizeof temp_paths[i]);
        if (!file) {
            rc = cli_fail(outputs->command, CLI_EXIT_FAILURE,
                          "%s %s: cannot create: %s (no output written)", o->flag, o->path,
                          strerror(errno));
        } else if (cli_npy_write_stream(file, o->array, 1, error, sizeof error) != 0) {
            fclose(file);
            rc = cli_fail(outputs->command, CLI_EXIT_FAILURE, "%s %s: %s (no output written)",
                          o->flag, o->path, error);
            support_file_remove(temp_paths[i]);
        } else if (!support_file_commit(file)) {
            rc = cli_fail(outputs->command, CLI_EXIT_FAILURE,
                          "%s %s: write error: %s (no output written)", o->flag, o->path,
                          strerror(errno));
            support_file_remove(temp_paths[i]);
        }
        if (rc) {
            outputs_remove(temp_paths, 0, i);
            return rc;
        }
    }
    /* Every output is complete on the disk: only now is any destination replaced. */
    for (unsigned i = 0; i < outputs->count; i++) {
        const cli_output *o = &outputs->items[i];
        if (!support_file_replace(temp_paths[i], o->path)) {
            int saved = errno;
            outputs_remove(temp_paths, i, outputs->count);
            return cli_fail(outputs->command, CLI_EXIT_FAILURE, "%s %s: cannot replace: %s%s",
                            o->flag, o->path, strerror(saved),
                            i ? " (the outputs before it were written)" : " (no output written)");
        }
    }
    return 0;
}
