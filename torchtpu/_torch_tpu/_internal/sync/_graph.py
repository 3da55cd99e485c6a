"""The pending graph of fused eager behind some tensors, as torchtpu's defer layer describes it
(``torchtpu._C.defer_describe_pending``, csrc/defer/Inspect.h), and its Graphviz form.

The description numbers *values*: every write of a storage by a recorded op is a new value, an
operand reads the value its storage holds at that point through its own view, and a storage the
graph reads before writing it is an *input* (a materialized tensor, or a pending storage no
recorded op writes). Asking runs nothing and records nothing."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

import torch

from torchtpu import _C

# c10's dtype names (the description's) -> torch dtypes.
DTYPES = {
    "Bool": torch.bool, "Byte": torch.uint8, "Char": torch.int8, "Short": torch.int16,
    "Int": torch.int32, "Long": torch.int64, "UInt16": torch.uint16, "UInt32": torch.uint32,
    "UInt64": torch.uint64, "Half": torch.float16, "BFloat16": torch.bfloat16,
    "Float": torch.float32, "Double": torch.float64, "ComplexHalf": torch.complex32,
    "ComplexFloat": torch.complex64, "ComplexDouble": torch.complex128,
    "Float8_e4m3fn": torch.float8_e4m3fn, "Float8_e5m2": torch.float8_e5m2,
    "Float8_e4m3fnuz": torch.float8_e4m3fnuz, "Float8_e5m2fnuz": torch.float8_e5m2fnuz,
}


def parse_value(text: str, type_name: str = "") -> Any:
    """An argument's value as the description spells it ("None", "2.5", "[0, 1]", "'tanh'",
    "inf", a ScalarType by c10's name) as a Python value (a torch.dtype for a ScalarType)."""
    base = type_name.rstrip("?")
    if text == "None":
        return None
    if base == "ScalarType":
        return DTYPES.get(text, text)
    try:
        return _literal(ast.parse(text, mode="eval").body)
    except (ValueError, SyntaxError):
        return text


def _literal(node):
    """Python literals, plus inf, nan and complex(re, im) (how the description spells them)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _literal(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Name) and node.id in ("inf", "nan"):
        return float(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "complex" and len(node.args) == 2 and not node.keywords:
        return complex(_literal(node.args[0]), _literal(node.args[1]))
    raise ValueError(f"not a literal: {ast.dump(node)}")


@dataclass
class View:
    """A view of a value: an operand, a result, a tensor asked about."""
    argument: str
    value: int  # the value read (-1: not read, a CPU constant, undefined)
    writes: int  # the value made by writing it (-1: not written)
    constant: str  # a CPU tensor's values, as text
    wrapped_number: bool
    sizes: list
    strides: list
    offset: int
    dtype: torch.dtype | None
    read: bool
    written: bool
    defined: bool

    @staticmethod
    def of(d: dict) -> "View":
        return View(d["argument"], d["value"], d["writes"], d["constant"], d["wrapped_number"],
                    list(d["sizes"]), list(d["strides"]), d["offset"],
                    DTYPES.get(d["dtype"]) if d["defined"] else None, d["read"], d["written"],
                    d["defined"])

    @property
    def is_constant(self) -> bool:
        return self.defined and self.value < 0 and not self.written and self.read

    def constant_value(self):
        """The Python value(s) of a CPU constant (None when too large to be described)."""
        return parse_value(self.constant) if self.constant else None

    def same_view(self, other) -> bool:
        return (self.sizes == list(other.sizes) and self.strides == list(other.strides)
                and self.offset == other.offset and self.dtype == other.dtype)


@dataclass
class Value:
    """One version of a storage's contents."""
    node: int  # the node that wrote it (index into Graph.nodes); -1: an input
    storage: int
    updates: int  # a partial write: the value whose other elements it keeps (-1: none)
    input_pending: bool
    sizes: list
    strides: list
    offset: int
    dtype: torch.dtype | None
    names: list = field(default_factory=list)  # the caller's variables that are this value

    @property
    def is_input(self) -> bool:
        return self.node < 0


@dataclass
class Node:
    index: int  # position in the whole pending graph (program order)
    name: str  # "aten::add"
    overload: str  # "out"
    operands: list
    results: list
    arguments: dict  # name -> Python value
    argument_text: list  # (name, type, text) as described
    precision: str
    location: str

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name

    @property
    def op(self) -> str:
        """The op without namespace, overload and in-place underscore ("add" for add_.Tensor)."""
        base = self.name.split("::", 1)[-1]
        if base.endswith("_") and not base.endswith("__"):
            base = base[:-1]  # add_ -> add, _foreach_add_ -> _foreach_add
        return base

    @property
    def written(self) -> list:
        """The tensors it writes, operands first (each with the value it makes)."""
        return [v for v in self.operands + self.results if v.defined and v.written]

    def operand(self, argument: str):
        for v in self.operands:
            if v.argument == argument and v.defined:
                return v
        return None


@dataclass
class Graph:
    nodes: list
    values: list
    outputs: list
    labelled: list
    pending_ops: int

    def producer(self, value: int):
        """("node", i) or ("input", value) for a value."""
        v = self.values[value]
        return ("input", value) if v.is_input else ("node", v.node)


def device_tensors(tensors) -> list:
    """The flattened tensors of a call (TorchTPU's rules: a DTensor's shard and a wrapper's inner
    tensor stand for it); ValueError for none, for a non-tensor and for a tensor not on tpu."""
    from torch.utils import _pytree

    flat, _ = _pytree.tree_flatten(tensors)
    if not flat:
        raise ValueError("no tensors given: pass the tpu tensors whose pending graph to show")
    found = []
    for t in flat:
        t = getattr(t, "_local_tensor", t)  # a DTensor's shard
        t = getattr(t, "elem", t)  # a wrapper subclass's tensor
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"expected tpu tensors, got {type(t).__name__}")
        if t.device.type != "tpu":
            raise ValueError(f"tensor is not on the tpu device: it is on {t.device}")
        if t.layout != torch.strided:
            raise ValueError(f"the pending graph is shown for strided tensors, got {t.layout}")
        found.append(t)
    return found


def describe(tensors: list, names: dict | None = None) -> Graph:
    """The pending graph behind `tensors` (tpu tensors, checked by device_tensors). `names`:
    variable name -> tensor, to name the values they are (the caller's variables)."""
    labelled_names, labelled = [], []
    for name, t in (names or {}).items():
        if (isinstance(t, torch.Tensor) and type(t) in (torch.Tensor, torch.nn.Parameter)
                and t.device.type == "tpu" and t.layout == torch.strided):
            labelled_names.append(name)
            labelled.append(t)
    d = _C.defer_describe_pending(list(tensors), labelled)
    nodes = []
    for n in d["nodes"]:
        args = {name: parse_value(text, type_name) for name, type_name, text in n["arguments"]}
        nodes.append(Node(n["index"], n["name"], n["overload"],
                          [View.of(o) for o in n["operands"]],
                          [View.of(o) for o in n["results"]], args, list(n["arguments"]),
                          n["precision"], n["location"]))
    values = [Value(v["node"], v["storage"], v["updates"], v["input_pending"], list(v["sizes"]),
                    list(v["strides"]), v["offset"], DTYPES.get(v["dtype"])) for v in d["values"]]
    graph = Graph(nodes, values, [View.of(o) for o in d["outputs"]],
                  [View.of(o) for o in d["labelled"]], d["pending_ops"])
    for name, view in zip(labelled_names, graph.labelled):
        if view.value >= 0 and view.same_view(values[view.value]):
            if name not in values[view.value].names:
                values[view.value].names.append(name)
    return graph


# ---------------------------------------------------------------------------------------------
# Graphviz

def type_text(sizes, dtype) -> str:
    name = str(dtype).replace("torch.", "") if dtype is not None else "?"
    return f"{name}[{', '.join(str(s) for s in sizes)}]"


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_graphviz(graph: Graph) -> str:
    """DOT text: a node per recorded op (``n<index>``: its name, what it writes, its scalar
    arguments and constants), a dashed node per input (``p<value>``: a materialized tensor, or a
    pending storage no recorded op writes), an edge per data dependency (deduplicated, labelled
    with the arguments it feeds); the tensors asked about are drawn bold and named output k."""
    lines = ["digraph computation {", '  node [shape=box, fontname="monospace", fontsize=10];']
    outputs: dict = {}
    for k, o in enumerate(graph.outputs):
        outputs.setdefault(graph.producer(o.value), []).append(k)

    def names_of(values) -> str:
        names = []
        for v in values:
            for n in graph.values[v].names:
                if n not in names:
                    names.append(n)
        return ", ".join(names)

    def style(key) -> str:
        if key in outputs:
            return ", style=bold, penwidth=2"
        return ""

    def out_text(key) -> str:
        if key not in outputs:
            return ""
        return "\n" + ", ".join(f"output {k}" for k in outputs[key])

    used_inputs = []
    for n in graph.nodes:
        for o in n.operands:
            if o.value >= 0 and graph.values[o.value].is_input and o.value not in used_inputs:
                used_inputs.append(o.value)
        for w in n.written:
            up = graph.values[w.writes].updates
            if up >= 0 and graph.values[up].is_input and up not in used_inputs:
                used_inputs.append(up)
    for o in graph.outputs:
        if graph.values[o.value].is_input and o.value not in used_inputs:
            used_inputs.append(o.value)
    for k, value in enumerate(used_inputs):
        v = graph.values[value]
        kind = "uninitialized pending storage" if v.input_pending else "materialized"
        names = names_of([value])
        label = f"parameter {k}" + (f": {names}" if names else "") + \
            f"\n{type_text(v.sizes, v.dtype)}\n({kind})" + out_text(("input", value))
        lines.append(f"  p{value} [label={_dot_quote(label)}, style=dashed"
                     f"{', penwidth=2' if ('input', value) in outputs else ''}];")
    for i, n in enumerate(graph.nodes):
        written = n.written
        names = names_of([w.writes for w in written])
        label = f"#{n.index} {n.full_name}"
        if names:
            label = f"{names} = {label}"
        for w in written:
            label += f"\n-> {w.argument}: {type_text(w.sizes, w.dtype)}"
        extras = [f"{name}={text}" for name, _, text in n.argument_text]
        extras += [f"{o.argument}={o.constant or '<cpu tensor>'}" for o in n.operands
                   if o.is_constant]
        if n.precision:
            extras.append(f"precision={n.precision}")
        if extras:
            label += "\n" + ", ".join(extras)
        if n.location:
            label += f"\n{n.location}"
        label += out_text(("node", i))
        lines.append(f"  n{i} [label={_dot_quote(label)}{style(('node', i))}];")
    edges: dict = {}
    for i, n in enumerate(graph.nodes):
        for o in n.operands:
            if o.value >= 0:
                edges.setdefault((graph.producer(o.value), i), []).append(o.argument)
        for w in n.written:
            up = graph.values[w.writes].updates
            if up >= 0:
                edges.setdefault((graph.producer(up), i), []).append(f"{w.argument} (updated)")
    for (src, dst), args in edges.items():
        name = f"p{src[1]}" if src[0] == "input" else f"n{src[1]}"
        lines.append(f"  {name} -> n{dst} [label={_dot_quote(', '.join(args))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
