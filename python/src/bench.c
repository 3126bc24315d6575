/* SPDX-License-Identifier: MIT */
/* _bench_c_rope: the C cost of posenc.rope's common call, timed in C on the same buffers, so
 * that `python -m posenc bench` can report the Python overhead as Python time - C time. */
#include "pyposenc.h"

#include "support.h"

PyObject *pyposenc_bench_c_rope(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "_bench_c_rope: 5 arguments expected, %zd given", nargs);
        return NULL;
    }
    pyposenc_context *self = pyposenc_context_check(args[0]);
    if (!self) {
        return NULL;
    }
    int offset = PyLong_AsLong(args[3]);
    long calls = PyLong_AsLong(args[4]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (calls < 1) {
        return pyposenc_raisef(POSENC_INVALID_ARGUMENT, "calls: at least 1");
    }
    posenc_rope_desc desc;
    pyposenc_rope_plain_desc(&desc, offset);
    pyposenc_view views[2] = {{.held = 0}};
    PyObject *result = NULL;
    if (pyposenc_view_get(args[1], "q", PYPOSENC_DATA, 1, 0, &views[0], &desc.q) < 0 ||
        pyposenc_view_get(args[2], "k", PYPOSENC_DATA, 1, 0, &views[1], &desc.k) < 0) {
        goto done;
    }
    /* One call first, through the usual path: it checks the arguments and raises as rope
     * would, so that the timed loop below only repeats calls known to succeed. */
    if (pyposenc_run_rope(self, &desc, 0) < 0) {
        goto done;
    }
    posenc_status status = POSENC_OK;
    double seconds = 0.0;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    if (self->context) {
        double start = support_seconds_now();
        for (long i = 0; i < calls && status == POSENC_OK; i++) {
            status = posenc_rope(self->context, &desc);
        }
        seconds = (support_seconds_now() - start) / (double)calls;
    } else {
        status = POSENC_INVALID_ARGUMENT;
    }
    PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
    if (status != POSENC_OK) {
        pyposenc_raise(status, "the timed posenc_rope calls failed");
    } else {
        result = PyFloat_FromDouble(seconds);
    }
done:
    pyposenc_view_release(&views[0]);
    pyposenc_view_release(&views[1]);
    return result;
}
