"""TRL's GRPO on "tpu" (docs/ecosystem.md, "TRL"): a tiny GRPO run (a Qwen2 made offline, two
reward functions, sampling with temperature, top-k and top-p, a KL term against a reference
model) on tpu in strict and fused eager against the same run on the CPU: every sampled
completion equal token for token, the rewards and losses equal within float32 rounding, the
trained weights within 1e-4, and no CPU fallback (TORCHTPU_FALLBACK=error).

Runs where TRL is installed (scripts/test_ecosystem.sh makes build/venv-rl); skipped otherwise.
Each run is a process of its own (run_grpo.py): Accelerate's state and the eager mode are the
process's.
"""
import json
import math
import os
import subprocess
import sys

import pytest

pytest.importorskip("trl")
pytest.importorskip("datasets")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tiny_models import build  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build(str(tmp_path_factory.mktemp("tiny-qwen2")), "qwen2")


STEPS = 3
LEARNING_RATE = 5e-3  # (run_grpo.py's)


def grpo(model_dir, device, mode="strict", steps=STEPS, tmp=None):
    env = dict(os.environ, TORCHTPU_EAGER_MODE=mode, TORCHTPU_FALLBACK="error",
               TOKENIZERS_PARALLELISM="false")
    r = subprocess.run([sys.executable, os.path.join(HERE, "run_grpo.py"), model_dir,
                        "--device", device, "--steps", str(steps), "--out", str(tmp)],
                       env=env, capture_output=True, text=True, timeout=900)
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def cpu_run(model_dir, tmp_path_factory):
    return grpo(model_dir, "cpu", tmp=tmp_path_factory.mktemp("cpu"))


@pytest.mark.parametrize("mode", [pytest.param("strict", marks=pytest.mark.smoke), "fused"])
def test_grpo_on_tpu_equals_the_cpu_with_no_fallback(model_dir, cpu_run, mode, tmp_path):
    tpu = grpo(model_dir, "tpu", mode, tmp=tmp_path)
    cpu = cpu_run
    assert tpu["device"] == "tpu:0" and cpu["device"] == "cpu"
    assert tpu["eager_mode"] == mode
    assert tpu["fallbacks"] == {}
    # Every decoding step sampled through torchtpu's multinomial: 10 a step (4 rows each).
    assert tpu["native_multinomial"] >= 3 * 10
    assert tpu["completions"] == cpu["completions"]
    assert len(tpu["logs"]) == len(cpu["logs"])
    for t, c in zip(tpu["logs"], cpu["logs"]):
        assert set(t) == set(c)
        for k in c:
            # Losses are means of float32 terms summed in another order on the chip's passes.
            assert math.isclose(t[k], c[k], rel_tol=1e-4, abs_tol=1e-5), (k, t[k], c[k])
    for name, c in cpu["param_sums"].items():
        diff = abs(tpu["param_sums"][name] - c)
        if name.endswith("k_proj.bias"):
            # Its gradient is zero but for rounding (softmax is invariant to a shift of the
            # scores that every key of a query shares), and AdamW normalizes that noise into
            # steps of the learning rate: its values are rounding noise on any two devices (the
            # CPU gives itself the same noise run after run). Bounded by what AdamW can move it:
            # about the learning rate per element and step.
            assert diff <= 2 * LEARNING_RATE * STEPS * cpu["param_numel"][name], name
            continue
        assert diff <= 1e-5 * cpu["param_abs_sums"][name] + 1e-6, name
