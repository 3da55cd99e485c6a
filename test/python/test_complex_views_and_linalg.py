"""Conjugate and negative views, complex scalars and strided inputs on "tpu" against the CPU:
linear algebra over conjugate, negative and strided views, complex alpha/beta of addmm and
baddbmm, det/slogdet gradients of strided inputs, conj_physical in place, and the conjugate and
negative bits through save/load and fake tensors."""
import pytest
import torch

import torchtpu
from conftest import close_to_cpu


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_linear_algebra_on_conjugate_negative_and_strided_views_matches_the_cpu(mode):
    # solve_triangular of conjugate / negative views: the queued host kernel dropped the views'
    # bits (max error 37.5 in the upstream suite).
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(4, 4, dtype=torch.complex64, generator=g).triu()
         + 4 * torch.eye(4, dtype=torch.complex64))
    b = torch.randn(4, 3, dtype=torch.complex64, generator=g)
    for left in (True, False):
        bb = b if left else b.mT
        for view in (lambda t: t.conj(), lambda t: -t.conj(), lambda t: t):
            expected = torch.linalg.solve_triangular(a.conj(), view(bb), upper=True, left=left)
            got = torch.linalg.solve_triangular(a.to("tpu").conj(), view(bb.to("tpu")), upper=True,
                                                left=left)
            close_to_cpu(got, expected, rtol=1e-4, atol=1e-4)
    ar = torch.randn(4, 4, generator=g).triu() + 4 * torch.eye(4)
    neg = torch.linalg.solve_triangular(ar.to("tpu")._neg_view(), b.real.to("tpu"), upper=True)
    close_to_cpu(neg, torch.linalg.solve_triangular(-ar, b.real, upper=True), rtol=1e-4, atol=1e-4)
    # determinants of strided batches
    x = torch.randn(5, 5, 5, generator=g)
    for t in (x.transpose(0, 2), x.transpose(1, 2)[::2], x.permute(2, 0, 1)):
        close_to_cpu(torch.linalg.det(t.to("tpu")), torch.linalg.det(t), rtol=1e-4, atol=1e-4)
        sign, logabs = torch.linalg.slogdet(t.to("tpu"))
        esign, elogabs = torch.linalg.slogdet(t)
        close_to_cpu(sign, esign)
        close_to_cpu(logabs, elogabs, rtol=1e-4, atol=1e-4)


def test_complex_scalars_of_addmm_and_baddbmm():
    # "value cannot be converted to type double without overflow"
    g = torch.Generator().manual_seed(1)
    m, a, b = (torch.randn(s, dtype=torch.complex64, generator=g) for s in ((3, 2), (3, 4), (4, 2)))
    for alpha, beta in ((1 + 2j, 1j), (2, 0.5j), (1j, 0)):
        expected = torch.addmm(m, a, b, alpha=alpha, beta=beta)
        close_to_cpu(torch.addmm(m.to("tpu"), a.to("tpu"), b.to("tpu"), alpha=alpha, beta=beta), expected,
              rtol=1e-4, atol=1e-4)
        bm, ba, bb = m[None].repeat(2, 1, 1), a[None].repeat(2, 1, 1), b[None].repeat(2, 1, 1)
        close_to_cpu(torch.baddbmm(bm.to("tpu"), ba.to("tpu"), bb.to("tpu"), alpha=alpha, beta=beta),
              torch.baddbmm(bm, ba, bb, alpha=alpha, beta=beta), rtol=1e-4, atol=1e-4)


def test_the_conj_and_neg_bits_of_tpu_tensors_survive_save_load_and_fake_tensors():
    # The tensor metadata PyTorch keeps for every device (docs/cuda-parity.md, "Backend tensor
    # metadata"): torchtpu tensors carry no state of their own beyond it.
    import io
    from torch._subclasses.fake_tensor import FakeTensorMode
    z = torch.randn(4, dtype=torch.cfloat, device="tpu")
    for view, bit in ((z.conj(), "conj"), (z.conj().imag, "neg")):
        assert torch._C._get_tensor_metadata(view) == {bit: True}
        buf = io.BytesIO()
        torch.save(view, buf)
        buf.seek(0)
        loaded = torch.load(buf)
        assert loaded.device == view.device
        assert torch._C._get_tensor_metadata(loaded) == {bit: True}
        assert torch.equal(loaded.cpu(), view.cpu())
        with FakeTensorMode() as fake_mode:
            fake = fake_mode.from_tensor(view)
            assert fake.device == view.device
            assert torch._C._get_tensor_metadata(fake) == {bit: True}


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_det_and_slogdet_gradients_of_strided_inputs_match_the_cpu(mode):
    """The CPU fallback copied a strided (not dense) input to the host contiguous: _linalg_det
    then factored A^T (it does so for a contiguous A), while the derivative formula, seeing the
    strided tpu tensor, solved with the factors as A's: the gradient came out transposed (upstream
    test_noncontiguous_samples of linalg.det, linalg.slogdet, logdet). The fallback's host copies
    keep the device tensor's strides."""
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 5, 5, generator=g)
    grad = torch.randn(3, generator=g)
    for view in (lambda t: t[..., ::2], lambda t: t.as_strided((3, 5, 5), (0, 10, 2))):
        base = torch.zeros(3, 5, 10)
        base[..., ::2] = a
        for fn in (torch.linalg.det, lambda t: torch.linalg.slogdet(t)[1], torch.logdet):
            x = view(base).requires_grad_()
            want, = torch.autograd.grad(fn(x), x, grad)
            xt = view(base.to("tpu")).requires_grad_()
            assert xt.stride() == x.stride()
            got, = torch.autograd.grad(fn(xt), xt, grad.to("tpu"))
            close_to_cpu(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_conj_physical_in_place_matches_the_cpu(mode):
    """Tensor.conj_physical_() raised "DispatchStub: missing kernel for tpu": PyTorch's composite
    kernel calls at::native::conj_physical_out directly, which runs the DispatchStub of the
    tensors' device (upstream test_variant_consistency_eager_conj_physical, complex64)."""
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, dtype=torch.complex64, generator=g)
    views = (lambda t: t, lambda t: t.conj(), lambda t: t[:, ::2], lambda t: t._neg_view())
    for view in views:
        want = view(x.clone()).conj_physical_()
        got = view(x.clone().to("tpu")).conj_physical_()
        assert got.is_conj() == want.is_conj()
        close_to_cpu(got.resolve_conj().resolve_neg(), want.resolve_conj().resolve_neg(), atol=0, rtol=0)
    # a chain with it (recorded in fused eager), and a real tensor (nothing to do)
    got = (x.to("tpu") * 2).conj_physical_().add_(1)
    close_to_cpu(got, (x * 2).conj_physical_().add_(1), atol=0, rtol=0)
    r = torch.randn(3, generator=g)
    close_to_cpu(r.to("tpu").conj_physical_(), r, atol=0, rtol=0)
