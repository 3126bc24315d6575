/* SPDX-License-Identifier: MIT */
/* posenc.Error and its subclasses, generated from the library's status list: one class per
 * status (InvalidShape, Unsupported, ...) under one class per range (InputError for -1xx,
 * DeviceFailure for -2xx, HostError for -3xx), each instance carrying .status and .code. */
#include "pyposenc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PYPOSENC_STATUS_COUNT_(name, value, message) +1
enum { PYPOSENC_STATUS_COUNT = 0 POSENC_STATUS_LIST(PYPOSENC_STATUS_COUNT_) };
#undef PYPOSENC_STATUS_COUNT_

static const int status_values[] = {
#define PYPOSENC_STATUS_VALUE_(name, value, message) value,
    POSENC_STATUS_LIST(PYPOSENC_STATUS_VALUE_)
#undef PYPOSENC_STATUS_VALUE_
};
static const char *const status_names[] = {
#define PYPOSENC_STATUS_NAME_(name, value, message) #name,
    POSENC_STATUS_LIST(PYPOSENC_STATUS_NAME_)
#undef PYPOSENC_STATUS_NAME_
};

/* Kept for the life of the process: the module is single-phase and never unloaded. */
static PyObject *error_base;
static PyObject *range_classes[3];
static PyObject *status_classes[PYPOSENC_STATUS_COUNT];

/* "INVALID_ARGUMENT" -> "InvalidArgument", "IO_ERROR" -> "IoError". */
static void camel_case(const char *name, char *out, size_t size)
{
    size_t n = 0;
    int upper = 1;
    for (const char *c = name; *c && n + 1 < size; c++) {
        if (*c == '_') {
            upper = 1;
            continue;
        }
        out[n++] = (char)(upper ? *c : (*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c));
        upper = 0;
    }
    out[n] = '\0';
}

static int add_class(PyObject *module, const char *name, PyObject *bases, const char *doc,
                     PyObject **out)
{
    char qualified[96];
    snprintf(qualified, sizeof qualified, "posenc.%s", name);
    PyObject *cls = PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL);
    if (!cls) {
        return -1;
    }
    Py_INCREF(cls);
    if (PyModule_AddObject(module, name, cls) < 0) {
        Py_DECREF(cls);
        Py_DECREF(cls);
        return -1;
    }
    *out = cls;
    return 0;
}

int pyposenc_errors_init(PyObject *module)
{
    if (add_class(module, "Error", NULL,
                  "A posenc call failed. .status is the status name (\"POSENC_INVALID_SHAPE\"), "
                  ".code its value, str() the library's message naming the field at fault.",
                  &error_base) < 0) {
        return -1;
    }
    static const struct {
        const char *name;
        const char *doc;
    } ranges[3] = {
        {"InputError", "The caller's input is invalid (statuses -1xx)."},
        {"DeviceFailure", "A device or its runtime failed or is missing (statuses -2xx)."},
        {"HostError", "The host failed: memory, files, or an internal error (statuses -3xx)."},
    };
    PyObject *builtins[3] = {PyExc_ValueError, PyExc_RuntimeError, PyExc_RuntimeError};
    for (int r = 0; r < 3; r++) {
        PyObject *bases = PyTuple_Pack(2, error_base, builtins[r]);
        if (!bases) {
            return -1;
        }
        int rc = add_class(module, ranges[r].name, bases, ranges[r].doc, &range_classes[r]);
        Py_DECREF(bases);
        if (rc < 0) {
            return -1;
        }
    }
    for (int i = 0; i < PYPOSENC_STATUS_COUNT; i++) {
        int range = -status_values[i] / 100 - 1;
        if (range < 0 || range > 2) {
            continue; /* OK and TIMEOUT are not errors */
        }
        char name[64];
        camel_case(status_names[i], name, sizeof name);
        if (add_class(module, name, range_classes[range],
                      posenc_status_string((posenc_status)status_values[i]),
                      &status_classes[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* A new instance of the class of `status`, with .status and .code; NULL with an exception
 * set on failure. `*cls` is that class. */
static PyObject *make_error(posenc_status status, const char *message, PyObject **cls)
{
    *cls = error_base;
    for (int i = 0; i < PYPOSENC_STATUS_COUNT; i++) {
        if (status_values[i] == (int)status && status_classes[i]) {
            *cls = status_classes[i];
        }
    }
    if (!message || !message[0]) {
        message = posenc_status_string(status);
    }
    PyObject *error = PyObject_CallFunction(*cls, "s", message);
    if (!error) {
        return NULL;
    }
    PyObject *name = PyUnicode_FromString(posenc_status_name(status));
    PyObject *code = PyLong_FromLong((long)status);
    if (!name || !code || PyObject_SetAttrString(error, "status", name) < 0 ||
        PyObject_SetAttrString(error, "code", code) < 0) {
        Py_XDECREF(name);
        Py_XDECREF(code);
        Py_DECREF(error);
        return NULL;
    }
    Py_DECREF(name);
    Py_DECREF(code);
    return error;
}

void pyposenc_raise(posenc_status status, const char *message)
{
    PyObject *cls = NULL;
    PyObject *error = make_error(status, message, &cls);
    if (!error) {
        return;
    }
    PyErr_SetObject(cls, error);
    Py_DECREF(error);
}

PyObject *pyposenc_error_of(PyObject *self, PyObject *args)
{
    (void)self;
    const char *status = NULL, *message = NULL;
    if (!PyArg_ParseTuple(args, "ss", &status, &message)) {
        return NULL;
    }
    if (strncmp(status, "POSENC_", 7) == 0) {
        status += 7;
    }
    for (int i = 0; i < PYPOSENC_STATUS_COUNT; i++) {
        if (strcmp(status_names[i], status) == 0) {
            PyObject *cls = NULL;
            return make_error((posenc_status)status_values[i], message, &cls);
        }
    }
    PyErr_Format(PyExc_ValueError, "'%s' is not a posenc status", status);
    return NULL;
}

PyObject *pyposenc_raisef(posenc_status status, const char *format, ...)
{
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    pyposenc_raise(status, message);
    return NULL;
}

void pyposenc_error_prefix(const char *place)
{
    if (!PyErr_ExceptionMatches(error_base)) {
        return;
    }
    /* PyErr_Fetch: the stable ABI of 3.11 has no PyErr_GetRaisedException. */
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    PyObject *code = value ? PyObject_GetAttrString(value, "code") : NULL;
    PyObject *text = value ? PyObject_Str(value) : NULL;
    long status = code ? PyLong_AsLong(code) : -1;
    const char *message = text ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
    if (!message || (status == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        PyErr_Restore(type, value, traceback);
    } else {
        pyposenc_raisef((posenc_status)status, "%s%s", place, message);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
    }
    Py_XDECREF(code);
    Py_XDECREF(text);
}
