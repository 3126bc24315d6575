/* SPDX-License-Identifier: MIT */
/* Hand-made malformed .npy files, each with the words its error message must contain; shared by
 * the npy unit test and the command-line failure tests. */
#ifndef POSENC_TESTS_CLI_BAD_NPY_H
#define POSENC_TESTS_CLI_BAD_NPY_H

#include <stddef.h>

typedef struct bad_npy {
    const char *name;   /* file name without ".npy" */
    const char *expect; /* a substring of the reader's error message */
} bad_npy;

/* The number of cases, and case `index`. */
size_t bad_npy_count(void);
bad_npy bad_npy_case(size_t index);

/* The bytes of case `index` in `bytes` (at most `capacity`); returns the length. */
size_t bad_npy_bytes(size_t index, unsigned char *bytes, size_t capacity);

/* Writes case `index` as `path`; returns 0 or -1. */
int bad_npy_write(size_t index, const char *path);

#endif
