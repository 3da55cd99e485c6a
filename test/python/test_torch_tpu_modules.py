"""TorchTPU's smaller modules in the twin: the device-module class a program registers itself,
the host topology, benchmark statistics for TensorBoard, the xprof TraceMe range, build data and
the earlier DeferMode names (torchtpu/_torch_tpu/_internal/)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import torchtpu

pytestmark = pytest.mark.not_in_debug_tier(
    "the TorchTPU twin's names over torchtpu's features, whose behaviour per eager mode "
    "their own files test in every tier")


def _python(code: str, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items()
            if k not in ("ACCELERATOR_TYPE", "TORCHTPU_NUM_DEVICES", "TPU_VISIBLE_DEVICES")}
    return subprocess.run([sys.executable, "-c", code], env={**full, **env},
                          capture_output=True, text=True, timeout=300)


def test_a_program_registers_torchtpus_device_module_class_itself():
    out = _python(
        "import torch\n"
        "from torch_tpu._internal.device import _device_module\n"
        "assert not hasattr(torch, 'tpu')\n"
        "torch.utils.rename_privateuse1_backend('tpu')\n"
        "torch._register_device_module('tpu', _device_module._DeviceModule)\n"
        "torch.tpu._init_runtime_options()\n"
        "x = torch.arange(6.0, device='tpu').reshape(2, 3)\n"
        "with torch.tpu.precision(torch.tpu.Precision.HIGHEST):\n"
        "    y = (x @ x.T).cpu()\n"
        "torch.tpu.synchronize()\n"
        "print(torch.tpu.device_count(), y.tolist(), torch.tpu.memory_allocated(0) > 0)\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "4 [[5.0, 14.0], [14.0, 50.0]] True"


def test_tpu_device_registers_torch_tpu_again_when_nothing_did():
    out = _python("import torch\n"
                  "from torch_tpu._internal.device import _device_module\n"
                  "from torch_tpu import api\n"
                  "print(api.tpu_device(), torch.tpu.device_count())\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tpu 4"


@pytest.mark.parametrize("accelerator, world, want", [
    ("v5litepod-4", None, ["2,2,1", 4]), ("v6e-8", None, ["2,4,1", 8]),
    ("v6e-8", 4, ["2,2,1", 4]), ("v5p-8", None, ["2,2,1", 4]), ("v6e-1", None, ["1,1,1", 1])])
def test_get_tpu_topology_reads_the_simulated_host(accelerator, world, want):
    out = _python("import json\n"
                  "from torch_tpu._internal.distributed import tpu_topology\n"
                  f"print(json.dumps(tpu_topology.get_tpu_topology({world})))\n",
                  ACCELERATOR_TYPE=accelerator)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == want


def test_get_tpu_topology_refuses_what_the_host_does_not_have():
    from torch_tpu._internal.distributed import tpu_topology
    with pytest.raises(ValueError, match="more than this host's 4"):
        tpu_topology.get_tpu_topology(8)
    with pytest.raises(RuntimeError, match="No TPU topology found for count: 3"):
        tpu_topology.get_tpu_topology(3)


def test_benchmarking_writes_the_statistics_tensorboard_reads(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch_tpu._internal.utils import benchmarking
    steps = [0.5, 0.25, 0.75, 1.0, 0.5]
    profile = benchmarking.METRIC_PROFILES["Training/StepTime"]
    writer = benchmarking.SummaryWriter(str(tmp_path))
    benchmarking.record_tensorboard_metrics(writer, profile, steps)
    writer.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert "Training/StepTime/Value_s" in tags and "Training/StepTime/P90_s" in tags
    assert [e.value for e in events.Scalars("Training/StepTime/Value_s")] == steps
    assert events.Scalars("Training/StepTime/Mean_s")[0].value == pytest.approx(np.mean(steps))
    assert events.Scalars("Training/StepTime/P90_s")[0].value == pytest.approx(
        np.percentile(steps, 90))
    benchmarking.assert_metric_within_threshold(
        steps, profile, benchmarking.Stat.MEDIAN, 0.5, 10, benchmarking.Comparison.LESS)
    with pytest.raises(AssertionError, match="benchmark regression"):
        benchmarking.assert_metric_within_threshold(
            steps, profile, benchmarking.Stat.MEAN, 0.5, 10, benchmarking.Comparison.LESS)


def test_traceme_is_a_range_in_torch_profilers_trace(tmp_path):
    from torch_tpu._internal.shims.pyglib import build_data
    from torch_tpu._internal.shims.xprof import traceme
    assert build_data.BuildDebugMode() is True
    x = torch.ones(64, 64, device="tpu")
    with torch.profiler.profile() as prof:
        with traceme.TraceMe("Epoch_0_Train"):
            (x @ x).sum().item()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    names = [e.get("name") for e in json.loads(path.read_text())["traceEvents"]]
    assert "Epoch_0_Train" in names
    with traceme.TraceMe("outside a profile"):
        pass


def test_defer_mode_names_map_onto_eager_modes():
    from torch_tpu._internal import execution_mode as em
    start = torchtpu.get_eager_mode()
    try:
        with em.defer_mode(em.DeferMode.DEFAULT):
            assert torchtpu.get_eager_mode() == "fused"
            assert em.get_defer_mode() == em.DeferMode.DEFAULT
            with em.defer_mode(em.DeferMode.NEVER):
                assert torchtpu.get_eager_mode() == "strict"
            assert torchtpu.get_eager_mode() == "fused"
        em.set_defer_mode(em.DeferMode.ALL)
        assert em.get_eager_mode() == em.EagerMode.INTERNAL_DEFER_ALL
        with pytest.raises(TypeError, match="DeferMode"):
            em.set_defer_mode("never")
    finally:
        torchtpu.set_eager_mode(start)


def test_loader_load_is_torchtpus_loading_step_as_ray_train_calls_it():
    # Ray Train's TorchConfig(backend="tpu_dist") calls torch_tpu._loader.load() before
    # init_process_group (docs/ecosystem.md, "Ray"): the device, torch.tpu and tpu_dist are there,
    # _LOADED says a chip was found, and torch.tpu comes back after a program withdrew it.
    out = _python("import torch, torch.distributed as dist\n"
                  "import torch_tpu._loader as loader\n"
                  "print(loader._LOADED)\n"
                  "from torch_tpu._internal.device import _device_module\n"
                  "assert not hasattr(torch, 'tpu')\n"
                  "loader.load()\n"
                  "loader.load()\n"
                  "print(loader._LOADED, torch.tpu.device_count(), 'tpu_dist' in dist.Backend.backend_list,"
                  " torch.ones(2, device='tpu').device)\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["False", "True 4 True tpu:0"]


def test_loader_without_a_chip_loads_nothing_and_has_no_xla_devices():
    # TorchTPU falls back to XLA devices on the CPU when asked; torchtpu has none to give.
    code = ("import torch_tpu._loader as loader\n"
            "try:\n"
            "    loader.load({arg})\n"
            "    print('loaded nothing')\n"
            "except NotImplementedError as e:\n"
            "    print('refused', 'no XLA device' in str(e))\n"
            "loader.load(allow_xla_backend=False)\n"
            "print(loader._LOADED)\n")
    for arg, env, want in [("", {}, "loaded nothing"),
                           ("allow_xla_backend=True", {}, "refused True"),
                           ("", {"TORCH_TPU_INTERNAL_ALLOW_XLA_BACKEND": "1"}, "refused True")]:
        out = _python(code.format(arg=arg), TPU_VISIBLE_CHIPS="9", **env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split("\n")[:2] == [want, "False"], (arg, env, out.stdout)
