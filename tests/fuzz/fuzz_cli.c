/* SPDX-License-Identifier: MIT */
/* Fuzz target: the command-line tool's flag parsing. The input is an argument list, one
 * argument per line, the first naming the command (devices, rope, sinusoidal, demo, bench);
 * each command's parser runs alone (cli_*_parse_only: no file read, no device opened). It must
 * answer 0 or 2 (bad usage) and leave the arguments as they were. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fuzz_common.h"

#define MAX_INPUT 4096
#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct {
        const char *name;
        int (*parse)(int argc, char **argv);
    } commands[] = {
        {"devices", cli_devices_parse_only},
        {"rope", cli_rope_parse_only},
        {"sinusoidal", cli_sinusoidal_parse_only},
        {"demo", cli_demo_parse_only},
        {"bench", cli_bench_parse_only},
    };
    if (size > MAX_INPUT)
        return 0;
    /* Each argument in its own allocation, so that reading past one is seen. */
    char *argv[MAX_ARGS + 1];
    char *copies[MAX_ARGS];
    int argc = 0;
    size_t start = 0;
    for (size_t i = 0; i <= size && argc < MAX_ARGS; i++) {
        if (i < size && data[i] != '\n')
            continue;
        size_t length = i - start;
        argv[argc] = malloc(length + 1);
        copies[argc] = malloc(length + 1);
        FUZZ_CHECK(argv[argc] && copies[argc], "out of memory");
        memcpy(argv[argc], data + start, length);
        argv[argc][length] = '\0';
        memcpy(copies[argc], argv[argc], length + 1);
        argc++;
        start = i + 1;
    }
    argv[argc] = NULL;

    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        if (strcmp(argv[0], commands[c].name) != 0)
            continue;
        int rc = commands[c].parse(argc - 1, argv + 1);
        FUZZ_CHECK(rc == CLI_EXIT_OK || rc == CLI_EXIT_USAGE,
                   "posenc %s: flag parsing answered %d", commands[c].name, rc);
        break;
    }
    for (int i = 0; i < argc; i++) {
        FUZZ_CHECK(strcmp(argv[i], copies[i]) == 0, "argument %d changed from '%s' to '%s'", i,
                   copies[i], argv[i]);
        free(argv[i]);
        free(copies[i]);
    }
    return 0;
}
