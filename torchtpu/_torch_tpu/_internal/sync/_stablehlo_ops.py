"""The recorded ops written as StableHLO ops (``_stablehlo.py``): a lowering per op, by the op's
name without namespace, overload and in-place underscore. An op (or a use of it) without a
lowering raises Unsupported, and ``_stablehlo.Module`` writes it as a custom_call."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import torch

from torch_tpu._internal.sync._graph import Node
from torch_tpu._internal.sync._stablehlo_text import _is_float, _prod

if TYPE_CHECKING:
    from torch_tpu._internal.sync._stablehlo import Module


@dataclass
class Arg:
    """An input of an op: an SSA value, or a Python number (a Scalar argument, a wrapped number,
    a CPU scalar)."""
    ssa: str | None
    value: Any
    sizes: list
    dtype: Any
    number: bool  # promotes as a Python number

    def meta(self):
        if self.number:
            return self.value
        return torch.empty(self.sizes, dtype=self.dtype, device="meta")


def promote(args: list):
    """The result dtype of an element-wise op on `args` (PyTorch's type promotion)."""
    items = [a.meta() for a in args if a is not None]
    try:
        from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

        return elementwise_dtypes(
            *items, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]
    except Exception:  # noqa: BLE001  (a private API: else plain promotion of the dtypes)
        dtypes = [x.dtype if isinstance(x, torch.Tensor) else torch.tensor(x).dtype
                  for x in items]
        dtype = dtypes[0]
        for d in dtypes[1:]:
            dtype = torch.promote_types(dtype, d)
        return dtype


class Unsupported(Exception):
    """The op (or this use of it) is written as a custom_call."""


class Lowering:
    """What an op's lowering sees: its inputs as SSA values, its arguments, what it writes."""

    def __init__(self, module: "Module", node: Node):
        self.m = module
        self.e = module.e
        self.node = node
        self.out = node.written

    def tensor(self, name: str) -> Arg | None:
        view = self.node.operand(name)
        if view is None or not view.read:
            return None
        return self.m.read(view)

    def input(self, name: str) -> Arg | None:
        """A tensor argument, else a Scalar one (None when absent or None)."""
        a = self.tensor(name)
        if a is not None:
            return a
        v = self.node.arguments.get(name)
        if isinstance(v, (bool, int, float, complex)):
            return Arg(None, v, [], None, True)
        return None

    def arg(self, name: str, default=None):
        v = self.node.arguments.get(name, default)
        return default if v is None else v

    def coerce(self, a: Arg, sizes, dtype) -> str:
        if a.ssa is None:
            x = self.e.constant(a.value, [], dtype)
        else:
            x = self.e.convert(a.ssa, dtype)
        return self.e.broadcast(x, list(sizes))

    def const(self, value, dtype, like: str | None = None) -> str:
        c = self.e.constant(value, [], dtype)
        return self.e.broadcast(c, self.e.sizes(like)) if like is not None else c

    def one_out(self):
        if len(self.out) != 1:
            raise Unsupported("writes more than one tensor")
        return self.out[0]


LOWERINGS: dict[str, Callable[[Lowering], list]] = {}


def lowering(*names):
    def register(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return register


def _need(*args):
    if any(a is None for a in args):
        raise Unsupported("an input is missing")


def _binary_op(op: str, alpha_on_other: bool = False, reverse: bool = False):
    def lower(L: Lowering):
        a, b = L.input("self"), L.input("other")
        if op == "power":
            b = b or L.input("exponent")
        _need(a, b)
        out = L.one_out()
        dtype = promote([a, b])
        x, y = L.coerce(a, out.sizes, dtype), L.coerce(b, out.sizes, dtype)
        if reverse:
            x, y = y, x
        if alpha_on_other:
            alpha = L.arg("alpha", 1)
            if alpha != 1:
                if reverse:
                    x = L.e.binary("multiply", x, L.const(alpha, dtype, x))
                else:
                    y = L.e.binary("multiply", y, L.const(alpha, dtype, y))
        return [L.e.convert(L.e.binary(op, x, y), out.dtype)]
    return lower


for _name, _op in [("mul", "multiply"), ("maximum", "maximum"), ("minimum", "minimum"),
                   ("pow", "power"), ("atan2", "atan2"), ("fmod", "remainder"),
                   ("bitwise_and", "and"), ("bitwise_or", "or"), ("bitwise_xor", "xor"),
                   ("__and__", "and"), ("__or__", "or"), ("__xor__", "xor")]:
    LOWERINGS[_name] = _binary_op(_op)
LOWERINGS["add"] = _binary_op("add", alpha_on_other=True)
LOWERINGS["sub"] = _binary_op("subtract", alpha_on_other=True)
LOWERINGS["subtract"] = LOWERINGS["sub"]
LOWERINGS["rsub"] = _binary_op("subtract", alpha_on_other=True, reverse=True)


@lowering("div", "true_divide", "floor_divide")
def _div(L: Lowering):
    a, b = L.input("self"), L.input("other")
    _need(a, b)
    out = L.one_out()
    mode = "floor" if L.node.op == "floor_divide" else L.arg("rounding_mode")
    dtype = promote([a, b])
    if mode is None and not _is_float(dtype):
        dtype = out.dtype if _is_float(out.dtype) else torch.get_default_dtype()
    x, y = L.coerce(a, out.sizes, dtype), L.coerce(b, out.sizes, dtype)
    q = L.e.binary("divide", x, y)
    if mode == "trunc" and _is_float(dtype):
        q = L.e.binary("multiply", L.e.unary("sign", q), L.e.unary("floor", L.e.unary("abs", q)))
    elif mode == "floor" and _is_float(dtype):
        q = L.e.unary("floor", q)
    elif mode == "floor":  # integers: the quotient rounded down
        r = L.e.binary("remainder", x, y)
        zero = L.const(0, dtype, x)
        inexact = L.e.compare("NE", r, zero)
        signs = L.e.compare("NE", L.e.compare("LT", x, zero), L.e.compare("LT", y, zero))
        q = L.e.select(L.e.binary("and", inexact, signs),
                       L.e.binary("subtract", q, L.const(1, dtype, q)), q)
    return [L.e.convert(q, out.dtype)]


@lowering("remainder")
def _remainder(L: Lowering):
    a, b = L.input("self"), L.input("other")
    _need(a, b)
    out = L.one_out()
    dtype = promote([a, b])
    x, y = L.coerce(a, out.sizes, dtype), L.coerce(b, out.sizes, dtype)
    r = L.e.binary("remainder", x, y)  # (the sign of the dividend; Python's: the divisor's)
    zero = L.const(0, dtype, r)
    fix = L.e.binary("and", L.e.compare("NE", r, zero),
                     L.e.compare("NE", L.e.compare("LT", r, zero), L.e.compare("LT", y, zero)))
    return [L.e.convert(L.e.select(fix, L.e.binary("add", r, y), r), out.dtype)]


def _compare_op(direction: str):
    def lower(L: Lowering):
        a, b = L.input("self"), L.input("other")
        _need(a, b)
        out = L.one_out()
        dtype = promote([a, b])
        x, y = L.coerce(a, out.sizes, dtype), L.coerce(b, out.sizes, dtype)
        return [L.e.convert(L.e.compare(direction, x, y), out.dtype)]
    return lower


for _name, _dir in [("eq", "EQ"), ("ne", "NE"), ("lt", "LT"), ("le", "LE"), ("gt", "GT"),
                    ("ge", "GE"), ("less", "LT"), ("greater", "GT"), ("less_equal", "LE"),
                    ("greater_equal", "GE"), ("not_equal", "NE")]:
    LOWERINGS[_name] = _compare_op(_dir)


def _logical_op(op: str):
    def lower(L: Lowering):
        a, b = L.input("self"), L.input("other")
        _need(a, b)
        out = L.one_out()
        preds = []
        for arg in (a, b):
            dtype = arg.dtype if arg.ssa is not None else promote([arg])
            x = L.coerce(arg, out.sizes, dtype)
            preds.append(x if dtype == torch.bool else
                         L.e.compare("NE", x, L.const(0, dtype, x)))
        return [L.e.convert(L.e.binary(op, *preds), out.dtype)]
    return lower


LOWERINGS["logical_and"] = _logical_op("and")
LOWERINGS["logical_or"] = _logical_op("or")
LOWERINGS["logical_xor"] = _logical_op("xor")

_UNARY = {
    "neg": "negate", "negative": "negate", "abs": "abs", "absolute": "abs", "exp": "exponential",
    "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh", "sin": "sine",
    "cos": "cosine", "tan": "tan", "sigmoid": "logistic", "floor": "floor", "ceil": "ceil",
    "round": "round_nearest_even", "sign": "sign", "sgn": "sign", "log1p": "log_plus_one",
    "expm1": "exponential_minus_one", "bitwise_not": "not", "cbrt": "cbrt",
}


def _unary_in_out_dtype(L: Lowering) -> tuple:
    a = L.tensor("self")
    _need(a)
    out = L.one_out()
    if a.dtype.is_complex != out.dtype.is_complex:
        raise Unsupported("a complex input with a real result (abs, angle, ...)")
    return L.coerce(a, out.sizes, out.dtype), out


def _unary_op(op: str):
    def lower(L: Lowering):
        if L.node.op == "round" and L.arg("decimals", 0):
            raise Unsupported("round with decimals")
        x, out = _unary_in_out_dtype(L)
        if op in ("floor", "ceil", "round_nearest_even") and not _is_float(out.dtype):
            return [x]
        return [L.e.unary(op, x)]
    return lower


for _name, _op in _UNARY.items():
    LOWERINGS[_name] = _unary_op(_op)


@lowering("reciprocal")
def _reciprocal(L):
    x, _ = _unary_in_out_dtype(L)
    return [L.e.binary("divide", L.const(1, L.e.dtype(x), x), x)]


@lowering("square")
def _square(L):
    x, _ = _unary_in_out_dtype(L)
    return [L.e.binary("multiply", x, x)]


@lowering("relu")
def _relu(L):
    x, _ = _unary_in_out_dtype(L)
    return [L.e.binary("maximum", x, L.const(0, L.e.dtype(x), x))]


@lowering("silu")
def _silu(L):
    x, _ = _unary_in_out_dtype(L)
    return [L.e.binary("multiply", x, L.e.unary("logistic", x))]


@lowering("exp2")
def _exp2(L):
    x, _ = _unary_in_out_dtype(L)
    return [L.e.binary("power", L.const(2, L.e.dtype(x), x), x)]


@lowering("log2", "log10")
def _log_base(L):
    x, _ = _unary_in_out_dtype(L)
    base = 2.0 if L.node.op == "log2" else 10.0
    return [L.e.binary("divide", L.e.unary("log", x), L.const(math.log(base), L.e.dtype(x), x))]


@lowering("trunc", "fix")
def _trunc(L):
    x, out = _unary_in_out_dtype(L)
    if not _is_float(out.dtype):
        return [x]
    return [L.e.binary("multiply", L.e.unary("sign", x), L.e.unary("floor", L.e.unary("abs", x)))]


@lowering("gelu")
def _gelu(L):
    if L.arg("approximate", "none") != "tanh":
        raise Unsupported("gelu's exact form needs erf, which StableHLO has not")
    x, _ = _unary_in_out_dtype(L)
    dt = L.e.dtype(x)
    cube = L.e.binary("multiply", L.e.binary("multiply", x, x), x)
    inner = L.e.binary("add", x, L.e.binary("multiply", L.const(0.044715, dt, x), cube))
    t = L.e.unary("tanh", L.e.binary("multiply", L.const(math.sqrt(2 / math.pi), dt, x), inner))
    half_x = L.e.binary("multiply", L.const(0.5, dt, x), x)
    return [L.e.binary("multiply", half_x, L.e.binary("add", L.const(1, dt, x), t))]


@lowering("leaky_relu")
def _leaky_relu(L):
    x, _ = _unary_in_out_dtype(L)
    dt = L.e.dtype(x)
    slope = L.e.binary("multiply", x, L.const(L.arg("negative_slope", 0.01), dt, x))
    return [L.e.select(L.e.compare("GT", x, L.const(0, dt, x)), x, slope)]


@lowering("logical_not")
def _logical_not(L):
    a = L.tensor("self")
    _need(a)
    out = L.one_out()
    x = L.e.broadcast(a.ssa, out.sizes)
    return [L.e.convert(L.e.compare("EQ", x, L.const(0, a.dtype, x)), out.dtype)]


@lowering("isnan")
def _isnan(L):
    a = L.tensor("self")
    _need(a)
    out = L.one_out()
    return [L.e.convert(L.e.compare("NE", a.ssa, a.ssa), out.dtype)]


@lowering("clamp", "clip", "clamp_min", "clamp_max", "hardtanh")
def _clamp(L):
    a = L.tensor("self")
    _need(a)
    out = L.one_out()
    op = L.node.op
    lo = L.input("min_val" if op == "hardtanh" else "min") if op != "clamp_max" else None
    hi = L.input("max_val" if op == "hardtanh" else "max") if op != "clamp_min" else None
    dtype = promote([a] + [b for b in (lo, hi) if b is not None])
    r = L.coerce(a, out.sizes, dtype)
    if lo is not None:
        r = L.e.binary("maximum", r, L.coerce(lo, out.sizes, dtype))
    if hi is not None:
        r = L.e.binary("minimum", r, L.coerce(hi, out.sizes, dtype))
    return [L.e.convert(r, out.dtype)]


@lowering("where")
def _where(L):
    c, a, b = L.tensor("condition"), L.input("self"), L.input("other")
    _need(c, a, b)
    out = L.one_out()
    dtype = promote([a, b])
    pred = L.coerce(c, out.sizes, torch.bool)
    return [L.e.convert(L.e.select(pred, L.coerce(a, out.sizes, dtype),
                                   L.coerce(b, out.sizes, dtype)), out.dtype)]


@lowering("masked_fill")
def _masked_fill(L):
    a, mask, value = L.tensor("self"), L.tensor("mask"), L.input("value")
    _need(a, mask, value)
    out = L.one_out()
    pred = L.coerce(mask, out.sizes, torch.bool)
    return [L.e.select(pred, L.coerce(value, out.sizes, out.dtype),
                       L.coerce(a, out.sizes, out.dtype))]


@lowering("lerp")
def _lerp(L):
    a, end, weight = L.tensor("self"), L.tensor("end"), L.input("weight")
    _need(a, end, weight)
    out = L.one_out()
    x, y, w = (L.coerce(v, out.sizes, out.dtype) for v in (a, end, weight))
    return [L.e.binary("add", x, L.e.binary("multiply", w, L.e.binary("subtract", y, x)))]


@lowering("addcmul", "addcdiv")
def _addc(L):
    a, t1, t2 = L.tensor("self"), L.tensor("tensor1"), L.tensor("tensor2")
    _need(a, t1, t2)
    out = L.one_out()
    x, p, q = (L.coerce(v, out.sizes, out.dtype) for v in (a, t1, t2))
    term = L.e.binary("multiply" if L.node.op == "addcmul" else "divide", p, q)
    value = L.arg("value", 1)
    if value != 1:
        term = L.e.binary("multiply", L.const(value, out.dtype, term), term)
    return [L.e.binary("add", x, term)]


@lowering("threshold_backward")
def _threshold_backward(L):
    g, a = L.tensor("grad_output"), L.tensor("self")
    _need(g, a)
    out = L.one_out()
    dtype = promote([g, a])
    x = L.coerce(a, out.sizes, dtype)
    below = L.e.compare("LE", x, L.coerce(Arg(None, L.arg("threshold", 0), [], None, True),
                                          out.sizes, dtype))
    grad = L.coerce(g, out.sizes, out.dtype)
    return [L.e.select(below, L.const(0, out.dtype, grad), grad)]


@lowering("sigmoid_backward", "tanh_backward")
def _activation_backward(L):
    g, y = L.tensor("grad_output"), L.tensor("output")
    _need(g, y)
    out = L.one_out()
    gx, yx = L.coerce(g, out.sizes, out.dtype), L.coerce(y, out.sizes, out.dtype)
    one = L.const(1, out.dtype, yx)
    if L.node.op == "sigmoid_backward":
        d = L.e.binary("multiply", yx, L.e.binary("subtract", one, yx))
    else:
        d = L.e.binary("subtract", one, L.e.binary("multiply", yx, yx))
    return [L.e.binary("multiply", gx, d)]


# ---- copies, casts, factories

@lowering("fill", "zero", "full", "ones", "zeros")
def _fill(L):
    out = L.one_out()
    op = L.node.op
    value = {"zero": Arg(None, 0, [], None, True), "ones": Arg(None, 1, [], None, True),
             "zeros": Arg(None, 0, [], None, True)}.get(op) or L.input(
                 "fill_value" if op == "full" else "value")
    _need(value)
    return [L.coerce(value, out.sizes, out.dtype)]


@lowering("_copy_from", "copy", "_to_copy", "clone", "contiguous", "to", "type_as", "alias",
          "lift_fresh_copy")
def _copy(L):
    out = L.one_out()
    src = L.tensor("src") if L.node.op == "copy" else L.tensor("self")
    _need(src)
    return [L.coerce(src, out.sizes, out.dtype)]


@lowering("arange")
def _arange(L):
    out = L.one_out()
    if len(out.sizes) != 1:
        raise Unsupported("arange into a view that is not 1-d")
    start, step = L.arg("start", 0), L.arg("step", 1)
    x = L.e.iota(0, out.sizes, out.dtype)
    if step != 1:
        x = L.e.binary("multiply", x, L.const(step, out.dtype, x))
    if start != 0:
        x = L.e.binary("add", x, L.const(start, out.dtype, x))
    return [x]


@lowering("flip")
def _flip(L):
    a = L.tensor("self")
    _need(a)
    out = L.one_out()
    rank = len(out.sizes)
    dims = sorted({d % rank for d in L.arg("dims", [])}) if rank else []
    x = L.coerce(a, out.sizes, out.dtype)
    return [L.e.reverse(x, dims) if dims else x]


@lowering("tril", "triu")
def _triangle(L):
    a = L.tensor("self")
    _need(a)
    out = L.one_out()
    if len(out.sizes) < 2:
        raise Unsupported("tril/triu of fewer than 2 dimensions")
    rank = len(out.sizes)
    x = L.coerce(a, out.sizes, out.dtype)
    rows = L.e.iota(rank - 2, out.sizes, torch.int64)
    cols = L.e.iota(rank - 1, out.sizes, torch.int64)
    diff = L.e.binary("subtract", cols, rows)
    k = L.const(L.arg("diagonal", 0), torch.int64, diff)
    keep = L.e.compare("LE" if L.node.op == "tril" else "GE", diff, k)
    return [L.e.select(keep, x, L.const(0, out.dtype, x))]


@lowering("cat", "concat", "concatenate")
def _cat(L):
    out = L.one_out()
    parts = []
    for view in L.node.operands:
        if view.argument.startswith("tensors[") and view.read:
            if view.sizes == [0]:
                continue  # (PyTorch skips a 1-d empty tensor)
            parts.append(L.m.read(view))
    if not parts:
        raise Unsupported("cat of nothing")
    rank = len(out.sizes)
    dim = L.arg("dim", 0) % rank
    xs = [L.e.convert(p.ssa, out.dtype) for p in parts]
    return [xs[0] if len(xs) == 1 else L.e.concatenate(xs, dim, out.sizes, out.dtype)]


# ---- matmuls

def _dot(L, a: Arg, b: Arg, batching, contracting, out) -> str:
    if a.dtype != b.dtype:
        raise Unsupported("operands of two dtypes")
    return L.e.dot_general(a.ssa, b.ssa, batching, contracting, out.sizes, out.dtype,
                           L.node.precision if _is_float(a.dtype) else "")


_MATMULS = {  # op -> (lhs, rhs, batching dims, contracting dims, added operand)
    "mm": ("self", "mat2", ((), ()), ((1,), (0,)), None),
    "bmm": ("self", "mat2", ((0,), (0,)), ((2,), (1,)), None),
    "mv": ("self", "vec", ((), ()), ((1,), (0,)), None),
    "dot": ("self", "tensor", ((), ()), ((0,), (0,)), None),
    "vdot": ("self", "other", ((), ()), ((0,), (0,)), None),
    "_int_mm": ("self", "mat2", ((), ()), ((1,), (0,)), None),
    "addmm": ("mat1", "mat2", ((), ()), ((1,), (0,)), "self"),
    "baddbmm": ("batch1", "batch2", ((0,), (0,)), ((2,), (1,)), "self"),
    "addmv": ("mat", "vec", ((), ()), ((1,), (0,)), "self"),
}


def _matmul(L):
    lhs, rhs, batching, contracting, added = _MATMULS[L.node.op]
    if L.node.op == "vdot" and L.node.operand("self").dtype.is_complex:
        raise Unsupported("vdot of complex tensors (conjugates)")
    a, b = L.tensor(lhs), L.tensor(rhs)
    _need(a, b)
    out = L.one_out()
    p = _dot(L, a, b, batching, contracting, out)
    if added is None:
        return [p]
    alpha, beta = L.arg("alpha", 1), L.arg("beta", 1)
    if alpha != 1:
        p = L.e.binary("multiply", p, L.const(alpha, out.dtype, p))
    if beta == 0:
        return [p]  # (PyTorch ignores the added tensor, NaN or not)
    c = L.input(added)
    _need(c)
    s = L.coerce(c, out.sizes, out.dtype)
    if beta != 1:
        s = L.e.binary("multiply", s, L.const(beta, out.dtype, s))
    return [L.e.binary("add", s, p)]


for _name in _MATMULS:
    LOWERINGS[_name] = _matmul


# ---- reductions

def _dims(L, rank: int, name: str = "dim") -> list:
    dim = L.node.arguments.get(name)
    if dim is None or dim == []:
        return list(range(rank))
    if isinstance(dim, int):
        dim = [dim]
    return sorted({d % rank for d in dim}) if rank else []


def _init(kind: str, dtype):
    if kind in ("add", "or"):
        return False if dtype == torch.bool else 0
    if kind in ("multiply", "and"):
        return True if dtype == torch.bool else 1
    if dtype == torch.bool:
        return kind == "minimum"
    if _is_float(dtype):
        return -math.inf if kind == "maximum" else math.inf
    info = torch.iinfo(dtype)
    return info.min if kind == "maximum" else info.max


def _reduction(kind: str, mean: bool = False):
    def lower(L: Lowering):
        a = L.tensor("self")
        _need(a)
        out = L.one_out()
        if L.node.op in ("max", "min"):
            if L.tensor("other") is not None:  # max.other: the element-wise maximum
                return _binary_op(kind)(L)
            if "dim" in L.node.arguments:
                raise Unsupported("max/min over a dimension (values and indices)")
        rank = len(a.sizes)
        dims = _dims(L, rank)
        x = L.e.convert(a.ssa, out.dtype)
        r = L.e.reduce(x, dims, kind, _init(kind, out.dtype))
        if mean:
            count = _prod(a.sizes[d] for d in dims)
            r = L.e.binary("divide", r, L.const(count, out.dtype, r))
        return [L.e.reshape(r, out.sizes)]
    return lower


LOWERINGS.update({
    "sum": _reduction("add"), "mean": _reduction("add", mean=True), "prod": _reduction("multiply"),
    "amax": _reduction("maximum"), "amin": _reduction("minimum"), "max": _reduction("maximum"),
    "min": _reduction("minimum"),
})


@lowering("any", "all")
def _any_all(L):
    a = L.tensor("self")
    _need(a)
    out = L.one_out()
    x = a.ssa
    if a.dtype != torch.bool:
        x = L.e.compare("NE", x, L.const(0, a.dtype, x))
    kind = "or" if L.node.op == "any" else "and"
    r = L.e.reduce(x, _dims(L, len(a.sizes)), kind, kind == "and")
    return [L.e.convert(L.e.reshape(r, out.sizes), out.dtype)]


@lowering("_softmax", "_log_softmax", "softmax", "log_softmax")
def _softmax(L):
    a = L.tensor("self")
    _need(a)
    out = L.one_out()
    rank = len(out.sizes)
    d = L.arg("dim", -1) % rank if rank else 0
    x = L.e.convert(a.ssa, out.dtype)
    if rank == 0:
        return [L.const(0 if "log" in L.node.op else 1, out.dtype)]
    keep = [i for i in range(rank) if i != d]
    m = L.e.broadcast_in_dim(L.e.reduce(x, [d], "maximum", _init("maximum", out.dtype)), keep,
                             out.sizes)
    z = L.e.binary("subtract", x, m)
    ez = L.e.unary("exponential", z)
    s = L.e.broadcast_in_dim(L.e.reduce(ez, [d], "add", 0), keep, out.sizes)
    if "log" in L.node.op:
        return [L.e.binary("subtract", z, L.e.unary("log", s))]
    return [L.e.binary("divide", ez, s)]
