"""The transformers model zoo on "tpu": tiny random models built offline from config classes.

For each model type of transformers' auto mappings (causal LMs first, then the remaining base
models), in its own subprocess with a timeout:
  1. the default config, shrunk (small hidden sizes, two layers, small vocabulary, nested
     text/vision/audio and per-layer configs shrunk too), checked against a parameter cap on the
     meta device (a model still over it, or that the CPU cannot build or run, is shrunk harder:
     vocabularies, stage widths, scaling coefficients); inputs made for its main input (token ids, images, videos, audio waveforms or
     features, the patches and grid of a Qwen-VL style vision tower: the first candidate shape the
     CPU model accepts);
  2. on the CPU once: forward, backward of the mean square of the output, generate() for causal
     LMs (max_new_tokens=4, greedy), one AdamW step;
  3. on "tpu", in each eager mode asked for: the same stages, compared with the CPU.
Every model is classified per mode: pass, backend bug (tpu fails or differs where the CPU works),
or harness limitation (the CPU side could not build or run it: the reason is recorded).

    python test/models/zoo.py --modes strict,fused [--limit N] [--shard i/n] [--out F.jsonl]
    python test/models/zoo.py --report F1.jsonl F2.jsonl ...      (writes docs/models.md)
    bash scripts/zoo_sweep.sh                                     (both, sharded over the cores)

This file is the driver (the CPU reference, one item's modes, the list of types, the command);
beside it: zoo_config.py (the shrink), zoo_inputs.py (the input candidates), zoo_compare.py (the
run on "tpu" against the CPU, shared with the diffusers zoo), zoo_sweep.py (the sweep's loop) and
zoo_report.py (the page).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")
# ("highest" as the CPU's float32 GEMM, not the chip's six passes: model coverage; deep models
# carry a last-bit difference into the checks)
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo_compare import (adamw_step, cpu_side_failure, first_tensor, random_forward,  # noqa: E402
                         run_on_tpu)
from zoo_config import shrink  # noqa: E402
from zoo_inputs import input_candidates, shapes  # noqa: E402
from zoo_recipes import apply_config, recipes as _recipes  # noqa: E402  per-type recipes
from zoo_report import report  # noqa: E402
from zoo_sweep import CPU_DONE, run_sweep  # noqa: E402

RECIPES = _recipes()
PARAM_CAP = 20_000_000


def cpu_reference(model_type: str, causal: bool, harder: bool = False) -> tuple[dict, dict | None]:
    """Build the shrunk model and run every stage on the CPU. Returns (result, reference);
    reference is None when the CPU side could not build or run it (a harness limitation).
    `harder`: shrink the configuration a second time (see shrink)."""
    import copy

    import torch
    import transformers

    result = {"model_type": model_type, "causal_lm": causal}
    stage = "config"
    try:
        cfg = transformers.AutoConfig.for_model(model_type)
        shrink(cfg)
        if harder:
            shrink(cfg, harder=True)
            result["shrink"] = "harder"
        recipe = RECIPES.get(model_type)
        if recipe is not None:
            result["recipe"] = recipe.why
            apply_config(cfg, recipe)
        auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
        build = (getattr(transformers, recipe.model_class)._from_config
                 if recipe is not None and recipe.model_class else auto.from_config)
        stage = "build"
        with torch.device("meta"):
            n = sum(p.numel() for p in build(cfg).parameters())
        result["parameters"] = n
        if n > PARAM_CAP:
            return {**result, "status": "harness", "reason": f"{n} parameters after shrinking"}, None
        torch.manual_seed(0)
        model = build(cfg).eval()
        pristine = copy.deepcopy(model)
        vocab = min(getattr(cfg, "vocab_size", 100) or 100, 100)
        ids = torch.randint(3, vocab, (2, 8))
        stage = "forward"
        candidates = input_candidates(model, cfg, ids)
        if recipe is not None and recipe.inputs is not None:
            g = torch.Generator().manual_seed(0)
            candidates.insert(0, recipe.inputs(model, cfg, ids, lambda *shape: torch.randn(*shape, generator=g)))
        if not candidates:
            return {**result, "status": "harness", "reason": f"main input {model.main_input_name}"}, None
        for i, inputs in enumerate(candidates):
            try:
                torch.manual_seed(0)
                out = first_tensor(model(**inputs))
                break
            except Exception:  # noqa: BLE001 - try the next input shape; the last error is reported
                if i == len(candidates) - 1:
                    raise
        result["inputs"] = {k: shapes(v) for k, v in inputs.items()}
        if (failure := random_forward(result, model, inputs, out)) is not None:
            return failure, None
        stage = "backward"
        out.float().pow(2).mean().backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        generated = None
        if causal:
            stage = "generate"
            try:
                with torch.no_grad():
                    generated = model.generate(ids, max_new_tokens=4, do_sample=False)
            except Exception as e:  # noqa: BLE001 - forward/backward/step are still compared
                result["generate"] = f"skipped, fails on the CPU: {type(e).__name__}: {str(e)[:120]}"
        stage = "optimizer"
        stepped = adamw_step(model)
    except Exception as e:  # noqa: BLE001
        return cpu_side_failure(result, stage, e), None
    return result, {"model": pristine, "inputs": inputs, "out": out.detach(), "grads": grads,
                    "ids": ids, "generated": generated, "stepped": stepped}


def run_one(model_type: str, causal: bool, modes: list[str]):
    """In a subprocess: build one model type, run it on the CPU once, then on "tpu" in each
    eager mode; yields one record per mode as each mode ends (CPU_DONE printed between)."""
    import torchtpu

    torchtpu.set_fallback_mode("silent")
    start = time.perf_counter()
    result, ref = cpu_reference(model_type, causal)
    reason = result.get("reason", "")
    if ref is None and (reason.startswith(("CPU side (config)", "CPU side (build)", "CPU side (forward)"))
                        or reason.endswith("parameters after shrinking")):
        # Shrunk harder, a model the first configuration does not fit or run on the CPU may;
        # models that pass keep the first one. The first failure is reported if both fail.
        again, ref = cpu_reference(model_type, causal, harder=True)
        if ref is not None:
            result = again
    cpu_seconds = round(time.perf_counter() - start, 2)
    if ref is None:
        yield from ({**result, "mode": m} for m in modes)
        return
    print(CPU_DONE, flush=True)
    for m in modes:
        start = time.perf_counter()
        row = {**result, "mode": m, **run_on_tpu(ref, m)}
        # (the CPU reference's time and each mode's: what the sweep's wall time is made of)
        yield {**row, "cpu_seconds": cpu_seconds, "tpu_seconds": round(time.perf_counter() - start, 2)}


def model_types() -> list[tuple[str, bool]]:
    from transformers.models.auto import modeling_auto as m

    causal = sorted(m.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    base = sorted(set(m.MODEL_MAPPING_NAMES) - set(causal))
    return [(t, True) for t in causal] + [(t, False) for t in base]


def sweep(args) -> None:
    types = model_types()[: args.limit] if args.limit else model_types()
    if args.types:
        wanted = set(args.types.split(","))
        types = [t for t in model_types() if t[0] in wanted]
    run_sweep([(t, [sys.executable, __file__, "--one", t] + (["--causal"] if causal else []),
                {"causal_lm": causal}) for t, causal in types], args)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--modes", default=os.environ.get("TORCHTPU_EAGER_MODE") or "strict",
                   help="comma-separated eager modes to run on tpu (the CPU reference runs once)")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--shard", default="0/1", help="i/n: every n-th model type starting at i")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--out", default=str(ROOT / "build" / "zoo.jsonl"))
    p.add_argument("--types", help="comma-separated model types (instead of --limit)")
    p.add_argument("--report", nargs="+", help="JSONL files of sweep shards: write docs/models.md")
    p.add_argument("--report-to", help="write the report here instead of docs/models.md")
    p.add_argument("--note", help="a paragraph the report adds after its header")
    a = p.parse_args()
    if a.one:
        for row in run_one(a.one, a.causal, a.modes.split(",")):
            print(json.dumps(row), flush=True)
    elif a.report:
        report(a.report, Path(a.report_to) if a.report_to else None, a.note)
    else:
        sweep(a)
