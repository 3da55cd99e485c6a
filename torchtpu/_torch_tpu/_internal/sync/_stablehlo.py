"""The pending graph (``_graph.describe``) as StableHLO text: one ``func.func @main`` whose
arguments are the graph's inputs and whose results are the tensors asked about.

Recorded ops are PyTorch's (mostly out= and in-place overloads); each is written as the StableHLO
ops that compute it where it has a StableHLO form (``_stablehlo_ops.py``), else as
``stablehlo.custom_call @aten.<op>``, listed in a comment at the end. Views are not recorded
ops: an operand is a view of the value its storage holds, written as slice / reshape / transpose
/ broadcast_in_dim; a write into a view of a storage (``x[0].fill_(1)``) is a
``stablehlo.dynamic_update_slice`` of the storage's value (``_stablehlo_text.py``). The text
follows StableHLO's pretty syntax; nothing is compiled or run.
"""
from __future__ import annotations

from torch_tpu._internal.sync._graph import Graph, Node, View
from torch_tpu._internal.sync._stablehlo_ops import LOWERINGS, Arg, Lowering, Unsupported
from torch_tpu._internal.sync._stablehlo_text import (
    VIEW_TARGETS, Emitter, _prod, apply_steps, plan_view, update_steps)


class Module:
    def __init__(self, graph: Graph):
        self.g = graph
        self.e = Emitter()
        self.ssa: dict = {}  # value id -> SSA name (the value in its own geometry)
        self.inputs = 0

    def value(self, vid: int) -> str:
        if vid not in self.ssa:
            v = self.g.values[vid]
            assert v.is_input, "a value is read before the op that writes it"
            kind = "uninitialized pending storage" if v.input_pending else "materialized tensor"
            names = f" ({', '.join(v.names)})" if v.names else ""
            self.ssa[vid] = self.e.argument(
                v.sizes, v.dtype, f"parameter {self.inputs}{names}: {kind}, storage {v.storage}")
            self.inputs += 1
        return self.ssa[vid]

    def view_of(self, vid: int, view) -> str:
        """The value `vid` seen through `view` (a View of the same storage)."""
        v = self.g.values[vid]
        x = self.value(vid)
        if v.dtype == view.dtype:
            steps = plan_view(v.sizes, v.strides, v.offset, view.sizes, view.strides, view.offset)
            if steps is not None:
                return apply_steps(self.e, x, steps)
        if _prod(view.sizes) == 0:
            return self.e.constant([], view.sizes, view.dtype)
        return self.e.custom_call(
            "torchtpu.view", [x], [(view.sizes, view.dtype)],
            f"sizes={view.sizes}, strides={view.strides}, offset={view.offset} of sizes="
            f"{v.sizes}, strides={v.strides}, offset={v.offset}")[0]

    def read(self, view: View) -> Arg:
        """An operand: its view of a value, or a CPU constant (a Python number stays one)."""
        if view.value >= 0:
            return Arg(self.view_of(view.value, view), None, view.sizes, view.dtype, False)
        value = view.constant_value()
        if value is not None and not isinstance(value, list) and not view.sizes:
            # A Python number (wrapped) or a CPU scalar.
            return Arg(None if view.wrapped_number else self.e.constant(value, [], view.dtype),
                       value, [], view.dtype, view.wrapped_number)
        if value is not None:
            flat = value if isinstance(value, list) else [value]
            return Arg(self.e.constant(flat, view.sizes, view.dtype), None, view.sizes,
                       view.dtype, False)
        x = self.e.argument(view.sizes, view.dtype,
                            f"a CPU tensor operand ({view.argument}) too large to be described")
        return Arg(x, None, view.sizes, view.dtype, False)

    def read_ssa(self, view: View) -> str:
        a = self.read(view)
        return a.ssa if a.ssa is not None else self.e.constant(a.value, [], view.dtype)

    def node(self, node: Node) -> None:
        where = f" ({node.location})" if node.location else ""
        self.e.comment(f"#{node.index} {node.full_name}{where}")
        written = node.written
        results = None
        fn = LOWERINGS.get(node.op)
        if fn is not None and written:
            mark = self.e.mark()
            try:
                results = fn(Lowering(self, node))
            except Unsupported:
                results = None
            if results is None:
                self.e.rewind(mark)
        if results is None:
            inputs = [self.read_ssa(o) for o in node.operands if o.defined and o.read]
            config = f"{node.full_name}(" + ", ".join(
                f"{n}={t}" for n, _, t in node.argument_text) + ")"
            target = node.name.replace("::", ".")
            results = self.e.custom_call(target, inputs, [(w.sizes, w.dtype) for w in written],
                                         config)
            self.e.custom_nodes.append(node.full_name)
        for w, r in zip(written, results):
            r = self.e.convert(r, w.dtype)
            if self.e.sizes(r) != w.sizes:
                r = self.e.reshape(r, w.sizes)
            v = self.g.values[w.writes]
            if v.updates < 0:
                self.ssa[w.writes] = r
                continue
            base = self.g.values[v.updates]
            steps = plan_view(base.sizes, base.strides, base.offset, w.sizes, w.strides, w.offset)
            new = None
            if steps is not None and base.dtype == w.dtype:
                new = update_steps(self.e, self.value(v.updates), steps, r)
            if new is None:
                new = self.e.custom_call(
                    "torchtpu.update_view", [self.value(v.updates), r], [(v.sizes, v.dtype)],
                    f"sizes={w.sizes}, strides={w.strides}, offset={w.offset}")[0]
            self.ssa[w.writes] = new

    def text(self) -> str:
        for n in self.g.nodes:
            self.node(n)
        outs = [self.view_of(o.value, o) for o in self.g.outputs]
        e = self.e
        args = ", ".join(f"{name}: {e.type_of(name)}" for name, _ in e.args)
        out_types = [e.type_of(x) for x in outs]
        result = out_types[0] if len(out_types) == 1 else f"({', '.join(out_types)})"
        lines = ["module {"]
        for name, comment in e.args:
            lines.append(f"  // {name}: {comment}")
        lines.append(f"  func.func @main({args}) -> {result} {{")
        lines += e.lines
        lines.append(f"    return {', '.join(outs)} : {', '.join(out_types)}")
        lines.append("  }")
        lines.append("}")
        views = {k: c for k, c in e.custom_calls.items() if k in VIEW_TARGETS}
        if e.custom_nodes or views:
            lines.append("// Ops without a StableHLO form here, written as stablehlo.custom_call:")
            seen: dict = {}
            for n in e.custom_nodes:
                seen[n] = seen.get(n, 0) + 1
            for n, c in seen.items():
                lines.append(f"//   {n}" + (f" (x{c})" if c > 1 else ""))
            for k, c in views.items():
                if k.startswith("torchtpu."):
                    lines.append(f"//   {k}" + (f" (x{c})" if c > 1 else "") +
                                 " (a view StableHLO's slices, reshapes and transposes do not"
                                 " reach)")
        return "\n".join(lines) + "\n"


def to_mlir(graph: Graph) -> str:
    return Module(graph).text()
