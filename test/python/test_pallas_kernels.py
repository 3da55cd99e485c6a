"""Pallas and JAX kernels as ops on "tpu" (docs/custom-kernels.md), in every eager mode and
compiled, each compared with PyTorch on the CPU, and charged as one launch."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu

pytest.importorskip("jax")
import pallas_kernels as pk  # noqa: E402

pytestmark = pytest.mark.not_in_debug_tier(
    "Pallas kernels run in interpret mode as host code over torch ops, the same in debug "
    "and strict eager")

MODES = ("strict", "debug", "fused", "compiled")


def _call(mode, fn, *args):
    """fn(*args) in eager mode `mode`, or compiled with the "tpu" backend (fused eager around)."""
    torchtpu.set_eager_mode("fused" if mode == "compiled" else mode)
    if mode == "compiled":
        torch._dynamo.reset()
        return torch.compile(fn, backend="tpu", dynamic=False)(*args)
    return fn(*args)


def _launches(name):
    return torchtpu.metrics.estimate()["launches"], torchtpu.metrics.op_times().get(name)


@pytest.mark.parametrize("mode", MODES)
def test_elementwise(mode):
    op = pk.op("axpy")
    x, y = torch.randn(64, 256), torch.randn(64, 256)
    torchtpu.metrics.reset()
    # (an op recorded before the kernel: fused eager materializes it first)
    out = _call(mode, lambda a, b: op(a * 1.5, b) + 1.0, x.tpu(), y.tpu())
    torch.testing.assert_close(out.cpu(), 2.0 * (x * 1.5) + y + 1.0)
    assert torchtpu.metrics.op_times()["tpk::axpy"] > 0
    assert torchtpu.metrics.estimate()["launches"] >= 2


@pytest.mark.parametrize("mode", MODES)
def test_blocked_matmul_bf16_in_float32_out(mode):
    op = pk.op("blocked_matmul")
    x = torch.randn(256, 512).bfloat16()
    y = torch.randn(512, 384).bfloat16()
    torchtpu.metrics.reset()
    out = _call(mode, op, x.tpu(), y.tpu())
    assert out.dtype == torch.float32 and out.device.type == "tpu"
    # bf16 products are exact in float32, summed in float32: the CPU's float32 matmul
    torch.testing.assert_close(out.cpu(), x.float() @ y.float(), rtol=1e-5, atol=1e-4)
    est = torchtpu.metrics.estimate()
    assert est["flops"] == 2 * 256 * 512 * 384
    assert torchtpu.metrics.op_times()["tpk::blocked_matmul"] > 0


@pytest.mark.parametrize("mode", MODES)
def test_scalar_prefetch_gather(mode):
    op = pk.op("gather_rows")
    x = torch.randn(6 * 8, 128)
    idx = torch.tensor([4, 0, 0, 5, 2], dtype=torch.int32)
    out = _call(mode, op, idx.tpu(), x.tpu())
    torch.testing.assert_close(out.cpu(), x.view(6, 8, 128)[idx.long()])


@pytest.mark.parametrize("mode", MODES)
def test_popcount_jax_without_pallas(mode):
    op = pk.op("popcount")
    words = torch.tensor([0, 1, 0xFFFFFFFF, 0x66666666, 12345], dtype=torch.int64)
    x = words.to(torch.uint32)
    out = _call(mode, op, x.tpu())
    expected = torch.tensor([bin(int(w)).count("1") for w in words])
    assert out.dtype == torch.uint32
    assert out.cpu().to(torch.int64).tolist() == expected.tolist()


@pytest.mark.parametrize("mode", MODES)
def test_flash_attention_forward_and_backward(mode):
    fwd, bwd = pk.op("flash"), pk.op("flash_bwd")
    B, H, S, D = 1, 2, 256, 64
    q, k, v, g = (torch.randn(B, H, S, D) for _ in range(4))
    scale = D ** -0.5
    out = _call(mode, lambda a, b, c: fwd(a, b, c, scale), q.tpu(), k.tpu(), v.tpu())
    torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, scale=scale),
                               rtol=1e-4, atol=1e-5)
    grads = _call(mode, lambda a, b, c, d: bwd(a, b, c, d, scale),
                  q.tpu(), k.tpu(), v.tpu(), g.tpu())
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*leaves, scale=scale).backward(g)
    for got, ref in zip(grads, leaves):
        torch.testing.assert_close(got.cpu(), ref.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ("strict", "debug", "fused"))
def test_donated_argument_memory_goes_to_the_result(mode):
    torchtpu.set_eager_mode(mode)
    op = pk.op("scale3", donate_argnums=(0,))
    x = torch.randn(32, 128)
    t = x.tpu()
    before = t.data_ptr()
    out = op(t)
    torch.testing.assert_close(out.cpu(), x * 3.0)
    assert out.data_ptr() == before  # (the donated memory holds the result)
    assert t.data_ptr() != before and t.shape == x.shape


@pytest.mark.parametrize("mode", ("strict", "fused", "compiled"))
def test_autograd_rule_trains_a_linear_model(mode):
    fwd, bwd = pk.op("linear_fwd"), pk.op("linear_bwd")

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return bwd(g, x, w)

    fwd.register_autograd(backward, setup_context=setup)
    torch.manual_seed(0)
    x, target = torch.randn(64, 32), torch.randn(64, 16)
    w0 = torch.randn(32, 16) * 0.1

    def train(device, step_fn):
        w = w0.clone().to(device).requires_grad_()
        opt = torch.optim.SGD([w], lr=0.1)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = step_fn(x.to(device), w, target.to(device))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, w.detach().cpu()

    def kernel_step(a, w, t):
        return ((fwd(a, w) - t) ** 2).mean()

    torchtpu.set_eager_mode("fused" if mode == "compiled" else mode)
    torch._dynamo.reset()
    step = torch.compile(kernel_step, backend="tpu", dynamic=False) if mode == "compiled" \
        else kernel_step
    losses, w = train("tpu", step)
    ref_losses, ref_w = train("cpu", lambda a, w, t: ((a @ w - t) ** 2).mean())
    assert losses[-1] < losses[0]
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-4,
                               atol=1e-5)
    torch.testing.assert_close(w, ref_w, rtol=1e-4, atol=1e-5)


def test_compiled_graph_replays_the_kernel_each_call():
    torchtpu.set_eager_mode("strict")  # (debug eager runs compiled graphs op by op)
    op = pk.op("axpy")
    f = torch.compile(lambda a, b: op(a, b) * 2.0, backend="tpu", dynamic=False)
    torchtpu.metrics.reset()
    for i in range(3):
        x, y = torch.randn(8, 128), torch.randn(8, 128)
        out = f(x.tpu(), y.tpu())
        torch.testing.assert_close(out.cpu(), (2.0 * x + y) * 2.0)
        if i == 0:
            assert torchtpu.metrics.counters().get("compile.graphs_cut_at_kernels", 0) == 1
    # (the kernel ran at every call, one launch each; the multiply is a program replayed)
    assert torchtpu._C.price_run("", -1.0)["op_launches"]["tpk::axpy"] == 3
    runs = torchtpu.metrics.compiled()["program_runs"]
    assert runs == 3, runs


@pytest.mark.parametrize("mode", ("strict", "fused", "compiled"))
def test_flash_attention_through_autograd(mode):
    fwd, bwd = pk.op("flash"), pk.op("flash_bwd")

    def setup(ctx, inputs, output):
        q, k, v, scale = inputs
        ctx.save_for_backward(q, k, v)
        ctx.scale = scale

    def backward(ctx, g):
        q, k, v = ctx.saved_tensors
        return (*bwd(q, k, v, g, ctx.scale), None)

    fwd.register_autograd(backward, setup_context=setup)
    B, H, S, D = 1, 2, 128, 64
    q, k, v = (torch.randn(B, H, S, D) for _ in range(3))
    leaves = [t.tpu().requires_grad_() for t in (q, k, v)]
    loss = _call(mode, lambda a, b, c: (fwd(a, b, c, D ** -0.5) ** 2).sum(), *leaves)
    loss.backward()
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    ref_loss = (F.scaled_dot_product_attention(*ref, scale=D ** -0.5) ** 2).sum()
    ref_loss.backward()
    torch.testing.assert_close(loss.detach().cpu(), ref_loss.detach(), rtol=1e-4, atol=1e-4)
    for got, want in zip(leaves, ref):
        torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-4)
