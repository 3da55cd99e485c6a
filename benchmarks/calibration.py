"""Calibration: the cost model's estimates against published measurements of real TPUs
(docs/insight.md, "Calibration against published measurements").

Each row is a published run of benchmarks/calibration_set.py (its source, configuration and
measured step time there), reproduced as one chip of the measured slice ran it
(benchmarks/calibration_rows.py, benchmarks/calibration_model.py): the chip's batch, its FSDP,
TP or EP share, the run's remat policy, int8 / fp8 where the run used them, causal flash
attention (with splash attention's unfused backward where the run used it), dropless MoE
through the grouped matmul's tiles, AdamW on the chip's shard, the collectives on the slice's
ICI, and the step as one compiled program (one launch). Each row runs in
a process of its own simulating the row's chip (TORCHTPU_CHIP) and slice (TORCHTPU_TOPOLOGY), in
a dry run (no values: 8B-671B models run on this host). The estimate is
torchtpu.metrics.estimate()["parallel_time_s"]; the ratio is estimated / measured, and the mean
absolute percentage error (MAPE) is the mean of |ratio - 1| over the rows. No constant is fitted
to the set: every constant of the cost model has a public source or a stated assumption
(python -m torchtpu info), and the model's assumptions are listed in ASSUMPTIONS.

    python benchmarks/calibration.py             # every row; writes the results and the summary
    python benchmarks/calibration.py --only 70b  # the rows whose name contains "70b" (no write)
    python benchmarks/calibration.py --markdown  # docs/insight.md's table, from the results
    python benchmarks/calibration.py --write-docs

Writes benchmarks/results/calibration.{json,png} and torchtpu/calibration.json (the MAPE and
run count that torchtpu.metrics.estimate() and python -m torchtpu estimate print as the error
band of every estimate, shipped with the package).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import calibration_set as cset  # noqa: E402
from calibration_rows import ARCHS, CONFIGS, LEFT_OUT  # noqa: E402

RESULTS = HERE / "results" / "calibration.json"
SUMMARY = ROOT / "torchtpu" / "calibration.json"
INSIGHT = ROOT / "docs" / "insight.md"
BEGIN, END = "<!-- calibration table: begin -->", "<!-- calibration table: end -->"

# What the reproduction assumes beyond the published configuration (printed with the results).
ASSUMPTIONS = [
    "The chip runs the step as eager PyTorch ops (each element-wise op through HBM, as a "
    "Hugging Face model's are), with fused flash attention; the measured runs are XLA-compiled "
    "MaxText / vLLM programs that fuse element-wise work into the matmuls.",
    "MoE routing is uniform: token-dropping runs fill each expert's buffer of tokens x top-k / "
    "experts x the capacity factor; dropless runs (MaxText's grouped matmul) are charged the "
    "kernel's tiles for one seeded draw of uniform random routing (the measured runs set "
    "use_random_routing or route by an untrained router on random tokens).",
    "FSDP all-gathers bf16 weights before each layer's forward and backward, prefetched one "
    "layer ahead on a stream of their own, and reduce-scatters float32 gradients (bf16 where "
    "the run keeps bf16 weights or gradients); TP and EP collectives run on the compute stream.",
    "Offloaded checkpoint names count as saved: their host transfers are not charged.",
    "AdamW's moments are float32 (two v7 rows keep their first moment in bf16).",
    "Serving iterations are a mean iteration of the benchmark's steady state (calibration_rows).",
    "Each measured step or serving iteration is one compiled program, charged one launch of 2 us "
    "(torchtpu's stated launch-cost assumption) instead of one per eager op: MaxText jits its "
    "train step (train.py), and vLLM on TPU runs each iteration through programs compiled "
    "ahead of time (tpu-inference's runner/compilation_manager.py, capture_model).",
]


def ordered() -> list[str]:
    """The rows run: calibration_set.py's strongest first, then the others in its order."""
    names = [n for n in cset.STRONGEST if n in CONFIGS]
    return names + [r["name"] for r in cset.ROWS if r["name"] in CONFIGS and r["name"] not in names]


def describe(row: dict, cfg: dict) -> str:
    run = cfg["run"]
    parts = []
    if "decode" in cfg:
        d = cfg["decode"]
        parts.append(f"TP {run.tp}, {d['decode']} decode tokens at context {d['context']} + "
                     f"{d['prefill']} prompt tokens per iteration")
    else:
        shard = f"FSDP {run.fsdp}" + (f" x TP {run.tp}" if run.tp > 1 else "") + \
                (f" x EP {run.ep}" if run.ep > 1 else "")
        remat = (run.remat if isinstance(run.remat, str) else
                 "saves " + (", ".join(run.remat) if run.remat else "the layer input only"))
        parts.append(f"{shard}, batch {run.batch} x {run.seq}, remat {remat}")
        if run.capacity != 1.0:
            parts.append(f"capacity {run.capacity}")
    parts.append(run.quant or "bf16")
    parts.append(f"slice {cfg['topology']}")
    return "; ".join(parts)


# --- one row, in its own process ----------------------------------------------------------------

def run_row(name: str) -> dict:
    import torch

    import torchtpu
    from calibration_model import decode_step, train_step

    cfg = CONFIGS[name]
    row = next(r for r in cset.ROWS if r["name"] == name)
    torch.set_float32_matmul_precision("medium")  # (JAX runs float32 matmuls at one pass)
    start = time.perf_counter()
    with torchtpu.dry_run():
        torchtpu.metrics.reset()
        if "decode" in cfg:
            built = decode_step(ARCHS[cfg["arch"]], cfg["run"], **cfg["decode"])
        else:
            built = train_step(ARCHS[cfg["arch"]], cfg["run"])
        eager = torchtpu.metrics.estimate(chip=row["chip"])
        # The measured step is one compiled program (ASSUMPTIONS): its launches are priced at
        # nothing and the program's one launch added.
        e = torchtpu.metrics.estimate(chip=row["chip"], launch_us=0.0)
        ops = torchtpu.metrics.op_times(chip=row["chip"], launch_us=0.0)
    estimated = e["parallel_time_s"] + eager["launch_us"] * 1e-6
    return {
        "name": name, "chip": row["chip"], "kind": row["kind"], "model": cfg["arch"],
        "configuration": describe(row, cfg), "measured_s": row["step_s"],
        "measured_as_published": f"{row['measured']} {row['measured_unit']}",
        "estimated_s": estimated, "ratio": estimated / row["step_s"],
        "source": row["source_url"], "strongest": name in cset.STRONGEST,
        "estimated_mxu_s": e["mxu_time_s"], "vpu_s": e["vpu_time_s"], "hbm_s": e["hbm_time_s"],
        "ici_s": e["ici_time_s"], "ici_hidden_s": e["ici_hidden_s"],
        "launch_s": eager["launch_us"] * 1e-6, "launches": 1,
        "eager_launches": eager["launches"], "flops": e["flops"],
        "fraction_of_peak": e["fraction_of_peak"], "bottleneck": e["bottleneck"],
        "top_ops_s": dict(sorted(ops.items(), key=lambda kv: -kv[1])[:8]),
        **built, "host_wall_s": time.perf_counter() - start,
    }


def run_in_process(name: str) -> dict:
    row = next(r for r in cset.ROWS if r["name"] == name)
    env = dict(os.environ, TORCHTPU_CHIP=row["chip"],
               TORCHTPU_TOPOLOGY=f"{row['chip']}:{CONFIGS[name]['topology']}",
               # The whole model's weights on one chip (gathered) exceed its HBM: the dry run
               # simulates a large HBM; only times are compared.
               TORCHTPU_HBM_BYTES=str(64 * 2**40))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.json"
        proc = subprocess.run([sys.executable, __file__, "--row", name, "--out", str(out)],
                              env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{name} failed:\n{proc.stdout}\n{proc.stderr}")
        return json.loads(out.read_text())


# --- the set ------------------------------------------------------------------------------------

def summary(rows: list[dict]) -> dict:
    def mape(rs):
        return sum(abs(r["ratio"] - 1) for r in rs) / len(rs) if rs else None

    chips = sorted({r["chip"] for r in rows})
    return {
        "mape": mape(rows), "runs": len(rows),
        "strongest_mape": mape([r for r in rows if r["strongest"]]),
        "strongest_runs": sum(r["strongest"] for r in rows),
        "per_chip": {c: {"mape": mape([r for r in rows if r["chip"] == c]),
                         "runs": sum(r["chip"] == c for r in rows)} for c in chips},
        "fitted": "nothing: every constant has a public source or a stated assumption",
        "mean_ratio": sum(r["ratio"] for r in rows) / len(rows) if rows else None,
        "held_out_factor": held_out(rows),
    }


def held_out(rows: list[dict]) -> dict | None:
    """A diagnostic, not applied to any estimate: one factor on every estimate, fitted on half
    the rows (the median of measured / estimated over every other row) and the MAPE it gives on
    the other half, both ways. How much of the error a single constant could remove."""
    if len(rows) < 4:
        return None
    halves = (rows[0::2], rows[1::2])
    out = {}
    for name, fit, test in (("even_rows_fit", *halves), ("odd_rows_fit", *halves[::-1])):
        ratios = sorted(1 / r["ratio"] for r in fit)
        factor = ratios[len(ratios) // 2] if len(ratios) % 2 else \
            (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
        out[name] = {"factor": factor, "held_out_runs": len(test),
                     "held_out_mape": sum(abs(r["ratio"] * factor - 1) for r in test) / len(test)}
    return out


def package_summary(payload: dict) -> dict:
    """What torchtpu ships (torchtpu/calibration.json): the error band of every estimate."""
    s = payload["summary"]
    return {"mape": round(s["mape"], 4), "runs": s["runs"],
            "per_chip": {c: {"mape": round(v["mape"], 4), "runs": v["runs"]}
                         for c, v in s["per_chip"].items()},
            "date": payload["machine"]["date"], "commit": payload["machine"].get("commit", ""),
            "source": "benchmarks/results/calibration.json (python benchmarks/calibration.py)"}


def markdown(payload: dict) -> str:
    """docs/insight.md's calibration table, from the results."""
    s = payload["summary"]
    lines = ["| run | chip | configuration (one chip's share) | measured | estimated | ratio |",
             "|---|---|---|---|---|---|"]
    for r in payload["rows"]:
        star = " *" if r["strongest"] else ""
        lines.append(f"| {r['name']}{star} | {r['chip']} | {r['configuration']} | "
                     f"{_seconds(r['measured_s'])} | {_seconds(r['estimated_s'])} | "
                     f"{r['ratio']:.2f} |")
    per_chip = ", ".join(f"{c} {v['mape'] * 100:.0f}% ({v['runs']})"
                         for c, v in s["per_chip"].items())
    fits = "; ".join(f"x{v['factor']:.2f} gives {v['held_out_mape'] * 100:.1f}% on the other "
                     f"{v['held_out_runs']}" for v in (s["held_out_factor"] or {}).values())
    lines += ["", f"MAPE **{s['mape'] * 100:.1f}%** over {s['runs']} runs (the {s['strongest_runs']} "
              f"marked * : {s['strongest_mape'] * 100:.1f}%; per chip: {per_chip}); mean ratio "
              f"{s['mean_ratio']:.2f}. Fitted: {s['fitted']}. Diagnostic, not applied: one factor "
              f"fitted on half the rows ({fits}).", "", "Sources:", ""]
    lines += [f"- {r['name']}: {r['source']}" for r in payload["rows"]]
    misses = [r for r in payload["rows"] if abs(r["ratio"] - 1) > 0.15]
    if misses:
        lines += ["", "The estimate's terms where the ratio is off by more than 15% (seconds; the "
                  "ICI not hidden is what compute did not cover):", ""]
        lines += [f"- {r['name']} ({r['ratio']:.2f}): MXU {r['estimated_mxu_s']:.3g}, VPU "
                  f"{r['vpu_s']:.3g}, HBM {r['hbm_s']:.3g}, ICI {r['ici_s']:.3g} of which "
                  f"{r['ici_s'] - r['ici_hidden_s']:.3g} not hidden, one launch (the program "
                  f"of {r['eager_launches']} eager ops), step {r['estimated_s']:.3g} against "
                  f"{r['measured_s']:.3g} measured" for r in misses]
    lines += ["", "Not run:", ""] + [f"- {n}: {why}" for n, why in payload["left_out"].items()]
    return "\n".join(lines) + "\n"


def _seconds(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def write_docs(payload: dict) -> bool:
    """Puts the table between docs/insight.md's markers; True when the page changed."""
    text = INSIGHT.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{markdown(payload)}{END}{tail}"
    if new != text:
        INSIGHT.write_text(new)
    return new != text


def draw(rows: list[dict], mape: float):
    def fig_of(plt):
        fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.5))
        names = [f"{r['name']} ({r['chip']})" for r in rows][::-1]
        ratios = [r["ratio"] for r in rows][::-1]
        mxu = [r["estimated_mxu_s"] / r["measured_s"] for r in rows][::-1]
        ax.barh(names, ratios, color=["C0" if r["strongest"] else "C9" for r in rows][::-1],
                label="estimated / measured step")
        ax.barh(names, mxu, color="C1", height=0.35, label="MXU terms alone / measured")
        ax.axvline(1.0, color="k", lw=1)
        ax.axvspan(1 - mape, 1 + mape, color="0.85", zorder=0, label=f"±MAPE ({mape:.0%})")
        ax.set_xlabel("estimated / measured (dark: calibration_set.py's strongest rows)")
        ax.set_title("Cost model against published TPU measurements")
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        return fig
    return fig_of


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="run the rows whose name contains this (nothing written)")
    p.add_argument("--markdown", action="store_true", help="print docs/insight.md's table")
    p.add_argument("--write-docs", action="store_true", help="write docs/insight.md's table")
    p.add_argument("--row", help=argparse.SUPPRESS)   # one row, in a process of its own
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.row:
        Path(args.out).write_text(json.dumps(run_row(args.row)))
        return
    if args.markdown or args.write_docs:
        payload = json.loads(RESULTS.read_text())
        if args.markdown:
            print(markdown(payload), end="")
        if args.write_docs:
            print("wrote docs/insight.md" if write_docs(payload) else "docs/insight.md is up to date")
        return
    names = [n for n in ordered() if not args.only or args.only in n]
    rows = []
    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {name} ...", flush=True)
        r = run_in_process(name)
        rows.append(r)
        print(f"    {r['configuration']}\n    estimated {_seconds(r['estimated_s'])}, measured "
              f"{_seconds(r['measured_s'])}, ratio {r['ratio']:.2f} (MXU {r['estimated_mxu_s']:.3g} s, "
              f"VPU {r['vpu_s']:.3g} s, HBM {r['hbm_s']:.3g} s, ICI {r['ici_s']:.3g} s of which "
              f"{r['ici_hidden_s']:.3g} s hidden; host {r['host_wall_s']:.0f} s)\n"
              f"    source: {r['source']}", flush=True)
    s = summary(rows)
    print(f"\n{'run':<34} {'chip':<4} {'measured':>10} {'estimated':>10} {'ratio':>6}")
    for r in rows:
        print(f"{r['name']:<34} {r['chip']:<4} {_seconds(r['measured_s']):>10} "
              f"{_seconds(r['estimated_s']):>10} {r['ratio']:>6.2f}")
    strongest = (f"{s['strongest_mape'] * 100:.1f}%" if s["strongest_runs"] else "none run")
    print(f"\nMAPE {s['mape'] * 100:.1f}% over {s['runs']} runs (strongest "
          f"{s['strongest_runs']}: {strongest}); per chip: "
          + ", ".join(f"{c} {v['mape'] * 100:.1f}% ({v['runs']})" for c, v in s["per_chip"].items())
          + f". Fitted: {s['fitted']}. Mean ratio {s['mean_ratio']:.2f}.")
    if s["held_out_factor"]:
        print("Diagnostic, not applied: one factor fitted on half the rows gives, on the other "
              "half, " + "; ".join(f"x{v['factor']:.2f}: MAPE {v['held_out_mape'] * 100:.1f}% "
                                   f"({v['held_out_runs']} runs)"
                                   for v in s["held_out_factor"].values()) + ".")
    if args.only:
        return
    from common import plot, write_json

    path = write_json("calibration", {"summary": s, "assumptions": ASSUMPTIONS,
                                      "left_out": LEFT_OUT, "rows": rows})
    payload = json.loads(path.read_text())
    SUMMARY.write_text(json.dumps(package_summary(payload), indent=1) + "\n")
    print(f"wrote {SUMMARY}")
    plot("calibration", draw(rows, s["mape"]))


if __name__ == "__main__":
    main()
