/* SPDX-License-Identifier: MIT */
/* The posenc._posenc extension module: its function table, devices() and version(). The
 * Python layer (posenc/__init__.py) adds defaults, layouts and array allocation on top. */
#include "pyposenc.h"

#include <string.h>

static PyObject *devices(PyObject *module, PyObject *unused)
{
    uint32_t count = 0;
    posenc_status status = posenc_device_count(&count);
    if (status != POSENC_OK) {
        pyposenc_raise(status, posenc_thread_last_error());
        return NULL;
    }
    PyObject *list = PyList_New(0);
    for (uint32_t i = 0; list && i < count; i++) {
        posenc_device_info info;
        status = posenc_device_get(i, &info);
        if (status != POSENC_OK) {
            Py_DECREF(list);
            pyposenc_raise(status, posenc_thread_last_error());
            return NULL;
        }
        PyObject *dict = pyposenc_device_dict(&info);
        if (!dict || PyList_Append(list, dict) < 0) {
            Py_XDECREF(dict);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(dict);
    }
    return list;
}

static PyObject *version(PyObject *module, PyObject *unused)
{
    return PyUnicode_FromString(posenc_version());
}

static PyObject *backend_status(PyObject *module, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) {
        return NULL;
    }
    static const posenc_backend backends[] = {POSENC_BACKEND_CPU, POSENC_BACKEND_VULKAN,
                                              POSENC_BACKEND_OPENCL};
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        if (strcmp(name, posenc_backend_name(backends[i])) == 0) {
            const char *reason = NULL;
            posenc_status status = posenc_backend_status(backends[i], &reason);
            return Py_BuildValue("(Ns)", PyBool_FromLong(status == POSENC_OK),
                                 status == POSENC_OK ? "" : (reason ? reason : ""));
        }
    }
    return pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                           "backend: '%s' is not cpu, vulkan or opencl", name);
}

static PyMethodDef methods[] = {
    {"devices", devices, METH_NOARGS, "Every device of every available backend, as dicts."},
    {"version", version, METH_NOARGS, "The version of the linked posenc library."},
    {"backend_status", backend_status, METH_VARARGS,
     "backend_status(name) -> (available, reason)"},
    {"rope", (PyCFunction)(void (*)(void))pyposenc_rope, METH_VARARGS | METH_KEYWORDS,
     "Low-level RoPE on buffers; see posenc.rope."},
    {"rope_plain", (PyCFunction)(void (*)(void))pyposenc_rope_plain, METH_FASTCALL,
     "rope_plain(context, q, k, offset): posenc.rope's call with default options; None, or "
     "NotImplemented for arrays it leaves to the general path."},
    {"_bench_c_rope", (PyCFunction)(void (*)(void))pyposenc_bench_c_rope, METH_FASTCALL,
     "_bench_c_rope(context, q, k, offset, calls) -> seconds per posenc_rope call, timed in C."},
    {"sinusoidal", (PyCFunction)(void (*)(void))pyposenc_sinusoidal,
     METH_VARARGS | METH_KEYWORDS, "Low-level sinusoidal encoding; see posenc.sinusoidal."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "posenc._posenc",
    .m_doc = "posenc's C core: RoPE and sinusoidal encodings on Python buffers.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__posenc(void);

PyMODINIT_FUNC PyInit__posenc(void)
{
    PyObject *module = PyModule_Create(&module_def);
    if (!module) {
        return NULL;
    }
    if (pyposenc_errors_init(module) < 0 || pyposenc_context_init(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
