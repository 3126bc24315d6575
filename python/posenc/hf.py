# SPDX-License-Identifier: MIT
# HF transformers interop: turns a model's `rope_scaling` / `rope_parameters` (or its config) into
# the arguments of posenc.rope, with the semantics of transformers' modeling_rope_utils.py.
"""Read HF transformers RoPE settings as posenc arguments.

HF models store their RoPE settings in one of two shapes:

* ``config.rope_scaling`` (transformers < 5, and every ``config.json`` on the Hub), a dict with
  ``"rope_type"`` (or the legacy ``"type"``) beside ``config.rope_theta``,
  ``config.max_position_embeddings``, ``config.partial_rotary_factor`` and the head size;
* ``config.rope_parameters`` (transformers >= 5), the same dict with ``"rope_theta"`` (and
  ``"partial_rotary_factor"``) moved inside it.

:func:`scaling_from_hf` accepts either dict, or the config object / config dict holding it, and
returns what posenc's ``rope`` needs. docs/python-hf.md has the key-by-key mapping.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Mapping
from typing import Any, Optional, TypedDict

from . import _posenc

__all__ = ["HFRope", "HFWarning", "SCALING_TYPES", "SCALING_FIELDS", "is_posenc_form",
           "is_rope_dict", "load_config", "scaling_from_hf"]


class HFWarning(UserWarning):
    """An HF setting read with an assumption the caller may not intend (a rope dict with no
    rope_theta read with theta 10000)."""

# posenc_rope_scaling_type's canonical names, by value: the library's list, as the posenc form
# uses them.
SCALING_TYPES = _posenc.NAMES["rope_scaling_type"]

# posenc_rope_scaling's fields (factor_count is implied by the arrays' lengths).
SCALING_FIELDS = (
    "factor", "original_max_positions", "sequence_length", "beta_fast", "beta_slow", "mscale",
    "mscale_all_dim", "no_truncate", "low_freq_factor", "high_freq_factor", "short_factor",
    "long_factor", "freq_factors", "freq_scale", "ext_factor",
)

# Types whose C resolution requires original_max_positions.
_NEEDS_ORIGINAL = ("dynamic_ntk", "yarn", "llama3", "longrope")

# HF rope types, with the legacy spellings HF itself still converts.
_HF_TYPES = {
    "default": "default",
    "mrope": "default",      # Qwen2-VL's config.json: HF rewrites it to "default" + mrope_section
    "linear": "linear",
    "dynamic": "dynamic",
    "yarn": "yarn",
    "longrope": "longrope",
    "su": "longrope",        # Phi-3's first configs: Phi3Config renames it "longrope"
    "llama3": "llama3",
}

# Keys every rope dict may carry whatever its type: the type itself, what transformers >= 5 moved
# into the dict, and the multimodal sections of Qwen2-VL / Qwen3-VL.
_COMMON_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor", "mrope_section",
                "mrope_interleaved"}

# Per HF type: the keys posenc maps, as HF's own validation lists them (required and optional).
_TYPE_KEYS = {
    "default": set(),
    # original_max_position_embeddings: accepted by HF's validation for linear and dynamic but
    # never read by their formulas (dynamic NTK grows from max_position_embeddings), so it is
    # ignored here too, on purpose, to give HF's frequencies.
    "linear": {"factor", "original_max_position_embeddings"},
    "dynamic": {"factor", "original_max_position_embeddings"},
    "yarn": {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast",
             "beta_slow", "mscale", "mscale_all_dim", "truncate"},
    "longrope": {"short_factor", "long_factor", "factor", "original_max_position_embeddings",
                 "attention_factor"},
    "llama3": {"factor", "original_max_position_embeddings", "low_freq_factor",
               "high_freq_factor"},
}

# Keys only a config (config.json) carries: the nested rope dicts and the model's own sizes. A
# mapping with one of them is a config; otherwise one with rope_type or type is a rope dict,
# even when it also carries rope_theta (transformers >= 5 keeps it there).
_CONFIG_KEYS = ("rope_scaling", "rope_parameters", "text_config", "model_type", "hidden_size",
                "num_attention_heads", "head_dim", "qk_rope_head_dim", "architectures")

# What a config without a rope dict may still hold: a mapping of only these is a config.
_CONFIG_SCALARS = ("rope_theta", "partial_rotary_factor", "max_position_embeddings",
                   "original_max_position_embeddings")

# The config fields posenc reads (this module, and rms_norm_eps for the QK norm): what a
# config's cache key is made of.
_READ_FIELDS = ("rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor",
                "head_dim", "qk_rope_head_dim", "hidden_size", "num_attention_heads",
                "max_position_embeddings", "original_max_position_embeddings", "rms_norm_eps")


class HFRope(TypedDict):
    """What :func:`scaling_from_hf` returns: the posenc.rope arguments an HF config implies.

    A value of None means "not set by the config": posenc's default applies (theta 10000, the
    same as HF's; rotary_dim = head_dim; attention_factor the scaling's own).
    """

    scaling: Optional[dict[str, Any]]   # posenc form, or None for plain RoPE
    theta: Optional[float]
    rotary_dim: Optional[int]
    multimodal: Optional[str]           # None, "mrope" or "mrope_interleaved"
    mrope_section: Optional[list[int]]  # [t, h, w] frequencies per component
    attention_factor: Optional[float]   # only where the config gives it explicitly


def is_posenc_form(d: Any) -> bool:
    """Whether ``d`` is already a posenc scaling dict rather than an HF one.

    A posenc form is a mapping whose ``"type"`` is one of :data:`SCALING_TYPES` and whose other
    keys are all posenc_rope_scaling field names, with ``original_max_positions`` present for the
    types that need it. An HF dict such as ``{"type": "linear", "factor": 2.0}`` reads the same
    either way; HF's YaRN, Llama 3 and LongRoPE dicts never qualify (HF spells the pre-training
    length ``original_max_position_embeddings`` and may leave it to ``max_position_embeddings``),
    so they always go through :func:`scaling_from_hf`.
    """
    if not isinstance(d, Mapping) or "type" not in d or "rope_type" in d:
        return False
    kind = d["type"]
    if isinstance(kind, int) and not isinstance(kind, bool) and 0 <= kind < len(SCALING_TYPES):
        kind = SCALING_TYPES[kind]  # posenc_rope_scaling_type's value
    elif isinstance(kind, str) and kind.lower().replace("-", "_") in SCALING_TYPES:
        kind = kind.lower().replace("-", "_")  # the spellings posenc_rope_scaling_type_from_name reads
    else:
        return False
    if any(key != "type" and key not in SCALING_FIELDS for key in d):
        return False
    return kind not in _NEEDS_ORIGINAL or "original_max_positions" in d


def is_rope_dict(d: Any) -> bool:
    """Whether ``d`` is a rope dict (``rope_scaling`` or ``rope_parameters``) rather than a
    config: a mapping with ``rope_type`` or ``type`` and none of the keys only a config has
    (nested rope dicts, ``text_config``, ``model_type``, the model's sizes). A config without a
    rope dict may still carry ``rope_theta`` and ``max_position_embeddings``."""
    return (isinstance(d, Mapping) and ("rope_type" in d or "type" in d)
            and not any(key in d for key in _CONFIG_KEYS))


def _did_you_mean(name: str, known) -> str:
    """" (did you mean 'x'?)" for the closest of `known`, or ""."""
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_config(path: Any) -> dict[str, Any]:
    """A model's ``config.json`` as a dict: ``path`` names the file, or the model's folder
    holding it (a Hub snapshot, ``save_pretrained``'s output).

    Raises:
        FileNotFoundError: neither the file nor a ``config.json`` in the folder exists.
        ValueError: the file is not a JSON object.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path, encoding="utf-8") as file:
        try:
            config = json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not JSON ({error})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: a JSON object is expected, got {type(config).__name__}")
    return config


def _frozen(value: Any) -> Any:
    """A hashable copy of a JSON-like value (dicts keep their order: equal dicts written in
    another order only miss the cache)."""
    if isinstance(value, Mapping):
        return ("{", tuple((key, _frozen(v)) for key, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("[", tuple(_frozen(v) for v in value))
    if value is None or isinstance(value, (str, int, float, bool)):
        return (type(value).__name__, value)
    return ("id", id(value))  # never equal to a value: such a config is read again each time


def config_key(obj: Any) -> Any:
    """A hashable key of what :func:`scaling_from_hf` reads from a config object (its RoPE
    fields and sizes, text_config's too), so that equal settings share one resolution."""
    fields = tuple(_frozen(_get(obj, name)) for name in _READ_FIELDS)
    text = _get(obj, "text_config")
    return (type(obj).__name__, fields, None if text is None else config_key(text))


def _get(obj: Any, name: str) -> Any:
    """A config field, from a config dict or a config object; None when absent."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    try:
        return getattr(obj, name, None)
    except Exception:  # a property that refuses (transformers' deprecated aliases)
        return None


def _number(key: str, value: Any, *, minimum: float = 0.0, inclusive: bool = False) -> float:
    """value as a finite float above `minimum` (or at it, when inclusive), naming `key` if not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key}: must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < minimum or (v == minimum and not inclusive):
        bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
        raise ValueError(f"{key}: must be a finite number {bound}, got {value!r}")
    return v


def _count(key: str, value: Any) -> int:
    """value as a positive integer that fits posenc's uint32 fields, naming `key` if not."""
    v = _number(key, value)
    if v != int(v) or v > 0xFFFFFFFF:
        raise ValueError(f"{key}: must be a positive integer, got {value!r}")
    return int(v)


def _factors(key: str, value: Any, pairs: Optional[int]) -> list[float]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise ValueError(f"{key}: must be a list of numbers, got {value!r}")
    out = [_number(f"{key}[{i}]", v) for i, v in enumerate(value)]
    if pairs is not None and len(out) != pairs:
        raise ValueError(f"{key}: has {len(out)} entries, rotary_dim/2 = {pairs} expected")
    return out


def _split(obj: Any, layer_type: Optional[str]) -> tuple[Any, Optional[Mapping[str, Any]]]:
    """(config or None, rope dict or None) from whatever the caller passed."""
    if obj is None:
        return None, None
    if isinstance(obj, Mapping) and not any(key in obj for key in _CONFIG_KEYS) and (
            "rope_type" in obj or "type" in obj
            or not all(key in _CONFIG_SCALARS for key in obj)):
        # A rope dict, or one nested by layer type; one with no type is refused by _typed.
        return None, _typed(obj, layer_type, "the rope dict")
    config = obj
    # Vision-language configs (Qwen3-VL) keep the language model's settings in text_config.
    text = _get(config, "text_config")
    if text is not None and all(_get(config, k) is None
                                for k in ("rope_scaling", "rope_parameters", "rope_theta")):
        config = text
    rope = _get(config, "rope_parameters")
    where = "rope_parameters"
    if not rope:
        rope, where = _get(config, "rope_scaling"), "rope_scaling"
    if rope is not None and not isinstance(rope, Mapping):
        raise ValueError(f"{where}: must be a dict or None, got {type(rope).__name__}")
    return config, _typed(rope, layer_type, where)


def _typed(rope: Optional[Mapping[str, Any]], layer_type: Optional[str],
           where: str) -> Optional[Mapping[str, Any]]:
    """The rope dict itself, or one layer type's dict of a rope_parameters nested by layer type
    (Gemma 3, ModernBERT); None for an empty one (HF: plain RoPE)."""
    if not rope or "rope_type" in rope or "type" in rope:
        return rope or None
    if not all(v is None or isinstance(v, Mapping) for v in rope.values()):
        raise ValueError(f"rope_type: missing in {where} {dict(rope)!r}")
    if layer_type is None:
        raise ValueError(f"layer_type: {where} is per layer type ({', '.join(rope)}); "
                         "name the one to use")
    if layer_type not in rope:
        raise ValueError(f"layer_type: {layer_type!r} is not one of {', '.join(rope)}")
    if rope[layer_type] is None:  # HF: a layer type without RoPE
        raise ValueError(f"layer_type: {layer_type!r} has no RoPE ({where} holds None)")
    return _typed(rope[layer_type], None, f"{where}[{layer_type!r}]")


def _rotary_dim(config: Any, rope: Mapping[str, Any], head_dim: Optional[int],
                rotary_dim: Optional[int]) -> Optional[int]:
    """HF's dim = int(head_dim * partial_rotary_factor), or the caller's rotary_dim."""
    if rotary_dim is not None:
        dim = _count("rotary_dim", rotary_dim)
        source = "rotary_dim"
    else:
        if head_dim is None:
            # DeepSeek's MLA rotates qk_rope_head_dim dims (HF sets head_dim to it); others
            # have head_dim, or hidden_size / num_attention_heads.
            head_dim = _get(config, "qk_rope_head_dim") or _get(config, "head_dim")
            if head_dim is None:
                hidden, heads = _get(config, "hidden_size"), _get(config, "num_attention_heads")
                if hidden is None or heads is None:
                    partial = rope.get("partial_rotary_factor",
                                       _get(config, "partial_rotary_factor"))
                    if partial is not None and partial != 1:
                        raise ValueError(f"head_dim: is required to apply partial_rotary_factor "
                                         f"{partial!r}; pass head_dim (or rotary_dim)")
                    return None
                head_dim = int(hidden) // int(heads)
        head_dim = _count("head_dim", head_dim)
        partial = rope.get("partial_rotary_factor")
        source = "rope_parameters.partial_rotary_factor"
        if partial is None:
            partial = _get(config, "partial_rotary_factor")
            source = "partial_rotary_factor"
        if partial is None:
            return head_dim
        dim = int(head_dim * _number(source, partial))
        if dim == 0:
            raise ValueError(f"{source}: {partial!r} leaves no dims of head_dim {head_dim} rotated")
    if dim % 2:
        raise ValueError(f"{source}: gives an odd rotary_dim {dim}; posenc rotates pairs")
    return dim


def scaling_from_hf(obj: Any, *, head_dim: Optional[int] = None,
                    rotary_dim: Optional[int] = None,
                    max_position_embeddings: Optional[int] = None,
                    layer_type: Optional[str] = None) -> HFRope:
    """Translate HF transformers RoPE settings into posenc.rope arguments.

    Args:
        obj: an HF ``rope_scaling`` dict, a ``rope_parameters`` dict (transformers >= 5), a
            config object (``transformers.PretrainedConfig``, ``types.SimpleNamespace``, ...) or
            a config dict (``config.json``) holding either, or None (plain RoPE).
        head_dim: the attention head size, when ``obj`` has no ``head_dim`` (or
            ``hidden_size`` and ``num_attention_heads``) or to override it.
        rotary_dim: the rotated dims, overriding ``head_dim * partial_rotary_factor``.
        max_position_embeddings: the model's context length, overriding the config's. A bare
            rope dict needs it where HF reads it from the config: dynamic NTK always, YaRN and
            LongRoPE without ``original_max_position_embeddings``, and ratio-derived factors.
        layer_type: for a ``rope_parameters`` nested by layer type (``"full_attention"``,
            ``"sliding_attention"``), the one to read.

    Returns:
        A dict: ``scaling`` (posenc form, or None for plain RoPE), ``theta``, ``rotary_dim``,
        ``multimodal`` (None, ``"mrope"`` or ``"mrope_interleaved"``), ``mrope_section`` and
        ``attention_factor`` (set only when the config gives one explicitly; otherwise posenc
        derives the same value HF does from the scaling). None means posenc's default.

    Raises:
        ValueError: an unknown rope type, a key posenc cannot honour, a missing required key or
            a value out of range; the message names the key.
    """
    config, rope = _split(obj, layer_type)
    rope = dict(rope) if rope else {}

    kind = rope.get("rope_type", rope.get("type", "default"))  # HF: rope_type wins over type
    if not isinstance(kind, str) or kind not in _HF_TYPES:
        hint = (" (a posenc type name: pass the dict as posenc's scaling= directly)"
                if kind in SCALING_TYPES else _did_you_mean(kind, _HF_TYPES))
        raise ValueError(f"rope_type: {kind!r} is not supported{hint}; posenc reads "
                         f"{', '.join(sorted(_HF_TYPES))}")
    kind = _HF_TYPES[kind]
    for key in rope:
        if key not in _COMMON_KEYS and key not in _TYPE_KEYS[kind]:
            hint = (" (a posenc field name: pass a posenc form as scaling= directly)"
                    if key in SCALING_FIELDS else
                    _did_you_mean(key, _COMMON_KEYS | _TYPE_KEYS[kind]))
            raise ValueError(f"{key}: posenc cannot honour this key of rope_type {kind!r}{hint}")

    theta = rope.get("rope_theta")  # transformers >= 5; wins over the config's
    if theta is None:
        theta = _get(config, "rope_theta")
    result: HFRope = {
        "scaling": None,
        "theta": None if theta is None else _number("rope_theta", theta),
        "rotary_dim": _rotary_dim(config, rope, head_dim, rotary_dim),
        "multimodal": None,
        "mrope_section": None,
        "attention_factor": None,
    }
    pairs = None if result["rotary_dim"] is None else result["rotary_dim"] // 2

    section = rope.get("mrope_section")
    if section is not None:
        if isinstance(section, (str, bytes)) or not hasattr(section, "__len__") \
                or len(section) != 3:
            raise ValueError(f"mrope_section: must be 3 counts (t, h, w), got {section!r}")
        counts = []
        for i, v in enumerate(section):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"mrope_section[{i}]: must be an integer >= 0, got {v!r}")
            counts.append(int(v))
        if pairs is not None and sum(counts) != pairs:
            raise ValueError(f"mrope_section: {counts} sums to {sum(counts)}, rotary_dim/2 = "
                             f"{pairs} expected")
        result["mrope_section"] = counts
        result["multimodal"] = "mrope_interleaved" if rope.get("mrope_interleaved") else "mrope"
    elif rope.get("mrope_interleaved"):
        raise ValueError("mrope_section: is required with mrope_interleaved")
    elif rope.get("rope_type", rope.get("type")) == "mrope":
        raise ValueError("mrope_section: is required by rope type 'mrope'")

    if max_position_embeddings is None:
        max_position_embeddings = _get(config, "max_position_embeddings")
    if kind != "default":
        result["scaling"] = _scaling(kind, rope, config, max_position_embeddings, pairs, result)
    return result


def _scaling(kind: str, rope: dict[str, Any], config: Any, max_positions: Any,
             pairs: Optional[int], result: HFRope) -> dict[str, Any]:
    """The posenc form of one scaled HF rope dict (kind is HF's type name)."""

    def max_pos(why: str) -> int:
        if max_positions is None:
            raise ValueError(f"max_position_embeddings: is required {why}; pass it, or the "
                             "config")
        return _count("max_position_embeddings", max_positions)

    def original() -> int:
        # transformers >= 5 (standardize_rope_params): a config-level
        # original_max_position_embeddings (Phi-3) wins, then the dict's, then
        # max_position_embeddings.
        value = _get(config, "original_max_position_embeddings")
        key = "original_max_position_embeddings"
        if value is None:
            value = rope.get(key)
        if value is None:
            return max_pos(f"by rope_type {kind!r} without {key}")
        return _count(key, value)

    def factor(key: str = "factor") -> float:
        if rope.get(key) is None:
            raise ValueError(f"{key}: is required by rope_type {kind!r}")
        return _number(key, rope[key], minimum=1.0, inclusive=True)

    def explicit_attention() -> None:
        if rope.get("attention_factor") is not None:
            result["attention_factor"] = _number("attention_factor", rope["attention_factor"])

    if kind == "linear":
        return {"type": "linear", "factor": factor()}

    if kind == "dynamic":
        # HF grows the base from max_position_embeddings (its dynamic_rope_update resets to it);
        # without a config, the dict's original_max_position_embeddings stands in.
        if max_positions is None and rope.get("original_max_position_embeddings") is not None:
            start = _count("original_max_position_embeddings",
                           rope["original_max_position_embeddings"])
        else:
            start = max_pos("by rope_type 'dynamic' (the length it grows from)")
        return {"type": "dynamic_ntk", "factor": factor(), "original_max_positions": start}

    if kind == "yarn":
        orig = original()
        if rope.get("factor") is None:
            # HF since its PR #40320: the ratio only when factor is absent (DeepSeek-V3's
            # 163840 / 4096 = 40 equals its factor anyway).
            ratio = max_pos("by rope_type 'yarn' without factor") / orig
            out: dict[str, Any] = {"type": "yarn",
                                   "factor": _number("factor", ratio, minimum=1.0,
                                                     inclusive=True)}
        else:
            out = {"type": "yarn", "factor": factor()}
        out["original_max_positions"] = orig
        for key in ("beta_fast", "beta_slow", "mscale", "mscale_all_dim"):
            # HF reads `value or default`: None and 0 both mean "not given", as posenc's 0.
            if rope.get(key):
                out[key] = _number(key, rope[key])
        if out.get("beta_slow", 1.0) >= out.get("beta_fast", 32.0):
            raise ValueError(f"beta_slow: {out.get('beta_slow', 1.0):g} must be below "
                             f"beta_fast {out.get('beta_fast', 32.0):g}")
        if "truncate" in rope and not rope["truncate"]:
            out["no_truncate"] = True  # gpt-oss: fractional correction range
        explicit_attention()
        return out

    if kind == "longrope":
        orig = original()
        if rope.get("factor") is not None:
            scale = _number("factor", rope["factor"])
        else:
            # Phi-3: no factor; its context extension max / original sets the attention factor.
            scale = _number("factor", max_pos("by rope_type 'longrope' without factor") / orig)
        out = {"type": "longrope", "factor": scale, "original_max_positions": orig,
               "short_factor": _factors("short_factor", rope.get("short_factor") or (), pairs),
               "long_factor": _factors("long_factor", rope.get("long_factor") or (), pairs)}
        for key in ("short_factor", "long_factor"):
            if not out[key]:
                raise ValueError(f"{key}: is required by rope_type 'longrope'")
        if len(out["short_factor"]) != len(out["long_factor"]):
            raise ValueError(f"long_factor: has {len(out['long_factor'])} entries, short_factor "
                             f"{len(out['short_factor'])}")
        explicit_attention()
        return out

    # llama3: HF requires all four keys.
    out = {"type": "llama3", "factor": factor()}
    for key in ("low_freq_factor", "high_freq_factor"):
        if rope.get(key) is None:
            raise ValueError(f"{key}: is required by rope_type 'llama3'")
        out[key] = _number(key, rope[key])
    if out["low_freq_factor"] >= out["high_freq_factor"]:
        raise ValueError(f"low_freq_factor: {out['low_freq_factor']:g} must be below "
                         f"high_freq_factor {out['high_freq_factor']:g}")
    if rope.get("original_max_position_embeddings") is None \
            and _get(config, "original_max_position_embeddings") is None:
        raise ValueError("original_max_position_embeddings: is required by rope_type 'llama3'")
    out["original_max_positions"] = original()
    return out
