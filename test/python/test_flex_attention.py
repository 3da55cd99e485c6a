"""FlexAttention on tpu (torchtpu/_flex_attention.py, docs/cuda-parity.md "FlexAttention"):
PyTorch's device check lets tpu tensors through, and flex_attention with a block mask and a
score modification gives the CPU's values and gradients, eager and compiled, in each eager mode,
without a CPU fallback."""
import warnings

import pytest
import torch
from torch.nn.attention import flex_attention as fa

import torchtpu

B, H, L, E = 2, 4, 64, 16


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def relative_bias(score, b, h, q_idx, kv_idx):
    return score + 0.1 * (q_idx - kv_idx)


def reference(q, k, v, bias: bool):
    """The same attention on the CPU by its definition (CPU FlexAttention has no backward)."""
    scores = q @ k.transpose(-2, -1) / E ** 0.5
    i = torch.arange(L)
    if bias:
        scores = scores + 0.1 * (i[:, None] - i[None, :])
    scores = scores.masked_fill(i[:, None] < i[None, :], float("-inf"))
    return torch.softmax(scores, -1) @ v


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("bias", [False, True], ids=["mask", "mask+score_mod"])
def test_flex_attention_matches_the_cpu_forward_and_backward(compiled, bias):
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, L, E, requires_grad=True) for _ in range(3))
    ref = reference(q, k, v, bias)
    ref.sum().backward()
    qt, kt, vt = (t.detach().to("tpu").requires_grad_() for t in (q, k, v))
    block_mask = fa.create_block_mask(causal, None, None, L, L, device="tpu")
    attend = torch.compile(fa.flex_attention, backend="tpu") if compiled else fa.flex_attention
    before = torchtpu.metrics.fallbacks()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (eager: "called without torch.compile()")
        out = attend(qt, kt, vt, block_mask=block_mask,
                     score_mod=relative_bias if bias else None)
    out.sum().backward()
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    for got, expected in ((qt, q), (kt, k), (vt, v)):
        torch.testing.assert_close(got.grad.cpu(), expected.grad, rtol=1e-4, atol=1e-5)
    assert torchtpu.metrics.fallbacks() == before  # (no op of it ran on the CPU)


def test_the_cpu_forward_matches_too_and_other_devices_keep_pytorchs_check():
    torch.manual_seed(1)
    q, k, v = (torch.randn(B, H, L, E) for _ in range(3))
    block_mask = fa.create_block_mask(causal, None, None, L, L, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        cpu = fa.flex_attention(q, k, v, block_mask=block_mask)
        tpu = fa.flex_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"),
                                block_mask=fa.create_block_mask(causal, None, None, L, L,
                                                                device="tpu"))
    torch.testing.assert_close(tpu.cpu(), cpu, rtol=1e-5, atol=1e-5)
    # PyTorch's own refusal stands for the CPU's backward
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        fa.flex_attention(q.requires_grad_(), k, v, block_mask=block_mask)
