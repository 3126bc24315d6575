/* SPDX-License-Identifier: MIT */
/* Reporting a broken promise from a fuzz target. */
#include "fuzz_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void fuzz_fail(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fputs("fuzz target: broken promise: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    fflush(stderr);
    abort();
}
