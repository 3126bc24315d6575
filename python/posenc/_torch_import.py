# SPDX-License-Identifier: MIT
# torch.ops.posenc.* registered whenever torch is imported, before or after posenc, with no
# import of torch by posenc itself: posenc.torch is imported once torch's own import finishes.
from __future__ import annotations

import importlib
import importlib.abc
import sys
import warnings


def _register() -> None:
    try:
        importlib.import_module("posenc.torch")
    except Exception as error:  # a torch too old, a broken install: posenc itself still works
        warnings.warn(f"posenc: torch.ops.posenc is not registered ({type(error).__name__}: "
                      f"{error}); `import posenc.torch` shows why", RuntimeWarning, stacklevel=3)


class _TorchLoader(importlib.abc.Loader):
    """torch's own loader, then the registration; torch's module keeps its own loader."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        if _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
        _register()


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it asks the finders after it for top-level torch, and wraps the
    loader of what they find."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None  # not a module posenc can wait for: torch then finds its own way
        spec.loader = _TorchLoader(spec.loader)
        return spec


_FINDER = _TorchFinder()


def register_when_imported() -> None:
    """Registers posenc's torch operators now if torch is imported, else when it is."""
    torch = sys.modules.get("torch")
    if torch is not None:
        if not getattr(getattr(torch, "__spec__", None), "_initializing", False):
            _register()
        # else posenc is imported from inside torch's own import, too late for the finder:
        # `import posenc.torch` registers then
        return
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
