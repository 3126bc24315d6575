# SPDX-License-Identifier: MIT
# posenc for Python: RoPE and sinusoidal position encodings applied to numpy (and torch CPU)
# arrays in place with no copy, by the posenc C library (posenc._posenc, stable ABI).
"""Transformer position encodings (RoPE, sinusoidal) on CPU, Vulkan and OpenCL devices.

The arrays are used where they are: any strides, f32, f16, and bf16 (``ml_dtypes.bfloat16``
numpy arrays, or torch CPU tensors). Calls release the GIL while they work. Failures raise
:class:`posenc.Error` subclasses carrying ``.status`` (``"POSENC_INVALID_SHAPE"``) and the
library's message naming the argument at fault; a failed call writes nothing.
"""

from __future__ import annotations

import difflib
import inspect
import operator
import math
import os
import warnings
from collections.abc import Mapping

import numpy as np

from . import _posenc, hf
from .hf import HFWarning
from ._posenc import Context, Error, InputError, DeviceFailure, HostError
from ._posenc import rope, default_context, Rope

__version__ = _posenc.version()

# Every status class the extension made from the library's status list (InvalidShape, ...).
_ERRORS = {
    name: obj
    for name, obj in vars(_posenc).items()
    if isinstance(obj, type) and issubclass(obj, Error)
}
globals().update(_ERRORS)

__all__ = [
    "rope",
    "Rope",
    "hf",
    "HFWarning",
    "sinusoidal",
    "devices",
    "default_context",
    "Context",
    "version",
    "NAMES",
    *sorted(_ERRORS),
]

# The canonical names of the library's lists, by value: "rope_style", "rope_scaling_type",
# "rope_multimodal", "sinusoidal_layout" and "dtype" (posenc_<kind>_name). Names are read by the
# library's posenc_<kind>_from_name (_name below): underscores or hyphens, any case.
NAMES = _posenc.NAMES

_PLAIN_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float16)})
_POSITION_DTYPES = frozenset({np.dtype(np.int32), np.dtype(np.float32)})

def version() -> str:
    """The version of the posenc C library in this package."""
    return _posenc.version()


def devices() -> list[dict]:
    """Every device of every available backend (Vulkan, OpenCL, then the CPU), as dicts with
    name, backend, index, selector ("vulkan:0"), kind ("discrete GPU", "CPU", ...), vendor,
    driver, memory_bytes and the device's capabilities."""
    return _posenc.devices()


def _error(status: str, message: str) -> Error:
    """The posenc error of `status` ("INVALID_ARGUMENT"), made by the extension from the
    library's status list: its class, .status and .code as the C calls raise them."""
    return _posenc.error(status, message)


_bf16_dtype = None


def _bfloat16():
    global _bf16_dtype
    if _bf16_dtype is None:
        try:
            import ml_dtypes
            _bf16_dtype = np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            _bf16_dtype = False
    return _bf16_dtype


def _buffer(obj, name, written=False):
    """(object with the buffer protocol, is_bf16) for an array argument. bf16 travels as its
    16-bit pattern: numpy cannot export ml_dtypes' bfloat16 through the buffer protocol."""
    if obj is None:
        return None, False
    if type(obj) is np.ndarray and obj.dtype in _PLAIN_DTYPES:
        return obj, False
    if isinstance(obj, np.ndarray):
        bf16 = _bfloat16()
        if bf16 is not False and obj.dtype == bf16:
            return obj.view(np.uint16), True
        return obj, False
    module = type(obj).__module__ or ""
    if module.startswith("torch"):
        return _torch_array(obj, name, written)
    return obj, False


def _torch_memory(tensor, name):
    """Raises for a tensor whose values are not in CPU memory that posenc can address (one on
    another device, a sparse one)."""
    import torch
    if tensor.device.type != "cpu":
        raise _error("INVALID_ARGUMENT",
                     f"{name}: a torch tensor on {tensor.device}; only CPU tensors are accepted")
    if tensor.layout != torch.strided:
        raise _error("INVALID_ARGUMENT",
                     f"{name}: a torch tensor of layout {tensor.layout}; only dense (strided) "
                     "tensors are accepted")


def _torch_array(tensor, name, written):
    """A torch CPU tensor as a numpy array on its memory (bf16 as its 16-bit pattern), or a
    posenc error naming the argument for one posenc cannot use in place."""
    import torch
    _torch_memory(tensor, name)
    if written and tensor.requires_grad:
        # autograd cannot see a write made outside it: its gradients would silently be wrong
        raise _error("INVALID_ARGUMENT",
                     f"{name}: a torch tensor that requires grad; posenc writes outside autograd, "
                     f"so pass {name}.detach() or a tensor made under torch.no_grad()")
    if tensor.is_neg():
        # the memory holds the values before the pending negation: numpy refuses it too
        raise _error("INVALID_ARGUMENT",
                     f"{name}: a torch view with a pending negation; pass "
                     f"{name}.resolve_neg()")
    if tensor.dtype == torch.bfloat16:
        return tensor.detach().view(torch.int16).numpy().view(np.uint16), True
    if tensor.dtype not in (torch.float32, torch.float16):
        raise _error("INVALID_DTYPE",
                     f"{name}: {tensor.dtype} is not float32, float16 or bfloat16")
    return tensor.detach().numpy(), False


def _positions(positions, name="positions"):
    """int32 and float32 arrays as they are; other integers (Python lists, int64) checked and
    converted; float64 only when every value is exact in float32."""
    if positions is None or (type(positions) is np.ndarray
                             and positions.dtype in _POSITION_DTYPES):
        return positions
    module = type(positions).__module__ or ""
    if module.startswith("torch"):
        _torch_memory(positions, name)
        try:
            positions = positions.detach().resolve_neg().numpy()
        except TypeError:  # a dtype numpy lacks (bfloat16, ...)
            raise _error("INVALID_DTYPE",
                         f"{name}: {positions.dtype} is not int32 or float32") from None
    array = np.asarray(positions)
    if array.dtype in (np.int32, np.float32):
        return positions if isinstance(positions, np.ndarray) else array
    if np.issubdtype(array.dtype, np.integer):
        if array.size and (array.min() < -2**31 or array.max() > 2**31 - 1):
            raise _error("INVALID_ARGUMENT",
                         f"{name}: a value is outside int32")
        return array.astype(np.int32)
    if np.issubdtype(array.dtype, np.floating):
        converted = array.astype(np.float32)
        if not np.array_equal(converted.astype(array.dtype), array, equal_nan=True):
            raise _error("INVALID_DTYPE",
                         f"{name}: {array.dtype} values that float32 cannot hold exactly; "
                         "pass int32 or float32")
        return converted
    raise _error("INVALID_DTYPE",
                 f"{name}: dtype {array.dtype} is not int32 or float32")


# What scaling= (and Rope's config) takes, for the TypeError that refuses anything else.
_SCALING_FORMS = ("a dict (posenc's form, an HF rope_scaling / rope_parameters dict, or a "
                  "config.json's contents), an HF config object, the path of a config.json "
                  "or a model folder, or None")
# Attributes of which one marks an object as an HF config (PretrainedConfig, SimpleNamespace).
_CONFIG_ATTRIBUTES = ("rope_scaling", "rope_parameters", "rope_theta", "max_position_embeddings",
                      "head_dim", "hidden_size", "text_config")


def _scaling_source(scaling):
    """scaling= as a dict or a config object; a path read as its config.json; a TypeError
    listing the accepted forms for anything else."""
    if scaling is None or isinstance(scaling, Mapping):
        return scaling
    if isinstance(scaling, (str, os.PathLike)):
        if os.path.exists(scaling):
            try:
                return hf.load_config(scaling)
            except (OSError, ValueError) as error:
                raise _error("INVALID_ARGUMENT",
                             f"scaling: {error}") from None
        raise TypeError(f"scaling: {str(scaling)!r} is not a file or folder; scaling takes "
                        f"{_SCALING_FORMS}")
    if not isinstance(scaling, (list, tuple, bytes, int, float, np.ndarray)) and any(
            hf._get(scaling, name) is not None for name in _CONFIG_ATTRIBUTES):
        return scaling
    raise TypeError(f"scaling: {type(scaling).__name__} is not accepted; scaling takes "
                    f"{_SCALING_FORMS}")


def _scaling(scaling, head_dim, rotary_dim, theta, **hf_options):
    """(posenc-form dict or None, what an HF config also sets: theta, rotary_dim, multimodal,
    mrope_section, attention_factor). hf_options: scaling_from_hf's layer_type and
    max_position_embeddings."""
    scaling = _scaling_source(scaling)
    if scaling is None or hf.is_posenc_form(scaling):
        return scaling, {}
    try:
        mapped = hf.scaling_from_hf(scaling, head_dim=head_dim, rotary_dim=rotary_dim,
                                    **hf_options)
    except ValueError as error:
        raise _error("INVALID_ARGUMENT", f"scaling: {error}") from None
    if mapped["theta"] is None and theta is None and hf.is_rope_dict(scaling):
        warnings.warn("scaling: the rope dict has no rope_theta (a transformers < 5 "
                      "rope_scaling); theta 10000 is used. Pass theta= (the config's "
                      "rope_theta), or the whole config", hf.HFWarning, stacklevel=4)
    extras = {key: value for key, value in mapped.items()
              if key != "scaling" and value is not None}
    norm_eps = _config_norm_eps(scaling)
    if norm_eps is not None:
        extras["norm_eps"] = norm_eps
    return mapped["scaling"], extras


def _config_norm_eps(config):
    """A config's rms_norm_eps (its text_config's for a multimodal one), or None: the eps of
    the models' RMSNorms, q_norm and k_norm included (Qwen3, Gemma 3, OLMo 2)."""
    for source in (config, hf._get(config, "text_config")):
        value = None if source is None else hf._get(source, "rms_norm_eps")
        if (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) and value > 0):
            return float(value)
    return None


def _unsigned(name, value, maximum=0xFFFFFFFF):
    """An integer argument in [0, maximum] (None: 0): TypeError for a non-integer (1.5), a
    posenc InvalidArgument naming it out of range (2**40 + 32 never wraps to 32)."""
    if value is None:
        return 0
    return _integer(name, value, 0, maximum)


def _number(name, value):
    """A float argument (None: 0, the library's default), TypeError for a non-number; its range
    is the library's to check, naming it."""
    if value is None:
        return 0.0
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: {value!r} is not a number") from None


def _integer(name, value, minimum, maximum):
    if isinstance(value, float):
        raise TypeError(f"{name}: {value!r} is not an integer; pass an int")
    try:
        number = operator.index(value)  # numpy and torch integer scalars too
    except TypeError:
        raise TypeError(f"{name}: {value!r} is not an integer; pass an int") from None
    if not minimum <= number <= maximum:
        raise _error("INVALID_ARGUMENT",
                     f"{name}: {number} is outside {minimum} to {maximum}")
    return number


def _resolve_rope(config=None, *, head_dim=None, theta=None, style="neox", rotary_dim=None,
                  rotary_offset=0, inverse=False, scaling=None, multimodal=None,
                  mrope_section=None, components=None, component_map=None, layout="bthd",
                  attention_factor=None, layer_type=None, max_position_embeddings=None,
                  num_heads=None, norm_eps=None, norm_weight_offset=None):
    """What a Rope resolves once (posenc.Rope's and posenc.rope's options): _rope_resolved's
    option keywords, every name turned into its value and every number checked. theta left
    unset stays 0, the library's default (10000), which caller cos/sin tables need; norm_eps
    and norm_weight_offset likewise stay 0 unless given (the library refuses them without
    the QK norm's weights, which come with each call). A config's rms_norm_eps becomes
    config_norm_eps, the norm_eps of the calls that pass weights and no norm_eps."""
    if config is not None:
        if scaling is not None:
            raise _error("INVALID_ARGUMENT",
                         "scaling: given with config; pass one of them")
        scaling = config
    head_dim = None if head_dim is None else _unsigned("head_dim", head_dim)
    rotary_dim = None if rotary_dim is None else _unsigned("rotary_dim", rotary_dim)
    form, extras = _scaling(scaling, head_dim, rotary_dim, theta, layer_type=layer_type,
                            max_position_embeddings=max_position_embeddings)
    if attention_factor is None:
        attention_factor = extras.get("attention_factor")
    if mrope_section is None:
        mrope_section = extras.get("mrope_section")
    if multimodal is None:
        multimodal = extras.get("multimodal")
    if rotary_dim is None:
        rotary_dim = extras.get("rotary_dim")
    if theta is None:
        theta = extras.get("theta")
    if mrope_section is not None:
        if isinstance(mrope_section, (str, bytes)) or len(mrope_section) not in (3, 4):
            raise _error("INVALID_ARGUMENT",
                         "mrope_section: three frequency counts (t, h, w) or ggml's four "
                         "sections are expected")
        mrope_section = tuple(_unsigned(f"mrope_section[{i}]", v)
                              for i, v in enumerate(mrope_section))
    if component_map is not None and not isinstance(component_map, (bytes, bytearray)):
        component_map = [int(c) for c in np.asarray(component_map).reshape(-1)]
    if layout not in ("bthd", "bhtd"):
        raise _error("INVALID_ARGUMENT",
                     f"layout: {layout!r} is not 'bthd' or 'bhtd'")
    return dict(
        theta=0.0 if theta is None else float(theta), style=_name("rope_style", style, "style"),
        rotary_dim=_unsigned("rotary_dim", rotary_dim),
        rotary_offset=_unsigned("rotary_offset", rotary_offset), inverse=bool(inverse),
        attention_factor=float(attention_factor or 0.0),
        scaling=None if form is None else dict(form),
        multimodal=_name("rope_multimodal", multimodal, "multimodal"), mrope_section=mrope_section,
        components=_unsigned("components", components), component_map=component_map,
        layout=layout, num_heads=_unsigned("num_heads", num_heads),
        norm_eps=_number("norm_eps", norm_eps),
        norm_weight_offset=_number("norm_weight_offset", norm_weight_offset),
        config_norm_eps=float(extras.get("norm_eps", 0.0)))


def _resolve_rope_named(*args, **options):
    """_resolve_rope for posenc.Rope(...): an unknown keyword gets the closest known one."""
    known = inspect.signature(_resolve_rope).parameters
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"Rope() got an unexpected keyword argument {name!r}{hint}")
    return _resolve_rope(*args, **options)


def _cache_key(value):
    """A hashable key of an option's content that posenc.rope's cache cannot make itself, or
    None (the call then resolves it anew): configs by the fields read from them, paths with
    their modification time, numpy arrays by their bytes."""
    if isinstance(value, (str, os.PathLike)):
        try:
            return ("path", os.fspath(value), os.stat(value).st_mtime_ns)
        except OSError:
            return None
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, Mapping):
        return None
    if any(hf._get(value, name) is not None for name in _CONFIG_ATTRIBUTES):
        return ("config", hf.config_key(value))
    return None


_CALL_KEYWORDS = ("k", "positions", "position_ids", "offset", "theta", "style", "rotary_dim",
                  "rotary_offset", "inverse", "scaling", "multimodal", "mrope_section",
                  "components", "component_map", "layout", "out", "k_out", "k_cache",
                  "slot_mapping", "v", "v_cache", "attention_factor", "cos", "sin", "num_heads",
                  "q_norm_weight", "k_norm_weight", "norm_eps", "norm_weight_offset", "context")


def _bad_keyword(call, name):
    """Raises the TypeError of an unknown keyword, with the closest known one."""
    known = _CALL_KEYWORDS if call == "rope()" else (
        "k", "positions", "position_ids", "offset", "out", "k_out", "k_cache", "slot_mapping",
        "v", "v_cache", "cos", "sin", "q_norm_weight", "k_norm_weight", "context")
    close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise TypeError(f"{call} got an unexpected keyword argument {name!r}{hint}")


def _name(kind, value, what):
    """The value of a name of the library's list `kind` (None: 0; an int as it is, for the
    library to check), or InvalidArgument listing the canonical names."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    return _posenc.name_value(kind, str(value), what)


def _slots(slot_mapping):
    """slot_mapping as int32: int32 arrays as they are, other integers (lists, int64) checked
    and converted; anything else left for posenc to refuse, naming the field."""
    if slot_mapping is None or (type(slot_mapping) is np.ndarray
                                and slot_mapping.dtype == np.int32):
        return slot_mapping
    module = type(slot_mapping).__module__ or ""
    if not module.startswith("torch") and not isinstance(slot_mapping, (np.ndarray, list, tuple)) \
            and hasattr(slot_mapping, "__dlpack__"):
        return slot_mapping  # read through DLPack in C, its dtype checked there
    if module.startswith("torch"):
        _torch_memory(slot_mapping, "slot_mapping")
        slot_mapping = slot_mapping.detach().resolve_neg().numpy()
    array = np.asarray(slot_mapping)
    if array.dtype == np.int32:
        return slot_mapping if isinstance(slot_mapping, np.ndarray) else array
    if np.issubdtype(array.dtype, np.integer):
        if array.size and (array.min() < -2**31 or array.max() > 2**31 - 1):
            raise _error("INVALID_ARGUMENT",
                         "slot_mapping: a value is outside int32")
        return array.astype(np.int32)
    raise _error("INVALID_DTYPE",
                 f"slot_mapping: dtype {array.dtype} is not int32")


def _position_ids(position_ids, multimodal):
    """HF's position_ids in posenc's form: a leading component axis ([3, batch, tokens], M-RoPE)
    moved innermost, and a leading batch of 1 (ids shared by the batch) dropped."""
    module = type(position_ids).__module__ or ""
    if module.startswith("torch"):
        _torch_memory(position_ids, "position_ids")
        position_ids = position_ids.detach().resolve_neg().numpy()
    ids = np.asarray(position_ids)
    if multimodal and ids.ndim >= 2:
        ids = np.moveaxis(ids, 0, -1)
    if ids.ndim >= (3 if multimodal else 2) and ids.shape[0] == 1:
        ids = ids[0]
    return ids


def _rope_arguments(q, k=None, *, positions=None, position_ids=None, offset=0, theta=None,
                    style="neox", rotary_dim=None, rotary_offset=0, inverse=False, scaling=None,
                    multimodal=None, mrope_section=None, components=None, component_map=None,
                    layout="bthd", out=None, k_out=None, k_cache=None, slot_mapping=None, v=None,
                    v_cache=None, attention_factor=None, cos=None, sin=None, num_heads=None,
                    q_norm_weight=None, k_norm_weight=None, norm_eps=None,
                    norm_weight_offset=None):
    """posenc.rope's arguments (context aside) as _posenc._rope_resolved's keywords: options
    resolved as a Rope resolves them, then the arrays converted (_rope_arrays)."""
    head_dim = q.shape[-1] if scaling is not None and hasattr(q, "shape") and len(q.shape) \
        else None
    settings = _resolve_rope(
        head_dim=head_dim, theta=theta, style=style, rotary_dim=rotary_dim,
        rotary_offset=rotary_offset, inverse=inverse, scaling=scaling, multimodal=multimodal,
        mrope_section=mrope_section, components=components, component_map=component_map,
        layout=layout, attention_factor=attention_factor, num_heads=num_heads,
        norm_eps=norm_eps, norm_weight_offset=norm_weight_offset)
    return _rope_arrays(settings, q, k, positions=positions, position_ids=position_ids,
                        offset=offset, out=out, k_out=k_out, k_cache=k_cache,
                        slot_mapping=slot_mapping, v=v, v_cache=v_cache, cos=cos, sin=sin,
                        q_norm_weight=q_norm_weight, k_norm_weight=k_norm_weight)


def _rope_arrays(settings, q, k=None, *, positions=None, position_ids=None, offset=0, out=None,
                 k_out=None, k_cache=None, slot_mapping=None, v=None, v_cache=None, cos=None,
                 sin=None, q_norm_weight=None, k_norm_weight=None):
    """A call's arrays in the form C takes, with the resolved options `settings` (a Rope's):
    _posenc._rope_resolved's keywords. bf16 and torch arrays become buffers, positions and
    slots int32; a conversion that cannot be made raises. posenc.rope and a posenc.Rope's call
    (in C) hand here the arrays C cannot read as they are, and run the result themselves."""
    if position_ids is not None:
        if positions is not None:
            raise _error("INVALID_ARGUMENT",
                         "position_ids: given with positions; pass one of them")
        positions = _positions(_position_ids(position_ids, settings["multimodal"]),
                               "position_ids")
    # with a cache, k is only read unless k_out is given
    bq, bf16_q = _buffer(q, "q", written=out is None)
    bk, bf16_k = _buffer(k, "k", written=k_out is None and k_cache is None)
    bq_out, bf16_q_out = _buffer(out, "q_out", written=True)
    bk_out, bf16_k_out = _buffer(k_out, "k_out", written=True)
    bk_cache, bf16_k_cache = _buffer(k_cache, "k_cache", written=True)
    bv, bf16_v = _buffer(v, "v")
    bv_cache, bf16_v_cache = _buffer(v_cache, "v_cache", written=True)
    bcos, bf16_cos = _buffer(cos, "cos")
    bsin, bf16_sin = _buffer(sin, "sin")
    bq_norm, bf16_q_norm = _buffer(q_norm_weight, "q_norm_weight")
    bk_norm, bf16_k_norm = _buffer(k_norm_weight, "k_norm_weight")
    bf16 = (bf16_q or bf16_k or bf16_q_out or bf16_k_out or bf16_k_cache or bf16_v
            or bf16_v_cache or bf16_cos or bf16_sin or bf16_q_norm or bf16_k_norm)
    return dict(
        settings, q=bq, k=bk, q_out=bq_out, k_out=bk_out,
        positions=positions if position_ids is not None else _positions(positions),
        offset=_integer("offset", offset, -2**31, 2**31 - 1), bf16=bf16, k_cache=bk_cache,
        slot_mapping=_slots(slot_mapping), v=bv, v_cache=bv_cache, cos=bcos, sin=bsin,
        q_norm_weight=bq_norm, k_norm_weight=bk_norm)


# A config dict's cache key is made of the fields posenc.hf reads from it, and a dict is a
# config by posenc.hf's rule.
_posenc._set_rope_hooks(_resolve_rope_named, _rope_arrays, _cache_key, _bad_keyword,
                        tuple(hf._CONFIG_KEYS), tuple(hf._READ_FIELDS) + ("text_config",))


# numpy's name of each posenc dtype (posenc_dtype_name's spelling) that data may have.
_NUMPY_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def _new_array(shape, dtype):
    if isinstance(dtype, str):
        dtype = _NUMPY_DTYPES.get(_posenc.canonical_name("dtype", dtype), dtype)
    if isinstance(dtype, str) and dtype.lower() == "bfloat16":
        bf16 = _bfloat16()
        if bf16 is False:
            raise _error("INVALID_DTYPE", "dtype: bfloat16 arrays need the ml_dtypes package")
        return np.empty(shape, bf16)
    return np.empty(shape, dtype)


def _placed(error, place):
    """The same posenc error with its message preceded by the call it comes from."""
    placed = type(error)(f"{place}{error}")
    placed.status, placed.code = error.status, error.code
    return placed


def _prepare_calls(calls, kind, convert):
    """Context.prepare's rope= or sinusoidal=: one dict of keyword arguments, or a sequence of
    them, converted as the call itself converts them; a fault names its place ("rope[1].")."""
    if calls is None:
        return []
    if isinstance(calls, dict):
        calls = [calls]
    converted = []
    for i, call in enumerate(calls):
        place = f"{kind}[{i}]."
        if not isinstance(call, dict):
            raise _error("INVALID_ARGUMENT",
                         f"{kind}[{i}]: a dict of {kind}'s keyword arguments is expected, "
                         f"got {type(call).__name__}")
        if "context" in call:
            raise _error("INVALID_ARGUMENT",
                         f"{place}context: the prepared call runs on this Context")
        try:
            converted.append(convert(**call))
        except Error as error:
            raise _placed(error, place) from None
        except TypeError as error:  # a keyword the call does not take, or a missing array
            text = str(error).replace(f"_{kind}_arguments()", f"{kind}()")
            raise _error("INVALID_ARGUMENT", f"{kind}[{i}]: {text}") from None
    return converted


def _prepare_arguments(rope=None, sinusoidal=None):
    """Context.prepare's arguments as _posenc._prepare_resolved's two lists: Context.prepare
    (in C) hands them here to be converted, and prepares the result itself."""
    return (_prepare_calls(rope, "rope", _rope_arguments),
            _prepare_calls(sinusoidal, "sinusoidal",
                           lambda **call: _sinusoidal_arguments(**call)[0]))


_posenc._set_prepare_hook(_prepare_arguments)


def _sinusoidal_arguments(out=None, *, positions=None, rows=None, d_model=None, batch=None,
                          offset=0, x=None, layout="interleaved", base=10000.0, freq_shift=0.0,
                          position_scale=1.0, input_scale=1.0, output_scale=1.0,
                          dtype="float32"):
    """posenc.sinusoidal's arguments (context aside) as _posenc._sinusoidal_resolved's
    keywords, out made when not given."""
    for name, value in (("position_scale", position_scale), ("input_scale", input_scale),
                        ("output_scale", output_scale)):
        if value == 0:
            raise _error("INVALID_ARGUMENT",
                         f"{name}: 0 is not supported (posenc reads 0 as the default, 1)")
    positions = _positions(positions)
    if out is None:
        if x is not None:
            shape = tuple(x.shape)
        else:
            if d_model is None:
                raise _error("INVALID_ARGUMENT",
                             "d_model: required when neither out nor x is given")
            if positions is not None:
                lead = tuple(positions.shape)
            elif rows is not None:
                lead = (int(rows),) if batch is None else (int(batch), int(rows))
            else:
                raise _error("INVALID_ARGUMENT",
                             "rows: required when neither out, x nor positions is given")
            shape = lead + (int(d_model),)
        out = _new_array(shape, dtype)
    bout, bf16_out = _buffer(out, "out", written=True)
    bx, bf16_x = _buffer(x, "x")
    return dict(
        out=bout, x=bx, positions=positions, offset=int(offset),
        layout=_name("sinusoidal_layout", layout, "layout"), base=float(base),
        freq_shift=float(freq_shift), position_scale=float(position_scale),
        input_scale=float(input_scale), output_scale=float(output_scale),
        bf16=bf16_out or bf16_x), out


def sinusoidal(out=None, *, positions=None, rows=None, d_model=None, batch=None, offset=0,
               x=None, layout="interleaved", base=10000.0, freq_shift=0.0, position_scale=1.0,
               input_scale=1.0, output_scale=1.0, dtype="float32", context=None):
    """Sinusoidal position encodings (Vaswani et al.; diffusion timestep embeddings).

    Writes ``out[b, r, :] = x[b, r, :] * input_scale + output_scale * PE(p)`` (without x: the
    table ``output_scale * PE(p)``), p the position of row r: ``positions`` (int32 or float32
    [rows] or [batch, rows]) times position_scale, or ``offset + r``. PE(p) holds d_model
    values at frequencies ``base ** (-i / (d_model/2 - freq_shift))``; layout "interleaved"
    (sin, cos, sin, cos, ...), "sin_cos" ([sin | cos], diffusers) or "cos_sin".

    out: [rows, d_model] or [batch, rows, d_model], f32/f16/bf16, any strides; when None a
    new numpy array of ``dtype`` is made, its shape from positions, x, or rows/d_model/batch.
    x may be out itself (in place). Returns out.
    """
    if context is None:
        context = default_context()
    arguments, out = _sinusoidal_arguments(
        out, positions=positions, rows=rows, d_model=d_model, batch=batch, offset=offset, x=x,
        layout=layout, base=base, freq_shift=freq_shift, position_scale=position_scale,
        input_scale=input_scale, output_scale=output_scale, dtype=dtype)
    _posenc._sinusoidal_resolved(context, **arguments)
    return out


# torch.ops.posenc.* are registered once torch is imported, before or after posenc; posenc itself
# never imports torch (posenc/_torch_import.py).
from ._torch_import import register_when_imported as _register_torch_ops  # noqa: E402

_register_torch_ops()
