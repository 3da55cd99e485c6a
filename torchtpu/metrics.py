"""Counters of everything the device did, in the spirit of PyTorch/XLA's metrics report.

- ``native_ops()``: aten ops run by a native torchtpu kernel, by name;
- ``fallbacks()``: aten ops that ran on the CPU through the fallback, by name;
- ``counters()``: other events (bytes transferred per direction, out-of-memory errors, ...);
- ``estimate(chip=None)``: what the launches so far would take on the simulated chip, or on any
  other known chip after the fact (cost model), with the calibration's error band;
- ``error_band(chip=None)``: how far estimates are from published TPU measurements (the mean
  absolute percentage error of benchmarks/calibration.py, shipped as torchtpu/calibration.json);
- ``op_times(chip=None)``: estimated device seconds per op;
- ``compiled()``: ``torch.compile(backend="tpu")``: graphs, programs, graph breaks, recompilations;
- ``programs()``: every compiled program: ops, regions, runs, estimated device time per run;
- ``report()``: all of it, with the memory figures of each device, as text;
- ``reset()``: zero every counter.
"""
from __future__ import annotations

import functools
import json
import os
import sys

import torch

from . import _C

# The calibration's summary (benchmarks/calibration.py writes it; it ships with the package).
_CALIBRATION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calibration.json")


@functools.lru_cache(maxsize=1)
def _calibration() -> dict | None:
    try:
        with open(_CALIBRATION) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def error_band(chip: str | None = None) -> dict:
    """The error band of every estimate: the mean absolute percentage error (MAPE) of the cost
    model's step-time estimates against published measurements of real TPUs
    (benchmarks/calibration.py; docs/insight.md, "Calibration against published measurements"),
    read from torchtpu/calibration.json, which the calibration writes and the package ships.

    ``mape`` and ``runs`` are over every calibration run; ``chip_mape`` and ``chip_runs`` over
    the runs on ``chip`` (default: the simulated chip), None where it has none. ``label`` is the
    text printed next to an estimate, e.g. "±15% (calibration MAPE, 23 runs)"."""
    chip = chip or _C.chip()["name"]
    c = _calibration()
    if not c:
        return {"mape": None, "runs": 0, "chip_mape": None, "chip_runs": 0,
                "label": "(no calibration: torchtpu/calibration.json is missing)", "source": None}
    own = c.get("per_chip", {}).get(chip, {})
    return {"mape": c["mape"], "runs": c["runs"], "chip_mape": own.get("mape"),
            "chip_runs": own.get("runs", 0),
            "label": f"±{c['mape'] * 100:.0f}% (calibration MAPE, {c['runs']} runs)",
            "source": c.get("source"), "date": c.get("date"), "commit": c.get("commit")}


def native_ops() -> dict[str, int]:
    return dict(_C.metrics_snapshot("op"))


def fallbacks() -> dict[str, int]:
    return dict(_C.metrics_snapshot("fallback"))


def counters() -> dict[str, int]:
    return dict(_C.metrics_snapshot("counter"))


def op_times(chip: str | None = None, launch_us: float | None = None) -> dict[str, float]:
    """Estimated device time (seconds, cost model) of each op's launches so far, on the
    simulated chip or on ``chip`` (see ``estimate``)."""
    return dict(_price(chip, launch_us)["op_seconds"])


def _price(chip, launch_us) -> dict:
    return _C.price_run(chip or "", -1.0 if launch_us is None else float(launch_us))


def host_times() -> dict[str, float]:
    """Measured host time (seconds) of the device's work on this machine, by work name (an op,
    or "fused region of N ops (...)"): the work the stream workers ran, and the work run on the
    issuing thread (debug eager, ops that return new tensors, the fused attention,
    convolutions). Each name's time is its own: a GEMM run inside a fused region is counted
    under the GEMM's name and not again under the region's. CPU fallbacks are not in it
    (``fallbacks()`` counts them)."""
    return {k: v * 1e-9 for k, v in _C.metrics_snapshot("host_time").items()}


def estimate(chip: str | None = None, launch_us: float | None = None) -> dict:
    """The cost model's estimate for everything launched since the last reset.

    Every figure is *estimated*, not measured: device time and its MXU / VPU / HBM terms in
    seconds, useful FLOPs, FLOPs the MXUs execute (padded shapes times bf16 passes), HBM bytes,
    launches, the fraction of the chip's peak, and the arithmetic intensity against the chip's
    ridge point (the roofline position).

    ``device_time_s`` sums every launch; ``device_time_per_device_s`` splits it by device.
    Collectives (torchtpu.distributed) run on the ICI beside the TensorCore: one issued on a
    stream of its own overlaps the compute of the other streams until a stream waits for it
    (``Work.wait()``, an event), ``ici_hidden_s`` in all (per device in
    ``ici_hidden_per_device_s``, at the chip's configured launch cost); ``parallel_time_s`` is
    the step time: the longest device's time less its hidden ICI time (devices run in
    parallel).

    No estimate is exact: ``error_band`` is the calibration's mean absolute percentage error
    against published TPU step times (``error_band()``), e.g. "±15% (calibration MAPE, 23
    runs)"; ``parallel_time_range_s`` is the step time widened by it.

    ``chip`` prices the same launches for another generation after the fact ("v4", "v5e",
    "v5p", "v6e", "v7"), as running under ``TORCHTPU_CHIP`` would; ``launch_us`` sets the cost
    of one launch (default: the chip's, from ``TORCHTPU_LAUNCH_US`` or 2 us). Launches of ops
    that ran through a host fallback are priced as if native and counted in
    ``priced_as_native`` (docs/insight.md).
    """
    r = _price(chip, launch_us)
    band = error_band(r["chip"])
    hidden = dict(r["hidden_ici_seconds"])
    spec = next(c for c in _C.all_chips() if c["name"] == r["chip"])
    seconds, flops, hbm, mxu_flops = r["seconds"], r["flops"], r["hbm_bytes"], r["mxu_flops"]
    terms = {"mxu": r["mxu_s"], "vpu": r["vpu_s"], "hbm": r["hbm_s"], "ici": r["ici_s"],
             "launch": r["launches"] * r["launch_seconds"]}
    out = {
        "chip": r["chip"],
        # The slice's ICI topology collectives are priced on (TORCHTPU_TOPOLOGY), or None: each
        # collective's group taken as one ring along one torus axis (docs/distributed.md).
        "topology": r["topology"] or None,
        "device_time_s": seconds,
        "mxu_time_s": r["mxu_s"],
        "vpu_time_s": r["vpu_s"],
        "hbm_time_s": r["hbm_s"],
        "ici_time_s": r["ici_s"],
        "launch_time_s": terms["launch"],
        "launch_us": r["launch_seconds"] * 1e6,
        "launches": r["launches"],
        "flops": flops,
        "mxu_flops": mxu_flops,
        "hbm_bytes": hbm,
        # The matmuls' time at the peak of the dtype each ran in (bf16, int8, fp8) over the
        # run's time: an int8 GEMM near the int8 peak is near 1, not 2.
        "peak_time_s": r["peak_s"],
        "fraction_of_peak": r["peak_s"] / seconds if seconds else 0.0,
        "mxu_useful_fraction": flops / mxu_flops if mxu_flops else 0.0,
        "arithmetic_intensity": flops / hbm if hbm else 0.0,
        "ridge_point": spec["bf16_flops"] / spec["hbm_bytes_per_s"],
        "launches_bound_by": {k: v for k, v in r["bound"].items() if v},
        # The term that dominates the whole run: MXU, VPU, HBM, or the launch costs.
        "bottleneck": max(terms, key=terms.get) if seconds else "",
        "priced_as_native": r["priced_as_native"],
        # Per device: devices run in parallel, so a step on several devices takes the longest
        # device's time, less the ICI time its compute hides.
        "device_time_per_device_s": dict(r["device_seconds"]),
        "ici_hidden_s": sum(hidden.values()),
        "ici_hidden_per_device_s": hidden,
        "parallel_time_s": max((t - hidden.get(d, 0.0) for d, t in r["device_seconds"].items()),
                               default=0.0),
        "priced_as_native_ops": dict(r["priced_as_native_ops"]),
        "error_band": band,
    }
    if band["mape"] is not None:
        step = out["parallel_time_s"]
        out["parallel_time_range_s"] = (step * (1 - band["mape"]), step * (1 + band["mape"]))
    return out


def materializations() -> dict[str, dict[str, int]]:
    """Fused eager's materialization points: reason -> Python location -> count."""
    return _C.defer_materializations()


def compiled() -> dict:
    """``torch.compile(backend="tpu")`` so far: Dynamo graphs handed to the backend, the ATen
    graphs compiled from them by kind (forward, backward, inference), their ATen ops, the time
    spent in the backend (AOTAutograd's tracing and the graph compilers; Dynamo's own tracing
    is in ``torch._dynamo.utils.compile_times()``), the programs captured from the graphs (one
    per input shape), their ops, their runs (replays without dispatch), the ops folded into
    them as constants, the calls whose inputs matched no program, the calls run op by op (and
    of those, the calls of a graph with ``max_programs`` programs already) and
    the captures that failed by reason, and, from Dynamo's own records (every backend's, since
    the process started or the last ``reset()``), graph breaks by reason and recompilations
    with their reasons."""
    c = counters()
    out = {
        "dynamo_graphs": c.get("compile.dynamo_graphs", 0),
        "graphs": {k: c.get(f"compile.graphs_{k}", 0) for k in ("forward", "backward", "inference")},
        "graph_ops": c.get("compile.graph_ops", 0),
        "compile_s": c.get("compile.time_ns", 0) * 1e-9,
        "graph_breaks": {},
        "recompilations": [],
        # programs: graphs captured once and replayed without dispatch (docs/compiled-mode.md)
        "programs": c.get("compile.programs", 0),
        "program_ops": c.get("compile.program_ops", 0),
        "program_runs": c.get("compile.program_runs", 0),
        "ops_folded": c.get("compile.program_ops_folded", 0),
        "program_mismatches": c.get("compile.program_mismatches", 0),
        "runs_op_by_op": c.get("compile.graph_runs_op_by_op", 0),
        # of those, calls of a graph that had its options' max_programs shapes already
        "runs_over_max_programs": c.get("compile.graph_runs_op_by_op.max_programs", 0),
        # of those, calls charged as their bucket's program (docs/compiled-mode.md, "Buckets")
        "runs_charged_as_bucket": c.get("compile.runs_charged_as_bucket", 0),
        "program_failures": {k[len("compile.program_failure."):]: v for k, v in c.items()
                             if k.startswith("compile.program_failure.")},
        # buckets of dynamic sizes (docs/compiled-mode.md, "Buckets"): the programs a TPU would
        # compile, the captures made only to price a bucket, the estimated device time charged
        # for padding, and the buckets that could not be priced by reason
        "buckets": c.get("compile.buckets", 0),
        "bucket_programs": c.get("compile.bucket_programs", 0),
        "padding_s": c.get("compile.padding_ns", 0) * 1e-9,
        "buckets_unpriced": {k[len("compile.buckets_unpriced."):]: v for k, v in c.items()
                             if k.startswith("compile.buckets_unpriced.")},
        # the compilation cache on disk (TORCHTPU_CACHE_DIR, TorchTPU's tiers): Dynamo graphs
        # whose ATen graphs were loaded (hits), compiled (misses) and saved, and those it could
        # not key (bypasses)
        "cache": {
            "directory": _compile_cache_directory(),
            "hits": c.get("compile.cache_hits", 0),
            "misses": c.get("compile.cache_misses", 0),
            "saved": c.get("compile.cache_saved", 0),
            # entry files read from / written to the directory kept across runs, with a tier-2
            # working directory (torchtpu/compile/cache_location.py)
            "kept_reads": c.get("compile.cache_kept_reads", 0),
            "kept_writes": c.get("compile.cache_kept_writes", 0),
            "bypasses": {k[len("compile.cache_bypass."):]: v for k, v in c.items()
                         if k.startswith("compile.cache_bypass.")},
        },
    }
    if "torch._dynamo" in sys.modules:  # (nothing was compiled otherwise)
        from torch._dynamo.utils import counters as dynamo_counters, get_compilation_metrics

        seen_breaks, seen_metrics = _dynamo_seen
        out["graph_breaks"] = {reason: n - seen_breaks.get(reason, 0)
                               for reason, n in dynamo_counters["graph_break"].items()
                               if n > seen_breaks.get(reason, 0)}
        out["recompilations"] = [m.recompile_reason for m in get_compilation_metrics()
                                 if m.recompile_reason and id(m) not in seen_metrics]
    return out


# Dynamo's records (graph breaks by reason, compilation metrics) as of the last reset(): Dynamo
# keeps them for the process (torch._dynamo.reset() clears neither), compiled() counts the rest.
_dynamo_seen: tuple = ({}, set())


# What compiled mode registers here (torchtpu/compile/): its programs, and the disk cache's
# directory once the cache is in use. (metrics sits below the compile package: it is told, it
# does not import it.)
_compiled_sources = {"programs": lambda: [], "cache_directory": lambda: None}


def _register_compiled(**sources) -> None:
    unknown = set(sources) - set(_compiled_sources)
    if unknown:
        raise KeyError(f"unknown compiled-mode metrics sources: {sorted(unknown)}")
    _compiled_sources.update(sources)


def _compile_cache_directory():
    return _compiled_sources["cache_directory"]()


def programs() -> list[dict]:
    """Every compiled program alive (``torch.compile(backend="tpu")``): its name, ops, regions,
    fused regions, ops eliminated, runs, the estimated device time of one run (one launch) and
    its region IR."""
    return _compiled_sources["programs"]()


def reset() -> None:
    global _dynamo_seen
    _C.metrics_reset()
    _C.defer_reset_materializations()
    if "torch._dynamo" in sys.modules:
        from torch._dynamo.utils import counters as dynamo_counters, get_compilation_metrics

        _dynamo_seen = (dict(dynamo_counters["graph_break"]),
                        {id(m) for m in get_compilation_metrics()})


def _fused_eager_lines(limit: int | None) -> list[str]:
    c = counters()
    if not any(k.startswith("defer.") for k in c):
        return []
    ops = c.get("defer.ops_recorded", 0)
    regions = c.get("defer.regions", 0)
    compile_ms = c.get("defer.compile_ns", 0) / 1e6
    lines = [
        f"fused eager (DeferAndFuse): {ops} ops recorded, {c.get('defer.graphs', 0)} graphs run as "
        f"{regions} regions ({ops / regions if regions else 0:.1f} ops per region); "
        f"{c.get('defer.fused_regions', 0)} fused regions with {c.get('defer.ops_fused', 0)} ops; "
        f"{c.get('defer.ops_eliminated', 0)} dead ops not run",
        f"  plans: {c.get('defer.compiles', 0)} compiled ({compile_ms:.3f} ms), "
        f"{c.get('defer.cache_hits', 0)} cache hits, {c.get('defer.cache_misses', 0)} misses",
    ]
    mats = materializations()
    total = sum(sum(v.values()) for v in mats.values())
    lines.append(f"  materializations: {total}")
    for reason, where in sorted(mats.items(), key=lambda kv: -sum(kv[1].values()))[:limit]:
        top = sorted(where.items(), key=lambda kv: -kv[1])[:3]
        places = ", ".join(f"{loc} x{n}" for loc, n in top)
        lines.append(f"    {sum(where.values()):>8}  {reason}  ({places})")
    return lines


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def _table(title: str, rows: dict[str, int], limit: int | None = None) -> list[str]:
    lines = [f"{title}: {sum(rows.values())} in {len(rows)} kinds"]
    ranked = sorted(rows.items(), key=lambda kv: (-kv[1], kv[0]))
    for name, count in ranked[:limit]:
        lines.append(f"  {count:>10}  {name}")
    if limit is not None and len(ranked) > limit:
        lines.append(f"  ... {len(ranked) - limit} more")
    return lines


def report(limit: int | None = 20) -> str:
    """A text report of the counters and of each device's simulated HBM."""
    chip = _C.chip()
    lines = [
        f"torchtpu metrics (simulated TPU {chip['name']}, {_C.device_count()} device(s), "
        f"HBM {_bytes(_C.hbm_capacity_bytes())} each)",
    ]
    lines += _table("native ops", native_ops(), limit)
    lines += _table("CPU fallbacks", fallbacks(), limit)
    lines += _fused_eager_lines(limit)
    comp = compiled()
    if comp["dynamo_graphs"]:
        g = comp["graphs"]
        lines.append(
            f"torch.compile(backend='tpu'): {comp['dynamo_graphs']} Dynamo graphs -> "
            f"{g['forward']} forward, {g['backward']} backward, {g['inference']} inference graphs "
            f"({comp['graph_ops']} ATen ops, compiled in {comp['compile_s']:.3f} s); "
            f"{sum(comp['graph_breaks'].values())} graph breaks, "
            f"{len(comp['recompilations'])} recompilations"
        )
        lines.append(
            f"  programs: {comp['programs']} captured ({comp['program_ops']} ops, "
            f"{comp['ops_folded']} folded as constants), {comp['program_runs']} runs without "
            f"dispatch; {comp['runs_op_by_op']} graph calls op by op, "
            f"{comp['program_mismatches']} calls matching no program"
        )
        for reason, n in sorted(comp["program_failures"].items(), key=lambda kv: -kv[1])[:limit]:
            lines.append(f"  not a program x{n}: {reason}")
        cache = comp["cache"]
        if cache["directory"]:
            lines.append(
                f"  compilation cache {cache['directory']}: {cache['hits']} hits, "
                f"{cache['misses']} misses ({cache['saved']} saved), "
                f"{sum(cache['bypasses'].values())} bypasses"
            )
            for reason, n in sorted(cache["bypasses"].items(), key=lambda kv: -kv[1])[:limit]:
                lines.append(f"  not cached x{n}: {reason}")
        if comp["buckets"]:
            lines.append(
                f"  buckets of dynamic sizes: {comp['buckets']} ({comp['bucket_programs']} priced "
                f"by a capture at the bucket's sizes), padding charged "
                f"{comp['padding_s'] * 1e6:.2f} us (estimated)"
            )
            unpriced = sorted(comp["buckets_unpriced"].items(), key=lambda kv: -kv[1])
            for reason, n in unpriced[:limit]:
                lines.append(f"  bucket not priced x{n}: {reason}")
        for p in programs()[:limit]:
            bucket = (f" (charged as its bucket; {p['own_seconds'] * 1e6:.2f} us at its sizes)"
                      if p["charged_as"] else "")
            lines.append(
                f"  program {p['name']}: {p['ops']} ops in {p['regions']} regions "
                f"({p['fused_regions']} fused), {p['runs']} runs, "
                f"{p['estimated_seconds'] * 1e6:.2f} us per run (estimated, one launch){bucket}"
            )
        for reason, n in sorted(comp["graph_breaks"].items(), key=lambda kv: -kv[1])[:limit]:
            lines.append(f"  graph break x{n}: {reason}")
        for reason in comp["recompilations"][:limit]:
            lines.append(f"  recompiled: {reason}")
    est = estimate()
    if est["launches"]:
        lines.append(
            f"estimated for TPU {est['chip']} (cost model, not measured): "
            f"{est['device_time_s'] * 1e3:.3f} ms {est['error_band']['label']} over "
            f"{est['launches']} launches "
            f"(MXU {est['mxu_time_s'] * 1e3:.3f} ms, VPU {est['vpu_time_s'] * 1e3:.3f} ms, "
            f"HBM {est['hbm_time_s'] * 1e3:.3f} ms)"
        )
        lines.append(
            f"  {est['flops'] / 1e9:.3f} GFLOP useful, {est['mxu_flops'] / 1e9:.3f} GFLOP on the "
            f"MXUs (useful fraction {est['mxu_useful_fraction']:.1%}), "
            f"{_bytes(est['hbm_bytes'])} HBM traffic, {est['fraction_of_peak']:.1%} of peak, "
            f"intensity {est['arithmetic_intensity']:.1f} FLOP/B (ridge {est['ridge_point']:.0f})"
        )
        times = op_times()
        for name, t in sorted(times.items(), key=lambda kv: -kv[1])[: limit or len(times)]:
            lines.append(f"  {t * 1e3:>10.3f} ms  {name}")
        if est["priced_as_native"]:
            lines.append(f"  ({est['priced_as_native']} launches of host-fallback ops priced as if "
                         f"native: {', '.join(sorted(est['priced_as_native_ops']))})")
    hosts = host_times()
    if hosts:
        lines.append(f"measured host time of stream work: {sum(hosts.values()) * 1e3:.3f} ms")
        for name, t in sorted(hosts.items(), key=lambda kv: -kv[1])[: limit or len(hosts)]:
            lines.append(f"  {t * 1e3:>10.3f} ms  {name}")
    other = {k: v for k, v in counters().items() if not k.startswith("estimate.")}
    lines.append("counters:")
    for name in sorted(other):
        value = other[name]
        lines.append(f"  {name}: {_bytes(value) if name.endswith('_bytes') else value}")
    lines.append("memory (measured in the simulated HBM allocator):")
    for idx in range(_C.device_count()):
        dev = torch.device("tpu", idx)
        peak = torch.accelerator.max_memory_allocated(dev)
        if peak == 0 and torch.accelerator.memory_reserved(dev) == 0:
            continue
        lines.append(
            f"  tpu:{idx}: allocated {_bytes(torch.accelerator.memory_allocated(dev))}, "
            f"peak {_bytes(peak)}, reserved {_bytes(torch.accelerator.memory_reserved(dev))}"
        )
    return "\n".join(lines)
