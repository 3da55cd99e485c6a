"""``python -m torchtpu``: commands around the simulated device (docs/insight.md).

- ``python -m torchtpu info``: chips, devices, versions and the settings in effect;
- ``python -m torchtpu estimate --chips v5e,v6e,v7 [--json F] [--plot F.png] script.py [args]``:
  runs a script once on the simulated device and prints, per chip, what its launches would take
  there: time, MXU utilisation, HBM traffic, intensity against the ridge point, the bottleneck,
  whether the peak memory fits in HBM, and the price per run (and per million tokens or samples
  with ``--tokens`` / ``--samples``). With ``--nproc-per-node N`` the script runs as N ranks
  under torchrun, one simulated chip each, and the estimate is the slice's: the step time of
  the slowest rank, its collectives priced on ``--topology`` (a 2x2 slice, ...), the price of
  every chip of the slice for that time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import runpy
import sys
import time

from . import config

# Public on-demand prices per chip-hour, USD (Google Cloud's TPU pricing page,
# cloud.google.com/tpu/pricing, us-central regions, as published in 2025). Prices change and
# differ by region and commitment: pass --price CHIP=USD to use your own. TPU7x (v7) had no
# public on-demand price at the time: give one with --price v7=USD to see its cost.
PRICES_SOURCE = "cloud.google.com/tpu/pricing, on-demand, us-central regions, 2025"
PRICES_PER_CHIP_HOUR = {"v4": 3.22, "v5e": 1.20, "v5p": 4.20, "v6e": 2.70, "v7": None}


def _gib(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def _settings() -> dict[str, str]:
    return config.settings()


def info() -> dict:
    import torch

    import torchtpu
    from torchtpu import _C

    out = {
        "torchtpu": torchtpu.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "simulated chip": _C.chip()["name"],
        "devices": _C.device_count(),
        "eager mode": _C.get_eager_mode(),
        "fallback mode": torchtpu.get_fallback_mode(),
        "float32 matmul precision": _C.current_precision(),
        "launch cost (us)": _C.launch_seconds() * 1e6,
        "HBM per device": _gib(_C.hbm_capacity_bytes()),
        "settings (torchtpu.config, set in this environment)": _settings() or "none set",
        "chips": _C.all_chips(),
        "calibration": torchtpu.metrics.error_band(),
    }
    return out


def _print_info(d: dict) -> None:
    for k, v in d.items():
        if k in ("chips", "calibration"):
            continue
        if isinstance(v, dict):
            print(f"{k}:")
            for kk, vv in v.items():
                print(f"  {kk}={vv}")
        else:
            print(f"{k}: {v}")
    print("chips (public figures; docs/simulated-chip.md; GEMM and HBM eff.: the fractions of "
          "the peaks a large GEMM and a large copy reach, which the estimates run at):")
    print(f"  {'chip':<5} {'bf16 TFLOP/s':>12} {'int8 TOP/s':>10} {'fp8':>6} {'HBM':>9} "
          f"{'HBM TB/s':>8} {'MXU':>9} {'clock':>8} {'VPU TOP/s':>9} {'GEMM eff.':>9} "
          f"{'HBM eff.':>8} {'price/chip-h':>12}")
    for c in d["chips"]:
        price = PRICES_PER_CHIP_HOUR.get(c["name"])
        facts = {f["figure"]: f for f in c["facts"]}
        eff = {k: f"{c[k + '_efficiency']:.3f}"
               + ("*" if facts.get(figure, {}).get("assumed") else " ")
               for k, figure in (("mxu", "large-GEMM efficiency"), ("hbm", "HBM efficiency"))}
        print(f"  {c['name']:<5} {c['bf16_flops'] / 1e12:>12.0f} {c['int8_ops'] / 1e12:>10.0f} "
              f"{'yes' if c['fp8_ops'] else 'no':>6} {_gib(c['hbm_bytes']):>9} "
              f"{c['hbm_bytes_per_s'] / 1e12:>8.2f} "
              f"{c['mxus_per_core'] * c['tensor_cores']}x{c['mxu_dim']:<5} "
              f"{c['clock_hz'] / 1e9:>5.2f} GHz {c['vpu_ops'] / 1e12:>9.1f} "
              f"{eff['mxu']:>9} {eff['hbm']:>8} "
              f"{'$%.2f' % price if price else 'n/a':>12}")
    print("  (* assumed: another chip's measured figure applied; the source below says which)")
    print("each constant and its source ('assumed': no public figure; the assumption and why):")
    for c in d["chips"]:
        print(f"  {c['name']}:")
        for f in c["facts"]:
            tag = "assumed: " if f["assumed"] and not f["source"].startswith("assumed") else ""
            print(f"    {f['figure']}: {f['value']} -- {tag}{f['source']}")
    band = d["calibration"]
    print(f"estimates: {band['label']}"
          + (f", {band['date']} (torchtpu/calibration.json; docs/insight.md, \"Calibration\")"
             if band["mape"] is not None else ""))


def _parse_prices(items: list[str]) -> dict:
    prices = dict(PRICES_PER_CHIP_HOUR)
    for item in items:
        chip, _, usd = item.partition("=")
        if not usd:
            raise SystemExit(f"--price expects CHIP=USD per chip-hour, got '{item}'")
        prices[chip] = float(usd)
    return prices


def _run_script(script: str, args: list[str]) -> tuple[float, BaseException | None]:
    """Runs `script` as __main__ with `args`; returns its wall time and what it raised."""
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    start = time.perf_counter()
    error = None
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            error = e
    except BaseException as e:  # noqa: BLE001 - reported, and the estimate so far still printed
        error = e
    finally:
        sys.argv, sys.path = old_argv, old_path
    return time.perf_counter() - start, error


def estimate_run(chips: list[str], prices: dict, items: float | None = None,
                 item_name: str = "tokens") -> list[dict]:
    """The launches since torchtpu.metrics.reset() priced for each of `chips` (the peak memory
    of every device is compared with each chip's HBM)."""
    import torch

    import torchtpu
    from torchtpu import _C

    torch.tpu.synchronize()
    known = {c["name"]: c for c in _C.all_chips()}
    devices = range(_C.device_count())
    peaks = [torch.tpu.max_memory_allocated(d) for d in devices]
    peak = max(peaks) if peaks else 0
    used = sum(1 for p in peaks if p > 0) or 1
    rows = []
    for name in chips:
        if name not in known:
            raise SystemExit(f"unknown chip '{name}'; known: {', '.join(known)}")
        chip = known[name]
        e = torchtpu.metrics.estimate(chip=name)
        price = prices.get(name)
        # The run's time: devices run in parallel (one device: its time), less the ICI time
        # compute hides; every device used is paid for that time.
        seconds = e["parallel_time_s"]
        row = {
            "chip": name,
            "chips": used,
            "topology": e["topology"],
            "time_s": seconds,
            "device_time_s": e["device_time_s"],
            "ici_time_s": e["ici_time_s"],
            "ici_hidden_s": e["ici_hidden_s"],
            "launches": e["launches"],
            # The matmuls' time at the peak of the dtype each ran in over the chips' time.
            "mxu_utilisation": e["peak_time_s"] / (used * seconds) if seconds else 0.0,
            "peak_time_s": e["peak_time_s"],
            "error_band": e["error_band"],
            "mxu_useful_fraction": e["mxu_useful_fraction"],
            "flops": e["flops"],
            "hbm_bytes": e["hbm_bytes"],
            "arithmetic_intensity": e["arithmetic_intensity"],
            "ridge_point": e["ridge_point"],
            "bottleneck": e["bottleneck"],
            "terms_s": {"mxu": e["mxu_time_s"], "vpu": e["vpu_time_s"],
                        "hbm": e["hbm_time_s"], "ici": e["ici_time_s"],
                        "launch": e["launch_time_s"]},
            "peak_memory_bytes": peak,
            "bf16_flops_per_chip": chip["bf16_flops"],
            "hbm_capacity_bytes": chip["hbm_bytes"],
            "fits_in_hbm": peak <= chip["hbm_bytes"],
            "price_per_chip_hour_usd": price,
            "priced_as_native_launches": e["priced_as_native"],
        }
        rows.append(_add_prices(row, items, item_name))
    return rows


def _add_prices(row: dict, items: float | None, item_name: str) -> dict:
    """The price of the run: every chip used, for the run's time, at the chip-hour price."""
    price, seconds = row["price_per_chip_hour_usd"], row["time_s"]
    row["price_per_run_usd"] = row["chips"] * seconds * price / 3600 if price else None
    if items and price:
        row[f"price_per_million_{item_name}_usd"] = row["price_per_run_usd"] / items * 1e6
    if items:
        row[f"{item_name}_per_s"] = items / seconds if seconds else 0.0
    return row


def slice_rows(ranks: list[list[dict]], items: float | None, item_name: str) -> list[dict]:
    """One row per chip for a slice, from each rank's rows (estimate_run in every rank): the
    slice's step ends when its slowest rank's does; FLOPs, bytes and launches add up."""
    out = []
    for per_chip in zip(*ranks):
        name = per_chip[0]["chip"]
        slowest = max(per_chip, key=lambda r: r["time_s"])
        chips = sum(r["chips"] for r in per_chip)
        seconds = slowest["time_s"]
        flops = sum(r["flops"] for r in per_chip)
        peak_s = sum(r["peak_time_s"] for r in per_chip)
        hbm = sum(r["hbm_bytes"] for r in per_chip)
        peak = max(r["peak_memory_bytes"] for r in per_chip)
        row = dict(slowest)
        row.update({
            "chip": name,
            "chips": chips,
            "ranks": len(per_chip),
            "time_s": seconds,
            "time_per_rank_s": [r["time_s"] for r in per_chip],
            "device_time_s": sum(r["device_time_s"] for r in per_chip),
            "launches": sum(r["launches"] for r in per_chip),
            "flops": flops,
            "hbm_bytes": hbm,
            "arithmetic_intensity": flops / hbm if hbm else 0.0,
            "mxu_utilisation": peak_s / (chips * seconds) if seconds else 0.0,
            "peak_time_s": peak_s,
            "peak_memory_bytes": peak,
            "fits_in_hbm": peak <= slowest["hbm_capacity_bytes"],
            "priced_as_native_launches": sum(r["priced_as_native_launches"] for r in per_chip),
        })
        out.append(_add_prices(row, items, item_name))
    return out


def _print_rows(rows: list[dict], item_name: str) -> None:
    print(f"\nestimated per chip (cost model, not measured; docs/insight.md). Prices: "
          f"{PRICES_SOURCE}.")
    if any(r["chips"] > 1 for r in rows):
        r = rows[0]
        print(f"a slice of {r['chips']} chips ({r.get('ranks', 1)} ranks), topology "
              f"{r['topology'] or 'none set (each group one ring)'}: time is the slowest "
              "rank's step, ICI = its collectives' time (hidden: behind its compute), the price "
              "pays every chip for that time")
        for r in rows:
            print(f"  {r['chip']}: ICI {r['ici_time_s'] * 1e3:.3f} ms, hidden "
                  f"{r['ici_hidden_s'] * 1e3:.3f} ms")
    head = (f"{'chip':<5} {'time':>11} {'error':>5} {'launches':>8} {'MXU util':>8} {'HBM traffic':>11} "
            f"{'FLOP/B':>8} {'ridge':>6} {'bound':>6} {'peak mem':>10} {'fits':>4} "
            f"{'$/run':>10}")
    per_m = f"$/M {item_name}"
    if any(f"price_per_million_{item_name}_usd" in r for r in rows):
        head += f" {per_m:>12}"
    print(head)
    for r in rows:
        t = r["time_s"]
        band = r["error_band"]
        error = f"±{band['mape'] * 100:.0f}%" if band["mape"] is not None else "n/a"
        line = (f"{r['chip']:<5} {t * 1e3:>8.3f} ms {error:>5} {r['launches']:>8} "
                f"{r['mxu_utilisation']:>8.1%} {_gib(r['hbm_bytes']):>11} "
                f"{r['arithmetic_intensity']:>8.1f} {r['ridge_point']:>6.0f} "
                f"{r['bottleneck']:>6} {_gib(r['peak_memory_bytes']):>10} "
                f"{'yes' if r['fits_in_hbm'] else 'NO':>4} "
                f"{'$%.3g' % r['price_per_run_usd'] if r['price_per_run_usd'] else 'n/a':>10}")
        key = f"price_per_million_{item_name}_usd"
        if key in r:
            line += f" {'$%.4g' % r[key]:>12}"
        print(line)
    band = rows[0]["error_band"] if rows else None
    if band:
        print(f"error: {band['label']}: the cost model's mean absolute percentage error against "
              "published TPU step times (benchmarks/calibration.py; docs/insight.md, "
              "\"Calibration\")" if band["mape"] is not None else f"error: {band['label']}")
    native = max(r["priced_as_native_launches"] for r in rows)
    if native:
        print(f"({native} launches of ops that ran through a host fallback are priced as if "
              "native: torchtpu.metrics.estimate()['priced_as_native_ops'])")


def plot_roofline(rows: list[dict], path: str, ops: dict | None = None) -> None:
    """A roofline per chip with the run's point (achieved FLOP/s against FLOP per HBM byte)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from torchtpu import _C

    known = {c["name"]: c for c in _C.all_chips()}
    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = [0.1, 1e4]
    for i, r in enumerate(rows):
        chip = known[r["chip"]]
        color = f"C{i}"
        peak, bw = chip["bf16_flops"], chip["hbm_bytes_per_s"]
        ridge = peak / bw
        ax.plot([xs[0], ridge, xs[1]], [xs[0] * bw, peak, peak], color=color,
                label=f"{r['chip']} roofline (ridge {ridge:.0f} FLOP/B)")
        if r["time_s"] > 0 and r["arithmetic_intensity"] > 0:
            # Per chip: the run's FLOPs over its chips and its time.
            ax.scatter([r["arithmetic_intensity"]], [r["flops"] / (r["chips"] * r["time_s"])],
                       color=color, marker="o", s=60, zorder=3,
                       label=f"{r['chip']}: this run, {r['mxu_utilisation']:.1%} of peak")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte)")
    ax.set_ylabel("FLOP/s (estimated)")
    ax.set_title("Roofline: the run on each chip (cost model estimates)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _config_command(ns) -> int:
    if ns.write:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for path, text in config.generated_files(root).items():
            with open(path, "w") as f:
                f.write(text)
            print(f"wrote {os.path.relpath(path, root)}")
        return 0
    if ns.markdown:
        print(config.markdown(), end="")
        return 0
    width = max(len(v.name) for v in config.VARIABLES)
    for v in config.VARIABLES:
        now = config.raw(v.name)
        shown = f"= {now!r}" if now else f"(default {v.default!r})" if v.default else "(unset)"
        print(f"{v.name:{width}}  {shown}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchtpu")
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="chips, devices, versions and the settings in effect")
    p_info.add_argument("--json", help="also write it as JSON to this file")
    p_est = sub.add_parser("estimate", help="run a script once and estimate it on each chip")
    p_est.add_argument("--chips", default="v5e,v6e,v7", help="comma-separated chips")
    p_est.add_argument("--json", help="write the per-chip figures as JSON to this file")
    p_est.add_argument("--plot", help="draw the roofline to this PNG file")
    p_est.add_argument("--price", action="append", default=[], metavar="CHIP=USD",
                       help="on-demand price per chip-hour (overrides the built-in table)")
    p_est.add_argument("--nproc-per-node", type=int, metavar="N",
                       help="run the script as N ranks under torchrun (one simulated chip each) "
                            "and estimate the slice")
    p_est.add_argument("--topology", metavar="AxB[xC]",
                       help="the slice's ICI topology for the collectives, e.g. 2x2 or 2x2x4 "
                            "(TORCHTPU_TOPOLOGY; per chip: v5e:4x4,v5p:2x2x4)")
    p_est.add_argument("--rank-json", help=argparse.SUPPRESS)  # a rank of --nproc-per-node
    group = p_est.add_mutually_exclusive_group()
    group.add_argument("--tokens", type=float, help="tokens the script processes (for $/M)")
    group.add_argument("--samples", type=float, help="samples the script processes (for $/M)")
    p_est.add_argument("script")
    p_est.add_argument("args", nargs=argparse.REMAINDER)
    p_cfg = sub.add_parser("config", help="the environment variables torchtpu reads "
                                          "(torchtpu/config.py) and their values here")
    p_cfg.add_argument("--markdown", action="store_true",
                       help="print the reference table (docs/configuration.md)")
    p_cfg.add_argument("--write", action="store_true",
                       help="write docs/configuration.md's table and csrc/runtime/ConfigTable.inc "
                            "from the table (in a source checkout)")
    ns = parser.parse_args(argv)

    if ns.command == "config":
        return _config_command(ns)

    if ns.command == "info":
        d = info()
        _print_info(d)
        if ns.json:
            with open(ns.json, "w") as f:
                json.dump(d, f, indent=1, default=str)
        return 0

    chips = [c.strip() for c in ns.chips.split(",") if c.strip()]
    prices = _parse_prices(ns.price)
    items = ns.tokens or ns.samples
    item_name = "tokens" if ns.tokens else "samples"
    if ns.topology:
        os.environ["TORCHTPU_TOPOLOGY"] = ns.topology  # read when the cost models are made
    if ns.nproc_per_node:
        rows, wall, error = _estimate_slice(ns, chips, items, item_name)
    else:
        rows, wall, error = _estimate_here(ns, chips, prices, items, item_name)
        if ns.rank_json:  # one rank of a slice: the parent prints the slice's figures
            with open(os.path.join(ns.rank_json, f"rank{config.value('RANK')}.json"),
                      "w") as f:
                json.dump({"rows": rows, "error": repr(error) if error else None}, f)
            return 1 if error else 0
    print(f"\n[torchtpu estimate] {ns.script} ran in {wall:.1f} s on this host"
          + (f" and raised {error}" if error else ""))
    _print_rows(rows, item_name)
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"script": ns.script, "args": ns.args, "host_wall_s": wall,
                       "error": error, "prices_source": PRICES_SOURCE,
                       "chips": rows}, f, indent=1)
        print(f"wrote {ns.json}")
    if ns.plot:
        plot_roofline(rows, ns.plot)
        print(f"wrote {ns.plot}")
    return 1 if error else 0


def _estimate_here(ns, chips, prices, items, item_name):
    """Runs the script in this process and prices its launches for each chip."""
    import torch

    import torchtpu

    for d in range(torch.tpu.device_count()):
        torch.tpu.reset_peak_memory_stats(d)
    torchtpu.metrics.reset()
    if not ns.rank_json:
        print(f"[torchtpu estimate] running {ns.script} on the simulated TPU "
              f"({torchtpu._C.chip()['name']}), then pricing it for {', '.join(chips)}",
              flush=True)
    wall, error = _run_script(ns.script, ns.args)
    rows = estimate_run(chips, prices, items, item_name)
    return rows, wall, f"{type(error).__name__}: {error}" if error else None


def _estimate_slice(ns, chips, items, item_name):
    """Runs the script as ns.nproc_per_node ranks under torchrun, each estimating itself
    (--rank-json), and combines the ranks' figures into the slice's."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="torchtpu-estimate-") as out:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(ns.nproc_per_node), "-m", "torchtpu", "estimate",
               "--rank-json", out, "--chips", ",".join(chips)]
        cmd += [f"--price={p}" for p in ns.price]
        cmd += [ns.script, *ns.args]
        print(f"[torchtpu estimate] running {ns.script} as {ns.nproc_per_node} ranks under "
              f"torchrun, one simulated chip each, then pricing the slice for "
              f"{', '.join(chips)}", flush=True)
        start = time.perf_counter()
        code = subprocess.run(cmd, env=dict(os.environ)).returncode
        wall = time.perf_counter() - start
        ranks = []
        for r in range(ns.nproc_per_node):
            path = os.path.join(out, f"rank{r}.json")
            if not os.path.exists(path):
                raise SystemExit(f"[torchtpu estimate] rank {r} wrote no estimate (torchrun "
                                 f"exited with {code}); see its output above")
            with open(path) as f:
                ranks.append(json.load(f))
    errors = [f"rank {i}: {r['error']}" for i, r in enumerate(ranks) if r["error"]]
    error = "; ".join(errors) or (f"torchrun exited with {code}" if code else None)
    return slice_rows([r["rows"] for r in ranks], items, item_name), wall, error


if __name__ == "__main__":
    sys.exit(main())
