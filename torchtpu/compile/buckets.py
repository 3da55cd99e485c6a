"""Buckets of dynamic sizes (docs/compiled-mode.md, "Buckets of dynamic sizes"): the symbolic
sizes of a graph's inputs, and the inputs of a bucket's pricing capture made at the bucket's
sizes."""
from __future__ import annotations

import torch

from .counters import _count

class _Unpriced(Exception):
    """A bucket's inputs cannot be made (the reason is counted)."""


class _Busy(Exception):
    """A bucket cannot be priced now: another capture is in progress (of another thread)."""


class _Symbolic:
    """The symbolic sizes of a graph's inputs, as sympy expressions (or ints), so that the disk
    cache keeps them with the graph: per input None (a static input), ("int", expr) or
    ("tensor", sizes, strides); `written`: the inputs the graph writes."""

    def __init__(self, inputs, written):
        self.inputs = inputs
        self.written = written


def _expr(d):
    return d.node.expr if isinstance(d, torch.SymInt) else int(d)


def _symbolic_inputs(gm):
    """_Symbolic of the graph's inputs (their fake values), or None when no size is symbolic."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inputs, any_symbolic = [], False
    for v in (n.meta.get("val") for n in placeholders):
        if isinstance(v, torch.SymInt):
            inputs.append(("int", _expr(v)))
            any_symbolic = True
        elif isinstance(v, torch.Tensor) and any(
                isinstance(d, torch.SymInt) for d in (*v.shape, *v.stride())):
            inputs.append(("tensor", [_expr(d) for d in v.shape], [_expr(d) for d in v.stride()]))
            any_symbolic = True
        else:
            inputs.append(None)
    if not any_symbolic:
        return None
    index = {n: i for i, n in enumerate(placeholders)}
    written = set()
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        for i, arg in enumerate(schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            while isinstance(value, torch.fx.Node) and value.op == "call_function" and value.args:
                value = value.args[0]  # (a view of an input: the input is written)
            if value in index:
                written.add(index[value])
    return _Symbolic(inputs, written)


def _bind_symbols(symbolic, args):
    """{symbol: this call's value} from the inputs whose sizes are bare symbols; None when a
    symbol of some input's sizes stays unbound."""
    sizes, needed = {}, set()
    for spec, a in zip(symbolic.inputs, args):
        if spec is None:
            continue
        pairs = [(spec[1], a)] if spec[0] == "int" else list(zip(spec[1], a.shape))
        for expr, n in pairs:
            if isinstance(expr, int):
                continue
            needed |= expr.free_symbols
            if expr.is_Symbol:
                sizes[expr] = int(n)
    if not needed <= sizes.keys():
        _count("compile.buckets_unpriced.a size no input gives")
        return None
    return sizes


def _size_at(expr, at) -> int:
    if isinstance(expr, int):
        return expr
    value = expr.xreplace(at)
    if not (isinstance(value, int) or value.is_Integer):
        raise _Unpriced(f"size {expr} at the bucket")
    return int(value)


def _at_sizes(a, spec, at, written):
    """Input `a` at the bucket's sizes: an int evaluated there, a tensor of the bucket's sizes
    holding zeros around `a`'s values; a static input as it is (a copy where the graph writes
    it, so pricing changes nothing the user holds)."""
    if spec is None:
        return a.clone() if written and isinstance(a, torch.Tensor) else a
    if spec[0] == "int":
        return _size_at(spec[1], at)
    sizes = [_size_at(d, at) for d in spec[1]]
    strides = [_size_at(d, at) for d in spec[2]]
    if any(n < m for n, m in zip(sizes, a.shape)):
        raise _Unpriced("a size that shrinks at the bucket")
    out = torch.empty_strided(sizes, strides, dtype=a.dtype, device=a.device)
    out.zero_()
    out[tuple(slice(0, m) for m in a.shape)].copy_(a)
    return out
