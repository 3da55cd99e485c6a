"""vLLM on "tpu" against vLLM's CPU backend, side by side (docs/ecosystem.md, "vLLM").

Offline greedy generation of the tiny Llama of test/vllm/tiny_model.py (8 prompts of mixed
lengths), each configuration a process of its own run by the vLLM environment's Python
(scripts/test_vllm.sh makes it), the configurations interleaved (A, B, C, A, B, C, ...):

- host tokens/s, *measured on this machine*: generated tokens over the wall time of
  ``LLM.generate`` for vLLM's CPU backend (eager, and compiled: its default), and for "tpu" in
  strict and fused eager (the simulator's host cost);
- estimated tokens/s per chip (v5e, v6e, v7), *estimated* by torchtpu's cost model: generated
  tokens over the device time charged to the generation steps (torchtpu.vllm.request_stats()),
  one chip each, what one TPU chip of that generation would take for this batch with these
  launches; and the share of it spent in the KV cache ops (see the notes in the JSON).

    python benchmarks/vllm.py [--max-tokens 128] [--repeats 2] [--python build/venv-vllm/bin/python]

Every run has ``OMP_NUM_THREADS=1`` (``--threads``): vLLM sets torch to one thread for serving
on both backends, but its CPU kernels' OpenMP teams take every core, and on this 2-core machine
shared with other jobs their barriers made the CPU backend 15-60 times slower and 4 times as
variable (8 x 128 tokens: 4.1 to 18.3 s with two threads, 0.31 s with one).

Writes benchmarks/results/vllm.json. Its estimates alone are recomputed with the current cost
model by `reprice` (python benchmarks/reprice.py vllm: the two "tpu" configurations run once, the
host figures kept).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RUNNER = ROOT / "test" / "vllm" / "run_generate.py"
CHIPS = ("v5e", "v6e", "v7")


def run(python: str, model: str, config: dict, max_tokens: int, kv_bytes: int,
        threads: int) -> dict:
    env = dict(os.environ, **config["env"], OMP_NUM_THREADS=str(threads))
    if "VLLM_TARGET_DEVICE" not in config["env"]:
        env.pop("VLLM_TARGET_DEVICE", None)
    args = [python, str(RUNNER), model, "--max-tokens", str(max_tokens),
            "--kv-bytes", str(kv_bytes), *config["args"]]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{config['name']} failed:\n{proc.stderr[-4000:]}")


def estimates(r: dict, generated: int) -> dict:
    """The cost-model fields of a "tpu" configuration's row, from its first run's RESULT."""
    return {"estimated_tokens_per_s_per_chip": {c: generated / r["request_estimated_s"][c] for c in CHIPS},
            "estimated_generate_s": r["request_estimated_s"], "launches": r["launches"],
            "fallbacks": r["fallbacks"],
            "kv_cache_ops_share_v5e": r["cache_ops_v5e_s"] / r["estimate"]["v5e"]}


def reprice(payload: dict, python: str = str(ROOT / "build" / "venv-vllm" / "bin" / "python")) -> dict:
    """The estimates of the "tpu" configurations recomputed: each run once with the recorded
    workload (the estimates are the first run's, as main() takes them), the host figures kept."""
    w = payload["workload"]
    configs = {"tpu strict": {"TORCHTPU_EAGER_MODE": "strict"}, "tpu fused": {"TORCHTPU_EAGER_MODE": "fused"}}
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny-llama")
        subprocess.run([python, str(ROOT / "test" / "vllm" / "tiny_model.py"), model],
                       check=True, capture_output=True)
        for name, env in configs.items():
            r = run(python, model, {"name": name, "env": env, "args": []}, w["max_tokens"],
                    w["kv_cache_bytes"], w["omp_num_threads"])
            payload["results"][name].update(estimates(r, r["generated"]))
    return payload


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=str(ROOT / "build" / "venv-vllm" / "bin" / "python"))
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--kv-mib", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1,
                    help="OMP_NUM_THREADS of every run (see the module docstring)")
    ap.add_argument("--no-compiled", action="store_true", help="skip vLLM's compiled CPU backend")
    a = ap.parse_args()

    configs = [
        {"name": "cpu eager", "env": {"VLLM_TARGET_DEVICE": "cpu"}, "args": []},
        {"name": "cpu compiled", "env": {"VLLM_TARGET_DEVICE": "cpu"}, "args": ["--compile"]},
        {"name": "tpu strict", "env": {"TORCHTPU_EAGER_MODE": "strict"}, "args": []},
        {"name": "tpu fused", "env": {"TORCHTPU_EAGER_MODE": "fused"}, "args": []},
    ]
    if a.no_compiled:
        configs = [c for c in configs if c["name"] != "cpu compiled"]
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny-llama")
        subprocess.run([a.python, str(ROOT / "test" / "vllm" / "tiny_model.py"), model],
                       check=True, capture_output=True)
        runs: dict[str, list[dict]] = {c["name"]: [] for c in configs}
        for _ in range(a.repeats):
            for c in configs:
                runs[c["name"]].append(run(a.python, model, c, a.max_tokens, a.kv_mib << 20,
                                            a.threads))
                print(f"{c['name']}: {runs[c['name']][-1]['generate_s']:.3f} s", flush=True)

    reference = runs["cpu eager"][0]["tokens"]
    rows = {}
    for name, rs in runs.items():
        generated = rs[0]["generated"]
        seconds = statistics.median(r["generate_s"] for r in rs)
        row = {"generate_s": seconds, "host_tokens_per_s": generated / seconds,
               "load_s": statistics.median(r["load_s"] for r in rs),
               "tokens_equal_cpu_eager": all(r["tokens"] == reference for r in rs)}
        if "request_estimated_s" in rs[0]:
            row.update(estimates(rs[0], generated))
        rows[name] = row
    cpu = rows["cpu eager"]["host_tokens_per_s"]
    print(f"\n{'configuration':<14} {'host tok/s':>10} {'vs cpu eager':>12}   "
          "estimated tok/s per chip")
    for name, row in rows.items():
        est = row.get("estimated_tokens_per_s_per_chip")
        est_s = "  ".join(f"{c} {est[c]:,.0f}" for c in CHIPS) if est else "-"
        print(f"{name:<14} {row['host_tokens_per_s']:>10,.0f} "
              f"{row['host_tokens_per_s'] / cpu:>11.2f}x   {est_s}")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import machine  # noqa: E402

    out = {
        "benchmark": "vllm",
        "workload": {"model": "tiny Llama (test/vllm/tiny_model.py: 2 layers, hidden 128, "
                              "4 heads, 2 KV heads, float32)",
                     "prompts": 8, "max_tokens": a.max_tokens, "greedy": True,
                     "kv_cache_bytes": a.kv_mib << 20, "repeats": a.repeats,
                     "omp_num_threads": a.threads},
        "machine": machine(),
        "results": rows,
        "notes": [
            "host tokens/s are measured on this machine (median of the repeats); estimated "
            "tokens/s per chip are torchtpu's cost model for one chip of each generation",
            "kv_cache_ops_share_v5e: the share of the v5e estimate in index_copy_/index_select "
            "on the KV cache; torchtpu prices a gather or scatter by its whole source or "
            "destination tensor (the layer's KV cache), not by the rows it moves, so this "
            "share grows with the KV cache size and the estimates are pessimistic by it",
        ],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "vllm.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {RESULTS / 'vllm.json'}")


if __name__ == "__main__":
    main()
