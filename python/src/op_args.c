/* SPDX-License-Identifier: MIT */
/* The keyword arguments of one RoPE or sinusoidal call (posenc._posenc._rope_resolved and
 * ._sinusoidal_resolved, and each call that Context.prepare names) as a descriptor, with the
 * views and arrays it points to. */
#include "pyposenc.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const view_names[PYPOSENC_ROPE_VIEWS] = {
    "q", "q_out", "k", "k_out", "positions", "k_cache", "slot_mapping", "v", "v_cache", "cos",
    "sin", "q_norm_weight", "k_norm_weight"};

/* [b, h, t, d] or [h, t, d] to posenc's [b, t, h, d] / [t, h, d], by strides. A cache given
 * heads first ([blocks, heads, block_size, d] or [heads, slots, d]) becomes posenc's
 * [blocks, block_size, heads, d] / [slots, heads, d] by the same swap. */
static void heads_first(posenc_tensor *tensor)
{
    if (tensor->ndim == 4) {
        pyposenc_tensor_swap(tensor, 1, 2);
    } else if (tensor->ndim == 3) {
        pyposenc_tensor_swap(tensor, 0, 1);
    }
}

/* The hidden dim (the last) of `tensor` as [hidden / head_dim, head_dim], by strides. */
static int split_hidden(posenc_tensor *tensor, const char *name, int64_t head_dim)
{
    uint32_t last = tensor->ndim - 1;
    if (tensor->shape[last] % head_dim != 0) {
        pyposenc_raisef(POSENC_INVALID_SHAPE,
                        "%s.shape[%u]: %lld is not a whole number of heads of %lld dims (q's "
                        "hidden size / num_heads)",
                        name, last, (long long)tensor->shape[last], (long long)head_dim);
        return -1;
    }
    tensor->shape[last + 1] = head_dim;
    tensor->strides[last + 1] = tensor->strides[last];
    tensor->shape[last] /= head_dim;
    tensor->strides[last] *= head_dim;
    tensor->ndim++;
    return 0;
}

/* num_heads: arrays without a heads dim ([batch, tokens, hidden] or [tokens, hidden]) as views
 * with one. q's hidden size is num_heads heads; k, k_out and v (their own head count, GQA) are
 * split into heads of the same size. A 4-D q must have num_heads heads. */
static int split_heads(const pyposenc_rope_options *options, posenc_rope_desc *desc)
{
    const posenc_tensor *q = &desc->q;
    int64_t heads = options->num_heads;
    int64_t head_dim = q->shape[q->ndim - 1];
    if (q->ndim == 2 || q->ndim == 3) {
        if (head_dim % heads != 0) {
            pyposenc_raisef(POSENC_INVALID_SHAPE,
                            "num_heads: q's hidden size %lld is not a multiple of %lld heads",
                            (long long)head_dim, (long long)heads);
            return -1;
        }
        head_dim /= heads;
    } else if (q->ndim == 4 && q->shape[options->heads_first ? 1 : 2] != heads) {
        pyposenc_raisef(POSENC_INVALID_SHAPE, "num_heads: %lld, but q has %lld heads (q.shape[%d])",
                        (long long)heads, (long long)q->shape[options->heads_first ? 1 : 2],
                        options->heads_first ? 1 : 2);
        return -1;
    }
    posenc_tensor *tensors[] = {&desc->q, &desc->q_out, &desc->k, &desc->k_out, &desc->v};
    const char *names[] = {"q", "q_out", "k", "k_out", "v"};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        if (tensors[i]->ndim != 2 && tensors[i]->ndim != 3) {
            continue;
        }
        if (options->heads_first) {
            /* [batch, tokens, hidden] has its tokens before its heads. */
            pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                            "layout: 'bhtd' reads 4-D arrays [batch, heads, tokens, head_dim], "
                            "but %s has %u dims, split into heads by num_heads; pass "
                            "layout='bthd'",
                            names[i], tensors[i]->ndim);
            return -1;
        }
        if (split_hidden(tensors[i], names[i], head_dim) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Three counts (t, h, w: the M-RoPE kinds, the fourth left 0) or four (ggml's sections). */
static int parse_section(PyObject *object, uint32_t section[4])
{
    if (object == Py_None) {
        return 0;
    }
    Py_ssize_t n = PySequence_Check(object) ? PySequence_Size(object) : -1;
    if (n != 3 && n != 4) {
        PyErr_Clear();
        pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                        "mrope_section: three frequency counts (t, h, w) or ggml's four "
                        "sections are expected");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(object, i);
        char name[24];
        PyOS_snprintf(name, sizeof name, "mrope_section[%zd]", i);
        int rc = item ? pyposenc_u32(item, name, &section[i]) : -1;
        Py_XDECREF(item);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

int pyposenc_index(PyObject *object, const char *name, long long minimum, long long maximum,
                   long long *out)
{
    if (PyFloat_Check(object)) {
        PyErr_Format(PyExc_TypeError, "%s: %R is not an integer; pass an int", name, object);
        return -1;
    }
    /* operator.index: ints, bools, numpy and torch integer scalars; never a float. */
    PyObject *index = PyNumber_Index(object);
    if (!index) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %R is not an integer; pass an int", name, object);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
    if (overflow || (v == -1 && PyErr_Occurred()) || v < minimum || v > maximum) {
        PyErr_Clear();
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "%s: %R is outside %lld to %lld", name, object,
                        minimum, maximum);
        return -1;
    }
    *out = v;
    return 0;
}

int pyposenc_u32(PyObject *object, const char *name, uint32_t *out)
{
    long long v;
    if (pyposenc_index(object, name, 0, UINT32_MAX, &v) < 0) {
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int parse_i32(PyObject *object, const char *name, int32_t *out)
{
    long long v;
    if (pyposenc_index(object, name, INT32_MIN, INT32_MAX, &v) < 0) {
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static int parse_double(PyObject *object, const char *name, double *out)
{
    double v = PyFloat_AsDouble(object);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %R is not a number", name, object);
        return -1;
    }
    *out = v;
    return 0;
}

/* component_map as bytes, its length checked against q when the call comes (the rotated
 * pairs may be q's to tell). */
static int parse_component_map(PyObject *object, pyposenc_rope_options *options)
{
    if (object == Py_None) {
        return 0;
    }
    Py_ssize_t n = PySequence_Check(object) ? PySequence_Size(object) : -1;
    if (n < 1) {
        PyErr_Clear();
        pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                        "component_map: a non-empty sequence of component indices is expected");
        return -1;
    }
    uint8_t *map = calloc((size_t)n, 1);
    if (!map) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(object, i);
        Py_ssize_t v = item ? PyNumber_AsSsize_t(item, NULL) : -1;
        Py_XDECREF(item);
        if (v < 0 || v > UINT8_MAX) {
            PyErr_Clear();
            free(map);
            pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                            "component_map[%zd]: a component index from 0 to 3 is expected", i);
            return -1;
        }
        map[i] = (uint8_t)v;
    }
    options->component_map = map;
    options->component_count = n;
    options->desc.component_map = map;
    return 0;
}

int pyposenc_rope_component_map_check(const pyposenc_rope_options *options,
                                      const posenc_tensor *q)
{
    /* posenc reads rotary_dim/2 entries without knowing the array's length. A rotary_dim
     * posenc refuses is left for it to report. */
    if (!options->component_map) {
        return 0;
    }
    int64_t head_dim = q->ndim ? q->shape[q->ndim - 1] : 0;
    int64_t rotated = head_dim - (int64_t)options->desc.rotary_offset;
    int64_t rotary_dim = options->desc.rotary_dim ? (int64_t)options->desc.rotary_dim : rotated;
    if (rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= rotated &&
        options->component_count != rotary_dim / 2) {
        pyposenc_raisef(POSENC_INVALID_SHAPE,
                        "component_map: %zd entries, but rotary_dim/2 = %lld are expected",
                        options->component_count, (long long)(rotary_dim / 2));
        return -1;
    }
    if (rotary_dim > 2 * options->component_count) {
        /* refused by posenc for its rotary_dim; never read past the map meanwhile */
        pyposenc_raisef(POSENC_INVALID_SHAPE,
                        "component_map: %zd entries for rotary_dim %lld", options->component_count,
                        (long long)rotary_dim);
        return -1;
    }
    return 0;
}

void pyposenc_rope_options_free(pyposenc_rope_options *options)
{
    pyposenc_scaling_free(&options->storage);
    free(options->component_map);
    options->component_map = NULL;
    options->desc.component_map = NULL;
}

/* One option of `name` from `value` into `options`: 1 when `name` is an option, 0 when it is
 * not, -1 on a fault (raised). */
static int parse_option(const char *name, PyObject *value, pyposenc_rope_options *options)
{
    posenc_rope_desc *desc = &options->desc;
    int32_t i32 = 0;
    uint32_t u32 = 0;
    if (strcmp(name, "theta") == 0) {
        return parse_double(value, name, &desc->theta) < 0 ? -1 : 1;
    }
    if (strcmp(name, "attention_factor") == 0) {
        return parse_double(value, name, &desc->attention_factor) < 0 ? -1 : 1;
    }
    if (strcmp(name, "norm_eps") == 0) {
        return parse_double(value, name, &desc->norm_eps) < 0 ? -1 : 1;
    }
    if (strcmp(name, "config_norm_eps") == 0) {
        return parse_double(value, name, &options->config_norm_eps) < 0 ? -1 : 1;
    }
    if (strcmp(name, "norm_weight_offset") == 0) {
        return parse_double(value, name, &desc->norm_weight_offset) < 0 ? -1 : 1;
    }
    if (strcmp(name, "style") == 0 || strcmp(name, "multimodal") == 0) {
        if (parse_i32(value, name, &i32) < 0) {
            return -1;
        }
        if (name[0] == 's') {
            desc->style = (posenc_rope_style)i32;
        } else {
            desc->multimodal = (posenc_rope_multimodal)i32;
        }
        return 1;
    }
    if (strcmp(name, "rotary_dim") == 0 || strcmp(name, "rotary_offset") == 0 ||
        strcmp(name, "components") == 0) {
        if (value != Py_None && pyposenc_u32(value, name, &u32) < 0) {
            return -1;
        }
        *(name[0] == 'c' ? &desc->components
          : name[7] == 'd' ? &desc->rotary_dim : &desc->rotary_offset) = u32;
        return 1;
    }
    if (strcmp(name, "num_heads") == 0) {
        return value == Py_None || pyposenc_u32(value, name, &options->num_heads) == 0 ? 1 : -1;
    }
    if (strcmp(name, "inverse") == 0) {
        int truth = PyObject_IsTrue(value);
        if (truth < 0) {
            return -1;
        }
        desc->inverse = truth != 0;
        return 1;
    }
    if (strcmp(name, "scaling") == 0) {
        return pyposenc_scaling_parse(value, &desc->scaling, &options->storage) < 0 ? -1 : 1;
    }
    if (strcmp(name, "mrope_section") == 0) {
        return parse_section(value, desc->mrope_section) < 0 ? -1 : 1;
    }
    if (strcmp(name, "component_map") == 0) {
        return parse_component_map(value, options) < 0 ? -1 : 1;
    }
    if (strcmp(name, "layout") == 0) {
        const char *text = PyUnicode_Check(value) ? PyUnicode_AsUTF8AndSize(value, NULL) : NULL;
        if (text && strcmp(text, "bhtd") == 0) {
            options->heads_first = 1;
        } else if (text && strcmp(text, "bthd") == 0) {
            options->heads_first = 0;
        } else {
            /* pyposenc_raisef formats as printf does: the value's repr goes in as text. */
            PyErr_Clear();
            PyObject *repr = PyObject_Repr(value);
            const char *shown = repr ? PyUnicode_AsUTF8AndSize(repr, NULL) : NULL;
            PyErr_Clear();
            pyposenc_raisef(POSENC_INVALID_ARGUMENT, "layout: %s is not 'bthd' or 'bhtd'",
                            shown ? shown : "the value");
            Py_XDECREF(repr);
            return -1;
        }
        return 1;
    }
    return 0;
}

int pyposenc_rope_options_parse(PyObject *dict, pyposenc_rope_options *options)
{
    memset(options, 0, sizeof *options);
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (dict && PyDict_Next(dict, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
        int rc = name ? parse_option(name, value, options) : -1;
        if (rc == 0) {
            PyErr_Format(PyExc_TypeError, "an unknown RoPE option '%s'", name);
        }
        if (rc <= 0) {
            pyposenc_rope_options_free(options);
            return -1;
        }
    }
    return 0;
}

void pyposenc_rope_args_free(pyposenc_rope_args *args)
{
    for (int i = 0; i < PYPOSENC_ROPE_VIEWS; i++) {
        pyposenc_view_release(&args->views[i]);
    }
    pyposenc_rope_options_free(&args->options);
}

void pyposenc_rope_norm_defaults(const pyposenc_rope_options *options, posenc_rope_desc *desc)
{
    int weights = desc->q_norm_weight.host || desc->q_norm_weight.buffer ||
                   desc->k_norm_weight.host || desc->k_norm_weight.buffer;
    if (weights && desc->norm_eps == 0.0) {
        desc->norm_eps = options->config_norm_eps;
    }
}

int pyposenc_rope_layout(const pyposenc_rope_options *options, posenc_rope_desc *desc)
{
    if (options->num_heads && split_heads(options, desc) < 0) {
        return -1;
    }
    if (options->heads_first) {
        posenc_tensor *tensors[] = {&desc->q,       &desc->q_out, &desc->k,      &desc->k_out,
                                    &desc->k_cache, &desc->v,     &desc->v_cache};
        for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
            heads_first(tensors[i]);
        }
    }
    return 0;
}

int pyposenc_rope_args_parse(PyObject *positional, PyObject *kwargs, pyposenc_rope_args *args)
{
    memset(args, 0, sizeof *args);
    PyObject *objects[PYPOSENC_ROPE_VIEWS];
    for (int i = 0; i < PYPOSENC_ROPE_VIEWS; i++) {
        objects[i] = Py_None;
    }
    int32_t offset = 0;
    int bf16 = 0;
    Py_ssize_t npositional = PyTuple_Size(positional);
    if (npositional > 1) {
        PyErr_Format(PyExc_TypeError, "_rope_resolved: q is the only positional argument, %zd "
                     "given", npositional);
        return -1;
    }
    if (npositional == 1) {
        objects[0] = PyTuple_GetItem(positional, 0);
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (kwargs && PyDict_Next(kwargs, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
        if (!name) {
            return -1;
        }
        int done = 0;
        for (int i = 0; i < PYPOSENC_ROPE_VIEWS && !done; i++) {
            if (strcmp(name, view_names[i]) == 0) {
                if (i == 0 && npositional) {
                    PyErr_SetString(PyExc_TypeError, "_rope_resolved: q given twice");
                    goto fail;
                }
                objects[i] = value;
                done = 1;
            }
        }
        if (done) {
            continue;
        }
        if (strcmp(name, "offset") == 0) {
            if (parse_i32(value, name, &offset) < 0) {
                goto fail;
            }
        } else if (strcmp(name, "bf16") == 0) {
            bf16 = PyObject_IsTrue(value);
            if (bf16 < 0) {
                goto fail;
            }
        } else {
            int rc = parse_option(name, value, &args->options);
            if (rc == 0) {
                PyErr_Format(PyExc_TypeError, "_rope_resolved: an unexpected keyword '%s'",
                             name);
            }
            if (rc <= 0) {
                goto fail;
            }
        }
    }
    if (objects[0] == Py_None) {
        PyErr_SetString(PyExc_TypeError, "_rope_resolved: q is required");
        goto fail;
    }
    posenc_rope_desc *desc = &args->desc;
    *desc = args->options.desc;
    desc->position_offset = offset;
    posenc_tensor *tensors[PYPOSENC_ROPE_VIEWS] = {
        &desc->q, &desc->q_out, &desc->k, &desc->k_out, &desc->positions,
        &desc->k_cache, &desc->slot_mapping, &desc->v, &desc->v_cache, &desc->cos, &desc->sin,
        &desc->q_norm_weight, &desc->k_norm_weight};
    /* q and k are written unless an out array is given; with a cache, k is only read. */
    int written[PYPOSENC_ROPE_VIEWS] = {
        objects[1] == Py_None, 1, objects[3] == Py_None && objects[5] == Py_None, 1, 0, 1, 0, 0,
        1, 0, 0, 0, 0};
    for (int i = 0; i < PYPOSENC_ROPE_VIEWS; i++) {
        int positions = i == 4 || i == 6;
        if (pyposenc_view_get(objects[i], view_names[i],
                              positions ? PYPOSENC_POSITIONS : PYPOSENC_DATA, written[i],
                              positions ? 0 : bf16, &args->views[i], tensors[i]) < 0) {
            goto fail;
        }
    }
    if (objects[2] == Py_None && objects[3] != Py_None) {
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "k_out: given without k");
        goto fail;
    }
    pyposenc_rope_norm_defaults(&args->options, desc);
    if (pyposenc_rope_layout(&args->options, desc) < 0) {
        goto fail;
    }
    if (pyposenc_rope_component_map_check(&args->options, &desc->q) < 0) {
        goto fail;
    }
    return 0;
fail:
    pyposenc_rope_args_free(args);
    return -1;
}

void pyposenc_sinusoidal_args_free(pyposenc_sinusoidal_args *args)
{
    for (int i = 0; i < 3; i++) {
        pyposenc_view_release(&args->views[i]);
    }
}

int pyposenc_sinusoidal_args_parse(PyObject *positional, PyObject *kwargs,
                                   pyposenc_sinusoidal_args *args)
{
    static char *keywords[] = {"out", "x", "positions", "offset", "layout", "base",
                               "freq_shift", "position_scale", "input_scale", "output_scale",
                               "bf16", NULL};
    PyObject *out, *x = Py_None, *positions = Py_None;
    int offset = 0, layout = 0, bf16 = 0;
    double base = 0.0, freq_shift = 0.0, position_scale = 0.0, input_scale = 0.0;
    double output_scale = 0.0;
    memset(args, 0, sizeof *args);
    if (!PyArg_ParseTupleAndKeywords(positional, kwargs, "O|$OOiidddddp:sinusoidal", keywords,
                                     &out, &x, &positions, &offset, &layout, &base, &freq_shift,
                                     &position_scale, &input_scale, &output_scale, &bf16)) {
        return -1;
    }
    posenc_sinusoidal_desc *desc = &args->desc;
    *desc = (posenc_sinusoidal_desc){
        .position_offset = offset,
        .layout = (posenc_sinusoidal_layout)layout,
        .base = base,
        .freq_shift = freq_shift,
        .position_scale = position_scale,
        .input_scale = input_scale,
        .output_scale = output_scale,
    };
    if (pyposenc_view_get(out, "out", PYPOSENC_DATA, 1, bf16, &args->views[0], &desc->out) < 0 ||
        pyposenc_view_get(x, "x", PYPOSENC_DATA, 0, bf16, &args->views[1], &desc->x) < 0 ||
        pyposenc_view_get(positions, "positions", PYPOSENC_POSITIONS, 0, 0, &args->views[2],
                          &desc->positions) < 0) {
        pyposenc_sinusoidal_args_free(args);
        return -1;
    }
    return 0;
}
