"""Tests of the test harnesses themselves: each check that once could not fail is fed the failure
it exists to catch (issue 48, item 6) and must report it. The model zoos' optimizer check, the
compiled tiers' rule for excusing a failure PyTorch's own compile shares, the zoo's timeouts, the
allowance for a rank's abort at exit under torchrun, the stress suite's interrupt rounds, and the
docs' figures against the benchmarks' committed results."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torchtpu

from conftest import aborted_at_exit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))  # compare_errors.py

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "models"))
import zoo_compare  # noqa: E402  the model zoos' run on tpu against the CPU
import zoo_sweep  # noqa: E402  the model zoos' sweep loop

pytestmark = pytest.mark.one_tier("the harnesses' rules do not depend on the eager mode")


# -- the zoos' optimizer stage ------------------------------------------------------------------

class _Tiny(torch.nn.Module):
    """A model the zoos' harness can run: keyword input, a tensor out; an unused parameter (no
    gradient) and a bias before a softmax (a true gradient of zero: rounding noise)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 8)
        self.unused = torch.nn.Parameter(torch.randn(4))

    def forward(self, x):
        return torch.softmax(self.b(torch.tanh(self.a(x))), dim=-1) * 3 + self.b(self.a(x)).mean()


def _reference():
    """The CPU reference of _Tiny as zoo.py's cpu_reference makes one."""
    import copy

    torch.manual_seed(0)
    model = _Tiny()
    pristine = copy.deepcopy(model)
    inputs = {"x": torch.randn(4, 16)}
    out = zoo_compare.first_tensor(model(**inputs))
    out.float().pow(2).mean().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    stepped = zoo_compare.adamw_step(model)
    return {"model": pristine, "inputs": inputs, "out": out.detach(), "grads": grads, "ids": None,
            "generated": None, "stepped": stepped}


def test_the_step_check_passes_adamws_own_step_and_fails_a_step_that_does_nothing():
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(64, 64))
    p.grad = torch.randn(64, 64) * 1e-2
    p.grad[0, :8] = 0           # no gradient: weight decay alone
    p.grad[1, :8] = 1e-9        # below the floor: only Adam's bound applies
    old = p.detach().clone()
    torch.optim.AdamW([p], lr=zoo_compare.LR, weight_decay=zoo_compare.WEIGHT_DECAY,
                      eps=zoo_compare.EPS).step()
    cpu = p.detach().clone()
    g = p.grad.clone()
    assert zoo_compare.check_adamw_update("w", old, cpu, cpu, g, g) > 60 * 64
    # The old check (values at atol 2e-3, rtol 0) passed the first three; every one fails now.
    for what, tpu, passed_before in (
            ("no step", old.clone(), True), ("half a step", (old + cpu) / 2, True),
            ("the weight decay left out", cpu + zoo_compare.LR * zoo_compare.WEIGHT_DECAY * old, True),
            ("every update's sign flipped", 2 * old - cpu, False)):
        assert torch.allclose(tpu, cpu, atol=2e-3, rtol=0) == passed_before, what
        with pytest.raises(AssertionError, match="pinned by their gradient"):
            zoo_compare.check_adamw_update("w", old, tpu, cpu, g, g)
    # An update larger than Adam's first step can make, where the gradient pins nothing.
    wild = cpu.clone()
    wild[1, 0] += 5 * zoo_compare.LR
    with pytest.raises(AssertionError, match="bound"):
        zoo_compare.check_adamw_update("w", old, wild, cpu, g, g)
    # A near-zero gradient of opposite signs on the two devices: either update is fine.
    flipped = cpu.clone()
    flipped[2, 0] = 2 * old[2, 0] - cpu[2, 0]
    g_cpu, g_tpu = g.clone(), g.clone()
    g_cpu[2, 0], g_tpu[2, 0] = 3e-5, -3e-5
    zoo_compare.check_adamw_update("w", old, flipped, cpu, g_tpu, g_cpu)
    # A parameter without a gradient must stay where it is.
    with pytest.raises(AssertionError, match="no gradient, yet it moved"):
        zoo_compare.check_adamw_update("w", old, cpu, old, None, None)


@pytest.mark.parametrize("mode", ["strict", "fused", "compiled"])
def test_a_zoo_run_whose_optimizer_does_nothing_is_a_backend_bug(mode, monkeypatch):
    ref = _reference()
    assert zoo_compare.run_on_tpu(ref, mode)["status"] == "pass"
    # The step on "tpu" made a no-op: the stage fails (the old check passed it).
    real = torch.optim.AdamW.step
    monkeypatch.setattr(torch.optim.AdamW, "step", lambda self, closure=None: None)
    row = zoo_compare.run_on_tpu(ref, mode)
    monkeypatch.setattr(torch.optim.AdamW, "step", real)
    assert row["status"] == "backend bug" and row["stage"] == "optimizer", row
    assert "pinned by their gradient" in row["reason"], row


def test_a_compiled_step_may_see_aotautograds_zero_gradient_only_when_compiled():
    torch.manual_seed(0)
    old = torch.randn(8, 8)
    decayed = (old * (1 - zoo_compare.LR * zoo_compare.WEIGHT_DECAY)).float()
    zero = torch.zeros(8, 8)
    # eager: a gradient where the CPU had none is wrong; compiled: a zero one is AOTAutograd's
    with pytest.raises(AssertionError, match="one device only"):
        zoo_compare.check_adamw_update("pooler", old, decayed, old, zero, None)
    assert zoo_compare.check_adamw_update("pooler", old, decayed, old, zero, None, compiled=True) == 64
    with pytest.raises(AssertionError, match="pinned by their gradient"):
        zoo_compare.check_adamw_update("pooler", old, old, old, zero, None, compiled=True)
    with pytest.raises(AssertionError, match="one device only"):
        zoo_compare.check_adamw_update("pooler", old, decayed, old, zero + 1e-3, None, compiled=True)


# -- the zoos' timeouts and deaths ----------------------------------------------------------------

MODES = ["strict", "fused"]


def _row(mode, status="pass"):
    return json.dumps({"model_type": "m", "mode": mode, "status": status, "cpu_seconds": 1.0})


@pytest.mark.parametrize("out,timeout,returncode,expected", [
    # killed while the CPU built or ran the model: the harness's limit
    ("", 300, None, ["harness", "harness"]),
    # killed while "tpu" ran, before or after one mode ended: a failure of every mode left
    (zoo_sweep.CPU_DONE + "\n", 300, None, ["backend bug", "backend bug"]),
    (zoo_sweep.CPU_DONE + "\n" + _row("strict") + "\n", 300, None, ["pass", "backend bug"]),
    # died while "tpu" ran
    (zoo_sweep.CPU_DONE + "\n" + _row("strict") + "\n", None, -11, ["pass", "backend bug"]),
    ("", None, -11, ["backend bug", "backend bug"]),
], ids=["timeout-cpu", "timeout-tpu", "timeout-tpu-second-mode", "died-tpu", "died-cpu"])
def test_a_timeout_on_the_tpu_side_is_a_failure(out, timeout, returncode, expected):
    rows = zoo_sweep.item_outcome("m", {}, MODES, out.encode() if timeout else out, b"" if timeout else "",
                            returncode, timeout)
    assert [r["status"] for r in rows] == expected, rows
    assert [r["mode"] for r in rows] == MODES
    if timeout and zoo_sweep.CPU_DONE in out:
        assert "timeout after 300 s on tpu" in rows[-1]["reason"], rows


def test_the_sweep_loop_counts_a_hung_tpu_side_as_a_backend_bug(tmp_path):
    """A child that finishes its CPU reference and then hangs on "tpu" (the sweep's loop, run
    for real with a 3 s timeout)."""
    import argparse

    child = tmp_path / "child.py"
    child.write_text(f"import time\nprint({zoo_sweep.CPU_DONE!r}, flush=True)\nprint({_row('strict')!r}, "
                     f"flush=True)\ntime.sleep(60)\n")
    out = tmp_path / "out.jsonl"
    zoo_sweep.run_sweep([("m", [sys.executable, str(child)], {})],
                  argparse.Namespace(out=str(out), shard="0/1", modes="strict,fused", timeout=3))
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    assert [(r["mode"], r["status"]) for r in rows] == [("strict", "pass"), ("fused", "backend bug")]


# -- a rank's abort at exit under torchrun ------------------------------------------------------

_RANK = '''
import os, sys, time
rank = int(os.environ["RANK"])
print(f"[rank {rank}] done", flush=True)
if rank in ABORTS:
    sys.stderr.write("terminate called without an active exception\\n"); sys.stderr.flush()
    os.abort()
if rank in FAILS:
    raise SystemExit(f"rank {rank}: the loss did not decrease")
if rank in SLOW:
    time.sleep(10)  # (still running when the other rank aborts: torchrun ends it, -15)
'''


@pytest.mark.parametrize("aborts,fails,slow,accepted", [
    ((0,), (), (), True), ((0, 1), (), (), True), ((0,), (), (1,), True),
    # a rank that failed for real beside one that aborted at exit: accepted before, not now
    ((0,), (1,), (), False), ((), (1,), (), False)],
    ids=["one-aborts", "both-abort", "abort-and-other-ended", "abort-and-fail", "fail"])
def test_a_real_failure_under_torchrun_is_not_an_abort_at_exit(aborts, fails, slow, accepted, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "ranks.py"
    script.write_text(f"ABORTS, FAILS, SLOW = {aborts!r}, {fails!r}, {slow!r}\n" + _RANK)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-port", str(port), str(script)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert aborted_at_exit(proc.returncode, proc.stderr) == accepted, proc.stderr[-2000:]
    if aborts and fails:  # the rule of before: exit code 1 and the message anywhere
        assert proc.returncode in (-6, 134, 1) and "terminate called without an active exception" in proc.stderr


# -- the stress suite's interrupt rounds ----------------------------------------------------------

def _stress():
    sys.path.insert(0, str(ROOT / "test" / "stress"))
    import stress

    return stress


def test_interrupt_instants_differ_per_mode_and_round_and_stay_inside_the_loop():
    stress = _stress()
    at = {(m, r): stress.interrupt_instant(0, m, r, 5.0) for m in stress.MODES for r in (2, 5, 8)}
    for r in (2, 5, 8):  # (before: one instant in every mode)
        assert len({at[(m, r)] for m in stress.MODES}) == len(stress.MODES), at
    assert all(0.2 <= t <= 4.5 for t in at.values()), at
    assert at == {(m, r): stress.interrupt_instant(0, m, r, 5.0) for m, r in at}  # seeded
    assert stress.interrupt_instant(1, "strict", 2, 5.0) != at[("strict", 2)]


def test_an_interrupt_sent_after_the_worker_ended_is_not_tested():
    """The worker's loop lasts 0.5 s; SIGINT is due 6 s after it started. Before, the round
    'passed' with an exit latency of ~0 s."""
    stress = _stress()
    r = stress.run_round("strict", 0.5, 0, interrupt=True, switching=False, interrupt_at=6.0)
    assert r.get("not_tested") and r["interrupt_s"] is None, r
    assert not r["errors"] and not r["hang"], r


# -- compiled tiers: a CPU compile's error excuses only the same failure ---------------------------

def test_errors_compare_by_type_and_normalized_message():
    from compare_errors import same_failure

    cpu = RuntimeError("view size is not compatible with input tensor's size and stride: "
                       "FakeTensor(..., device='cpu', size=(2, 8)) at 0x7f00aa")
    tpu = RuntimeError("view size is not compatible with input tensor's size and stride: "
                       "FakeTensor(..., device='tpu:0', size=(2, 8)) at 0x7f11bb\n\nfrom user code:\n  File x.py")
    assert same_failure(tpu, cpu) is None
    # Dynamo's wrapper of a backend's error names the backend (GlmImageTransformer2DModel's,
    # which the first version of the rule took for a device: backend='<device>')
    cpu_b, tpu_b = (RuntimeError(f"backend='{b}' raised:\nDynamicOutputShapeException: "
                                 f"aten.nonzero.default\n\nSet TORCHDYNAMO_VERBOSE=1 for the internal "
                                 f"stack trace") for b in ("aot_eager", "tpu"))
    assert same_failure(tpu_b, cpu_b) is None
    assert "message" in same_failure(RuntimeError("backend='tpu' raised:\nTypeError: x"), cpu_b)
    assert "exception type" in same_failure(TypeError(str(tpu)), cpu)
    assert "message" in same_failure(RuntimeError("index 9 is out of bounds"), cpu)
    assert "message" in same_failure(RuntimeError("view size is not compatible: size=(2, 9)"), cpu)


@torch.library.custom_op("torchtpu_harness::traced_fails", mutates_args=())
def _traced_fails(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@_traced_fails.register_fake
def _(x):
    # (fake tensors carry the device: the message names it, as PyTorch's errors do)
    raise RuntimeError(f"view size is not compatible with input tensor's size on {x.device}")


_traced_fails.register_autograd(lambda ctx, grad: grad)


class _FailsCompiled(_Tiny):
    """Runs eagerly; fails when traced by Dynamo on any device (its fake kernel raises), like a
    model PyTorch's compile cannot take."""

    def forward(self, x):
        return super().forward(_traced_fails(x))


def test_a_compiled_tpu_failure_is_excused_only_by_the_same_cpu_failure(monkeypatch):
    ref = _reference()
    ref["model"] = _FailsCompiled()
    ref["model"].load_state_dict(_reference()["model"].state_dict())
    row = zoo_compare.run_on_tpu(ref, "compiled")
    assert row["status"] == "harness" and "does the same" in row["reason"], row
    # The CPU's compile fails otherwise (before, any CPU error excused any tpu failure).
    monkeypatch.setattr(zoo_compare, "compiled_on_cpu_fails",
                        lambda ref, tpu_out=None: TypeError("unsupported operand"))
    row = zoo_compare.run_on_tpu(ref, "compiled")
    assert row["status"] == "backend bug" and "exception type" in row["cpu_compile_fails_otherwise"], row
    from torch._dynamo.exc import TorchRuntimeError  # (the type of the tpu error here)

    monkeypatch.setattr(zoo_compare, "compiled_on_cpu_fails",
                        lambda ref, tpu_out=None: TorchRuntimeError("index 9 is out of bounds"))
    row = zoo_compare.run_on_tpu(ref, "compiled")
    assert row["status"] == "backend bug" and "message" in row["cpu_compile_fails_otherwise"], row


# -- docs figures against the benchmarks' committed results ---------------------------------------
# (benchmarks/README.md is generated from the results: test_docs_figures.py checks it; README.md
# and docs/features.md quote no benchmark figure.)

def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def benchmark_quotes(insight: str) -> list[str]:
    """The figures of benchmarks/results/dry_run.json as docs/insight.md quotes them, and which
    of them the text does not hold. (The calibration's table is generated from its results:
    test_docs_figures.py.)"""
    dry = json.loads((ROOT / "benchmarks" / "results" / "dry_run.json").read_text())
    run, chips = dry["run"], {c["chip"]: c for c in dry["chips"]}
    wall, ops, growth = run["host_wall_s"], run["dry_run_ops"], run["host_rss_growth_bytes"] / 2**30
    peak = run["hbm_peak_bytes"] / 2**30
    wanted = [
        f"takes **{wall:.1f} s** of host time ({ops} ops) and **{growth:.2f} GiB** of host memory",
    ] + [f"| {c} | {chips[c]['time_s'] * 1e3:.1f} ms | {chips[c]['mxu_utilisation'] * 100:.1f}% | "
         f"{chips[c]['bottleneck'].upper()} | {peak:.2f} GiB |" for c in ("v5e", "v6e", "v7")]
    text = _flat(insight)
    return [f"docs/insight.md: {q}" for q in wanted if q not in text]


def test_the_docs_quote_the_committed_benchmark_results():
    """The dry run's figures in docs/insight.md are those of benchmarks/results/dry_run.json:
    rerunning the benchmark without updating the text (or the text without the run) fails
    here."""
    insight = (ROOT / "docs" / "insight.md").read_text()
    assert benchmark_quotes(insight) == []
    # and a figure that drifts is caught: one dry-run time changed
    assert any("| v5e |" in m for m in benchmark_quotes(re.sub(r"\| v5e \| [\d.]+ ms", "| v5e | 1.0 ms", insight)))
