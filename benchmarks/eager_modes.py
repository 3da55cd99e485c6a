"""Fused eager (DeferAndFuse) against strict and debug eager, side by side in one run.

Cases (issue #4): (a) a chain of element-wise ops (11: arithmetic with scalars and tensors,
relu, sigmoid, tanh, abs) on 4096^2 float32, (b) relu(A @ B + C)
at 4096^2 (float32 at "medium" precision: one bf16 MXU pass), (c) an MLP training step,
(d) a transformer block training step with AdamW. For each case and mode: host time per
iteration (measured, interleaved across modes, median), peak HBM above the inputs
(torch.tpu.max_memory_allocated) and estimated TPU time (cost model). Also the host cost of
recording ops into a cached region (capture, fingerprint, cache lookup), per op.

Two references put the host times in context: the same program run by PyTorch on the CPU
(column "PyTorch CPU"), and the share of strict eager's host time spent in matrix products on
the MXU executor (its host GEMMs, convolutions and fused attention kernels,
`torchtpu.metrics.host_times()`). Fused eager runs the same kernels with the same host library,
so strict / their time bounds its host speed-up ("at most"); a training step whose host time is
mostly matrix products cannot go much faster by fusing. Fused eager's device work alone (all
of `host_times()`: kernels, regions and matrix products) gives a second, tighter ceiling: what
fused eager would reach were its recording, flushing, dispatch, autograd and Python free.

    python benchmarks/eager_modes.py              # about 5 minutes on 2 cores
    python benchmarks/eager_modes.py --quick      # smaller sizes, for a smoke run

Its estimates alone are recomputed with the current cost model by `reprice` (python
benchmarks/reprice.py eager_modes: each case called in each mode as the run calls it, untimed),
the host times kept.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn as nn
import torchtpu

import common

MODES = ("debug", "strict", "fused")


def chain(x, w):
    y = x * 1.5 + 0.25
    y = y.relu() - 0.5
    y = y * w
    y = y.sigmoid() + x
    y = y.tanh() * 0.5
    return y.abs() + 1.0


def chain_case(n, device):
    x = torch.randn(n, n, device=device)
    w = torch.randn(n, n, device=device)
    return lambda: chain(x, w)


def seed_case(n, device):
    a, b, c = (torch.randn(n, n, device=device) for _ in range(3))

    def step():
        if device == "cpu":  # PyTorch's CPU GEMM has no one-pass bf16 mode: full float32
            return torch.relu(a @ b + c)
        with torch.tpu.precision("medium"):
            return torch.relu(a @ b + c)
    return step


def training_case(model, batch, loss_fn):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, target = batch

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), target)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def mlp_case(quick, device):
    torch.manual_seed(0)
    d, h, b = (256, 1024, 64) if quick else (1024, 4096, 256)
    model = nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d)).to(device)
    batch = (torch.randn(b, d, device=device), torch.randn(b, d, device=device))
    return training_case(model, batch, nn.functional.mse_loss)


def transformer_case(quick, device):
    torch.manual_seed(0)
    d, heads, ff, seq, b = (128, 4, 512, 64, 4) if quick else (512, 8, 2048, 256, 8)
    model = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True,
                                       activation="gelu").to(device)
    batch = (torch.randn(b, seq, d, device=device), torch.randn(b, seq, d, device=device))
    return training_case(model, batch, nn.functional.mse_loss)


# The device work that is matrix products on the MXU executor: its host GEMMs, its convolutions
# and the fused attention's kernels (PyTorch's CPU flash attention: blocks of GEMMs with their
# softmax), which fused eager runs unchanged. (host_times() counts work run on the issuing
# thread too, so the attention is in it; without it the bound would be looser.)
MXU_WORK = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_int_mm",
            "aten::mv", "aten::addmv", "aten::dot", "aten::convolution_overrideable",
            "aten::convolution_backward_overrideable",
            "aten::_scaled_dot_product_flash_attention",
            "aten::_scaled_dot_product_flash_attention_backward",
            "aten::_scaled_dot_product_fused_attention_overrideable",
            "aten::_scaled_dot_product_fused_attention_overrideable_backward"}


def mxu_host_seconds():
    """Host seconds the device's matrix products took since the last metrics reset."""
    # (work names: "aten::mm", "aten::addmm.out", "aten::mm (recorded at model.py:12)")
    return sum(t for name, t in torchtpu.metrics.host_times().items()
               if name.split(" ")[0].split(".")[0] in MXU_WORK)


def device_host_seconds():
    """Host seconds of all the device's work (kernels, fused regions, matrix products) since the
    last metrics reset: what is left of a step when recording, flushing, dispatch, autograd and
    Python are taken away."""
    return sum(torchtpu.metrics.host_times().values())


def in_mode(mode, fn, mxu_seconds=None, device_seconds=None):
    """`fn` in eager mode `mode`, synchronized; appends the host seconds of its matrix products
    and of all its device work per call to the lists given."""
    def run():
        with torchtpu.eager_mode(mode):
            before, before_all = mxu_host_seconds(), device_host_seconds()
            result = fn()  # kept until after the sync: fused eager skips work nobody can see
            common.sync()
            del result
            if mxu_seconds is not None:
                mxu_seconds.append(mxu_host_seconds() - before)
            if device_seconds is not None:
                device_seconds.append(device_host_seconds() - before_all)
    return run


def peak_and_estimate(mode, fn):
    with torchtpu.eager_mode(mode):
        fn()  # warm (optimizer state, plan cache)
        common.sync()
        torch.tpu.empty_cache()
        base = torch.tpu.memory_allocated()
        torch.tpu.reset_peak_memory_stats()
        torchtpu.metrics.reset()
        result = fn()
        common.sync()
        del result
        est = torchtpu.metrics.estimate()
        counters = torchtpu.metrics.counters()
        peak = torch.tpu.max_memory_allocated() - base
    return peak, est["device_time_s"], counters


def capture_cost(reps=300):
    """Host microseconds per op recorded into a cached region (and per op to flush it)."""
    x = torch.randn(64, device="tpu")
    torchtpu.sync()

    record = flush = 0.0
    with torchtpu.eager_mode("fused"):
        for i in range(reps + 20):
            t0 = time.perf_counter()
            y = chain(x, x)
            t1 = time.perf_counter()
            torchtpu.sync()
            t2 = time.perf_counter()
            del y
            if i >= 20:
                record += t1 - t0
                flush += t2 - t1
    ops = 11 * reps
    return 1e6 * record / ops, 1e6 * flush / ops


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", default="abcd",
                        help="the cases to run, by letter (the JSON is written only when all four run)")
    return parser.parse_args()


def measure_case(name, make, repeats):
    """One case in every mode and on the CPU, interleaved: its row."""
    fn = make("tpu")
    cpu_fn = make("cpu")
    mxu = {m: [] for m in MODES}
    device = {m: [] for m in MODES}
    runs = {m: in_mode(m, fn, mxu[m], device[m]) for m in MODES}
    runs["cpu"] = cpu_fn
    times = common.interleaved(runs, repeats=repeats)
    del cpu_fn
    row = {"case": name, "cpu": {"host_s": common.median(times["cpu"])}}
    for m in MODES:
        peak, est, counters = peak_and_estimate(m, fn)
        # (the matrix products' host time in the timed calls, the warm-up's left out)
        mxu_s = common.median(mxu[m][-repeats:])
        device_s = common.median(device[m][-repeats:])
        row[m] = {"host_s": common.median(times[m]), "peak_hbm_bytes": peak,
                  "estimated_tpu_s": est, "mxu_host_s": mxu_s,
                  "other_host_s": common.median(times[m]) - mxu_s,
                  "device_host_s": device_s}
        if m == "strict":
            # Amdahl: fused eager runs the same matrix products on the same host library, so it
            # cannot take less host time than they do (measured in strict eager's runs).
            row[m]["mxu_share"] = mxu_s / row[m]["host_s"]
        if m == "fused":
            row[m]["regions"] = counters.get("defer.regions", 0)
            row[m]["fused_regions"] = counters.get("defer.fused_regions", 0)
            row[m]["ops_fused"] = counters.get("defer.ops_fused", 0)
            row[m]["ops_recorded"] = counters.get("defer.ops_recorded", 0)
    row["fused_vs_strict"] = fused_vs_strict(row["strict"], row["fused"])
    return row


def fused_vs_strict(s, f):
    r = {
        "host_speedup": s["host_s"] / f["host_s"],
        "peak_hbm_ratio": f["peak_hbm_bytes"] / max(s["peak_hbm_bytes"], 1),
        "estimated_tpu_speedup": s["estimated_tpu_s"] / max(f["estimated_tpu_s"], 1e-12),
        # (None when the case has no matrix products to bound it)
        "host_speedup_bound": (s["host_s"] / s["mxu_host_s"]
                               if s["mxu_share"] >= 0.01 else None),
        # Fused eager's device work alone (its kernels, regions and matrix products, with
        # recording, flushing, dispatch, autograd and Python free): no host-speed work on
        # the recorder or the flush takes fused eager past strict / this.
        "kernels_only_speedup": s["host_s"] / f["device_host_s"],
    }
    if r["host_speedup_bound"] is not None:
        r["kernels_only_of_bound"] = r["kernels_only_speedup"] / r["host_speedup_bound"]
    return r


def print_row(name, row):
    s, f, r = row["strict"], row["fused"], row["fused_vs_strict"]
    bound = ("no matrix products" if r["host_speedup_bound"] is None else
             f"matrix products {s['mxu_share']:.0%} of strict: "
             f"at most {r['host_speedup_bound']:.2f}x")
    print(f"{name:28s} host: PyTorch CPU {row['cpu']['host_s']*1e3:8.1f} ms  debug "
          f"{row['debug']['host_s']*1e3:8.1f} ms  strict "
          f"{s['host_s']*1e3:8.1f} ms  fused {f['host_s']*1e3:8.1f} ms  "
          f"fused/strict speed-up {r['host_speedup']:.2f}x ({bound}; the rest: strict "
          f"{s['other_host_s']*1e3:.1f} ms, fused {f['other_host_s']*1e3:.1f} ms; fused's "
          f"device work alone {f['device_host_s']*1e3:.1f} ms: at most "
          f"{r['kernels_only_speedup']:.2f}x"
          + (f", {r['kernels_only_of_bound']:.2f} of the bound" if 'kernels_only_of_bound' in r else "")
          + ") | "
          f"peak HBM fused/strict "
          f"{r['peak_hbm_ratio']:.2f} ({f['peak_hbm_bytes']/2**20:.1f} / "
          f"{s['peak_hbm_bytes']/2**20:.1f} MiB) | est. TPU speed-up "
          f"{r['estimated_tpu_speedup']:.2f}x ({f['estimated_tpu_s']*1e3:.3f} vs "
          f"{s['estimated_tpu_s']*1e3:.3f} ms) | regions {f.get('regions')}, fused "
          f"{f.get('fused_regions')} with {f.get('ops_fused')}/{f.get('ops_recorded')} ops")


def plot_rows(rows, name):
    def draw(plt):
        fig, axes = plt.subplots(1, 3, figsize=(15, 4))
        labels = [r["case"] for r in rows]
        for ax, key, title in zip(axes, ("host_s", "peak_hbm_bytes", "estimated_tpu_s"),
                                  ("host time (measured)", "peak HBM", "TPU time (estimated)")):
            width = 0.25
            for k, m in enumerate(MODES):
                base = [r["strict"][key] or 1 for r in rows]
                ax.bar([i + (k - 1) * width for i in range(len(rows))],
                       [r[m][key] / b for r, b in zip(rows, base)], width, label=m)
            ax.set_xticks(range(len(rows)))
            ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
            ax.set_title(title + ", relative to strict")
            ax.legend()
        return fig
    common.plot(name, draw)


def case_makers(quick):
    """The cases by name: each maker(device) returns a step function."""
    n = 1024 if quick else 4096
    return {
        "a_elementwise_chain": lambda device: chain_case(n, device),
        "b_relu_matmul_add": lambda device: seed_case(n, device),
        "c_mlp_train_step": lambda device: mlp_case(quick, device),
        "d_transformer_train_step": lambda device: transformer_case(quick, device),
    }


def reprice(payload):
    """The estimated TPU time of each case in each mode (and fused over strict) recomputed: each
    case called as measure_case calls it (its interleaved repeats, untimed: fused eager's plans
    and the optimizer's state depend on the calls before), then estimated as it is there; the
    measured host times and peaks kept."""
    makers = case_makers(payload.get("benchmark", "").endswith("_quick"))
    for row in payload["rows"]:
        fn = makers[row["case"]]("tpu")
        common.interleaved({m: in_mode(m, fn, [], []) for m in MODES}, repeats=payload["repeats"])
        for m in MODES:
            row[m]["estimated_tpu_s"] = peak_and_estimate(m, fn)[1]
        row["fused_vs_strict"]["estimated_tpu_speedup"] = (
            row["strict"]["estimated_tpu_s"] / max(row["fused"]["estimated_tpu_s"], 1e-12))
        del fn
    return payload


def replot(payload):
    """The plot of a result (repriced: its estimates panel moves)."""
    plot_rows(payload["rows"], payload["benchmark"])


def main():
    args = parse_args()
    makers = case_makers(args.quick)
    rows = []
    for name, make in makers.items():
        if name[0] not in args.cases:
            continue
        rows.append(measure_case(name, make, args.repeats))
        print_row(name, rows[-1])
    rec, fl = capture_cost()
    print(f"cached region, per recorded op: record {rec:.1f} us, flush (lookup + run) {fl:.1f} us,"
          f" total {rec + fl:.1f} us")
    if set(args.cases) != set("abcd"):
        return  # (a subset: printed only, the JSON keeps the last run of all four)
    common.write_json("eager_modes" + ("_quick" if args.quick else ""), {
        "chip": torch.tpu.get_device_properties().name if hasattr(torch.tpu, "get_device_properties") else "",
        "rows": rows,
        "capture_us_per_op": {"record": rec, "flush": fl, "total": rec + fl},
        "repeats": args.repeats,
    })
    plot_rows(rows, "eager_modes" + ("_quick" if args.quick else ""))


if __name__ == "__main__":
    main()
