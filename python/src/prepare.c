/* SPDX-License-Identifier: MIT */
/* Context.prepare: posenc_prepare for RoPE and sinusoidal calls described by the keyword
 * arguments posenc.rope and posenc.sinusoidal take, the Python layer converting them first
 * (and nothing more: the call is made here, on the lists it returns). */
#include "pyposenc.h"

#include <stdlib.h>

static PyObject *convert_hook; /* posenc._prepare_arguments, given at import */

PyObject *pyposenc_set_prepare_hook(PyObject *module, PyObject *function)
{
    if (!PyCallable_Check(function)) {
        PyErr_SetString(PyExc_TypeError, "_set_prepare_hook: a callable is expected");
        return NULL;
    }
    PyObject *previous = convert_hook;
    convert_hook = Py_NewRef(function);
    Py_XDECREF(previous);
    Py_RETURN_NONE;
}

static PyObject *prepare_lists(pyposenc_context *self, PyObject *ropes, PyObject *sinusoidals);

PyObject *pyposenc_context_prepare(PyObject *context, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"rope", "sinusoidal", NULL};
    PyObject *rope = Py_None, *sinusoidal = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OO:prepare", keywords, &rope,
                                     &sinusoidal)) {
        return NULL;
    }
    if (!convert_hook) {
        PyErr_SetString(PyExc_RuntimeError, "Context.prepare: the posenc package is not loaded");
        return NULL;
    }
    PyObject *lists = PyObject_CallFunctionObjArgs(convert_hook, rope, sinusoidal, NULL);
    if (!lists) {
        return NULL;
    }
    PyObject *result = NULL;
    pyposenc_context *self;
    if (!PyTuple_Check(lists) || PyTuple_Size(lists) != 2 ||
        !PyList_Check(PyTuple_GetItem(lists, 0)) || !PyList_Check(PyTuple_GetItem(lists, 1))) {
        PyErr_SetString(PyExc_TypeError,
                        "Context.prepare: the converter gave no (ropes, sinusoidals) lists");
    } else if ((self = pyposenc_context_check(context))) {
        result = prepare_lists(self, PyTuple_GetItem(lists, 0), PyTuple_GetItem(lists, 1));
    }
    Py_DECREF(lists);
    return result;
}

/* Each dict of `list` parsed into `parsed` (count of them done so far in *done); the first
 * fault raised again with its place, "rope[1]." */
static int parse_list(PyObject *list, const char *kind, void *parsed, size_t size,
                      Py_ssize_t *done)
{
    PyObject *empty = PyTuple_New(0);
    if (!empty) {
        return -1;
    }
    Py_ssize_t n = PyList_Size(list);
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        PyObject *item = PyList_GetItem(list, i);
        void *slot = (char *)parsed + (size_t)i * size;
        if (!PyDict_Check(item)) {
            pyposenc_raisef(POSENC_INVALID_ARGUMENT, "%s[%zd]: a dict of keyword arguments is "
                            "expected", kind, i);
            rc = -1;
        } else if (kind[0] == 'r') {
            rc = pyposenc_rope_args_parse(empty, item, slot);
        } else {
            rc = pyposenc_sinusoidal_args_parse(empty, item, slot);
        }
        if (rc < 0) {
            char place[48];
            PyOS_snprintf(place, sizeof place, "%s[%zd].", kind, i);
            pyposenc_error_prefix(place);
        } else {
            *done = i + 1;
        }
    }
    Py_DECREF(empty);
    return rc;
}

PyObject *pyposenc_prepare_resolved(PyObject *module, PyObject *args)
{
    PyObject *context_object, *ropes, *sinusoidals;
    if (!PyArg_ParseTuple(args, "OO!O!:_prepare_resolved", &context_object, &PyList_Type,
                          &ropes, &PyList_Type, &sinusoidals)) {
        return NULL;
    }
    pyposenc_context *self = pyposenc_context_check(context_object);
    return self ? prepare_lists(self, ropes, sinusoidals) : NULL;
}

/* posenc_prepare on `self` for two lists of keyword dicts (_rope_resolved's and
 * _sinusoidal_resolved's). */
static PyObject *prepare_lists(pyposenc_context *self, PyObject *ropes, PyObject *sinusoidals)
{
    Py_ssize_t rope_count = PyList_Size(ropes);
    Py_ssize_t sinusoidal_count = PyList_Size(sinusoidals);
    pyposenc_rope_args *rope_args = calloc((size_t)rope_count + 1, sizeof *rope_args);
    pyposenc_sinusoidal_args *sinusoidal_args =
        calloc((size_t)sinusoidal_count + 1, sizeof *sinusoidal_args);
    posenc_rope_desc *rope_descs = calloc((size_t)rope_count + 1, sizeof *rope_descs);
    posenc_sinusoidal_desc *sinusoidal_descs =
        calloc((size_t)sinusoidal_count + 1, sizeof *sinusoidal_descs);
    Py_ssize_t ropes_done = 0, sinusoidals_done = 0;
    PyObject *result = NULL;
    if (!rope_args || !sinusoidal_args || !rope_descs || !sinusoidal_descs) {
        PyErr_NoMemory();
        goto done;
    }
    if (parse_list(ropes, "rope", rope_args, sizeof *rope_args, &ropes_done) < 0 ||
        parse_list(sinusoidals, "sinusoidal", sinusoidal_args, sizeof *sinusoidal_args,
                   &sinusoidals_done) < 0) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < rope_count; i++) {
        rope_descs[i] = rope_args[i].desc;
    }
    for (Py_ssize_t i = 0; i < sinusoidal_count; i++) {
        sinusoidal_descs[i] = sinusoidal_args[i].desc;
    }
    posenc_prepare_desc desc = {
        .rope = rope_count ? rope_descs : NULL,
        .rope_count = (size_t)rope_count,
        .sinusoidal = sinusoidal_count ? sinusoidal_descs : NULL,
        .sinusoidal_count = (size_t)sinusoidal_count,
    };
    posenc_status status;
    char message[1024] = "";
    /* Building kernels takes milliseconds: the GIL is released, the context held. */
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    if (!self->context) {
        status = POSENC_INVALID_ARGUMENT;
        PyOS_snprintf(message, sizeof message, "context: the Context is closed");
    } else {
        status = posenc_prepare(self->context, &desc);
        if (status != POSENC_OK) {
            PyOS_snprintf(message, sizeof message, "%s",
                          posenc_context_last_error(self->context));
        }
    }
    PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
    if (status != POSENC_OK) {
        pyposenc_raise(status, message);
    } else {
        result = Py_NewRef(Py_None);
    }
done:
    for (Py_ssize_t i = 0; rope_args && i < ropes_done; i++) {
        pyposenc_rope_args_free(&rope_args[i]);
    }
    for (Py_ssize_t i = 0; sinusoidal_args && i < sinusoidals_done; i++) {
        pyposenc_sinusoidal_args_free(&sinusoidal_args[i]);
    }
    free(rope_args);
    free(sinusoidal_args);
    free(rope_descs);
    free(sinusoidal_descs);
    return result;
}
