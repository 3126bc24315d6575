/* SPDX-License-Identifier: MIT */
/* The keyword arguments of one RoPE or sinusoidal call (posenc._posenc.rope_buffers and
 * .sinusoidal, and each call that Context.prepare names) as a descriptor, with the views and
 * arrays it points to. */
#include "pyposenc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const view_names[PYPOSENC_ROPE_VIEWS] = {
    "q", "q_out", "k", "k_out", "positions", "k_cache", "slot_mapping", "v", "v_cache"};

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

/* component_map as bytes. posenc reads rotary_dim/2 entries without knowing the array's
 * length, so the length is checked here, and the copy holds at least head_dim/2 entries: a
 * rotary_dim posenc accepts never reads past it, and one it refuses is reported as such. */
static int parse_component_map(PyObject *object, const posenc_rope_desc *desc, uint8_t **out)
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
    int64_t head_dim = desc->q.ndim ? desc->q.shape[desc->q.ndim - 1] : 0;
    int64_t rotated = head_dim - (int64_t)desc->rotary_offset;
    int64_t rotary_dim = desc->rotary_dim ? (int64_t)desc->rotary_dim : rotated;
    if (rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= rotated && n != rotary_dim / 2) {
        pyposenc_raisef(POSENC_INVALID_SHAPE,
                        "component_map: %zd entries, but rotary_dim/2 = %lld are expected", n,
                        (long long)(rotary_dim / 2));
        return -1;
    }
    size_t size = (size_t)(n > head_dim / 2 ? n : head_dim / 2);
    uint8_t *map = calloc(size, 1);
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
    *out = map;
    return 0;
}

void pyposenc_rope_args_free(pyposenc_rope_args *args)
{
    for (int i = 0; i < PYPOSENC_ROPE_VIEWS; i++) {
        pyposenc_view_release(&args->views[i]);
    }
    pyposenc_scaling_free(&args->storage);
    free(args->component_map);
    args->component_map = NULL;
}

int pyposenc_rope_args_parse(PyObject *positional, PyObject *kwargs, pyposenc_rope_args *args)
{
    static char *keywords[] = {"q", "k", "q_out", "k_out", "positions", "offset", "theta",
                               "style", "rotary_dim", "inverse", "attention_factor", "scaling",
                               "multimodal", "mrope_section", "layout", "bf16", "k_cache",
                               "slot_mapping", "v", "v_cache", "components", "component_map",
                               "rotary_offset", NULL};
    PyObject *objects[PYPOSENC_ROPE_VIEWS];
    for (int i = 0; i < PYPOSENC_ROPE_VIEWS; i++) {
        objects[i] = Py_None;
    }
    PyObject *scaling_object = Py_None, *section_object = Py_None, *map_object = Py_None;
    int offset = 0, style = 0, inverse = 0, multimodal = 0, bf16 = 0;
    unsigned int rotary_dim = 0, components = 0, rotary_offset = 0;
    double theta = 0.0, attention_factor = 0.0;
    const char *layout = "bthd";
    memset(args, 0, sizeof *args);
    if (!PyArg_ParseTupleAndKeywords(
            positional, kwargs, "O|$OOOOidiIpdOiOspOOOOIOI:rope_buffers", keywords, &objects[0],
            &objects[2], &objects[1], &objects[3], &objects[4], &offset, &theta, &style,
            &rotary_dim, &inverse, &attention_factor, &scaling_object, &multimodal,
            &section_object, &layout, &bf16, &objects[5], &objects[6], &objects[7], &objects[8],
            &components, &map_object, &rotary_offset)) {
        return -1;
    }
    int swap = 0;
    if (strcmp(layout, "bhtd") == 0) {
        swap = 1;
    } else if (strcmp(layout, "bthd") != 0) {
        pyposenc_raisef(POSENC_INVALID_ARGUMENT, "layout: '%s' is not 'bthd' or 'bhtd'", layout);
        return -1;
    }
    posenc_rope_desc *desc = &args->desc;
    *desc = (posenc_rope_desc){
        .position_offset = offset,
        .rotary_dim = rotary_dim,
        .rotary_offset = rotary_offset,
        .style = (posenc_rope_style)style,
        .theta = theta,
        .attention_factor = attention_factor,
        .inverse = inverse != 0,
        .multimodal = (posenc_rope_multimodal)multimodal,
        .components = components,
    };
    if (parse_section(section_object, desc->mrope_section) < 0 ||
        pyposenc_scaling_parse(scaling_object, &desc->scaling, &args->storage) < 0) {
        return -1;
    }
    posenc_tensor *tensors[PYPOSENC_ROPE_VIEWS] = {
        &desc->q, &desc->q_out, &desc->k, &desc->k_out, &desc->positions,
        &desc->k_cache, &desc->slot_mapping, &desc->v, &desc->v_cache};
    /* q and k are written unless an out array is given; with a cache, k is only read. */
    int written[PYPOSENC_ROPE_VIEWS] = {
        objects[1] == Py_None, 1, objects[3] == Py_None && objects[5] == Py_None, 1, 0, 1, 0, 0,
        1};
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
    if (swap) {
        for (int i = 0; i < PYPOSENC_ROPE_VIEWS; i++) {
            if (i != 4 && i != 6) {
                heads_first(tensors[i]);
            }
        }
    }
    if (parse_component_map(map_object, desc, &args->component_map) < 0) {
        goto fail;
    }
    desc->component_map = args->component_map;
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
