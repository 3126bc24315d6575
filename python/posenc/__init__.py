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

import numpy as np

from . import _posenc
from ._posenc import Context, Error, InputError, DeviceFailure, HostError
from ._posenc import rope, default_context

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
    "sinusoidal",
    "devices",
    "default_context",
    "Context",
    "version",
    *sorted(_ERRORS),
]

_STYLES = {"neox": 0, "gptj": 1}
_MULTIMODAL = {
    "none": 0,
    "1d": 0,
    "mrope": 1,
    "mrope_interleaved": 2,
    "vision_2d": 3,
    "vision_2d_pixtral": 4,
    "pixtral": 4,
    "positions_map": 5,
}
_SINUSOIDAL_LAYOUTS = {"interleaved": 0, "sin_cos": 1, "cos_sin": 2}
_SCALING_TYPES = {"none", "linear", "ntk", "dynamic_ntk", "dynamic-ntk", "yarn", "llama3",
                  "longrope", "yarn_ggml"}
# Keys that only HF transformers' rope_scaling / rope_parameters dicts use: a dict with any of
# them is read as HF's, even when its "type" is also a posenc name ({"type": "yarn", ...}).
_HF_ONLY_KEYS = {"rope_type", "original_max_position_embeddings", "rope_theta",
                 "max_position_embeddings", "partial_rotary_factor", "mrope_section",
                 "attention_factor", "mrope_interleaved", "truncate"}

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


def _error(name: str, status: str, message: str) -> Error:
    error = _ERRORS[name](message)
    error.status = "POSENC_" + status
    error.code = {"INVALID_ARGUMENT": -100, "INVALID_SHAPE": -101,
                  "INVALID_DTYPE": -102}[status]
    return error


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
        raise _error("InvalidArgument", "INVALID_ARGUMENT",
                     f"{name}: a torch tensor on {tensor.device}; only CPU tensors are accepted")
    if tensor.layout != torch.strided:
        raise _error("InvalidArgument", "INVALID_ARGUMENT",
                     f"{name}: a torch tensor of layout {tensor.layout}; only dense (strided) "
                     "tensors are accepted")


def _torch_array(tensor, name, written):
    """A torch CPU tensor as a numpy array on its memory (bf16 as its 16-bit pattern), or a
    posenc error naming the argument for one posenc cannot use in place."""
    import torch
    _torch_memory(tensor, name)
    if written and tensor.requires_grad:
        # autograd cannot see a write made outside it: its gradients would silently be wrong
        raise _error("InvalidArgument", "INVALID_ARGUMENT",
                     f"{name}: a torch tensor that requires grad; posenc writes outside autograd, "
                     f"so pass {name}.detach() or a tensor made under torch.no_grad()")
    if tensor.is_neg():
        # the memory holds the values before the pending negation: numpy refuses it too
        raise _error("InvalidArgument", "INVALID_ARGUMENT",
                     f"{name}: a torch view with a pending negation; pass "
                     f"{name}.resolve_neg()")
    if tensor.dtype == torch.bfloat16:
        return tensor.detach().view(torch.int16).numpy().view(np.uint16), True
    if tensor.dtype not in (torch.float32, torch.float16):
        raise _error("InvalidDtype", "INVALID_DTYPE",
                     f"{name}: {tensor.dtype} is not float32, float16 or bfloat16")
    return tensor.detach().numpy(), False


def _positions(positions):
    """int32 and float32 arrays as they are; other integers (Python lists, int64) checked and
    converted; float64 only when every value is exact in float32."""
    if positions is None or (type(positions) is np.ndarray
                             and positions.dtype in _POSITION_DTYPES):
        return positions
    module = type(positions).__module__ or ""
    if module.startswith("torch"):
        _torch_memory(positions, "positions")
        try:
            positions = positions.detach().resolve_neg().numpy()
        except TypeError:  # a dtype numpy lacks (bfloat16, ...)
            raise _error("InvalidDtype", "INVALID_DTYPE",
                         f"positions: {positions.dtype} is not int32 or float32") from None
    array = np.asarray(positions)
    if array.dtype in (np.int32, np.float32):
        return positions if isinstance(positions, np.ndarray) else array
    if np.issubdtype(array.dtype, np.integer):
        if array.size and (array.min() < -2**31 or array.max() > 2**31 - 1):
            raise _error("InvalidArgument", "INVALID_ARGUMENT",
                         "positions: a value is outside int32")
        return array.astype(np.int32)
    if np.issubdtype(array.dtype, np.floating):
        converted = array.astype(np.float32)
        if not np.array_equal(converted.astype(array.dtype), array, equal_nan=True):
            raise _error("InvalidDtype", "INVALID_DTYPE",
                         f"positions: {array.dtype} values that float32 cannot hold exactly; "
                         "pass int32 or float32")
        return converted
    raise _error("InvalidDtype", "INVALID_DTYPE",
                 f"positions: dtype {array.dtype} is not int32 or float32")


def _is_posenc_form(scaling) -> bool:
    return (isinstance(scaling, dict) and "type" in scaling
            and (isinstance(scaling["type"], int) or scaling["type"] in _SCALING_TYPES)
            and not (_HF_ONLY_KEYS & set(scaling)))


def _scaling(scaling, head_dim, rotary_dim):
    """(posenc-form dict or None, what an HF config also sets: theta, rotary_dim, multimodal,
    mrope_section, attention_factor)."""
    if scaling is None or _is_posenc_form(scaling):
        return scaling, {}
    from ._hf import scaling_from_hf
    try:
        hf = scaling_from_hf(scaling, head_dim=head_dim, rotary_dim=rotary_dim)
    except ValueError as error:
        raise _error("InvalidArgument", "INVALID_ARGUMENT", f"scaling: {error}") from None
    extras = {key: value for key, value in hf.items() if key != "scaling" and value is not None}
    return hf["scaling"], extras


def _name(table, value, what):
    known = table.get(value) if isinstance(value, str) else None
    if known is not None:
        return known
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    key = str(value).lower().replace("-", "_")
    if key not in table:
        raise _error("InvalidArgument", "INVALID_ARGUMENT",
                     f"{what}: '{value}' is not one of {', '.join(sorted(table))}")
    return table[key]


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
            raise _error("InvalidArgument", "INVALID_ARGUMENT",
                         "slot_mapping: a value is outside int32")
        return array.astype(np.int32)
    raise _error("InvalidDtype", "INVALID_DTYPE",
                 f"slot_mapping: dtype {array.dtype} is not int32")


def _rope_arguments(q, k=None, *, positions=None, offset=0, theta=None, style="neox",
                    rotary_dim=None, rotary_offset=0, inverse=False, scaling=None, multimodal=None,
                    mrope_section=None, components=None, component_map=None, layout="bthd",
                    out=None, k_out=None, k_cache=None, slot_mapping=None, v=None,
                    v_cache=None, attention_factor=None):
    """posenc.rope's arguments (context aside) as rope_buffers' keywords: HF configs read,
    names to values, bf16 and torch arrays as buffers, positions and slots as int32."""
    if scaling is not None:
        head_dim = q.shape[-1] if hasattr(q, "shape") and len(q.shape) else None
        form, extras = _scaling(scaling, head_dim, rotary_dim)
        scaling = form
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
    if theta is None:
        theta = 10000.0
    # with a cache, k is only read unless k_out is given
    bq, bf16_q = _buffer(q, "q", written=out is None)
    bk, bf16_k = _buffer(k, "k", written=k_out is None and k_cache is None)
    bq_out, bf16_q_out = _buffer(out, "q_out", written=True)
    bk_out, bf16_k_out = _buffer(k_out, "k_out", written=True)
    bk_cache, bf16_k_cache = _buffer(k_cache, "k_cache", written=True)
    bv, bf16_v = _buffer(v, "v")
    bv_cache, bf16_v_cache = _buffer(v_cache, "v_cache", written=True)
    bf16 = (bf16_q or bf16_k or bf16_q_out or bf16_k_out or bf16_k_cache or bf16_v
            or bf16_v_cache)
    if mrope_section is not None:
        mrope_section = tuple(int(s) for s in mrope_section)
    if component_map is not None and not isinstance(component_map, (bytes, bytearray)):
        component_map = [int(c) for c in np.asarray(component_map).reshape(-1)]
    return dict(
        q=bq, k=bk, q_out=bq_out, k_out=bk_out, positions=_positions(positions),
        offset=int(offset), theta=float(theta), style=_name(_STYLES, style, "style"),
        rotary_dim=int(rotary_dim or 0), rotary_offset=int(rotary_offset or 0),
        inverse=bool(inverse), attention_factor=float(attention_factor or 0.0), scaling=scaling,
        multimodal=_name(_MULTIMODAL, multimodal, "multimodal"), mrope_section=mrope_section,
        components=int(components or 0), component_map=component_map, layout=layout,
        bf16=bf16, k_cache=bk_cache, slot_mapping=_slots(slot_mapping), v=bv,
        v_cache=bv_cache)


def _rope_general(q, k=None, *, positions=None, offset=0, theta=None, style="neox",
                  rotary_dim=None, rotary_offset=0, inverse=False, scaling=None, multimodal=None,
                  mrope_section=None, components=None, component_map=None, layout="bthd",
                  out=None, k_out=None, k_cache=None, slot_mapping=None, v=None, v_cache=None,
                  attention_factor=None, context=None):
    """posenc.rope's calls that C does not do alone: options, conversions (bf16, torch, lists),
    new arrays, the KV cache. posenc.rope (in C) hands them here as they came."""
    if context is None:
        context = default_context()
    _posenc.rope_buffers(context, **_rope_arguments(
        q, k, positions=positions, offset=offset, theta=theta, style=style,
        rotary_dim=rotary_dim, rotary_offset=rotary_offset, inverse=inverse, scaling=scaling,
        multimodal=multimodal,
        mrope_section=mrope_section, components=components, component_map=component_map,
        layout=layout, out=out, k_out=k_out, k_cache=k_cache, slot_mapping=slot_mapping, v=v,
        v_cache=v_cache, attention_factor=attention_factor))
    q_written = q if out is None else out
    if k is None:
        return q_written
    return q_written, (k if k_out is None else k_out)


_posenc._set_rope_general(_rope_general)


def _new_array(shape, dtype):
    if isinstance(dtype, str) and dtype.lower() in ("bfloat16", "bf16"):
        bf16 = _bfloat16()
        if bf16 is False:
            raise _error("InvalidDtype", "INVALID_DTYPE",
                         "dtype: bfloat16 arrays need the ml_dtypes package")
        return np.empty(shape, bf16)
    names = {"f32": np.float32, "float32": np.float32, "f16": np.float16,
             "float16": np.float16}
    return np.empty(shape, names.get(dtype, dtype) if isinstance(dtype, str) else dtype)


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
            raise _error("InvalidArgument", "INVALID_ARGUMENT",
                         f"{kind}[{i}]: a dict of {kind}'s keyword arguments is expected, "
                         f"got {type(call).__name__}")
        if "context" in call:
            raise _error("InvalidArgument", "INVALID_ARGUMENT",
                         f"{place}context: the prepared call runs on this Context")
        try:
            converted.append(convert(**call))
        except Error as error:
            raise _placed(error, place) from None
        except TypeError as error:  # a keyword the call does not take, or a missing array
            text = str(error).replace(f"_{kind}_arguments()", f"{kind}()")
            raise _error("InvalidArgument", "INVALID_ARGUMENT", f"{kind}[{i}]: {text}") from None
    return converted


def _prepare_general(context, rope=None, sinusoidal=None):
    """Context.prepare (in C) hands its arguments here to be converted."""
    _posenc.prepare_buffers(
        context, _prepare_calls(rope, "rope", _rope_arguments),
        _prepare_calls(sinusoidal, "sinusoidal", lambda **call: _sinusoidal_arguments(**call)[0]))


_posenc._set_prepare_general(_prepare_general)


def _sinusoidal_arguments(out=None, *, positions=None, rows=None, d_model=None, batch=None,
                          offset=0, x=None, layout="interleaved", base=10000.0, freq_shift=0.0,
                          position_scale=1.0, input_scale=1.0, output_scale=1.0,
                          dtype="float32"):
    """posenc.sinusoidal's arguments (context aside) as _posenc.sinusoidal's keywords, out made
    when not given."""
    for name, value in (("position_scale", position_scale), ("input_scale", input_scale),
                        ("output_scale", output_scale)):
        if value == 0:
            raise _error("InvalidArgument", "INVALID_ARGUMENT",
                         f"{name}: 0 is not supported (posenc reads 0 as the default, 1)")
    positions = _positions(positions)
    if out is None:
        if x is not None:
            shape = tuple(x.shape)
        else:
            if d_model is None:
                raise _error("InvalidArgument", "INVALID_ARGUMENT",
                             "d_model: required when neither out nor x is given")
            if positions is not None:
                lead = tuple(positions.shape)
            elif rows is not None:
                lead = (int(rows),) if batch is None else (int(batch), int(rows))
            else:
                raise _error("InvalidArgument", "INVALID_ARGUMENT",
                             "rows: required when neither out, x nor positions is given")
            shape = lead + (int(d_model),)
        out = _new_array(shape, dtype)
    bout, bf16_out = _buffer(out, "out", written=True)
    bx, bf16_x = _buffer(x, "x")
    return dict(
        out=bout, x=bx, positions=positions, offset=int(offset),
        layout=_name(_SINUSOIDAL_LAYOUTS, layout, "layout"), base=float(base),
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
    _posenc.sinusoidal(context, **arguments)
    return out
