/* SPDX-License-Identifier: MIT */
/* The names of posenc.h's enum values for Python, from the library's lists: _posenc.NAMES
 * (kind -> canonical names by value), and names read through posenc_<kind>_from_name. */
#include "pyposenc.h"

#include <string.h>

/* One kind: its functions with the value as an int, and how many values its list has. */
typedef struct name_kind {
    const char *kind; /* "rope_style": the key in NAMES, as in posenc_rope_style_name */
    const char *(*name)(int value);
    posenc_status (*from_name)(const char *name, int *value);
    int count;
} name_kind;

#define PYPOSENC_WRAPPERS_(k, type)                                                              \
    static const char *k##_name(int value) { return posenc_##k##_name((type)value); }           \
    static posenc_status k##_from_name(const char *name, int *value)                             \
    {                                                                                            \
        type out;                                                                                \
        posenc_status status = posenc_##k##_from_name(name, &out);                               \
        if (status == POSENC_OK) {                                                               \
            *value = (int)out;                                                                   \
        }                                                                                        \
        return status;                                                                           \
    }
PYPOSENC_WRAPPERS_(rope_style, posenc_rope_style)
PYPOSENC_WRAPPERS_(rope_scaling_type, posenc_rope_scaling_type)
PYPOSENC_WRAPPERS_(rope_multimodal, posenc_rope_multimodal)
PYPOSENC_WRAPPERS_(sinusoidal_layout, posenc_sinusoidal_layout)
PYPOSENC_WRAPPERS_(dtype, posenc_dtype)
#undef PYPOSENC_WRAPPERS_

/* The values of each list run from 0 without gaps (checked in pyposenc_names_init), so a
 * value is known when it is below the count. */
#define PYPOSENC_COUNT_(name, value, text) +1
static const name_kind kinds[] = {
    {"rope_style", rope_style_name, rope_style_from_name,
     0 POSENC_ROPE_STYLE_LIST(PYPOSENC_COUNT_)},
    {"rope_scaling_type", rope_scaling_type_name, rope_scaling_type_from_name,
     0 POSENC_ROPE_SCALING_TYPE_LIST(PYPOSENC_COUNT_)},
    {"rope_multimodal", rope_multimodal_name, rope_multimodal_from_name,
     0 POSENC_ROPE_MULTIMODAL_LIST(PYPOSENC_COUNT_)},
    {"sinusoidal_layout", sinusoidal_layout_name, sinusoidal_layout_from_name,
     0 POSENC_SINUSOIDAL_LAYOUT_LIST(PYPOSENC_COUNT_)},
    {"dtype", dtype_name, dtype_from_name, 0 POSENC_DTYPE_LIST(PYPOSENC_COUNT_)},
};
#undef PYPOSENC_COUNT_
#define KIND_COUNT ((int)(sizeof kinds / sizeof kinds[0]))

static const name_kind *find_kind(const char *kind)
{
    for (int i = 0; i < KIND_COUNT; i++) {
        if (strcmp(kinds[i].kind, kind) == 0) {
            return &kinds[i];
        }
    }
    PyErr_Format(PyExc_ValueError, "no list of names is called '%s'", kind);
    return NULL;
}

int pyposenc_name_value(const char *kind_name, PyObject *value, const char *what, int *out)
{
    const name_kind *kind = find_kind(kind_name);
    if (!kind) {
        return -1;
    }
    if (PyLong_Check(value)) {
        long number = PyLong_AsLong(value);
        if (number < 0 || number >= kind->count) {
            PyErr_Clear(); /* an int past long: reported as -1, out of range all the same */
            pyposenc_raisef(POSENC_INVALID_ARGUMENT, "%s: %ld is not a value of %s (0 to %d)",
                            what, number, kind->kind, kind->count - 1);
            return -1;
        }
        *out = (int)number;
        return 0;
    }
    const char *text = PyUnicode_Check(value) ? PyUnicode_AsUTF8AndSize(value, NULL) : NULL;
    if (!text) {
        PyErr_Clear();
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "%s: a name is expected", what);
        return -1;
    }
    if (kind->from_name(text, out) != POSENC_OK) {
        /* The library's message, "rope_style: 'x' is not one of neox, gptj", with the
         * argument's own name in front instead of the list's. */
        const char *message = posenc_thread_last_error();
        const char *rest = strchr(message, ':');
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "%s%s", what, rest ? rest : ": unknown name");
        return -1;
    }
    return 0;
}

/* _posenc.name_value(kind, value, what): the value of a name (or an int checked against the
 * list), or posenc.InvalidArgument whose message starts with `what`. */
static PyObject *name_value(PyObject *self, PyObject *args)
{
    (void)self;
    const char *kind = NULL, *what = NULL;
    PyObject *value = NULL;
    if (!PyArg_ParseTuple(args, "sOs", &kind, &value, &what)) {
        return NULL;
    }
    int number = 0;
    if (pyposenc_name_value(kind, value, what, &number) < 0) {
        return NULL;
    }
    return PyLong_FromLong(number);
}

/* _posenc.canonical_name(kind, text): the canonical spelling of a name, or None. */
static PyObject *canonical_name(PyObject *self, PyObject *args)
{
    (void)self;
    const char *kind_name = NULL, *text = NULL;
    if (!PyArg_ParseTuple(args, "ss", &kind_name, &text)) {
        return NULL;
    }
    const name_kind *kind = find_kind(kind_name);
    if (!kind) {
        return NULL;
    }
    int value = 0;
    if (kind->from_name(text, &value) != POSENC_OK) {
        Py_RETURN_NONE;
    }
    return PyUnicode_FromString(kind->name(value));
}

static PyMethodDef name_methods[] = {
    {"name_value", name_value, METH_VARARGS,
     "name_value(kind, value, what) -> int: the value of a name of one of the library's lists\n"
     "(underscores or hyphens, any case), or an int checked against it; InvalidArgument\n"
     "naming `what` otherwise."},
    {"canonical_name", canonical_name, METH_VARARGS,
     "canonical_name(kind, text) -> str or None: the canonical spelling of a name."},
    {NULL, NULL, 0, NULL},
};

int pyposenc_names_init(PyObject *module)
{
    PyObject *names = PyDict_New();
    if (!names) {
        return -1;
    }
    for (int i = 0; i < KIND_COUNT; i++) {
        PyObject *tuple = PyTuple_New(kinds[i].count);
        if (!tuple) {
            Py_DECREF(names);
            return -1;
        }
        for (int value = 0; value < kinds[i].count; value++) {
            const char *name = kinds[i].name(value);
            PyObject *text = PyUnicode_FromString(name);
            if (!text || strcmp(name, "unknown") == 0) {
                Py_XDECREF(text);
                Py_DECREF(tuple);
                Py_DECREF(names);
                if (!PyErr_Occurred()) {
                    PyErr_Format(PyExc_SystemError, "%s: the values do not run from 0",
                                 kinds[i].kind);
                }
                return -1;
            }
            PyTuple_SetItem(tuple, value, text);
        }
        int rc = PyDict_SetItemString(names, kinds[i].kind, tuple);
        Py_DECREF(tuple);
        if (rc < 0) {
            Py_DECREF(names);
            return -1;
        }
    }
    if (PyModule_AddObject(module, "NAMES", names) < 0) {
        Py_DECREF(names);
        return -1;
    }
    return PyModule_AddFunctions(module, name_methods);
}
