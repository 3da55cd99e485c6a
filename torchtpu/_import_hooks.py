"""Runs a function on a module right after it is first imported, so that importing torchtpu
imports nothing it adapts (Dynamo, for one, takes about a second to import).

``after_import("torch._dynamo.device_interface", fn)``: ``fn(module)`` now if the module is
already imported, else right after its code has run, by a finder on ``sys.meta_path`` that wraps
the module's loader (and steps aside for the other names)."""
from __future__ import annotations

import importlib.abc
import sys
from typing import Callable

_pending: dict[str, list[Callable]] = {}


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, callbacks):
        self._loader = loader
        self._callbacks = callbacks

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        for callback in self._callbacks:
            callback(module)

    def __getattr__(self, name):  # the rest of the loader's interface (get_source, ...)
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, _pending.pop(fullname))
                return spec
        return None


def after_import(name: str, callback: Callable) -> None:
    if name in sys.modules:
        callback(sys.modules[name])
        return
    _pending.setdefault(name, []).append(callback)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
