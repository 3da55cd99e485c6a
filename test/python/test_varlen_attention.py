"""flash-attn's entry points on "tpu" (aten/VarlenAttention.cpp): torch.nn.attention.varlen's
varlen_attn over packed sequences of several lengths (what TorchTitan's document masking calls)
and aten::_flash_attention_forward/_backward called directly, against the CPU's
scaled_dot_product_attention per sequence with flash-attn's bottom-right masks, forward and
backward, in every eager mode; each sequence is one call of the fused attention kernel and
nothing falls back to the CPU."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu

OVERRIDEABLE = "aten::_scaled_dot_product_fused_attention_overrideable"


def _flash_mask(lq, lk, left, right):
    """flash-attn's visibility: query i sees key j iff i + (lk - lq) - left <= j <= i + (lk - lq)
    + right (-1: unbounded), aligned to the bottom right."""
    diagonal = torch.arange(lq).unsqueeze(1) + (lk - lq)
    key = torch.arange(lk).unsqueeze(0)
    mask = torch.ones(lq, lk, dtype=torch.bool)
    if right >= 0:
        mask &= key <= diagonal + right
    if left >= 0:
        mask &= key >= diagonal - left
    return mask


def _reference(q, k, v, cu_q, cu_k, left, right):
    """Per sequence on the CPU: (total, heads, dim) packed in, packed out."""
    outs = []
    for (a, b), (c, d) in zip(zip(cu_q[:-1], cu_q[1:]), zip(cu_k[:-1], cu_k[1:])):
        qs, ks, vs = (x.transpose(0, 1).unsqueeze(0) for x in (q[a:b], k[c:d], v[c:d]))
        mask = _flash_mask(b - a, d - c, left, right)
        out = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, enable_gqa=True)
        outs.append(out.squeeze(0).transpose(0, 1))
    return torch.cat(outs)


@pytest.fixture
def cpu_exact():
    """float32 matmuls as the CPU computes them (the host's GEMM at "highest"): the comparison is
    of the attention's plumbing, not of the MXU's passes (docs/precision.md)."""
    level, algorithm = torch.tpu.get_default_matmul_precision(), torch.tpu.get_highest_algorithm()
    torch.tpu.set_highest_algorithm("float32")
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(level)
    torch.tpu.set_highest_algorithm(algorithm)


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
@pytest.mark.parametrize("window", [(-1, -1), (-1, 0), (2, 0), (1, 3)],
                         ids=["full", "causal", "sliding", "band"])
def test_varlen_attention_over_packed_sequences_equals_the_cpu(mode, window, cpu_exact):
    from torch.nn.attention.varlen import varlen_attn

    torch.manual_seed(0)
    lens_q, lens_k = [3, 7, 5], [3, 7, 5]
    cu = torch.tensor([0, 3, 10, 15], dtype=torch.int32)
    heads, kv_heads, dim = 4, 2, 16
    q = torch.randn(15, heads, dim, requires_grad=True)
    k = torch.randn(15, kv_heads, dim, requires_grad=True)
    v = torch.randn(15, kv_heads, dim, requires_grad=True)
    want = _reference(q, k, v, cu.tolist(), cu.tolist(), *window)
    want_grads = torch.autograd.grad(want.square().sum(), (q, k, v))
    previous = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode(mode)
    try:
        torchtpu.metrics.reset()
        qt, kt, vt = (x.detach().to("tpu").requires_grad_() for x in (q, k, v))
        got = varlen_attn(qt, kt, vt, cu.to("tpu"), cu.to("tpu"), max(lens_q), max(lens_k),
                          window_size=window, enable_gqa=True)
        grads = torch.autograd.grad(got.square().sum(), (qt, kt, vt))
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        for g, w in zip(grads, want_grads):
            torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)
        assert torchtpu.metrics.fallbacks() == {}
        # one fused attention per sequence, forward and backward
        assert torchtpu.metrics.native_ops().get(OVERRIDEABLE) == len(lens_q)
        assert torchtpu.metrics.native_ops().get(OVERRIDEABLE + "_backward") == len(lens_q)
    finally:
        torchtpu.set_eager_mode(previous)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_forward_called_directly_on_a_batch(causal, cpu_exact):
    # the dense form: (batch, length, heads, dim); a causal mask over 5 queries and 9 keys is
    # aligned to the bottom right, as CUDA's flash kernel aligns it
    torch.manual_seed(1)
    q = torch.randn(2, 5, 3, 8, requires_grad=True)
    k = torch.randn(2, 9, 3, 8, requires_grad=True)
    v = torch.randn(2, 9, 3, 8, requires_grad=True)
    mask = _flash_mask(5, 9, -1, 0 if causal else -1)
    want = F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, k, v)),
                                          attn_mask=mask).transpose(1, 2)
    want_grads = torch.autograd.grad(want.sum(), (q, k, v))
    qt, kt, vt = (x.detach().to("tpu").requires_grad_() for x in (q, k, v))
    out, lse, *_ = torch.ops.aten._flash_attention_forward(qt, kt, vt, None, None, 5, 9, 0.0,
                                                          causal, False)
    assert out.shape == q.shape and lse.shape == (2, 3, 5)
    torch.testing.assert_close(out.cpu(), want.detach(), rtol=1e-5, atol=1e-5)
    scores = (q.transpose(1, 2) @ k.transpose(1, 2).transpose(-2, -1)) / 8 ** 0.5
    want_lse = scores.masked_fill(~mask, float("-inf")).logsumexp(-1)
    torch.testing.assert_close(lse.cpu(), want_lse.detach(), rtol=1e-5, atol=1e-5)
    grads = torch.ops.aten._flash_attention_backward(
        torch.ones_like(out), qt, kt, vt, out, lse, torch.empty(0, device="tpu"),
        torch.empty(0, device="tpu"), 5, 9, 0.0, causal, torch.empty(2, device="tpu"),
        torch.empty(0, device="tpu"))
    for g, w in zip(grads, want_grads):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)


def test_what_flash_attention_on_tpu_refuses_says_what_to_do():
    q = torch.randn(6, 2, 8, device="tpu")
    cu = torch.tensor([0, 6], dtype=torch.int32, device="tpu")
    with pytest.raises(RuntimeError, match="block_table"):
        torch.ops.aten._flash_attention_forward(q, q, q, cu, cu, 6, 6, 0.0, False, False,
                                                block_table=torch.zeros(1, 1, dtype=torch.int32,
                                                                        device="tpu"))
    with pytest.raises(RuntimeError, match="no dropout"):
        torch.ops.aten._flash_attention_forward(q, q, q, cu, cu, 6, 6, 0.1, False, False)
