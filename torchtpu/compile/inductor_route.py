"""The default ``torch.compile(model)`` (Inductor) on "tpu" tensors (docs/compiled-mode.md).

torch 2.13's Inductor hands device type "tpu" to its Pallas code generator, which imports
``jax``: on torchtpu's "tpu" a plain ``torch.compile(model)`` would die with
``ModuleNotFoundError: No module named 'jax'``. Inductor has no code generator for the simulated
chip, so a graph whose inputs or values live on "tpu" is compiled by backend ``"tpu"`` instead
(one program per ATen graph, as ``backend="tpu"`` does); graphs on other devices go to Inductor
unchanged. Each routed graph is counted (``compile.inductor_routed``) and the first one warns.

The route is Inductor's entry point, ``torch._inductor.compile_fx.compile_fx`` (what
``torch.compile``'s Inductor wrapper and Dynamo's "inductor" backend call). It is wrapped when
that module is first imported, by a finder on ``sys.meta_path``, so that importing torchtpu does
not import Inductor or Dynamo.
"""
from __future__ import annotations

import functools
import sys
import warnings

from .. import _C

_TARGET = "torch._inductor.compile_fx"
_warned = False


def _on_tpu(gm, example_inputs) -> bool:
    import torch

    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "tpu":
            return True
    for node in getattr(getattr(gm, "graph", None), "nodes", ()):
        value = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, torch.Tensor) and value.device.type == "tpu":
            return True
    return False


def _route(module) -> None:
    original = module.compile_fx
    if getattr(original, "_torchtpu_route", False):
        return

    @functools.wraps(original)
    def compile_fx(model_, example_inputs_, *args, **kwargs):
        global _warned
        if not _on_tpu(model_, example_inputs_):
            return original(model_, example_inputs_, *args, **kwargs)
        from .backend import tpu_backend

        _C.metrics_count("compile.inductor_routed", 1)
        if not _warned:
            _warned = True
            warnings.warn(
                "torch.compile's default backend (Inductor) has no code generator for the "
                "simulated TPU (torch's Inductor sends device 'tpu' to Pallas, which needs jax); "
                "graphs on 'tpu' are compiled with backend='tpu' (docs/compiled-mode.md). Pass "
                "backend='tpu' to say so and silence this warning.",
                stacklevel=2,
            )
        return tpu_backend(model_, example_inputs_)

    compile_fx._torchtpu_route = True
    module.compile_fx = compile_fx


class _Finder:
    """Wraps compile_fx right after ``torch._inductor.compile_fx`` is executed."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module):
            execute(module)
            _route(module)

        loader.exec_module = exec_module  # (this module's own loader instance)
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        return spec


def install() -> None:
    if _TARGET in sys.modules:
        _route(sys.modules[_TARGET])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
