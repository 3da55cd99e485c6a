"""Quantized and sparse tensors on tpu (docs/quantized.md), against the CPU. Each test ran into
"Could not run ... with arguments from the 'Quantizedtpu' / 'Sparsetpu' backend" before. The
suite runs in each eager mode's tier (scripts/test.sh)."""
import io
import warnings

import pytest
import torch
import torchtpu

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # PyTorch's deprecation of qtypes


def ints(q):
    return q.int_repr().cpu()


@pytest.mark.parametrize("dtype,zero", [(torch.quint8, 10), (torch.qint8, -3), (torch.qint32, 7)])
def test_quantize_dequantize_and_views_per_tensor_equal_the_cpu(dtype, zero):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 8, generator=g) * 3
    want = torch.quantize_per_tensor(x, 0.05, zero, dtype)
    torchtpu.metrics.reset()
    got = torch.quantize_per_tensor(x.to("tpu"), 0.05, zero, dtype)
    assert got.device.type == "tpu" and got.dtype == dtype and got.is_quantized
    assert (got.q_scale(), got.q_zero_point(), got.qscheme()) == (0.05, zero,
                                                                  torch.per_tensor_affine)
    assert torch.equal(ints(got), want.int_repr())
    assert torch.equal(got.dequantize().cpu(), want.dequantize())
    for view in (lambda q: q.t(), lambda q: q[1:4, ::3], lambda q: q.view(8, 6),
                 lambda q: q.unsqueeze(0).squeeze(0), lambda q: q.clone()):
        assert torch.equal(ints(view(got)), view(want).int_repr())
    assert torch.equal(got.cpu().int_repr(), want.int_repr())       # to the CPU
    assert torch.equal(ints(want.to("tpu")), want.int_repr())       # and back
    assert not torchtpu.metrics.fallbacks()                          # all native
    buf = io.BytesIO()
    torch.save(got, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded.device.type == "tpu" and torch.equal(ints(loaded), want.int_repr())


def test_quantize_per_channel_equals_the_cpu_and_keeps_its_parameters_on_the_device():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 4, generator=g)
    scales = torch.rand(4, generator=g) * 0.1 + 0.01
    zeros = torch.randint(-4, 4, (4,), generator=g)
    want = torch.quantize_per_channel(x, scales, zeros, 1, torch.qint8)
    got = torch.quantize_per_channel(x.to("tpu"), scales.to("tpu"), zeros.to("tpu"), 1,
                                     torch.qint8)
    assert got.q_per_channel_scales().device.type == "tpu"  # as CUDA keeps them
    assert got.q_per_channel_axis() == 1
    assert torch.equal(ints(got), want.int_repr())
    assert torch.equal(got.dequantize().cpu(), want.dequantize())
    assert torch.equal(got.cpu().dequantize(), want.dequantize())
    assert torch.equal(want.to("tpu").dequantize().cpu(), want.dequantize())
    dynamic = torch.quantize_per_tensor_dynamic(x.to("tpu"), torch.quint8, False)
    assert torch.equal(ints(dynamic), torch.quantize_per_tensor_dynamic(x, torch.quint8,
                                                                        False).int_repr())


def test_other_quantized_ops_run_through_the_counted_fallback_like_the_cpu():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 6, generator=g)
    qc = torch.quantize_per_tensor(x, 0.05, 64, torch.quint8)
    qt = qc.to("tpu")
    torchtpu.metrics.reset()
    assert torch.equal(ints(torch.relu(qt)), torch.relu(qc).int_repr())
    assert torch.equal(ints(torch.cat([qt, qt])), torch.cat([qc, qc]).int_repr())
    assert torch.equal(ints(torch.ops.quantized.add(qt, qt, 0.1, 5)),
                       torch.ops.quantized.add(qc, qc, 0.1, 5).int_repr())
    inplace = qt.clone()
    assert torch.relu_(inplace) is inplace  # written in place, on tpu
    assert torch.equal(ints(inplace), torch.relu(qc).int_repr())
    counted = torchtpu.metrics.fallbacks()
    assert {"aten::relu", "aten::cat", "quantized::add", "aten::relu_"} <= set(counted)
    torchtpu.set_fallback_mode("error")
    with pytest.raises(NotImplementedError, match="no native TPU kernel"):
        torch.relu(qt)


def test_int8_linear_runs_on_the_mxu_at_the_int8_rate_and_equals_the_cpu():
    g = torch.Generator().manual_seed(3)
    x, w, b = torch.randn(32, 64, generator=g), torch.randn(48, 64, generator=g), torch.randn(48)
    wq = torch.quantize_per_channel(w, w.abs().amax(1) / 127, torch.zeros(48, dtype=torch.long),
                                    0, torch.qint8)
    xq = torch.quantize_per_tensor(x, 0.04, 120, torch.quint8)
    cpu = torch.ops.quantized.linear_prepack(wq, b)
    tpu = torch.ops.quantized.linear_prepack(wq.to("tpu"), b.to("tpu"))
    torchtpu.metrics.reset()
    got = torch.ops.quantized.linear(xq.to("tpu"), tpu, 0.1, 64)
    assert got.device.type == "tpu" and got.dtype == torch.quint8
    assert torch.equal(ints(got), torch.ops.quantized.linear(xq, cpu, 0.1, 64).int_repr())
    assert not torchtpu.metrics.fallbacks()
    linear_mxu = torchtpu.metrics.estimate(chip="v5e")["mxu_time_s"]
    relu = torch.ops.quantized.linear_relu(xq.to("tpu"), tpu, 0.1, 64)
    assert torch.equal(ints(relu), torch.ops.quantized.linear_relu(xq, cpu, 0.1, 64).int_repr())
    dynamic = torch.ops.quantized.linear_dynamic(x.to("tpu"), tpu)
    # (float32 results of the same integers: the CPU's epilogue rounds in another order.)
    torch.testing.assert_close(dynamic.cpu(), torch.ops.quantized.linear_dynamic(x, cpu),
                               rtol=1e-5, atol=1e-5)
    # Charged as an int8 matmul: the MXU time of _int_mm of the same shape (v5e multiplies int8
    # at twice its bf16 rate).
    a = torch.zeros(32, 64, dtype=torch.int8, device="tpu")
    bt = torch.zeros(64, 48, dtype=torch.int8, device="tpu")
    torch.tpu.synchronize()
    torchtpu.metrics.reset()
    torch._int_mm(a, bt).cpu()
    assert linear_mxu == pytest.approx(torchtpu.metrics.estimate(chip="v5e")["mxu_time_s"])
    # A weight packed on the CPU is packed again on tpu once, and counted.
    torchtpu.metrics.reset()
    for _ in range(2):
        got = torch.ops.quantized.linear(xq.to("tpu"), cpu, 0.1, 64)
        assert torch.equal(ints(got), torch.ops.quantized.linear(xq, cpu, 0.1, 64).int_repr())
    assert torchtpu.metrics.counters()["quantized.cpu_packed_weights_moved"] == 1


def test_a_dynamically_quantized_model_runs_on_tpu_like_the_cpu():
    # torch.ao's quantize_dynamic keeps each Linear's packed int8 weight as a CPU object that
    # Module.to() does not move; on tpu it is packed again once and the int8 linears run there.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    qmodel = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    x = torch.randn(16, 32)
    want = qmodel(x)
    got = qmodel.to("tpu")(x.to("tpu"))
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)  # (as linear_dynamic above)
    assert not torchtpu.metrics.fallbacks()


def test_sparse_coo_and_csr_tensors_live_on_tpu_and_their_ops_run_through_the_fallback():
    g = torch.Generator().manual_seed(4)
    i = torch.tensor([[0, 1, 1, 3], [2, 0, 2, 1]])
    v = torch.randn(4, generator=g)
    sc = torch.sparse_coo_tensor(i, v, (4, 3))
    st = torch.sparse_coo_tensor(i, v, (4, 3), device="tpu")
    assert st.device.type == "tpu" and st.layout == torch.sparse_coo
    assert st._values().device.type == "tpu" and st._indices().device.type == "tpu"
    d = torch.randn(3, 5, generator=g)
    torchtpu.metrics.reset()
    assert torch.equal(st.to_dense().cpu(), sc.to_dense())
    torch.testing.assert_close(torch.sparse.mm(st, d.to("tpu")).cpu(), torch.sparse.mm(sc, d))
    assert torch.equal((st + st * 2).coalesce().to_dense().cpu(),
                       (sc + sc * 2).coalesce().to_dense())
    assert torch.equal(st.cpu().to_dense(), sc.to_dense())
    inplace, want = st.clone(), sc.clone()
    inplace.add_(st)  # an in-place op through the fallback writes its tpu argument
    want.add_(sc)
    assert inplace.device.type == "tpu" and torch.equal(inplace.to_dense().cpu(), want.to_dense())
    dense = torch.randn(4, 3, generator=g)
    csr = dense.to("tpu").to_sparse_csr()
    assert csr.layout == torch.sparse_csr and csr.crow_indices().device.type == "tpu"
    torch.testing.assert_close((csr @ d.to("tpu")).cpu(), dense @ d)
    assert torchtpu.metrics.fallbacks()  # counted, never silent
    torchtpu.set_fallback_mode("error")
    with pytest.raises(NotImplementedError, match="no native TPU kernel"):
        torch.sparse.mm(st, d.to("tpu"))


def test_a_sparse_embedding_trains_like_the_cpu():
    def train(device):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(10, 4, sparse=True).to(device)
        opt = torch.optim.SGD(emb.parameters(), lr=0.1)
        for _ in range(3):
            idx = torch.tensor([[1, 2, 2], [5, 1, 9]], device=device)
            loss = emb(idx).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert emb.weight.grad.layout == torch.sparse_coo
        return emb.weight.detach().cpu()

    torch.testing.assert_close(train("tpu"), train("cpu"), rtol=0, atol=0)


def test_a_dry_run_refuses_quantized_tensors_with_a_clear_error():
    # (Its meta results have no quantizer: quantize_per_tensor gave a float32 tensor before.)
    with torchtpu.dry_run():
        x = torch.randn(8, 16, device="tpu")
        with pytest.raises(RuntimeError, match="does not model quantized or sparse tensors"):
            torch.quantize_per_tensor(x, 0.05, 10, torch.quint8)
