/* SPDX-License-Identifier: MIT */
/* posenc._posenc._rope_resolved and ._sinusoidal_resolved (their arguments read by
 * op_args.c) and _rope_plain, run on a context's lock with the GIL released. */
#include "pyposenc.h"

#include <limits.h>

/* posenc's status and the context's message of one call made on `self->context`, its lock
 * held. */
static posenc_status call_locked(pyposenc_context *self, const posenc_rope_desc *rope,
                                 const posenc_sinusoidal_desc *sinusoidal, char *message,
                                 size_t size)
{
    if (!self->context) {
        PyOS_snprintf(message, size, "context: the Context is closed");
        return POSENC_INVALID_ARGUMENT;
    }
    posenc_status status = rope ? posenc_rope(self->context, rope)
                                : posenc_sinusoidal(self->context, sinusoidal);
    if (status != POSENC_OK) {
        PyOS_snprintf(message, size, "%s", posenc_context_last_error(self->context));
    }
    return status;
}

/* Runs one operation on the context with the GIL released (or, for a small call when the
 * context is free at once, held); on failure raises the status's class with the context's
 * message, read on this thread right after the call. A small call never waits for the lock
 * with the GIL held: another thread's long call on the context would stall every thread. */
static int run(pyposenc_context *self, const posenc_rope_desc *rope,
               const posenc_sinusoidal_desc *sinusoidal, int small)
{
    posenc_status status;
    char message[1024];
    message[0] = '\0';
    if (small && PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
        status = call_locked(self, rope, sinusoidal, message, sizeof message);
        PyThread_release_lock(self->lock);
    } else {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(self->lock, WAIT_LOCK);
        status = call_locked(self, rope, sinusoidal, message, sizeof message);
        PyThread_release_lock(self->lock);
        Py_END_ALLOW_THREADS
    }
    if (status != POSENC_OK) {
        pyposenc_raise(status, message);
        return -1;
    }
    return 0;
}

static int64_t elements(const posenc_tensor *tensor)
{
    int64_t n = tensor->ndim ? 1 : 0;
    for (uint32_t d = 0; d < tensor->ndim; d++) {
        n *= tensor->shape[d];
    }
    return n;
}

int pyposenc_run_rope(pyposenc_context *self, const posenc_rope_desc *desc, int keep_gil)
{
    /* At most this many elements in q and k together, a call keeps the GIL: the work (about
     * 2 us at this size on one core) then costs no more than dropping and taking back the
     * GIL, as numpy keeps it for its small loops. */
    const int64_t small_call = 16384;
    return run(self, desc, NULL,
               keep_gil && elements(&desc->q) + elements(&desc->k) <= small_call);
}

/* (context, rest): the Context of args[0] and the other positional arguments. */
static pyposenc_context *split_context(PyObject *args, PyObject **rest)
{
    Py_ssize_t n = PyTuple_Size(args);
    if (n < 1) {
        PyErr_SetString(PyExc_TypeError, "a posenc.Context is expected as the first argument");
        return NULL;
    }
    pyposenc_context *self = pyposenc_context_check(PyTuple_GetItem(args, 0));
    if (!self) {
        return NULL;
    }
    *rest = PyTuple_GetSlice(args, 1, n);
    return *rest ? self : NULL;
}

int pyposenc_run_rope_resolved(pyposenc_context *self, PyObject *positional, PyObject *kwargs)
{
    pyposenc_rope_args parsed;
    if (pyposenc_rope_args_parse(positional, kwargs, &parsed) < 0) {
        return -1; /* the parse freed what it took */
    }
    int rc = run(self, &parsed.desc, NULL, 0);
    pyposenc_rope_args_free(&parsed);
    return rc;
}

PyObject *pyposenc_rope_resolved(PyObject *module, PyObject *args, PyObject *kwargs)
{
    PyObject *rest;
    pyposenc_context *self = split_context(args, &rest);
    if (!self) {
        return NULL;
    }
    int rc = pyposenc_run_rope_resolved(self, rest, kwargs);
    Py_DECREF(rest);
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}

void pyposenc_rope_plain_desc(posenc_rope_desc *desc, int offset)
{
    /* What posenc.rope sends for the defaults: every field zero (theta 0 is the library's
     * 10000). */
    *desc = (posenc_rope_desc){.position_offset = offset};
}

int pyposenc_rope_plain_run(PyObject *context, PyObject *q, PyObject *k, PyObject *offset)
{
    pyposenc_context *self = pyposenc_context_check(context);
    if (!self) {
        return -1;
    }
    long value = 0;
    if (offset) {
        int overflow = 0;
        value = PyLong_Check(offset) ? PyLong_AsLongAndOverflow(offset, &overflow) : 0;
        if (!PyLong_Check(offset) || overflow || value < INT_MIN || value > INT_MAX) {
            return 0;
        }
    }
    posenc_rope_desc desc;
    pyposenc_rope_plain_desc(&desc, (int)value);
    pyposenc_view views[2] = {{.held = 0}};
    int done = -1;
    int got = pyposenc_view_get(q, "q", PYPOSENC_DATA, 1, 0, &views[0], &desc.q);
    if (got == 0) {
        got = pyposenc_view_get(k, "k", PYPOSENC_DATA, 1, 0, &views[1], &desc.k);
    }
    if (got == PYPOSENC_NOT_PLAIN) {
        PyErr_Clear();
        done = 0;
    } else if (got == 0 && pyposenc_run_rope(self, &desc, 1) == 0) {
        done = 1;
    }
    pyposenc_view_release(&views[0]);
    pyposenc_view_release(&views[1]);
    return done;
}

PyObject *pyposenc_rope_plain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "_rope_plain: 4 arguments expected, %zd given", nargs);
        return NULL;
    }
    int done = pyposenc_rope_plain_run(args[0], args[1], args[2], args[3]);
    if (done < 0) {
        return NULL;
    }
    return Py_NewRef(done ? Py_None : Py_NotImplemented);
}

PyObject *pyposenc_sinusoidal_resolved(PyObject *module, PyObject *args, PyObject *kwargs)
{
    PyObject *rest;
    pyposenc_context *self = split_context(args, &rest);
    if (!self) {
        return NULL;
    }
    pyposenc_sinusoidal_args parsed;
    int rc = pyposenc_sinusoidal_args_parse(rest, kwargs, &parsed);
    Py_DECREF(rest);
    if (rc < 0) {
        return NULL;
    }
    rc = run(self, NULL, &parsed.desc, 0);
    pyposenc_sinusoidal_args_free(&parsed);
    return rc < 0 ? NULL : Py_NewRef(Py_None);
}
