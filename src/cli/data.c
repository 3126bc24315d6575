/* SPDX-License-Identifier: MIT */
/* Command inputs and outputs as .npy arrays: loading with dtype and shape checks, random test
 * data, and host tensor views. */
#include "data.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "convert.h"

posenc_dtype cli_posenc_dtype(cli_npy_dtype dtype)
{
    switch (dtype) {
    case CLI_NPY_F32:
        return POSENC_DTYPE_F32;
    case CLI_NPY_F16:
        return POSENC_DTYPE_F16;
    case CLI_NPY_BF16:
        return POSENC_DTYPE_BF16;
    case CLI_NPY_I32:
        return POSENC_DTYPE_I32;
    default:
        return POSENC_DTYPE_DEFAULT;
    }
}

cli_npy_dtype cli_npy_dtype_of(posenc_dtype dtype)
{
    switch (dtype) {
    case POSENC_DTYPE_F16:
        return CLI_NPY_F16;
    case POSENC_DTYPE_BF16:
        return CLI_NPY_BF16;
    case POSENC_DTYPE_I32:
        return CLI_NPY_I32;
    default:
        return CLI_NPY_F32;
    }
}

static int data_read(const char *command, const char *flag, const char *path,
                     cli_npy_array *array)
{
    char error[256];
    if (cli_npy_read(path, array, error, sizeof error) != 0) {
        return cli_fail(command, CLI_EXIT_FAILURE, "%s %s: %s", flag, path, error);
    }
    return 0;
}

static int data_reject(const char *command, const char *flag, const char *path,
                       cli_npy_array *array, const char *expected)
{
    int rc = cli_fail(command, CLI_EXIT_FAILURE, "%s %s: expected %s, got %s ('%s')", flag, path,
                      expected, cli_npy_dtype_name(array->dtype), cli_npy_descr(array->dtype));
    cli_npy_free(array);
    return rc;
}

static int data_check_dims(const char *command, const char *flag, const char *path,
                           cli_npy_array *array)
{
    if (array->ndim == 0 || array->count == 0) {
        char shape[96];
        cli_npy_format_shape(array->ndim, array->shape, shape, sizeof shape);
        int rc = cli_fail(command, CLI_EXIT_FAILURE,
                          "%s %s: expected 1 to 4 dimensions of size >= 1, got shape %s", flag,
                          path, shape);
        cli_npy_free(array);
        return rc;
    }
    return 0;
}

int cli_load_data(const char *command, const char *flag, const char *path, cli_npy_array *array)
{
    int rc = data_read(command, flag, path, array);
    if (rc) {
        return rc;
    }
    if (array->dtype != CLI_NPY_F32 && array->dtype != CLI_NPY_F16 &&
        array->dtype != CLI_NPY_BF16) {
        return data_reject(command, flag, path, array, "f32 ('<f4'), f16 ('<f2') or bf16 ('<u2')");
    }
    return data_check_dims(command, flag, path, array);
}

int cli_load_positions(const char *command, const char *flag, const char *path,
                       cli_npy_array *array)
{
    int rc = data_read(command, flag, path, array);
    if (rc) {
        return rc;
    }
    if (array->dtype == CLI_NPY_I64) {
        /* numpy's default integer: narrow it in place when every position fits in int32. */
        int32_t *narrow = (int32_t *)array->data;
        for (uint64_t i = 0; i < array->count; i++) {
            int64_t v;
            memcpy(&v, (const char *)array->data + i * 8, 8);
            if (v < INT32_MIN || v > INT32_MAX) {
                rc = cli_fail(command, CLI_EXIT_FAILURE,
                              "%s %s: position %lld does not fit in int32", flag, path,
                              (long long)v);
                cli_npy_free(array);
                return rc;
            }
            narrow[i] = (int32_t)v;
        }
        array->dtype = CLI_NPY_I32;
    }
    if (array->dtype != CLI_NPY_I32 && array->dtype != CLI_NPY_F32) {
        return data_reject(command, flag, path, array, "i32 ('<i4'), i64 ('<i8') or f32 ('<f4')");
    }
    return data_check_dims(command, flag, path, array);
}

int cli_load_table(const char *command, const char *flag, const char *path, uint64_t count,
                   double **values)
{
    cli_npy_array array;
    int rc = data_read(command, flag, path, &array);
    if (rc) {
        return rc;
    }
    if (array.dtype != CLI_NPY_F64 && array.dtype != CLI_NPY_F32) {
        return data_reject(command, flag, path, &array, "f64 ('<f8') or f32 ('<f4')");
    }
    if (array.ndim != 1 || array.count != count) {
        char shape[96];
        cli_npy_format_shape(array.ndim, array.shape, shape, sizeof shape);
        cli_npy_free(&array);
        return cli_fail(command, CLI_EXIT_FAILURE,
                        "%s %s: expected shape [%llu] (rotary_dim / 2 entries), got %s", flag,
                        path, (unsigned long long)count, shape);
    }
    *values = malloc((size_t)count * sizeof **values);
    if (!*values) {
        cli_npy_free(&array);
        return cli_fail(command, CLI_EXIT_FAILURE, "out of memory");
    }
    for (uint64_t i = 0; i < count; i++) {
        (*values)[i] = cli_npy_element(&array, i);
    }
    cli_npy_free(&array);
    return 0;
}

void cli_fill_random(cli_npy_array *array, uint64_t seed)
{
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    if (state == 0) {
        state = 1;
    }
    for (uint64_t i = 0; i < array->count; i++) {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        uint64_t bits = state * 0x2545f4914f6cdd1dull;
        float value = (float)((double)(bits >> 40) * 0x1p-23 - 1.0); /* [-1, 1), 24 bits */
        switch (array->dtype) {
        case CLI_NPY_F32:
            ((float *)array->data)[i] = value;
            break;
        case CLI_NPY_F16:
            ((uint16_t *)array->data)[i] = cli_f32_to_f16(value);
            break;
        case CLI_NPY_BF16:
            ((uint16_t *)array->data)[i] = cli_f32_to_bf16(value);
            break;
        default:
            break;
        }
    }
}

posenc_tensor cli_tensor_of(cli_npy_array *array)
{
    return posenc_tensor_of_host(array->data, cli_posenc_dtype(array->dtype), array->ndim,
                                 array->shape);
}
