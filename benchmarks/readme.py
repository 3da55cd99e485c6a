"""Writes benchmarks/README.md from the results under benchmarks/results/.

Every figure in that page comes from a JSON file here: the text around the figures (the command,
what it measures) is written below, the figures are formatted from the JSON by one small function
per result file, and each section names the machine, commit and date of the run (the ``date`` in
the JSON's ``machine``, which ``common.machine()`` records; for files written before it did, the
date of the file's last commit). A JSON with no formatter below still gets a section (its file,
its run), so a new result is never left out of the page.

    python benchmarks/readme.py           # writes benchmarks/README.md
    python benchmarks/readme.py --check   # exits 1 when benchmarks/README.md is not what it writes

test/python/test_docs_figures.py fails when the committed page is not what this writes. Reads the
JSON files only (no torch import).
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
README = HERE / "README.md"


# -- number formatting -------------------------------------------------------------------------

def x(v: float, digits: int = 2) -> str:
    """A ratio: 1.23x."""
    return f"{v:.{digits}f}x"


def ms(seconds: float, digits: int = 1) -> str:
    return f"{seconds * 1e3:.{digits}f} ms"


def us(seconds: float, digits: int = 1) -> str:
    return f"{seconds * 1e6:.{digits}f} µs"


def gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.2f} GiB"


def mib(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:.1f} MiB"


def span(values, fmt=lambda v: f"{v:.2f}") -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}-{fmt(hi)}"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def label(key: str) -> str:
    return key.replace("_", " ")


# -- where and when a result was made ---------------------------------------------------------

def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def run_date(path: Path, payload: dict) -> str:
    """The date of the run: recorded in the JSON, else the date of the file's last commit (the
    file's own date when it has changes not committed yet)."""
    machine = payload.get("machine") or {}
    for value in (machine.get("date"), payload.get("date"), payload.get("started")):
        if isinstance(value, str) and len(value) >= 10 and value[4] == "-" and value[7] == "-":
            return value[:10]
    rel = str(path.relative_to(ROOT))
    if _git("status", "--porcelain", "--", rel) == "":
        date = _git("log", "-1", "--format=%cs", "--", rel)
        if date:
            return date
    return datetime.date.fromtimestamp(path.stat().st_mtime).isoformat()


def provenance(path: Path, payload: dict) -> str:
    """One line: the file, the date, the commit and the machine of the run."""
    machine = payload.get("machine") or {}
    parts = [f"[{path.name}](results/{path.name}), run {run_date(path, payload)}"]
    commit = machine.get("commit") or (payload.get("torchtpu_tree") or {}).get("commit", "")[:7]
    if commit:
        parts.append(f"at commit {commit}")
    if machine.get("cpu"):
        cores = f", {machine['cpu_count']} cores" if machine.get("cpu_count") else ""
        threads = f", {machine['torch_threads']} torch threads" if machine.get("torch_threads") else ""
        parts.append(f"on {machine['cpu']}{cores}{threads}")
    torch = machine.get("torch") or payload.get("torch")
    if torch:
        parts.append(f"torch {torch}")
    if machine.get("python"):
        parts.append(f"Python {machine['python']}")
    repriced = payload.get("repriced")
    if repriced:
        parts.append(f"estimates repriced at commit {repriced['commit']} (`python benchmarks/reprice.py`)")
    return ", ".join(parts)


# -- one formatter per result file -----------------------------------------------------------

def gemm(p: dict) -> str:
    rows = p["rows"]
    sizes = sorted({r["n"] for r in rows})
    cases = list(dict.fromkeys(r["case"] for r in rows))
    by = {(r["case"], r["n"]): r for r in rows}
    body = [[c] + [x(by[c, n]["ratio"]) if (c, n) in by else "" for n in sizes] for c in cases]
    out = ["Host speed of the simulated MXU over PyTorch's CPU GEMM at the same precision "
           "(above 1x the simulator is faster):", "",
           table(["case"] + [f"n = {n}" for n in sizes], body), ""]
    vs = [f"{c} {span([by[c, n]['ratio_vs_cpu_float32_highest'] for n in sizes if (c, n) in by], x)}"
          for c in cases if "highest" not in c]
    out.append("Against the CPU's float32 GEMM at \"highest\": " + "; ".join(vs) + ".")
    big = max(sizes)
    est = [f"{c} {ms(by[c, big]['estimated_v5e_s'], 2)}" for c in cases if (c, big) in by]
    out.append(f"Estimated v5e time of one GEMM at n = {big}: " + "; ".join(est) + ".")
    return "\n".join(out)


def vpu(payloads: dict[str, dict]) -> str:
    modes = sorted(payloads)
    size = next(iter(payloads.values()))["size"]
    ops = list(dict.fromkeys(r["op"] for p in payloads.values() for r in p["rows"]))
    by = {(m, r["op"]): r for m, p in payloads.items() for r in p["rows"]}
    body = []
    for op in ops:
        est = next(by[m, op]["estimated_tpu_s"] for m in modes if (m, op) in by)
        body.append([f"`{op}`"] + [x(by[m, op]["ratio"]) if (m, op) in by else "" for m in modes]
                    + [us(est)])
    return "\n".join([
        f"Host speed over PyTorch CPU eager on {size}x{size} float32 (above 1x the simulator is "
        "faster), and the estimated v5e time of one launch:", "",
        table(["op"] + [f"{m} eager" for m in modes] + ["estimated v5e"], body)])


def seed(p: dict) -> str:
    rows = p["rows"]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    most = max(r["reps"] for r in rows)
    body = []
    for c in cases:
        mine = [r for r in rows if r["case"] == c]
        last = next(r for r in mine if r["reps"] == most)
        body.append([f"`{c}`", span([r["ratio"] for r in mine], x), ms(last["estimated_tpu_s"], 1)])
    reps = sorted({r["reps"] for r in rows})
    return "\n".join([
        f"{p['size']}x{p['size']} float32, strict eager, host speed over PyTorch CPU eager at "
        f"{', '.join(map(str, reps))} repetitions (the range over those checkpoints), and the "
        f"estimated {p['chip']} time of {most} repetitions:", "",
        table(["case", "tpu over CPU", f"estimated {p['chip']}, {most} reps"], body)])


CASES = {"a_elementwise_chain": "(a) element-wise chain", "b_relu_matmul_add": "(b) relu(A @ B + C)",
         "c_mlp_train_step": "(c) MLP training step", "d_transformer_train_step": "(d) transformer layer training step",
         "example_train_step": "examples/train.py's step"}


def eager_modes(p: dict) -> str:
    rows = p["rows"]
    host = [[CASES.get(r["case"], r["case"])] + [ms(r[m]["host_s"]) for m in ("cpu", "debug", "strict", "fused")]
            for r in rows]
    ratios = []
    for r in rows:
        f = r["fused_vs_strict"]
        bound = f.get("host_speedup_bound")
        ratios.append([CASES.get(r["case"], r["case"]), x(f["host_speedup"]),
                       x(bound) if bound else "none (no matrix products)",
                       x(f["kernels_only_speedup"]), f"{f['peak_hbm_ratio']:.2f}",
                       x(f["estimated_tpu_speedup"])])
    cap = p["capture_us_per_op"]
    return "\n".join([
        f"Host time per iteration (median of {p['repeats']}):", "",
        table(["case", "PyTorch CPU", "debug", "strict", "fused"], host), "",
        "Fused over strict eager: host speed-up; the bound of matrix products (strict's time over "
        "its time outside them: \"at most\"); fused eager's device work alone (its ceiling); peak "
        "HBM fused / strict; estimated TPU speed-up (" + p.get("chip", "the simulated chip") + "):", "",
        table(["case", "host", "at most", "device-work ceiling", "peak HBM", "estimated TPU"], ratios), "",
        f"A cached region costs {cap['total']:.2f} µs of host time per recorded op (record "
        f"{cap['record']:.2f} + flush {cap['flush']:.2f})."])


def compile_(p: dict) -> str:
    rows = p["rows"]
    body = []
    for r in rows:
        q = r["ratios"]
        body.append([CASES.get(r["case"], r["case"]), x(q["estimated_compiled_over_strict"]),
                     x(q["host_cpu_over_compiled"]), x(q["host_inductor_over_compiled"]),
                     ms(r["compiled"]["host_s"]), str(r["compiled"]["program_runs"]),
                     str(r["compiled"]["runs_op_by_op"])])
    out = [f"Median of {p['repeats']}. Estimated TPU time compiled over strict eager; host speed of "
           "compiled over PyTorch CPU eager and over CPU Inductor (above 1x compiled is faster):", "",
           table(["case", "estimated, compiled / strict", "host, over CPU eager", "host, over Inductor",
                  "compiled host time", "programs run", "graphs run op by op"], body)]
    ct = p.get("compile_time_d")
    if ct:
        parts = [f"{label(k)} {v['compile_s']:.2f} s (Dynamo {v['dynamo_s']:.2f} s + backend "
                 f"{v['backend_s']:.2f} s)" for k, v in ct.items()]
        out += ["", "Compile time of case (d) in fresh processes: " + "; ".join(parts) + "."]
    dyn = p.get("dynamic")
    if dyn and "pow2" in dyn:
        d = dyn["pow2"]
        lengths = dyn["lengths"]
        extra = [v for v in dyn["padding_ratio"] if abs(v - 1) > 1e-9]
        first, replay = d["first_step_host_s"], d["replay_step_host_s"]
        out += ["", f"Dynamic shapes (`--dynamic-only`): {dyn['case']}, `dynamic=True`, "
                f"{len(lengths)} sequence lengths {min(lengths)}-{max(lengths)}: "
                f"{d['dynamo_compilations']} Dynamo compilations, {d['programs']} host programs, "
                f"{d['buckets']} buckets; the padding charged to the estimate "
                + (f"{span(extra, x)} between powers of two" if extra else "none")
                + "; a new length's first step over its replay "
                + span([f / r for f, r in zip(first[1:], replay[1:])], x) + " "
                f"(after the first length's compilation); largest difference from the CPU "
                f"{d['max_abs_diff_vs_cpu']:g}. Plot: [compile_dynamic.png](results/compile_dynamic.png)."]
    return "\n".join(out)


LOOP_COLUMNS = {"fused_read_each_step": "fused, loss read every step",
                "fused_no_read": "fused, no read (loop detection at its default)",
                "fused_no_read_detection_off": "fused, no read, loop detection off",
                "strict_no_read": "strict, no read"}


def loop_detection(p: dict) -> str:
    cache = p.get("plan_cache", {})
    cuts = any("repeated_ops_cuts" in c for c in cache.values())
    body = []
    for name, ratio in p["over_cpu"].items():
        c = cache.get(name, {})
        row = [LOOP_COLUMNS.get(name, label(name)), x(ratio), str(c.get("graphs", "")),
               f"{c['cache_hits']} / {c['cache_misses']}" if c else ""]
        body.append(row + ([str(c.get("repeated_ops_cuts", ""))] if cuts else []))
    return "\n".join([
        f"{p['steps']} steps, {len(p['rounds'])} rounds; steps/s over the CPU's in the same round "
        "(median of rounds), and the last round's graphs and plan-cache hits / misses of the fused "
        "columns" + (" and their loop-detection cuts" if cuts else "") + ":", "",
        table(["column", "over CPU", "graphs", "cache hits / misses"]
              + (["repeated-ops cuts"] if cuts else []), body)])


def host_speed(p: dict) -> str:
    ops = {"add_kept": "`x + y`, result kept", "add_discarded": "`x + y`, result discarded",
           "add_inplace": "`x.add_(y)`", "add_out": "`torch.add(x, y, out=o)`"}
    per_op = [[ops.get(k, k), f"{v['cpu']:.2f}"] + [f"{v[m]:.2f} ({x(v[m] / v['cpu'])})"
                                                      for m in ("strict", "fused", "debug")]
              for k, v in p["per_op_us"].items()]
    region = p["fused_region_us_per_op"]
    cols = ("strict", "fused", "strict_worker", "strict_engine")
    names = {"strict_worker": "strict, all work on the worker",
             "strict_engine": "strict, backward on autograd's thread"}
    train = [[m] + [x(p["train_over_cpu"][m][c]) for c in cols] for m in p["train_over_cpu"]]
    alone = p.get("train_steps_per_s_alone", {})
    alone_rows = [[m] + [x(v[c] / v["cpu"]) for c in ("strict", "fused")] for m, v in alone.items()]
    targets = [[label(k), f"{t['measured']:.2f}", f"{t['target']:g}", "met" if t["met"] else "not met"]
               for k, t in p.get("targets", {}).items()]
    out = [f"Microseconds per op (median of {p['repeats']}); in brackets over the CPU's "
           "(below 1x the simulator is faster):", "",
           table(["op", "CPU", "strict", "fused", "debug"], per_op), "",
           f"A synchronize with nothing pending {p['sync_idle_us']:.2f} µs; a strict round trip "
           f"(`add_`, synchronize) {p['round_trip_us']:.2f} µs; a cached fused region "
           f"{region['total']:.2f} µs per op (record {region['record']:.2f} + flush {region['flush']:.2f}).",
           "", "Training steps/s over the CPU's, columns side by side in fresh processes:", "",
           table(["model"] + [names.get(c, c) for c in cols], train)]
    if alone_rows:
        out += ["", "Each column alone in its own process (a cross-check):", "",
                table(["model", "strict", "fused"], alone_rows)]
    ceiling = p.get("train_fused_ceiling")
    if ceiling:
        out += ["", "Fused eager's ceiling (recording and flushing free), over the CPU: "
                + "; ".join(f"{m} {x(v['ceiling_over_cpu'])}" for m, v in ceiling.items()) + "."]
    if targets:
        out += ["", "Targets ([docs/host-speed.md](../docs/host-speed.md), \"Targets and where they stand\"):", "",
                table(["target", "measured", "target", ""], targets)]
    return "\n".join(out)


def host_speed_ab(p: dict) -> str:
    rows = [[label(k), f"{v['before']:.3f}", f"{v['after']:.3f}", x(v["after_over_before"], 3),
             "higher" if v["higher_is_better"] else "lower"] for k, v in p["summary"].items()]
    return "\n".join([
        f"Medians of {p['rounds']} processes per build, alternating; before: the build of "
        f"commit {p.get('before_commit') or '(unknown)'}:", "",
        table(["figure", "before", "after", "after / before", "better when"], rows)])


def zoo_time(p: dict) -> str:
    b, a, q = p["totals_s"]["before"], p["totals_s"]["after"], p["after_over_before"]
    rows = [[label(k), f"{b[k]:.1f} s", f"{a[k]:.1f} s", x(q[k])] for k in b]
    return "\n".join([
        f"{len(p['items'])} model types (every {p['every']}th), modes {p['modes'].replace(',', ', ')}; seconds summed "
        "over the items, this build against the other one:", "",
        table(["stage", "other build", "this build", "this / other"], rows), "",
        f"torchtpu's \"tpu\" stages are {(a['strict'] + a['fused']) / a['wall'] * 100:.1f}% of the "
        "items' wall time with this build."])


def dry_run(p: dict) -> str:
    run, cfg = p["run"], p["config"]
    rows = [[c["chip"], ms(c["time_s"]), f"{c['mxu_utilisation'] * 100:.1f}%", c["bottleneck"].upper(),
             gib(c["peak_memory_bytes"]), gib(c["hbm_capacity_bytes"]), "yes" if c["fits_in_hbm"] else "no"]
            for c in p["chips"]]
    return "\n".join([
        f"{run['parameters'] / 1e9:.2f}B parameters, {cfg['layers']} layers, batch {cfg['batch']} x "
        f"{cfg['seq']} tokens. This host: {run['host_wall_s']:.1f} s ({run['dry_run_ops']} ops), host "
        f"memory growth {gib(run['host_rss_growth_bytes'])}. Estimated step per chip:", "",
        table(["chip", "step", "MXU utilisation", "bottleneck", "HBM peak", "HBM", "fits"], rows)])


def calibration(p: dict) -> str:
    rows, s = p["rows"], p["summary"]

    def sec(x):
        return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.2f} s"

    body = [[r["name"], r["chip"], sec(r["measured_s"]), sec(r["estimated_s"]), f"{r['ratio']:.2f}",
             f"{r['estimated_mxu_s'] / r['measured_s']:.2f}"] for r in rows]
    return "\n".join([
        "Estimated / measured step time of each run as one chip of the measured slice ran it, and "
        "the MXU terms alone over the measured step:", "",
        table(["run", "chip", "measured", "estimated", "estimated / measured", "MXU terms / measured"], body),
        "", f"MAPE {s['mape'] * 100:.1f}% over {s['runs']} runs; fitted: {s['fitted']}. "
        "Configurations and sources: docs/insight.md, \"Calibration against published measurements\"."])


def pallas_kernels(p: dict) -> str:
    chips = list(p["rows"][0]["chips"])
    body = [[r["kernel"], f"{r['host_interpret_s'] * 1e3:.0f} ms", f"{r['host_pytorch_cpu_s'] * 1e3:.0f} ms"]
            + [f"{r['chips'][c]['estimate_over_roofline']:.2f} ({r['chips'][c]['bound']})" for c in chips]
            for r in p["rows"]]
    return "\n".join([
        "Host time of one call, Pallas' interpret mode against PyTorch on the CPU; estimated time "
        "over the roofline per chip (the bound term in brackets):", "",
        table(["kernel", "interpret", "PyTorch CPU"] + chips, body)])


def vllm(p: dict) -> str:
    w, res = p["workload"], p["results"]
    chips = sorted({c for r in res.values() for c in r.get("estimated_tokens_per_s_per_chip", {})})
    body = [[name, f"{r['host_tokens_per_s']:,.0f}", "yes" if r.get("tokens_equal_cpu_eager") else "no"]
            + [f"{r['estimated_tokens_per_s_per_chip'][c]:,.0f}" if "estimated_tokens_per_s_per_chip" in r else ""
               for c in chips]
            + [str(len(r["fallbacks"])) if "fallbacks" in r else ""]
            for name, r in res.items()]
    return "\n".join([
        f"{w['model']}; {w['prompts']} prompts x {w['max_tokens']} greedy tokens, "
        f"{w['repeats']} repeats, OMP_NUM_THREADS={w['omp_num_threads']}:", "",
        table(["configuration", "host tokens/s", "tokens equal CPU eager's"]
              + [f"estimated tokens/s, {c}" for c in chips] + ["fallbacks"], body), "",
        "Notes recorded with the run: " + " ".join(n.rstrip(".") + "." for n in p.get("notes", []))])


def collectives(p: dict) -> str:
    ar = p["all_reduce"]
    body = [[f"{r['mib']} MiB", f"{r['tpu_dist_GBps']:.2f}", f"{r['gloo_GBps']:.2f}", x(r["ratio"])] for r in ar]
    ici = p["ici"]
    equal = sum(abs(r["ratio"] - 1) < 1e-6 for r in ici)
    ddp = "; ".join(f"{n} {'process' if n == '1' else 'processes'} {ms(s)}" for n, s in p["ddp_step_s"].items())
    return "\n".join([
        "all_reduce bus bandwidth (GB/s), world size 2:", "",
        table(["size", "tpu_dist", "Gloo", "tpu_dist / Gloo"], body), "",
        f"ICI estimates equal to the ring formula: {equal} of {len(ici)} cases "
        f"({', '.join(sorted({r['kind'] for r in ici}))}; {', '.join(dict.fromkeys(r['chip'] for r in ici))}).",
        f"DDP step on the host: {ddp} (the processes share the machine's cores)."])


def torch_tpu_programs(p: dict) -> str:
    modes = p["modes"]
    progs = {r["program"] for r in p["results"]}
    count = {m: {} for m in modes}
    failed = {m: [] for m in modes}
    for r in p["results"]:
        count[r["mode"]][r["status"]] = count[r["mode"]].get(r["status"], 0) + 1
        if r["status"] == "failed":
            failed[r["mode"]].append(r["program"])
    statuses = sorted({s for c in count.values() for s in c})
    out = [f"Google TorchTPU's own programs run unmodified (`{p['command'].strip()}`), {len(progs)} programs:", "",
           table(["mode"] + statuses, [[m] + [str(count[m].get(s, 0)) for s in statuses] for m in modes])]
    lists = {m: ", ".join(f"`{f}`" for f in sorted(failed[m])) for m in modes if failed[m]}
    if len(lists) == len(modes) and len(set(lists.values())) == 1:
        out += ["", "Failed in every mode: " + next(iter(lists.values())) + "."]
    else:
        out += ["", *(f"Failed in {m}: {v}." for m, v in lists.items())]
    return "\n".join(out)


def upstream_suites(p: dict) -> str:
    modes = sorted(p["runs"], key=lambda m: (m != "strict", m))
    files = list(dict.fromkeys(f for m in modes for f in p["runs"][m]))

    def cell(m: str, f: str) -> str:
        r = p["runs"][m].get(f)
        if r is None:
            return "not run"
        t = {k: sum(c.get(k, 0) for c in r["classes"].values())
             for k in ("passed", "failed", "errors", "skipped", "n/a")}
        return f"{t['passed']} / {t['failed'] + t['errors']} / {t['skipped']} / {t['n/a']}"

    return "\n".join([
        "PyTorch's device-generic test files and OpenReg's backend tests on \"tpu\" "
        f"(`{p['generated_by']}`); passed / failed / skipped / not applicable:", "",
        table(["file"] + [f"{m} eager" for m in modes], [[f"`{f}`"] + [cell(m, f) for m in modes] for f in files])])


def upstream_distributed(p: dict) -> str:
    c = p["counts"]
    return "\n".join([
        f"PyTorch's distributed test suite ({p['suite']}) against backend `{p['backend']}`, world size "
        f"{p['world_size']}, {p['eager_mode']} eager, {p['duration_s'] / 60:.0f} minutes: "
        + ", ".join(f"{v} {k}" for k, v in c.items()) + "."])


def generic(p: dict) -> str:
    return "No summary of this file is written yet (add one to benchmarks/readme.py); its keys: " + \
        ", ".join(f"`{k}`" for k in p if k != "machine") + "."


# -- the sections ------------------------------------------------------------------------------

@dataclass
class Section:
    title: str
    commands: list[str]
    what: str
    files: list[str]                      # result JSON stems, the run the figures come from
    summarize: Callable | None = None     # payload (or {stem: payload} when grouped) -> markdown
    grouped: bool = False
    plots: list[str] = field(default_factory=list)
    smoke: list[str] = field(default_factory=list)  # JSON stems of --quick runs: listed, not summarized


SECTIONS = [
    Section("gemm", ["python benchmarks/gemm.py"],
            "GEMM throughput of the simulated MXU against PyTorch's CPU GEMM, square sizes, float32 at "
            "each matmul precision (\"highest\" six bf16 passes, \"high\" three, \"medium\" one; "
            "\"highest\" with the float32 opt-in, the CPU's float32 GEMM: docs/precision.md) and "
            "bfloat16. The CPU side runs at the same `torch.set_float32_matmul_precision`, so both "
            "sides are asked the same question (docs/host-speed.md, \"GEMMs on oneDNN\").",
            ["gemm"], gemm, plots=["gemm"]),
    Section("vpu", ["python benchmarks/vpu.py --mode debug", "python benchmarks/vpu.py"],
            "Element-wise and reduction kernels of the VPU executor against PyTorch CPU eager. In debug "
            "eager (synchronous) it measures the kernels alone; in strict eager (the default) each op "
            "is enqueued, then synchronized, so the hand-off is included.",
            ["vpu-debug", "vpu-strict"], lambda ps: vpu({p["mode"]: p for p in ps.values()}), grouped=True,
            plots=["vpu-debug", "vpu-strict"]),
    Section("seed", ["python benchmarks/seed.py"],
            "The seed microbenchmarks: `A + B`, `A @ B` and `relu(A @ B + C)` repeated, on \"tpu\" "
            "against PyTorch CPU eager at each float32 matmul precision, each repetition count a "
            "checkpoint of one interleaved run, with the cost model's estimated TPU time beside the "
            "host time.", ["seed"], seed, plots=["seed"]),
    Section("eager_modes", ["python benchmarks/eager_modes.py --repeats 3"],
            "Fused eager (DeferAndFuse) against strict and debug eager and PyTorch on the CPU, "
            "interleaved: (a) a chain of element-wise ops, (b) `relu(A @ B + C)` at \"medium\" "
            "precision, (c) an MLP training step, (d) a transformer encoder layer's training step "
            "with AdamW (`--cases cd` for a subset). Host time, peak HBM, estimated TPU time, the host "
            "cost of recording ops into a cached region, and two ceilings: the share of strict's host "
            "time in matrix products, and fused eager's device work alone (docs/host-speed.md, "
            "\"Ceilings of fused eager\").", ["eager_modes"], eager_modes, plots=["eager_modes"]),
    Section("compile", ["python benchmarks/compile.py --repeats 5", "python benchmarks/compile.py --dynamic-only"],
            "`torch.compile(backend=\"tpu\")` (each graph one program) against strict and fused eager, "
            "PyTorch CPU eager and CPU Inductor, interleaved: cases (a)-(d) of eager_modes and the "
            "training step of examples/train.py; the compile time of (d) in fresh processes without "
            "and with the disk cache; and a training step with `dynamic=True` over several sequence "
            "lengths, with its Dynamo compilations, programs and buckets (docs/compiled-mode.md).",
            ["compile"], compile_, plots=["compile"], smoke=["compile_quick"]),
    Section("loop_detection", ["python benchmarks/loop_detection.py"],
            "Fused eager on a training loop (a small `nn.TransformerEncoder`, AdamW) that reads no "
            "value until its last step, against the same loop reading its loss every step, strict "
            "eager and PyTorch on the CPU; each column in its own process, alternating over rounds "
            "(docs/eager-modes.md, \"Loops that read nothing\").",
            ["loop_detection"], loop_detection, plots=["loop_detection"]),
    Section("host_speed", ["python benchmarks/host_speed.py"],
            "Host time on small work against PyTorch CPU eager: 64x64 element-wise ops in each eager "
            "mode, a synchronize, a strict round trip, a cached fused region per op; training steps/s "
            "of the example's model and of a small `nn.TransformerEncoder` over the CPU's, side by "
            "side in fresh processes and each column alone as a cross-check; fused eager's ceiling "
            "(docs/host-speed.md).", ["host_speed"], host_speed, plots=["host_speed"],
            smoke=["host_speed_quick"]),
    Section("host_speed_ab", ["python benchmarks/host_speed_ab.py --before DIR"],
            "Host speed of this build against another (DIR: a torchtpu package directory), fresh "
            "processes alternating: 64x64 `x + y` over the CPU's per op in strict and fused eager, a "
            "cached fused region's host time per op, and training steps/s over the CPU's "
            "(docs/host-speed.md).", ["host_speed_ab"], host_speed_ab),
    Section("zoo_time", ["python benchmarks/zoo_time.py --before DIR"],
            "Wall time of a sample of transformers zoo items (strict and fused) with this build and "
            "with another one (DIR: a torchtpu package directory), alternating, each item in its own "
            "process; split into the CPU reference and each mode's \"tpu\" stages "
            "(docs/host-speed.md, \"The model zoo's wall time\").", ["zoo_time"], zoo_time),
    Section("dry_run", ["python benchmarks/dry_run.py"],
            "A Llama of TinyLlama's shape, a bf16 training step in a dry run: tensors "
            "without values, every op charged to the cost model; the estimated step per chip and what "
            "the dry run cost this host (docs/insight.md, \"Dry runs\").",
            ["dry_run"], dry_run, plots=["dry_run"]),
    Section("calibration", ["python benchmarks/calibration.py"],
            "The cost model against published TPU runs (benchmarks/calibration_set.py: MaxText "
            "recipes on v5e, v5p, v6e and Ironwood, vLLM serving on v6e), each reproduced in a dry "
            "run as one chip of the measured slice ran it (sharding, remat, int8 / fp8, ICI "
            "collectives), estimated over measured step time and the MAPE (docs/insight.md, "
            "\"Calibration\").",
            ["calibration"], calibration, plots=["calibration"]),
    Section("pallas_kernels", ["python benchmarks/pallas_kernels.py"],
            "Pallas kernels through `torchtpu.pallas` (Pallas' TPU interpret mode) against the same "
            "computation in PyTorch on the CPU (host time), and their estimated time per chip against "
            "the roofline (docs/custom-kernels.md, \"Pricing\").",
            ["pallas_kernels"], pallas_kernels),
    Section("vllm", ["python benchmarks/vllm.py --repeats 3"],
            "vLLM serving a tiny Llama with greedy decoding: torchtpu's platform on \"tpu\" in strict "
            "and fused eager against vLLM's CPU backend (eager and compiled), host tokens/s measured "
            "with one OpenMP thread each, and the estimated tokens/s per chip (docs/ecosystem.md, "
            "\"vLLM\"). Needs the vLLM environment of `bash scripts/test_vllm.sh`.",
            ["vllm"], vllm),
    Section("collectives", ["python benchmarks/collectives.py"],
            "all_reduce on `tpu_dist` with tpu tensors against Gloo on CPU tensors, in the same "
            "processes, blocks of calls alternating; the ICI cost model against the ring formula per "
            "chip; a DDP step at several process counts (docs/distributed.md).",
            ["collectives"], collectives, plots=["collectives"], smoke=["collectives_quick"]),
]

SUITES = [
    Section("torch_tpu_programs", ["python test/torch_tpu_programs/run.py"],
            "Google TorchTPU's tutorials, notebooks and examples, vendored byte for byte, run "
            "unmodified in strict and fused eager (docs/coming-from-torchtpu.md, \"TorchTPU's own "
            "programs\").", ["torch_tpu_programs"], torch_tpu_programs),
    Section("upstream_suites", ["python test/upstream/run.py"],
            "PyTorch's device-generic test files (test_ops.py's TestCommon, test_indexing.py, "
            "test_reductions.py, test_shape_ops.py) and OpenReg's backend tests, run on \"tpu\" "
            "(docs/testing.md, \"PyTorch's device-generic tests and OpenReg's tests\").",
            ["upstream_suites"], upstream_suites),
    Section("upstream_distributed", ["python test/distributed_suite/run_upstream.py"],
            "PyTorch's own distributed test suite driven against the c10d backend `tpu_dist` "
            "(docs/distributed.md, \"PyTorch's own distributed test suite\").",
            ["upstream_distributed"], upstream_distributed),
]


def _section(s: Section, payloads: dict[str, dict]) -> str:
    what = re.sub(r"(?<![\w/\[])(docs/[\w-]+\.md)", r"[\1](../\1)", s.what)
    out = [f"## {s.title}", "", "```bash", *s.commands, "```", "", what, ""]
    present = [f for f in s.files if f in payloads]
    if not present:
        return "\n".join(out + ["No result committed yet.", ""])
    for f in present:
        out.append("Run: " + provenance(RESULTS / f"{f}.json", payloads[f]) + ".")
    out.append("")
    if s.grouped:
        out.append(s.summarize({f: payloads[f] for f in present}))
    else:
        out.append((s.summarize or generic)(payloads[present[0]]))
    plots = [f"[{n}.png](results/{n}.png)" for n in s.plots if (RESULTS / f"{n}.png").exists()]
    if plots:
        out += ["", "Plot: " + ", ".join(plots) + "."]
    smoke = [f for f in s.smoke if f in payloads]
    if smoke:
        out += ["", "Smoke run (`--quick`, smaller sizes, figures not comparable): "
                + "; ".join(provenance(RESULTS / f"{f}.json", payloads[f]) for f in smoke) + "."]
    out.append("")
    return "\n".join(out)


HEADER = """\
# Benchmarks

Generated by `python benchmarks/readme.py` from the JSON files in `benchmarks/results/`: every
figure on this page is read from the file its section names, with the machine, commit and date of
that run. Do not edit by hand; rerun a benchmark, then the generator
(`test/python/test_docs_figures.py` fails when this page is not what the generator writes).
After a change of the cost model, `python benchmarks/reprice.py` recomputes the estimates the
results hold for their recorded configurations and keeps their measured host times (a run says
"estimates repriced at commit ..."); `test_docs_figures.py` fails while a result's GEMM, VPU,
seed or ICI estimates differ from the current cost model's.

Benchmarks are commands of their own, not part of the test command. Each prints ratios of two
timings taken side by side in one run (interleaved, so a noisy machine slows both sides alike) and
writes JSON (most also a plot) under `benchmarks/results/`. Host times are **measured** on the
machine named in the section; TPU times are **estimated** by torchtpu's cost model. Ratios of
speed are "tpu" over the CPU unless a section says otherwise: above 1x the simulated device is
faster on the host.
"""


def render() -> str:
    payloads = {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))}
    claimed = {f for s in SECTIONS + SUITES for f in s.files + s.smoke}
    others = [Section(stem, [], "A result file with no section written for it yet.", [stem])
              for stem in payloads if stem not in claimed]
    parts = [HEADER, "Contents: " + ", ".join(f"[{s.title}](#{s.title})" for s in SECTIONS + others)
             + "; test-suite results kept here: " + ", ".join(f"[{s.title}](#{s.title})" for s in SUITES) + "."]
    parts += ["", *(_section(s, payloads) for s in SECTIONS + others)]
    parts += ["# Test-suite results kept here", "",
              "Not benchmarks: runs of external test suites whose records live in the same folder.", ""]
    parts += [_section(s, payloads) for s in SUITES]
    return "\n".join(parts).rstrip("\n") + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when benchmarks/README.md differs")
    args = ap.parse_args()
    text = render()
    if args.check:
        same = README.exists() and README.read_text() == text
        print("benchmarks/README.md is up to date" if same else
              "benchmarks/README.md differs: run python benchmarks/readme.py")
        return 0 if same else 1
    README.write_text(text)
    print(f"wrote {README.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
