"""CUDA parity: the device calls PyTorch and its libraries make behave on "tpu" as they do on
"cuda" (index-less devices, pinned host memory, record_stream, out= tensors, conjugate and
negative views, linear algebra on strided inputs, a Trainer and a pipeline), each against the
CPU. Attention: test_attention.py."""
import pytest
import torch

import torchtpu


def test_tpu_without_an_index_is_the_current_device():
    # torch.Stream / torch.triu_indices raised "Invalid device index tpu:-1".
    with torch.tpu.device(1):
        s = torch.Stream(device="tpu")
        assert s.device_index == 1
        e = torch.Event(device="tpu")
        e.record(s)
        e.synchronize()
        assert e.query()
        t = torch.triu_indices(3, 3, device="tpu")
        assert t.device == torch.device("tpu", 1)
        assert torch.equal(t.cpu(), torch.triu_indices(3, 3))
        assert torch.equal(torch.tril_indices(4, 3, 1, device="tpu").cpu(), torch.tril_indices(4, 3, 1))
        assert torch.accelerator.current_stream(torch.device("tpu")).device_index == 1


def test_the_host_allocator_caches_pinned_memory_and_counts_it():
    # torch.accelerator.empty_host_cache() crashed the process when a tpu tensor existed.
    x = torch.ones(2, device="tpu")
    torch.accelerator.empty_host_cache()
    torch.tpu.reset_accumulated_host_memory_stats()
    before = torch.tpu.host_memory_stats()
    p = torch.arange(4096.0).pin_memory()
    assert p.is_pinned() and not torch.arange(3.0).is_pinned()
    y = p.to("tpu", non_blocking=True)
    assert torch.equal(y.cpu(), p)
    after = torch.tpu.host_memory_stats()
    assert after["active_requests.current"] == before["active_requests.current"] + 1
    assert after["num_host_alloc"] == before["num_host_alloc"] + 1
    del p
    q = torch.zeros(4096).pin_memory()  # the same size class: the cached block, no new host allocation
    assert torch.tpu.host_memory_stats()["num_host_alloc"] == after["num_host_alloc"]
    assert q.is_pinned() and q.sum().item() == 0
    del q
    torch.accelerator.empty_host_cache()
    emptied = torch.tpu.host_memory_stats()
    assert emptied["allocated_bytes.current"] == before["allocated_bytes.current"]
    assert emptied["num_host_free"] >= before["num_host_free"] + 1
    del x


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_record_stream_is_native_with_cudas_meaning(mode):
    # record_stream went to the CPU fallback and failed ("Could not run 'aten::record_stream'").
    torchtpu.set_eager_mode(mode)  # (conftest restores the tier's mode)
    side = torch.tpu.Stream()
    x = torch.randn(256, 256, device="tpu")
    with torch.tpu.stream(side):
        side.wait_stream(torch.tpu.current_stream())
        y = x @ x  # made on the side stream, used on the main one
    torch.tpu.current_stream().wait_stream(side)
    y.record_stream(torch.tpu.current_stream())
    z = (y * 2).sum()
    del y  # its block is not reused while queued work still uses it
    w = torch.full((256, 256), 7.0, device="tpu")
    expect = ((x.cpu() @ x.cpu()) * 2).sum()
    # float32's default tolerance (it was rtol 1e-2, atol 0.1, with no reason given: ~34 on a sum
    # of ~3300, which passed a block whose reuse overwrote one element of y with w's 7.0): the
    # product at "highest" is PyTorch's CPU GEMM on the host aliases and the sum its CPU kernel,
    # measured max |tpu - cpu| 0 over 20 seeds in every mode.
    torch.testing.assert_close(z.cpu(), expect)
    assert w.sum().item() == 7.0 * 256 * 256
    assert "record_stream" not in torchtpu.metrics.fallbacks()
    with pytest.raises(RuntimeError, match="the stream is on tpu:1 but the tensor on tpu:0"):
        x.record_stream(torch.tpu.Stream(device=1))


def _same(got, expected, **tol):
    torch.testing.assert_close(got.cpu(), expected, **tol)


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
            _same(got, expected, rtol=1e-4, atol=1e-4)
    ar = torch.randn(4, 4, generator=g).triu() + 4 * torch.eye(4)
    neg = torch.linalg.solve_triangular(ar.to("tpu")._neg_view(), b.real.to("tpu"), upper=True)
    _same(neg, torch.linalg.solve_triangular(-ar, b.real, upper=True), rtol=1e-4, atol=1e-4)
    # determinants of strided batches
    x = torch.randn(5, 5, 5, generator=g)
    for t in (x.transpose(0, 2), x.transpose(1, 2)[::2], x.permute(2, 0, 1)):
        _same(torch.linalg.det(t.to("tpu")), torch.linalg.det(t), rtol=1e-4, atol=1e-4)
        sign, logabs = torch.linalg.slogdet(t.to("tpu"))
        esign, elogabs = torch.linalg.slogdet(t)
        _same(sign, esign)
        _same(logabs, elogabs, rtol=1e-4, atol=1e-4)


def test_complex_scalars_of_addmm_and_baddbmm():
    # "value cannot be converted to type double without overflow"
    g = torch.Generator().manual_seed(1)
    m, a, b = (torch.randn(s, dtype=torch.complex64, generator=g) for s in ((3, 2), (3, 4), (4, 2)))
    for alpha, beta in ((1 + 2j, 1j), (2, 0.5j), (1j, 0)):
        expected = torch.addmm(m, a, b, alpha=alpha, beta=beta)
        _same(torch.addmm(m.to("tpu"), a.to("tpu"), b.to("tpu"), alpha=alpha, beta=beta), expected,
              rtol=1e-4, atol=1e-4)
        bm, ba, bb = m[None].repeat(2, 1, 1), a[None].repeat(2, 1, 1), b[None].repeat(2, 1, 1)
        _same(torch.baddbmm(bm.to("tpu"), ba.to("tpu"), bb.to("tpu"), alpha=alpha, beta=beta),
              torch.baddbmm(bm, ba, bb, alpha=alpha, beta=beta), rtol=1e-4, atol=1e-4)


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
def test_the_ops_the_upstream_suites_found_wrong_match_the_cpu(mode):
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(2)
    # index_copy under deterministic algorithms
    torch.use_deterministic_algorithms(True)
    try:
        x, src = torch.zeros(5, 3), torch.arange(6.0).reshape(2, 3)
        idx = torch.tensor([4, 1])
        _same(x.to("tpu").index_copy(0, idx.to("tpu"), src.to("tpu")), x.index_copy(0, idx, src))
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
    _same(tpu[0], cpu[0], rtol=1e-5, atol=1e-5)
    # conj_physical of a conjugate view, complex32 through the fallback, group norm of a strided input
    z = torch.randn(3, dtype=torch.complex64, generator=g)
    _same(torch.conj_physical(z.to("tpu").conj()), torch.conj_physical(z.conj()))
    h = torch.ones(3, dtype=torch.complex32)
    _same(h.to("tpu") + h.to("tpu"), (h.to(torch.complex64) * 2).to(torch.complex32))
    x = torch.randn(5, 6, 4, generator=g).transpose(0, 2)
    _same(torch.nn.functional.group_norm(x.to("tpu"), 2), torch.nn.functional.group_norm(x, 2),
          rtol=1e-4, atol=1e-4)
    # histc of an all-inf input: the CPU's error
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histc(torch.full((4,), float("inf"), device="tpu"), bins=4)


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_mode_with_out_tensors_works_like_the_cpu(mode):
    # torch.mode(..., out=...) raised "mode only supports CPU, CUDA and XPU device type".
    torchtpu.set_eager_mode(mode)
    x = torch.tensor([[1.0, 2, 2, 5], [3, 3, 1, 1], [4, 0, 4, 0]])
    want = torch.mode(x, 1)
    values, indices = torch.empty(3, device="tpu"), torch.empty(3, dtype=torch.long, device="tpu")
    got = torch.mode(x.to("tpu"), 1, out=(values, indices))
    assert got.values is values and got.indices is indices
    _same(values, want.values)
    _same(indices, want.indices)
    # a non-empty out= of another shape is resized, with the CPU's deprecation warning
    values, indices = torch.empty(7, device="tpu"), torch.empty(0, dtype=torch.long, device="tpu")
    with pytest.warns(UserWarning, match="was resized"):
        torch.mode(x.to("tpu"), 0, keepdim=True, out=(values, indices))
    want = torch.mode(x, 0, keepdim=True)
    assert values.shape == want.values.shape == (1, 4)
    _same(values, want.values)
    _same(indices, want.indices)
    # outputs on the CPU, or of the wrong dtype, are refused as the CPU refuses them
    with pytest.raises(RuntimeError, match="expected device 'tpu:0' but got 'cpu' for values"):
        torch.mode(x.to("tpu"), 1, out=(torch.empty(3), torch.empty(3, dtype=torch.long)))
    with pytest.raises(RuntimeError, match="expected scalar type 'Long' but got 'Int'"):
        torch.mode(x.to("tpu"), 1, out=(torch.empty(3, device="tpu"),
                                         torch.empty(3, dtype=torch.int, device="tpu")))


@pytest.mark.one_tier("a tool reading log files: no device work")
def test_sweeps_show_progress_with_an_eta_and_a_summary(tmp_path):
    # The zoo sweep wrote only logs: tools/sweep_progress.py (run by scripts/zoo_sweep.sh) reads
    # the shards' "[k/N] type: mode status" lines while they run and prints done/total, the ETA
    # and, at the end, a summary of the statuses.
    import os
    import subprocess
    import sys

    a, b = tmp_path / "shard0.log", tmp_path / "shard1.log"
    a.write_text("[1/3] bert: strict pass, fused pass \n[2/3] gpt2: strict pass, fused backend bug x\n")
    b.write_text("[1/2] t5: strict pass, fused pass \n")
    shard = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2.5)"])
    tool = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "sweep_progress.py")
    out = subprocess.run([sys.executable, tool, "--pids", str(shard.pid), "--every", "1",
                          "--label", "zoo", str(a), str(b)], capture_output=True, text=True,
                         timeout=60).stdout
    shard.wait()
    assert "zoo: 3/5 done (60%)" in out and "ETA" in out, out
    assert ("== zoo finished: 3/5 in" in out and "strict pass: 3" in out
            and "fused pass: 2" in out and "fused backend bug: 1" in out), out


TRAINER = """
import json, os, sys, torch, torchtpu
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
torchtpu.set_eager_mode(sys.argv[2])
cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=64, hidden_dropout_prob=float(sys.argv[4]),
                 attention_probs_dropout_prob=float(sys.argv[4]))
torch.manual_seed(0)
model = BertForSequenceClassification(cfg)
g = torch.Generator().manual_seed(1)
ids = torch.randint(0, 100, (16, 8), generator=g)


class Data(torch.utils.data.Dataset):
    def __len__(self): return 16
    def __getitem__(self, i): return {"input_ids": ids[i], "labels": torch.tensor(i % 2)}
args = TrainingArguments(output_dir=sys.argv[3], per_device_train_batch_size=4, max_steps=3,
                         report_to=[], save_strategy="no", use_cpu=sys.argv[1] == "cpu")
trainer = Trainer(model=model, args=args, train_dataset=Data())
loss = trainer.train().training_loss
print(json.dumps({"args": str(args.device), "accelerator": str(trainer.accelerator.device),
                  "model": str(next(trainer.model.parameters()).device), "loss": loss,
                  "weight": trainer.model.classifier.weight.detach().cpu().sum().item()}))
"""


@pytest.mark.one_tier("Accelerate's choice of device; training in every mode is the zoo smoke's")
def test_a_trainer_trains_on_tpu_with_no_settings(tmp_path):
    # transformers put the model on tpu:0 but Accelerate left the batches on the CPU ("Expected
    # all tensors to be on the same device ... tpu:0 and cpu") unless ACCELERATE_TORCH_DEVICE
    # was set. use_cpu=True must still mean the CPU.
    import json
    import subprocess
    import sys

    def run(where, dropout="0.0"):
        proc = subprocess.run([sys.executable, "-c", TRAINER, where, torchtpu.get_eager_mode(),
                               str(tmp_path / where), dropout], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    # Without dropout: with it, the CPU run draws dropout masks and the sampler's seed from one
    # generator and the tpu run from two (the device's and the CPU's), as on CUDA.
    tpu, cpu = run("tpu"), run("cpu")
    assert tpu["args"] == tpu["accelerator"] == tpu["model"] == "tpu:0", tpu
    assert cpu["args"] == cpu["accelerator"] == cpu["model"] == "cpu", cpu
    # the same three steps (float32 matmuls at the default precision: bf16 passes on the MXU)
    assert tpu["loss"] == pytest.approx(cpu["loss"], rel=1e-3)
    assert tpu["weight"] == pytest.approx(cpu["weight"], rel=1e-3, abs=1e-3)


def test_a_pipeline_keeps_its_model_on_tpu(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer, pipeline

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "tpu"]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    tok = BertTokenizer(str(tmp_path / "vocab.txt"))
    cfg = BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=1,
                     num_attention_heads=2, intermediate_size=64)
    torch.manual_seed(0)
    model = BertForSequenceClassification(cfg).eval()
    want = pipeline("text-classification", model=model, tokenizer=tok, device="cpu")("hello tpu")
    pipe = pipeline("text-classification", model=model, tokenizer=tok, device="tpu")
    assert next(pipe.model.parameters()).device == torch.device("tpu", 0)
    got = pipe("hello tpu")
    assert got[0]["label"] == want[0]["label"]
    assert got[0]["score"] == pytest.approx(want[0]["score"], rel=1e-3)
    assert next(pipe.model.parameters()).device == torch.device("tpu", 0)  # still there


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
            _same(got, want, rtol=1e-4, atol=1e-4)


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
        _same(got.resolve_conj().resolve_neg(), want.resolve_conj().resolve_neg(), atol=0, rtol=0)
    # a chain with it (recorded in fused eager), and a real tensor (nothing to do)
    got = (x.to("tpu") * 2).conj_physical_().add_(1)
    _same(got, (x * 2).conj_physical_().add_(1), atol=0, rtol=0)
    r = torch.randn(3, generator=g)
    _same(r.to("tpu").conj_physical_(), r, atol=0, rtol=0)
