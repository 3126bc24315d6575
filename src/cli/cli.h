/* SPDX-License-Identifier: MIT */
/* Shared declarations of the posenc command-line tool: the commands, one-line error reporting
 * and flag parsing. Exit codes: 0 success, 1 runtime failure, 2 usage error. */
#ifndef POSENC_CLI_CLI_H
#define POSENC_CLI_CLI_H

#include <posenc/posenc.h>

#include "support.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE 2

/* The accuracy the library promises for f32 outputs: 8 * 2^-24. */
#define CLI_PROMISE (8.0 / 16777216.0)

int cli_devices_main(int argc, char **argv);
int cli_rope_main(int argc, char **argv);
int cli_sinusoidal_main(int argc, char **argv);
int cli_demo_main(int argc, char **argv);
int cli_bench_main(int argc, char **argv);

/* Each command's flag parsing alone, for the fuzz tests: the checks between flags included, but
 * no file read and no device opened. Returns CLI_EXIT_USAGE (message printed) for what the
 * command would reject as bad usage, else CLI_EXIT_OK (also after printing --help). */
int cli_devices_parse_only(int argc, char **argv);
int cli_rope_parse_only(int argc, char **argv);
int cli_sinusoidal_parse_only(int argc, char **argv);
int cli_demo_parse_only(int argc, char **argv);
int cli_bench_parse_only(int argc, char **argv);

/* Prints "posenc COMMAND: message" ("posenc: message" for a NULL command) as one line on
 * stderr, control characters escaped as by cli_escape, and returns `exit_code`. */
int cli_fail(const char *command, int exit_code, const char *format, ...)
    SUPPORT_PRINTF_LIKE(3, 4);

/* Copies `text` into `out` (`size` bytes, always terminated; cut short at a whole escape) with
 * control characters escaped: \n, \r, \t, and \xNN for the others and DEL. Text echoed from
 * the user goes through it, so that it stays on its line and cannot drive the terminal.
 * Returns the length written. */
size_t cli_escape(const char *text, char *out, size_t size);
/* Writes `text` to `stream` escaped the same way, however long it is. */
void cli_put_escaped(FILE *stream, const char *text);

/* ---- flags: "--name value" or "--name=value" ---- */

typedef struct cli_args {
    const char *command; /* "rope": used in error messages */
    int argc;
    char **argv;
    int next;            /* index of the next argument */
    char flag[64];       /* the flag being parsed, without any "=value" */
    const char *inline_value; /* the part after '=' of "--name=value", or NULL */
} cli_args;

void cli_args_init(cli_args *args, const char *command, int argc, char **argv);

/* Advances to the next flag: returns 1 and sets args->flag, 0 at the end, or -1 (error printed)
 * for a positional argument. */
int cli_next_flag(cli_args *args);

/* Whether the current flag is `name`. */
bool cli_is(const cli_args *args, const char *name);

/* The current flag's value. Returns 0, or CLI_EXIT_USAGE (error printed) when it is missing. */
int cli_value(cli_args *args, const char **value);

/* For flags without a value: CLI_EXIT_USAGE (error printed) if one was given with '='. */
int cli_no_value(cli_args *args);

/* "posenc CMD: unknown flag '--x' (see posenc CMD --help)"; returns CLI_EXIT_USAGE. */
int cli_unknown_flag(const cli_args *args);

/* "posenc CMD: --flag: expected WHAT, got 'TEXT'"; returns CLI_EXIT_USAGE. */
int cli_bad_value(const cli_args *args, const char *text, const char *what);

/* Strict parsers: the whole text must be the number, without overflow. */
bool cli_parse_i64(const char *text, int64_t *value);
bool cli_parse_u32(const char *text, uint32_t *value);
bool cli_parse_i32(const char *text, int32_t *value);
bool cli_parse_u64(const char *text, uint64_t *value);
bool cli_parse_double(const char *text, double *value); /* finite only */

/* Value readers combining cli_value and a parser; the range is part of the message. */
int cli_value_double(cli_args *args, double *value, double min, bool min_exclusive,
                     const char *what);
int cli_value_u32(cli_args *args, uint32_t *value, uint32_t min, const char *what);
int cli_value_i32(cli_args *args, int32_t *value);

/* Parses `text` as exactly `count` comma-separated non-negative integers. */
bool cli_parse_list(const char *text, int64_t *values, int count);

/* Picks an entry of `names` (NULL-terminated) equal to the value; returns its index through
 * `choice`, or CLI_EXIT_USAGE with "expected one of a|b|c". */
int cli_value_choice(cli_args *args, const char *const *names, int *choice);

/* Names of posenc.h's lists, read by the library's posenc_<kind>_from_name (underscores or
 * hyphens, any case); a name it refuses is CLI_EXIT_USAGE with "expected one of a|b|c" listing
 * the canonical names. */
int cli_value_rope_style(cli_args *args, posenc_rope_style *value);
int cli_value_rope_scaling_type(cli_args *args, posenc_rope_scaling_type *value);
int cli_value_rope_multimodal(cli_args *args, posenc_rope_multimodal *value);
int cli_value_sinusoidal_layout(cli_args *args, posenc_sinusoidal_layout *value);
/* The dtypes of data files and generated data: f32, f16 or bf16. */
int cli_value_data_dtype(cli_args *args, posenc_dtype *value);

#endif
