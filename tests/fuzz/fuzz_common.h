/* SPDX-License-Identifier: MIT */
/* What every fuzz target shares: the libFuzzer entry point and the way a target reports a
 * broken promise (a message on stderr, then abort(), which libFuzzer and the replay driver both
 * take as a crash). */
#ifndef POSENC_TESTS_FUZZ_COMMON_H
#define POSENC_TESTS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Prints "fuzz target: broken promise: MESSAGE" and aborts. */
void fuzz_fail(const char *format, ...)
#if defined(__MINGW32__)
    __attribute__((format(gnu_printf, 1, 2), noreturn))
#elif defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

#define FUZZ_CHECK(cond, ...)                                                                  \
    do {                                                                                       \
        if (!(cond))                                                                           \
            fuzz_fail(__VA_ARGS__);                                                            \
    } while (0)

#endif
