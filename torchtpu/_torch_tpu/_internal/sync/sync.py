"""Materialization of deferred tensors under TorchTPU's names, over torchtpu's fused eager
(docs/eager-modes.md)."""
from __future__ import annotations

import os
import sys
from typing import Iterable

import torch

import torchtpu
from torchtpu import _C

__all__ = ["computation_graphviz", "computation_mlir", "dump_computation_graphviz",
           "dump_computation_mlir", "is_materialized", "is_materializing", "synchronize"]


def _device_tensors(tensors) -> list[torch.Tensor]:
    if tensors is None:
        return []
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    found = []
    for t in tensors:
        t = getattr(t, "_local_tensor", t)  # a DTensor's shard
        t = getattr(t, "elem", t)  # a wrapper subclass's tensor
        if isinstance(t, torch.Tensor) and t.device.type == "tpu":
            found.append(t)
    return found


def synchronize(tensors: torch.Tensor | Iterable[torch.Tensor] | None = None,
                wait: bool = False) -> None:
    """Computes the deferred tensors (``None``: all of them) and returns when their values are
    there. torchtpu runs every recorded op of the process here, whether or not ``tensors`` need
    it, and waits whatever ``wait`` says: it computes no less than asked and returns no earlier
    than asked (tensors of other devices are ignored, as by TorchTPU)."""
    _device_tensors(tensors)  # (the arguments are checked as TorchTPU checks them)
    torchtpu.sync()


def _check(t: torch.Tensor) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.device.type != "tpu":
        raise ValueError(f"tensor is not on the tpu device: {type(t).__name__} on "
                         f"{getattr(t, 'device', None)}")
    return t


def is_materialized(t: torch.Tensor) -> bool:
    """False while fused eager has recorded the work that writes the tensor and not run it (its
    storage has no memory yet); True otherwise, in every mode."""
    return not _C.defer_is_pending(_check(t))


def is_materializing(t: torch.Tensor) -> bool:
    """True when the tensor has memory and work is still queued on its device's current stream
    (it may be computing the tensor)."""
    if not is_materialized(t):
        return False
    return not torch.tpu.current_stream(t.device).query()


# ---------------------------------------------------------------------------------------------
# The pending graph behind tensors (docs/eager-modes.md, "Inspecting the pending graph").

def _caller_variables(depth: int = 2) -> dict:
    """The local variables of the caller of the public function (to name the graph's values)."""
    frame = sys._getframe(depth)
    try:
        return dict(frame.f_locals)
    finally:
        del frame


def computation_graphviz(*tensors) -> str:
    """Graphviz DOT text of the pending graph behind ``tensors`` (any nesting of tpu tensors,
    flattened as a pytree): the ops fused eager recorded and has not run that the tensors depend
    on, and nothing else. A node per op (``n<i>``: its name, the shape and dtype it writes, its
    scalar arguments), a dashed parameter node per input (``p<i>``: a materialized tensor the ops
    read, or a pending storage no recorded op writes), an edge per data dependency; the tensors
    asked about are drawn bold. Values are named after the caller's local variables that are
    them. Nothing is run or recorded by asking.

    A tensor that nothing pending writes (every tensor in strict and debug eager, or one whose
    work has run) gives a graph of one parameter node. ValueError: no tensors, or a tensor that
    is not on the tpu device."""
    from torch_tpu._internal.sync import _graph

    flat = _graph.device_tensors(tensors)
    return _graph.to_graphviz(_graph.describe(flat, _caller_variables()))


def computation_mlir(*tensors) -> str:
    """The same graph as StableHLO text: ``module { func.func @main(inputs) -> tensors { ... } }``
    with one ``%argN`` per input and one result per tensor asked about, in tensor types such as
    ``tensor<10x10xbf16>``. Element-wise arithmetic, comparisons and unary ops, casts, fills,
    arange, matmuls (``stablehlo.dot_general``, with the float32 matmul precision recorded),
    sum/mean/prod/amax/amin/any/all, softmax, where, cat and the views between ops (slice,
    reshape, transpose, broadcast_in_dim; writes into views as dynamic_update_slice) are written
    as StableHLO ops; any other op as ``stablehlo.custom_call @aten.<op>``, listed in a comment at
    the end. Text to read (the matmul numerics are torchtpu's: docs/simulated-chip.md), not a
    program torchtpu compiles; nothing is run or recorded by asking.

    The comments above ``@main`` say what each argument is (a materialized tensor, or a pending
    storage no recorded op writes), with the caller's variables that are it. A tensor that nothing
    pending writes gives ``@main`` returning its parameter. ValueError: no tensors, or a tensor
    that is not on the tpu device."""
    from torch_tpu._internal.sync import _graph, _stablehlo

    flat = _graph.device_tensors(tensors)
    return _stablehlo.to_mlir(_graph.describe(flat, _caller_variables()))


def _write_text(text: str, file_name) -> None:
    directory = os.path.dirname(os.fspath(file_name))
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(file_name, "w") as f:
        f.write(text)


def dump_computation_graphviz(tensors: list, file_name) -> None:
    """Writes computation_graphviz(*tensors) to ``file_name`` (its directories made)."""
    from torch_tpu._internal.sync import _graph

    flat = _graph.device_tensors(tensors)
    _write_text(_graph.to_graphviz(_graph.describe(flat, _caller_variables(2))), file_name)


def dump_computation_mlir(tensors: list, file_name) -> None:
    """Writes computation_mlir(*tensors) to ``file_name`` (its directories made)."""
    from torch_tpu._internal.sync import _graph, _stablehlo

    flat = _graph.device_tensors(tensors)
    _write_text(_stablehlo.to_mlir(_graph.describe(flat, _caller_variables(2))), file_name)
