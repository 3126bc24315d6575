/* SPDX-License-Identifier: MIT */
/* What the extension uses from CPython 3.10 and later, written out for the version-specific
 * builds of 3.9 and 3.10 (the abi3 module is built for 3.11, where all of it exists). */
#ifndef POSENC_PYTHON_COMPAT_H
#define POSENC_PYTHON_COMPAT_H

#include <Python.h>

#if PY_VERSION_HEX < 0x030A0000
/* Py_NewRef and Py_XNewRef arrived in 3.10 (as in pythoncapi-compat). */
static inline PyObject *pyposenc_compat_new_ref(PyObject *object)
{
    Py_INCREF(object);
    return object;
}
static inline PyObject *pyposenc_compat_xnew_ref(PyObject *object)
{
    Py_XINCREF(object);
    return object;
}
#define Py_NewRef(object) pyposenc_compat_new_ref((PyObject *)(object))
#define Py_XNewRef(object) pyposenc_compat_xnew_ref((PyObject *)(object))
#endif

#endif
