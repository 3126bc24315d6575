/* SPDX-License-Identifier: MIT */
/* Declarations shared by the files of the posenc._posenc extension module (stable ABI). */
#ifndef POSENC_PYTHON_PYPOSENC_H
#define POSENC_PYTHON_PYPOSENC_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "compat.h"

#include <posenc/posenc.h>

/* errors.c: posenc.Error and one subclass per status, made from POSENC_STATUS_LIST. */
int pyposenc_errors_init(PyObject *module);
/* Raises the class of `status` with `message` (or the status's own text when empty). */
void pyposenc_raise(posenc_status status, const char *message);
/* The same with a printf-style message. Returns NULL, for `return pyposenc_raisef(...)`. */
PyObject *pyposenc_raisef(posenc_status status, const char *format, ...);
/* _posenc.error(status, message): the exception pyposenc_raise would raise, not raised, for the
 * Python layer's own checks. status: "INVALID_ARGUMENT" or "POSENC_INVALID_ARGUMENT". */
PyObject *pyposenc_error_of(PyObject *self, PyObject *args);

/* names.c: _posenc.NAMES, name_value and canonical_name, from the library's name lists. */
int pyposenc_names_init(PyObject *module);
/* The value of `value` (a name, or an int checked against the list) in the list `kind`
 * ("rope_scaling_type"); -1 with posenc.InvalidArgument, its message starting with `what`. */
int pyposenc_name_value(const char *kind, PyObject *value, const char *what, int *out);

/* context.c: the Context type. Calls on one context are serialised by its lock, taken with the
 * GIL released, because posenc needs a context to itself during an operation. */
typedef struct pyposenc_context {
    PyObject_HEAD
    posenc_context *context;
    PyThread_type_lock lock;
} pyposenc_context;

int pyposenc_context_init(PyObject *module);
/* The Context type (borrowed). */
PyObject *pyposenc_context_type(void);
/* The posenc context of a Context object, or NULL with an exception set. */
pyposenc_context *pyposenc_context_check(PyObject *object);
/* Builds the dict that describes a device (devices(), Context.device). */
PyObject *pyposenc_device_dict(const posenc_device_info *info);

/* tensors.c: Python buffers as posenc tensor views. */
struct pyposenc_dl_managed;

typedef struct pyposenc_view {
    Py_buffer buffer;
    int held;
    /* An object without the buffer protocol but with __dlpack__: the capsule and the tensor
     * taken from it, whose deleter runs at release. */
    PyObject *capsule;
    struct pyposenc_dl_managed *managed;
} pyposenc_view;

enum pyposenc_kind {
    PYPOSENC_DATA,      /* f32, f16, or bf16 (as uint16 with the bf16 hint) */
    PYPOSENC_POSITIONS, /* i32 or f32 */
    PYPOSENC_INDICES,   /* i32, f32, or i64 (as PYPOSENC_DTYPE_I64, for positions.c to narrow) */
};

/* int64 indices as a view holds them before positions.c narrows them to int32: never handed to
 * the library. */
#define PYPOSENC_DTYPE_I64 ((posenc_dtype)0x7f)

/* Fills `tensor` from `object` (None leaves it absent). `name` names the argument in errors;
 * `writable` refuses read-only memory; `bf16` reads 16-bit unsigned integers as bf16.
 * Returns 0, or a negative value with a posenc.Error set: PYPOSENC_NOT_PLAIN when the object
 * has no buffer or an element format outside the kind (what the Python layer may still convert:
 * bf16, torch), -1 for the other faults. */
#define PYPOSENC_NOT_PLAIN (-2)
int pyposenc_view_get(PyObject *object, const char *name, enum pyposenc_kind kind,
                      int writable, int bf16, pyposenc_view *view, posenc_tensor *tensor);
void pyposenc_view_release(pyposenc_view *view);
/* Fills `tensor` with dims and byte strides (NULL: packed row-major), refusing what posenc
 * cannot take on a bare pointer (no dims, size 0, negative or zero strides). 0 or -1. */
int pyposenc_tensor_fill(const char *name, posenc_dtype dtype, void *host, int ndim,
                         const int64_t *shape, const int64_t *strides, int64_t itemsize,
                         posenc_tensor *tensor);
/* Swaps dims `a` and `b` of a tensor (the heads and tokens of a [b, h, t, d] view). */
void pyposenc_tensor_swap(posenc_tensor *tensor, uint32_t a, uint32_t b);

/* dlpack.c: `object.__dlpack__()` as a tensor view of CPU memory: f32, f16, bf16 (or, for
 * positions, i32, f32), any strides. Returns 0 with the view holding the tensor, or
 * PYPOSENC_NOT_PLAIN with a posenc.Error set. */
int pyposenc_dlpack_get(PyObject *object, const char *name, enum pyposenc_kind kind,
                        pyposenc_view *view, posenc_tensor *tensor);
void pyposenc_dlpack_release(pyposenc_view *view);

/* positions.c: positions, position_ids and slot mappings (see the file's comment). */
typedef struct pyposenc_indices {
    pyposenc_view view;
    int32_t *copy;       /* int64 narrowed, packed; NULL when the view is used as it is */
    int32_t small[64];   /* the copy of a short array (a decode step's), with no allocation */
} pyposenc_indices;

/* HF's order: a leading dim of 1 (ids shared by the batch) dropped; with COMPONENTS_FIRST, the
 * component axis moved from first to innermost. */
#define PYPOSENC_HF_IDS 1
#define PYPOSENC_HF_COMPONENTS_FIRST 2

/* Fills `tensor` from `object` (None leaves it absent): 0, PYPOSENC_NOT_PLAIN for an object
 * that has no buffer or a dtype other than int32, int64 and float32 (for the Python layer to
 * convert), -1 for the other faults (a value outside int32 named with `name`). */
int pyposenc_indices_get(PyObject *object, const char *name, int hf_order,
                         pyposenc_indices *indices, posenc_tensor *tensor);
void pyposenc_indices_release(pyposenc_indices *indices);

/* scaling.c: a dict in posenc form to posenc_rope_scaling. The arrays it points to are owned by
 * `storage` (free with pyposenc_scaling_free). */
typedef struct pyposenc_scaling_storage {
    double *arrays[3];
} pyposenc_scaling_storage;

int pyposenc_scaling_parse(PyObject *dict, posenc_rope_scaling *scaling,
                           pyposenc_scaling_storage *storage);
void pyposenc_scaling_free(pyposenc_scaling_storage *storage);

/* op_args.c: a RoPE call's options (everything but the arrays, positions and offset), as a
 * descriptor with the arrays it points to. The layout "bhtd" reads q, k, their outs, v and the
 * caches heads before tokens; num_heads reads q, k, their outs and v given without a heads dim
 * ([batch, tokens, hidden] or [tokens, hidden], ONNX's and vLLM's) as views with one. */
typedef struct pyposenc_rope_options {
    posenc_rope_desc desc; /* no tensors, no position_offset */
    int heads_first;       /* layout "bhtd" */
    uint32_t num_heads;    /* q's heads, splitting the hidden dim; 0 when not given */
    double config_norm_eps; /* the config's rms_norm_eps: norm_eps where a call has weights */
    pyposenc_scaling_storage storage;
    uint8_t *component_map;
    Py_ssize_t component_count;
} pyposenc_rope_options;

/* Fills `options` from a dict of _rope_resolved's option keywords (theta, style, rotary_dim,
 * rotary_offset, inverse, attention_factor, scaling, multimodal, mrope_section, components,
 * component_map, layout, num_heads, norm_eps, norm_weight_offset, config_norm_eps; style and
 * multimodal as their enum values). 0, or -1 with the error raised and nothing to free. */
int pyposenc_rope_options_parse(PyObject *dict, pyposenc_rope_options *options);
void pyposenc_rope_options_free(pyposenc_rope_options *options);
/* Refuses a component_map whose length does not fit the pairs q's call rotates. 0 or -1. */
int pyposenc_rope_component_map_check(const pyposenc_rope_options *options,
                                      const posenc_tensor *q);
/* The layout of `options` applied to the arrays of `desc` as the caller gave them: with
 * num_heads, q, q_out, k, k_out and v without a heads dim split into heads of q's head size;
 * with "bhtd", heads and tokens swapped. 0, or -1 with the posenc error raised, naming the
 * array, num_heads or layout. */
int pyposenc_rope_layout(const pyposenc_rope_options *options, posenc_rope_desc *desc);
/* The config's rms_norm_eps as norm_eps, where `desc` has QK norm weights and no norm_eps of
 * its own (a call without weights must leave norm_eps unset: posenc refuses it alone). */
void pyposenc_rope_norm_defaults(const pyposenc_rope_options *options, posenc_rope_desc *desc);

/* An integer argument (int, or anything with __index__: numpy and torch integer scalars) in
 * [minimum, maximum]: a TypeError for a float or a non-integer, a posenc InvalidArgument
 * naming `name` out of range. 0 or -1. */
int pyposenc_index(PyObject *object, const char *name, long long minimum, long long maximum,
                   long long *out);
int pyposenc_u32(PyObject *object, const char *name, uint32_t *out);

/* The keyword arguments of one _rope_resolved call (q positional or keyword). Free with
 * pyposenc_rope_args_free (also after a failed parse). */
#define PYPOSENC_ROPE_VIEWS 13
typedef struct pyposenc_rope_args {
    posenc_rope_desc desc;
    pyposenc_view views[PYPOSENC_ROPE_VIEWS];
    pyposenc_rope_options options;
} pyposenc_rope_args;

int pyposenc_rope_args_parse(PyObject *positional, PyObject *kwargs, pyposenc_rope_args *args);
void pyposenc_rope_args_free(pyposenc_rope_args *args);

/* The same for one sinusoidal call (sinusoidal's keywords, out positional or keyword). */
typedef struct pyposenc_sinusoidal_args {
    posenc_sinusoidal_desc desc;
    pyposenc_view views[3];
} pyposenc_sinusoidal_args;

int pyposenc_sinusoidal_args_parse(PyObject *positional, PyObject *kwargs,
                                   pyposenc_sinusoidal_args *args);
void pyposenc_sinusoidal_args_free(pyposenc_sinusoidal_args *args);

/* errors.c: when the exception set is a posenc.Error, raises it again with its message
 * preceded by `place` ("rope[1]."), so that it names the call it comes from. Other
 * exceptions stay as they are. */
void pyposenc_error_prefix(const char *place);

/* prepare.c: Context.prepare, which has the Python layer's converter (given by
 * _set_prepare_hook) turn its arguments into two lists and prepares them itself, and
 * _prepare_resolved(context, ropes, sinusoidals), which takes such lists of keyword dicts in
 * _rope_resolved's and _sinusoidal_resolved's own form. */
PyObject *pyposenc_context_prepare(PyObject *context, PyObject *args, PyObject *kwargs);
PyObject *pyposenc_set_prepare_hook(PyObject *module, PyObject *function);
PyObject *pyposenc_prepare_resolved(PyObject *module, PyObject *args);

/* ops.c: the operations. _rope_resolved(context, q, **keywords) and
 * _sinusoidal_resolved(context, out, **keywords): every option resolved, every array a buffer
 * (or a DLPack tensor) C reads as it is; what the Python layer's converters return. */
PyObject *pyposenc_rope_resolved(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *pyposenc_sinusoidal_resolved(PyObject *module, PyObject *args, PyObject *kwargs);
/* The same rope call from C: `positional` (a tuple, q or nothing) and the keywords. 0, or -1
 * with the error raised. */
int pyposenc_run_rope_resolved(pyposenc_context *self, PyObject *positional, PyObject *kwargs);
/* rope with every other option at its default: posenc.rope's common call. `offset` NULL
 * means 0. Returns 1 when done, 0 (nothing written, no error) when q or k is not a plain
 * f32/f16 buffer or offset is not a C int, so that the caller has them converted (which
 * converts or raises as posenc.rope always does); -1 with an exception set. */
int pyposenc_rope_plain_run(PyObject *context, PyObject *q, PyObject *k, PyObject *offset);
/* _rope_plain(context, q, k, offset): the same from Python, None when done or
 * NotImplemented. */
PyObject *pyposenc_rope_plain(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* The descriptor of _rope_plain's call, the same as the converted call makes for those
 * defaults (so that both give the same bits). */
void pyposenc_rope_plain_desc(posenc_rope_desc *desc, int offset);
/* Runs one rope call on the context, the GIL released (or, with `keep_gil`, a small call and
 * the context free at once, held); -1 with the error raised on failure. */
int pyposenc_run_rope(pyposenc_context *self, const posenc_rope_desc *desc, int keep_gil);

/* rope_object.c: posenc.Rope, and posenc.rope, which runs the Rope its options resolve to
 * (cached by their values); _set_rope_hooks(resolve, convert, cache_key, bad_keyword,
 * config_keys, read_fields) gives the Python layer's parts. default_context() is context.c's. */
int pyposenc_rope_object_init(PyObject *module);
PyObject *pyposenc_rope_entry(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames);
PyObject *pyposenc_set_rope_hooks(PyObject *module, PyObject *args);
PyObject *pyposenc_default_context(PyObject *module, PyObject *unused);
/* posenc.Rope's documentation (module.c keeps the docs). */
extern const char pyposenc_rope_doc[];
#define PYPOSENC_ROPE_DOC pyposenc_rope_doc

/* bench.c: _bench_c_rope(context, q, k, offset, calls) -> seconds per posenc_rope call, timed
 * in C on the buffers _rope_plain would use (the C side of `python -m posenc bench`). */
PyObject *pyposenc_bench_c_rope(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
