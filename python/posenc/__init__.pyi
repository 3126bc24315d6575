# SPDX-License-Identifier: MIT
# Type stubs of the posenc package (the C extension and its Python layer).
import os
from typing import Any, Literal, Mapping, Sequence, TypeVar, overload

import numpy as np

from . import hf as hf
from .hf import HFWarning as HFWarning

_A = TypeVar("_A")
_B = TypeVar("_B")

__version__: str

class Error(Exception):
    status: str
    code: int

class InputError(Error, ValueError): ...
class DeviceFailure(Error, RuntimeError): ...
class HostError(Error, RuntimeError): ...
class InvalidArgument(InputError): ...
class InvalidShape(InputError): ...
class InvalidDtype(InputError): ...
class InvalidLayout(InputError): ...
class OutOfBounds(InputError): ...
class DeviceNotFound(DeviceFailure): ...
class BackendUnavailable(DeviceFailure): ...
class Unsupported(DeviceFailure): ...
class DeviceInitFailed(DeviceFailure): ...
class OutOfDeviceMemory(DeviceFailure): ...
class DeviceLost(DeviceFailure): ...
class KernelBuildFailed(DeviceFailure): ...
class DeviceError(DeviceFailure): ...
class OutOfMemory(HostError): ...
class IoError(HostError): ...
class Internal(HostError): ...

class Context:
    def __init__(self, device: str | None = None, *, num_threads: int = 0,
                 allow_software: bool = False, ignore_env: bool = False) -> None: ...
    @property
    def device(self) -> dict[str, Any]: ...
    def stats(self) -> dict[str, int]: ...
    def prepare(self, *, rope: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
                sinusoidal: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None
                ) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Context: ...
    def __exit__(self, *args: object) -> None: ...

def version() -> str: ...
def devices() -> list[dict[str, Any]]: ...
def default_context() -> Context: ...

# The canonical names of the library's lists, by value (see posenc.NAMES); the names below are
# written out for type checkers, which cannot read them at run time. Hyphens for underscores
# and any case are accepted too.
NAMES: dict[str, tuple[str, ...]]

_Style = Literal["neox", "gptj"] | int
_Multimodal = Literal["none", "1d", "mrope", "mrope_interleaved", "vision_2d",
                      "vision_2d_pixtral", "pixtral", "positions_map",
                      "vision_ggml"] | int | None

@overload
def rope(q: _A, k: None = None, *, positions: Any = None, position_ids: Any = None,
         offset: int = 0,
         theta: float | None = None, style: _Style = "neox", rotary_dim: int | None = None,
         rotary_offset: int = 0, inverse: bool = False,
         scaling: Mapping[str, Any] | Any | None = None,
         multimodal: _Multimodal = None, mrope_section: Sequence[int] | None = None,
         components: int | None = None, component_map: Sequence[int] | Any | None = None,
         layout: Literal["bthd", "bhtd"] = "bthd", out: _A | None = None, k_out: None = None,
         k_cache: None = None, slot_mapping: None = None, v: None = None,
         v_cache: None = None, attention_factor: float | None = None, cos: Any = None,
         sin: Any = None, num_heads: int | None = None, q_norm_weight: Any = None,
         k_norm_weight: None = None, norm_eps: float | None = None,
         norm_weight_offset: float | None = None,
         context: Context | None = None) -> _A: ...
@overload
def rope(q: _A, k: _B, *, positions: Any = None, position_ids: Any = None,
         offset: int = 0, theta: float | None = None,
         style: _Style = "neox", rotary_dim: int | None = None, rotary_offset: int = 0,
         inverse: bool = False,
         scaling: Mapping[str, Any] | Any | None = None, multimodal: _Multimodal = None,
         mrope_section: Sequence[int] | None = None, components: int | None = None,
         component_map: Sequence[int] | Any | None = None,
         layout: Literal["bthd", "bhtd"] = "bthd", out: _A | None = None,
         k_out: _B | None = None, k_cache: Any = None, slot_mapping: Any = None, v: Any = None,
         v_cache: Any = None, attention_factor: float | None = None, cos: Any = None,
         sin: Any = None, num_heads: int | None = None, q_norm_weight: Any = None,
         k_norm_weight: Any = None, norm_eps: float | None = None,
         norm_weight_offset: float | None = None,
         context: Context | None = None) -> tuple[_A, _B]: ...

class Rope:
    def __init__(self, config: Mapping[str, Any] | str | os.PathLike[str] | Any | None = None,
                 *, theta: float | None = None, head_dim: int | None = None,
                 rotary_dim: int | None = None, rotary_offset: int = 0, style: _Style = "neox",
                 scaling: Mapping[str, Any] | str | os.PathLike[str] | Any | None = None,
                 layout: Literal["bthd", "bhtd"] = "bthd", multimodal: _Multimodal = None,
                 mrope_section: Sequence[int] | None = None, components: int | None = None,
                 component_map: Sequence[int] | Any | None = None,
                 attention_factor: float | None = None, inverse: bool = False,
                 layer_type: str | None = None, max_position_embeddings: int | None = None,
                 num_heads: int | None = None, norm_eps: float | None = None,
                 norm_weight_offset: float | None = None,
                 context: Context | None = None) -> None: ...
    @property
    def settings(self) -> dict[str, Any]: ...
    @property
    def context(self) -> Context | None: ...
    @overload
    def __call__(self, q: _A, k: None = None, *, positions: Any = None,
                 position_ids: Any = None, offset: int = 0, out: _A | None = None,
                 k_out: None = None, k_cache: None = None, slot_mapping: None = None,
                 v: None = None, v_cache: None = None, cos: Any = None, sin: Any = None,
                 q_norm_weight: Any = None, k_norm_weight: None = None,
                 context: Context | None = None) -> _A: ...
    @overload
    def __call__(self, q: _A, k: _B, *, positions: Any = None, position_ids: Any = None,
                 offset: int = 0, out: _A | None = None, k_out: _B | None = None,
                 k_cache: Any = None, slot_mapping: Any = None, v: Any = None,
                 v_cache: Any = None, cos: Any = None, sin: Any = None,
                 q_norm_weight: Any = None, k_norm_weight: Any = None,
                 context: Context | None = None) -> tuple[_A, _B]: ...

def sinusoidal(out: _A | None = None, *, positions: Any = None, rows: int | None = None,
               d_model: int | None = None, batch: int | None = None, offset: int = 0,
               x: Any = None, layout: Literal["interleaved", "sin_cos", "cos_sin"] =
               "interleaved", base: float = 10000.0, freq_shift: float = 0.0,
               position_scale: float = 1.0, input_scale: float = 1.0,
               output_scale: float = 1.0, dtype: str | np.dtype[Any] = "float32",
               context: Context | None = None) -> _A | np.ndarray[Any, Any]: ...
