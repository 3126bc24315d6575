/* SPDX-License-Identifier: MIT */
/* Flag parsing for the command-line tool: "--name value" / "--name=value", strict number
 * parsing, and the one-line error messages every command prints. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One character as it is shown: itself, or its escape. */
static void escape_char(unsigned char c, char escape[5])
{
    if (c >= 0x20 && c != 0x7f) {
        escape[0] = (char)c;
        escape[1] = '\0';
    } else if (c == '\n' || c == '\r' || c == '\t') {
        escape[0] = '\\';
        escape[1] = (char)(c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
        escape[2] = '\0';
    } else {
        snprintf(escape, 5, "\\x%02x", (unsigned)c);
    }
}

size_t cli_escape(const char *text, char *out, size_t size)
{
    size_t n = 0;
    if (size == 0) {
        return 0;
    }
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        char escape[5];
        escape_char(*c, escape);
        size_t length = strlen(escape);
        if (n + length >= size) {
            break; /* whole escapes only */
        }
        memcpy(out + n, escape, length);
        n += length;
    }
    out[n] = '\0';
    return n;
}

void cli_put_escaped(FILE *stream, const char *text)
{
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        char escape[5];
        escape_char(*c, escape);
        fputs(escape, stream);
    }
}

int cli_fail(const char *command, int exit_code, const char *format, ...)
{
    /* The message carries text echoed from the user (arguments, file names, values, library
     * messages quoting them): escaped as a whole, it is one line whatever they hold. */
    char message[1024], escaped[4 * sizeof message];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    cli_escape(message, escaped, sizeof escaped);
    if (command) {
        fprintf(stderr, "posenc %s: %s\n", command, escaped);
    } else {
        fprintf(stderr, "posenc: %s\n", escaped);
    }
    return exit_code;
}

void cli_args_init(cli_args *args, const char *command, int argc, char **argv)
{
    memset(args, 0, sizeof *args);
    args->command = command;
    args->argc = argc;
    args->argv = argv;
}

int cli_next_flag(cli_args *args)
{
    if (args->next >= args->argc) {
        return 0;
    }
    const char *arg = args->argv[args->next++];
    args->inline_value = NULL;
    if (strcmp(arg, "-h") == 0) {
        arg = "--help";
    }
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
        cli_fail(args->command, CLI_EXIT_USAGE, "unexpected argument '%s' (see posenc %s --help)",
                 arg, args->command);
        return -1;
    }
    const char *equals = strchr(arg, '=');
    size_t length = equals ? (size_t)(equals - arg) : strlen(arg);
    if (length >= sizeof args->flag) {
        length = sizeof args->flag - 1;
    }
    memcpy(args->flag, arg, length);
    args->flag[length] = '\0';
    args->inline_value = equals ? equals + 1 : NULL;
    return 1;
}

bool cli_is(const cli_args *args, const char *name)
{
    return strcmp(args->flag, name) == 0;
}

int cli_value(cli_args *args, const char **value)
{
    const char *text = args->inline_value;
    if (!text && args->next < args->argc && strncmp(args->argv[args->next], "--", 2) != 0) {
        text = args->argv[args->next++];
    }
    if (!text || text[0] == '\0') {
        return cli_fail(args->command, CLI_EXIT_USAGE, "%s: missing value", args->flag);
    }
    *value = text;
    return 0;
}

int cli_no_value(cli_args *args)
{
    if (args->inline_value) {
        return cli_fail(args->command, CLI_EXIT_USAGE, "%s: takes no value, got '%s'",
                        args->flag, args->inline_value);
    }
    return 0;
}

int cli_unknown_flag(const cli_args *args)
{
    return cli_fail(args->command, CLI_EXIT_USAGE, "unknown flag '%s' (see posenc %s --help)",
                    args->flag, args->command);
}

int cli_bad_value(const cli_args *args, const char *text, const char *what)
{
    return cli_fail(args->command, CLI_EXIT_USAGE, "%s: expected %s, got '%s'", args->flag, what,
                    text);
}

bool cli_parse_i64(const char *text, int64_t *value)
{
    if (!text || !*text || (*text != '-' && *text != '+' && (*text < '0' || *text > '9'))) {
        return false;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0') {
        return false;
    }
    *value = (int64_t)v;
    return true;
}

bool cli_parse_u64(const char *text, uint64_t *value)
{
    if (!text || *text < '0' || *text > '9') {
        return false;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0') {
        return false;
    }
    *value = (uint64_t)v;
    return true;
}

bool cli_parse_u32(const char *text, uint32_t *value)
{
    uint64_t v = 0;
    if (!cli_parse_u64(text, &v) || v > UINT32_MAX) {
        return false;
    }
    *value = (uint32_t)v;
    return true;
}

bool cli_parse_i32(const char *text, int32_t *value)
{
    int64_t v = 0;
    if (!cli_parse_i64(text, &v) || v < INT32_MIN || v > INT32_MAX) {
        return false;
    }
    *value = (int32_t)v;
    return true;
}

bool cli_parse_double(const char *text, double *value)
{
    if (!text || !*text) {
        return false;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(v) || (errno == ERANGE && fabs(v) > 1.0)) {
        return false;
    }
    *value = v;
    return true;
}

int cli_value_double(cli_args *args, double *value, double min, bool min_exclusive,
                     const char *what)
{
    const char *text = NULL;
    double v = 0;
    if (cli_value(args, &text)) {
        return CLI_EXIT_USAGE;
    }
    if (!cli_parse_double(text, &v) || v < min || (min_exclusive && v == min)) {
        return cli_bad_value(args, text, what);
    }
    *value = v;
    return 0;
}

int cli_value_u32(cli_args *args, uint32_t *value, uint32_t min, const char *what)
{
    const char *text = NULL;
    uint32_t v = 0;
    if (cli_value(args, &text)) {
        return CLI_EXIT_USAGE;
    }
    if (!cli_parse_u32(text, &v) || v < min) {
        return cli_bad_value(args, text, what);
    }
    *value = v;
    return 0;
}

int cli_value_i32(cli_args *args, int32_t *value)
{
    const char *text = NULL;
    if (cli_value(args, &text)) {
        return CLI_EXIT_USAGE;
    }
    if (!cli_parse_i32(text, value)) {
        return cli_bad_value(args, text, "a 32-bit integer");
    }
    return 0;
}

bool cli_parse_list(const char *text, int64_t *values, int count)
{
    const char *p = text;
    for (int i = 0; i < count; i++) {
        if (*p < '0' || *p > '9') {
            return false;
        }
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno != 0 || v > (unsigned long long)INT64_MAX) {
            return false;
        }
        values[i] = (int64_t)v;
        p = end;
        if (i + 1 < count) {
            if (*p != ',') {
                return false;
            }
            p++;
        }
    }
    return *p == '\0';
}

int cli_value_choice(cli_args *args, const char *const *names, int *choice)
{
    const char *text = NULL;
    if (cli_value(args, &text)) {
        return CLI_EXIT_USAGE;
    }
    char expected[256] = "one of ";
    for (int i = 0; names[i]; i++) {
        if (strcmp(text, names[i]) == 0) {
            *choice = i;
            return 0;
        }
        size_t used = strlen(expected);
        snprintf(expected + used, sizeof expected - used, "%s%s", i ? "|" : "", names[i]);
    }
    return cli_bad_value(args, text, expected);
}

/* "expected one of a|b|c, got 'text'" for the canonical names of a posenc.h list. */
static int bad_name(const cli_args *args, const char *text, const char *const *names)
{
    char expected[256] = "one of ";
    for (int i = 0; names[i]; i++) {
        size_t used = strlen(expected);
        snprintf(expected + used, sizeof expected - used, "%s%s", i ? "|" : "", names[i]);
    }
    return cli_bad_value(args, text, expected);
}

#define CLI_LIST_NAME_(name, value, text) text,
/* cli_value_<kind>: the value read by posenc_<kind>_from_name, or the list's names refused. */
#define CLI_NAME_READER(kind, type, list)                                                          \
    int cli_value_##kind(cli_args *args, type *value)                                              \
    {                                                                                              \
        static const char *const names[] = {list(CLI_LIST_NAME_) NULL};                            \
        const char *text = NULL;                                                                   \
        if (cli_value(args, &text)) {                                                              \
            return CLI_EXIT_USAGE;                                                                 \
        }                                                                                          \
        type read;                                                                                 \
        if (posenc_##kind##_from_name(text, &read) != POSENC_OK) {                                 \
            return bad_name(args, text, names);                                                    \
        }                                                                                          \
        *value = read;                                                                             \
        return 0;                                                                                  \
    }

CLI_NAME_READER(rope_style, posenc_rope_style, POSENC_ROPE_STYLE_LIST)
CLI_NAME_READER(rope_scaling_type, posenc_rope_scaling_type, POSENC_ROPE_SCALING_TYPE_LIST)
CLI_NAME_READER(rope_multimodal, posenc_rope_multimodal, POSENC_ROPE_MULTIMODAL_LIST)
CLI_NAME_READER(sinusoidal_layout, posenc_sinusoidal_layout, POSENC_SINUSOIDAL_LAYOUT_LIST)

int cli_value_data_dtype(cli_args *args, posenc_dtype *value)
{
    /* The dtypes data (not positions) may have; "default" is no dtype of a file. */
    const char *const names[] = {posenc_dtype_name(POSENC_DTYPE_F32),
                                 posenc_dtype_name(POSENC_DTYPE_F16),
                                 posenc_dtype_name(POSENC_DTYPE_BF16), NULL};
    const char *text = NULL;
    if (cli_value(args, &text)) {
        return CLI_EXIT_USAGE;
    }
    posenc_dtype read;
    if (posenc_dtype_from_name(text, &read) != POSENC_OK ||
        (read != POSENC_DTYPE_F32 && read != POSENC_DTYPE_F16 && read != POSENC_DTYPE_BF16)) {
        return bad_name(args, text, names);
    }
    *value = read;
    return 0;
}
