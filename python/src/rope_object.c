/* SPDX-License-Identifier: MIT */
/* posenc.Rope: a RoPE resolved once (an HF config's scaling, theta, rotary dims and M-RoPE
 * sections, into one descriptor) whose calls run in C with no Python frame; and posenc.rope,
 * which finds the Rope for its options in a cache keyed by their values, so that a repeated
 * config costs a key and a lookup. Arrays the C side cannot use as they are (bf16 numpy
 * arrays, lists, tensors that need grad) go, with the resolved options, to the Python layer's
 * converter, which returns them in a form C takes, or raises; the call itself is made here
 * either way. */
#include "pyposenc.h"

#include <string.h>

typedef struct pyposenc_rope_object {
    PyObject_HEAD
    pyposenc_rope_options options;
    PyObject *settings; /* the resolved options as _rope_resolved's keywords (a dict) */
    PyObject *context;  /* a Context, or NULL: the default context at each call */
} pyposenc_rope_object;

/* A call's arguments besides q. */
enum call_arg {
    ARG_K,
    ARG_POSITIONS,
    ARG_POSITION_IDS,
    ARG_OFFSET,
    ARG_OUT,
    ARG_K_OUT,
    ARG_K_CACHE,
    ARG_SLOT_MAPPING,
    ARG_V,
    ARG_V_CACHE,
    ARG_COS,
    ARG_SIN,
    ARG_Q_NORM_WEIGHT,
    ARG_K_NORM_WEIGHT,
    ARG_CONTEXT,
    ARG_COUNT
};
static const char *const arg_names[ARG_COUNT] = {
    "k", "positions", "position_ids", "offset", "out", "k_out", "k_cache", "slot_mapping", "v",
    "v_cache", "cos", "sin", "q_norm_weight", "k_norm_weight", "context"};

/* posenc.rope's options: what a Rope resolves once. The QK norm's weights are a layer's, given
 * at each call; its epsilon and weight offset are the model's, resolved here. */
#define OPTION_COUNT 15
static const char *const option_names[OPTION_COUNT] = {
    "theta",      "style",  "rotary_dim",    "rotary_offset", "inverse",       "scaling",
    "multimodal", "layout", "mrope_section", "components",    "component_map", "attention_factor",
    "num_heads",  "norm_eps", "norm_weight_offset"};
enum { OPTION_SCALING = 5 };

static PyObject *arg_strings[ARG_COUNT];
static PyObject *option_strings[OPTION_COUNT];
static PyObject *rope_type;
static PyObject *string_shape, *string_head_dim, *string_q;

/* Given by the Python layer at import (posenc._set_rope_hooks). config_keys: keys of which
 * one makes a mapping a config (posenc.hf's rule); read_fields: the fields read from a config,
 * all that a config's cache key needs. */
static PyObject *config_keys, *read_fields;
/* Given by the Python layer at import (posenc._set_rope_hooks). */
static PyObject *hook_resolve;     /* (config=None, *, head_dim=None, **options) -> settings */
static PyObject *hook_convert;     /* (settings, q, **call) -> _rope_resolved's keywords */
static PyObject *hook_cache_key;   /* (value) -> a hashable key of its content, or None */
static PyObject *hook_bad_keyword; /* (call, name) -> raises TypeError, "did you mean" */

/* The Ropes posenc.rope resolved, by the values of their options; cleared when full. */
#define CACHE_LIMIT 256
static PyObject *cache;
static PyObject *default_rope; /* posenc.rope's with no options */

static int is_name(PyObject *name, PyObject *interned)
{
    /* Keywords written at a call site are interned: identity is the usual answer. */
    return name == interned || PyUnicode_Compare(name, interned) == 0;
}

/* ---- the C path ------------------------------------------------------------------------- */

enum { VIEW_Q, VIEW_K, VIEW_OUT, VIEW_K_OUT, VIEW_K_CACHE, VIEW_V, VIEW_V_CACHE, VIEW_COS, VIEW_SIN,
       VIEW_Q_NORM_WEIGHT, VIEW_K_NORM_WEIGHT, VIEW_COUNT };

/* One call of `self` on the arrays (args as run_rope gives them: None where absent, offset
 * NULL): 1 done, 0 left to the converter (nothing written, no error set), -1 raised. */
static int apply(pyposenc_rope_object *self, PyObject *context_object, PyObject *q,
                 PyObject *const args[ARG_COUNT])
{
    pyposenc_context *context = pyposenc_context_check(context_object);
    if (!context) {
        return -1;
    }
    posenc_rope_desc desc = self->options.desc;
    if (args[ARG_OFFSET]) {
        long long offset;
        if (pyposenc_index(args[ARG_OFFSET], "offset", INT32_MIN, INT32_MAX, &offset) < 0) {
            return -1;
        }
        desc.position_offset = (int32_t)offset;
    }
    pyposenc_view views[VIEW_COUNT];
    pyposenc_indices positions, slots;
    memset(views, 0, sizeof views);
    positions.copy = slots.copy = NULL;
    memset(&positions.view, 0, sizeof positions.view);
    memset(&slots.view, 0, sizeof slots.view);

    PyObject *none = Py_None;
    struct {
        PyObject *object;
        const char *name;
        int writable;
        posenc_tensor *tensor;
    } data[VIEW_COUNT] = {
        {q, "q", args[ARG_OUT] == none, &desc.q},
        {args[ARG_K], "k", args[ARG_K_OUT] == none && args[ARG_K_CACHE] == none, &desc.k},
        {args[ARG_OUT], "q_out", 1, &desc.q_out},
        {args[ARG_K_OUT], "k_out", 1, &desc.k_out},
        {args[ARG_K_CACHE], "k_cache", 1, &desc.k_cache},
        {args[ARG_V], "v", 0, &desc.v},
        {args[ARG_V_CACHE], "v_cache", 1, &desc.v_cache},
        {args[ARG_COS], "cos", 0, &desc.cos},
        {args[ARG_SIN], "sin", 0, &desc.sin},
        {args[ARG_Q_NORM_WEIGHT], "q_norm_weight", 0, &desc.q_norm_weight},
        {args[ARG_K_NORM_WEIGHT], "k_norm_weight", 0, &desc.k_norm_weight},
    };
    int done = -1, got = 0;
    for (int i = 0; i < VIEW_COUNT && got == 0; i++) {
        got = pyposenc_view_get(data[i].object, data[i].name, PYPOSENC_DATA, data[i].writable, 0,
                                &views[i], data[i].tensor);
    }
    PyObject *ids = args[ARG_POSITION_IDS];
    if (got == 0 && ids != none && args[ARG_POSITIONS] != none) {
        pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                        "position_ids: given with positions; pass one of them");
        goto done;
    }
    if (got == 0) {
        got = ids != none
                  ? pyposenc_indices_get(ids, "position_ids",
                                         desc.multimodal ? PYPOSENC_HF_IDS | PYPOSENC_HF_COMPONENTS_FIRST
                                                         : PYPOSENC_HF_IDS,
                                         &positions, &desc.positions)
                  : pyposenc_indices_get(args[ARG_POSITIONS], "positions", 0, &positions,
                                         &desc.positions);
    }
    if (got == 0) {
        got = pyposenc_indices_get(args[ARG_SLOT_MAPPING], "slot_mapping", 0, &slots,
                                   &desc.slot_mapping);
    }
    if (got == PYPOSENC_NOT_PLAIN) {
        PyErr_Clear();
        done = 0;
        goto done;
    }
    if (got < 0) {
        goto done;
    }
    if (!desc.k.host && desc.k_out.host) {
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "k_out: given without k");
        goto done;
    }
    pyposenc_rope_norm_defaults(&self->options, &desc);
    if (pyposenc_rope_layout(&self->options, &desc) < 0) {
        goto done;
    }
    if (pyposenc_rope_component_map_check(&self->options, &desc.q) < 0) {
        goto done;
    }
    if (pyposenc_run_rope(context, &desc, 1) == 0) {
        done = 1;
    }
done:
    for (int i = 0; i < VIEW_COUNT; i++) {
        pyposenc_view_release(&views[i]);
    }
    pyposenc_indices_release(&positions);
    pyposenc_indices_release(&slots);
    return done;
}

/* What a call returns (args as apply takes them): the array written for q, or (q's, k's). */
static PyObject *result(PyObject *q, PyObject *const args[ARG_COUNT])
{
    PyObject *q_written = args[ARG_OUT] != Py_None ? args[ARG_OUT] : q;
    if (args[ARG_K] == Py_None) {
        return Py_NewRef(q_written);
    }
    PyObject *k_written = args[ARG_K_OUT] != Py_None ? args[ARG_K_OUT] : args[ARG_K];
    return PyTuple_Pack(2, q_written, k_written);
}

/* A call C could not take as it came: the Python layer's converter turns the arrays
 * (args as run_rope takes them) into _rope_resolved's keywords with the resolved options, or
 * raises, and the call is run on them. 0 done, -1 raised. */
static int apply_converted(pyposenc_rope_object *self, PyObject *context, PyObject *q,
                           PyObject *const args[ARG_COUNT])
{
    if (!hook_convert) {
        PyErr_SetString(PyExc_RuntimeError, "posenc.rope: the posenc package is not loaded");
        return -1;
    }
    PyObject *keywords = PyDict_New();
    PyObject *positional = keywords ? PyTuple_Pack(2, self->settings, q) : NULL;
    PyObject *converted = NULL, *empty = NULL;
    pyposenc_context *checked;
    int rc = -1;
    if (!positional) {
        goto done;
    }
    for (int i = 0; i < ARG_COUNT; i++) {
        if (i != ARG_CONTEXT && args[i] && PyDict_SetItem(keywords, arg_strings[i], args[i]) < 0) {
            goto done;
        }
    }
    converted = PyObject_Call(hook_convert, positional, keywords);
    if (!converted) {
        goto done;
    }
    if (!PyDict_Check(converted)) {
        PyErr_SetString(PyExc_TypeError, "posenc.rope: the converter gave no dict");
        goto done;
    }
    if ((checked = pyposenc_context_check(context)) && (empty = PyTuple_New(0))) {
        rc = pyposenc_run_rope_resolved(checked, empty, converted);
    }
done:
    Py_XDECREF(keywords);
    Py_XDECREF(positional);
    Py_XDECREF(converted);
    Py_XDECREF(empty);
    return rc;
}

/* Runs `self` on the arrays on `context` (NULL or None: the Rope's own, else the default). */
static PyObject *run_rope(pyposenc_rope_object *self, PyObject *q, PyObject *const args[ARG_COUNT])
{
    PyObject *context = args[ARG_CONTEXT];
    PyObject *owned = NULL;
    if (!context || context == Py_None) {
        context = self->context;
    }
    if (!context) {
        if (!(context = owned = pyposenc_default_context(NULL, NULL))) {
            return NULL;
        }
    }
    /* None for every array not given; the offset stays absent (its default is 0). */
    PyObject *given[ARG_COUNT];
    for (int i = 0; i < ARG_COUNT; i++) {
        given[i] = args[i] || i == ARG_OFFSET ? args[i] : Py_None;
    }
    int done = apply(self, context, q, given);
    if (done == 0) {
        done = apply_converted(self, context, q, args) < 0 ? -1 : 1;
    }
    PyObject *out = done < 0 ? NULL : result(q, given);
    Py_XDECREF(owned);
    return out;
}

/* ---- the type ---------------------------------------------------------------------------- */

/* A Rope of `settings` (_rope_resolved's option keywords) on `context` (NULL: the default). */
static PyObject *rope_from_settings(PyTypeObject *type, PyObject *settings, PyObject *context)
{
    if (!PyDict_Check(settings)) {
        PyErr_SetString(PyExc_TypeError, "posenc.Rope: the resolver gave no dict");
        return NULL;
    }
    pyposenc_rope_object *self = (pyposenc_rope_object *)PyType_GenericAlloc(type, 0);
    if (!self) {
        return NULL;
    }
    if (pyposenc_rope_options_parse(settings, &self->options) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->settings = Py_NewRef(settings);
    self->context = Py_XNewRef(context);
    return (PyObject *)self;
}

static PyObject *rope_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (!hook_resolve) {
        PyErr_SetString(PyExc_RuntimeError, "posenc.Rope: the posenc package is not loaded");
        return NULL;
    }
    PyObject *context = kwargs ? PyDict_GetItemString(kwargs, "context") : NULL;
    if (context == Py_None) {
        context = NULL;
    }
    if (context && !pyposenc_context_check(context)) {
        return NULL;
    }
    PyObject *options = kwargs ? PyDict_Copy(kwargs) : PyDict_New();
    if (!options || (kwargs && PyDict_GetItemString(kwargs, "context") &&
                     PyDict_DelItemString(options, "context") < 0)) {
        Py_XDECREF(options);
        return NULL;
    }
    PyObject *settings = PyObject_Call(hook_resolve, args, options);
    Py_DECREF(options);
    if (!settings) {
        return NULL;
    }
    PyObject *self = rope_from_settings(type, settings, context);
    Py_DECREF(settings);
    return self;
}

static void rope_dealloc(PyObject *object)
{
    pyposenc_rope_object *self = (pyposenc_rope_object *)object;
    PyTypeObject *type = Py_TYPE(object);
    pyposenc_rope_options_free(&self->options);
    Py_CLEAR(self->settings);
    Py_CLEAR(self->context);
    freefunc free_object = (freefunc)PyType_GetSlot(type, Py_tp_free);
    free_object(object);
    Py_DECREF(type);
}

/* `value` into args[] when `name` is a call argument: 1, 0 when it is not one, -1 with a
 * TypeError when it was already given. */
static int take_arg(PyObject *name, PyObject *value, PyObject *args[ARG_COUNT], const char *call)
{
    for (int i = 0; i < ARG_COUNT; i++) {
        if (is_name(name, arg_strings[i])) {
            if (args[i]) {
                PyErr_Format(PyExc_TypeError, "%s: %U given twice", call, name);
                return -1;
            }
            args[i] = value;
            return 1;
        }
    }
    return 0;
}

/* Rope.__call__(q, k=None, *, positions, position_ids, offset, out, k_out, k_cache,
 * slot_mapping, v, v_cache, cos, sin, q_norm_weight, k_norm_weight, context). */
static PyObject *rope_call(PyObject *object, PyObject *positional, PyObject *kwargs)
{
    PyObject *args[ARG_COUNT] = {NULL};
    Py_ssize_t n = PyTuple_Size(positional);
    if (n < 1 || n > 2) {
        PyErr_Format(PyExc_TypeError, "Rope(): q and k are the positional arguments, %zd given",
                     n);
        return NULL;
    }
    PyObject *q = PyTuple_GetItem(positional, 0);
    if (n == 2) {
        args[ARG_K] = PyTuple_GetItem(positional, 1);
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (kwargs && PyDict_Next(kwargs, &pos, &key, &value)) {
        int found = take_arg(key, value, args, "Rope()");
        if (found < 0) {
            return NULL;
        }
        if (!found) {
            PyObject *raised = PyObject_CallFunction(hook_bad_keyword, "sO", "Rope()", key);
            Py_XDECREF(raised);
            return NULL;
        }
    }
    return run_rope((pyposenc_rope_object *)object, q, args);
}

static PyObject *rope_settings(PyObject *object, void *closure)
{
    return PyDict_Copy(((pyposenc_rope_object *)object)->settings);
}

static PyObject *rope_context(PyObject *object, void *closure)
{
    pyposenc_rope_object *self = (pyposenc_rope_object *)object;
    return Py_NewRef(self->context ? self->context : Py_None);
}

static PyObject *rope_repr(PyObject *object)
{
    return PyUnicode_FromFormat("posenc.Rope(%R)", ((pyposenc_rope_object *)object)->settings);
}

static PyGetSetDef rope_getset[] = {
    {"settings", rope_settings, NULL,
     "What the Rope resolved, as _rope_resolved's keywords (a new dict).", NULL},
    {"context", rope_context, NULL, "The Context it runs on, or None (the default).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot rope_slots[] = {
    {Py_tp_new, (void *)rope_new},
    {Py_tp_dealloc, (void *)rope_dealloc},
    {Py_tp_call, (void *)rope_call},
    {Py_tp_getset, rope_getset},
    {Py_tp_repr, (void *)rope_repr},
    {Py_tp_doc, (void *)PYPOSENC_ROPE_DOC},
    {0, NULL},
};

static PyType_Spec rope_spec = {
    .name = "posenc.Rope",
    .basicsize = sizeof(pyposenc_rope_object),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = rope_slots,
};

/* ---- posenc.rope ------------------------------------------------------------------------ */

/* Whether a dict is a config rather than a rope dict (it has one of config_keys). */
static int is_config(PyObject *dict)
{
    Py_ssize_t n = config_keys ? PyTuple_Size(config_keys) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyDict_GetItemWithError(dict, PyTuple_GetItem(config_keys, i))) {
            return 1;
        }
    }
    PyErr_Clear();
    return 0;
}

/* Appends a hashable stand-in for `value`'s content to `parts`: scalars with their type (so
 * that 2 and 2.0 stay apart), dicts and lists item by item; anything else through the Python
 * layer's cache_key (configs by their RoPE fields, paths with their mtime: `str_is_path` for
 * scaling's own value). 1 done, 0 when it has no stand-in (the call then resolves anew), -1
 * raised. */
static int freeze(PyObject *value, PyObject *parts, int depth, int str_is_path)
{
    if (depth > 8) {
        return 0;
    }
    if (value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) ||
        PyFloat_CheckExact(value) || (PyUnicode_CheckExact(value) && !str_is_path)) {
        return PyList_Append(parts, (PyObject *)Py_TYPE(value)) < 0 ||
                       PyList_Append(parts, value) < 0
                   ? -1
                   : 1;
    }
    if (PyDict_CheckExact(value) && is_config(value)) {
        /* A config (a config.json's dict): only the fields the mapping reads, so that a
         * model's whole config is not walked on every call. */
        if (PyList_Append(parts, config_keys) < 0) {
            return -1;
        }
        Py_ssize_t n = PyTuple_Size(read_fields);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *field = PyDict_GetItemWithError(value, PyTuple_GetItem(read_fields, i));
            if (!field && PyErr_Occurred()) {
                return -1;
            }
            int rc = freeze(field ? field : Py_None, parts, depth + 1, 0);
            if (rc <= 0) {
                return rc;
            }
        }
        return 1;
    }
    if (PyDict_CheckExact(value) || PyList_CheckExact(value) || PyTuple_CheckExact(value)) {
        int is_dict = PyDict_CheckExact(value);
        Py_ssize_t size = is_dict ? PyDict_Size(value) : PySequence_Size(value);
        PyObject *mark = PyLong_FromSsize_t(is_dict ? -1 - size : size);
        if (!mark || PyList_Append(parts, mark) < 0) {
            Py_XDECREF(mark);
            return -1;
        }
        Py_DECREF(mark);
        if (is_dict) {
            Py_ssize_t pos = 0;
            PyObject *key, *item;
            while (PyDict_Next(value, &pos, &key, &item)) {
                int rc = PyList_Append(parts, key) < 0 ? -1 : freeze(item, parts, depth + 1, 0);
                if (rc <= 0) {
                    return rc;
                }
            }
            return 1;
        }
        for (Py_ssize_t i = 0; i < size; i++) {
            PyObject *item = PySequence_GetItem(value, i);
            int rc = item ? freeze(item, parts, depth + 1, 0) : -1;
            Py_XDECREF(item);
            if (rc <= 0) {
                return rc;
            }
        }
        return 1;
    }
    PyObject *key = PyObject_CallFunctionObjArgs(hook_cache_key, value, NULL);
    if (!key) {
        return -1;
    }
    int rc = key == Py_None ? 0 : PyList_Append(parts, key) < 0 ? -1 : 1;
    Py_DECREF(key);
    return rc;
}

/* head_dim from q's shape, or None when q has none to read. */
static PyObject *head_dim_of(PyObject *q)
{
    PyObject *shape = PyObject_GetAttr(q, string_shape);
    if (!shape) {
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    Py_ssize_t n = PySequence_Check(shape) ? PySequence_Size(shape) : -1;
    PyObject *last = n > 0 ? PySequence_GetItem(shape, n - 1) : NULL;
    Py_DECREF(shape);
    if (!last) {
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    return last;
}

/* The Rope for posenc.rope's options (options[i] NULL when not given): from the cache when
 * the same values were resolved before. */
static PyObject *rope_for(PyObject *q, PyObject *const options[OPTION_COUNT])
{
    PyObject *parts = PyList_New(0);
    PyObject *key = NULL, *head_dim = NULL, *kwargs = NULL, *rope = NULL;
    if (!parts) {
        return NULL;
    }
    /* An HF config's rotary dims may come from q's head size. */
    if (options[OPTION_SCALING] && options[OPTION_SCALING] != Py_None) {
        head_dim = head_dim_of(q);
        if (!head_dim || PyList_Append(parts, head_dim) < 0) {
            goto done;
        }
    }
    int cacheable = 1;
    for (int i = 0; i < OPTION_COUNT && cacheable > 0; i++) {
        if (options[i]) {
            PyObject *index = PyLong_FromLong(i);
            cacheable = index && PyList_Append(parts, index) == 0 ? freeze(options[i], parts, 0, i == OPTION_SCALING)
                                                                  : -1;
            Py_XDECREF(index);
        }
    }
    if (cacheable < 0) {
        goto done;
    }
    if (cacheable) {
        key = PyList_AsTuple(parts);
        if (!key) {
            goto done;
        }
        rope = PyDict_GetItemWithError(cache, key);
        if (rope) {
            Py_INCREF(rope);
            goto done;
        }
        if (PyErr_Occurred()) {
            goto done;
        }
    }
    kwargs = PyDict_New();
    if (!kwargs || (head_dim && PyDict_SetItem(kwargs, string_head_dim, head_dim) < 0)) {
        goto done;
    }
    for (int i = 0; i < OPTION_COUNT; i++) {
        if (options[i] && PyDict_SetItem(kwargs, option_strings[i], options[i]) < 0) {
            goto done;
        }
    }
    PyObject *empty = PyTuple_New(0);
    PyObject *settings = empty ? PyObject_Call(hook_resolve, empty, kwargs) : NULL;
    Py_XDECREF(empty);
    if (!settings) {
        goto done;
    }
    rope = rope_from_settings((PyTypeObject *)rope_type, settings, NULL);
    Py_DECREF(settings);
    if (rope && key) {
        if (PyDict_Size(cache) >= CACHE_LIMIT) {
            PyDict_Clear(cache);
        }
        if (PyDict_SetItem(cache, key, rope) < 0) {
            Py_CLEAR(rope);
        }
    }
done:
    Py_DECREF(parts);
    Py_XDECREF(key);
    Py_XDECREF(head_dim);
    Py_XDECREF(kwargs);
    return rope;
}

PyObject *pyposenc_rope_entry(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    PyObject *call[ARG_COUNT] = {NULL};
    PyObject *options[OPTION_COUNT] = {NULL};
    PyObject *q = nargs ? args[0] : NULL;
    int any_option = 0;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError,
                     "rope(): q and k are the positional arguments, %zd given", nargs);
        return NULL;
    }
    if (nargs == 2) {
        call[ARG_K] = args[1];
    }
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GetItem(kwnames, i);
        PyObject *value = args[nargs + i];
        int found = 0;
        if (is_name(name, string_q)) {
            if (q) {
                PyErr_SetString(PyExc_TypeError, "rope(): argument 'q' given twice");
                return NULL;
            }
            q = value;
            continue;
        }
        found = take_arg(name, value, call, "rope()");
        if (found < 0) {
            return NULL;
        }
        for (int o = 0; o < OPTION_COUNT && !found; o++) {
            if (is_name(name, option_strings[o])) {
                options[o] = value;
                any_option = found = 1;
            }
        }
        if (!found) {
            PyObject *raised = PyObject_CallFunction(hook_bad_keyword, "sO", "rope()", name);
            Py_XDECREF(raised);
            return NULL;
        }
    }
    if (!q) {
        PyErr_SetString(PyExc_TypeError, "rope(): missing the array q");
        return NULL;
    }
    if (!hook_resolve) {
        PyErr_SetString(PyExc_RuntimeError, "posenc.rope: the posenc package is not loaded");
        return NULL;
    }
    PyObject *rope;
    if (any_option) {
        rope = rope_for(q, options);
    } else {
        if (!default_rope) {
            default_rope = rope_for(q, options);
        }
        rope = Py_XNewRef(default_rope);
    }
    if (!rope) {
        return NULL;
    }
    PyObject *out = run_rope((pyposenc_rope_object *)rope, q, call);
    Py_DECREF(rope);
    return out;
}

PyObject *pyposenc_set_rope_hooks(PyObject *module, PyObject *args)
{
    PyObject *resolve, *convert, *cache_key, *bad_keyword, *keys, *fields;
    if (!PyArg_ParseTuple(args, "OOOOO!O!:_set_rope_hooks", &resolve, &convert, &cache_key,
                          &bad_keyword, &PyTuple_Type, &keys, &PyTuple_Type, &fields)) {
        return NULL;
    }
    Py_XDECREF(config_keys);
    Py_XDECREF(read_fields);
    config_keys = Py_NewRef(keys);
    read_fields = Py_NewRef(fields);
    PyObject *previous[4] = {hook_resolve, hook_convert, hook_cache_key, hook_bad_keyword};
    hook_resolve = Py_NewRef(resolve);
    hook_convert = Py_NewRef(convert);
    hook_cache_key = Py_NewRef(cache_key);
    hook_bad_keyword = Py_NewRef(bad_keyword);
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(previous[i]);
    }
    Py_CLEAR(default_rope);
    PyDict_Clear(cache);
    Py_RETURN_NONE;
}

int pyposenc_rope_object_init(PyObject *module)
{
    for (int i = 0; i < ARG_COUNT; i++) {
        if (!(arg_strings[i] = PyUnicode_InternFromString(arg_names[i]))) {
            return -1;
        }
    }
    for (int i = 0; i < OPTION_COUNT; i++) {
        if (!(option_strings[i] = PyUnicode_InternFromString(option_names[i]))) {
            return -1;
        }
    }
    string_shape = PyUnicode_InternFromString("shape");
    string_head_dim = PyUnicode_InternFromString("head_dim");
    string_q = PyUnicode_InternFromString("q");
    cache = PyDict_New();
    rope_type = PyType_FromSpec(&rope_spec);
    if (!string_shape || !string_head_dim || !string_q || !cache || !rope_type) {
        return -1;
    }
    Py_INCREF(rope_type);
    if (PyModule_AddObject(module, "Rope", rope_type) < 0) {
        Py_DECREF(rope_type);
        return -1;
    }
    return 0;
}
