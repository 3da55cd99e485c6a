"""TorchTitan on "tpu" (docs/ecosystem.md, "TorchTitan"; ``bash scripts/test_torchtitan.sh``, in
the venv it makes).

TorchTitan 0.3.0's llama3 debug model (``--module llama3 --config llama3_debugmodel``: 6 layers,
dim 256, 16 heads, vocabulary 2,048, FlexAttention with document masking) trains 10 steps of 4
sequences of 128 tokens a rank on the tokenizer and ``c4_test`` stand-ins of titan_assets.py,
each run TorchTitan's own trainer launched by torchrun (run_titan.py), against the same training
on the CPU:

- 1 rank in TorchTitan's default precision (bfloat16 parameters and activations through
  FSDP2's mixed-precision policy, float32 gradient reduction), from ``--debug.seed 42``: the
  weights drawn on tpu are the CPU's (``-m smoke``);
- 1 rank in float32 (``--training.mixed-precision-param float32``) in strict, debug and fused
  eager, and with ``--compile.enable``;
- 2 ranks with FSDP (``data_parallel_shard_degree=2``; strict and fused eager), and 2 ranks
  with tensor parallelism (``tensor_parallel_degree=2``), each against the same on 2 CPU ranks
  over Gloo (and tensor parallelism's losses against 1 CPU rank), in float32;
- the variable-length attention configuration (``llama3_debugmodel_varlen_attn``) against
  FlexAttention's document masking on the CPU, in float32;
- examples/torchtitan_llama3.py on 2 chips.

The float32 runs start from one seed checkpoint (TorchTitan's ``--checkpoint.
create_seed_checkpoint``, written on the CPU) loaded through DCP, so the sharded runs start
from the single-device weights. Every tpu run reports no CPU fallback in torchtpu.metrics.
Skipped where TorchTitan is not importable.
"""
import json
import math
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("torchtitan")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import titan_assets  # noqa: E402

RUNNER = os.path.join(HERE, "run_titan.py")
STEPS = 10
# TorchTitan's arguments common to every run (the debug model; a short sequence and batch).
BASE = ["--module", "llama3", "--config", "llama3_debugmodel", "--training.seq-len", "128",
        "--training.local-batch-size", "4", "--training.steps", str(STEPS), "--debug.seed", "42",
        "--validator.no-enable"]
FLOAT32 = ["--training.mixed-precision-param", "float32"]
# TorchTitan 0.3.0's default SPMD backend ("spmd_types") fails at fully_shard under torch 2.13
# on the CPU (Gloo) as on tpu ("all parameters must be DTensors on the full SPMD mesh ... Got
# plain tensor for parameter 'weight'"); its DTensor path is what runs on both.
DTENSOR = ["--parallelism.spmd-backend", "partial_dtensor"]

# Tolerances, relative, on every step's loss and gradient norm (docs/ecosystem.md says why).
# float32: every run starts from the same weights and step 1's forward is the CPU's to the bit;
# a few gradient elements differ from the CPU's in their last bit (about 2e-7 relative), which
# AdamW carries into the weights: measured at most 1.0e-7 on the losses and 1.3e-7 on the
# gradient norms over 10 steps (1 rank in strict and fused eager and compiled; FSDP on 2 ranks),
# 1e-7 and 8e-8 for tensor parallelism against Gloo's tensor parallelism.
# bfloat16 (TorchTitan's default precision): each matmul's output is rounded to bfloat16 after a
# float32 sum taken in another order than the CPU's bfloat16 GEMM, one bfloat16 step (4e-3
# relative) on a few elements: measured 2.0e-5 on the losses, 1.6e-4 on the gradient norms.
# varlen: attention by another kernel than the CPU's FlexAttention (the fused attention per
# document against FlexAttention's unfused softmax): measured 4.1e-6 and 3.4e-5.
# A missed all-reduce or reduce-scatter, or a rank's shard taken for another's, moves the loss
# by more than 1e-2 from step 2 on; bfloat16 matmuls in a float32 run move it by about 1e-4.
FLOAT32_TOL = {"loss": 1e-6, "grad_norm": 1e-6}
BFLOAT16_TOL = {"loss": 2e-4, "grad_norm": 2e-3}
VARLEN_TOL = {"loss": 5e-5, "grad_norm": 5e-4}


def _run(tmp, name, device, args, nproc=1, mode="strict", timeout=900, trains=True):
    out = os.path.join(tmp, f"{name}.json")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           str(nproc), RUNNER, "--device", device, "--json", out, *BASE,
           "--dump-folder", os.path.join(tmp, f"dump-{name}"), *args]
    env = dict(os.environ, TORCHTPU_EAGER_MODE=mode, TOKENIZERS_PARALLELISM="false",
               HF_DATASETS_CACHE=os.path.join(tmp, "hf-datasets"), WANDB_MODE="disabled")
    # A session of its own, so that a hang is killed with every rank it started.
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True, cwd=tmp)
    try:
        log, _ = p.communicate(timeout=timeout)
    except BaseException as e:  # a hang, or the test interrupted: no rank outlives the test
        os.killpg(p.pid, signal.SIGKILL)
        log, _ = p.communicate()
        if isinstance(e, subprocess.TimeoutExpired):
            pytest.fail(f"{name}: no result in {timeout} s\n{log[-4000:]}")
        raise
    with open(os.path.join(tmp, f"{name}.log"), "w") as f:
        f.write(log)
    assert p.returncode == 0, f"{name}:\n{log[-6000:]}"
    if not trains:
        return None
    assert os.path.exists(out), f"{name}:\n{log[-6000:]}"
    with open(out) as f:
        res = json.load(f)
    assert [s["step"] for s in res["steps"]] == list(range(1, STEPS + 1)), res["steps"]
    return res


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The assets, and the CPU's runs, made once for the module and kept by name."""
    tmp = str(tmp_path_factory.mktemp("torchtitan"))
    paths = titan_assets.write(os.path.join(tmp, "assets"))
    return {"tmp": tmp, "assets": ["--hf-assets-path", paths["tokenizer"],
                                   "--dataloader.dataset-path", paths["dataset"]], "cpu": {}}


def _cpu(work, name, args, nproc=1):
    if name not in work["cpu"]:
        work["cpu"][name] = _run(work["tmp"], f"cpu-{name}", "cpu", work["assets"] + args, nproc)
    return work["cpu"][name]


def _seed(work):
    """TorchTitan's seed checkpoint, written once on the CPU; the arguments that load it."""
    folder = os.path.join(work["tmp"], "dump-seed", "checkpoint", "step-0")
    if not os.path.exists(folder):
        _run(work["tmp"], "seed", "cpu", work["assets"] + [
            "--checkpoint.enable", "--checkpoint.create-seed-checkpoint"], trains=False)
        assert os.path.exists(folder)
    return ["--checkpoint.enable", "--checkpoint.initial-load-path", folder,
            "--checkpoint.load-only"]


def _compare(tpu, cpu, tol):
    worst = {"loss": 0.0, "grad_norm": 0.0}
    for t, c in zip(tpu["steps"], cpu["steps"]):
        for k in worst:
            assert math.isfinite(t[k]), (t, c)
            rel = abs(t[k] - c[k]) / abs(c[k])
            worst[k] = max(worst[k], rel)
            assert rel <= tol[k], f"step {t['step']} {k}: tpu {t[k]} cpu {c[k]} ({rel:.2e})"
    assert tpu["steps"][-1]["loss"] < tpu["steps"][0]["loss"] - 1.0  # it trains
    return worst


def _check_tpu(res, mode, world=1):
    assert res["device"] == "tpu" and res["model_device"] == "tpu:0", res["model_device"]
    assert res["eager_mode"] == mode and res["world"] == world
    assert res["backend"] == "tpu_dist"
    assert res["devices"] == [f"tpu:{r}" for r in range(world)]  # each rank on its own chip
    # Nothing ran through the CPU fallback (torchtpu.metrics.fallbacks(), model building too).
    assert res["metrics"]["fallbacks"] == {}, res["metrics"]["fallbacks"]


@pytest.mark.smoke
def test_one_rank_default_precision_equals_the_cpu(work):
    args = work["assets"]
    cpu = _cpu(work, "bf16", [])
    tpu = _run(work["tmp"], "tpu-bf16", "tpu", args)
    _check_tpu(tpu, "strict")
    # The weights drawn from --debug.seed on tpu are the CPU's: step 1's loss to the bit.
    assert tpu["steps"][0]["loss"] == cpu["steps"][0]["loss"]
    _compare(tpu, cpu, BFLOAT16_TOL)


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_one_rank_float32_equals_the_cpu(work, mode):
    seed = _seed(work)
    cpu = _cpu(work, "f32", FLOAT32 + seed)
    tpu = _run(work["tmp"], f"tpu-f32-{mode}", "tpu", work["assets"] + FLOAT32 + seed, mode=mode)
    _check_tpu(tpu, mode)
    assert tpu["steps"][0]["loss"] == cpu["steps"][0]["loss"]
    _compare(tpu, cpu, FLOAT32_TOL)


def test_compile_enable_equals_the_cpu(work):
    """``--compile.enable``: TorchTitan compiles each transformer block and the loss with
    torch.compile's default backend; on tpu graphs torchtpu compiles them with backend "tpu"
    (torchtpu/compile/inductor_route.py). Compared with the CPU's eager run."""
    seed = _seed(work)
    cpu = _cpu(work, "f32", FLOAT32 + seed)
    tpu = _run(work["tmp"], "tpu-f32-compile", "tpu",
               work["assets"] + FLOAT32 + seed + ["--compile.enable"])
    _check_tpu(tpu, "strict")
    comp = tpu["metrics"]["compiled"]
    assert tpu["metrics"]["inductor_routed"] > 0, comp
    assert comp["programs"] > 1 and comp["program_runs"] >= STEPS * 6, comp
    assert not comp["graph_breaks"] and not comp["recompilations"], comp
    _compare(tpu, cpu, FLOAT32_TOL)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_fsdp_two_ranks_equals_gloo_on_the_cpu(work, mode):
    seed = _seed(work)
    args = FLOAT32 + seed + DTENSOR + ["--parallelism.data-parallel-shard-degree", "2"]
    cpu = _cpu(work, "f32-fsdp2", args, nproc=2)
    tpu = _run(work["tmp"], f"tpu-f32-fsdp2-{mode}", "tpu", work["assets"] + args, nproc=2,
               mode=mode)
    _check_tpu(tpu, mode, world=2)
    assert cpu["backend"] == "gloo"
    coll = tpu["metrics"]["collectives"]
    # FSDP2: parameters all-gathered, gradients reduce-scattered (PREMUL_SUM) on tpu_dist.
    assert coll.get("all_gather", 0) >= STEPS * 7 and coll.get("reduce_scatter", 0) >= STEPS * 7, coll
    assert tpu["steps"][0]["loss"] == pytest.approx(cpu["steps"][0]["loss"], rel=1e-6)
    _compare(tpu, cpu, FLOAT32_TOL)


def test_tensor_parallel_two_ranks_equals_gloo_on_the_cpu(work):
    seed = _seed(work)
    args = FLOAT32 + seed + DTENSOR + ["--parallelism.tensor-parallel-degree", "2"]
    cpu = _cpu(work, "f32-tp2", args, nproc=2)
    tpu = _run(work["tmp"], "tpu-f32-tp2", "tpu", work["assets"] + args, nproc=2)
    _check_tpu(tpu, "strict", world=2)
    coll = tpu["metrics"]["collectives"]
    # Row-parallel outputs reduced, sequence-parallel activations gathered and scattered.
    assert coll.get("all_reduce", 0) >= STEPS and coll.get("all_gather", 0) >= STEPS * 6, coll
    _compare(tpu, cpu, FLOAT32_TOL)
    # Both ranks read the same batches (no data parallelism), so the losses are one rank's too.
    # (Not the gradient norms: TorchTitan's norm under tensor parallelism differs from one
    # rank's by about 1e-4 relative, on the CPU over Gloo as on tpu.)
    one = _cpu(work, "f32", FLOAT32 + seed)
    for t, c in zip(tpu["steps"], one["steps"]):
        assert t["loss"] == pytest.approx(c["loss"], rel=1e-5), (t, c)


def test_varlen_attention_equals_flex_attention_on_the_cpu(work):
    """``--config llama3_debugmodel_varlen_attn``: the debug model with TorchTitan's
    variable-length attention (``torch.nn.attention.varlen.varlen_attn`` over the packed
    documents, aten::_flash_attention_forward/_backward: CUDA's only in PyTorch, native on tpu).
    The CPU cannot run it; the same document masking by FlexAttention on the CPU is the
    reference."""
    seed = _seed(work)
    cpu = _cpu(work, "f32", FLOAT32 + seed)
    tpu = _run(work["tmp"], "tpu-f32-varlen", "tpu", work["assets"] + FLOAT32 + seed +
               ["--config", "llama3_debugmodel_varlen_attn"])
    _check_tpu(tpu, "strict")
    _compare(tpu, cpu, VARLEN_TOL)


def test_example_runs_on_two_chips(tmp_path):
    """examples/torchtitan_llama3.py, tensor parallel on 2 chips, 3 steps, fused eager: each rank
    on its own chip, the estimated step on each TPU generation printed, no fallback."""
    example = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples",
                           "torchtitan_llama3.py")
    p = subprocess.Popen([sys.executable, example, "--chips", "2", "--parallel", "tp", "--steps",
                          "3", "--eager-mode", "fused"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True,
                         cwd=str(tmp_path))
    try:
        out, _ = p.communicate(timeout=600)
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    assert p.returncode == 0, out[-6000:]
    for rank in (0, 1):
        assert f"rank {rank} on tpu:{rank} (TPU v5e (simulated)), fused eager" in out, out[-4000:]
    for chip in ("v5e", "v6e", "v7"):
        assert out.count(f"estimated step on a TPU {chip}: ") == 2, out[-4000:]
    assert out.count("CPU fallbacks: none") == 2, out[-4000:]
