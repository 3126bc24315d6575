/* SPDX-License-Identifier: MIT */
/* Objects with __dlpack__ (torch CPU tensors, jax and others without the buffer protocol) as
 * posenc tensor views: the capsule is taken over ("used_dltensor") and its deleter run at
 * release, as the DLPack spec asks of a consumer. */
#include "pyposenc.h"

#include "dlpack.h"

#include <string.h>

static posenc_dtype dl_dtype(pyposenc_dl_dtype type, enum pyposenc_kind kind)
{
    if (type.lanes != 1) {
        return POSENC_DTYPE_DEFAULT;
    }
    if (type.code == PYPOSENC_DL_FLOAT && type.bits == 32) {
        return POSENC_DTYPE_F32;
    }
    if (kind == PYPOSENC_DATA) {
        if (type.code == PYPOSENC_DL_FLOAT && type.bits == 16) {
            return POSENC_DTYPE_F16;
        }
        if (type.code == PYPOSENC_DL_BFLOAT && type.bits == 16) {
            return POSENC_DTYPE_BF16;
        }
    } else if (type.code == PYPOSENC_DL_INT && type.bits == 32) {
        return POSENC_DTYPE_I32;
    } else if (kind == PYPOSENC_INDICES && type.code == PYPOSENC_DL_INT && type.bits == 64) {
        return PYPOSENC_DTYPE_I64;
    }
    return POSENC_DTYPE_DEFAULT;
}

void pyposenc_dlpack_release(pyposenc_view *view)
{
    if (view->managed) {
        if (view->managed->deleter) {
            view->managed->deleter(view->managed);
        }
        view->managed = NULL;
    }
    Py_CLEAR(view->capsule);
}

int pyposenc_dlpack_get(PyObject *object, const char *name, enum pyposenc_kind kind,
                        pyposenc_view *view, posenc_tensor *tensor)
{
    PyObject *method = PyObject_GetAttrString(object, "__dlpack__");
    if (!method) {
        PyErr_Clear();
        pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                        "%s: the object does not expose its memory (buffer protocol or "
                        "__dlpack__); pass a numpy array",
                        name);
        return PYPOSENC_NOT_PLAIN;
    }
    PyObject *capsule = PyObject_CallNoArgs(method);
    Py_DECREF(method);
    if (!capsule || !PyCapsule_IsValid(capsule, "dltensor")) {
        /* torch refuses a tensor that requires grad, numpy a read-only array: the Python
         * layer's conversions or its error then apply. */
        PyErr_Clear();
        Py_XDECREF(capsule);
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "%s: __dlpack__() gave no DLPack tensor",
                        name);
        return PYPOSENC_NOT_PLAIN;
    }
    pyposenc_dl_managed *managed = PyCapsule_GetPointer(capsule, "dltensor");
    /* Ours from here: renamed so that the capsule's destructor leaves it to us. */
    if (!managed || PyCapsule_SetName(capsule, "used_dltensor") < 0) {
        PyErr_Clear();
        Py_DECREF(capsule);
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "%s: an unreadable DLPack capsule", name);
        return PYPOSENC_NOT_PLAIN;
    }
    view->capsule = capsule;
    view->managed = managed;
    const pyposenc_dl_tensor *dl = &managed->dl_tensor;
    if (dl->device.device_type != PYPOSENC_DL_CPU) {
        pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                        "%s: a DLPack tensor on device type %d; only CPU memory (kDLCPU) is "
                        "accepted",
                        name, dl->device.device_type);
        pyposenc_dlpack_release(view);
        return PYPOSENC_NOT_PLAIN;
    }
    posenc_dtype dtype = dl_dtype(dl->dtype, kind);
    if (dtype == POSENC_DTYPE_DEFAULT) {
        pyposenc_raisef(POSENC_INVALID_DTYPE,
                        "%s: DLPack type code %u, %u bits, %u lanes is not %s", name,
                        dl->dtype.code, dl->dtype.bits, dl->dtype.lanes,
                        kind == PYPOSENC_DATA      ? "float32, float16 or bfloat16"
                        : kind == PYPOSENC_INDICES ? "int32, int64 or float32"
                                                   : "int32 or float32");
        pyposenc_dlpack_release(view);
        return PYPOSENC_NOT_PLAIN;
    }
    int64_t itemsize = dl->dtype.bits / 8;
    int64_t strides[POSENC_MAX_DIMS] = {0};
    if (dl->ndim >= 1 && dl->ndim <= POSENC_MAX_DIMS && dl->strides) {
        for (int d = 0; d < dl->ndim; d++) {
            strides[d] = dl->strides[d] * itemsize; /* DLPack counts elements, posenc bytes */
        }
    }
    if (pyposenc_tensor_fill(name, dtype, (char *)dl->data + dl->byte_offset, dl->ndim,
                             dl->shape, dl->strides ? strides : NULL, itemsize, tensor) < 0) {
        pyposenc_dlpack_release(view);
        memset(tensor, 0, sizeof *tensor);
        return -1;
    }
    return 0;
}
