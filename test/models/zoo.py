"""The transformers model zoo on "tpu": tiny random models built offline from config classes.

For each model type of transformers' auto mappings (causal LMs first, then the remaining base
models), in its own subprocess with a timeout:
  1. the default config, shrunk (small hidden sizes, two layers, small vocabulary, nested
     text/vision/audio configs shrunk too), checked against a parameter cap on the meta device;
  2. forward on the CPU and on "tpu" (strict eager by default), compared;
  3. backward of the sum of squares of the output, gradients compared, then one AdamW step;
  4. for causal LMs, generate(max_new_tokens=4, do_sample=False), tokens compared.
Every model is classified: pass, backend bug (tpu fails or differs where the CPU works), or
harness limitation (the CPU side could not build or run it: the reason is recorded).

    python test/models/zoo.py [--limit N] [--mode strict|debug] [--out build/zoo.jsonl]
then python test/models/zoo.py --report build/zoo.jsonl [--fused build/zoo_fused.jsonl]
(writes docs/models.md; the fused records come from a run with --mode fused)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARAM_CAP = 20_000_000
# float32 models of a few layers: matmuls at "highest" equal fp32 GEMMs up to addition order,
# and addmm adds the bias after the product (one extra rounding); through a few layers and a
# softmax this stays far below 1e-4.
ATOL, RTOL = 1e-4, 1e-4

SMALL = {
    "hidden_size": 32, "d_model": 32, "n_embd": 32, "embed_dim": 32, "dim": 32,
    "intermediate_size": 64, "ffn_dim": 64, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
    "n_inner": 64, "hidden_dim": 64,
    "num_hidden_layers": 2, "num_layers": 2, "n_layer": 2, "n_layers": 2,
    "encoder_layers": 2, "decoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "vocab_size": 128, "max_position_embeddings": 128, "n_positions": 128,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_intermediate_size": 32,
    "num_experts_per_tok": 2, "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8, "v_head_dim": 8,
}


def shrink(cfg) -> None:
    from transformers import PretrainedConfig

    def set_if_writable(key, value):
        try:
            setattr(cfg, key, value)
        except (AttributeError, TypeError, ValueError):
            pass  # a read-only property, derived from other fields

    for key, value in SMALL.items():
        try:
            current = getattr(cfg, key, None)
        except Exception:  # noqa: BLE001 - some configs raise for per-layer attributes
            continue
        if isinstance(current, int) and not isinstance(current, bool):
            set_if_writable(key, value)
    heads = getattr(cfg, "num_attention_heads", None)
    if isinstance(getattr(cfg, "num_key_value_heads", None), int) and heads:
        set_if_writable("num_key_value_heads", 2 if heads % 2 == 0 else heads)
    if isinstance(getattr(cfg, "head_dim", None), int):
        width = getattr(cfg, "hidden_size", None) or getattr(cfg, "d_model", None)
        if width and heads:
            set_if_writable("head_dim", width // heads)
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        if isinstance(getattr(cfg, key, None), int) and getattr(cfg, key) >= 100:
            set_if_writable(key, 1)
    if isinstance(getattr(cfg, "layer_types", None), list):
        set_if_writable("layer_types", cfg.layer_types[: getattr(cfg, "num_hidden_layers", 2)])
    for key, value in vars(cfg).items():
        if isinstance(value, PretrainedConfig):
            shrink(value)


def run_one(model_type: str, causal: bool, mode: str) -> dict:
    """In a subprocess: build, compare, classify one model type."""
    import copy

    import torch
    import torchtpu
    import transformers

    torchtpu.set_fallback_mode("silent")
    torchtpu.set_eager_mode(mode)
    result = {"model_type": model_type, "causal_lm": causal, "mode": mode}
    try:
        cfg = transformers.AutoConfig.for_model(model_type)
        shrink(cfg)
        auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
        with torch.device("meta"):
            n = sum(p.numel() for p in auto.from_config(cfg).parameters())
        result["parameters"] = n
        if n > PARAM_CAP:
            return {**result, "status": "harness", "reason": f"{n} parameters after shrinking"}
        torch.manual_seed(0)
        model = auto.from_config(cfg).eval()
        vocab = min(getattr(cfg, "vocab_size", 100) or 100, 100)
        ids = torch.randint(3, vocab, (2, 8))
        inputs = {model.main_input_name if model.main_input_name == "input_ids" else "input_ids": ids}
        if model.main_input_name != "input_ids":
            return {**result, "status": "harness", "reason": f"main input {model.main_input_name}"}
        out_cpu = model(**inputs)
    except Exception as e:  # noqa: BLE001
        return {**result, "status": "harness", "reason": f"CPU side: {type(e).__name__}: {str(e)[:160]}"}

    def first_tensor(out):
        for k in ("logits", "last_hidden_state"):
            if getattr(out, k, None) is not None:
                return getattr(out, k)
        return out[0]

    stage = "forward"
    try:
        dev_model = copy.deepcopy(model).to("tpu")
        torchtpu.metrics.reset()
        out_tpu = dev_model(**{k: v.to("tpu") for k, v in inputs.items()})
        a, b = first_tensor(out_tpu), first_tensor(out_cpu)
        torch.testing.assert_close(a.cpu(), b, atol=ATOL, rtol=RTOL)
        stage = "backward"
        b.float().pow(2).mean().backward()
        a.float().pow(2).mean().backward()
        for (name, p_cpu), p_tpu in zip(model.named_parameters(), dev_model.parameters()):
            if p_cpu.grad is not None:
                torch.testing.assert_close(p_tpu.grad.cpu(), p_cpu.grad, atol=1e-4, rtol=1e-3,
                                           msg=lambda m: f"grad of {name}: {m}")
        if causal:
            stage = "generate"
            with torch.no_grad():
                g_cpu = model.generate(ids, max_new_tokens=4, do_sample=False)
                g_tpu = dev_model.generate(ids.to("tpu"), max_new_tokens=4, do_sample=False)
            if not torch.equal(g_tpu.cpu(), g_cpu):
                raise AssertionError(f"generated tokens differ: {g_tpu.cpu().tolist()} vs {g_cpu.tolist()}")
        stage = "optimizer"
        opt_cpu = torch.optim.AdamW(model.parameters(), lr=1e-3)
        opt_tpu = torch.optim.AdamW(dev_model.parameters(), lr=1e-3)
        opt_cpu.step()
        opt_tpu.step()
        # Adam's first step moves a parameter by about lr * sign(grad): where the true gradient
        # is ~0, rounding noise of either sign can differ by up to 2 * lr.
        for p_cpu, p_tpu in zip(model.parameters(), dev_model.parameters()):
            torch.testing.assert_close(p_tpu.detach().cpu(), p_cpu.detach(), atol=2e-3, rtol=0)
        result["fallbacks"] = torchtpu.metrics.fallbacks()
        return {**result, "status": "pass"}
    except Exception as e:  # noqa: BLE001
        return {**result, "status": "backend bug", "stage": stage,
                "reason": f"{type(e).__name__}: {str(e)[:300]}",
                "fallbacks": torchtpu.metrics.fallbacks()}


def model_types() -> list[tuple[str, bool]]:
    from transformers.models.auto import modeling_auto as m

    causal = sorted(m.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    base = sorted(set(m.MODEL_MAPPING_NAMES) - set(causal))
    return [(t, True) for t in causal] + [(t, False) for t in base]


def sweep(args) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    types = model_types()[: args.limit] if args.limit else model_types()
    if args.types:
        wanted = set(args.types.split(","))
        types = [t for t in model_types() if t[0] in wanted]
    counts: dict[str, int] = {}
    for i, (t, causal) in enumerate(types):
        start = time.time()
        try:
            proc = subprocess.run([sys.executable, __file__, "--one", t, "--mode", args.mode]
                                  + (["--causal"] if causal else []),
                                  capture_output=True, text=True, timeout=args.timeout)
            lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
            row = json.loads(lines[-1]) if lines else {
                "model_type": t, "causal_lm": causal, "status": "backend bug",
                "reason": f"subprocess died ({proc.returncode}): {proc.stderr[-300:]}"}
        except subprocess.TimeoutExpired:
            row = {"model_type": t, "causal_lm": causal, "status": "harness",
                   "reason": f"timeout after {args.timeout} s"}
        row["seconds"] = round(time.time() - start, 1)
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"[{i + 1}/{len(types)}] {t}: {row['status']} {row.get('reason', '')[:100]}", flush=True)
    print(counts)


def report(path: str, fused: str | None = None) -> None:
    rows = [json.loads(l) for l in open(path) if l.strip()]
    built = [r for r in rows if r["status"] != "harness"]
    passed = [r for r in rows if r["status"] == "pass"]
    bugs = [r for r in rows if r["status"] == "backend bug"]
    harness = [r for r in rows if r["status"] == "harness"]
    lines = [
        "# Coverage: the transformers model zoo on \"tpu\"", "",
        "Generated by `python test/models/zoo.py --report ...` from a run of "
        "`python test/models/zoo.py` (tiny random configurations built offline from config "
        "classes; forward, backward and an AdamW step compared with the CPU; generate() for "
        "causal LMs). Do not edit by hand.", "",
        f"- model types tried: {len(rows)}; built and run on both devices: **{len(built)}**",
        f"- passed: **{len(passed)}** ({100.0 * len(passed) / max(len(built), 1):.1f}% of those built)",
        f"- backend bugs: {len(bugs)}; harness limitations: {len(harness)}", "",
        "## Backend bugs", "", "| model type | stage | reason |", "|---|---|---|"]
    for r in bugs:
        lines.append(f"| {r['model_type']} | {r.get('stage', '')} | {r['reason'][:200].replace('|', '/')} |")
    lines += ["", "## Passed", "", ", ".join(r["model_type"] for r in passed), "",
              "## Harness limitations", "", "| model type | reason |", "|---|---|"]
    for r in harness:
        lines.append(f"| {r['model_type']} | {r['reason'][:200].replace('|', '/')} |")
    if fused:
        lines += fused_section(rows, [json.loads(l) for l in open(fused) if l.strip()])
    Path(ROOT / "docs" / "models.md").write_text("\n".join(lines) + "\n")
    print(f"wrote docs/models.md: {len(passed)}/{len(built)} passed")


def fused_section(strict_rows: list[dict], rows: list[dict]) -> list[str]:
    built = [r for r in rows if r["status"] != "harness"]
    passed = [r for r in rows if r["status"] == "pass"]
    bugs = [r for r in rows if r["status"] == "backend bug"]
    strict_pass = {r["model_type"] for r in strict_rows if r["status"] == "pass"}
    regressions = [r for r in rows if r["model_type"] in strict_pass and r["status"] != "pass"]
    lines = ["", "## Fused eager (DeferAndFuse)", "",
             "The same model types with `--mode fused` (every op recorded, then run from the "
             "pending graph at each host read).", "",
             f"- model types tried: {len(rows)}; built: **{len(built)}**; passed: **{len(passed)}** "
             f"({100.0 * len(passed) / max(len(built), 1):.1f}% of those built)",
             f"- backend bugs: {len(bugs)}; types that pass in strict eager but not in fused: "
             f"{len(regressions)}", "", "| model type | stage | reason |", "|---|---|---|"]
    for r in bugs:
        lines.append(f"| {r['model_type']} | {r.get('stage', '')} | {r['reason'][:200].replace('|', '/')} |")
    return lines


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--mode", default=os.environ.get("TORCHTPU_EAGER_MODE") or "strict")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--timeout", type=int, default=180)
    p.add_argument("--out", default=str(ROOT / "build" / "zoo.jsonl"))
    p.add_argument("--types", help="comma-separated model types (instead of --limit)")
    p.add_argument("--report")
    p.add_argument("--fused", help="with --report: the same sweep's records in fused eager")
    a = p.parse_args()
    if a.one:
        print(json.dumps(run_one(a.one, a.causal, a.mode)))
    elif a.report:
        report(a.report, a.fused)
    else:
        sweep(a)
