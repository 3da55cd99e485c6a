"""Compiled mode (torch.compile(backend="tpu")) against eager and against PyTorch on the CPU.

Cases (a)-(d) of benchmarks/eager_modes.py and the training step of examples/train.py, each run
side by side in one process, interleaved:

    strict     torchtpu strict eager (op by op, enqueued on the stream)
    fused      torchtpu fused eager (recorded, planned, fused; plan cache)
    compiled   torch.compile(backend="tpu") in strict eager: each graph one program, replayed
               without dispatch (the training steps compile the loss and, with a capturable
               AdamW, the optimizer step; backward is AOTAutograd's compiled backward graph)
    cpu        PyTorch eager on the CPU
    inductor   torch.compile on the CPU (Inductor's C++ code): what a user would otherwise pick

For each: host time per iteration (measured, median of interleaved repeats) and, for the tpu
columns, the estimated TPU time (cost model). Also the compile time of case (d) in fresh
processes (without the disk cache, cold and warm with TORCHTPU_CACHE_DIR), and for eight
sequence lengths of a training step with dynamic=True: Dynamo compilations, programs, buckets
and the padding they charge (docs/compiled-mode.md, "Buckets of dynamic sizes").

    python benchmarks/compile.py                  # about 10 minutes on 2 cores
    python benchmarks/compile.py --quick          # small sizes, a smoke run
    python benchmarks/compile.py --dynamic-only   # the dynamic shapes part alone (1 minute)

Its estimates alone are recomputed with the current cost model by `reprice` (python
benchmarks/reprice.py compile: each case's tpu columns and the dynamic steps called as the run
calls them, untimed), the host times kept.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchtpu

import common
import eager_modes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import train as example  # noqa: E402  (examples/train.py: the model of the main job)

COLUMNS = ("strict", "fused", "compiled", "cpu", "inductor")
TPU_COLUMNS = ("strict", "fused", "compiled")


def compiler(column):
    """torch.compile for a column, or None for eager."""
    if column == "compiled":
        return lambda f: torch.compile(f, backend="tpu")
    if column == "inductor":
        return lambda f: torch.compile(f)
    return None


# --- cases: each maker(column) returns a step function --------------------------------------


def chain_case(n):
    def make(column):
        device = "cpu" if column in ("cpu", "inductor") else "tpu"
        x = torch.randn(n, n, device=device)
        w = torch.randn(n, n, device=device)
        fn = eager_modes.chain
        if compiler(column):
            fn = compiler(column)(fn)
        return lambda: fn(x, w)
    return make


def seed_case(n):
    def make(column):
        device = "cpu" if column in ("cpu", "inductor") else "tpu"
        a, b, c = (torch.randn(n, n, device=device) for _ in range(3))

        def body(a, b, c):
            return torch.relu(a @ b + c)
        fn = compiler(column)(body) if compiler(column) else body
        if device == "cpu":  # (PyTorch's CPU GEMM has no one-pass bf16 mode: full float32)
            return lambda: fn(a, b, c)

        def step():
            with torch.tpu.precision("medium"):
                return fn(a, b, c)
        return step
    return make


def training_case(make_model, make_batch, loss_fn):
    def make(column):
        device = "cpu" if column in ("cpu", "inductor") else "tpu"
        torch.manual_seed(0)
        model = make_model().to(device)
        x, target = make_batch(device)
        capturable = column == "compiled"  # (step counts on the device: the step compiles whole)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=capturable)

        def loss_of(x, target):
            return loss_fn(model(x), target)
        opt_step = opt.step
        if compiler(column):
            loss_of = compiler(column)(loss_of)
            opt_step = compiler(column)(opt.step)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_of(x, target)
            loss.backward()
            opt_step()
            return loss.item()
        return step
    return make


def mlp_case(quick):
    d, h, b = (256, 1024, 64) if quick else (1024, 4096, 256)
    return training_case(
        lambda: nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d)),
        lambda device: (torch.randn(b, d, device=device), torch.randn(b, d, device=device)),
        F.mse_loss)


def transformer_case(quick):
    d, heads, ff, seq, b = (128, 4, 512, 64, 4) if quick else (512, 8, 2048, 256, 8)
    return training_case(
        lambda: nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True,
                                           activation="gelu"),
        lambda device: (torch.randn(b, seq, d, device=device),
                        torch.randn(b, seq, d, device=device)),
        F.mse_loss)


EXAMPLE = dict(vocab=80, d_model=64, layers=2, heads=4, context=64, batch=16)


def example_model():
    e = EXAMPLE
    return example.CharTransformer(e["vocab"], e["d_model"], e["layers"], e["heads"],
                                   e["context"])


def example_case():
    e = EXAMPLE

    def batch(device):
        g = torch.Generator().manual_seed(0)
        x = torch.randint(e["vocab"], (e["batch"], e["context"]), generator=g)
        y = torch.randint(e["vocab"], (e["batch"], e["context"]), generator=g)
        return x.to(device), y.to(device)

    def loss(logits, y):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    return training_case(example_model, batch, loss)


# --- measurements ---------------------------------------------------------------------------


def estimate_of(fn):
    """Estimated TPU seconds of one call (after a warm call), the counters of that call, the
    host seconds its matrix products took on the MXU executor (the simulated MXU numerics), and
    the estimated MXU seconds of the call (no schedule of the same matmuls goes below them)."""
    fn()
    common.sync()
    torchtpu.metrics.reset()
    result = fn()  # kept until after the sync: fused eager skips work nobody can see
    common.sync()
    del result
    e = torchtpu.metrics.estimate()
    return (e["device_time_s"], torchtpu.metrics.compiled(), eager_modes.mxu_host_seconds(),
            e["mxu_time_s"])


def cold_compile_seconds(make):
    """Seconds of the first call of a fresh compiled step (Dynamo, AOTAutograd, capture), less
    the time of a warm call."""
    torch._dynamo.reset()
    fn = make("compiled")
    start = time.perf_counter()
    fn()
    common.sync()
    first = time.perf_counter() - start
    start = time.perf_counter()
    fn()
    common.sync()
    return first - (time.perf_counter() - start)


def compile_time_child(quick):
    """In a fresh process (--compile-time-child): the cold compile time of (d) and its parts,
    printed as one JSON line."""
    import json

    from torch._dynamo.utils import compilation_time_metrics

    seconds = cold_compile_seconds(transformer_case(quick))
    dynamo = sum(compilation_time_metrics.get("_compile.compile_inner", []))
    backend = sum(compilation_time_metrics.get("OutputGraph.call_user_compiler", []))
    c = torchtpu.metrics.compiled()
    print(json.dumps({"compile_s": seconds, "dynamo_s": dynamo - backend, "backend_s": backend,
                      "first_calls_s": seconds - dynamo, "cache": c["cache"]}))


def compile_times_across_processes(quick, repeats):
    """(d) compiled in fresh processes, interleaved `repeats` times: without the disk cache,
    with an empty cache (cold: compiles and saves) and with the cache the cold run filled
    (warm). Medians of each part: Dynamo's tracing and guards, the backend (AOTAutograd or the
    cache's load), the programs' capture and planning at their first calls."""
    import json
    import os
    import subprocess
    import tempfile

    runs = {"no_cache": [], "cold_cache": [], "warm_cache": []}
    for i in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            for kind in runs:
                env = dict(os.environ)
                env.pop("TORCHTPU_CACHE_DIR", None)
                if kind != "no_cache":
                    env["TORCHTPU_CACHE_DIR"] = cache
                out = subprocess.run(
                    [sys.executable, __file__, "--compile-time-child"] + (["--quick"] if quick else []),
                    env=env, capture_output=True, text=True, check=True)
                runs[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
                r = runs[kind][-1]
                print(f"  [{i + 1}/{repeats}] {kind}: {r['compile_s']:.2f} s (Dynamo "
                      f"{r['dynamo_s']:.2f}, backend {r['backend_s']:.2f}, first calls "
                      f"{r['first_calls_s']:.2f}); cache {r['cache']['hits']} hits "
                      f"{r['cache']['misses']} misses", flush=True)
    return {kind: {part: common.median([r[part] for r in rs])
                   for part in ("compile_s", "dynamo_s", "backend_s", "first_calls_s")}
            for kind, rs in runs.items()}


DYNAMIC_LENGTHS = [64, 80, 96, 128, 160, 192, 224, 256]


def dynamic_lengths(lengths, quick=False):
    """A training step (forward and backward) of the example's model, widened, compiled with
    dynamic=True over sequence `lengths`: Dynamo compilations, host programs, buckets (the
    programs a TPU would compile: docs/compiled-mode.md, "Buckets"), the estimated device time
    of each length's step charged as its bucket against the same step priced at its own length
    (options={"buckets": None}), and the largest difference from the CPU."""
    from torch._dynamo.utils import get_compilation_metrics

    d, layers, heads, b = (128, 2, 4, 4) if quick else (512, 2, 8, 8)
    vocab, context = EXAMPLE["vocab"], max(lengths)
    out = {"case": f"examples/train.py's CharTransformer(d_model={d}, layers={layers}, "
                   f"heads={heads}), batch {b}",
           "lengths": list(lengths)}
    for policy in ("pow2", None):
        torch._dynamo.reset()
        torchtpu.metrics.reset()  # (Dynamo's records of earlier compilations stay: counted apart)
        before = {id(m) for m in get_compilation_metrics()}
        torch.manual_seed(0)
        cpu_model = example.CharTransformer(vocab, d, layers, heads, context)
        model = copy.deepcopy(cpu_model).to("tpu")
        step = torch.compile(model, backend="tpu", dynamic=True, options={"buckets": policy})
        worst, step_s, host_s = 0.0, [], [[], []]
        for rep in range(2):  # (the second pass: every length replays its programs)
            for n in lengths:
                x_cpu = torch.randint(vocab, (b, n), generator=torch.Generator().manual_seed(n))
                x = x_cpu.to("tpu")
                torchtpu.sync()
                start = torchtpu.metrics.estimate()["device_time_s"]
                t0 = time.perf_counter()
                y = step(x)
                y.pow(2).mean().backward()
                torchtpu.sync()
                host_s[rep].append(time.perf_counter() - t0)
                if rep == 1:
                    step_s.append(torchtpu.metrics.estimate()["device_time_s"] - start)
                    diff = (y.detach().cpu() - cpu_model(x_cpu).detach()).abs().max().item()
                    worst = max(worst, diff)
                model.zero_grad(set_to_none=True)
        c = torchtpu.metrics.compiled()
        compilations = [m for m in get_compilation_metrics() if id(m) not in before]
        out[str(policy)] = {
            "dynamo_compilations": len(compilations), "dynamo_graphs": c["dynamo_graphs"],
            "recompile_reasons": c["recompilations"], "programs": c["programs"],
            "buckets": c["buckets"], "bucket_programs": c["bucket_programs"],
            "buckets_unpriced": c["buckets_unpriced"], "step_estimate_s": step_s,
            # host time of each length's first step (Dynamo's compilation where there is one,
            # the capture of its programs, a bucket's pricing) and of its replay
            "first_step_host_s": host_s[0], "replay_step_host_s": host_s[1],
            "max_abs_diff_vs_cpu": worst}
    pow2, exact = out["pow2"], out["None"]
    out["padding_ratio"] = [a / b for a, b in
                            zip(pow2["step_estimate_s"], exact["step_estimate_s"])]
    return out


def plot_dynamic(dyn, name):
    """results/<name>_dynamic.png: estimated step time per length, bucketed and exact."""
    def draw(plt):
        fig, ax = plt.subplots(figsize=(7, 4))
        lengths = dyn["lengths"]
        ax.plot(lengths, [t * 1e6 for t in dyn["pow2"]["step_estimate_s"]], "o-",
                drawstyle="steps-pre", label="charged as its bucket (pow2)")
        ax.plot(lengths, [t * 1e6 for t in dyn["None"]["step_estimate_s"]], "s--",
                label="priced at its own length")
        ax.set_xlabel("sequence length")
        ax.set_ylabel("estimated TPU time per step (us)")
        ax.set_title(f"dynamic=True: {dyn['case']}", fontsize=8)
        ax.legend(fontsize=8)
        return fig
    common.plot(name + "_dynamic", draw)


def print_dynamic(dyn):
    b, x = dyn["pow2"], dyn["None"]
    print(f"dynamic=True, a training step of {dyn['case']} over {len(dyn['lengths'])} sequence "
          f"lengths {dyn['lengths']}: {b['dynamo_compilations']} Dynamo compilations "
          f"({b['dynamo_graphs']} graphs to the backend; recompiled: {b['recompile_reasons']}), "
          f"{b['programs']} host programs; {b['buckets']} buckets (powers of two: the programs a "
          f"TPU would compile; {b['bucket_programs']} captured only to price a bucket; "
          f"unpriced: {b['buckets_unpriced'] or 'none'}); max |diff| vs CPU "
          f"{b['max_abs_diff_vs_cpu']:.2e}")
    print("  per length: estimated step time charged as its bucket / priced at its own length; "
          "host time of the first step (capture, pricing) and of a replay, buckets None / pow2:")
    for i, (n, a, e, r) in enumerate(zip(dyn["lengths"], b["step_estimate_s"],
                                         x["step_estimate_s"], dyn["padding_ratio"])):
        print(f"    L={n:3d}: {a * 1e6:8.1f} us / {e * 1e6:8.1f} us = {r:.2f}x;  host first "
              f"{x['first_step_host_s'][i] * 1e3:6.0f} / {b['first_step_host_s'][i] * 1e3:6.0f} ms,"
              f" replay {x['replay_step_host_s'][i] * 1e3:6.0f} / "
              f"{b['replay_step_host_s'][i] * 1e3:6.0f} ms")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", default="a,b,c,d,example")
    parser.add_argument("--dynamic-only", action="store_true",
                        help="only the dynamic-shapes part (buckets), kept in the JSON of the "
                             "last full run")
    parser.add_argument("--compile-time-child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def dynamic_only(quick):
    """--dynamic-only: the dynamic shapes part, written into the last full run's JSON."""
    dyn = dynamic_lengths(DYNAMIC_LENGTHS, quick)
    print_dynamic(dyn)
    path = common.RESULTS / ("compile" + ("_quick" if quick else "") + ".json")
    last = json.loads(path.read_text()) if path.exists() else {}
    last.pop("benchmark", None)
    last.pop("machine", None)
    common.write_json(path.stem, {**last, "dynamic": dyn})
    plot_dynamic(dyn, path.stem)


def tpu_estimates(fns):
    """estimate_of each tpu column's step, the fused one in fused eager."""
    out = {}
    for c in TPU_COLUMNS:
        with torchtpu.eager_mode("fused" if c == "fused" else torchtpu.get_eager_mode()):
            out[c] = estimate_of(fns[c])
    return out


def measure_case(name, make, repeats):
    """One case in every column, interleaved: host time, the estimates, the ratios; printed."""
    print(f"== {name}", flush=True)
    fns = {column: make(column) for column in COLUMNS}
    runs = {c: (eager_modes.in_mode("fused", fns[c]) if c == "fused" else fns[c])
            for c in COLUMNS}
    times = common.interleaved(runs, repeats=repeats)
    row = {"case": name}
    for c in COLUMNS:
        row[c] = {"host_s": common.median(times[c])}
    for c, (est, comp, mxu_s, mxu_est) in tpu_estimates(fns).items():
        row[c]["estimated_tpu_s"] = est
        row[c]["estimated_mxu_s"] = mxu_est
        # The host GEMMs of the simulated MXU (bf16 passes with TPU rounding) bound the host
        # time from below: no way of running the graph removes them.
        row[c]["mxu_host_s"] = mxu_s
        if c == "compiled":
            row[c]["program_runs"] = comp["program_runs"]
            row[c]["runs_op_by_op"] = comp["runs_op_by_op"]
            row[c]["program_failures"] = comp["program_failures"]
    comp_s, strict_s = row["compiled"], row["strict"]
    row["ratios"] = {
        "estimated_compiled_over_strict": comp_s["estimated_tpu_s"] / strict_s["estimated_tpu_s"],
        # the floor of that ratio: the step's MXU time alone, over strict eager's estimate
        "estimated_mxu_over_strict": comp_s["estimated_mxu_s"] / strict_s["estimated_tpu_s"],
        "host_compiled_over_strict": comp_s["host_s"] / strict_s["host_s"],
        "host_cpu_over_compiled": row["cpu"]["host_s"] / comp_s["host_s"],
        "host_inductor_over_compiled": row["inductor"]["host_s"] / comp_s["host_s"],
        # the MXU's host GEMMs alone, as a fraction of PyTorch CPU eager's whole step
        "mxu_gemms_over_cpu_step": comp_s["mxu_host_s"] / row["cpu"]["host_s"],
    }
    print_case(row)
    return row


def print_case(row):
    r, comp_s = row["ratios"], row["compiled"]
    print("  host ms: " + "  ".join(f"{c} {row[c]['host_s'] * 1e3:.2f}" for c in COLUMNS))
    print("  est. TPU ms: " + "  ".join(f"{c} {row[c]['estimated_tpu_s'] * 1e3:.3f}"
                                       for c in TPU_COLUMNS))
    print(f"  compiled/strict est. {r['estimated_compiled_over_strict']:.2f}x (its MXU time "
          f"alone: {r['estimated_mxu_over_strict']:.2f}x), host "
          f"{r['host_compiled_over_strict']:.2f}x; compiled is {r['host_cpu_over_compiled']:.2f}x "
          f"as fast as PyTorch CPU eager, {r['host_inductor_over_compiled']:.2f}x as fast as "
          f"CPU Inductor; program runs per step {comp_s['program_runs']}, graph calls op by op "
          f"{comp_s['runs_op_by_op']} {comp_s['program_failures'] or ''}", flush=True)
    print(f"  the simulated MXU's host GEMMs alone take {comp_s['mxu_host_s'] * 1e3:.2f} ms "
          f"of the compiled step ({r['mxu_gemms_over_cpu_step']:.2f}x PyTorch CPU eager's "
          f"whole step)", flush=True)


def measure_compile_times(quick):
    print("== compile time of (d) in fresh processes: no disk cache, an empty cache (cold), "
          "the cache the cold run filled (warm)", flush=True)
    compile_s = compile_times_across_processes(quick, 3)
    for kind, t in compile_s.items():
        print(f"  {kind}: {t['compile_s']:.2f} s = Dynamo's tracing {t['dynamo_s']:.2f} + "
              f"backend {t['backend_s']:.2f} + programs' first calls {t['first_calls_s']:.2f}")
    return compile_s


def plot_rows(rows, name):
    def draw(plt):
        fig, axes = plt.subplots(1, 2, figsize=(13, 4))
        labels = [r["case"] for r in rows]
        width = 0.16
        for k, c in enumerate(COLUMNS):
            axes[0].bar([i + (k - 2) * width for i in range(len(rows))],
                        [r[c]["host_s"] / r["strict"]["host_s"] for r in rows], width, label=c)
        axes[0].set_title("host time per step (measured), relative to strict eager")
        for k, c in enumerate(TPU_COLUMNS):
            axes[1].bar([i + (k - 1) * width for i in range(len(rows))],
                        [r[c]["estimated_tpu_s"] / r["strict"]["estimated_tpu_s"] for r in rows],
                        width, label=c)
        axes[1].set_title("TPU time per step (estimated), relative to strict eager")
        for ax in axes:
            ax.set_xticks(range(len(rows)))
            ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
            ax.axhline(1.0, color="gray", lw=0.5)
            ax.legend(fontsize=8)
        return fig
    common.plot(name, draw)


def case_makers(quick):
    """The cases by name: each maker(column) returns a step function."""
    n = 1024 if quick else 4096
    return {
        "a_elementwise_chain": chain_case(n),
        "b_relu_matmul_add": seed_case(n),
        "c_mlp_train_step": mlp_case(quick),
        "d_transformer_train_step": transformer_case(quick),
        "example_train_step": example_case(),
    }


def reprice(payload):
    """The estimates of each case's tpu columns and of the dynamic steps (with the ratios of
    estimates) recomputed: each step called as measure_case and dynamic_lengths call it (the
    interleaved repeats untimed: fused eager's plans and the optimizer's state depend on the
    calls before), then estimated as there; the measured host times kept. Fields a result lacks
    (written before they were recorded) stay absent."""
    quick = payload.get("benchmark", "").endswith("_quick")
    makers = case_makers(quick)
    for row in payload["rows"]:
        fns = {c: makers[row["case"]](c) for c in TPU_COLUMNS}
        common.interleaved({c: (eager_modes.in_mode("fused", fns[c]) if c == "fused" else fns[c])
                            for c in TPU_COLUMNS}, repeats=payload["repeats"])
        for c, (est, _, _, mxu_est) in tpu_estimates(fns).items():
            row[c]["estimated_tpu_s"] = est
            if "estimated_mxu_s" in row[c]:
                row[c]["estimated_mxu_s"] = mxu_est
        del fns
        q, comp_s, strict_s = row["ratios"], row["compiled"], row["strict"]
        q["estimated_compiled_over_strict"] = comp_s["estimated_tpu_s"] / strict_s["estimated_tpu_s"]
        if "estimated_mxu_over_strict" in q:
            q["estimated_mxu_over_strict"] = comp_s["estimated_mxu_s"] / strict_s["estimated_tpu_s"]
    dyn = payload.get("dynamic") or {}
    if "pow2" in dyn:
        fresh = dynamic_lengths(dyn["lengths"], quick)
        for policy in ("pow2", "None"):
            dyn[policy]["step_estimate_s"] = fresh[policy]["step_estimate_s"]
        dyn["padding_ratio"] = fresh["padding_ratio"]
    return payload


def replot(payload):
    """The plots of a result (repriced: their estimates move)."""
    plot_rows(payload["rows"], payload["benchmark"])
    if "pow2" in (payload.get("dynamic") or {}):
        plot_dynamic(payload["dynamic"], payload["benchmark"])


def main():
    args = parse_args()
    if args.compile_time_child:
        return compile_time_child(args.quick)
    if args.dynamic_only:
        dynamic_only(args.quick)
        return
    makers = case_makers(args.quick)
    wanted = args.cases.split(",")
    makers = {k: v for k, v in makers.items() if k.split("_")[0] in wanted}
    rows = [measure_case(name, make, args.repeats) for name, make in makers.items()]
    compile_s = measure_compile_times(args.quick) if "d" in wanted else None
    dyn = dynamic_lengths(DYNAMIC_LENGTHS, args.quick)
    print_dynamic(dyn)
    name = "compile" + ("_quick" if args.quick else "")
    common.write_json(name, {"rows": rows, "compile_time_d": compile_s, "dynamic": dyn,
                             "repeats": args.repeats})
    plot_rows(rows, name)
    plot_dynamic(dyn, name)


if __name__ == "__main__":
    main()
