"""Host speed on small work (issue #15): torchtpu's eager modes against PyTorch's CPU eager.

People run pytest suites and model-zoo sweeps of tiny models on "tpu", where the host overhead
per op is the whole cost. Measured in one process, interleaved, medians of the repeats (the
training steps: all columns in one fresh process, alternating in blocks of 0.3 s, each column's
steps/s over the CPU's in the same round, medians over 3 processes x 10 rounds; and each column
alone in a process of its own, medians of 5 rounds, as a cross-check):

    tiny ops     64x64 float32 `x + y` with the results kept alive (allocation included) and
                 discarded, `x.add_(y)` and `torch.add(x, y, out=o)`: microseconds per op on the
                 CPU and on "tpu" in
                 strict, fused and debug eager (fused: recording, planning from the plan cache
                 and running, per op, over a loop of 200 ops and a synchronize)
    streams      a synchronize with nothing pending; a strict round trip (x.add_(y), then
                 synchronize)
    fused region the host time per recorded op of a cached region of 11 element-wise ops
                 (record, then flush: lookup and run)
    training     steps per second of examples/train.py's model (d_model 64, 2 layers, 16x64
                 tokens, AdamW) and of a small nn.TransformerEncoder of the same size, on the CPU
                 and on "tpu" in strict and fused eager, and in strict eager with all work on
                 the stream's worker (TORCHTPU_INLINE=0) and with the backward pass on the
                 autograd engine's thread (PyTorch's default); and the host time per step of the
                 simulated MXU's matrix products, the bound no eager mode passes; and fused
                 eager's ceiling: the step's Python and autograd (the CPU step's time outside
                 PyTorch's ops, torch.profiler) plus fused eager's device work, i.e. fused eager
                 with recording and flushing free

An OpenMP team that torchtpu leaves behind would slow the CPU's loops in the same process: a
second idle team makes libgomp throttle every team, and the CPU's training step then took 1.75x
as long (docs/runtime.md, "One OpenMP team"; training figures taken before 2026-12-05 were
measured against a CPU column slowed so). Before the training rows, the benchmark counts the
OpenMP threads of teams other than the initial thread's once torchtpu is idle (by name: a helper
takes the name of the thread that started its team) and warns when there are any.

The GEMM targets of the issue are measured by benchmarks/gemm.py.

    python benchmarks/host_speed.py             # about 9 minutes on 2 cores
    python benchmarks/host_speed.py --quick     # fewer repeats
    python benchmarks/host_speed.py --plot-only # redraw results/host_speed.png from its JSON
    python benchmarks/host_speed.py --alone encoder fused --seconds 4
                                                # one training column alone in this process
                                                # (steps/s; for comparisons across processes)
    python benchmarks/host_speed.py --paired encoder cpu,strict --rounds 12 --seconds 0.3
                                                # columns alternating in one process: steps/s
                                                # per round, JSON
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchtpu

import common
import compile as compile_bench
import eager_modes

MODES = ("cpu", "strict", "fused", "debug")
TARGETS = {  # issue #15
    "add_kept_strict_over_cpu": 1.5,
    "add_kept_fused_over_cpu": 1.0,
    "sync_idle_us": 10.0,
    "round_trip_us": 20.0,
    "fused_region_us_per_op": 5.0,
    "train_strict_over_cpu": 0.9,
    # (Re-scoped from 1.1: fused eager's ceiling on these steps, with recording and flushing
    # free, measured 0.99x-1.08x (encoder) and 1.00x-1.20x (example): its device work is about
    # strict's at these sizes, where fusion saves no memory traffic (docs/host-speed.md,
    # "Targets and where they stand").)
    "train_fused_over_cpu": 0.9,
}


def in_mode(mode, fn):
    """fn run in `mode` (the CPU column runs it as it is), synchronized."""
    if mode == "cpu":
        return fn

    def run():
        with torchtpu.eager_mode(mode):
            result = fn()
            common.sync()
            del result
    return run


def tiny_ops(ops: int):
    """Per-op callables over `ops` ops, for each column."""
    cases = {}
    for name in ("add_kept", "add_discarded", "add_inplace", "add_out"):
        cases[name] = {}
        for mode in MODES:
            device = "cpu" if mode == "cpu" else "tpu"
            x = torch.randn(64, 64, device=device)
            y = torch.randn(64, 64, device=device)
            o = torch.empty(64, 64, device=device)

            def body(x=x, y=y, o=o, name=name):
                if name == "add_kept":
                    return [x + y for _ in range(ops)]
                if name == "add_discarded":
                    for _ in range(ops):
                        x + y
                    return None
                if name == "add_out":
                    for _ in range(ops):
                        torch.add(x, y, out=o)
                    return None
                for _ in range(ops):
                    x.add_(y)
                return None
            cases[name][mode] = in_mode(mode, body)
    return cases


def stream_costs(reps: int):
    """Microseconds of a synchronize with nothing pending and of a strict round trip."""
    x = torch.randn(64, 64, device="tpu")
    y = torch.randn(64, 64, device="tpu")
    common.sync()
    idle, trip = [], []
    for _ in range(reps):
        start = time.perf_counter()
        torch.tpu.synchronize()
        idle.append(time.perf_counter() - start)
        start = time.perf_counter()
        x.add_(y)
        torch.tpu.synchronize()
        trip.append(time.perf_counter() - start)
    return 1e6 * common.median(idle), 1e6 * common.median(trip)


def training(make):
    """A training step (compile.py's cases: AdamW, loss.item() at the end) run in each column;
    "strict_worker" is strict eager with every piece of work handed to the stream's worker
    (work on an idle stream otherwise runs on the issuing thread: docs/runtime.md);
    "strict_engine" is strict eager with the backward pass on the autograd engine's thread for
    "tpu", PyTorch's default (torchtpu runs it on the calling thread: docs/runtime.md)."""
    def column(mode):
        if mode == "strict_engine":
            step = in_mode("strict", make("strict"))

            def run_on_engine_thread():
                with torch.autograd.set_multithreading_enabled(True):
                    step()
            return run_on_engine_thread
        if mode != "strict_worker":
            return in_mode(mode, make("cpu" if mode == "cpu" else "strict"))
        step = in_mode("strict", make("strict"))

        def run():
            previous = torchtpu._C.inline_work()
            torchtpu._C.set_inline_work(0)
            try:
                step()
            finally:
                torchtpu._C.set_inline_work(previous)
        return run
    return column


def fused_ceiling(cpu_step, fused_device_s: float, steps: int = 20) -> dict:
    """The most steps/s fused eager can reach against the CPU if recording and flushing cost
    nothing: every eager mode runs the step's Python and autograd as the CPU does, and fused
    eager's device work (torchtpu.metrics.host_times(): its kernels, regions and matrix
    products) on top. The Python and autograd share is the CPU step's time outside PyTorch's
    ops under torch.profiler, scaled by the unprofiled/profiled step times (the profiler's cost
    spread evenly); the CPU's step is timed in the same run, next to it."""
    from torch.profiler import ProfilerActivity, profile
    timed = []
    for _ in range(steps):
        start = time.perf_counter()
        cpu_step()
        timed.append(time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            cpu_step()
        profiled = (time.perf_counter() - start) / steps
    in_ops = sum(e.self_cpu_time_total for e in prof.key_averages()
                 if e.key.startswith("aten::")) / 1e6 / steps
    step = common.median(timed)
    outside = max(profiled - in_ops, 0.0) * step / profiled
    return {"cpu_step_ms": 1e3 * step, "outside_ops_ms": 1e3 * outside,
            "ceiling_over_cpu": step / (outside + fused_device_s)}


def extra_openmp_threads() -> int:
    """Threads that are OpenMP helpers of a team other than the initial thread's, once torchtpu
    is idle: threads sharing a name that is not the initial thread's."""
    import collections
    import os
    time.sleep(0.1)  # (the stream's worker ends its team after 10 ms idle)
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    initial = open(f"/proc/self/task/{os.getpid()}/comm").read().strip()
    counts = collections.Counter(n for n in names if n != initial)
    return sum(c - 1 for c in counts.values())


def alone_steps_per_s(model: str, column: str, seconds: float) -> float:
    """Steps/s of one training column run alone in a fresh process (--alone)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, __file__, "--alone", model, column, "--seconds",
                          str(seconds)], capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1].split("alone: ")[1].split()[0])


def paired_rates(model: str, columns, rounds: int, block: float) -> dict:
    """Steps/s of every column in one fresh process (--paired), alternating in blocks of `block`
    seconds: round r runs the columns in an order rotated by r. Returns each column's steps/s
    per round."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, __file__, "--paired", model, ",".join(columns),
                          "--rounds", str(rounds), "--seconds", str(block)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def steps_per_s(step, seconds: float) -> float:
    """Steps/s of `step` run for `seconds`."""
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        steps += 1
    return steps / (time.perf_counter() - start)


def run_paired(model: str, columns, rounds: int, block: float) -> dict:
    step = training_step(model)
    fns = {column: step(column) for column in columns}
    for fn in fns.values():
        for _ in range(5):
            fn()
    rates = {column: [] for column in columns}
    for r in range(rounds):
        order = list(columns[r % len(columns):]) + list(columns[:r % len(columns)])
        for column in order:
            rates[column].append(steps_per_s(fns[column], block))
    return rates


def example_step():
    return training(compile_bench.example_case())


def encoder_step():
    def model():
        layer = nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    return training(compile_bench.training_case(
        model, lambda device: (torch.randn(16, 64, 64, device=device),
                               torch.randn(16, 64, 64, device=device)), F.mse_loss))


def training_step(model: str):
    """The column maker (training()) of "example" or "encoder"."""
    return {"example": example_step, "encoder": encoder_step}[model]()


# One color per column in both panels.
COLORS = {"cpu": "tab:blue", "strict": "tab:orange", "strict_worker": "tab:purple",
          "strict_engine": "tab:brown", "fused": "tab:green", "debug": "tab:red"}


def drawing(results):
    """The plot of a run's results (as written to its JSON)."""
    def draw(plt):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4))
        ops_rows = results["per_op_us"]
        width = 0.2
        for k, mode in enumerate(MODES):
            axes[0].bar([i + (k - 1.5) * width for i in range(len(ops_rows))],
                        [r[mode] for r in ops_rows.values()], width, label=mode,
                        color=COLORS[mode])
        axes[0].set_xticks(range(len(ops_rows)))
        axes[0].set_xticklabels(list(ops_rows))
        axes[0].set_ylabel("host us per op (measured)")
        axes[0].set_title("tiny ops, 64x64 float32")
        train = results["train_steps_per_s"]
        # Ratios over the CPU in the same round (paired), or, in results written before the
        # paired measurement, of the columns' medians alone.
        over = results.get("train_over_cpu") or {
            name: {c: v / r["cpu"] for c, v in r.items()} for name, r in train.items()}
        train_columns = ["cpu"] + [c for c in ("strict", "strict_worker", "strict_engine", "fused")
                                   if all(c in r for r in over.values())]
        w = 0.8 / len(train_columns)
        for k, mode in enumerate(train_columns):
            axes[1].bar([i + (k - (len(train_columns) - 1) / 2) * w for i in range(len(train))],
                        [1.0 if mode == "cpu" else over[name][mode] for name in train], w,
                        label=mode, color=COLORS[mode])
        alone = results.get("train_steps_per_s_alone", {})
        for mode in ("strict", "fused"):
            if mode in train_columns and alone:
                k = train_columns.index(mode)
                xs = [i + (k - (len(train_columns) - 1) / 2) * w for i in range(len(train))]
                axes[1].scatter(xs, [alone[name][mode] / alone[name]["cpu"] for name in train],
                                marker="o", s=18, facecolors="none", edgecolors="black", zorder=3,
                                label="alone in its process" if mode == "strict" else None)
        ceilings = results.get("train_fused_ceiling", {})
        if "fused" in train_columns and ceilings:
            k = train_columns.index("fused")
            xs = [i + (k - (len(train_columns) - 1) / 2) * w for i in range(len(train))]
            axes[1].scatter([x for x, name in zip(xs, train) if name in ceilings],
                            [ceilings[name]["ceiling_over_cpu"] for name in train if name in ceilings],
                            marker="_", s=400, color="black", zorder=3,
                            label="fused, recording and flush free")
        axes[1].axhline(1.0, color="gray", lw=0.8)
        axes[1].set_xticks(range(len(train)))
        axes[1].set_xticklabels(list(train))
        axes[1].set_ylabel("training steps/s over PyTorch CPU eager's (same round)")
        axes[1].set_title("small training steps")
        axes[0].legend(fontsize=8)
        axes[1].set_ylim(0, axes[1].get_ylim()[1] + 0.3)  # (room for the legend above the bars)
        axes[1].legend(fontsize=7, ncol=3, loc="upper center")
        return fig
    return draw


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the plot from the last run's JSON, measuring nothing")
    parser.add_argument("--alone", nargs=2, metavar=("MODEL", "COLUMN"),
                        help="run one training column (example|encoder, cpu|strict|strict_worker|strict_engine|fused) alone "
                             "for --seconds and print its steps/s")
    parser.add_argument("--paired", nargs=2, metavar=("MODEL", "COLUMNS"),
                        help="run the training columns (comma-separated) of one model in this "
                             "process, alternating in blocks of --seconds for --rounds rounds, "
                             "and print their steps/s per round as JSON")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=4.0)
    return parser.parse_args()


def measure_tiny_ops(results: dict, ops: int, repeats: int) -> None:
    print(f"== tiny ops (64x64 float32), {ops} ops per call, median of {repeats} interleaved", flush=True)
    for name, fns in tiny_ops(ops).items():
        times = common.interleaved(fns, repeats=repeats, warmup=2)
        row = {mode: 1e6 * common.median(times[mode]) / ops for mode in MODES}
        results["per_op_us"][name] = row
        print(f"  {name:14s} " + "  ".join(f"{m} {row[m]:6.2f} us" for m in MODES) +
              f"   tpu/cpu: strict {row['strict'] / row['cpu']:.2f}x, fused "
              f"{row['fused'] / row['cpu']:.2f}x", flush=True)


def measure_streams(results: dict) -> None:
    idle, trip = stream_costs(2000)
    results["sync_idle_us"], results["round_trip_us"] = idle, trip
    print(f"== streams: synchronize with nothing pending {idle:.2f} us, strict round trip "
          f"(add_, synchronize) {trip:.2f} us", flush=True)


def measure_fused_region(results: dict, quick: bool) -> None:
    # (Medians of 7 blocks of recorded regions: one block moves with the VM's phase.)
    blocks = [eager_modes.capture_cost(reps=50 if quick else 150) for _ in range(7)]
    rec = common.median([b[0] for b in blocks])
    fl = common.median([b[1] for b in blocks])
    total = common.median([b[0] + b[1] for b in blocks])
    results["fused_region_us_per_op"] = {"record": rec, "flush": fl, "total": total,
                                         "blocks": [list(b) for b in blocks]}
    print(f"== fused eager, cached region of 11 ops, median of {len(blocks)} blocks: record "
          f"{rec:.2f} + flush {fl:.2f}, total {total:.2f} us per op", flush=True)


# Training steps, measured two ways (docs/host-speed.md, "How host time is measured"):
# - paired: all columns in one fresh process, alternating in blocks of a fraction of a
#   second (the order rotating from round to round), each column's steps/s over the CPU's
#   in the same round; medians over the rounds of several processes. This VM runs at one of
#   two speeds for seconds at a time (about 110 and 70 steps/s for the encoder's CPU step),
#   for the CPU column as much as for torchtpu's: only columns measured within the same
#   second compare. The targets are checked on these ratios.
# - alone: each column alone in a process of its own, the processes alternating (medians),
#   as a user's program runs one mode: the cross-check that no column leaves state behind
#   that weighs on the next in the paired processes (the OpenMP teams are counted below).
TRAINING_COLUMNS = ("cpu", "strict", "strict_worker", "strict_engine", "fused")
ALONE_COLUMNS = ("cpu", "strict", "fused")


def measure_training(results: dict, quick: bool) -> None:
    processes, rounds, block = (1, 4, 0.25) if quick else (3, 10, 0.3)
    alone_rounds, seconds = (1, 1.5) if quick else (5, 2.0)
    paired = {name: [paired_rates(name, TRAINING_COLUMNS, rounds, block) for _ in range(processes)]
              for name in ("example", "encoder")}
    alone = {}
    for r in range(alone_rounds):
        for name in ("example", "encoder"):
            for column in ALONE_COLUMNS:
                alone[(r, name, column)] = alone_steps_per_s(name, column, seconds)
    for name, make in (("example", example_step()), ("encoder", encoder_step())):
        fns = {mode: make(mode) for mode in TRAINING_COLUMNS}
        for fn in fns.values():
            fn()
        extra = extra_openmp_threads()
        results.setdefault("extra_openmp_threads", {})[name] = extra
        if extra:
            print(f"   WARNING: {extra} OpenMP threads of other threads' teams are alive: the CPU "
                  f"column's loops are throttled, and the ratios below flatter torchtpu", flush=True)
        row = training_ratios(results, name, paired[name], (processes, rounds, block))
        alone_samples = {c: [alone[(r, name, c)] for r in range(alone_rounds)] for c in ALONE_COLUMNS}
        report_alone(results, name, alone_samples)
        mxu_bound_and_ceiling(results, name, fns, row)


def training_ratios(results: dict, name: str, runs: list, shape: tuple) -> dict:
    """The paired processes' steps/s and ratios over the CPU's for one model; its row."""
    processes, rounds, block = shape
    row = {c: common.median([rate for run in runs for rate in run[c]]) for c in TRAINING_COLUMNS}
    over_cpu = {c: common.median([a / b for run in runs for a, b in zip(run[c], run["cpu"])])
                for c in TRAINING_COLUMNS if c != "cpu"}
    per_process = {c: [common.median([a / b for a, b in zip(run[c], run["cpu"])]) for run in runs]
                   for c in over_cpu}
    results["train_steps_per_s"][name] = row
    results.setdefault("train_over_cpu", {})[name] = over_cpu
    results.setdefault("train_paired_runs", {})[name] = runs
    print(f"== training, {name}: steps/s over the CPU's in the same round (paired, median of "
          f"{processes} processes x {rounds} rounds of {block} s blocks): strict "
          f"{over_cpu['strict']:.2f}x (per process "
          f"{' '.join(f'{v:.2f}' for v in per_process['strict'])}), fused "
          f"{over_cpu['fused']:.2f}x ({' '.join(f'{v:.2f}' for v in per_process['fused'])}), "
          f"all work on the worker {over_cpu['strict_worker']:.2f}x, backward on the engine's "
          f"thread {over_cpu['strict_engine']:.2f}x; steps/s cpu {row['cpu']:.1f}, strict "
          f"{row['strict']:.1f}, fused {row['fused']:.1f}", flush=True)
    return row


def report_alone(results: dict, name: str, alone_samples: dict) -> None:
    alone_row = {c: common.median(v) for c, v in alone_samples.items()}
    results.setdefault("train_steps_per_s_alone", {})[name] = alone_row
    results.setdefault("train_steps_per_s_alone_runs", {})[name] = alone_samples
    print(f"   each column alone in its own process (median of {len(alone_samples['cpu'])}): cpu "
          f"{alone_row['cpu']:.1f} ({' '.join(f'{v:.0f}' for v in alone_samples['cpu'])}), strict "
          f"{alone_row['strict']:.1f} ({alone_row['strict'] / alone_row['cpu']:.2f}x; "
          f"{' '.join(f'{v:.0f}' for v in alone_samples['strict'])}), fused {alone_row['fused']:.1f} "
          f"({alone_row['fused'] / alone_row['cpu']:.2f}x; "
          f"{' '.join(f'{v:.0f}' for v in alone_samples['fused'])})", flush=True)


def mxu_bound_and_ceiling(results: dict, name: str, fns: dict, row: dict) -> None:
    """What bounds a step on "tpu": the simulated MXU's matrix products (TPU numerics, run on the
    host), which no eager mode shortens. The CPU's step time over their host time per step is
    the most steps/s tpu/CPU any mode can reach. And fused eager's ceiling."""
    mxu, device = {}, {}
    for mode in ("strict", "fused"):
        torchtpu.metrics.reset()
        for _ in range(5):
            fns[mode]()
        mxu[mode] = eager_modes.mxu_host_seconds() / 5
        device[mode] = eager_modes.device_host_seconds() / 5
    cpu_step = 1.0 / row["cpu"]
    bound = cpu_step / mxu["fused"] if mxu["fused"] > 0 else float("inf")
    results.setdefault("train_mxu_bound", {})[name] = {
        "cpu_step_ms": 1e3 * cpu_step, "mxu_ms_per_step": {m: 1e3 * v for m, v in mxu.items()},
        "bound_over_cpu": bound}
    print(f"   the simulated MXU's products: {1e3 * mxu['fused']:.1f} ms of host time per "
          f"step (the CPU's whole step {1e3 * cpu_step:.1f} ms): no mode above "
          f"{bound:.2f}x the CPU's steps/s", flush=True)
    ceiling = fused_ceiling(fns["cpu"], device["fused"])
    ceiling["device_ms_per_step"] = {m: 1e3 * v for m, v in device.items()}
    results.setdefault("train_fused_ceiling", {})[name] = ceiling
    print(f"   fused eager with its recording and flush free: at most "
          f"{ceiling['ceiling_over_cpu']:.2f}x the CPU's steps/s (its device work "
          f"{1e3 * device['fused']:.1f} ms, strict's {1e3 * device['strict']:.1f} ms, plus "
          f"the step's Python and autograd {ceiling['outside_ops_ms']:.1f} ms, against the "
          f"CPU's step {ceiling['cpu_step_ms']:.1f} ms in the same measurement)", flush=True)


def check_targets(results: dict) -> None:
    kept = results["per_op_us"]["add_kept"]
    measured = {
        "add_kept_strict_over_cpu": kept["strict"] / kept["cpu"],
        "add_kept_fused_over_cpu": kept["fused"] / kept["cpu"],
        "sync_idle_us": results["sync_idle_us"],
        "round_trip_us": results["round_trip_us"],
        "fused_region_us_per_op": results["fused_region_us_per_op"]["total"],
        "train_strict_over_cpu": min(r["strict"] for r in results["train_over_cpu"].values()),
        "train_fused_over_cpu": min(r["fused"] for r in results["train_over_cpu"].values()),
    }
    higher_is_better = {"train_strict_over_cpu", "train_fused_over_cpu"}
    print("== targets (issue #15)")
    results["targets"] = {}
    for key, target in TARGETS.items():
        value = measured[key]
        met = value >= target if key in higher_is_better else value <= target
        results["targets"][key] = {"measured": value, "target": target, "met": met}
        print(f"  {key:28s} {value:8.2f}  target {'>=' if key in higher_is_better else '<='} "
              f"{target:<5}  {'met' if met else 'MISSED'}")


def main():
    args = parse_args()
    if args.paired:
        model, columns = args.paired
        print(json.dumps(run_paired(model, columns.split(","), args.rounds, args.seconds)))
        return
    if args.alone:
        model, column = args.alone
        step = training_step(model)(column)
        for _ in range(5):
            step()
        print(f"{model} {column} alone: {steps_per_s(step, args.seconds):.1f} steps/s")
        return
    if args.plot_only:
        name = "host_speed" + ("_quick" if args.quick else "")
        common.plot(name, drawing(json.loads((common.RESULTS / f"{name}.json").read_text())))
        return
    repeats = 7 if args.quick else 21
    results = {"per_op_us": {}, "train_steps_per_s": {}}
    measure_tiny_ops(results, ops=200, repeats=repeats)
    measure_streams(results)
    measure_fused_region(results, args.quick)
    measure_training(results, args.quick)
    check_targets(results)
    name = "host_speed" + ("_quick" if args.quick else "")
    common.write_json(name, {"repeats": repeats, **results})

    common.plot(name, drawing(results))


if __name__ == "__main__":
    main()
