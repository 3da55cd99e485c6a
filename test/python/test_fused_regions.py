"""Fused eager's region execution (defer/FusedRegion, the fused loop): bit-exact element-wise
loops (NaN, infinities, signed zeros), AdamW's foreach ops recorded as one node each with their
plans cached, reductions fusing their producers, one-kernel regions in large blocks, and results
sized without meta kernels, against the CPU."""
import pytest
import torch
import torchtpu

from defer_helpers import counters, fused  # noqa: F401  (fused: an autouse fixture)


def test_fused_loop_is_bit_exact_including_nan_inf_and_signed_zero():
    x = torch.randn(300, 257)
    x[0, :6] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-45])
    w = torch.randn(300, 257)
    w[1, :3] = torch.tensor([0.0, float("nan"), -0.0])

    def chain(a, b):
        y = (a * 1.5 + 0.25).relu() - 0.5
        y = torch.maximum(y * b, a) / (b.abs() + 1.0)
        y = torch.minimum(-y, b) - a
        return y.abs() + 1.0

    torchtpu.metrics.reset()
    got = chain(x.to("tpu"), w.to("tpu")).cpu()
    if " avx2 " in open("/proc/cpuinfo").read():  # (the loop needs AVX2 + FMA)
        assert counters().get("defer.ops_in_loop", 0) >= 10  # the register-level loop ran them
    with torchtpu.eager_mode("strict"):
        strict = chain(x.to("tpu"), w.to("tpu")).cpu()
    ref = chain(x, w)
    assert torch.equal(got.isnan(), ref.isnan())
    assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(ref))
    assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(strict))
    assert torch.equal(torch.signbit(got), torch.signbit(ref))


def test_fused_loop_runs_adamw_ops_bit_exact_with_the_cpu():
    """lerp with a Scalar weight (both of ATen's formulas: |w| < 0.5 and not), addcmul and addcdiv
    run on the register-level loop, with the fused multiply-adds of ATen's vector kernels: bit for
    bit the CPU's results, on sizes with a tail that ATen's kernels run element by element, with
    NaN, infinities and signed zeros, and through AdamW's update (torch.optim.AdamW, foreach)."""
    g = torch.Generator().manual_seed(3)
    for shape in ((300, 257), (1000,), (7,)):
        a, b = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
        c = torch.rand(shape, generator=g) + 0.1
        a.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -0.0, 0.0])[: a.numel()]
        b.view(-1)[:3] = torch.tensor([-float("inf"), 0.0, -0.0])[: b.numel()]

        def ops(a, b, c):
            return [torch.lerp(a, b, 0.1), torch.lerp(a, b, 0.75), torch.lerp(a, b, -2.5),
                    torch.addcmul(a, b, c, value=-0.37), torch.addcmul(a, b, b),
                    torch.addcdiv(a, b, c, value=0.3), torch.addcdiv(a, b, c, value=-1e-3),
                    (a * 0.5).lerp_(b, 0.9).addcmul_(c, c, value=2.0)]

        torchtpu.metrics.reset()
        got = [t.cpu() for t in ops(a.to("tpu"), b.to("tpu"), c.to("tpu"))]
        if " avx2 " in open("/proc/cpuinfo").read():  # (the loop needs AVX2 + FMA)
            assert counters().get("defer.ops_in_loop", 0) >= 8
        for x, y in zip(got, ops(a, b, c)):
            assert torch.equal(x.isnan(), y.isnan())
            assert torch.equal(torch.nan_to_num(x), torch.nan_to_num(y))
            assert torch.equal(torch.signbit(x), torch.signbit(y))

    def adamw(device):
        torch.manual_seed(0)
        # (A weight over 32768 elements: AdamW's foreach ops are recorded per tensor, the ops
        # the loop runs; over small tensors they are recorded as one node each, the test below.)
        model = torch.nn.Sequential(torch.nn.Linear(33, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 9))
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, foreach=True)
        x = torch.randn(16, 33, generator=torch.Generator().manual_seed(1)).to(device)
        for _ in range(3):
            opt.zero_grad()
            model(x).square().mean().backward()
            for p in model.parameters():  # the same gradients on both devices
                p.grad = torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())).to(device)
            opt.step()
        return [p.detach().cpu() for p in model.parameters()]

    torchtpu.metrics.reset()
    got = adamw("tpu")
    if " avx2 " in open("/proc/cpuinfo").read():
        assert counters().get("defer.ops_in_loop", 0) >= 3 * 4 * 3  # lerp, addcmul, addcdiv per tensor
    for x, y in zip(got, adamw("cpu")):
        assert torch.equal(x, y)


def test_a_small_models_adamw_records_each_foreach_op_as_one_node_with_plans_cached(
        no_loop_detection):
    """Over tensors no larger than a fused region's block, an in-place foreach op is recorded as
    one node and runs at the flush as strict eager runs it (one launch over its lists): AdamW
    over 24 small parameters recorded 192 per-tensor ops, about 0.3 ms per step of recording
    and flushing that fused nothing (docs/host-speed.md, "Foreach ops as one launch"). Its
    Scalar[] arguments (AdamW's step sizes, new every step) are values of the run, not of the
    plan: the graph of every later step is the cached one. Results bit for bit the CPU's. (It
    counts the nodes of each step's graph, cut at its read: loop detection is off.)"""
    if torchtpu.get_eager_mode() != "fused":
        pytest.skip("fused eager's recording")

    def train(device, steps=4):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
        model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, foreach=True)
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1)).to(device)
        hits = []
        for _ in range(steps):
            before = counters().get("defer.cache_hits", 0)
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            loss.item()
            hits.append(counters().get("defer.cache_hits", 0) - before)
        return [p.detach().cpu() for p in model.parameters()], hits

    torchtpu.metrics.reset()
    got, hits = train("tpu")
    ops = torchtpu.metrics.native_ops()
    assert ops.get("aten::_foreach_addcdiv_.ScalarList", 0) == 4, ops  # one node per step
    assert ops.get("aten::_foreach_lerp_.Scalar", 0) == 4, ops
    assert ops.get("aten::addcdiv.out", 0) == 0 and ops.get("aten::lerp.Scalar_out", 0) == 0, ops
    assert all(h >= 1 for h in hits[2:]), hits  # (the first steps plan; later ones replay)
    expected, _ = train("cpu")
    for x, y in zip(got, expected):
        assert torch.equal(x, y)


def test_bfloat16_layer_norm_backward_runs_from_the_graph():
    # Regression: the meta kernel gives float32 statistics for bf16 inputs, the CPU kernel bf16;
    # recorded with the meta's dtype, the backward refused them.
    torch.manual_seed(0)
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    grads = {}
    for mode in ("strict", "fused"):
        with torchtpu.eager_mode(mode):
            norm = torch.nn.LayerNorm(16).to("tpu", torch.bfloat16)
            xt = x.to("tpu").requires_grad_()
            norm(xt).float().square().sum().backward()
            grads[mode] = xt.grad.cpu()
    torch.testing.assert_close(grads["fused"], grads["strict"], rtol=0, atol=0)


def test_a_reduction_fuses_its_element_wise_producers():
    x = torch.randn(512, 1024)
    a = x.to("tpu")
    torchtpu.sync()
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    torchtpu.metrics.reset()
    s = ((a * 2 + 1).relu() * a).sum(dim=1)  # the 2 MiB intermediates never reach HBM
    torchtpu.sync()
    assert counters().get("defer.fused_reduction_regions", 0) == 1
    assert torch.tpu.max_memory_allocated() - base < (1 << 20)
    torch.testing.assert_close(s.cpu(), ((x * 2 + 1).relu() * x).sum(dim=1))
    m = (a - 0.5).abs().amax(dim=0)
    torch.testing.assert_close(m.cpu(), (x - 0.5).abs().amax(dim=0), rtol=0, atol=0)


def test_a_region_of_one_kernel_op_runs_in_large_blocks_bit_exact():
    # A region with one element-wise op that is not a loop instruction (a matmul's GELU
    # epilogue; gelu_backward before its bias-gradient sum) runs in a few large blocks per thread
    # (docs/host-speed.md, "A cached region's run"): the same values as the CPU's kernels, bit
    # for bit.
    torch.manual_seed(0)
    x, w, g = torch.randn(640, 512), torch.randn(512, 1024), torch.randn(640, 1024)
    xt, wt, gt = x.to("tpu"), w.to("tpu"), g.to("tpu")
    torchtpu.sync()
    torchtpu.metrics.reset()
    with torch.tpu.precision("highest"):
        h = torch.nn.functional.gelu(xt @ wt)
    torchtpu.sync()  # (one graph each: gelu_backward would join the matmul's epilogue)
    gb = torch.ops.aten.gelu_backward(gt, h)
    db = gb.sum(0)
    torchtpu.sync()
    assert counters().get("defer.fused_matmul_regions", 0) == 1, counters()
    assert counters().get("defer.fused_reduction_regions", 0) == 1, counters()
    with torch.tpu.precision("highest"):
        h_cpu = torch.nn.functional.gelu(x @ w)
    gb_cpu = torch.ops.aten.gelu_backward(g, h_cpu)
    torch.testing.assert_close(h.cpu(), h_cpu, rtol=1e-6, atol=1e-5)  # (MKL's GEMM: order)
    # From the same input, bit for bit: the blocks run the CPU's kernels.
    torch.testing.assert_close(gb.cpu(), torch.ops.aten.gelu_backward(g, h.cpu()), rtol=0, atol=0)
    torch.testing.assert_close(db.cpu(), gb.cpu().sum(0), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_results_sized_without_meta_kernels_match_the_kernels(dtype):
    # native_layer_norm(+backward), index_select, embedding_dense_backward and mse_loss_backward
    # are sized in C++ (their meta kernels are Python): same sizes, strides and dtypes as strict.
    torch.manual_seed(0)
    x = torch.randn(3, 5, 8, dtype=dtype)
    w, b = torch.randn(8, dtype=dtype), torch.randn(8, dtype=dtype)
    idx = torch.tensor([4, 0, 2])
    emb = torch.randn(10, 8, dtype=dtype)

    def run():
        xt = x.to("tpu").requires_grad_()
        wt, bt = w.to("tpu").requires_grad_(), b.to("tpu").requires_grad_()
        et = emb.to("tpu").requires_grad_()
        y = torch.nn.functional.layer_norm(xt, (8,), wt, bt)
        e = torch.nn.functional.embedding(idx.to("tpu"), et)
        s = torch.index_select(xt, 1, idx.to("tpu"))
        loss = torch.nn.functional.mse_loss(y, torch.zeros_like(y)) + e.float().sum() + s.float().sum()
        loss.backward()
        return [t.detach() for t in (y, e, s, xt.grad, wt.grad, bt.grad, et.grad)]

    torchtpu.metrics.reset()
    got = run()
    torchtpu.sync()
    assert not any(k.startswith("defer.meta_calls.") for k in counters()), counters()
    assert counters().get("defer.result_copies", 0) == 0
    with torchtpu.eager_mode("strict"):
        want = run()
    for g, r in zip(got, want):
        assert (g.shape, g.stride(), g.dtype) == (r.shape, r.stride(), r.dtype)
        torch.testing.assert_close(g.cpu(), r.cpu(), rtol=0, atol=0)
