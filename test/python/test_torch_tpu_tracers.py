"""TorchTPU's debugging tracers and model printer in the torch_tpu twin
(torchtpu/_torch_tpu/_internal/utils/: tracers.py, tracer_utils.py, model_format.py): what they
record on "tpu" is compared with what they record for the same model on the CPU, and replays on
the CPU must find the MXU's reduced-precision matmuls and nothing else."""
import re

import pytest
import torch
import torchtpu

import torch_tpu  # noqa: F401  (the twin: torchtpu/_torch_tpu/)
from torch_tpu._internal import sync
from torch_tpu._internal.utils import tracer_utils, utils


def _mlp(device="cpu", seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    return model.to(device), torch.randn(16, 32).to(device)


def _rows_by_label(rows):
    found = {}
    for row in rows:
        found.setdefault(row["label"], []).append(row)
    return found


# ---------------------------------------------------------------------------------------------
# OpTracer


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_op_tracer_records_the_ops_the_cpu_records(mode):
    cpu_model, x = _mlp()
    with utils.OpTracer(values=True) as on_cpu:
        expected = cpu_model(x)
    torchtpu.set_eager_mode(mode)
    model, xt = _mlp("tpu")
    with utils.OpTracer(values=True) as on_tpu:
        y = model(xt)
    # The same ATen ops in the same order, with the same shapes and dtypes, on the tpu.
    assert on_tpu.op_names() == on_cpu.op_names()
    assert on_tpu.op_names().count("aten.addmm.default") == 2
    assert "aten.relu.default" in on_tpu.op_names()
    assert on_tpu.num_atens() == on_cpu.num_atens() == len(on_cpu.log)
    assert dict(on_tpu.ops_log["aten"]) == dict(on_cpu.ops_log["aten"])
    for t, c in zip(on_tpu.log, on_cpu.log):
        assert [(m.shape, m.dtype) for m in t["outputs"]] == \
            [(m.shape, m.dtype) for m in c["outputs"]]
        assert t["device"] == "tpu:0" and c["device"] == "cpu"
    # The recorded values are host copies of what the ops returned.
    last = on_tpu.log[-1]["output"]
    assert last.device.type == "cpu"
    torch.testing.assert_close(last, y.cpu(), rtol=0, atol=0)
    torch.testing.assert_close(y.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_op_tracer_copies_inputs_before_an_in_place_op_runs():
    x = torch.arange(4.0, device="tpu")
    with utils.OpTracer(values=True) as tracer:
        x.add_(10)
    (event,) = tracer.log
    assert event["name"] == "aten.add_.Tensor"
    torch.testing.assert_close(event["args"][0], torch.arange(4.0))  # before the op
    torch.testing.assert_close(event["output"], torch.arange(4.0) + 10)
    assert event["args"][0].device.type == "cpu"


def test_op_tracer_by_default_keeps_metadata_and_cannot_be_replayed():
    # (TorchTPU's OpTracer counts ops only: a large model's values would not fit in host memory)
    model, x = _mlp("tpu")
    with utils.OpTracer() as tracer:
        model(x)
    first = tracer.log[0]
    assert isinstance(first["args"][0], utils.TensorMeta)
    assert str(first["inputs"][0]) == "float32[64, 32] tpu:0"
    with pytest.raises(ValueError, match="values=False"):
        tracer_utils.replay_log(tracer.log, "cpu")


def test_op_tracer_as_a_decorator_starts_a_new_record_per_call():
    tracer = utils.OpTracer(values=True)

    @tracer
    def f(x):
        return x.sin() + 1

    f(torch.ones(3, device="tpu"))
    assert tracer.op_names() == ["aten.sin.default", "aten.add.Tensor"]
    f(torch.ones(3, device="tpu"))
    assert tracer.op_names() == ["aten.sin.default", "aten.add.Tensor"]


def test_op_tracer_keeps_an_op_that_raised():
    a = torch.ones(2, 2, device="tpu")
    b = torch.ones(2, 2, device="tpu", dtype=torch.int64)
    with pytest.raises(RuntimeError):
        with utils.OpTracer() as tracer:
            torch.mm(a, b)
    assert tracer.log[-1]["name"] == "aten.mm.default"
    assert isinstance(tracer.log[-1]["error"], RuntimeError)
    assert "raised RuntimeError" in tracer_utils.pformat_op_tracer(tracer)


def test_a_namespace_emptied_by_the_caller_is_left_out_of_the_report():
    # TorchTPU's trace_ops subtracts a second tracer's counts from a first's, leaving empty
    # namespaces behind; the report then has only what is left.
    x = torch.ones(3, device="tpu")
    with utils.OpTracer() as first:
        (x + 1).sum()
    with utils.OpTracer() as second:
        (x + 1).sum()
    for namespace, ops in first.ops_log.items():
        for op in list(ops):
            ops[op] -= second.ops_log[namespace].get(op, 0)
            if ops[op] == 0:
                del ops[op]
    report = tracer_utils.pformat_op_tracer(first, calls=False)
    assert report == "no ops recorded"
    first.ops_log["aten"]["aten.add.Tensor"] = 1
    assert "namespace 'aten': 1 calls of 1 distinct ops" in tracer_utils.pformat_op_tracer(first)


def test_error_glossary_op_tracer_cell_shows_the_copy_to_the_host():
    # TorchTPU's error glossary notebook: a bf16 model, OpTracer around a forward and .cpu().
    model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 8)).to("tpu").to(torch.bfloat16)
    sync.synchronize(list(model.parameters()), wait=True)
    tracer = utils.OpTracer(values=True)
    x = torch.randn(4, 32, device="tpu", dtype=torch.bfloat16)
    with tracer:
        out = model(x)
        _ = out.cpu()
    report = tracer._pformat()
    copy_line = next(line for line in report.splitlines() if "aten._to_copy.default" in line)
    assert "tpu:0" in copy_line and "cpu" in copy_line
    assert re.search(r"aten\.addmm\.default\s+x2\s", report)


# ---------------------------------------------------------------------------------------------
# Replays


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_replaying_an_op_log_on_cpu_finds_the_medium_precision_matmuls(mode):
    torchtpu.set_eager_mode(mode)
    model, x = _mlp("tpu")
    deltas = {}
    for level in ("highest", "medium"):
        with torch.tpu.precision(level), utils.OpTracer(values=True) as tracer:
            model(x)
        replayed = tracer_utils.replay_log(tracer.log, "cpu")
        assert all(r["output"].device.type == "cpu" for r in replayed)
        rows = _rows_by_label(tracer_utils.compare_replay(tracer.log, replayed))
        deltas[level] = rows
        assert all(r["max_abs"] == 0 for r in rows["aten.relu.default"])
        assert all(r["max_abs"] == 0 for r in rows["aten.t.default"])
    medium = [r["max_abs"] for r in deltas["medium"]["aten.addmm.default"]]
    highest = [r["max_abs"] for r in deltas["highest"]["aten.addmm.default"]]
    # One bf16 pass loses about 3 decimal digits; six passes are float32 matmuls.
    assert all(m > 1e-4 for m in medium), medium
    assert all(h < 1e-5 for h in highest), highest
    report = tracer_utils.pformat_replay(tracer.log, None, replayed)
    assert "first to differ: #1 aten.addmm.default" in report
    relu_line = next(line for line in report.splitlines() if "aten.relu.default" in line)
    assert "max abs 0 " in relu_line


def test_replaying_an_activation_log_on_cpu_as_torch_tpus_resnet_test_does():
    model, x = _mlp("tpu")
    with torch.no_grad(), torch.tpu.precision("medium"), utils.ActivationTracer(model) as tracer:
        model(x)
    replayed = tracer_utils.replay_log(tracer.forward_log, device="cpu")
    assert next(model.parameters()).device.type == "tpu"  # the model was not moved
    rows = _rows_by_label(tracer_utils.compare_replay(tracer.forward_log, replayed))
    assert rows["Linear '0'"][0]["max_abs"] > 1e-4
    assert rows["Linear '2'"][0]["max_abs"] > 1e-4
    assert rows["ReLU '1'"][0]["max_abs"] == 0
    for event, cpu_event in zip(tracer.forward_log, replayed):
        assert cpu_event["output"].device.type == "cpu"
        assert event["output"].device.type == "tpu"
        if isinstance(event["module"], torch.nn.ReLU):
            utils.assert_close(event["output"], cpu_event["output"], atol=0, rtol=0)
    report = tracer_utils.pformat_replay(tracer.forward_log, tracer.forward_pre_log, replayed)
    assert report.startswith("Replay on cpu of 4 module calls recorded on tpu:0")
    assert "--- ReLU '1' (#3..#4), depth 1" in report
    assert "first to differ: #2 Linear '0'" in report


def test_a_value_changed_in_place_after_recording_is_reported_and_snapshots_avoid_it():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(inplace=True)).to("tpu")
    x = torch.randn(4, 8, device="tpu")
    with torch.no_grad(), utils.ActivationTracer(model) as live:
        model(x)
    report = tracer_utils.pformat_replay(
        live.forward_log, live.forward_pre_log, tracer_utils.replay_log(live.forward_log, "cpu"))
    linear_block = report.split("--- Linear '0'")[1].split("---")[0]
    assert "changed in place after it was recorded" in linear_block
    assert "no recorded output differs from its replay" in report
    assert "1 comparisons used values changed in place" in report
    with torch.no_grad(), utils.ActivationTracer(model, snapshot=True) as snap:
        model(x)
    linear, relu = snap.forward_log[0], snap.forward_log[1]
    assert linear["output"].device.type == "cpu" and linear["device"] == "tpu:0"
    assert (linear["output"] < 0).any()  # as the Linear returned it, before ReLU_ ran
    torch.testing.assert_close(relu["args"][0], linear["output"])  # as the ReLU received it
    rows = tracer_utils.compare_replay(snap.forward_log,
                                       tracer_utils.replay_log(snap.forward_log, "cpu"))
    assert all(r["max_abs"] == 0 and not r["note"] for r in rows), rows


def test_replay_labels_what_cannot_be_compared():
    with utils.OpTracer(values=True) as tracer:
        torch.rand(3, device="tpu")
        torch.empty(3, device="tpu")
        torch.zeros(2, device="tpu")
    replayed = tracer_utils.replay_log(tracer.log, "cpu")
    assert replayed[2]["output"].device.type == "cpu"  # zeros(device=tpu) replayed on the cpu
    notes = [r["note"] for r in tracer_utils.compare_replay(tracer.log, replayed)]
    assert notes[0].startswith("random op") and notes[1].startswith("uninitialized")
    assert notes[2] == ""


# ---------------------------------------------------------------------------------------------
# ActivationTracer


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)])
        self.head = torch.nn.Sequential(torch.nn.GELU(), torch.nn.Linear(8, 2))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_activation_tracer_records_every_submodule_once_per_forward():
    model = _Net().to("tpu")
    x = torch.randn(4, 8, device="tpu", requires_grad=True)
    called = [m for m in model.modules() if not isinstance(m, torch.nn.ModuleList)]
    with utils.ActivationTracer(model) as tracer:
        model(x).sum().backward()
        model(x)
    for log in (tracer.forward_pre_log, tracer.forward_log):
        for module in called:
            assert sum(e["module"] is module for e in log) == 2
        assert len(log) == 2 * len(called)
    assert len(tracer.backward_log) == len(called)  # one backward pass
    depth = {e["name"]: e["depth"] for e in tracer.forward_log}
    assert depth == {"": 0, "blocks.0": 1, "blocks.1": 1, "head": 1, "head.0": 2, "head.1": 2}
    assert [e["idx"] for e in tracer.forward_pre_log][:2] == [0, 1]
    out = tracer.forward_log[-1]
    assert out["module"] is model and out["output"].shape == (4, 2)
    # The hooks are gone after the block.
    model(x)
    assert len(tracer.forward_log) == 2 * len(called)
    assert not any(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                   for m in model.modules())


def test_activation_tracer_without_backward_hooks_allows_in_place_outputs():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(inplace=True)).to("tpu")
    x = torch.randn(2, 4, device="tpu", requires_grad=True)
    with pytest.raises(RuntimeError, match="BackwardHookFunction"):  # PyTorch's refusal
        with utils.ActivationTracer(model):
            model(x).sum().backward()
    with utils.ActivationTracer(model, backward=False) as tracer:
        model(x).sum().backward()
    assert len(tracer.forward_log) == 3 and tracer.backward_log == []
    assert x.grad is not None


def test_a_shared_module_is_hooked_once():
    shared = torch.nn.Linear(4, 4).to("tpu")
    model = torch.nn.Sequential(torch.nn.Sequential(shared, torch.nn.Tanh()),
                                torch.nn.Sequential(shared))
    with torch.no_grad(), utils.ActivationTracer(model) as tracer:
        model(torch.randn(2, 4, device="tpu"))
    assert sum(e["module"] is shared for e in tracer.forward_log) == 2
    assert len(tracer.forward_log) == 6
    assert [e["name"] for e in tracer.forward_log if e["module"] is shared] == ["0.0", "0.0"]


def test_pformat_activation_tracer_nests_each_call_between_its_inputs_and_outputs():
    model, x = _mlp("tpu")
    with torch.no_grad(), utils.ActivationTracer(model) as tracer:
        model(x)
    lines = tracer_utils.pformat_activation_tracer(tracer).splitlines()
    assert lines[0] == "ActivationTracer: 4 forward calls, 0 backward calls"
    start = lines.index("|  +- Linear '0' (#1)")
    assert lines[start + 1].startswith("|  |  in[0]  (16, 32) float32 tpu:0")
    assert lines[start + 2].startswith("|  |  out  (16, 64) float32 tpu:0")
    assert lines[start + 3].startswith("|  +- end Linear '0' (#2, ")
    assert lines[-1].startswith("+- end Sequential (#7, ")
    assert all(e["pre_event"]["post_event"] is e for e in tracer.forward_log)


# ---------------------------------------------------------------------------------------------
# Model and tensor printing


def test_format_model_counts_parameters_and_lists_the_forward_ops():
    model, x = _mlp("tpu")
    model[2].bias.requires_grad_(False)
    text = utils.format_model(model, x, params=True, pt=True, aten=True)
    params = sum(p.numel() for p in model.parameters())
    assert params == 32 * 64 + 64 + 64 * 8 + 8
    assert f"Parameters: {params} ({params - 8} trainable)" in text
    assert "Linear(in_features=32, out_features=64, bias=True)" in text
    assert re.search(r"aten\.addmm\.default\s+x2\s+on tpu:0", text)
    assert f"{utils.model_memory(model):.3f} GiB" in text
    assert utils.format_model(model, x) == ""  # TorchTPU's defaults: nothing asked, nothing shown


def test_format_model_traces_a_function_into_aten_ops():
    x = torch.randn(3, 4, device="tpu")
    text = utils.format_model(lambda a: (a @ a.T).relu(), x, pt=True, aten=True)
    assert "torch.ops.aten.mm.default" in text  # the FX graph's code
    assert re.search(r"aten\.relu\.default\s+x1\s+on tpu:0", text)


def test_format_model_shows_the_forward_pass_as_stablehlo():
    # The forward pass runs in TorchTPU's INTERNAL_DEFER_ALL mode (fused eager), and its pending
    # graph is written by computation_mlir; the mode is restored and nothing is left pending.
    from torch_tpu._internal import execution_mode as em
    model, x = _mlp("tpu")
    before = em.get_eager_mode()
    text = utils.format_model(model, x, params=True, shlo=True)
    assert text.startswith("Parameters: ") and "func.func @main" in text
    assert "stablehlo.dot_general" in text and "tensor<16x8xf32>" in text
    assert em.get_eager_mode() == before


@pytest.mark.one_tier("formats values: the eager mode does not change them")
def test_tensor_summaries():
    t = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device="tpu")
    summary = utils.get_tensor_summary(t)
    assert summary == "(2, 2) float32 tpu:0 grad:N  min 1  max 4  mean 2.5  var 1.25"
    meta = torch.empty(3, 5, device="meta", dtype=torch.bfloat16)
    assert utils.get_tensor_summary(meta, data=False) == "Tensor((3, 5) bfloat16 meta)"
    assert str(utils.InputMetadata([meta, 7])) == "[Tensor((3, 5) bfloat16 meta), 7]"
    with pytest.raises(TypeError):
        utils.get_tensor_summary([1, 2])
    text = utils.format_tensor(t, "weights", data=True)
    assert text.splitlines()[0] == "weights"
    assert "device:        tpu:0" in text and "var:           1.25" in text
    assert "tensor([[1., 2.]," in text


@pytest.mark.one_tier("counts elements: the eager mode does not change them")
def test_model_memory_counts_weights_gradients_and_buffers():
    model = torch.nn.Sequential(torch.nn.Linear(10, 5), torch.nn.BatchNorm1d(5))
    model[1].weight.requires_grad_(False)
    trainable = 55 + 5  # linear weight and bias, batch norm bias
    frozen = 5
    buffers = 5 + 5 + 1  # running mean and var, batches tracked
    expected = (2 * trainable + frozen + buffers) * 4 / 1024**3
    assert utils.model_memory(model) == pytest.approx(expected)
    assert utils.model_memory(model, torch.bfloat16) == pytest.approx(expected / 2)
