# SPDX-License-Identifier: MIT
# posenc for torch: the operators torch.ops.posenc.rope (in place) and rope_functional, with fake
# kernels and autograd, and drop-ins for HF transformers' apply_rotary_pos_emb and vLLM's
# RotaryEmbedding. Importing this module (or torch, once posenc is imported) registers them.
"""posenc's RoPE as torch operators, for eager code, ``torch.compile`` and autograd.

* ``torch.ops.posenc.rope(q, k=None, positions=None, *, options)`` rotates q and k in place
  (its schema marks both as written) and returns nothing: posenc.rope's in-place call.
* ``torch.ops.posenc.rope_functional(q, k, positions=None, *, options)`` returns new rotated
  tensors (q_out, k_out) and leaves q and k as they were.

Both take the same keyword-only options: posenc.rope's own (offset, theta, style, rotary_dim,
rotary_offset, inverse, layout, attention_factor, multimodal, mrope_section, components,
component_map) and, flattened because operators take no dicts, the posenc-form scaling dict:
``scaling_type`` ("none", "linear", "yarn", ...) beside each ``posenc_rope_scaling`` field
(factor, original_max_positions, beta_fast, ..., short_factor, long_factor, freq_factors). A
field at 0 is C's default. :func:`rope_options` turns an HF config (or rope dict, or posenc form)
into these options.

Both have a fake kernel (``torch.compile(fullgraph=True)`` traces them with no graph break) and
autograd: the gradient of a rotation is the inverse rotation of the gradient, which posenc does
exactly (``inverse=True``). CPU tensors run in posenc; a tensor on another device is refused
with a :class:`posenc.InvalidArgument` naming the argument. Docs: docs/python-torch.md.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

import posenc

from . import hf as _hf

__all__ = ["RotaryEmbedding", "apply_rotary_pos_emb", "rope_options"]

# The operators' keyword-only options: posenc.rope's own keywords, (name, schema type, default).
_CALL_OPTIONS = (
    ("offset", "int", 0),
    ("theta", "float", 10000.0),
    ("style", "str", "neox"),
    ("rotary_dim", "int", 0),
    ("rotary_offset", "int", 0),
    ("inverse", "bool", False),
    ("layout", "str", "bthd"),
    ("attention_factor", "float", 0.0),
    ("multimodal", "str", "none"),
    ("mrope_section", "int[]?", None),
    ("components", "int", 0),
    ("component_map", "int[]?", None),
    ("scaling_type", "str", "none"),
)
# ... then the fields of posenc's scaling dict (posenc_rope_scaling), from the HF reader's list;
# 0 (or None, False) leaves a field out of the dict: C's default.
_SCALING_FIELD_TYPES = {"original_max_positions": "int", "sequence_length": "int",
                        "no_truncate": "bool", "short_factor": "float[]?",
                        "long_factor": "float[]?", "freq_factors": "float[]?"}
_SCALING_OPTIONS = tuple(
    (name, _SCALING_FIELD_TYPES.get(name, "float"),
     {"int": 0, "bool": False, "float[]?": None}.get(_SCALING_FIELD_TYPES.get(name), 0.0))
    for name in _hf.SCALING_FIELDS)
_OPTIONS = _CALL_OPTIONS + _SCALING_OPTIONS
_DEFAULTS = {name: default for name, _, default in _OPTIONS}


def _schema_default(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


_OPTIONS_SCHEMA = ", ".join(f"{kind} {name}={_schema_default(default)}"
                            for name, kind, default in _OPTIONS)


def _error(message: str) -> posenc.Error:
    return posenc._error("INVALID_ARGUMENT", message)


def rope_options(config: Any = None, *, head_dim: Optional[int] = None,
                 rotary_dim: Optional[int] = None, theta: Optional[float] = None,
                 style: Optional[str] = None, max_position_embeddings: Optional[int] = None,
                 layer_type: Optional[str] = None) -> dict[str, Any]:
    """The operators' keyword options for a model's RoPE: only those that differ from the
    defaults, so that a traced graph shows what the model sets.

    config: an HF config object or config dict, an HF ``rope_scaling`` / ``rope_parameters``
    dict, a posenc-form scaling dict, or None (plain RoPE), read by posenc.hf.scaling_from_hf
    (pure Python, so torch.compile traces it). head_dim: the head size when the config lacks it
    (a bare rope dict) or to override it. rotary_dim, theta, style, max_position_embeddings:
    override the config's; layer_type: the layer type of a rope_parameters nested by type.
    """
    if config is None or _hf.is_posenc_form(config):
        resolved = {"scaling": config}
    else:
        try:
            resolved = _hf.scaling_from_hf(config, head_dim=head_dim, rotary_dim=rotary_dim,
                                           max_position_embeddings=max_position_embeddings,
                                           layer_type=layer_type)
        except ValueError as error:
            raise _error(f"config: {error}") from None
    options: dict[str, Any] = {}
    theta = resolved.get("theta") if theta is None else theta
    if theta is not None:
        options["theta"] = float(theta)
    if style is not None:
        options["style"] = style
    rotary_dim = resolved.get("rotary_dim") if rotary_dim is None else rotary_dim
    if rotary_dim is not None:
        options["rotary_dim"] = int(rotary_dim)
    if resolved.get("multimodal") is not None:
        options["multimodal"] = resolved["multimodal"]
        options["mrope_section"] = [int(s) for s in resolved["mrope_section"]]
    if resolved.get("attention_factor") is not None:
        options["attention_factor"] = float(resolved["attention_factor"])
    scaling = resolved.get("scaling")
    if scaling:
        options["scaling_type"] = str(scaling["type"])
        for name, kind, _ in _SCALING_OPTIONS:
            value = scaling.get(name)
            if not value:
                continue
            if kind == "float[]?":
                options[name] = [float(v) for v in value]
            else:
                options[name] = {"int": int, "bool": bool}.get(kind, float)(value)
    return options


def _rope_keywords(options: dict[str, Any]) -> dict[str, Any]:
    """posenc.Rope's keywords for the operators' options (offset aside): the scaling fields
    back in one dict."""
    keywords = {name: options.get(name, default) for name, _, default in _CALL_OPTIONS
                if name != "offset"}
    kind = keywords.pop("scaling_type")
    fields = {name: options[name] for name, _, _ in _SCALING_OPTIONS if options.get(name)}
    if kind != "none" or fields:
        keywords["scaling"] = {"type": kind, **fields}
    return keywords


# A prepared posenc.Rope per distinct options, so that a call resolves nothing: a model has a few
# (one per dtype-independent setting, and its inverse for backward). Bounded for the odd caller
# whose options never repeat.
_ROPES: dict[tuple, Any] = {}
_ROPES_HELD = 256


def _prepared(options: dict[str, Any]) -> tuple[Any, int]:
    """(posenc.Rope, offset) for the options as the dispatcher passes them: those at their
    defaults left out, the rest in schema order."""
    key = tuple((name, tuple(value) if isinstance(value, list) else value)
                for name, value in options.items() if name != "offset")
    rope = _ROPES.get(key)
    if rope is None:
        if len(_ROPES) >= _ROPES_HELD:
            _ROPES.clear()
        rope = _ROPES[key] = posenc.Rope(**_rope_keywords(options))
    return rope, options.get("offset", 0)


def _check_devices(**tensors: Optional[torch.Tensor]) -> None:
    """Refuses, naming it, a tensor posenc cannot run: one on a device other than the CPU
    (meta, CUDA, ...), by name, before anything is allocated or written."""
    for name, tensor in tensors.items():
        if tensor is not None and tensor.device.type != "cpu":
            raise _error(f"{name}: a torch tensor on {tensor.device}; posenc's torch operators "
                         "run CPU tensors only")


def _posenc_rope(q, k, positions, options, q_out=None, k_out=None) -> None:
    """The one call into posenc. Positions go as the caller gave them (HF's and vLLM's int64
    included: posenc range-checks and narrows them), but for broadcast ones."""
    rope, offset = _prepared(options)
    if positions is not None:
        positions = _array(_readable(positions))
    rope(_array(q), _array(k), positions=positions, offset=offset, out=_array(q_out),
         k_out=_array(k_out))


def _array(tensor):
    """A tensor as posenc takes it: detached (below autograd the kernel may still see one that
    requires grad). posenc reads a CPU tensor through tensor.numpy() where numpy holds its
    dtype, and names what is wrong with one it cannot take."""
    if tensor is not None and tensor.requires_grad:
        return tensor.detach()
    return tensor


# -- torch.ops.posenc.rope: in place --------------------------------------------------------------

def _rope_kernel(q, k=None, positions=None, **options):
    _check_devices(q=q, k=k, positions=positions)
    _posenc_rope(q, k, positions, options)


def _rope_fake(q, k=None, positions=None, **options):
    _check_devices(q=q, k=k, positions=positions)


class _RotateInPlace(torch.autograd.Function):
    """One tensor rotated in place, differentiably. q and k take one each: autograd refuses a
    Function that writes a view in place (HF's q is one) and returns more than one tensor."""

    @staticmethod
    def forward(ctx, x, positions, keyset, options):
        with torch._C._AutoDispatchBelowAutograd():
            torch.ops.posenc.rope.default.redispatch(keyset & torch._C._after_autograd_keyset,
                                                     x, None, positions, **options)
        ctx.mark_dirty(x)
        ctx.save_for_backward(positions)
        ctx.options = options
        return x

    @staticmethod
    def backward(ctx, grad):
        (positions,) = ctx.saved_tensors
        grad = _writable_copy(grad)
        torch.ops.posenc.rope(grad, None, positions, **_inverted(ctx.options))
        return grad, None, None, None


def _rope_autograd(keyset, q, k=None, positions=None, **options):
    """The in-place op under autograd: a tensor that requires grad is rotated by a Function
    that records the rotation, one that does not below autograd, with its version counter
    bumped (as torch's ADInplaceOrView kernels do; here, to spare a Python kernel of its own
    per call) so that autograd refuses a backward that would read its old values."""
    if torch.is_grad_enabled() and (q.requires_grad or (k is not None and k.requires_grad)):
        for x in (q, k):
            if x is None:
                continue
            if x.requires_grad:
                _RotateInPlace.apply(x, positions, keyset, options)
            else:
                with torch._C._AutoDispatchBelowAutograd():
                    torch.ops.posenc.rope.default.redispatch(
                        keyset & torch._C._after_autograd_keyset, x, None, positions, **options)
                torch.autograd.graph.increment_version(x)
        return
    with torch._C._AutoDispatchBelowAutograd():
        torch.ops.posenc.rope.default.redispatch(keyset & torch._C._after_autograd_keyset,
                                                 q, k, positions, **options)
    torch.autograd.graph.increment_version(q if k is None else [q, k])


# -- torch.ops.posenc.rope_functional: new tensors ------------------------------------------------

def _rope_functional_kernel(q, k, positions=None, **options):
    _check_devices(q=q, k=k, positions=positions)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    _posenc_rope(q, k, positions, options, q_out, k_out)
    return q_out, k_out


def _rope_functional_fake(q, k, positions=None, **options):
    _check_devices(q=q, k=k, positions=positions)
    return torch.empty_like(q), torch.empty_like(k)


class _Rotate(torch.autograd.Function):
    """rope_functional under autograd. (torch.library.register_autograd would do, but its
    wrapper refills every default of the schema on each call, which costs about 200 us with
    this many options.)"""

    @staticmethod
    def forward(ctx, q, k, positions, keyset, options):
        with torch._C._AutoDispatchBelowAutograd():
            rotated = torch.ops.posenc.rope_functional.default.redispatch(
                keyset & torch._C._after_autograd_keyset, q, k, positions, **options)
        ctx.save_for_backward(positions)
        ctx.options = options
        return rotated

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        (positions,) = ctx.saved_tensors
        grad_q, grad_k = torch.ops.posenc.rope_functional(
            _readable(grad_q), _readable(grad_k), positions, **_inverted(ctx.options))
        return grad_q, grad_k, None, None, None


def _rope_functional_autograd(keyset, q, k, positions=None, **options):
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        return _Rotate.apply(q, k, positions, keyset, options)
    with torch._C._AutoDispatchBelowAutograd():
        return torch.ops.posenc.rope_functional.default.redispatch(
            keyset & torch._C._after_autograd_keyset, q, k, positions, **options)


# -- shared by both backward passes ---------------------------------------------------------------

def _inverted(options: dict[str, Any]) -> dict[str, Any]:
    """The options of the backward pass: the rotation by -t. With an attention factor a,
    posenc's inverse is a R(-t), the transpose of a R(t): exactly the gradient."""
    return {**options, "inverse": not options.get("inverse", False)}


def _readable(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor as posenc reads it: posenc refuses broadcast (zero) strides, which autograd
    gives the gradient of a sum and HF's position_ids may have (expanded over the batch)."""
    if any(stride == 0 and size > 1 for stride, size in zip(tensor.stride(), tensor.shape)):
        return tensor.contiguous()
    return tensor


def _writable_copy(grad: torch.Tensor) -> torch.Tensor:
    # a new tensor: the gradient handed to backward may be shared with other nodes
    return grad.clone(memory_format=torch.contiguous_format)


# -- registration ---------------------------------------------------------------------------------

_LIBRARY = torch.library.Library("posenc", "DEF")
_LIBRARY.define(f"rope(Tensor(a!) q, Tensor(b!)? k=None, Tensor? positions=None, *, "
                f"{_OPTIONS_SCHEMA}) -> ()")
_LIBRARY.define(f"rope_functional(Tensor q, Tensor k, Tensor? positions=None, *, "
                f"{_OPTIONS_SCHEMA}) -> (Tensor, Tensor)")
# CompositeExplicitAutograd: every device reaches the kernel, which refuses other devices by name
# (with only a CPU kernel, torch's own error would not name the argument).
_LIBRARY.impl("rope", _rope_kernel, "CompositeExplicitAutograd")
_LIBRARY.impl("rope", _rope_autograd, "Autograd", with_keyset=True)
_LIBRARY.impl("rope_functional", _rope_functional_kernel, "CompositeExplicitAutograd")
torch.library.register_fake("posenc::rope", _rope_fake, lib=_LIBRARY)
torch.library.register_fake("posenc::rope_functional", _rope_functional_fake, lib=_LIBRARY)
_LIBRARY.impl("rope_functional", _rope_functional_autograd, "Autograd", with_keyset=True)


# -- drop-ins -------------------------------------------------------------------------------------

def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, position_ids: Optional[torch.Tensor],
                         config: Any, unsqueeze_dim: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """HF transformers' apply_rotary_pos_emb, with the positions and the config in place of the
    cos and sin tensors: returns new (q_embed, k_embed), differentiable.

    q, k: HF's [batch, heads, seq, head_dim] (``unsqueeze_dim=2``: [batch, seq, heads,
    head_dim]), any strides, f32/f16/bf16. position_ids: [batch, seq] (a batch of 1 shared by
    all), [seq], M-RoPE's [3, batch, seq], or None (0, 1, 2, ...). config: the model's config
    (object or dict), its rope dict, or a posenc-form scaling dict, read as :func:`rope_options`
    reads it with q's head size; it may also be the options :func:`rope_options` returned.
    """
    if unsqueeze_dim not in (1, 2):
        raise _error(f"unsqueeze_dim: {unsqueeze_dim!r} is not 1 ([batch, heads, seq, dim]) "
                     "or 2 ([batch, seq, heads, dim])")
    options = config if _is_options(config) else rope_options(config, head_dim=q.shape[-1])
    positions = position_ids
    if positions is not None:
        if options.get("multimodal", "none") != "none" and positions.dim() == 3:
            positions = positions.permute(1, 2, 0)  # [3, batch, seq] -> posenc's [batch, seq, 3]
        if positions.dim() == (3 if options.get("multimodal", "none") != "none" else 2) \
                and positions.shape[0] == 1:
            positions = positions[0]  # one batch's ids, shared: posenc's [seq]
    return torch.ops.posenc.rope_functional(q, k, positions,
                                            layout="bhtd" if unsqueeze_dim == 1 else "bthd",
                                            **options)


def _is_options(value: Any) -> bool:
    """Whether a dict holds the operators' options (rope_options' result) rather than a
    config: every key an option name. {} is taken for options: plain RoPE either way."""
    return isinstance(value, dict) and all(key in _DEFAULTS for key in value)


class RotaryEmbedding(torch.nn.Module):
    """vLLM's RotaryEmbedding, by posenc: ``forward(positions, query, key)`` rotates query
    and key in place and returns them.

    head_size: the head size; rotary_dim: the dims rotated at the start of each head (less
    than head_size: partial rotary, the rest passed through); max_position_embeddings: the
    model's context length (read by scalings that need it); base: theta; is_neox_style: False
    for GPT-J's interleaved pairs; dtype: vLLM's cache dtype, kept for its signature (posenc
    computes each angle in float64 and writes the tensors' own dtype); scaling: an HF
    rope_scaling dict or a posenc-form scaling dict.
    """

    def __init__(self, head_size: int, rotary_dim: int, max_position_embeddings: int,
                 base: float, is_neox_style: bool = True, dtype: Optional[torch.dtype] = None,
                 *, scaling: Any = None) -> None:
        super().__init__()
        self.head_size = int(head_size)
        self.rotary_dim = int(rotary_dim)
        self.max_position_embeddings = int(max_position_embeddings)
        self.base = float(base)
        self.is_neox_style = bool(is_neox_style)
        self.dtype = dtype
        self.options = rope_options(
            scaling, head_dim=self.head_size, rotary_dim=self.rotary_dim, theta=self.base,
            style="neox" if self.is_neox_style else "gptj",
            max_position_embeddings=self.max_position_embeddings)

    def forward(self, positions: torch.Tensor, query: torch.Tensor,
                key: Optional[torch.Tensor] = None, offsets: Optional[torch.Tensor] = None
                ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """positions: int64 [tokens] (or [batch, seq] with query [batch, seq, ...]; M-RoPE:
        [3, tokens]); query, key: [tokens, heads * head_size] or [tokens, heads, head_size],
        viewed as heads where they lie (a slice of a fused qkv is fine). offsets: added to
        positions (vLLM's long-context LoRA)."""
        if offsets is not None:
            positions = positions + offsets
        if self.options.get("multimodal", "none") != "none":
            positions = positions.movedim(0, -1)  # [3, tokens] -> posenc's [tokens, 3]
            lead = positions.shape[:-1]
        else:
            lead = positions.shape
        q = query.view(*lead, -1, self.head_size)
        k = None if key is None else key.view(*lead, -1, self.head_size)
        torch.ops.posenc.rope(q, k, positions, **self.options)
        return query, key

    def extra_repr(self) -> str:
        return (f"head_size={self.head_size}, rotary_dim={self.rotary_dim}, "
                f"max_position_embeddings={self.max_position_embeddings}, base={self.base}, "
                f"is_neox_style={self.is_neox_style}")
