"""The ops reinforcement learning and quantization libraries reach (issue 45, item 5; TRL's GRPO
and torchao's quantize_ paths in docs/ecosystem.md): ``multinomial`` (every sampled
``generate``), the bit shifts (torchao's int4 packing), ``_int_mm`` and integer ``mm``
(torchao's int8 dynamic quantization: ``out_dtype(mm, int32, ...)``, an int32 matmul outside
CUDA). Each runs natively on "tpu" (``TORCHTPU_FALLBACK=error`` mode: a fallback would raise)
and equals the CPU: ``multinomial`` sample for sample for the same seed, because the device
generator lends the CPU's Mersenne Twister state to PyTorch's own CPU algorithm. In strict,
debug and fused eager."""
import pytest
import torch
import torchtpu

MODES = ("strict", "debug", "fused")


@pytest.fixture
def no_fallback():
    """Fallbacks raise (torchtpu.set_fallback_mode("error")); the metrics start at zero."""
    torch.tpu.synchronize()
    torchtpu.set_fallback_mode("error")
    torchtpu.metrics.reset()
    yield
    torch.tpu.synchronize()
    assert torchtpu.metrics.fallbacks() == {}


def same(fn, seed=0):
    """fn("cpu") and fn("tpu") after the same seed: (cpu result, tpu result on the CPU)."""
    torch.manual_seed(seed)
    cpu = fn("cpu")
    torch.manual_seed(seed)
    tpu = fn("tpu")
    return cpu, tpu.cpu() if isinstance(tpu, torch.Tensor) else tpu


# ---- multinomial ------------------------------------------------------------------------------

def _probs(shape, dtype=torch.float32, zeros=False):
    g = torch.Generator().manual_seed(11)
    p = torch.rand(shape, generator=g, dtype=torch.float64)
    if zeros:
        p[..., ::3] = 0
    return p.to(dtype)


MULTINOMIAL_CASES = {
    "1d_one": (lambda: _probs(10), 1, False),
    "2d_one": (lambda: _probs((6, 50)), 1, False),
    "2d_three_without": (lambda: _probs((4, 20)), 3, False),
    "2d_all_without": (lambda: _probs((3, 9)), 9, False),
    "2d_five_with": (lambda: _probs((4, 7)), 5, True),
    "1d_many_with": (lambda: _probs(5), 40, True),
    "with_zero_weights": (lambda: _probs((5, 12), zeros=True), 4, False),
    "unnormalized": (lambda: _probs((3, 16)) * 37.5, 2, False),
    "float64": (lambda: _probs((3, 16), torch.float64), 2, True),
    "bfloat16": (lambda: _probs((3, 16), torch.bfloat16), 1, False),
    "float16": (lambda: _probs((3, 16), torch.float16), 3, False),
    "softmax_of_logits": (lambda: torch.softmax(_probs((8, 300)) * 20, -1), 1, False),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(MULTINOMIAL_CASES))
def test_multinomial_draws_the_cpu_samples_for_a_seed(mode, case, no_fallback):
    make, n, replacement = MULTINOMIAL_CASES[case]
    probs = make()
    with torchtpu.eager_mode(mode):
        # (Twice, and a draw after: the generator advances by what the CPU's draws take.)
        cpu, tpu = same(lambda d: torch.cat([
            torch.multinomial(probs.to(d), n, replacement).flatten(),
            torch.multinomial(probs.to(d), n, replacement).flatten(),
            (torch.rand(4, device=d) * 1000).long()]), seed=5)
    assert tpu.dtype == torch.int64
    assert torch.equal(tpu, cpu)
    assert torchtpu.metrics.native_ops().get("aten::multinomial", 0) == 2


@pytest.mark.parametrize("mode", MODES)
def test_multinomial_of_values_the_device_computes_and_its_out_variant(mode, no_fallback):
    logits = torch.randn(16, 100, generator=torch.Generator().manual_seed(2))

    def sample(d):
        probs = torch.softmax(logits.to(d) / 0.7, dim=-1)  # (pending in fused eager)
        out = torch.empty(0, dtype=torch.int64, device=d)
        torch.multinomial(probs, 2, out=out)
        gen = torch.Generator(d).manual_seed(9)
        other = torch.multinomial(probs, 1, generator=gen)
        return torch.cat([out.flatten(), other.flatten(), torch.multinomial(probs[0], 3)])

    with torchtpu.eager_mode(mode):
        cpu, tpu = same(sample, seed=3)
    assert torch.equal(tpu, cpu)


@pytest.mark.parametrize("mode", ("strict", "fused"))
def test_categorical_sampling_and_a_sampled_generate_loop(mode, no_fallback):
    # What transformers' sampled generate does per token: scores, temperature, top-k, softmax,
    # one sample per row, appended; and torch.distributions.Categorical.
    w = torch.randn(32, 64, generator=torch.Generator().manual_seed(4))

    def loop(d):
        ids = torch.zeros(3, 1, dtype=torch.int64, device=d)
        emb = w.to(d)
        for _ in range(6):
            scores = emb[ids[:, -1]] @ emb.T / 0.8
            kth = torch.topk(scores, 8).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
            nxt = torch.multinomial(torch.softmax(scores, -1), 1)
            ids = torch.cat([ids, nxt], dim=1)
        cat = torch.distributions.Categorical(logits=emb[:4, :10]).sample((5,))
        return torch.cat([ids.flatten(), cat.flatten()])

    with torchtpu.eager_mode(mode):  # (float32 matmuls at "highest": conftest.py)
        cpu, tpu = same(loop, seed=8)
    assert torch.equal(tpu, cpu)


def test_multinomial_errors_are_the_cpus_at_the_call(no_fallback):
    bad = {
        "negative": (torch.tensor([0.5, -0.1, 0.6]), 1, False),
        "nan": (torch.tensor([0.5, float("nan")]), 1, False),
        "all_zero_row": (torch.tensor([[0.5, 0.5], [0.0, 0.0]]), 1, False),
        "all_zero_with_replacement": (torch.tensor([[0.5, 0.5], [0.0, 0.0]]), 3, True),
        "too_many_without_replacement": (torch.tensor([0.2, 0.8]), 3, False),
        "three_dims": (torch.ones(2, 2, 2), 1, False),
        "no_samples": (torch.ones(3), 0, False),
        "integer_weights": (torch.ones(3, dtype=torch.int64), 1, False),
    }
    for name, (p, n, replacement) in bad.items():
        with pytest.raises(Exception) as on_cpu:
            torch.multinomial(p, n, replacement)
        with pytest.raises(type(on_cpu.value)) as on_tpu:
            torch.multinomial(p.to("tpu"), n, replacement)
        assert str(on_cpu.value).split("\n")[0] in str(on_tpu.value), name
    with pytest.raises(RuntimeError, match="same device"):
        torch.multinomial(torch.ones(3, device="tpu"), 1, out=torch.empty(1, dtype=torch.long))


def test_multinomial_is_charged_as_one_launch_and_priced_alike_in_a_dry_run():
    probs = torch.rand(64, 1000, device="tpu")
    torch.tpu.synchronize()
    torchtpu.metrics.reset()
    torch.multinomial(probs, 1)
    torch.multinomial(probs, 4, replacement=True)
    torch.tpu.synchronize()
    ran = torchtpu.metrics.op_times()["aten::multinomial"]
    assert torchtpu.metrics.estimate()["launches"] == 2
    assert ran > 0
    with torchtpu.dry_run():
        dry_probs = torch.empty(64, 1000, device="tpu")
        torchtpu.metrics.reset()
        a = torch.multinomial(dry_probs, 1)
        b = torch.multinomial(dry_probs, 4, replacement=True)
        assert a.shape == (64, 1) and b.shape == (64, 4) and a.dtype == torch.int64
        assert torchtpu.metrics.op_times()["aten::multinomial"] == pytest.approx(ran)


def test_multinomial_in_a_compiled_graph_draws_the_cpus_samples(no_fallback):
    def sample(logits):
        return torch.multinomial(torch.softmax(logits * 2, -1), 2)

    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(1))
    compiled = torch.compile(sample, backend="tpu")
    torch.manual_seed(6)
    expected = [sample(logits) for _ in range(3)]
    torch.manual_seed(6)
    got = [compiled(logits.to("tpu")).cpu() for _ in range(3)]
    for e, g in zip(expected, got):
        assert torch.equal(g, e)


# ---- bit shifts -------------------------------------------------------------------------------

SHIFT_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def _ints(dtype, n=64, seed=0):
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(seed)
    return torch.randint(max(info.min, -2 ** 62), min(info.max, 2 ** 62), (n,), generator=g,
                         dtype=torch.int64).to(dtype)


@pytest.mark.parametrize("mode", ("strict", "fused"))
@pytest.mark.parametrize("dtype", SHIFT_DTYPES, ids=str)
def test_bit_shifts_equal_the_cpu(mode, dtype, no_fallback):
    x = _ints(dtype)
    bits = torch.iinfo(dtype).bits
    # Shift counts past the width and (for signed types) negative values included: the CPU's
    # rules (a count >= the width gives 0, or -1 for a negative value shifted right).
    s = (torch.arange(64) % (bits + 3)).to(dtype)

    def shifts(d):
        a, k = x.to(d), s.to(d)
        inplace = a.clone()
        inplace <<= 1
        inplace >>= k
        return [a << 3, a >> 2, a << k, a >> k, torch.bitwise_left_shift(a, k),
                torch.bitwise_right_shift(a, 5), torch.bitwise_left_shift(7, k),
                a.__rshift__(torch.tensor(1, dtype=dtype)), inplace]

    with torchtpu.eager_mode(mode):
        cpu, tpu = shifts("cpu"), shifts("tpu")
        tpu = [t.cpu() for t in tpu]
    for i, (c, t) in enumerate(zip(cpu, tpu)):
        assert t.dtype == c.dtype and torch.equal(t, c), i
    assert "aten::__lshift__.Scalar" in torchtpu.metrics.native_ops()


@pytest.mark.parametrize("mode", ("strict", "fused"))
def test_int4_packing_as_torchao_packs_and_unpacks(mode, no_fallback):
    # torchao's int4 packing: two 4-bit values per uint8, (high << 4) | low, unpacked with >> and
    # & 0xF, then the signed values and a per-group dequantization.
    q = torch.randint(0, 16, (64, 32), generator=torch.Generator().manual_seed(3),
                      dtype=torch.uint8)
    scale = torch.rand(64, 2, generator=torch.Generator().manual_seed(4))

    def roundtrip(d):
        v = q.to(d)
        packed = (v[:, ::2] << 4) | v[:, 1::2]
        high, low = (packed >> 4) & 0xF, packed & 0xF
        unpacked = torch.stack([high, low], dim=-1).reshape(64, 32)
        signed = unpacked.to(torch.int8) - 8
        deq = signed.view(64, 2, 16).float() * scale.to(d)[:, :, None]
        return packed, unpacked, deq

    with torchtpu.eager_mode(mode):
        cpu, tpu = roundtrip("cpu"), roundtrip("tpu")
        for c, t in zip(cpu, tpu):
            assert torch.equal(t.cpu(), c)
    assert torch.equal(tpu[1].cpu(), q)


# ---- integer matmuls --------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ("strict", "fused"))
def test_int_mm_and_torchaos_int32_matmul_equal_the_cpu(mode, no_fallback):
    from torch._higher_order_ops.out_dtype import out_dtype

    g = torch.Generator().manual_seed(5)
    a = torch.randint(-128, 128, (48, 64), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (64, 40), generator=g, dtype=torch.int8)
    scale = torch.rand(48, 1, generator=g)

    def run(d):
        x, y = a.to(d), b.to(d)
        out = torch.empty(48, 40, dtype=torch.int32, device=d)  # (the CPU resizes no out=)
        torch._int_mm(x, y, out=out)
        # torchao's int8 dynamic path off CUDA: out_dtype(mm, int32, ...) is an int32 mm.
        via_out_dtype = out_dtype(torch.ops.aten.mm.default, torch.int32, x, y)
        return [torch._int_mm(x, y), out, via_out_dtype,
                torch._int_mm(x, y).to(torch.float32) * scale.to(d),
                torch._int_mm(x, y[:, :8].t().contiguous().t())]

    with torchtpu.eager_mode(mode):
        cpu, tpu = run("cpu"), [t.cpu() for t in run("tpu")]
    for i, (c, t) in enumerate(zip(cpu, tpu)):
        assert t.dtype == c.dtype and torch.equal(t, c), i


INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


@pytest.mark.parametrize("mode", ("strict", "fused"))
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_integer_matmuls_equal_the_cpu_with_wraparound(mode, dtype, no_fallback):
    # Values across the type's whole range: products and sums wrap modulo 2^bits, as the CPU's
    # integer GEMM wraps and as the MXU's int8 limb passes compute exactly (sim/Mxu.h).
    a, b = _ints(dtype, 12 * 20, 1).view(12, 20), _ints(dtype, 20 * 9, 2).view(20, 9)
    bias, v = _ints(dtype, 9, 3), _ints(dtype, 20, 4)
    ba, bb = _ints(dtype, 2 * 12 * 20, 5).view(2, 12, 20), _ints(dtype, 2 * 20 * 9, 6).view(2, 20, 9)

    def run(d):
        x, y = a.to(d), b.to(d)
        return [x @ y, torch.mm(x, y), torch.addmm(bias.to(d), x, y),
                torch.addmm(bias.to(d), x, y, beta=3, alpha=2), torch.bmm(ba.to(d), bb.to(d)),
                torch.baddbmm(bias.to(d), ba.to(d), bb.to(d)), x @ v.to(d),
                torch.dot(v.to(d), v.to(d)), torch.matmul(ba.to(d), y), x.t() @ x]

    with torchtpu.eager_mode(mode):
        cpu, tpu = run("cpu"), [t.cpu() for t in run("tpu")]
    for i, (c, t) in enumerate(zip(cpu, tpu)):
        assert t.dtype == c.dtype and torch.equal(t, c), i


def test_integer_matmuls_are_charged_as_int8_limb_passes():
    # An n-byte integer matmul is n(n + 1) / 2 int8 passes at the int8 rate: the MXU FLOPs of
    # int8 times 1, 3, 10, 36 (uint8, int16, int32, int64), plus the VPU's split and sum.
    flops = {}
    for dtype in INT_DTYPES:
        a = torch.ones(128, 256, dtype=dtype, device="tpu")
        b = torch.ones(256, 128, dtype=dtype, device="tpu")
        torch.tpu.synchronize()
        torchtpu.metrics.reset()
        (a @ b).cpu()
        e = torchtpu.metrics.estimate()
        assert e["priced_as_native"] == 0
        flops[dtype] = e["mxu_flops"]
        assert torchtpu.metrics.fallbacks() == {}
    base = flops[torch.int8]
    assert {d: f / base for d, f in flops.items()} == {
        torch.uint8: 1, torch.int8: 1, torch.int16: 3, torch.int32: 10, torch.int64: 36}


@pytest.mark.parametrize("mode", ("strict", "fused"))
def test_integer_convolution_runs_on_the_mxu_and_equals_the_cpu(mode, no_fallback):
    x = _ints(torch.int64, 2 * 3 * 8 * 8, 7).view(2, 3, 8, 8) % 1000
    w = _ints(torch.int64, 4 * 3 * 3 * 3, 8).view(4, 3, 3, 3) % 1000
    with torchtpu.eager_mode(mode):
        got = torch.nn.functional.conv2d(x.to("tpu"), w.to("tpu"), padding=1).cpu()
    assert torch.equal(got, torch.nn.functional.conv2d(x, w, padding=1))
