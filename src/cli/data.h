/* SPDX-License-Identifier: MIT */
/* Command inputs and outputs as .npy arrays: loading data, positions and frequency tables with
 * their dtype and shape checked, random test data, and host tensor views (outputs.h writes the
 * results). */
#ifndef POSENC_CLI_DATA_H
#define POSENC_CLI_DATA_H

#include <posenc/posenc.h>
#include <stdint.h>

#include "npy.h"

/* The posenc dtype of an f32/f16/bf16/i32 array; POSENC_DTYPE_DEFAULT for the others. */
posenc_dtype cli_posenc_dtype(cli_npy_dtype dtype);
cli_npy_dtype cli_npy_dtype_of(posenc_dtype dtype);

/* Loads an f32, f16 or bf16 ('<u2') array of 1 to 4 dims given by `flag`. Returns 0, or an
 * exit code with "posenc CMD: FLAG PATH: reason" printed. */
int cli_load_data(const char *command, const char *flag, const char *path, cli_npy_array *array);

/* Loads positions: i32 or f32 (i64 is accepted and converted to i32 when every value fits). */
int cli_load_positions(const char *command, const char *flag, const char *path,
                       cli_npy_array *array);

/* Loads a 1-D f64 or f32 table of exactly `count` entries as a malloc'd double array. */
int cli_load_table(const char *command, const char *flag, const char *path, uint64_t count,
                   double **values);

/* Fills an f32/f16/bf16 array with uniform values in [-1, 1) from `seed` (xorshift64*). */
void cli_fill_random(cli_npy_array *array, uint64_t seed);

/* A packed host view of `array` (which must have a posenc dtype and 1 to 4 dims). */
posenc_tensor cli_tensor_of(cli_npy_array *array);

#endif
