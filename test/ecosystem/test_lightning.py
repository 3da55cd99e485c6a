"""PyTorch Lightning on "tpu" (docs/lightning.md): ``Trainer(accelerator="torchtpu")``
(torchtpu/lightning.py) against the same training on the CPU.

- single device, float32, strict and fused eager: every step's loss and the trained parameters
  equal to ``accelerator="cpu"`` at float32 tolerances, no CPU fallback;
- ``precision="bf16-mixed"``, strict and fused eager: autocast on "tpu" (the matmuls' outputs
  bfloat16), the loss going down, the losses and parameters within bfloat16 tolerances of the
  CPU's bf16-mixed run;
- DDP on 2 ranks (``devices=2, strategy="ddp"``, Lightning launching the second process): over
  "tpu_dist" with no setting, the parameters equal to a CPU DDP run over Gloo and to one process
  trained on the combined batch; in bf16-mixed, within bfloat16 tolerances of that one process;
- ``examples/lightning_train.py`` runs and reports;
- what the accelerator registers (the name "torchtpu", also in the standalone
  ``pytorch_lightning``), that importing torchtpu imports no Lightning, and that
  ``accelerator="auto"`` keeps Lightning's choice (the CPU here);
- Lightning Fabric (``Fabric(accelerator="torchtpu")``, the same model and data through Fabric's
  loop): single device in strict and fused eager equal to the same Fabric run on the CPU (and to
  the Trainer's), bf16-mixed within the bfloat16 bounds of the CPU's, DDP on 2 ranks equal to
  Fabric's CPU DDP over Gloo and to one process on the combined batch; what Fabric registers.

Runs where Lightning is installed (scripts/test_ecosystem.sh makes build/venv-rl); skipped
otherwise. Each training is a process of its own (run_lightning.py).
"""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("lightning")

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run_lightning.py")
STEPS = 16

# float32 at full precision (conftest.py): a matmul on tpu is the CPU's float32 GEMM and the
# element-wise ops the CPU's kernels, so a step equals the CPU's but for the order of float32
# sums (a blocked GEMM's split, a fused graph's reductions): ~1e-6 relative per step, which 16
# SGD steps of this smooth loss carry without growing much. A wrong gradient, a missed
# all-reduce or a bfloat16 matmul differ by 1e-3 or more.
FP32_RTOL = 2e-5
# bf16-mixed: the matmuls take bfloat16 inputs and give bfloat16 outputs (2^-8 = 4e-3 relative),
# and the two devices autocast by different lists: tpu by CUDA's (LayerNorm, GELU after it and
# the loss in float32), the CPU by its own (LayerNorm and GELU in bfloat16). Measured over 16
# steps (2026-12-07): parameters within 0.64% of their largest magnitude, each step's loss
# within 1.4% of the CPU's, the whole data set's final loss within 0.2%. The bounds are about
# three times that; that autocast ran on tpu is checked directly (the matmul's output dtype).
BF16_PARAM_RTOL = 2e-2
BF16_LOSS_RTOL = 4e-2


def train(tmp_path, name, accelerator, mode="strict", timeout=600, fabric=False, **kw):
    out = tmp_path / f"{name}.json"
    cmd = [sys.executable, RUN, "--accelerator", accelerator, "--out", str(out)]
    cmd += ["--fabric"] if fabric else []
    for k, v in kw.items():
        cmd += [f"--{k}", str(v)]
    env = dict(os.environ, TORCHTPU_EAGER_MODE=mode, TORCHTPU_FALLBACK="error")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                       cwd=str(tmp_path))
    assert r.returncode == 0 and out.exists(), r.stdout[-2000:] + r.stderr[-4000:]
    return json.loads(out.read_text())


def rel_diff(a: dict, b: dict) -> float:
    """Largest |a - b| over every parameter, relative to that parameter's largest magnitude."""
    assert a.keys() == b.keys()
    out = 0.0
    for k in a:
        x, y = torch.tensor(a[k]), torch.tensor(b[k])
        out = max(out, float((x - y).abs().max() / y.abs().max().clamp_min(1e-12)))
    return out


def loss_diff(a: list, b: list) -> float:
    assert len(a) == len(b)
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def cpu_fp32(tmp_path_factory):
    return train(tmp_path_factory.mktemp("cpu"), "cpu", "cpu", steps=STEPS)


@pytest.mark.parametrize("mode", [pytest.param("strict", marks=pytest.mark.smoke), "fused"])
def test_single_device_equals_the_cpu(tmp_path, cpu_fp32, mode):
    tpu = train(tmp_path, "tpu", "torchtpu", mode, steps=STEPS)
    assert tpu["accelerator"] == "TorchTPUAccelerator"
    assert tpu["strategy"] == "SingleDeviceStrategy" and tpu["root_device"] == "tpu:0"
    assert tpu["param_device"] == "tpu:0" and tpu["batch_device"] == "tpu:0"
    assert tpu["eager_mode"] == mode and tpu["fallbacks"] == {}
    assert tpu["estimate"]["launches"] > 0
    assert len(tpu["losses"]) == STEPS
    assert loss_diff(tpu["losses"], cpu_fp32["losses"]) <= FP32_RTOL
    assert rel_diff(tpu["params"], cpu_fp32["params"]) <= FP32_RTOL


@pytest.fixture(scope="module")
def cpu_bf16(tmp_path_factory):
    return train(tmp_path_factory.mktemp("cpu-bf16"), "cpu", "cpu", precision="bf16-mixed",
                 steps=STEPS)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_bf16_mixed_trains_as_on_the_cpu(tmp_path, cpu_bf16, mode):
    tpu = train(tmp_path, "tpu", "torchtpu", mode, precision="bf16-mixed", steps=STEPS)
    cpu = cpu_bf16
    assert tpu["precision"] == "MixedPrecision" and tpu["autocast_device"] == "tpu"
    assert tpu["matmul_dtype"] == "bfloat16" and cpu["matmul_dtype"] == "bfloat16"
    assert tpu["eager_mode"] == mode and tpu["fallbacks"] == {}
    before, after = tpu["data_loss"]
    assert after < 0.3 * before, tpu["data_loss"]  # measured: 0.483 -> 0.071
    assert abs(after - cpu["data_loss"][1]) <= BF16_PARAM_RTOL * cpu["data_loss"][1]
    assert loss_diff(tpu["losses"], cpu["losses"]) <= BF16_LOSS_RTOL
    assert rel_diff(tpu["params"], cpu["params"]) <= BF16_PARAM_RTOL


def test_ddp_two_ranks_equals_cpu_ddp_and_one_process(tmp_path):
    batch = 16  # per rank
    tpu = train(tmp_path, "tpu-ddp", "torchtpu", devices=2, strategy="ddp", batch=batch,
                steps=STEPS, timeout=900)
    assert tpu["strategy"] == "DDPStrategy" and tpu["world_size"] == 2
    assert tpu["backend"] == "tpu_dist" and tpu["root_device"] == "tpu:0"
    assert tpu["fallbacks"] == {}
    assert tpu["collectives"].get("collectives.all_reduce", 0) >= STEPS
    cpu = train(tmp_path, "cpu-ddp", "cpu", devices=2, strategy="ddp", batch=batch,
                steps=STEPS, timeout=900)
    assert cpu["backend"] == "gloo"
    # Both all-reduce through Gloo on the same bytes (measured: equal).
    assert loss_diff(tpu["losses"], cpu["losses"]) <= FP32_RTOL
    assert rel_diff(tpu["params"], cpu["params"]) <= FP32_RTOL
    # One process on both ranks' samples (run_lightning.py: --order-seed): DDP's mean of the two
    # ranks' mean gradients is the mean over the combined batch but for the order of the float32
    # sums (measured: parameters within 7e-7, losses 2.5e-7).
    one = train(tmp_path, "tpu-one", "torchtpu", batch=2 * batch, steps=STEPS, **{"order-seed": 0})
    assert loss_diff(tpu["losses"], one["losses"]) <= FP32_RTOL
    assert rel_diff(tpu["params"], one["params"]) <= FP32_RTOL


def test_ddp_bf16_mixed_equals_one_process(tmp_path):
    batch = 16
    tpu = train(tmp_path, "tpu-ddp", "torchtpu", devices=2, strategy="ddp", batch=batch,
                precision="bf16-mixed", steps=STEPS, timeout=900)
    assert tpu["backend"] == "tpu_dist" and tpu["autocast_device"] == "tpu"
    assert tpu["matmul_dtype"] == "bfloat16" and tpu["fallbacks"] == {}
    one = train(tmp_path, "tpu-one", "torchtpu", batch=2 * batch, precision="bf16-mixed",
                steps=STEPS, **{"order-seed": 0})
    # Each rank's weight gradients are bfloat16 matmuls over its half of the batch, summed in
    # float32 by the all-reduce: the same terms as one process's but rounded in halves.
    assert tpu["data_loss"][1] < 0.3 * tpu["data_loss"][0]
    assert loss_diff(tpu["losses"], one["losses"]) <= BF16_LOSS_RTOL
    assert rel_diff(tpu["params"], one["params"]) <= BF16_PARAM_RTOL


def _python(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def test_registration_is_lazy_and_auto_keeps_lightnings_choice():
    out = json.loads(_python(
        "import json, sys, torch\n"
        "before = sorted(m for m in sys.modules if 'lightning' in m.split('.')[0])\n"
        "import lightning.pytorch as L, pytorch_lightning as pl\n"
        "from torchtpu.lightning import TorchTPUAccelerator\n"
        "kw = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False)\n"
        "auto = L.Trainer(accelerator='auto', devices=1, **kw)\n"
        "one = L.Trainer(accelerator='torchtpu', devices=[2], **kw)\n"
        "bf16 = pl.Trainer(accelerator='torchtpu', devices=1, precision='bf16-mixed', **kw)\n"
        "acc = one.accelerator\n"
        "print(json.dumps({'before': before,\n"
        "  'names': sorted(L.accelerators.AcceleratorRegistry),\n"
        "  'pl_names': sorted(pl.accelerators.AcceleratorRegistry),\n"
        "  'xla': L.accelerators.AcceleratorRegistry['tpu']['accelerator'].__name__,\n"
        "  'class': isinstance(acc, TorchTPUAccelerator),\n"
        "  'auto': type(auto.accelerator).__name__,\n"
        "  'auto_device': str(auto.strategy.root_device),\n"
        "  'one_device': str(one.strategy.root_device),\n"
        "  'pl_precision': [type(bf16.precision_plugin).__name__, bf16.precision_plugin.device],\n"
        "  'pl_device': str(bf16.strategy.root_device),\n"
        "  'parse': [acc.parse_devices(2), acc.parse_devices('0,3'), acc.parse_devices(-1)],\n"
        "  'parallel': [str(d) for d in acc.get_parallel_devices([1, 3])],\n"
        "  'count': acc.auto_device_count(), 'available': acc.is_available(),\n"
        "  'stats': 'allocated_bytes.all.current' in acc.get_device_stats('tpu:0')}))\n"))
    assert out["before"] == []  # torch loaded torchtpu; nothing of Lightning came with it
    assert "torchtpu" in out["names"] and "torchtpu" in out["pl_names"]
    assert out["xla"] == "XLAAccelerator"  # Lightning's "tpu" stays XLA's
    assert out["class"]
    assert out["auto"] == "CPUAccelerator" and out["auto_device"] == "cpu"
    assert out["one_device"] == "tpu:2"
    assert out["pl_precision"] == ["MixedPrecision", "tpu"] and out["pl_device"] == "tpu:0"
    count = torch.tpu.device_count()
    assert out["parse"] == [[0, 1], [0, 3], list(range(count))]
    assert out["parallel"] == ["tpu:1", "tpu:3"]
    assert out["count"] == count and out["available"] and out["stats"]


def test_bad_devices_are_refused():
    from torchtpu.lightning import _parse_devices

    count = torch.tpu.device_count()
    for bad in (0, count + 1, [count], "0,0", [-1]):
        with pytest.raises(ValueError):
            _parse_devices(bad)


@pytest.mark.parametrize("example", ["lightning_train.py", "lightning_fabric_train.py"])
def test_example_reports_the_run(tmp_path, example):
    out = tmp_path / "report.json"
    r = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "examples", example),
                        "--steps", "12", "--json", str(out)],
                       env=dict(os.environ, TORCHTPU_FALLBACK="error"), capture_output=True,
                       text=True, timeout=600, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "estimated TPU time" in r.stdout and "OK: the loss decreased" in r.stdout
    report = json.loads(out.read_text())
    assert report["steps"] == 12 and report["precision"] == "bf16-mixed"
    assert report["strategy"] == "SingleDeviceStrategy" and report["fallbacks"] == {}
    assert report["estimate"]["launches"] > 0 and report["estimate"]["parallel_time_s"] > 0


# Lightning Fabric: the same model, data and steps through Fabric's own loop (run_lightning.py
# --fabric). Fabric's DistributedSampler keeps the loader's order (no shuffle), so one process on
# batches of 2 x 16 reads what the two ranks read together.


@pytest.fixture(scope="module")
def fabric_cpu(tmp_path_factory):
    return train(tmp_path_factory.mktemp("fabric-cpu"), "cpu", "cpu", fabric=True, steps=STEPS)


@pytest.mark.parametrize("mode", [pytest.param("strict", marks=pytest.mark.smoke), "fused"])
def test_fabric_single_device_equals_the_cpu(tmp_path, fabric_cpu, cpu_fp32, mode):
    tpu = train(tmp_path, "tpu", "torchtpu", mode, fabric=True, steps=STEPS)
    assert tpu["accelerator"] == "TorchTPUAccelerator" and tpu["precision"] == "Precision"
    assert tpu["strategy"] == "SingleDeviceStrategy" and tpu["root_device"] == "tpu:0"
    assert tpu["param_device"] == "tpu:0" and tpu["batch_device"] == "tpu:0"
    assert tpu["eager_mode"] == mode and tpu["fallbacks"] == {}
    assert tpu["estimate"]["launches"] > 0 and len(tpu["losses"]) == STEPS
    assert loss_diff(tpu["losses"], fabric_cpu["losses"]) <= FP32_RTOL
    assert rel_diff(tpu["params"], fabric_cpu["params"]) <= FP32_RTOL
    # Fabric's loop takes the Trainer's steps (measured on the CPU: equal).
    assert loss_diff(fabric_cpu["losses"], cpu_fp32["losses"]) <= FP32_RTOL
    assert rel_diff(fabric_cpu["params"], cpu_fp32["params"]) <= FP32_RTOL


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_fabric_bf16_mixed_trains_as_on_the_cpu(tmp_path, mode):
    tpu = train(tmp_path, "tpu", "torchtpu", mode, fabric=True, precision="bf16-mixed",
                steps=STEPS)
    cpu = train(tmp_path, "cpu", "cpu", fabric=True, precision="bf16-mixed", steps=STEPS)
    assert tpu["precision"] == "MixedPrecision" and tpu["autocast_device"] == "tpu"
    assert cpu["autocast_device"] == "cpu"
    assert tpu["matmul_dtype"] == "bfloat16" and cpu["matmul_dtype"] == "bfloat16"
    assert tpu["eager_mode"] == mode and tpu["fallbacks"] == {}
    before, after = tpu["data_loss"]
    assert after < 0.3 * before, tpu["data_loss"]  # measured: 0.483 -> 0.071
    assert abs(after - cpu["data_loss"][1]) <= BF16_PARAM_RTOL * cpu["data_loss"][1]
    assert loss_diff(tpu["losses"], cpu["losses"]) <= BF16_LOSS_RTOL  # measured: 1.4%
    assert rel_diff(tpu["params"], cpu["params"]) <= BF16_PARAM_RTOL  # measured: 0.64%


def test_fabric_ddp_two_ranks_equals_cpu_ddp_and_one_process(tmp_path):
    batch = 16  # per rank
    tpu = train(tmp_path, "tpu-ddp", "torchtpu", fabric=True, devices=2, strategy="ddp",
                batch=batch, steps=STEPS, timeout=900)
    assert tpu["strategy"] == "DDPStrategy" and tpu["world_size"] == 2
    assert tpu["module"] == "DistributedDataParallel"
    assert tpu["backend"] == "tpu_dist" and tpu["root_device"] == "tpu:0"
    assert tpu["fallbacks"] == {}
    assert tpu["collectives"].get("collectives.all_reduce", 0) >= STEPS
    cpu = train(tmp_path, "cpu-ddp", "cpu", fabric=True, devices=2, strategy="ddp", batch=batch,
                steps=STEPS, timeout=900)
    assert cpu["backend"] == "gloo"
    assert loss_diff(tpu["losses"], cpu["losses"]) <= FP32_RTOL  # measured: equal
    assert rel_diff(tpu["params"], cpu["params"]) <= FP32_RTOL
    # measured: parameters within 1.6e-7, losses 2.2e-7
    one = train(tmp_path, "tpu-one", "torchtpu", fabric=True, batch=2 * batch, steps=STEPS)
    assert loss_diff(tpu["losses"], one["losses"]) <= FP32_RTOL
    assert rel_diff(tpu["params"], one["params"]) <= FP32_RTOL


def test_fabric_registration_is_lazy_and_acts_for_tpu_only():
    out = json.loads(_python(
        "import json, sys, torch\n"
        "import lightning_fabric as lf\n"
        "alone = sorted(m for m in sys.modules if m.split('.')[0].endswith('lightning'))\n"
        "lf_alone = 'torchtpu' in lf.accelerators.ACCELERATOR_REGISTRY\n"
        "import lightning.fabric as LF\n"
        "from lightning.fabric.accelerators import ACCELERATOR_REGISTRY as reg\n"
        "one = LF.Fabric(accelerator='torchtpu', devices=[2])\n"
        "two = LF.Fabric(accelerator='torchtpu', devices=2)\n"
        "fp16 = lf.Fabric(accelerator='torchtpu', devices=1, precision='16-mixed')\n"
        "cpu = LF.Fabric(accelerator='cpu', devices=1, precision='bf16-mixed')\n"
        "auto = LF.Fabric(accelerator='auto', devices=1)\n"
        "print(json.dumps({'alone': alone, 'lf_alone': lf_alone,\n"
        "  'names': sorted(reg), 'lf_names': sorted(lf.accelerators.ACCELERATOR_REGISTRY),\n"
        "  'xla': reg['tpu']['accelerator'].__name__,\n"
        "  'class': type(one.accelerator).__module__ + '.' + type(one.accelerator).__name__,\n"
        "  'one': [type(one.strategy).__name__, str(one.device)],\n"
        "  'two': [type(two.strategy).__name__, [str(d) for d in two.strategy.parallel_devices],\n"
        "          type(two.strategy.launcher).__name__],\n"
        "  'fp16': [fp16.strategy.precision.device,\n"
        "           type(fp16.strategy.precision.scaler).__name__, str(fp16.device)],\n"
        "  'cpu': cpu.strategy.precision.device,\n"
        "  'auto': [type(auto.accelerator).__name__, str(auto.device)]}))\n"))
    # The standalone lightning_fabric registers with no Trainer package loaded (lightning.fabric
    # comes with the `lightning` package, which imports lightning.pytorch too).
    assert out["alone"] == [] and out["lf_alone"]
    assert "torchtpu" in out["names"] and "torchtpu" in out["lf_names"]
    assert out["xla"] == "XLAAccelerator"
    assert out["class"] == "torchtpu.lightning.TorchTPUAccelerator"
    assert out["one"] == ["SingleDeviceStrategy", "tpu:2"]
    assert out["two"] == ["DDPStrategy", ["tpu:0", "tpu:1"], "_SubprocessScriptLauncher"]
    assert out["fp16"] == ["tpu", "GradScaler", "tpu:0"]
    assert out["cpu"] == "cpu"  # the wrappers leave other accelerators alone
    assert out["auto"] == ["CPUAccelerator", "cpu"]
