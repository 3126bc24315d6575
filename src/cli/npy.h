/* SPDX-License-Identifier: MIT */
/* Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0, C order, up to 4
 * dimensions). numpy has no bf16, so bf16 data travels as '<u2' raw bf16 words. Files are read in
 * the byte order their descr declares ('<' or '>') and written little-endian ('<'); arrays in
 * memory are in the host's order. */
#ifndef POSENC_CLI_NPY_H
#define POSENC_CLI_NPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_NPY_MAX_DIMS 4

typedef enum cli_npy_dtype {
    CLI_NPY_F32 = 0, /* '<f4' */
    CLI_NPY_F16 = 1, /* '<f2' */
    CLI_NPY_BF16 = 2, /* '<u2': raw bf16 words */
    CLI_NPY_I32 = 3, /* '<i4' */
    CLI_NPY_I64 = 4, /* '<i8': numpy's default integer (positions are narrowed to i32) */
    CLI_NPY_F64 = 5, /* '<f8': frequency and factor tables */
} cli_npy_dtype;

typedef struct cli_npy_array {
    cli_npy_dtype dtype;
    uint32_t ndim;                     /* 0 (a scalar) .. CLI_NPY_MAX_DIMS */
    int64_t shape[CLI_NPY_MAX_DIMS];   /* outermost first */
    uint64_t count;                    /* elements: the product of the shape */
    void *data;                        /* count elements, C order, malloc'd; NULL if count is 0 */
} cli_npy_array;

/* "f32", "f16", "bf16", "i32", "i64", "f64". */
const char *cli_npy_dtype_name(cli_npy_dtype dtype);
/* "<f4", "<f2", "<u2", "<i4", "<i8", "<f8". */
const char *cli_npy_descr(cli_npy_dtype dtype);
size_t cli_npy_dtype_size(cli_npy_dtype dtype);

/* Reads `path` into `array` (freed with cli_npy_free). Returns 0, or -1 with a one-line reason
 * in `error` (the path is not included) and `array` left empty. Never trusts the file: every
 * size is checked against the file's length before anything is allocated. */
int cli_npy_read(const char *path, cli_npy_array *array, char *error, size_t error_size);

/* cli_npy_read of a whole .npy file held in memory (`size` bytes): the same checks and messages;
 * the data is copied into `array`. */
int cli_npy_parse(const void *bytes, size_t size, cli_npy_array *array, char *error,
                  size_t error_size);

/* Writes `array` as format version `major_version` (1 or 2) into `path`, through a temporary
 * file renamed over it: on failure an existing `path` is left as it was. Returns 0, or -1 with a
 * reason. */
int cli_npy_write(const char *path, const cli_npy_array *array, int major_version, char *error,
                  size_t error_size);

/* The same into an open stream (neither flushed nor closed: the caller commits it). */
int cli_npy_write_stream(FILE *file, const cli_npy_array *array, int major_version,
                         char *error, size_t error_size);

/* The product of `shape`, or -1 if a dimension is negative or the product overflows a count
 * of `element_size`-byte elements addressable by size_t. */
int64_t cli_npy_count(uint32_t ndim, const int64_t *shape, size_t element_size);

/* Allocates a zeroed array of this dtype and shape; returns 0, or -1 if out of memory or the
 * shape is invalid. */
int cli_npy_alloc(cli_npy_array *array, cli_npy_dtype dtype, uint32_t ndim, const int64_t *shape);

void cli_npy_free(cli_npy_array *array);

/* "[2, 16, 4, 64]" (at most 4 dims) into `text`. */
void cli_npy_format_shape(uint32_t ndim, const int64_t *shape, char *text, size_t text_size);

#endif
