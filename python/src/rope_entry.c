/* SPDX-License-Identifier: MIT */
/* posenc.rope itself, and the default context it uses. The common call (q, k, offset,
 * context; every other option at its default) is done here in C; any other call goes, as it
 * came, to the Python layer's general path (posenc._rope_general). A decode step's work is
 * about half a microsecond, so a Python frame in front of it would cost as much again. */
#include "pyposenc.h"

static PyObject *general_path;     /* posenc._rope_general, given at import */
static PyObject *default_context;  /* made on first use, kept for the process */
static PyThread_type_lock default_lock;
static PyObject *name_k, *name_offset, *name_context;

PyObject *pyposenc_default_context(PyObject *module, PyObject *unused)
{
    if (default_context) {
        return Py_NewRef(default_context);
    }
    /* The first callers racing: one makes the Context (opening the device drops the GIL), the
     * others wait for it with the GIL released, then take the same one. */
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(default_lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
    if (!default_context) {
        default_context = PyObject_CallNoArgs(pyposenc_context_type());
    }
    PyThread_release_lock(default_lock);
    return Py_XNewRef(default_context);
}

PyObject *pyposenc_set_rope_general(PyObject *module, PyObject *function)
{
    if (!PyCallable_Check(function)) {
        PyErr_SetString(PyExc_TypeError, "_set_rope_general: a callable is expected");
        return NULL;
    }
    PyObject *previous = general_path;
    general_path = Py_NewRef(function);
    Py_XDECREF(previous);
    Py_RETURN_NONE;
}

static int is_name(PyObject *name, PyObject *interned)
{
    /* Keywords written at a call site are interned: identity is the usual answer. */
    return name == interned || PyUnicode_Compare(name, interned) == 0;
}

/* The call handed on as it came: positional arguments, then keywords. */
static PyObject *call_general(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!general_path) {
        PyErr_SetString(PyExc_RuntimeError, "posenc.rope: the posenc package is not loaded");
        return NULL;
    }
    PyObject *positional = PyTuple_New(nargs);
    PyObject *keywords = kwnames ? PyDict_New() : NULL;
    PyObject *result = NULL;
    if (!positional || (kwnames && !keywords)) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyTuple_SetItem(positional, i, Py_NewRef(args[i]));
    }
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        if (PyDict_SetItem(keywords, PyTuple_GetItem(kwnames, i), args[nargs + i]) < 0) {
            goto done;
        }
    }
    result = PyObject_Call(general_path, positional, keywords);
done:
    Py_XDECREF(positional);
    Py_XDECREF(keywords);
    return result;
}

PyObject *pyposenc_rope_entry(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    PyObject *k = nargs > 1 ? args[1] : Py_None;
    PyObject *offset = NULL;
    PyObject *context = Py_None;
    int plain = nargs == 1 || nargs == 2;
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    for (Py_ssize_t i = 0; plain && i < nkw; i++) {
        PyObject *name = PyTuple_GetItem(kwnames, i);
        PyObject *value = args[nargs + i];
        if (is_name(name, name_offset)) {
            offset = value;
        } else if (is_name(name, name_context)) {
            context = value;
        } else if (nargs == 1 && is_name(name, name_k)) {
            k = value;
        } else {
            plain = 0;
        }
    }
    if (plain) {
        PyObject *owned = NULL;
        if (context == Py_None) {
            context = default_context ? default_context
                                      : (owned = pyposenc_default_context(module, NULL));
            if (!context) {
                return NULL;
            }
        }
        int done = pyposenc_rope_plain_run(context, args[0], k, offset);
        Py_XDECREF(owned);
        if (done < 0) {
            return NULL;
        }
        if (done) {
            return k == Py_None ? Py_NewRef(args[0]) : PyTuple_Pack(2, args[0], k);
        }
    }
    return call_general(args, nargs, kwnames);
}

int pyposenc_rope_entry_init(PyObject *module)
{
    default_lock = PyThread_allocate_lock();
    if (!default_lock) {
        PyErr_NoMemory();
        return -1;
    }
    name_k = PyUnicode_InternFromString("k");
    name_offset = PyUnicode_InternFromString("offset");
    name_context = PyUnicode_InternFromString("context");
    return name_k && name_offset && name_context ? 0 : -1;
}
