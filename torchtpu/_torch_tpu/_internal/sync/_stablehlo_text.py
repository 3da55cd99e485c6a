"""StableHLO text for the pending graph's tools (``_stablehlo.py``): MLIR types and literals, an
emitter of SSA values and StableHLO ops in StableHLO's pretty syntax, and the views between
recorded ops (a view of a value written as slice / reshape / transpose / broadcast_in_dim, and a
write into a view as dynamic_update_slice)."""
from __future__ import annotations

import math

import torch

MLIR_ELEMENT = {
    torch.bool: "i1", torch.uint8: "ui8", torch.int8: "i8", torch.int16: "i16",
    torch.int32: "i32", torch.int64: "i64", torch.uint16: "ui16", torch.uint32: "ui32",
    torch.uint64: "ui64", torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
    torch.float64: "f64", torch.complex32: "complex<f16>", torch.complex64: "complex<f32>",
    torch.complex128: "complex<f64>", torch.float8_e4m3fn: "f8E4M3FN",
    torch.float8_e5m2: "f8E5M2", torch.float8_e4m3fnuz: "f8E4M3FNUZ",
    torch.float8_e5m2fnuz: "f8E5M2FNUZ",
}
PRECISION = {"highest": "HIGHEST", "high": "HIGH", "medium": "DEFAULT"}
# custom_call targets of views and writes into views that StableHLO's ops do not reach.
VIEW_TARGETS = ("torchtpu.view", "torchtpu.update_view")


def tensor_type(sizes, dtype) -> str:
    element = MLIR_ELEMENT.get(dtype, "f32")
    return "tensor<" + "".join(f"{s}x" for s in sizes) + element + ">"


def _is_float(dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def _float_literal(x: float, dtype) -> str:
    t = torch.tensor(x, dtype=torch.float64).to(dtype)
    y = float(t.to(torch.float64).item())
    if math.isfinite(y):
        text = repr(y)
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return mantissa + (f"e{exponent}" if exponent else "")
    size = t.element_size()
    as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size]
    bits = int(t.view(as_int).item()) & ((1 << (8 * size)) - 1)
    return f"0x{bits:0{2 * size}X}"


def literal(v, dtype) -> str:
    """A value of `dtype` as an MLIR dense-attribute element."""
    if dtype == torch.bool:
        return "true" if bool(v) else "false"
    if dtype.is_complex:
        z = complex(v)
        part = torch.float16 if dtype == torch.complex32 else (
            torch.float32 if dtype == torch.complex64 else torch.float64)
        return f"({_float_literal(z.real, part)}, {_float_literal(z.imag, part)})"
    if dtype.is_floating_point:
        return _float_literal(float(v.real if isinstance(v, complex) else v), dtype)
    if isinstance(v, float):
        v = math.trunc(v) if math.isfinite(v) else 0
    return str(int(v.real if isinstance(v, complex) else v))


def _nested(values: list, sizes: list, dtype) -> str:
    if not sizes:
        return literal(values[0], dtype)
    step = len(values) // sizes[0] if sizes[0] else 0
    return "[" + ", ".join(_nested(values[i * step:(i + 1) * step], sizes[1:], dtype)
                           for i in range(sizes[0])) + "]"


class Emitter:
    """SSA values with their types, and the StableHLO ops that make them."""

    def __init__(self):
        self.lines: list = []
        self.types: dict = {}  # SSA name -> (sizes, dtype)
        self.args: list = []  # (SSA name, comment)
        self.count = 0
        self.custom_calls: dict = {}  # custom_call target -> count
        self.custom_nodes: list = []  # the recorded ops written as custom_calls

    def mark(self):
        return (len(self.lines), self.count, dict(self.custom_calls), len(self.custom_nodes))

    def rewind(self, mark) -> None:
        """Takes back what was emitted since `mark` (a lowering that gave up)."""
        del self.lines[mark[0]:]
        self.count = mark[1]
        self.custom_calls = mark[2]
        del self.custom_nodes[mark[3]:]

    def type_of(self, x: str) -> str:
        return tensor_type(*self.types[x])

    def sizes(self, x: str) -> list:
        return list(self.types[x][0])

    def dtype(self, x: str):
        return self.types[x][1]

    def comment(self, text: str) -> None:
        self.lines.append(f"    // {text}")

    def argument(self, sizes, dtype, comment: str) -> str:
        name = f"%arg{len(self.args)}"
        self.types[name] = (list(sizes), dtype)
        self.args.append((name, comment))
        return name

    def emit(self, text: str, sizes, dtype) -> str:
        name = f"%{self.count}"
        self.count += 1
        self.types[name] = (list(sizes), dtype)
        self.lines.append(f"    {name} = {text}")
        return name

    # ---- ops
    def constant(self, value, sizes, dtype) -> str:
        if isinstance(value, (list, tuple)):
            flat = list(value)
            if len(flat) == 1:
                body = literal(flat[0], dtype)
            else:
                body = _nested(flat, list(sizes), dtype)
        else:
            body = literal(value, dtype)
        return self.emit(f"stablehlo.constant dense<{body}> : {tensor_type(sizes, dtype)}",
                         sizes, dtype)

    def convert(self, x: str, dtype) -> str:
        if self.dtype(x) == dtype:
            return x
        sizes = self.sizes(x)
        return self.emit(f"stablehlo.convert {x} : ({self.type_of(x)}) -> "
                         f"{tensor_type(sizes, dtype)}", sizes, dtype)

    def broadcast_in_dim(self, x: str, dims: list, sizes: list) -> str:
        if self.sizes(x) == list(sizes) and dims == list(range(len(sizes))):
            return x
        dtype = self.dtype(x)
        return self.emit(f"stablehlo.broadcast_in_dim {x}, dims = {list(dims)} : "
                         f"({self.type_of(x)}) -> {tensor_type(sizes, dtype)}", sizes, dtype)

    def broadcast(self, x: str, sizes: list) -> str:
        """NumPy broadcasting of `x` to `sizes` (dimensions aligned on the right)."""
        rank = len(self.sizes(x))
        return self.broadcast_in_dim(x, list(range(len(sizes) - rank, len(sizes))), sizes)

    def reshape(self, x: str, sizes: list) -> str:
        if self.sizes(x) == list(sizes):
            return x
        dtype = self.dtype(x)
        return self.emit(f"stablehlo.reshape {x} : ({self.type_of(x)}) -> "
                         f"{tensor_type(sizes, dtype)}", sizes, dtype)

    def transpose(self, x: str, perm: list) -> str:
        if list(perm) == list(range(len(perm))):
            return x
        in_sizes = self.sizes(x)
        sizes = [in_sizes[p] for p in perm]
        dtype = self.dtype(x)
        return self.emit(f"stablehlo.transpose {x}, dims = {list(perm)} : "
                         f"({self.type_of(x)}) -> {tensor_type(sizes, dtype)}", sizes, dtype)

    def slice(self, x: str, starts: list, limits: list) -> str:
        in_sizes = self.sizes(x)
        if list(starts) == [0] * len(in_sizes) and list(limits) == in_sizes:
            return x
        sizes = [b - a for a, b in zip(starts, limits)]
        dtype = self.dtype(x)
        ranges = ", ".join(f"{a}:{b}" for a, b in zip(starts, limits))
        return self.emit(f"stablehlo.slice {x} [{ranges}] : ({self.type_of(x)}) -> "
                         f"{tensor_type(sizes, dtype)}", sizes, dtype)

    def dynamic_update_slice(self, x: str, update: str, starts: list) -> str:
        indices = [self.constant(s, [], torch.int64) for s in starts]
        sizes, dtype = self.sizes(x), self.dtype(x)
        operands = ", ".join([x, update] + indices)
        types = ", ".join([self.type_of(x), self.type_of(update)] +
                          [self.type_of(i) for i in indices])
        return self.emit(f"stablehlo.dynamic_update_slice {operands} : ({types}) -> "
                         f"{tensor_type(sizes, dtype)}", sizes, dtype)

    def unary(self, op: str, x: str) -> str:
        return self.emit(f"stablehlo.{op} {x} : {self.type_of(x)}", self.sizes(x), self.dtype(x))

    def binary(self, op: str, a: str, b: str) -> str:
        return self.emit(f"stablehlo.{op} {a}, {b} : {self.type_of(a)}", self.sizes(a),
                         self.dtype(a))

    def compare(self, direction: str, a: str, b: str) -> str:
        dtype = self.dtype(a)
        if _is_float(dtype):
            kind = "FLOAT"
        elif dtype == torch.bool or not dtype.is_signed:
            kind = "UNSIGNED"
        else:
            kind = "SIGNED"
        sizes = self.sizes(a)
        return self.emit(f"stablehlo.compare {direction}, {a}, {b}, {kind} : "
                         f"({self.type_of(a)}, {self.type_of(b)}) -> "
                         f"{tensor_type(sizes, torch.bool)}", sizes, torch.bool)

    def select(self, pred: str, a: str, b: str) -> str:
        return self.emit(f"stablehlo.select {pred}, {a}, {b} : ({self.type_of(pred)}, "
                         f"{self.type_of(a)}, {self.type_of(b)}) -> {self.type_of(a)}",
                         self.sizes(a), self.dtype(a))

    def iota(self, dim: int, sizes: list, dtype) -> str:
        return self.emit(f"stablehlo.iota dim = {dim} : {tensor_type(sizes, dtype)}", sizes,
                         dtype)

    def reduce(self, x: str, dims: list, body: str, init) -> str:
        if not dims:
            return x
        sizes, dtype = self.sizes(x), self.dtype(x)
        out = [s for i, s in enumerate(sizes) if i not in dims]
        init_value = self.constant(init, [], dtype)
        return self.emit(f"stablehlo.reduce({x} init: {init_value}) applies stablehlo.{body} "
                         f"across dimensions = {sorted(dims)} : ({self.type_of(x)}, "
                         f"{self.type_of(init_value)}) -> {tensor_type(out, dtype)}", out, dtype)

    def dot_general(self, a: str, b: str, batching: tuple, contracting: tuple, sizes: list,
                    dtype, precision: str = "") -> str:
        parts = [f"stablehlo.dot_general {a}, {b}"]
        if batching[0]:
            parts.append(f"batching_dims = {list(batching[0])} x {list(batching[1])}")
        parts.append(f"contracting_dims = {list(contracting[0])} x {list(contracting[1])}")
        if precision in PRECISION:
            parts.append(f"precision = [{PRECISION[precision]}, {PRECISION[precision]}]")
        return self.emit(", ".join(parts) + f" : ({self.type_of(a)}, {self.type_of(b)}) -> "
                         f"{tensor_type(sizes, dtype)}", sizes, dtype)

    def concatenate(self, xs: list, dim: int, sizes: list, dtype) -> str:
        return self.emit(f"stablehlo.concatenate {', '.join(xs)}, dim = {dim} : "
                         f"({', '.join(self.type_of(x) for x in xs)}) -> "
                         f"{tensor_type(sizes, dtype)}", sizes, dtype)

    def reverse(self, x: str, dims: list) -> str:
        return self.emit(f"stablehlo.reverse {x}, dims = {list(dims)} : {self.type_of(x)}",
                         self.sizes(x), self.dtype(x))

    def custom_call(self, target: str, inputs: list, outputs: list, config: str) -> list:
        """outputs: (sizes, dtype) each; returns their SSA names."""
        self.custom_calls[target] = self.custom_calls.get(target, 0) + 1
        in_types = ", ".join(self.type_of(x) for x in inputs)
        out_types = [tensor_type(s, d) for s, d in outputs]
        result = out_types[0] if len(out_types) == 1 else f"({', '.join(out_types)})"
        escaped = config.replace("\\", "\\\\").replace('"', '\\"')
        text = (f"stablehlo.custom_call @{target}({', '.join(inputs)}) "
                f"{{backend_config = \"{escaped}\"}} : ({in_types}) -> {result}")
        if not outputs:
            self.lines.append(f"    {text}")
            return []
        if len(outputs) == 1:
            return [self.emit(text, *outputs[0])]
        name = f"%{self.count}"
        self.count += 1
        self.lines.append(f"    {name}:{len(outputs)} = {text}")
        names = []
        for k, (s, d) in enumerate(outputs):
            self.types[f"{name}#{k}"] = (list(s), d)
            names.append(f"{name}#{k}")
        return names


# ---------------------------------------------------------------------------------------------
# Views: the StableHLO ops that take a value laid out as one view of a storage to another view
# of the same storage.

def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def _value_in_storage_order(steps, src_sizes, src_strides):
    """Steps taking the value to its dimensions above 1 in storage order (decreasing stride),
    its broadcast dimensions cut to one element; (shape, sizes, strides) of the result, or None
    when the value overlaps itself."""
    shape = list(src_sizes)
    rank = len(shape)
    # The value's broadcast dimensions hold one element each.
    if any(st == 0 and sz > 1 for sz, st in zip(shape, src_strides)):
        limits = [1 if st == 0 else sz for sz, st in zip(shape, src_strides)]
        steps.append(("slice", [0] * rank, limits))
        shape = limits
    # The value in storage order: dimensions above 1 by decreasing stride.
    keep = [i for i in range(rank) if shape[i] > 1]
    order = sorted(keep, key=lambda i: -src_strides[i])
    perm = order + [i for i in range(rank) if i not in keep]
    if perm != list(range(rank)):
        steps.append(("transpose", perm))
        shape = [shape[p] for p in perm]
    csizes = [shape[k] for k in range(len(order))]
    cstrides = [src_strides[i] for i in order]
    if any(a <= b for a, b in zip(cstrides, cstrides[1:])) or any(s <= 0 for s in cstrides):
        return None  # (overlapping)
    if csizes != shape:
        steps.append(("reshape", csizes))
        shape = csizes
    return shape, csizes, cstrides


def _slice_of_value(rel, csizes, cstrides, n, t):
    """(starts, extents) when each dimension of the view (sizes n, strides t, in storage order,
    `rel` elements after the value's start) is one of the value's (which may be strided itself),
    the others cut to one element; else None."""
    position = {st: k for k, st in enumerate(cstrides)}
    if not all(st in position for st in t):
        return None
    starts, rem = [], rel
    for st in cstrides:
        starts.append(rem // st)
        rem -= starts[-1] * st
    extents = [1] * len(cstrides)
    for st, nk in zip(t, n):
        extents[position[st]] = nk
    if rem == 0 and all(0 <= s and s + x <= c for s, x, c in zip(starts, extents, csizes)):
        return starts, extents
    return None


def _rows_of_storage(steps, shape, rel, csizes, cstrides, n, t):
    """Steps through the storage's elements in order (the value must be contiguous): the
    elements from the view's first row on, cut into rows of its outer stride, then sliced; the
    resulting shape, or None when the view cannot be written so."""
    expected = 1
    for sz, st in zip(reversed(csizes), reversed(cstrides)):
        if st != expected:
            return None
        expected *= sz
    total = _prod(csizes)
    if shape != [total]:
        steps.append(("reshape", [total]))
    if not t:  # one element
        if rel >= total:
            return None
        steps.append(("slice", [rel], [rel + 1]))
        steps.append(("reshape", []))
        return []
    # Dimensions of the view that are contiguous with each other count as one.
    mn, mt = [], []
    for nk, tk in zip(n, t):
        if mt and mt[-1] == tk * nk:
            mn[-1] *= nk
            mt[-1] = tk
        else:
            mn.append(nk)
            mt.append(tk)
    bs = mt + ([] if mt[-1] == 1 else [1])
    if any(a % b for a, b in zip(bs, bs[1:])):
        return None
    base = [mn[0]] + [bs[j - 1] // bs[j] for j in range(1, len(bs))]
    first = rel if len(bs) == 1 else (rel // bs[0]) * bs[0]
    length = mn[0] * bs[0]
    if first + length > total:
        return None
    idx, rem = [], rel - first
    for j in range(1, len(bs)):
        idx.append(rem // bs[j])
        rem %= bs[j]
    extents = mn[1:] + ([1] if len(bs) > len(mt) else [])
    if any(i + e > b for i, e, b in zip(idx, extents, base[1:])):
        return None
    steps.append(("slice", [first], [first + length]))
    steps.append(("reshape", base))
    steps.append(("slice", [0] + idx, [mn[0]] + [i + e for i, e in zip(idx, extents)]))
    return [mn[0]] + extents


def plan_view(src_sizes, src_strides, src_offset, dst_sizes, dst_strides, dst_offset):
    """Steps from a value with the geometry `src` to the view `dst` of the same storage, or None
    when they cannot be written as slices, reshapes, transposes and broadcasts. Steps:
    ("slice", starts, limits), ("reshape", sizes), ("transpose", perm),
    ("broadcast", dims, sizes)."""
    src_sizes, src_strides = list(src_sizes), list(src_strides)
    dst_sizes, dst_strides = list(dst_sizes), list(dst_strides)
    if (src_sizes, src_strides, src_offset) == (dst_sizes, dst_strides, dst_offset):
        return []
    if _prod(dst_sizes) == 0 or _prod(src_sizes) == 0:
        return None
    steps = []
    value = _value_in_storage_order(steps, src_sizes, src_strides)
    if value is None:
        return None
    shape, csizes, cstrides = value
    # The view in storage order.
    dkeep = [i for i in range(len(dst_sizes)) if dst_sizes[i] > 1 and dst_strides[i] != 0]
    dorder = sorted(dkeep, key=lambda i: -dst_strides[i])
    n = [dst_sizes[i] for i in dorder]
    t = [dst_strides[i] for i in dorder]
    if any(s <= 0 for s in t) or any(a <= b for a, b in zip(t, t[1:])):
        return None
    rel = dst_offset - src_offset
    if rel < 0:
        return None
    direct = _slice_of_value(rel, csizes, cstrides, n, t)
    if direct is not None:
        starts, extents = direct
        steps.append(("slice", starts, [s + x for s, x in zip(starts, extents)]))
        shape = list(extents)
    else:
        shape = _rows_of_storage(steps, shape, rel, csizes, cstrides, n, t)
        if shape is None:
            return None
    if shape != n:
        steps.append(("reshape", list(n)))
        shape = list(n)
    # Back to the view's order of dimensions, its dimensions of size 1, its broadcasts.
    by_index = sorted(range(len(dorder)), key=lambda k: dorder[k])
    if by_index != list(range(len(dorder))):
        steps.append(("transpose", by_index))
        shape = [shape[k] for k in by_index]
    target = [dst_sizes[i] if i in dkeep else 1 for i in range(len(dst_sizes))]
    if shape != target:
        steps.append(("reshape", target))
    if target != dst_sizes:
        steps.append(("broadcast", list(range(len(dst_sizes))), dst_sizes))
    return _simplify(steps, src_sizes)


def _step_shape(step, shape):
    kind = step[0]
    if kind == "slice":
        return [b - a for a, b in zip(step[1], step[2])]
    if kind == "reshape":
        return list(step[1])
    if kind == "transpose":
        return [shape[p] for p in step[1]]
    return list(step[2])


def _simplify(steps, shape):
    """Drops steps that change nothing and merges consecutive reshapes."""
    out, shapes = [], [list(shape)]
    for step in steps:
        cur = shapes[-1]
        new = _step_shape(step, cur)
        if step[0] == "slice" and list(step[1]) == [0] * len(cur) and list(step[2]) == cur:
            continue
        if step[0] == "transpose" and list(step[1]) == list(range(len(cur))):
            continue
        if step[0] == "reshape" and out and out[-1][0] == "reshape":
            out.pop()
            shapes.pop()
            cur = shapes[-1]
        if step[0] == "reshape" and new == cur:
            continue
        out.append(step)
        shapes.append(new)
    return out


def apply_steps(e: Emitter, x: str, steps) -> str:
    for step in steps:
        if step[0] == "slice":
            x = e.slice(x, step[1], step[2])
        elif step[0] == "reshape":
            x = e.reshape(x, step[1])
        elif step[0] == "transpose":
            x = e.transpose(x, step[1])
        else:
            x = e.broadcast_in_dim(x, step[1], step[2])
    return x


def update_steps(e: Emitter, base: str, steps, update: str):
    """`base` with the view `steps` reach replaced by `update`; None when a step has no inverse
    (a broadcast)."""
    if any(s[0] == "broadcast" for s in steps):
        return None
    last_slice = max((i for i, s in enumerate(steps) if s[0] == "slice"), default=-1)
    values, shapes = [base], [e.sizes(base)]
    for i, step in enumerate(steps):
        shapes.append(_step_shape(step, shapes[-1]))
        if i < last_slice:
            values.append(apply_steps(e, values[-1], [step]))
    cur = update
    for i in reversed(range(len(steps))):
        step = steps[i]
        if step[0] == "reshape":
            cur = e.reshape(cur, shapes[i])
        elif step[0] == "transpose":
            inverse = [0] * len(step[1])
            for k, p in enumerate(step[1]):
                inverse[p] = k
            cur = e.transpose(cur, inverse)
        else:
            cur = e.dynamic_update_slice(values[i], cur, step[1])
    return cur
