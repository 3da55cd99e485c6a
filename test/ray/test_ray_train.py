"""Ray Train on "tpu" (docs/ecosystem.md, "Ray"; ``bash scripts/test_ray.sh``, in the venv it makes).

Ray Train's ``TorchConfig(backend="tpu_dist")`` loads the backend through ``torch_tpu`` (Ray's
built-in support for Google's TorchTPU), here torchtpu's TorchTPU-compatible package. The tests:
what Ray calls on ``torch_tpu``, through Ray's own functions, in one process; and
examples/ray_train.py, 2 Ray workers on a local cluster, one simulated chip each, DDP over
``tpu_dist``, against the same training on the CPU over Gloo, in each eager mode. Skipped where
Ray is not importable. ``-m smoke`` is the short case.
"""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("ray")
pytest.importorskip("ray.train.torch")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "examples", "ray_train.py")


def _env():
    env = dict(os.environ, TORCHTPU_MATMUL_PRECISION="highest", TORCHTPU_HIGHEST_ALGORITHM="float32")
    env.pop("TORCHTPU_EAGER_MODE", None)
    return env


def test_ray_calls_on_torch_tpu():
    r = subprocess.run([sys.executable, os.path.join(HERE, "ray_calls.py")], env=_env(),
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["loaded"] is True and out["twin"] is True
    assert out["available"] is True
    assert out["devices"] == ["tpu"]
    assert out["streams"] is False  # Ray's TPU manager: no streams (its choice, not ours)
    assert out["backend"] == "tpu_dist"
    assert out["all_reduce"] == [0.0, 1.0, 2.0, 3.0]  # a world of one
    assert out["grad_device"] == "tpu:0"
    assert out["grad"] == [[3.0] * 4] * 2  # d(sum(W x + b))/dW for 3 rows of ones


def _run_example(tmp_path, mode, steps):
    out = tmp_path / f"ray_{mode}.json"
    r = subprocess.run([sys.executable, EXAMPLE, "--steps", str(steps), "--eager-mode", mode,
                        "--json", str(out)], env=_env(), capture_output=True, text=True,
                       timeout=900, cwd=ROOT)
    tail = r.stdout[-4000:] + r.stderr[-4000:]
    assert out.exists(), tail
    res = json.loads(out.read_text())
    tpu, cpu = res["tpu"], res["cpu"]
    # Ray made the groups it was told to, and each worker used its own simulated chip.
    assert tpu["backend"] == "tpu_dist" and cpu["backend"] == "gloo", tail
    assert tpu["chips"][0].startswith("rank 0: tpu:0 (chip 0") and \
        tpu["chips"][1].startswith("rank 1: tpu:1 (chip 1"), tpu["chips"]
    assert cpu["chips"] == ["rank 0: cpu", "rank 1: cpu"]
    assert tpu["eager_mode"] == mode
    # DDP ran its all-reduces on tpu_dist: one per step, plus the script's loss average.
    assert tpu["collectives"]["all_reduce"] >= 2 * steps, tpu["collectives"]
    assert len(tpu["losses"]) == len(cpu["losses"]) == steps
    # examples/ray_train.py's TOLERANCE (1e-5, relative) says why; measured: 0.
    assert res["loss_diff"] <= res["tolerance"] and res["param_diff"] <= res["tolerance"], res
    assert tpu["losses"][-1] < tpu["losses"][0]  # it trains
    assert res["ok"] and r.returncode == 0, tail
    return res


@pytest.mark.smoke
def test_example_strict_short(tmp_path):
    _run_example(tmp_path, "strict", 4)


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_example_equals_cpu(tmp_path, mode):
    _run_example(tmp_path, mode, 16)
