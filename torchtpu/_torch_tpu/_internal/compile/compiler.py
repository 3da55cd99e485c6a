"""``torch_tpu._internal.compile.compiler``: what TorchTPU's ``torch.compile`` backend keeps of
each graph it compiles (``CompiledArtifact``) and ``has_dynamic_symints``
(docs/coming-from-torchtpu.md).

TorchTPU lowers each ATen graph of AOTAutograd to StableHLO and compiles it with XLA into a
PjRt executable; its artifact runs that executable and, with ``TpuBackend(debug=True)``, keeps
the graph's code (``graph_module_debug_str``) and its StableHLO (``mlir_text``). torchtpu runs
each graph as a program of its compiled mode (torchtpu/compile/program.py, ``_GraphProgram``:
captured by fused eager's recorder at its first call, planned, replayed): the artifact here is
that program under TorchTPU's names. Its ``mlir_text`` is the graph's ops as fused eager records
them, written as StableHLO text by the twin's ``sync.computation_mlir`` writer
(torchtpu/_torch_tpu/_internal/sync/_stablehlo.py): text to read, which nothing compiles.

TorchTPU's compiler classes (``Compiler``, ``StaticCompiler``, ``CompilationContext``) lower to
XLA and have no counterpart: asking for them raises NotImplementedError naming what to use.
"""
from __future__ import annotations

import warnings

import torch
import torchtpu
from torch.utils import _pytree

__all__ = ["CompiledArtifact", "has_dynamic_symints"]

_UNSET = ("the FX graph and its StableHLO are recorded in debug mode only: "
          "torch.compile(..., backend=torch_tpu._internal.compile.TpuBackend(debug=True))")

# TorchTPU's XLA compilers: no counterpart on a simulator without XLA.
_XLA_ONLY = ("Compiler", "StaticCompiler", "CompilationContext")


def __getattr__(name):
    if name in _XLA_ONLY:
        raise NotImplementedError(
            f"torch_tpu._internal.compile.compiler.{name} lowers graphs to StableHLO for XLA, "
            "which torchtpu does not have: compile with torch.compile(..., "
            "backend=torch_tpu._internal.compile.TpuBackend()) (torchtpu's compiled mode, "
            "docs/compiled-mode.md); TpuBackend(debug=True) keeps each graph's code and "
            "StableHLO text")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def has_dynamic_symints(args) -> bool:
    """Whether any of ``args`` (any nesting) is a SymInt with free symbols, or a tensor with such
    a size: TorchTPU's test for a graph with dynamic shapes (a SymInt that is a constant counts
    as static)."""
    flat, _ = _pytree.tree_flatten(args)

    def dynamic(v) -> bool:
        return isinstance(v, torch.SymInt) and bool(v.node.expr.free_symbols)

    return any(dynamic(a) or (isinstance(a, torch.Tensor) and any(dynamic(s) for s in a.shape))
               for a in flat)


class CompiledArtifact:
    """One ATen graph compiled by ``TpuBackend`` (forward, backward or inference), in the order
    ``TpuBackend._compiled_executables`` lists them: torchtpu's program of the graph
    (``torchtpu.compile.program._GraphProgram``). Called with AOTAutograd's boxed convention (a
    list of inputs), it runs the graph as compiled mode does."""

    _boxed_call = True

    def __init__(self, graph, debug: bool = False):
        self._graph = graph
        self._debug = debug
        self._mlir_text = None

    @property
    def name(self) -> str:
        """torchtpu's name of the graph (``forward_3``): the name ``torchtpu.metrics.programs()``
        lists its programs under."""
        return self._graph.name

    @property
    def graph_module(self) -> torch.fx.GraphModule:
        return self._graph.gm

    def __call__(self, inputs):
        return self._graph(list(inputs))

    @property
    def graph_module_debug_str(self) -> str | None:
        """The graph's Python code (debug mode; None otherwise, with a warning)."""
        if not self._debug:
            warnings.warn(_UNSET, stacklevel=2)
            return None
        return str(self._graph.gm.code)

    @property
    def mlir_text(self) -> str | None:
        """The graph as StableHLO text (debug mode; None otherwise, with a warning): its ops as
        fused eager records them on placeholder inputs of the graph's shapes (at the sizes first
        seen, for symbolic ones), written by the twin's StableHLO writer; ops without a StableHLO
        form are ``stablehlo.custom_call``s, listed at the end. Made when first asked, running
        nothing on the device (fused eager plans the recorded graph once, every op eliminated
        as dead: one plan-cache miss in torch.tpu._get_cache_stats())."""
        if not self._debug:
            warnings.warn(_UNSET, stacklevel=2)
            return None
        if self._mlir_text is None:
            self._mlir_text = graph_stablehlo(self._graph.gm)
        return self._mlir_text

    @property
    def mlir_texts(self) -> list[str]:
        """TorchTPU splits a graph at collectives into several executables; torchtpu runs one
        program per graph, so this is ``[mlir_text]`` (debug mode)."""
        text = self.mlir_text
        return [] if text is None else [text]

    def resolve(self) -> None:
        """Waits for the compilation (TorchTPU's asynchronous compile): torchtpu's is complete
        when the artifact exists."""

    def stats(self) -> list:
        """torchtpu's statistics of the graph's programs (one per input signature): ops, regions,
        runs, the estimated device time (torchtpu.metrics.programs())."""
        return self._graph.stats()

    def __repr__(self) -> str:
        return f"CompiledArtifact({self.name}, programs={len(self._graph.programs)})"


def _concrete(n) -> int:
    if isinstance(n, torch.SymInt):
        hint = n.node.hint
        if hint is None:
            raise ValueError(f"size {n} has no example value")
        return int(hint)
    return int(n)


def _placeholder(value):
    """A pending tensor of `value`'s metadata (a fake tensor of the graph), or the value."""
    if isinstance(value, torch.Tensor):
        sizes = [_concrete(s) for s in value.shape]
        strides = [_concrete(s) for s in value.stride()]
        return torch.empty_strided(sizes, strides, dtype=value.dtype, device=value.device)
    if isinstance(value, torch.SymInt):
        return _concrete(value)
    return value


def graph_stablehlo(gm: torch.fx.GraphModule) -> str:
    """StableHLO text of an ATen graph: its ops recorded by fused eager on placeholder inputs
    (pending tensors of the placeholders' shapes, no memory) and written out as
    ``sync.computation_mlir`` writes a pending graph; the recorded ops are then dropped, never
    run, and the device generators left as they were. A graph whose ops fused eager cannot
    all record (a host read, an op of data-dependent shape) gives a comment saying so (what
    was recorded before such an op then ran on the placeholders' uninitialized memory)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    header = f"// torchtpu: the ATen graph of {len(placeholders)} inputs, as StableHLO text\n"
    rng = torch.tpu.get_rng_state_all()
    try:
        with torchtpu.eager_mode("fused"), torch.no_grad():
            text = _record_and_write(gm, placeholders)
        # (every tensor of the recording is gone before fused eager is left, which materializes
        # what is pending and still referenced: nothing of it runs)
    except Exception as e:  # (a debug view: say why rather than fail the caller's program)
        text = f"// not written: {type(e).__name__}: {e}\n"
    finally:
        torch.tpu.set_rng_state_all(rng)
    return header + text


def _record_and_write(gm, placeholders) -> str:
    from torch_tpu._internal.sync import _graph, _stablehlo

    args = [_placeholder(n.meta.get("val")) for n in placeholders]
    names = {n.name: a for n, a in zip(placeholders, args) if isinstance(a, torch.Tensor)}
    before = _materializations()
    outs = gm(*args)
    flat = [t for t in _pytree.tree_leaves(outs)
            if isinstance(t, torch.Tensor) and t.device.type == "tpu" and t.layout == torch.strided]
    if _materializations() != before:
        return ("// not written: fused eager could not record every op of the graph (a host "
                "read or an op of data-dependent shape ran it)\n")
    if not flat:
        return "// the graph returns no tpu tensor\n"
    return _stablehlo.to_mlir(_graph.describe(flat, names))


def _materializations() -> int:
    return torchtpu.metrics.counters().get("defer.materializations", 0)
