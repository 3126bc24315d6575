/* SPDX-License-Identifier: MIT */
/* posenc.Context: one posenc context (a device and its worker threads), with a lock that
 * serialises the calls that need the context to themselves while the GIL is released. */
#include "pyposenc.h"

#include <string.h>

static PyObject *context_type;
static PyObject *default_context;  /* made on first use, kept for the process */
static PyThread_type_lock default_lock;

PyObject *pyposenc_device_dict(const posenc_device_info *info)
{
    char selector[64];
    PyOS_snprintf(selector, sizeof selector, "%s:%u", posenc_backend_name(info->backend),
                  info->backend_index);
    return Py_BuildValue(
        "{s:s,s:s,s:I,s:s,s:s,s:N,s:s,s:s,s:K,s:N,s:N,s:N,s:N,s:N,s:I,s:I,s:I,s:K,s:K,s:N}",
        "name",
        info->name, "backend", posenc_backend_name(info->backend), "index", info->backend_index,
        "selector", selector, "kind", posenc_device_type_name(info->type), "native_cpu",
        PyBool_FromLong(info->native_cpu), "vendor", info->vendor, "driver", info->driver,
        "memory_bytes", (unsigned long long)info->memory_bytes, "unified_memory",
        PyBool_FromLong(info->unified_memory), "fp16_storage", PyBool_FromLong(info->fp16_storage),
        "fp16_arithmetic", PyBool_FromLong(info->fp16_arithmetic), "bf16",
        PyBool_FromLong(info->bf16), "fp64", PyBool_FromLong(info->fp64), "compute_units",
        info->compute_units, "max_workgroup_size", info->max_workgroup_size, "subgroup_size",
        info->subgroup_size, "max_buffer_bytes", (unsigned long long)info->max_buffer_bytes,
        "max_binding_bytes", (unsigned long long)info->max_binding_bytes, "host_memory_import",
        PyBool_FromLong(info->host_memory_import));
}

static PyObject *context_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"device", "num_threads", "allow_software", "ignore_env", NULL};
    const char *device = NULL;
    unsigned int num_threads = 0;
    int allow_software = 0;
    int ignore_env = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|z$Ipp", keywords, &device, &num_threads,
                                     &allow_software, &ignore_env)) {
        return NULL;
    }
    posenc_context_desc desc = {.backend = POSENC_BACKEND_AUTO,
                                .device = device && device[0] ? device : NULL,
                                .num_threads = num_threads};
    if (allow_software) {
        desc.flags |= POSENC_CONTEXT_ALLOW_SOFTWARE;
    }
    if (ignore_env) {
        desc.flags |= POSENC_CONTEXT_IGNORE_ENV;
    }
    /* A named device is what the caller asked for: no silent fallback to another one. */
    if (desc.device) {
        desc.flags |= POSENC_CONTEXT_NO_FALLBACK;
    }
    pyposenc_context *self = (pyposenc_context *)PyType_GenericAlloc(type, 0);
    if (!self) {
        return NULL;
    }
    self->lock = PyThread_allocate_lock();
    if (!self->lock) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    posenc_status status;
    char message[1024] = "";
    Py_BEGIN_ALLOW_THREADS
    status = posenc_context_create(&desc, &self->context);
    if (status != POSENC_OK) {
        /* Read on this thread, right after the call: the message is per thread. */
        PyOS_snprintf(message, sizeof message, "%s", posenc_thread_last_error());
    }
    Py_END_ALLOW_THREADS
    if (status != POSENC_OK) {
        self->context = NULL;
        Py_DECREF(self);
        if (device) {
            return pyposenc_raisef(status, "cannot open device '%s': %s", device,
                                   message[0] ? message : posenc_status_string(status));
        }
        pyposenc_raise(status, message);
        return NULL;
    }
    return (PyObject *)self;
}

static void context_close(pyposenc_context *self)
{
    if (!self->context || !self->lock) {
        return;
    }
    /* Under the lock: an operation running on another thread finishes first, and one that
     * starts later finds the context gone. */
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    posenc_context_destroy(self->context);
    self->context = NULL;
    PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
}

static void context_dealloc(PyObject *object)
{
    pyposenc_context *self = (pyposenc_context *)object;
    context_close(self);
    if (self->lock) {
        PyThread_free_lock(self->lock);
    }
    PyTypeObject *type = Py_TYPE(object);
    freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
    free_fn(object);
    Py_DECREF(type);
}

PyObject *pyposenc_context_type(void)
{
    return context_type;
}

pyposenc_context *pyposenc_context_check(PyObject *object)
{
    if (!PyObject_TypeCheck(object, (PyTypeObject *)context_type)) {
        PyErr_SetString(PyExc_TypeError, "context must be a posenc.Context");
        return NULL;
    }
    pyposenc_context *self = (pyposenc_context *)object;
    if (!self->context) {
        pyposenc_raise(POSENC_INVALID_ARGUMENT, "context: the Context is closed");
        return NULL;
    }
    return self;
}

static PyObject *context_device(PyObject *object, void *closure)
{
    pyposenc_context *self = pyposenc_context_check(object);
    if (!self) {
        return NULL;
    }
    posenc_device_info info;
    posenc_status status = posenc_context_device(self->context, &info);
    if (status != POSENC_OK) {
        pyposenc_raise(status, posenc_context_last_error(self->context));
        return NULL;
    }
    return pyposenc_device_dict(&info);
}

/* No lock: posenc_context_stats may run beside any call on the context, so a reading from one
 * thread never waits for an operation another thread runs with the GIL released. */
static PyObject *context_stats(PyObject *object, PyObject *unused)
{
    pyposenc_context *self = pyposenc_context_check(object);
    if (!self) {
        return NULL;
    }
    posenc_stats s;
    posenc_status status = posenc_context_stats(self->context, &s);
    if (status != POSENC_OK) {
        pyposenc_raise(status, posenc_context_last_error(self->context));
        return NULL;
    }
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "rope_calls",
        (unsigned long long)s.rope_calls, "sinusoidal_calls",
        (unsigned long long)s.sinusoidal_calls, "staged_bytes",
        (unsigned long long)s.staged_bytes, "uploaded_bytes",
        (unsigned long long)s.uploaded_bytes, "downloaded_bytes",
        (unsigned long long)s.downloaded_bytes, "kernels_built",
        (unsigned long long)s.kernels_built, "kernels_loaded",
        (unsigned long long)s.kernels_loaded, "freq_tables", (unsigned long long)s.freq_tables,
        "buffer_bytes", (unsigned long long)s.buffer_bytes, "staging_bytes",
        (unsigned long long)s.staging_bytes, "table_bytes", (unsigned long long)s.table_bytes,
        "device_bytes", (unsigned long long)s.device_bytes);
}

static PyObject *context_close_method(PyObject *object, PyObject *unused)
{
    context_close((pyposenc_context *)object);
    Py_RETURN_NONE;
}

static PyObject *context_enter(PyObject *object, PyObject *unused)
{
    Py_INCREF(object);
    return object;
}

static PyObject *context_exit(PyObject *object, PyObject *args)
{
    context_close((pyposenc_context *)object);
    Py_RETURN_NONE;
}

static PyMethodDef context_methods[] = {
    {"close", context_close_method, METH_NOARGS,
     "Frees the device context now (it is also freed when the object is)."},
    {"stats", context_stats, METH_NOARGS,
     "The context's counters as a dict (posenc_context_stats): totals since the context was\n"
     "made (rope_calls, sinusoidal_calls, staged_bytes, uploaded_bytes, downloaded_bytes,\n"
     "kernels_built, kernels_loaded) and what it holds now (freq_tables, buffer_bytes,\n"
     "staging_bytes, table_bytes, device_bytes)."},
    {"prepare", (PyCFunction)(void (*)(void))pyposenc_context_prepare,
     METH_VARARGS | METH_KEYWORDS,
     "prepare(*, rope=None, sinusoidal=None)\n--\n\n"
     "Builds ahead of time the kernels and frequency tables of the calls described\n"
     "(posenc_prepare), so that their first run is not slower than the next.\n\n"
     "rope: a list of dicts, each holding the keyword arguments of one posenc.rope call\n"
     "(q, k, positions, theta, scaling, multimodal, k_cache, ..., arrays included);\n"
     "sinusoidal: the same for posenc.sinusoidal. Each call is validated exactly as the\n"
     "call itself would be; a bad one raises naming its place (\"rope[1].rotary_dim: ...\")\n"
     "and nothing is built. Nothing is computed or written. Kernels depend on the data\n"
     "dtype and tables on the frequency options, not on shapes or positions: one call per\n"
     "dtype and model is enough. On the native CPU device this only validates."},
    {"__enter__", context_enter, METH_NOARGS, NULL},
    {"__exit__", context_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef context_getset[] = {
    {"device", context_device, NULL, "The device this context runs on, as a dict.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot context_slots[] = {
    {Py_tp_new, (void *)context_new},
    {Py_tp_dealloc, (void *)context_dealloc},
    {Py_tp_methods, context_methods},
    {Py_tp_getset, context_getset},
    {Py_tp_doc,
     "Context(device=None, *, num_threads=0, allow_software=False, ignore_env=False)\n\n"
     "A posenc context on one device. device: None (the best one, or POSENC_DEVICE), or a\n"
     "selector as in POSENC_DEVICE: \"cpu\", \"vulkan\", \"opencl\", \"vulkan:1\", or part of\n"
     "a device name. A named device that cannot be opened is an error (no fallback).\n"
     "num_threads: CPU worker threads (0: the cores this process may use)."},
    {0, NULL},
};

static PyType_Spec context_spec = {
    .name = "posenc.Context",
    .basicsize = sizeof(pyposenc_context),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = context_slots,
};

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

int pyposenc_context_init(PyObject *module)
{
    default_lock = PyThread_allocate_lock();
    if (!default_lock) {
        PyErr_NoMemory();
        return -1;
    }
    context_type = PyType_FromSpec(&context_spec);
    if (!context_type) {
        return -1;
    }
    Py_INCREF(context_type);
    if (PyModule_AddObject(module, "Context", context_type) < 0) {
        Py_DECREF(context_type);
        return -1;
    }
    return 0;
}
