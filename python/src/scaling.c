/* SPDX-License-Identifier: MIT */
/* The `scaling` argument in posenc form, a dict {"type": ..., field: value} whose field names
 * are those of posenc_rope_scaling, as the C struct. Unknown keys are errors naming them. */
#include "pyposenc.h"

#include <stdlib.h>
#include <string.h>

static const char *const array_names[3] = {"short_factor", "long_factor", "freq_factors"};

void pyposenc_scaling_free(pyposenc_scaling_storage *storage)
{
    for (int i = 0; i < 3; i++) {
        free(storage->arrays[i]);
        storage->arrays[i] = NULL;
    }
}

static int parse_type(PyObject *value, posenc_rope_scaling *scaling)
{
    int type = 0;
    if (pyposenc_name_value("rope_scaling_type", value, "scaling.type", &type) < 0) {
        return -1;
    }
    scaling->type = (posenc_rope_scaling_type)type;
    return 0;
}

static int parse_double(PyObject *value, const char *key, double *out)
{
    double v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "scaling.%s: a number is expected", key);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_u32(PyObject *value, const char *key, uint32_t *out)
{
    unsigned long long v = PyLong_Check(value) ? PyLong_AsUnsignedLongLong(value) : 0;
    if (!PyLong_Check(value) || (v == (unsigned long long)-1 && PyErr_Occurred()) ||
        v > UINT32_MAX) {
        PyErr_Clear();
        pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                        "scaling.%s: an integer from 0 to 4294967295 is expected", key);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int parse_array(PyObject *value, const char *key, double **out, Py_ssize_t *count)
{
    Py_ssize_t n = PySequence_Check(value) ? PySequence_Size(value) : -1;
    if (n < 1) {
        PyErr_Clear();
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "scaling.%s: a non-empty sequence of numbers "
                        "is expected", key);
        return -1;
    }
    if (*count && n != *count) {
        pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                        "scaling.%s: %zd entries, but another factor list has %zd", key, n,
                        *count);
        return -1;
    }
    double *array = malloc((size_t)n * sizeof *array);
    if (!array) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(value, i);
        double v = item ? PyFloat_AsDouble(item) : -1.0;
        Py_XDECREF(item);
        if (v == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            free(array);
            pyposenc_raisef(POSENC_INVALID_ARGUMENT, "scaling.%s[%zd]: a number is expected",
                            key, i);
            return -1;
        }
        array[i] = v;
    }
    *out = array;
    *count = n;
    return 0;
}

int pyposenc_scaling_parse(PyObject *dict, posenc_rope_scaling *scaling,
                           pyposenc_scaling_storage *storage)
{
    memset(scaling, 0, sizeof *scaling);
    memset(storage, 0, sizeof *storage);
    if (dict == Py_None) {
        return 0;
    }
    if (!PyDict_Check(dict)) {
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "scaling: a dict is expected");
        return -1;
    }
    struct {
        const char *key;
        double *value;
    } doubles[] = {
        {"factor", &scaling->factor},
        {"beta_fast", &scaling->beta_fast},
        {"beta_slow", &scaling->beta_slow},
        {"mscale", &scaling->mscale},
        {"mscale_all_dim", &scaling->mscale_all_dim},
        {"low_freq_factor", &scaling->low_freq_factor},
        {"high_freq_factor", &scaling->high_freq_factor},
        {"freq_scale", &scaling->freq_scale},
        {"ext_factor", &scaling->ext_factor},
    };
    struct {
        const char *key;
        uint32_t *value;
    } integers[] = {
        {"original_max_positions", &scaling->original_max_positions},
        {"sequence_length", &scaling->sequence_length},
    };
    Py_ssize_t pos = 0;
    Py_ssize_t count = 0;
    PyObject *key;
    PyObject *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
        if (!name) {
            PyErr_Clear();
            pyposenc_raisef(POSENC_INVALID_ARGUMENT, "scaling: keys must be strings");
            goto fail;
        }
        int done = 0;
        if (strcmp(name, "type") == 0) {
            if (parse_type(value, scaling) < 0) {
                goto fail;
            }
            done = 1;
        } else if (strcmp(name, "no_truncate") == 0) {
            int truth = PyObject_IsTrue(value);
            if (truth < 0) {
                goto fail;
            }
            scaling->no_truncate = truth != 0;
            done = 1;
        }
        for (size_t i = 0; !done && i < sizeof doubles / sizeof doubles[0]; i++) {
            if (strcmp(name, doubles[i].key) == 0) {
                if (parse_double(value, name, doubles[i].value) < 0) {
                    goto fail;
                }
                done = 1;
            }
        }
        for (size_t i = 0; !done && i < sizeof integers / sizeof integers[0]; i++) {
            if (strcmp(name, integers[i].key) == 0) {
                if (parse_u32(value, name, integers[i].value) < 0) {
                    goto fail;
                }
                done = 1;
            }
        }
        for (int i = 0; !done && i < 3; i++) {
            if (strcmp(name, array_names[i]) == 0) {
                if (value != Py_None &&
                    parse_array(value, name, &storage->arrays[i], &count) < 0) {
                    goto fail;
                }
                done = 1;
            }
        }
        if (!done) {
            pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                            "scaling: unknown key '%s' (posenc form: type, factor, "
                            "original_max_positions, sequence_length, beta_fast, beta_slow, "
                            "mscale, mscale_all_dim, no_truncate, low_freq_factor, "
                            "high_freq_factor, short_factor, long_factor, freq_factors, "
                            "freq_scale, ext_factor)",
                            name);
            goto fail;
        }
    }
    scaling->short_factor = storage->arrays[0];
    scaling->long_factor = storage->arrays[1];
    scaling->freq_factors = storage->arrays[2];
    scaling->factor_count = (uint32_t)count;
    return 0;
fail:
    pyposenc_scaling_free(storage);
    memset(scaling, 0, sizeof *scaling);
    return -1;
}
