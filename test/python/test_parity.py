"""Ops on "tpu" against the CPU where CUDA code relies on them and a sweep found them wrong:
the ops PyTorch's upstream suites found, fp8 scaled_mm at the chip's fp8 rate, group norm's
backward over two layouts, padding a channels-last input, a convolution's bias gradient. Other
parity subjects have files of their own: attention (test_attention.py, test_varlen_attention.py),
out= arguments (test_out_arguments.py), complex and strided views (test_complex_views_and_linalg.py),
streams and host memory (test_streams_and_host_memory.py), Hugging Face
(test_huggingface_integration.py)."""
import pytest
import torch

import torchtpu
from conftest import close_to_cpu


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_the_ops_the_upstream_suites_found_wrong_match_the_cpu(mode):
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(2)
    # index_copy under deterministic algorithms
    torch.use_deterministic_algorithms(True)
    try:
        x, src = torch.zeros(5, 3), torch.arange(6.0).reshape(2, 3)
        idx = torch.tensor([4, 1])
        close_to_cpu(x.to("tpu").index_copy(0, idx.to("tpu"), src.to("tpu")), x.index_copy(0, idx, src))
    finally:
        torch.use_deterministic_algorithms(False)
    # batch norm in eval: the per-channel saved statistics PyTorch's meta kernel gives every
    # device but the CPU (which gives empty ones; test_fake_tensors.py has the values)
    x = torch.randn(2, 3, 4, generator=g)
    rm, rv = torch.zeros(3), torch.ones(3)
    cpu = torch.native_batch_norm(x, None, None, rm, rv, False, 0.1, 1e-5)
    tpu = torch.native_batch_norm(x.to("tpu"), None, None, rm.to("tpu"), rv.to("tpu"), False, 0.1, 1e-5)
    meta = torch.native_batch_norm(x.to("meta"), None, None, rm.to("meta"), rv.to("meta"), False,
                                   0.1, 1e-5)
    assert [t.shape for t in tpu] == [t.shape for t in meta]
    close_to_cpu(tpu[0], cpu[0], rtol=1e-5, atol=1e-5)
    # conj_physical of a conjugate view, complex32 through the fallback, group norm of a strided input
    z = torch.randn(3, dtype=torch.complex64, generator=g)
    close_to_cpu(torch.conj_physical(z.to("tpu").conj()), torch.conj_physical(z.conj()))
    h = torch.ones(3, dtype=torch.complex32)
    close_to_cpu(h.to("tpu") + h.to("tpu"), (h.to(torch.complex64) * 2).to(torch.complex32))
    x = torch.randn(5, 6, 4, generator=g).transpose(0, 2)
    close_to_cpu(torch.nn.functional.group_norm(x.to("tpu"), 2), torch.nn.functional.group_norm(x, 2),
          rtol=1e-4, atol=1e-4)
    # histc of an all-inf input: the CPU's error
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histc(torch.full((4,), float("inf"), device="tpu"), bins=4)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_fp8_scaled_mm_is_native_at_the_chips_fp8_rate(mode):
    # torch._scaled_mm ran through the CPU fallback; it is a native launch now, equal to the CPU's,
    # priced at the fp8 rate where the chip has one (v7) and at the bf16 rate elsewhere.
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(256, 256, generator=g).to(torch.float8_e4m3fn)
    b = torch.randn(256, 256, generator=g).to(torch.float8_e4m3fn).t()  # column-major, as required
    sa, sb = torch.tensor(0.5), torch.tensor(2.0)
    want = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    torchtpu.metrics.reset()
    got = torch._scaled_mm(a.to("tpu"), b.to("tpu"), sa.to("tpu"), sb.to("tpu"),
                           out_dtype=torch.bfloat16)
    assert torch.equal(got.cpu(), want)
    assert torchtpu.metrics.native_ops().get("aten::_scaled_mm") == 1
    assert not torchtpu.metrics.fallbacks()
    fp8 = {c: torchtpu.metrics.estimate(chip=c) for c in ("v5e", "v7")}
    assert fp8["v7"]["priced_as_native"] == 0  # a native launch, not a priced fallback
    x = torch.randn(256, 256, device="tpu", dtype=torch.bfloat16)
    torch.tpu.synchronize()
    torchtpu.metrics.reset()
    (x @ x).cpu()
    bf16 = {c: torchtpu.metrics.estimate(chip=c)["mxu_time_s"] for c in ("v5e", "v7")}
    assert fp8["v5e"]["mxu_time_s"] == pytest.approx(bf16["v5e"])      # no fp8 on v5e
    assert fp8["v7"]["mxu_time_s"] == pytest.approx(bf16["v7"] / 2)    # v7: fp8 at twice bf16
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):  # at the call
        torch._scaled_mm(a[:, :128].contiguous().to("tpu"), b.to("tpu"), sa.to("tpu"),
                         sb.to("tpu"))


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_group_norm_backward_with_operands_in_two_layouts_matches_the_cpu(mode):
    """PyTorch 2.13's CPU native_group_norm_backward reads dY in X's memory format: with one
    channels-last and one contiguous operand every gradient is wrong (AOTAutograd passes them so
    when a group norm follows an attention block's transposed output: diffusers' AutoencoderKL
    compiled had 88 of 92 gradients wrong). tpu gives what one layout gives, as CUDA does."""
    torchtpu.set_eager_mode(mode)
    torch.manual_seed(0)
    n, c, h, w, groups = 2, 32, 8, 8, 4
    x, dy, weight = torch.randn(n, c, h, w), torch.randn(n, c, h, w), torch.randn(c)
    _, mean, rstd = torch.ops.aten.native_group_norm(x, weight, None, n, c, h * w, groups, 1e-6)
    want = torch.ops.aten.native_group_norm_backward(dy, x, mean, rstd, weight, n, c, h * w, groups,
                                                     [True, True, True])
    cl = torch.channels_last
    for dy_, x_ in ((dy.contiguous(memory_format=cl), x), (dy, x.contiguous(memory_format=cl))):
        got = torch.ops.aten.native_group_norm_backward(
            dy_.to("tpu"), x_.to("tpu"), mean.to("tpu"), rstd.to("tpu"), weight.to("tpu"), n, c,
            h * w, groups, [True, True, True])
        for g, r in zip(got, want):
            torch.testing.assert_close(g.cpu(), r, atol=1e-5, rtol=1e-5)
        # the out= overload (enqueued in strict eager) as well
        outs = [torch.empty(n, c, h, w, device="tpu"), torch.empty(c, device="tpu"), torch.empty(c, device="tpu")]
        torch.ops.aten.native_group_norm_backward.out(
            dy_.to("tpu"), x_.to("tpu"), mean.to("tpu"), rstd.to("tpu"), weight.to("tpu"), n, c,
            h * w, groups, [True, True, True], out0=outs[0], out1=outs[1], out2=outs[2])
        for g, r in zip(outs, want):
            torch.testing.assert_close(g.cpu(), r, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_padding_a_channels_last_input_matches_the_cpu(mode):
    """PyTorch's CPU replication/reflection pads lay their out= tensor out anew in the input's
    memory format; strict and fused eager issue the result with the layout of PyTorch's meta
    kernel (contiguous, as CUDA gives it) and the values were written in the other layout
    (diffusers' Mochi VAE differed from the CPU everywhere). Found by the diffusers zoo."""
    torchtpu.set_eager_mode(mode)
    torch.manual_seed(0)
    x3 = torch.randn(2, 4, 3, 5, 6).contiguous(memory_format=torch.channels_last_3d)
    x2 = torch.randn(2, 4, 5, 6).contiguous(memory_format=torch.channels_last)
    F = torch.nn.functional
    for x, pad in ((x3, (1, 2, 1, 1, 2, 1)), (x2, (1, 2, 2, 1))):
        for how in ("replicate", "reflect", "circular", "constant"):
            want = F.pad(x, pad, mode=how)
            got = F.pad(x.to("tpu"), pad, mode=how)
            torch.testing.assert_close(got.cpu(), want, atol=0, rtol=0, msg=lambda m: f"{how} {x.dim()}-d: {m}")


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_a_convolutions_bias_gradient_does_not_depend_on_grad_outputs_strides(mode):
    """The bias gradient of a convolution was summed over grad_output as laid out: a strided
    grad_output gave another rounding than a dense one (the CPU gives the same bits; upstream
    test_noncontiguous_samples of nn.functional.conv_transpose3d, 2.7e-5 off at 1e-5)."""
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(0)
    F = torch.nn.functional
    x, w = torch.randn(2, 4, 4, 4, 4, generator=g) * 3, torch.randn(4, 2, 4, 5, 6, generator=g) * 3
    b = torch.randn(4, generator=g)
    kw = dict(stride=(3, 2, 1), padding=(1, 2, 3), output_padding=(2, 3, 1), groups=2,
              dilation=(4, 4, 4))
    cases = ((lambda x, w, b: F.conv_transpose3d(x, w, b, **kw), x, w),
             (lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2), x[:, :, 0], w[:, :, 0, :3, :3]))
    for conv, xx, ww in cases:
        grads = []
        for strided in (False, True):
            args = [t.to("tpu").requires_grad_() for t in (xx, ww, b)]
            y = conv(*args)
            gy = (torch.randn(y.shape, generator=torch.Generator().manual_seed(1)) * 10).to("tpu")
            if strided:
                gy = torch.stack([gy, gy], -1)[..., 0]
                assert not gy.is_contiguous()
            grads.append(torch.autograd.grad(y, args, gy))
        for dense, strided in zip(*grads):
            torch.testing.assert_close(strided.cpu(), dense.cpu(), atol=0, rtol=0)
