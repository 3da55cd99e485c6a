"""Recomputes the cost-model figures of the committed results with the current cost model.

A benchmark's JSON holds two kinds of figures: host times, measured on the machine of the run,
and TPU times *estimated* by the cost model (csrc/sim/CostModel.cpp), with what is derived from
them (ratios of estimates, tokens/s per chip, estimate over roofline). When the cost model
changes, the estimates of a result run before the change are stale while its host times are
not. This command reprices each result: every benchmark with estimates has a ``reprice(payload)``
next to its own code that recomputes only those fields for the configurations the JSON records
(in a dry run where the call allows it, else by making the calls the benchmark makes before its
estimate and reading it: nothing is timed), keeps the measured ones, and this command records
in the JSON that it did
(``repriced``: the torchtpu commit and the fields) and redraws its plots where they show
estimates. benchmarks/readme.py names the commit beside the run's own.

    python benchmarks/reprice.py                  # reprices every result below, writes the changed
    python benchmarks/reprice.py --check          # prints the table of stale figures, writes nothing
    python benchmarks/reprice.py gemm seed        # some results only

Each result is repriced in a process of its own (a benchmark's settings: precision, eager mode,
Dynamo's caches, the dry run's HBM, stay in it). Prints one line per figure that moved: result,
field, stored, current, current / stored. NOT_REPRICED says why the other results are not
repriced here. test/python/test_docs_figures.py reprices the cheap ones (dry runs, the ICI
model) and fails while they differ from the committed JSON.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROOT = HERE.parent

# result stem -> the module (a benchmark under benchmarks/) whose reprice(payload) recomputes it
REPRICED = {
    "gemm": "gemm", "vpu-strict": "vpu", "vpu-debug": "vpu", "seed": "seed",
    "eager_modes": "eager_modes", "compile": "compile", "compile_quick": "compile",
    "collectives": "collectives", "collectives_quick": "collectives",
    "dry_run": "dry_run", "vllm": "vllm", "pallas_kernels": "pallas_kernels",
}

NOT_REPRICED = {
    "calibration": "python benchmarks/calibration.py prices every row itself at each run",
    "host_speed": "host times only", "host_speed_quick": "host times only",
    "loop_detection": "host times only", "zoo_time": "host times only",
}

# A stored figure within this relative difference of the current one is current.
RTOL = 1e-6


def row_id(row: dict) -> str:
    """A short name of one row of a result's list: its case, op, kernel, chip, ..."""
    keys = ("case", "op", "kernel", "chip", "chips", "kind", "n", "reps", "mib")
    return " ".join(f"{row[k]}" if k in ("case", "op", "kernel", "chip", "kind") else f"{k}={row[k]}"
                    for k in keys if k in row and not isinstance(row[k], (dict, list)))


def leaves(value, path: str = "", field: str = ""):
    """(path, field, value) of every number and string in a JSON value: the path names each row of
    a list by row_id, the field leaves the rows out (rows.estimated_tpu_s)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k), f"{field}.{k}" if field else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            name = row_id(v) if isinstance(v, dict) else ""
            yield from leaves(v, f"{path}[{name or i}]", field)
    else:
        yield path, field, value


def moved(old: dict, new: dict) -> list[tuple[str, str, object, object]]:
    """(path, field, stored, current) of the figures of `new` that differ from `old`'s (beyond
    RTOL for numbers)."""
    def figures(payload):
        return leaves({k: v for k, v in payload.items() if k not in ("machine", "repriced")})
    before = {path: value for path, _, value in figures(old)}
    out = []
    for path, field, value in figures(new):
        stored = before.get(path)
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not isinstance(stored, (int, float)):
            if stored != value:
                out.append((path, field, stored, value))
        elif abs(value - stored) > RTOL * max(abs(value), abs(stored)):
            out.append((path, field, stored, value))
    return out


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True)
    return out.stdout.strip()


def benchmark(module: str):
    """benchmarks/<module>.py imported under a name of its own (pallas_kernels.py imports the
    tests' module of the same name)."""
    import importlib.util

    sys.path.insert(0, str(HERE))
    spec = importlib.util.spec_from_file_location(f"benchmark_{module}", HERE / f"{module}.py")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = loaded
    spec.loader.exec_module(loaded)
    return loaded


def reprice_in_process(stem: str) -> dict:
    """The result `stem` repriced in this process (its benchmark module imported here)."""
    payload = json.loads((RESULTS / f"{stem}.json").read_text())
    return benchmark(REPRICED[stem]).reprice(json.loads(json.dumps(payload)))


def replot(stem: str) -> None:
    """Redraws the plots of the result `stem` from its JSON, where its benchmark plots estimates
    (a ``replot(payload)`` beside its ``reprice``)."""
    module = benchmark(REPRICED[stem])
    if hasattr(module, "replot"):
        module.replot(json.loads((RESULTS / f"{stem}.json").read_text()))


def reprice_in_child(stem: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "out.json"
        env = dict(os.environ)
        if stem == "dry_run":  # (the dry run simulates v7's HBM so the step completes: dry_run.py)
            env.setdefault("TORCHTPU_HBM_BYTES", str(192 * 2**30))
        subprocess.run([sys.executable, __file__, "--child", stem, str(out)], check=True, env=env)
        return json.loads(out.read_text())


def indent(stem: str) -> int:
    """The indentation the result's file is written with (vllm.json's is 1, the others' 2)."""
    lines = (RESULTS / f"{stem}.json").read_text().splitlines()
    return len(lines[1]) - len(lines[1].lstrip(" ")) if len(lines) > 1 else 2


def fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return json.dumps(v) if isinstance(v, (dict, list)) else str(v)


def ratio(stored, current) -> str:
    if isinstance(stored, (int, float)) and isinstance(current, (int, float)) and stored \
            and not isinstance(stored, bool):
        return f"{current / stored:.3f}"
    return ""


def record(stem: str, old: dict, new: dict, changes: list) -> dict:
    """`new` with what repricing changed recorded: the commit, the date, the fields. The run's
    own date is kept in its machine record (a result written before it was recorded there is
    dated by its file's last commit, which the repriced file's commit would replace)."""
    sys.path.insert(0, str(HERE))
    import readme

    fields = sorted({field for _, field, _, _ in changes})
    new["machine"] = dict(old.get("machine") or {})
    new["machine"].setdefault("date", readme.run_date(RESULTS / f"{stem}.json", old))
    new["repriced"] = {"commit": commit(), "date": datetime.date.today().isoformat(),
                       "command": "python benchmarks/reprice.py", "fields": fields,
                       "note": "cost-model figures recomputed with the commit's cost model for the "
                               "recorded configurations; host times are the run's"}
    return new


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="*", help=f"result stems (default: {', '.join(REPRICED)})")
    ap.add_argument("--check", action="store_true", help="print the stale figures, write nothing; "
                    "exit 1 when some are stale")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        stem, out = args.child
        Path(out).write_text(json.dumps(reprice_in_process(stem)))
        return 0
    stems = args.results or [s for s in REPRICED if (RESULTS / f"{s}.json").exists()]
    for s in stems:
        if s not in REPRICED:
            ap.error(f"{s}: not repriced here ({NOT_REPRICED.get(s, 'no such result')})")
    stale = 0
    print(f"{'result':<18} {'field':<72} {'stored':>11} {'current':>11} {'ratio':>7}")
    for stem in stems:
        old = json.loads((RESULTS / f"{stem}.json").read_text())
        new = reprice_in_child(stem)
        changes = moved(old, new)
        for path, _, stored, current in changes:
            print(f"{stem:<18} {path:<72} {fmt(stored):>11} {fmt(current):>11} "
                  f"{ratio(stored, current):>7}", flush=True)
        stale += bool(changes)
        if not changes:
            print(f"{stem:<18} (current)", flush=True)
        elif not args.check:
            payload = record(stem, old, new, changes)
            (RESULTS / f"{stem}.json").write_text(json.dumps(payload, indent=indent(stem)) + "\n")
            replot(stem)
            print(f"{stem:<18} repriced: wrote results/{stem}.json", flush=True)
    for stem, why in NOT_REPRICED.items():
        if not args.results and (RESULTS / f"{stem}.json").exists():
            print(f"{stem:<18} not repriced: {why}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
