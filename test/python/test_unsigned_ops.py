"""uint16, uint32 and uint64 on "tpu" (docs/simulated-chip.md, "Unsigned integers"): ops whose
PyTorch CPU kernel lacks the type run in int64 on the host and are narrowed, wrapping modulo 2^n
as the chip's integer units do. PyTorch's CPU cannot be the reference where it lacks the kernel:
every result is compared with exact integers computed in Python, its dtype and shape with the
op on the meta device (PyTorch's dtype rules), in strict and fused eager."""
import operator

import pytest
import torch
import torchtpu

UNSIGNED = {torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}
MODES = ("strict", "fused")


def values(t):
    """A tensor's values as exact Python ints (its unsigned values for the unsigned types)."""
    t = t.cpu()
    if t.dtype in UNSIGNED:
        return [v % 2 ** UNSIGNED[t.dtype] for v in t.tolist()] if t.dim() else \
            t.item() % 2 ** UNSIGNED[t.dtype]
    return t.tolist()


def signed64(x):
    x %= 2 ** 64
    return x - 2 ** 64 if x >= 2 ** 63 else x


def check(mode, fn, expected, dtype_of):
    """fn(device) on "tpu" in `mode` gives `expected` (Python ints), with the dtype and shape
    fn gives on the meta device."""
    with torchtpu.eager_mode(mode):
        got = fn("tpu")
        meta = fn("meta")
        assert got.dtype == meta.dtype, (got.dtype, meta.dtype)
        assert got.shape == meta.shape
        assert values(got) == expected
    if dtype_of is not None:
        assert got.dtype == dtype_of


def pointwise_cases(dt, bits):
    top = 2 ** bits - 1
    half = 2 ** (bits - 1)
    a = [0, 1, 5, 7, 200, top, half]
    b = [3, 1, 2, 9, 4, 2, 3]
    if bits == 64:  # ordered ops take uint64 values below 2^63 (the others every value)
        a_ord = [0, 1, 5, 7, 200, half - 1, 12]
    else:
        a_ord = a
    A = lambda d, xs=a: torch.tensor(xs, dtype=dt, device=d)  # noqa: E731
    B = lambda d: torch.tensor(b, dtype=dt, device=d)  # noqa: E731
    m = 2 ** bits
    return {
        # arithmetic modulo 2^n
        "add": (lambda d: A(d) + B(d), [(x + y) % m for x, y in zip(a, b)], dt),
        "add_scalar": (lambda d: A(d) + 3, [(x + 3) % m for x in a], dt),
        "sub": (lambda d: A(d) - B(d), [(x - y) % m for x, y in zip(a, b)], dt),
        "zero_minus_one": (lambda d: torch.zeros(2, dtype=dt, device=d) - 1, [top, top], dt),
        "half_times_two": (lambda d: torch.full((2,), half, dtype=dt, device=d) * 2, [0, 0], dt),
        "mul": (lambda d: A(d) * B(d), [(x * y) % m for x, y in zip(a, b)], dt),
        "pow_scalar_base": (lambda d: 2 ** torch.arange(bits, dtype=dt, device=d),
                            [2 ** k for k in range(bits)], dt),
        "pow_wraps": (lambda d: B(d) ** 40, [pow(y, 40, m) for y in b], dt),
        "neg": (lambda d: -A(d), [(-x) % m for x in a], dt),
        "abs": (lambda d: A(d, a_ord).abs(), a_ord, dt),
        # bitwise
        "and": (lambda d: A(d) & B(d), [x & y for x, y in zip(a, b)], dt),
        "or": (lambda d: A(d) | B(d), [x | y for x, y in zip(a, b)], dt),
        "xor": (lambda d: A(d) ^ B(d), [x ^ y for x, y in zip(a, b)], dt),
        "not": (lambda d: ~A(d), [top - x for x in a], dt),
        "lshift": (lambda d: A(d) << B(d), [(x << y) % m for x, y in zip(a, b)], dt),
        "lshift_scalar": (lambda d: A(d) << (bits - 1), [(x << (bits - 1)) % m for x in a], dt),
        "rshift": (lambda d: A(d, a_ord) >> B(d), [x >> y for x, y in zip(a_ord, b)], dt),
        # comparisons and selection on the unsigned values
        "lt": (lambda d: A(d, a_ord) < B(d), [x < y for x, y in zip(a_ord, b)], torch.bool),
        "ge_scalar": (lambda d: A(d, a_ord) >= 5, [x >= 5 for x in a_ord], torch.bool),
        "eq": (lambda d: A(d) == B(d), [x == y for x, y in zip(a, b)], torch.bool),
        "where": (lambda d: torch.where(A(d) > 4 if bits < 64 else A(d, a_ord) > 4, A(d), B(d)),
                  [x if xo > 4 else y for x, xo, y in zip(a, a_ord, b)], dt),
        "maximum": (lambda d: torch.maximum(A(d, a_ord), B(d)),
                    [max(x, y) for x, y in zip(a_ord, b)], dt),
        "minimum": (lambda d: torch.minimum(A(d, a_ord), B(d)),
                    [min(x, y) for x, y in zip(a_ord, b)], dt),
        "clamp": (lambda d: A(d, a_ord).clamp(2, 8), [min(max(x, 2), 8) for x in a_ord], dt),
        "remainder": (lambda d: A(d, a_ord) % B(d), [x % y for x, y in zip(a_ord, b)], dt),
        "floor_divide": (lambda d: A(d, a_ord) // B(d), [x // y for x, y in zip(a_ord, b)], dt),
        # reductions
        "sum_dtype": (lambda d: A(d).sum(dtype=dt), sum(a) % m, dt),
        "sum_of_int64_as": (lambda d: torch.arange(5, device=d).sum(dtype=dt), 10, dt),
        "prod": (lambda d: B(d).prod(), 3 * 1 * 2 * 9 * 4 * 2 * 3, None),
        "max": (lambda d: A(d, a_ord).max(), max(a_ord), dt),
        "min": (lambda d: A(d, a_ord).min(), min(a_ord), dt),
        "argmax": (lambda d: A(d, a_ord).argmax(), a_ord.index(max(a_ord)), torch.int64),
        "amax_dim": (lambda d: A(d, a_ord).view(7, 1).amax(0), [max(a_ord)], dt),
        # (PyTorch's cumsum of an unsigned type gives int64, wrapping modulo 2^64.)
        "cumsum": (lambda d: A(d).cumsum(0),
                   [signed64(sum(a[:i + 1])) for i in range(len(a))], torch.int64),
        # factories, indexing, data movement
        "arange": (lambda d: torch.arange(2, 40, 3, dtype=dt, device=d), list(range(2, 40, 3)),
                   dt),
        "full": (lambda d: torch.full((3,), top, dtype=dt, device=d), [top] * 3, dt),
        "gather": (lambda d: A(d).gather(0, torch.tensor([5, 0, 6], device=d)),
                   [a[5], a[0], a[6]], dt),
        "index_put": (lambda d: A(d).index_put_((torch.tensor([0, 2], device=d),),
                                                torch.tensor([top, 9], dtype=dt, device=d)),
                      [top, a[1], 9] + a[3:], dt),
        "flip": (lambda d: A(d).flip(0), a[::-1], dt),
        "cat": (lambda d: torch.cat([A(d), B(d)]), a + b, dt),
    }


CASES = [(dt, name) for dt, bits in UNSIGNED.items() for name in pointwise_cases(dt, bits)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype,case", CASES, ids=[f"{d}-{c}".replace("torch.", "")
                                                  for d, c in CASES])
def test_unsigned_op_is_exact(mode, dtype, case):
    fn, expected, dtype_of = pointwise_cases(dtype, UNSIGNED[dtype])[case]
    check(mode, fn, expected, dtype_of)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", list(UNSIGNED))
def test_in_place_ops_wrap(mode, dtype):
    bits = UNSIGNED[dtype]
    with torchtpu.eager_mode(mode):
        t = torch.tensor([0, 1, 2], dtype=dtype, device="tpu")
        t.sub_(1)
        assert values(t) == [2 ** bits - 1, 0, 1]
        t.add_(t)  # (the same tensor twice: one int64 copy)
        assert values(t) == [2 ** bits - 2, 0, 2]
        t.mul_(2 ** (bits - 1))
        assert values(t) == [0, 0, 0]
        out = torch.empty(0, dtype=dtype, device="tpu")
        torch.add(torch.tensor([2 ** bits - 1], dtype=dtype, device="tpu"), 5, out=out)
        assert values(out) == [4]


@pytest.mark.parametrize("mode", MODES)
def test_uint32_large_tensors_wrap_like_the_chip(mode):
    # Large enough to leave the per-call scratch checks (16 MiB) and be fused in fused eager.
    n = 5_000_000
    with torchtpu.eager_mode(mode):
        x = torch.arange(n, dtype=torch.uint32, device="tpu")
        y = (x * 4096 + 7) - 2 ** 31
        head = values(y[:3])
        assert head == [(i * 4096 + 7 - 2 ** 31) % 2 ** 32 for i in range(3)]
        last = values(y[-1:])[0]
        assert last == ((n - 1) * 4096 + 7 - 2 ** 31) % 2 ** 32
        s = y.sum(dtype=torch.uint32)
        expected = sum((i * 4096 + 7 - 2 ** 31) for i in range(n)) % 2 ** 32
        assert s.dtype == torch.uint32 and values(s) == expected


def pack32(values_):
    """TorchTPU's notebooks' pack32 (third_party/torch_tpu_programs/docs/notebooks/quant.py)."""
    bits = (values_ == 1.0).to(torch.uint32)
    bit_patterns = 2 ** torch.arange(32, dtype=torch.uint32, device=values_.device)
    return torch.sum(bits * bit_patterns, dim=0, dtype=torch.uint32)


@pytest.mark.parametrize("mode", MODES)
def test_notebook_pack32(mode):
    signs = torch.where(torch.rand(32, generator=torch.Generator().manual_seed(0)) > 0.5, 1.0,
                        -1.0)
    signs[31] = 1.0  # (the top bit: a value of 2^31 or more)
    expected = sum(1 << i for i in range(32) if signs[i] == 1.0)
    with torchtpu.eager_mode(mode):
        packed = pack32(signs.to("tpu"))
        assert packed.dtype == torch.uint32
        assert values(packed) == expected


def test_widened_ops_are_counted():
    before = torchtpu.metrics.counters()
    t = torch.tensor([0, 1], dtype=torch.uint32, device="tpu")
    (t - 1).cpu()
    torch.arange(4, dtype=torch.uint32, device="tpu").cpu()
    (t * 3).cpu()  # (PyTorch's CPU kernel has uint32 mul: run as it is)
    after = torchtpu.metrics.counters()
    delta = lambda k: after.get(k, 0) - before.get(k, 0)  # noqa: E731
    assert delta("vpu.widened_to_int64.sub.out") == 1
    assert delta("vpu.widened_to_int64.arange") == 1
    assert delta("vpu.widened_to_int64.mul.out") == 0


@pytest.mark.parametrize("op,fn", [
    ("lt", operator.lt), ("floor_divide", operator.floordiv), ("rshift", operator.rshift)])
def test_uint64_values_above_2_63_are_refused_where_int64_is_not_exact(op, fn):
    t = torch.tensor([2 ** 63 + 5], dtype=torch.uint64, device="tpu")
    u = torch.tensor([3], dtype=torch.uint64, device="tpu")
    with pytest.raises(NotImplementedError, match=r"UInt64 .*2\*\*63"):
        fn(t, u).cpu()
    # (Modular ops take them.)
    assert values(t + u) == [2 ** 63 + 8]


def test_promotion_errors_are_pytorchs():
    t = torch.tensor([1], dtype=torch.uint32, device="tpu")
    with pytest.raises(RuntimeError, match="Promotion for uint16, uint32, uint64"):
        t + torch.tensor([1], dtype=torch.int32, device="tpu")


@pytest.mark.not_in_debug_tier("compiled mode makes no programs in debug eager (each graph runs op "
                                "by op there), so there is no capture to refuse and count")
def test_compiled_graph_with_widened_ops_runs_op_by_op_with_exact_results():
    def f(x):
        y = (x * 4096 + 7) - 2 ** 31
        return y + y, y.max()

    g = torch.compile(f, backend="tpu")
    x = torch.arange(1000, device="tpu").to(torch.uint32)
    for _ in range(2):
        doubled, top = g(x)
    ys = [(i * 4096 + 7 - 2 ** 31) % 2 ** 32 for i in range(1000)]
    assert values(doubled) == [2 * y % 2 ** 32 for y in ys]
    assert values(top) == max(ys)
    failures = torchtpu.metrics.compiled()["program_failures"]
    assert any(k.startswith("uint16/32/64 op the CPU kernel may lack") for k in failures)
