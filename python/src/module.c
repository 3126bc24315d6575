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
#define BACKEND_KIND(kind, value, name) POSENC_BACKEND_##kind,
    static const posenc_backend backends[] = {POSENC_BACKEND_LIST(BACKEND_KIND)};
#undef BACKEND_KIND
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
        if (strcmp(name, posenc_backend_name(backends[i])) == 0) {
            const char *reason = NULL;
            posenc_status status = posenc_backend_status(backends[i], &reason);
            return Py_BuildValue("(Ns)", PyBool_FromLong(status == POSENC_OK),
                                 status == POSENC_OK ? "" : (reason ? reason : ""));
        }
    }
#define BACKEND_NAME(kind, value, name) " " name
    return pyposenc_raisef(POSENC_INVALID_ARGUMENT,
                           "backend: '%s' is not one of:" POSENC_BACKEND_LIST(BACKEND_NAME),
                           name);
#undef BACKEND_NAME
}

/* posenc.rope's documentation; the first line is its signature for inspect and help(). */
#define ROPE_DOC                                                                                   \
    "rope($module, q, k=None, *, positions=None, position_ids=None, offset=0, theta=None, "             \
    "style='neox', "             \
    "rotary_dim=None, rotary_offset=0, inverse=False, scaling=None, multimodal=None, "             \
    "mrope_section=None, "                                                                         \
    "components=None, component_map=None, layout='bthd', out=None, k_out=None, "                   \
    "k_cache=None, slot_mapping=None, v=None, v_cache=None, attention_factor=None, cos=None, "     \
    "sin=None, num_heads=None, q_norm_weight=None, k_norm_weight=None, norm_eps=None, "            \
    "norm_weight_offset=None, context=None)\n"                                                     \
    "--\n"                                                                                         \
    "\n"                                                                                           \
    "Rotary position embedding of q (and k) of one attention layer.\n"                             \
    "\n"                                                                                           \
    "q: [batch, tokens, heads, head_dim] (\"bthd\"), [batch, heads, tokens, head_dim]\n"           \
    "(\"bhtd\", HF's), [tokens, heads, head_dim] (or [heads, tokens, head_dim] with \"bhtd\"),\n"  \
    "[tokens, head_dim] or [head_dim]; any strides (a slice of a fused qkv array works); f32,\n"   \
    "f16 or bf16. k likewise, with its own head count (grouped-query attention). num_heads:\n"     \
    "q's head count, reading q, out, k, k_out and v given without a heads dim ([batch,\n"         \
    "tokens, hidden] or [tokens, hidden]: ONNX's, vLLM's) as views of heads of q's size.\n"        \
    "Rotated in place unless out (for q) / k_out (for k) are given.\n"                             \
    "\n"                                                                                           \
    "positions: int32 or float32 [tokens] or [batch, tokens] (multimodal kinds: a component\n"     \
    "axis innermost); default offset + token index. theta: the frequency base (default\n"          \
    "10000, or an HF config's rope_theta). style: \"neox\" (half split, HF/Llama) or\n"            \
    "\"gptj\" (interleaved pairs). rotary_dim: dims rotated (default head_dim -\n"                 \
    "rotary_offset). rotary_offset: the first rotated dim (default 0; DeepSeek's MLA,\n"           \
    "ggml_rope_set_offset).\n"                                                                     \
    "inverse: rotate back. scaling: a dict in posenc form ({\"type\": \"yarn\", \"factor\":\n"     \
    "4.0, \"original_max_positions\": 4096, ...}, the fields of C's posenc_rope_scaling, e.g.\n"   \
    "\"yarn_ggml\" with freq_scale and ext_factor) or an HF transformers rope_scaling /\n"         \
    "rope_parameters dict or model config, as HF stores it (docs/python-hf.md); what the\n"        \
    "config says of theta, rotary_dim, M-RoPE and the attention factor applies unless given\n"     \
    "here. multimodal: None, \"mrope\", \"mrope_interleaved\" (with mrope_section (t, h, w)),\n"   \
    "\"vision_2d\", \"pixtral\", \"positions_map\": positions [tokens, components] (or\n"          \
    "[batch, tokens, components]), components 1 to 4, and frequency j (of rotary_dim/2)\n"         \
    "uses component component_map[j]; or \"vision_ggml\": ggml's vision mode, positions\n"         \
    "[tokens, 4], mrope_section ggml's four sections, scaling None or \"yarn_ggml\".\n"            \
    "attention_factor: scales cos and sin (default 1 or the scaling's own).\n"                     \
    "\n"                                                                                           \
    "cos, sin: the caller's own tables (HF, ONNX RotaryEmbedding, vLLM's cos_sin_cache halves),\n" \
    "f32, f16 or bf16, any strides, used as given: pair (x_a, x_b) of a token becomes\n"          \
    "(x_a c - x_b s, x_a s + x_b c). [rows, width], the row a token's position (positions or\n"   \
    "offset + index); or rows gathered per token, [batch or 1, tokens, width] (or HF's\n"        \
    "[batch, 1, tokens, width]), with no positions. width: rotary_dim/2, or rotary_dim (HF's\n"  \
    "duplicated halves, GPT-J's repeat_interleave). theta, scaling, multimodal and\n"            \
    "attention_factor are then left unset.\n"                                                     \
    "\n"                                                                                           \
    "q_norm_weight, k_norm_weight: QK RMSNorm fused before the rotation (Qwen3, Gemma 3, OLMo\n"   \
    "2): q and k are normalized on read, x * (w + norm_weight_offset) / sqrt(mean(x^2) +\n"        \
    "norm_eps), then rotated; k_cache takes the normalized k, v is copied as it is. 1-D, f32,\n"  \
    "f16 or bf16, any stride: [head_dim] for a norm over each head (Qwen3, Gemma 3), or\n"        \
    "[heads * head_dim] over the token's whole q or k (OLMo 2). norm_eps: default 1e-6.\n"        \
    "norm_weight_offset: added to each weight, 1 for Gemma's x * (1 + w) (default 0). Each of\n" \
    "the two is refused without a weight.\n"                                                      \
    "\n"                                                                                           \
    "Paged KV cache (vLLM's slot_mapping): k_cache [num_slots, kv_heads, head_dim] or\n"           \
    "[num_blocks, block_size, kv_heads, head_dim] (slot s is row s % block_size of block\n"        \
    "s // block_size); with layout \"bhtd\" heads come first: [kv_heads, num_slots, head_dim]\n"   \
    "or [num_blocks, kv_heads, block_size, head_dim]. Any strides, k's dtype. The rotated\n"       \
    "k of token (b, t) goes into slot slot_mapping[b, t] (int32 [tokens] or [batch,\n"             \
    "tokens]); a slot of -1 (padding) or past the cache writes nothing. v (k's shape) is\n"        \
    "copied into the same slot of v_cache (k_cache's shape). With k_cache, k itself is only\n"     \
    "read unless k_out is given. context: a posenc.Context (default: default_context()).\n"        \
    "\n"                                                                                           \
    "Returns the array written for q, or (q, k) when k is given (k as it is, unrotated,\n"         \
    "when k_cache is given without k_out)."

const char pyposenc_rope_doc[] =
    "Rope(config=None, *, theta=None, head_dim=None, rotary_dim=None, rotary_offset=0,\n"
    "     style='neox', scaling=None, layout='bthd', multimodal=None, mrope_section=None,\n"
    "     components=None, component_map=None, attention_factor=None, inverse=False,\n"
    "     layer_type=None, max_position_embeddings=None, num_heads=None, norm_eps=None,\n"
    "     norm_weight_offset=None, context=None)\n"
    "\n"
    "A RoPE resolved once, applied by calls that run in C. config: an HF config (object,\n"
    "dict, or a config.json path or model folder) or rope dict, as posenc.rope's scaling=\n"
    "takes it; the keywords are posenc.rope's and win over the config. head_dim: the head\n"
    "size, for configs that derive the rotary dims from it (partial_rotary_factor). norm_eps\n"
    "and norm_weight_offset are the model's QK norm (norm_eps by default the config's\n"
    "rms_norm_eps); its weights, a layer's, come with each call.\n"
    "\n"
    "rope(q, k=None, *, positions=None, position_ids=None, offset=0, out=None, k_out=None,\n"
    "     k_cache=None, slot_mapping=None, v=None, v_cache=None, cos=None, sin=None,\n"
    "     q_norm_weight=None, k_norm_weight=None, context=None)\n"
    "applies it as posenc.rope does, and returns what posenc.rope returns.";

#define DEFAULT_CONTEXT_DOC                                                                       \
    "default_context()\n--\n\n"                                                                  \
    "The process's shared Context, made on first use (the best device, or the one the\n"        \
    "POSENC_DEVICE variable names). Calls on it from several threads take turns."

static PyMethodDef methods[] = {
    {"devices", devices, METH_NOARGS, "Every device of every available backend, as dicts."},
    {"version", version, METH_NOARGS, "The version of the linked posenc library."},
    {"backend_status", backend_status, METH_VARARGS,
     "backend_status(name) -> (available, reason)"},
    {"rope", (PyCFunction)(void (*)(void))pyposenc_rope_entry, METH_FASTCALL | METH_KEYWORDS,
     ROPE_DOC},
    {"_rope_resolved", (PyCFunction)(void (*)(void))pyposenc_rope_resolved,
     METH_VARARGS | METH_KEYWORDS,
     "_rope_resolved(context, q, **keywords): RoPE on buffers, every option resolved (the\n"
     "keywords posenc._rope_arguments returns); see posenc.rope."},
    {"_sinusoidal_resolved", (PyCFunction)(void (*)(void))pyposenc_sinusoidal_resolved,
     METH_VARARGS | METH_KEYWORDS,
     "_sinusoidal_resolved(context, out, **keywords): the sinusoidal encoding on buffers,\n"
     "every option resolved (posenc._sinusoidal_arguments); see posenc.sinusoidal."},
    {"_prepare_resolved", pyposenc_prepare_resolved, METH_VARARGS,
     "_prepare_resolved(context, ropes, sinusoidals): posenc_prepare for lists of keyword\n"
     "dicts in _rope_resolved's and _sinusoidal_resolved's own form; see Context.prepare."},
    {"_rope_plain", (PyCFunction)(void (*)(void))pyposenc_rope_plain, METH_FASTCALL,
     "_rope_plain(context, q, k, offset): posenc.rope's call with default options; None, or\n"
     "NotImplemented for arrays it leaves to the converter."},
    {"default_context", pyposenc_default_context, METH_NOARGS, DEFAULT_CONTEXT_DOC},
    {"_set_rope_hooks", pyposenc_set_rope_hooks, METH_VARARGS,
     "_set_rope_hooks(resolve, convert, cache_key, bad_keyword, config_keys, read_fields):\n"
     "the Python layer's parts of posenc.rope and posenc.Rope."},
    {"_set_prepare_hook", pyposenc_set_prepare_hook, METH_O,
     "_set_prepare_hook(convert): what converts Context.prepare's arguments."},
    {"_bench_c_rope", (PyCFunction)(void (*)(void))pyposenc_bench_c_rope, METH_FASTCALL,
     "_bench_c_rope(context, q, k, offset, calls) -> seconds per posenc_rope call, timed in C."},
    {"error", pyposenc_error_of, METH_VARARGS,
     "error(status, message) -> posenc.Error: the exception of a status of the library's list\n"
     "(\"INVALID_ARGUMENT\"), with .status and .code, for the Python layer to raise."},
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
    if (pyposenc_errors_init(module) < 0 || pyposenc_names_init(module) < 0 ||
        pyposenc_context_init(module) < 0 ||
        pyposenc_rope_object_init(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
