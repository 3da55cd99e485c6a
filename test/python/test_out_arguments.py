"""out= arguments on "tpu" as on the CPU and CUDA: outputs on another device or of another dtype
refused at the call, torch.mode(out=), a non-empty out of another shape resized with the CPU's
warning, the meta function of a repeated out= call run once, each against the CPU."""
import pytest
import torch

import torchtpu
from conftest import close_to_cpu


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_a_cpu_out_tensor_is_refused_even_when_zero_dim(mode):
    # The rule that lets a 0-dim CPU tensor act as a scalar input applied to outputs too:
    # torch.abs(0-dim tpu tensor, out=0-dim CPU tensor) wrote the CPU tensor.
    torchtpu.set_eager_mode(mode)
    x = torch.tensor(-0.5, device="tpu")
    out = torch.empty(())
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.abs(x, out=out)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.tensor(2.0).add_(torch.ones((), device="tpu"))  # a CPU self is written too
    # inputs keep the scalar rule
    assert torch.add(torch.ones(3, device="tpu"), torch.tensor(2.0)).cpu().tolist() == [3.0] * 3
    assert torch.abs(x, out=torch.empty((), device="tpu")).item() == 0.5


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_mode_with_out_tensors_works_like_the_cpu(mode):
    # torch.mode(..., out=...) raised "mode only supports CPU, CUDA and XPU device type".
    torchtpu.set_eager_mode(mode)
    x = torch.tensor([[1.0, 2, 2, 5], [3, 3, 1, 1], [4, 0, 4, 0]])
    want = torch.mode(x, 1)
    values, indices = torch.empty(3, device="tpu"), torch.empty(3, dtype=torch.long, device="tpu")
    got = torch.mode(x.to("tpu"), 1, out=(values, indices))
    assert got.values is values and got.indices is indices
    close_to_cpu(values, want.values)
    close_to_cpu(indices, want.indices)
    # a non-empty out= of another shape is resized, with the CPU's deprecation warning
    values, indices = torch.empty(7, device="tpu"), torch.empty(0, dtype=torch.long, device="tpu")
    with pytest.warns(UserWarning, match="was resized"):
        torch.mode(x.to("tpu"), 0, keepdim=True, out=(values, indices))
    want = torch.mode(x, 0, keepdim=True)
    assert values.shape == want.values.shape == (1, 4)
    close_to_cpu(values, want.values)
    close_to_cpu(indices, want.indices)
    # outputs on the CPU, or of the wrong dtype, are refused as the CPU refuses them
    with pytest.raises(RuntimeError, match="expected device 'tpu:0' but got 'cpu' for values"):
        torch.mode(x.to("tpu"), 1, out=(torch.empty(3), torch.empty(3, dtype=torch.long)))
    with pytest.raises(RuntimeError, match="expected scalar type 'Long' but got 'Int'"):
        torch.mode(x.to("tpu"), 1, out=(torch.empty(3, device="tpu"),
                                         torch.empty(3, dtype=torch.int, device="tpu")))


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_a_non_empty_out_tensor_of_another_shape_is_resized_at_the_call_like_the_cpu(mode):
    """Strict and fused eager queued the op with the out= tensor as given and reported its shape at
    synchronization; the CPU resizes it with its deprecation warning. Now every mode does what the
    CPU does, at the call. The meta function runs once per call signature (calls.meta_checks):
    a training step's second run repeats the first one's signatures and runs none.""" 
    import warnings
    torchtpu.set_eager_mode(mode)

    def run(device):
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(3, 4, generator=g).to(device), torch.randn(3, 4, generator=g).to(device)
        idx = torch.tensor([[0, 1], [2, 3], [1, 1]]).to(device)
        outs = [torch.empty(5, device=device), torch.empty(7, device=device),
                torch.empty(2, 9, device=device)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.add(a, b, out=outs[0])
            torch.sum(a, 1, out=outs[1])
            torch.gather(a, 1, idx, out=outs[2])
        resized = sum("resized" in str(w.message) for w in caught)
        return [o.cpu() for o in outs], resized

    torchtpu.metrics.reset()
    got, got_warnings = run("tpu")
    want, want_warnings = run("cpu")
    assert [o.shape for o in got] == [o.shape for o in want]
    for g_, w_ in zip(got, want):
        assert torch.equal(g_, w_)
    assert got_warnings == want_warnings == 3
    assert torchtpu.metrics.counters()["calls.meta_checks"] == 3
    # A training step: its second run makes the same calls as its first, none checked again.
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    model.to("tpu")
    opt = torch.optim.AdamW(model.parameters())
    for step in range(2):
        torchtpu.metrics.reset()
        loss = model(torch.randn(4, 8, device="tpu")).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        torch.tpu.synchronize()
    counters = torchtpu.metrics.counters()
    assert counters.get("calls.meta_checks", 0) == counters.get("calls.cpu_kernel_checks", 0) == 0


@pytest.mark.parametrize("mode", ["strict", "debug"])
def test_an_out_call_repeated_runs_the_meta_function_once_and_a_new_signature_again(mode):
    """The shape check of out= tensors from Python ran the op's meta function at every call, and
    PyTorch's meta functions of out= variants are mostly Python (torch._refs): torch.add(a, b,
    out=o) on 64x256 took 121 us against 11 us without out=, gelu_backward's 1.1 ms. A call with the
    same argument metadata as one checked before is not checked again; another shape is, and a
    resize (with the CPU's warning) happens at every such call, as on the CPU. (Fused eager
    records an element-wise op whose out= tensor has the right shape without this check.)"""
    import warnings
    torchtpu.set_eager_mode(mode)
    # (Signatures are remembered for the process: each mode's calls get shapes of their own.)
    n = {"strict": 3, "debug": 4, "fused": 5}[mode]
    g = torch.Generator().manual_seed(0)
    a_cpu, b_cpu = torch.randn(n, 4, generator=g), torch.randn(n, 4, generator=g)
    a, b = a_cpu.to("tpu"), b_cpu.to("tpu")
    out = torch.empty(n, 4, device="tpu")
    torchtpu.metrics.reset()
    for _ in range(5):
        torch.add(a, b, alpha=2, out=out)
    assert torchtpu.metrics.counters()["calls.meta_checks"] == 1
    assert torch.equal(out.cpu(), torch.add(a_cpu, b_cpu, alpha=2))
    for _ in range(2):  # a wrong shape: checked and resized at every call, with the warning
        wrong = torch.empty(5, device="tpu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.add(a, b, alpha=2, out=wrong)
        assert wrong.shape == (n, 4)
        assert sum("resized" in str(w.message) for w in caught) == 1
        assert torch.equal(wrong.cpu(), out.cpu())
    c = torch.randn(n, 5, device="tpu")  # other input shapes: a new signature
    wrong = torch.empty(n, 4, device="tpu")
    torch.add(c, c, out=wrong)
    assert wrong.shape == (n, 5)
    assert torchtpu.metrics.counters()["calls.meta_checks"] == 1 + 2 + 1
    assert torch.equal(wrong.cpu(), (c + c).cpu())
