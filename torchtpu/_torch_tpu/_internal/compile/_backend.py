"""``torch_tpu._internal.compile._backend``: TorchTPU's ``torch.compile`` backend object
``TpuBackend`` and its helpers, over torchtpu's compiled mode (torchtpu/compile/,
docs/compiled-mode.md; docs/coming-from-torchtpu.md).

``torch.compile(model, backend=TpuBackend())`` compiles as ``backend="tpu"`` does on torchtpu:
AOTAutograd's graphs become programs, captured at their first call, replayed, charged as one
launch each. What TorchTPU's arguments mean here:

- ``dynamism=False`` (the default): as TorchTPU, a graph with dynamic sizes is refused
  (NotImplementedError asking for ``dynamic=False``), so a program that would fail on a TPU
  fails here too. ``dynamism=True`` (or ``options={"bounded_dynamism": True}``) accepts them;
  ``torch.compile(..., dynamic=True)`` is refused with it, as TorchTPU refuses it. TorchTPU
  compiles one executable at each symbol's upper bound and pads; torchtpu's programs compute at
  the call's sizes and are charged per bucket of sizes (powers of two unless
  ``options={"buckets": ...}``: docs/compiled-mode.md, "Buckets of dynamic sizes").
- ``debug=True``: every compiled graph keeps its code and StableHLO text
  (``_compiled_executables[i].graph_module_debug_str`` / ``.mlir_text``, compiler.py), and the
  disk cache is not used, as TorchTPU's debug mode skips its cache.
- ``enable_serialization``: TorchTPU's AOTAutograd cache entries; here torchtpu's disk cache of
  AOTAutograd's graphs, used when it is on (``TORCHTPU_CACHE_DIR`` or TorchTPU's tier-2/tier-3
  variables; docs/compiled-mode.md, "The compilation cache"); False keeps this backend's graphs
  out of it.
- ``options={"async_compile": True}``: TorchTPU compiles in the background and the first call
  raises ``AsyncCompilationSubmitted`` instead of running. Here the graphs are compiled when
  Dynamo hands them over, before that first call, which still raises as TorchTPU's does, so the
  caller's control flow is the same; each program is captured and planned at its first real
  call (docs/design.md 3.2). Other options are torchtpu's (``matmul_precision``, ``replay``,
  ``max_programs``, ``buckets``: ``CompileOptions``); unknown ones are refused.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import _pytree

from torch_tpu._internal.compile import compiler

__all__ = ["AsyncCompilationSubmitted", "TpuBackend", "async_compile", "get_default_cpu_backend",
           "resolve_compilations", "to_device"]


def get_default_cpu_backend() -> str:
    """The Dynamo backend TorchTPU uses for graphs on the CPU: Inductor where it has a C++
    compiler, ``aot_eager`` otherwise."""
    return "aot_eager" if torch._inductor.config.cpp.cxx[0] is None else "inductor"


def to_device(x: Any, backend: str | torch.device) -> Any:
    """``x`` (any nesting) with its tensors and modules moved to ``backend``."""
    def move(t):
        return t.to(backend)

    return _pytree.tree_map_only((torch.Tensor, torch.nn.Module), move, x)


class AsyncCompilationSubmitted(Exception):
    """Raised by the first call of a function compiled with ``options={"async_compile": True}``
    in place of running it (TorchTPU's signal that its compilation went to the background);
    ``artifact``: the compiled graph (compiler.CompiledArtifact), ``resolve()`` waits for it."""

    def __init__(self, artifact: Any = None):
        super().__init__()
        self.artifact = artifact

    def resolve(self) -> None:
        resolve = getattr(self.artifact, "resolve", None)
        if callable(resolve):
            resolve()


class TpuBackend:
    """TorchTPU's backend object for ``torch.compile(..., backend=TpuBackend(...))``, compiling
    with torchtpu's compiled mode (this module's docstring says what each argument does here).
    ``_compiled_executables``: a ``compiler.CompiledArtifact`` per ATen graph compiled, in
    order (a forward, then its backward at the first backward)."""

    def __init__(self, debug: bool = False, dynamism: bool = False,
                 enable_serialization: bool = True):
        self._debug = bool(debug)
        self._dynamism = bool(dynamism)
        self._enable_serialization = False if debug else bool(enable_serialization)
        self._compiled_executables: list[compiler.CompiledArtifact] = []

    def _on_graph(self, graph) -> None:
        self._compiled_executables.append(compiler.CompiledArtifact(graph, self._debug))

    def __call__(self, graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any],
                 **kwargs) -> Callable[..., Any]:
        from torchtpu.compile import tpu_backend

        options = dict(kwargs.get("options") or {})
        is_async = bool(options.pop("async_compile", False))
        bounded = bool(options.pop("bounded_dynamism", self._dynamism))
        if not bounded:
            if compiler.has_dynamic_symints(example_inputs):
                raise NotImplementedError(
                    "TPU backend: does not support dynamic shape. Please set "
                    "torch.compile(..., dynamic=False, ...) and try again (or "
                    "TpuBackend(dynamism=True); torchtpu's backend=\"tpu\" takes dynamic shapes "
                    "too)")
        elif not torch._dynamo.config.assume_static_by_default:
            raise NotImplementedError(
                "TPU backend does not support torch.compile(..., dynamic=True, ...). Please run "
                "torch.compile() with default dynamism i.e. torch.compile(model) and try again "
                "(torchtpu's backend=\"tpu\" takes dynamic=True)")
        compiled = tpu_backend(graph_module, example_inputs, mode=kwargs.get("mode"),
                               options=options or None, on_graph=self._on_graph,
                               disk_cache=self._enable_serialization)
        if not is_async:
            return compiled
        artifact = self._compiled_executables[-1] if self._compiled_executables else None
        warm = [False]

        def run(*args):
            if not warm[0]:  # (TorchTPU's first call after an async compile does not run)
                warm[0] = True
                raise AsyncCompilationSubmitted(artifact)
            return compiled(*args)

        return run


def resolve_compilations(artifacts: Sequence[Any]) -> int:
    """Waits for compilations submitted with ``async_compile``: how many of ``artifacts`` (each
    an ``AsyncCompilationSubmitted`` or an artifact) had something to resolve. torchtpu compiles
    synchronously, so every one is complete already; the count is TorchTPU's."""
    count = 0
    for item in artifacts:
        if isinstance(item, AsyncCompilationSubmitted):
            item.resolve()
            count += 1
        elif callable(getattr(item, "resolve", None)):
            item.resolve()
            count += 1
    return count


def _unpack(args) -> tuple[tuple, dict]:
    if isinstance(args, tuple):
        if len(args) == 2 and isinstance(args[0], tuple) and isinstance(args[1], dict):
            return args[0], args[1]
        return args, {}
    if isinstance(args, dict):
        return (), args
    return (args,), {}


def async_compile(fn: Callable[..., Any], warmup_inputs: Sequence[Any], *, no_grad: bool = True,
                  **backend_kwargs: Any) -> Callable[..., Any]:
    """``fn`` compiled for every input shape of ``warmup_inputs`` (each a tuple of positional
    arguments, a dict of keyword arguments, ``((args), {kwargs})`` or one argument), with
    ``fullgraph=True, dynamic=False``, under ``torch.no_grad()`` unless ``no_grad=False``;
    ``backend_kwargs`` are backend options. The warm-up calls compile without running (their
    ``AsyncCompilationSubmitted`` is caught here); the compiled function is returned."""
    compiled = torch.compile(fn, backend=TpuBackend(), fullgraph=True, dynamic=False,
                             options={"async_compile": True, **backend_kwargs})
    if no_grad:
        compiled = torch.no_grad()(compiled)
    artifacts = []
    for args in warmup_inputs:
        positional, keywords = _unpack(args)
        try:
            compiled(*positional, **keywords)
        except AsyncCompilationSubmitted as e:
            if e.artifact is not None:
                artifacts.append(e.artifact)
    resolve_compilations(artifacts)
    return compiled
