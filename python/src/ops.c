/* SPDX-License-Identifier: MIT */
/* posenc._posenc.rope and .sinusoidal: keyword arguments mirroring the C descriptors, arrays
 * as tensor views with no copy, the work done with the GIL released. */
#include "pyposenc.h"

#include <limits.h>
#include <string.h>

/* At most this many elements in q and k together, rope_plain keeps the GIL: the work (about
 * 2 us at this size on one core) then costs no more than dropping and taking back the GIL,
 * as numpy keeps it for its small loops. */
#define SMALL_CALL_ELEMENTS 16384

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

int pyposenc_run_rope(pyposenc_context *self, const posenc_rope_desc *desc)
{
    return run(self, desc, NULL, 0);
}

/* [b, h, t, d] or [h, t, d] to posenc's [b, t, h, d] / [t, h, d], by strides. */
static void heads_first(posenc_tensor *tensor)
{
    if (tensor->ndim == 4) {
        pyposenc_tensor_swap(tensor, 1, 2);
    } else if (tensor->ndim == 3) {
        pyposenc_tensor_swap(tensor, 0, 1);
    }
}

static int parse_section(PyObject *object, uint32_t section[3])
{
    if (object == Py_None) {
        return 0;
    }
    Py_ssize_t n = PySequence_Check(object) ? PySequence_Size(object) : -1;
    if (n != 3) {
        PyErr_Clear();
        pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                        "mrope_section: three frequency counts (t, h, w) are expected");
        return -1;
    }
    for (Py_ssize_t i = 0; i < 3; i++) {
        PyObject *item = PySequence_GetItem(object, i);
        long v = item && PyLong_Check(item) ? PyLong_AsLong(item) : -1;
        Py_XDECREF(item);
        if (v < 0 || v > (long)UINT32_MAX) {
            PyErr_Clear();
            pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                            "mrope_section[%zd]: a non-negative integer is expected", i);
            return -1;
        }
        section[i] = (uint32_t)v;
    }
    return 0;
}

/* The arrays of one rope call as views, then the call itself. None leaves a tensor absent. */
static PyObject *rope_on_buffers(pyposenc_context *self, posenc_rope_desc *desc, PyObject *q,
                                 PyObject *k, PyObject *q_out, PyObject *k_out,
                                 PyObject *positions, int bf16, int swap)
{
    pyposenc_view views[5] = {{.held = 0}};
    PyObject *result = NULL;
    int writes_q = q_out == Py_None;
    int writes_k = k_out == Py_None;
    if (pyposenc_view_get(q, "q", PYPOSENC_DATA, writes_q, bf16, &views[0], &desc->q) < 0 ||
        pyposenc_view_get(q_out, "q_out", PYPOSENC_DATA, 1, bf16, &views[1], &desc->q_out) < 0 ||
        pyposenc_view_get(k, "k", PYPOSENC_DATA, writes_k, bf16, &views[2], &desc->k) < 0 ||
        pyposenc_view_get(k_out, "k_out", PYPOSENC_DATA, 1, bf16, &views[3], &desc->k_out) < 0 ||
        pyposenc_view_get(positions, "positions", PYPOSENC_POSITIONS, 0, 0, &views[4],
                          &desc->positions) < 0) {
        goto done;
    }
    if (k == Py_None && k_out != Py_None) {
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "k_out: given without k");
        goto done;
    }
    if (swap) {
        heads_first(&desc->q);
        heads_first(&desc->q_out);
        heads_first(&desc->k);
        heads_first(&desc->k_out);
    }
    if (run(self, desc, NULL, 0) == 0) {
        result = Py_NewRef(Py_None);
    }
done:
    for (int i = 0; i < 5; i++) {
        pyposenc_view_release(&views[i]);
    }
    return result;
}

PyObject *pyposenc_rope(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"context", "q", "k", "q_out", "k_out", "positions", "offset",
                               "theta", "style", "rotary_dim", "inverse", "attention_factor",
                               "scaling", "multimodal", "mrope_section", "layout", "bf16", NULL};
    PyObject *context_object, *q, *k = Py_None, *q_out = Py_None, *k_out = Py_None;
    PyObject *positions = Py_None, *scaling_object = Py_None, *section_object = Py_None;
    int offset = 0, style = 0, inverse = 0, multimodal = 0, bf16 = 0;
    unsigned int rotary_dim = 0;
    double theta = 0.0, attention_factor = 0.0;
    const char *layout = "bthd";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OOOOidiIpdOiOsp", keywords,
                                     &context_object, &q, &k, &q_out, &k_out, &positions, &offset,
                                     &theta, &style, &rotary_dim, &inverse, &attention_factor,
                                     &scaling_object, &multimodal, &section_object, &layout,
                                     &bf16)) {
        return NULL;
    }
    pyposenc_context *self = pyposenc_context_check(context_object);
    if (!self) {
        return NULL;
    }
    int swap = 0;
    if (strcmp(layout, "bhtd") == 0) {
        swap = 1;
    } else if (strcmp(layout, "bthd") != 0) {
        return pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                               "layout: '%s' is not 'bthd' or 'bhtd'", layout);
    }
    posenc_rope_desc desc = {
        .position_offset = offset,
        .rotary_dim = rotary_dim,
        .style = (posenc_rope_style)style,
        .theta = theta,
        .attention_factor = attention_factor,
        .inverse = inverse != 0,
        .multimodal = (posenc_rope_multimodal)multimodal,
    };
    if (parse_section(section_object, desc.mrope_section) < 0) {
        return NULL;
    }
    pyposenc_scaling_storage storage;
    if (pyposenc_scaling_parse(scaling_object, &desc.scaling, &storage) < 0) {
        return NULL;
    }
    PyObject *result = rope_on_buffers(self, &desc, q, k, q_out, k_out, positions, bf16, swap);
    pyposenc_scaling_free(&storage);
    return result;
}

void pyposenc_rope_plain_desc(posenc_rope_desc *desc, int offset)
{
    /* What posenc.rope sends for the defaults: theta 10000, the rest zero. */
    *desc = (posenc_rope_desc){.position_offset = offset, .theta = 10000.0};
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
    } else if (got == 0 &&
               run(self, &desc, NULL,
                   elements(&desc.q) + elements(&desc.k) <= SMALL_CALL_ELEMENTS) == 0) {
        done = 1;
    }
    pyposenc_view_release(&views[0]);
    pyposenc_view_release(&views[1]);
    return done;
}

PyObject *pyposenc_rope_plain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "rope_plain: 4 arguments expected, %zd given", nargs);
        return NULL;
    }
    int done = pyposenc_rope_plain_run(args[0], args[1], args[2], args[3]);
    if (done < 0) {
        return NULL;
    }
    return Py_NewRef(done ? Py_None : Py_NotImplemented);
}

PyObject *pyposenc_sinusoidal(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"context", "out", "x", "positions", "offset", "layout", "base",
                               "freq_shift", "position_scale", "input_scale", "output_scale",
                               "bf16", NULL};
    PyObject *context_object, *out, *x = Py_None, *positions = Py_None;
    int offset = 0, layout = 0, bf16 = 0;
    double base = 0.0, freq_shift = 0.0, position_scale = 0.0, input_scale = 0.0;
    double output_scale = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OOiidddddp", keywords, &context_object,
                                     &out, &x, &positions, &offset, &layout, &base, &freq_shift,
                                     &position_scale, &input_scale, &output_scale, &bf16)) {
        return NULL;
    }
    pyposenc_context *self = pyposenc_context_check(context_object);
    if (!self) {
        return NULL;
    }
    posenc_sinusoidal_desc desc = {
        .position_offset = offset,
        .layout = (posenc_sinusoidal_layout)layout,
        .base = base,
        .freq_shift = freq_shift,
        .position_scale = position_scale,
        .input_scale = input_scale,
        .output_scale = output_scale,
    };
    pyposenc_view views[3] = {{.held = 0}};
    PyObject *result = NULL;
    if (pyposenc_view_get(out, "out", PYPOSENC_DATA, 1, bf16, &views[0], &desc.out) < 0 ||
        pyposenc_view_get(x, "x", PYPOSENC_DATA, 0, bf16, &views[1], &desc.x) < 0 ||
        pyposenc_view_get(positions, "positions", PYPOSENC_POSITIONS, 0, 0, &views[2],
                          &desc.positions) < 0) {
        goto done;
    }
    if (run(self, NULL, &desc, 0) == 0) {
        result = Py_NewRef(Py_None);
    }
done:
    for (int i = 0; i < 3; i++) {
        pyposenc_view_release(&views[i]);
    }
    return result;
}
