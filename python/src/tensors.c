/* SPDX-License-Identifier: MIT */
/* Python buffers (numpy arrays, memoryviews) as posenc tensor views: format to dtype, byte
 * strides as they are, with the checks posenc cannot make on a bare pointer (read-only memory,
 * negative or broadcast strides). */
#include "pyposenc.h"

#include <string.h>

static PyObject *torch_name(void)
{
    static PyObject *name;
    if (!name) {
        name = PyUnicode_InternFromString("torch");
    }
    return name;
}

/* The element type a buffer format names: native or little-endian, as posenc reads memory. */
static posenc_dtype format_dtype(const char *format, Py_ssize_t itemsize, enum pyposenc_kind kind,
                                 int bf16)
{
    if (!format) {
        format = "B";
    }
    if (*format == '@' || *format == '=' || *format == '<') {
        format++;
    }
    if (format[0] == '\0' || format[1] != '\0') {
        return POSENC_DTYPE_DEFAULT;
    }
    char c = format[0];
    if (c == 'f' && itemsize == 4) {
        return POSENC_DTYPE_F32;
    }
    if (kind == PYPOSENC_DATA) {
        if (c == 'e' && itemsize == 2) {
            return POSENC_DTYPE_F16;
        }
        if (bf16 && (c == 'H' || c == 'h') && itemsize == 2) {
            return POSENC_DTYPE_BF16;
        }
    } else if ((c == 'i' || c == 'l') && itemsize == 4) {
        return POSENC_DTYPE_I32;
    } else if (kind == PYPOSENC_INDICES && (c == 'q' || c == 'l') && itemsize == 8) {
        return PYPOSENC_DTYPE_I64;
    }
    return POSENC_DTYPE_DEFAULT;
}

void pyposenc_view_release(pyposenc_view *view)
{
    pyposenc_dlpack_release(view);
    if (view->held) {
        PyBuffer_Release(&view->buffer);
        view->held = 0;
    }
}

void pyposenc_tensor_swap(posenc_tensor *tensor, uint32_t a, uint32_t b)
{
    int64_t shape = tensor->shape[a];
    int64_t stride = tensor->strides[a];
    tensor->shape[a] = tensor->shape[b];
    tensor->strides[a] = tensor->strides[b];
    tensor->shape[b] = shape;
    tensor->strides[b] = stride;
}

int pyposenc_tensor_fill(const char *name, posenc_dtype dtype, void *host, int ndim,
                         const int64_t *shape, const int64_t *strides, int64_t itemsize,
                         posenc_tensor *tensor)
{
    if (ndim < 1 || ndim > POSENC_MAX_DIMS) {
        pyposenc_raisef(POSENC_INVALID_SHAPE, "%s: %d dims; 1 to %d are accepted", name, ndim,
                        POSENC_MAX_DIMS);
        return -1;
    }
    tensor->host = host;
    tensor->dtype = dtype;
    tensor->ndim = (uint32_t)ndim;
    int64_t packed = itemsize;
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t size = shape[d];
        int64_t stride = strides ? strides[d] : packed;
        if (size == 0) {
            pyposenc_raisef(POSENC_INVALID_SHAPE, "%s: dim %d has size 0", name, d);
            return -1;
        }
        if (size == 1) {
            /* Never stepped along: any stride fits, and numpy's may be 0 or anything. */
            stride = packed;
        } else if (stride < 0) {
            pyposenc_raisef(POSENC_INVALID_LAYOUT,
                            "%s: dim %d has a negative stride (%lld bytes); posenc takes "
                            "positive strides: pass a copy (numpy.ascontiguousarray)",
                            name, d, (long long)stride);
            return -1;
        } else if (stride == 0) {
            pyposenc_raisef(POSENC_INVALID_LAYOUT,
                            "%s: dim %d has stride 0 (a broadcast view); pass a copy", name, d);
            return -1;
        }
        tensor->shape[d] = size;
        tensor->strides[d] = stride;
        packed = stride * size;
    }
    return 0;
}

/* torch.Tensor once torch is imported (never imported from here), else NULL; and
 * torch.bfloat16 beside it. */
static PyObject *torch_bfloat16;

static PyObject *torch_tensor_type(void)
{
    static PyObject *type;
    if (!type) {
        PyObject *torch = PyImport_GetModule(torch_name());
        if (torch) {
            torch_bfloat16 = PyObject_GetAttrString(torch, "bfloat16");
            type = torch_bfloat16 ? PyObject_GetAttrString(torch, "Tensor") : NULL;
            Py_DECREF(torch);
        }
        PyErr_Clear();
    }
    return type;
}

/* A torch tensor through tensor.numpy(), which shares its memory and refuses what posenc must
 * not write behind torch's back (a tensor that requires grad, a pending negation or
 * conjugation, another device): such a tensor is left to the Python layer, which names the
 * fault. A dtype numpy lacks (bfloat16) goes through DLPack, which keeps no such bits, so
 * those are checked here first. */
static int torch_view_get(PyObject *object, const char *name, enum pyposenc_kind kind,
                          int writable, int bf16, pyposenc_view *view, posenc_tensor *tensor)
{
    /* numpy() refusing bfloat16 costs 10 us (torch formats the error): ask the dtype first */
    PyObject *dtype = PyObject_GetAttrString(object, "dtype");
    int other_dtype = dtype == torch_bfloat16;
    Py_XDECREF(dtype);
    PyObject *array = other_dtype ? NULL : PyObject_CallMethod(object, "numpy", NULL);
    if (array) {
        int rc = pyposenc_view_get(array, name, kind, writable, bf16, view, tensor);
        Py_DECREF(array); /* the buffer, if held, keeps the array */
        return rc;
    }
    other_dtype = other_dtype || PyErr_ExceptionMatches(PyExc_TypeError);
    PyErr_Clear();
    for (int i = 0; other_dtype && i < 2; i++) {
        PyObject *bit = PyObject_CallMethod(object, i ? "is_conj" : "is_neg", NULL);
        int set = bit ? PyObject_IsTrue(bit) : -1;
        Py_XDECREF(bit);
        if (set != 0) {
            PyErr_Clear();
            other_dtype = 0;
        }
    }
    if (!other_dtype) {
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "%s: a torch tensor posenc cannot write where "
                        "it lies", name);
        return PYPOSENC_NOT_PLAIN;
    }
    return pyposenc_dlpack_get(object, name, kind, view, tensor);
}

int pyposenc_view_get(PyObject *object, const char *name, enum pyposenc_kind kind,
                      int writable, int bf16, pyposenc_view *view, posenc_tensor *tensor)
{
    memset(tensor, 0, sizeof *tensor);
    view->held = 0;
    view->capsule = NULL;
    view->managed = NULL;
    if (object == Py_None) {
        return 0;
    }
    if (!PyObject_CheckBuffer(object)) {
        PyObject *tensor_type = torch_tensor_type();
        if (tensor_type && PyObject_TypeCheck(object, (PyTypeObject *)tensor_type)) {
            return torch_view_get(object, name, kind, writable, bf16, view, tensor);
        }
        return pyposenc_dlpack_get(object, name, kind, view, tensor);
    }
    /* Asked without PyBUF_WRITABLE, so that read-only memory gets posenc's own error naming
     * the argument rather than a BufferError. */
    if (PyObject_GetBuffer(object, &view->buffer, PyBUF_STRIDES | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                        "%s: the object does not expose its memory (buffer protocol); pass a "
                        "numpy array",
                        name);
        return PYPOSENC_NOT_PLAIN;
    }
    view->held = 1;
    Py_buffer *b = &view->buffer;
    posenc_dtype dtype = format_dtype(b->format, b->itemsize, kind, bf16);
    if (dtype == POSENC_DTYPE_DEFAULT) {
        pyposenc_raisef(POSENC_INVALID_DTYPE, "%s: element format '%s' (%zd bytes) is not %s",
                        name, b->format ? b->format : "B", b->itemsize,
                        kind == PYPOSENC_DATA      ? "float32, float16 or bfloat16"
                        : kind == PYPOSENC_INDICES ? "int32, int64 or float32"
                                                   : "int32 or float32");
        pyposenc_view_release(view);
        memset(tensor, 0, sizeof *tensor);
        return PYPOSENC_NOT_PLAIN;
    }
    if (writable && b->readonly) {
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "%s: the array is read-only", name);
        goto fail;
    }
    if (b->ndim < 1 || b->ndim > POSENC_MAX_DIMS) {
        pyposenc_raisef(POSENC_INVALID_SHAPE, "%s: %d dims; 1 to %d are accepted", name, b->ndim,
                        POSENC_MAX_DIMS);
        goto fail;
    }
    int64_t shape[POSENC_MAX_DIMS], strides[POSENC_MAX_DIMS];
    for (int d = 0; d < b->ndim; d++) {
        shape[d] = b->shape[d];
        strides[d] = b->strides ? b->strides[d] : 0;
    }
    if (pyposenc_tensor_fill(name, dtype, b->buf, b->ndim, shape, b->strides ? strides : NULL,
                             b->itemsize, tensor) < 0) {
        goto fail;
    }
    return 0;
fail:
    pyposenc_view_release(view);
    memset(tensor, 0, sizeof *tensor);
    return -1;
}
