"""Excess precision in compiled mode (``torch.backends.tpu.allow_excess_precision``; the switch:
torchtpu/backends.py).

On the chip the MXU accumulates a bfloat16 or float16 matmul in float32 and rounds the result to
the input's dtype. When every use of that result widens it to float32 again (an explicit cast, or
an elementwise op whose result is float32 because its other operand is), XLA is allowed to drop
the round trip, so the float32 consumer sees the accumulator's bits. This pass does the same to
an ATen graph before it becomes a program: such a matmul becomes its ``out_dtype=float32``
overload (``aten.mm.dtype`` and the like: csrc/aten/Matmul.cpp) and the widening casts of it go
away. Each matmul rewritten is counted (``compile.excess_precision_matmuls`` in
``torchtpu.metrics.counters()``)."""
from __future__ import annotations

import torch

from . import _C

aten = torch.ops.aten
_NARROW = (torch.bfloat16, torch.float16)

# Each matmul and its out_dtype overload, with where out_dtype goes among the arguments.
_WITH_OUT_DTYPE = {
    aten.mm.default: (aten.mm.dtype, 2),
    aten.bmm.default: (aten.bmm.dtype, 2),
    aten.addmm.default: (aten.addmm.dtype, 3),
    aten.baddbmm.default: (aten.baddbmm.dtype, 3),
}
# Elementwise ops whose float32 result from a narrow operand means the operand was widened first.
_PROMOTING = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor,
              aten.where.self, aten.maximum.default, aten.minimum.default}


def _dtype(node):
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return getattr(val, "dtype", None)


def _widening_cast(user) -> bool:
    if user.target is torch.ops.prims.convert_element_type.default:
        return user.args[1] == torch.float32
    if user.target is aten._to_copy.default:
        return (user.kwargs.get("dtype") == torch.float32 and len(user.args) == 1 and
                set(user.kwargs) <= {"dtype", "layout", "device"})
    return False


def _widens(user) -> bool:
    """Whether ``user`` only ever reads its narrow operand widened to float32."""
    if _widening_cast(user):
        return True
    return user.target in _PROMOTING and _dtype(user) == torch.float32


def apply(gm: torch.fx.GraphModule) -> int:
    """Rewrites ``gm`` in place when the switch allows it; returns the matmuls rewritten."""
    import torchtpu.backends as switches

    if not switches.allow_excess_precision:
        return 0
    rewritten = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _WITH_OUT_DTYPE:
            continue
        if _dtype(node) not in _NARROW or node.kwargs:
            continue
        users = list(node.users)
        if not users or not all(_widens(u) for u in users):
            continue
        overload, at = _WITH_OUT_DTYPE[node.target]
        args = list(node.args)
        args.insert(at, torch.float32)
        with gm.graph.inserting_after(node):
            wide = gm.graph.call_function(overload, tuple(args))
        wide.meta = dict(node.meta)
        if "val" in node.meta:
            wide.meta["val"] = node.meta["val"].to(torch.float32)
        for user in users:
            if _widening_cast(user):
                user.replace_all_uses_with(wide)
                gm.graph.erase_node(user)
            else:
                user.replace_input_with(node, wide)
        gm.graph.erase_node(node)
        rewritten += 1
    if rewritten:
        gm.graph.lint()
        gm.recompile()
        _C.metrics_count("compile.excess_precision_matmuls", rewritten)
    return rewritten
