#!/usr/bin/env python
"""PyTorch's device-generic test files and OpenReg's backend tests, run on "tpu".

    python test/upstream/run.py                        # every file present, strict eager
    python test/upstream/run.py --files ops,indexing   # some of them
    python test/upstream/run.py --files shape_ops -k nonzero --mode fused
    python test/upstream/run.py --list                 # which files, where they come from

What runs
---------
PyTorch's test files written against ``instantiate_device_type_tests`` (test_ops.py,
test_indexing.py, test_reductions.py, test_shape_ops.py) instantiate a copy of each test class
per device type; ``PrivateUse1TestBase`` is the copy for a PrivateUse1 backend, named
``<Class>PRIVATEUSE1`` with tests ending in ``_tpu`` (``torch._C._get_privateuse1_backend_name()``).
The runner selects that copy alone with PyTorch's own switch,
``PYTORCH_TESTING_DEVICE_ONLY_FOR=privateuse1`` (read by ``get_desired_device_type_test_bases``;
the framework maps the backend's name back to "privateuse1" before it filters), so no CPU or CUDA
copy is collected. torchtpu is imported by the plugin before any test module, so the
PrivateUse1 base is in ``device_type_test_bases`` when common_device_type is imported.

test_ops.py is restricted to its ``TestCommon`` class and to float32 (``--ops-dtypes``: tests
whose name ends in ``_float32``; ``float32,none`` adds TestCommon's tests that take no dtype,
test_errors, test_dtypes, test_out_warning...; ``all`` lifts the filter).

OpenReg's tests (PyTorch's in-tree example of an out-of-tree backend) use device "openreg" and
its module ``torch_openreg``. They are adapted at run time: each file is rewritten into
build/upstream/openreg_tpu/ (never committed, made anew at every run from the stored copy)
with the device's name and module mapped to "tpu"/torchtpu (``_adapt_openreg``). Tests of
OpenReg-only internals that have no meaning for another backend are listed in
``OPENREG_NOT_APPLICABLE`` with the reason and reported as "n/a".

Each file runs in its own pytest process (PyTorch's common_utils changes global state), with
``TORCHTPU_EAGER_MODE`` set from ``--mode``, a per-test timeout (pytest-timeout, signal method)
and a watchdog in this process: a test that neither finishes nor times out within the timeout
plus a minute is killed with its process, recorded as an error, and the file goes on in a new
process from the next test (so does a process that crashes). ``upstream_plugin.py`` (loaded with
``-p``) records every result as it happens.

The files (not committed: PyTorch's code stays out of this repository)
----------------------------------------------------------------------
They are read from build/upstream/ (``--upstream-dir``), one file per repository path, byte for
byte as stored by the project's search tool's ``read_file`` (repository ``pytorch/pytorch``,
16,000-character pages concatenated); ``SOURCES`` below names each path, the stored commit the
tool named, its length and its SHA-256 (checked at every run: a different copy is reported, not
refused). docs/testing.md ("PyTorch's device-generic tests and OpenReg's tests") says how to get
them. The stored versions are not all of one commit; where one imports a name the installed
torch 2.13 keeps elsewhere, the plugin maps it (``upstream_plugin._install_compat``), without
editing the file.

Output
------
A progress line every 25 tests and one per failure, then a table per file (passed / failed /
skipped / errors / n/a per test class) and JSON (``--json``; default
benchmarks/results/upstream_suites.json, or upstream_suites.partial.json for a run filtered
with -k; merged under a lock: a run replaces only the entries of the files and mode it ran)
with each failing test's id and the first line of its error. pytest's own output for each file
is in build/upstream/logs/<file>.<mode>.<runner pid>.log.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

from upstream_sources import _OPENREG_DIR, OPENREG_SOURCES, SOURCES

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")
# ("highest" as the CPU's float32 GEMM, not the chip's six passes: PyTorch's tests, whose float32
# tolerances assume IEEE float32 GEMMs)
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))
_DEFAULT_UPSTREAM = os.path.join(_REPO, "build", "upstream")
_DEFAULT_JSON = os.path.join(_REPO, "benchmarks", "results", "upstream_suites.json")

# Short names accepted by --files.
_ALIASES = {
    "ops": "test_ops.py", "indexing": "test_indexing.py",
    "reductions": "test_reductions.py", "shape_ops": "test_shape_ops.py",
}

# OpenReg tests that test OpenReg itself (its C++ extension's custom ops, its deliberate
# limitations and choices), with the reason they mean nothing for another backend. Keys are
# regular expressions on "file::Class::test". Everything else runs and is judged.
_CUSTOM_OPS = ("torch.ops.openreg.* are operators OpenReg's own C++ extension registers "
               "(custom_abs, custom_autograd_fn_*); another backend has no such operators")
OPENREG_NOT_APPLICABLE: dict[str, str] = {
    r"^test_ops\.py::TestAutogradFunction::": _CUSTOM_OPS,
    r"^test_ops\.py::TestCustomAutogradFunctions::": _CUSTOM_OPS,
    r"^test_ops\.py::TestSTUBExtended::test_custom_abs$": _CUSTOM_OPS,
    r"^test_device\.py::TestDevice::test_invalid_device_index$":
        "asserts OpenReg's own error text ('The device index is out of range' comes from "
        "OpenReg's C++, not from PyTorch); torchtpu raises the same RuntimeError with its own "
        "text naming the valid indices",
    r"^test_rng\.py::TestRNG::test_offset_unsupported$":
        "asserts OpenReg's own limitation ('openreg is a CPU-simulated backend and does not "
        "support offsets'); torchtpu implements generator offsets (get_offset/set_offset)",
    r"^test_autocast\.py::TestAutocast::test_openreg_autocast_float32_supported$":
        "runs a promote-policy op on float16 tensors under the backend's default autocast "
        "dtype, assuming it is float16 (OpenReg's); with torchtpu's bfloat16 default PyTorch's "
        "at::autocast::prioritize refuses the float16/bfloat16 mix, as it does on CUDA",
    r"^test_autocast\.py::TestAutocast::test_autocast_fast_dtype$":
        "asserts OpenReg's choice of float16 as its autocast dtype; torchtpu's is bfloat16 by "
        "design (the TPU's native low-precision type, docs/runtime.md)",
    r"^test_storage\.py::TestSerialization::test_open_device_numpy_serialization$":
        "its pickled zip archive names the device 'openreg:0' inside checksummed, "
        "length-prefixed data; the name cannot be mapped without rebuilding the archive",
}
# Whole OpenReg files that are not run, with the reason.
OPENREG_NOT_APPLICABLE_FILES: dict[str, str] = {
    "test_distributed.py":
        "tests OCCL, OpenReg's dummy collective backend (its collectives return None); "
        "torchtpu's c10d backend tpu_dist is tested against PyTorch's distributed suite "
        "(test/distributed_suite/run_upstream.py)",
}


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def _git_head() -> str:
    try:
        return subprocess.check_output(["git", "-C", _REPO, "rev-parse", "--short", "HEAD"],
                                       text=True).strip()
    except Exception:
        return "unknown"


# --------------------------------------------------------------------------------------------
# OpenReg adaptation

def _openreg_files(upstream: str) -> list[str]:
    d = os.path.join(upstream, "openreg")
    if not os.path.isdir(d):
        return []
    return sorted(f for f in os.listdir(d) if f.startswith("test_") and f.endswith(".py"))


def _adapt_openreg(text: str) -> str:
    """OpenReg's test source with the backend mapped to tpu: ``import torch_openreg`` imports
    torchtpu under that name, the device name "openreg" (strings, ``torch.openreg``,
    ``Tensor.openreg()``, ``is_openreg``) becomes "tpu", the enum aliases ``OPENREG`` and the
    display name "OpenReg" (PyTorch builds messages such as "Cannot re-initialize OpenReg in
    forked subprocess" from it) become ``TPU``. Left alone: ``torch.ops.openreg.*`` (OpenReg's
    own operators, listed as not applicable), bytes literals (pickled data) and names that only
    contain the word (``x_openreg``)."""
    out = []
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith(('b"', "b'")):
            out.append(line)
            continue
        line = re.sub(r"^(\s*)import torch_openreg\b", r"\1import torchtpu as torch_openreg",
                      line)
        line = line.replace("torch.ops.openreg.", "torch.ops.\0OPS\0.")
        line = re.sub(r"\bOPENREG\b", "TPU", line)
        line = re.sub(r"\bOpenReg\b", "TPU", line)  # the display name in PyTorch's messages
        line = re.sub(r"\bis_openreg\b", "is_tpu", line)
        line = re.sub(r"\bopenreg\b", "tpu", line)
        line = line.replace("torch.ops.\0OPS\0.", "torch.ops.openreg.")
        out.append(line)
    return "".join(out)


def _prepare_openreg(upstream: str) -> list[str]:
    src_dir = os.path.join(upstream, "openreg")
    dst_dir = os.path.join(upstream, "openreg_tpu")
    os.makedirs(dst_dir, exist_ok=True)
    out = []
    for name in _openreg_files(upstream):
        with open(os.path.join(src_dir, name), encoding="utf-8") as f:
            text = f.read()
        with open(os.path.join(dst_dir, name), "w", encoding="utf-8") as f:
            f.write(_adapt_openreg(text))
        out.append(os.path.join("openreg_tpu", name))
    return out


# --------------------------------------------------------------------------------------------
# One pytest process (or several, after a crash or a hang) per file

def _file_filters(rel: str, args) -> dict:
    control: dict = {"not_applicable": {}}
    if rel == "test_ops.py":  # PyTorch's, not OpenReg's openreg_tpu/test_ops.py
        control["class_filter"] = r"^TestCommon"
        wanted = [d.strip() for d in args.ops_dtypes.split(",") if d.strip()]
        if "all" not in wanted:
            alts = []
            for d in wanted:
                if d == "none":
                    # no dtype suffix: the name ends in the device ("..._tpu")
                    alts.append(r"_tpu$")
                else:
                    alts.append(rf"_{re.escape(d)}$")
            control["name_filter"] = "|".join(alts)
    if rel.startswith("openreg_tpu"):
        control["not_applicable"] = OPENREG_NOT_APPLICABLE
    return control


def _read_events(path: str, pos: int) -> tuple[list[dict], int]:
    events = []
    if not os.path.exists(path):
        return events, pos
    with open(path) as f:
        f.seek(pos)
        while True:
            line = f.readline()
            if not line or not line.endswith("\n"):
                break
            pos = f.tell()
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return events, pos


_OUTCOME_ORDER = {"passed": 0, "skipped": 1, "not_applicable": 1, "xfailed": 1, "xpassed": 2,
                  "failed": 3, "error": 4}  # a test's result is the worst of its phases


def _file_env(rel: str, args, results_path: str, control_path: str) -> dict:
    """The environment of a file's pytest processes."""
    env = dict(os.environ)
    env["PYTORCH_TESTING_DEVICE_ONLY_FOR"] = "privateuse1"
    env["TORCHTPU_EAGER_MODE"] = args.mode
    env.pop("TORCH_TPU_DEFER_AND_FUSE", None)
    env.pop("TPU_DEFER_AND_FUSE", None)
    env.pop("TPU_LAUNCH_BLOCKING", None)
    env["UPSTREAM_RESULTS"] = results_path
    env["UPSTREAM_CONTROL"] = control_path
    env["PYTHONPATH"] = os.pathsep.join([_HERE, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("TORCHTPU_FALLBACK", "silent")
    if rel.startswith("openreg_tpu"):
        # OpenReg's tests are written for its two devices (device_count() == 2, "index 2 is out
        # of range"); torchtpu simulates TORCHTPU_NUM_DEVICES chips.
        env["TORCHTPU_NUM_DEVICES"] = "2"
    return env


def _pytest_command(rel: str, args, upstream: str) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", rel, "-p", "upstream_plugin", "-q",
           "-p", "no:cacheprovider", "--rootdir", upstream, "-c", os.devnull,
           f"--timeout={args.timeout}", "--timeout-method=signal"]
    # No -W filters: tests count warnings under Python's default filter
    # (test_warn_invalid_degrees_of_freedom, test_bool_indices...); torchtpu's once-per-op
    # fallback warning is silenced with TORCHTPU_FALLBACK=silent instead.
    for k in args.k:
        cmd += ["-k", k]
    return cmd


class _FileRun:
    """One file's pytest processes (a new one after a hang or a crash, resuming after the tests
    done) and the events their plugin wrote: the results by node id, the test running now."""

    def __init__(self, rel: str, args, logs: str):
        self.rel, self.args = rel, args
        tag = rel.replace("/", "_").replace(".py", "")
        # One set of files per runner process: several runs (several engineers) may share the tree.
        stem = f"{tag}.{args.mode}.{os.getpid()}"
        self.results_path = os.path.join(logs, f"{stem}.jsonl")
        self.control_path = os.path.join(logs, f"{stem}.control.json")
        self.log_path = os.path.join(logs, f"{stem}.log")
        for p in (self.results_path, self.log_path):
            if os.path.exists(p):
                os.remove(p)
        self.results: dict[str, dict] = {}  # nodeid -> result (worst of its phases)
        self.collected = None
        self.done_count = 0
        self.start = 0.0
        self.running: tuple[str, float] | None = None  # (nodeid, start time)
        self.finished = False  # the plugin's "finished" event seen

    def _new_result(self, ev: dict) -> None:
        self.done_count += 1
        if self.args.quiet:
            return
        nid = ev["nodeid"]
        if ev["outcome"] in ("failed", "error", "xpassed"):
            print(f"  {ev['outcome'].upper():7s} {nid}: {ev['message'][:160]}", flush=True)
        if self.done_count % 25 == 0:
            el = time.time() - self.start
            total = (self.collected or 0)
            eta = (el / self.done_count * (total - self.done_count)) if total else 0
            print(f"  [{self.rel}] {self.done_count}/{total or '?'} tests, "
                  f"{el:.0f} s, ETA {eta:.0f} s", flush=True)

    def take(self, ev: dict) -> None:
        """One event of the plugin, while its process runs."""
        kind = ev.get("event")
        if kind == "collected":
            if self.collected is None:
                self.collected = ev["count"]
        elif kind == "start":
            self.running = (ev["nodeid"], ev["time"])
        elif kind == "result":
            nid = ev["nodeid"]
            prev = self.results.get(nid)
            if prev is None or _OUTCOME_ORDER[ev["outcome"]] > _OUTCOME_ORDER[prev["outcome"]]:
                self.results[nid] = ev
            if prev is None:
                self._new_result(ev)
            self.running = None
        elif kind == "finished":
            self.finished = True

    def _kill_hung_test(self, proc) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        nid = self.running[0]
        limit = self.args.timeout + 60
        self.results[nid] = {"nodeid": nid, "class": nid.split("::")[-2], "outcome": "error",
                             "duration": limit,
                             "message": f"hang: killed by the runner's watchdog after {limit} s"}
        self.done_count += 1
        print(f"  ERROR   {nid}: hang, killed after {limit} s", flush=True)
        self.running = None

    def watch(self, proc) -> int:
        """Reads the events of one pytest process until it exits (or is killed: lingering after
        pytest finished, or a test past its timeout by a minute); its exit code."""
        pos = 0
        self.running = None
        self.finished = False
        finished_at: float | None = None
        while True:
            rc = proc.poll()
            events, pos = _read_events(self.results_path, pos)
            for ev in events:
                self.take(ev)
            if rc is not None:
                events, pos = _read_events(self.results_path, pos)
                if any(e.get("event") == "finished" for e in events):
                    self.finished = True
                for ev in events:
                    if ev.get("event") == "result" and ev["nodeid"] not in self.results:
                        self.results[ev["nodeid"]] = ev
                        self.done_count += 1
                return rc
            if self.finished and finished_at is None:
                finished_at = time.time()
            if finished_at is not None and time.time() - finished_at > 30:
                # pytest is done but the process lingers (children a test spawned and left
                # hanging, e.g. OpenReg's IPC tests): end it with its process group.
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return proc.returncode
            if self.running is not None and time.time() - self.running[1] > self.args.timeout + 60:
                self._kill_hung_test(proc)
                return -9
            time.sleep(0.5)

    def resumable(self, rc: int) -> bool:
        """After a process that did not finish: whether a new one resumes the file (the test it
        died in recorded as an error), or nothing can be resumed (it died outside a test)."""
        if self.running is not None and self.running[0] not in self.results:
            nid = self.running[0]
            self.results[nid] = {"nodeid": nid, "class": nid.split("::")[-2], "outcome": "error",
                                 "duration": time.time() - self.running[1],
                                 "message": f"the pytest process died in this test (exit {rc})"}
            self.done_count += 1
            print(f"  ERROR   {nid}: process died (exit {rc})", flush=True)
            return True
        if rc == -9:
            return True
        # died outside a test (collection error, interpreter exit): nothing to resume
        if not self.results:
            tail = open(self.log_path).read()[-2000:]
            self.results["<collection>"] = {"nodeid": f"{self.rel}::<collection>",
                                            "class": "<collection>", "outcome": "error",
                                            "duration": 0, "message": _collection_error(tail)}
        return False


def _run_file(rel: str, args, upstream: str, logs: str) -> dict:
    run = _FileRun(rel, args, logs)
    control = _file_filters(rel, args)
    control["sys_path"] = [os.path.dirname(os.path.join(upstream, rel))]
    env = _file_env(rel, args, run.results_path, run.control_path)
    run.start = time.time()
    restarts = 0
    while True:
        control["done"] = sorted(run.results)
        with open(run.control_path, "w") as f:
            json.dump(control, f)
        cmd = _pytest_command(rel, args, upstream)
        with open(run.log_path, "a") as log:
            log.write(f"\n=== {' '.join(cmd)}\n")
            log.flush()
            proc = subprocess.Popen(cmd, cwd=upstream, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            rc = run.watch(proc)
        if run.finished or rc == 5 and not run.results:
            break
        if not run.resumable(rc):
            break
        restarts += 1
        if restarts > args.max_restarts:
            print(f"  giving up on {rel} after {restarts} restarts", flush=True)
            break
    return {"results": run.results, "wall_s": round(time.time() - run.start, 1),
            "collected": run.collected, "restarts": restarts,
            "log": os.path.relpath(run.log_path, _REPO)}


def _collection_error(tail: str) -> str:
    for line in tail.splitlines():
        if line.startswith("E  "):
            return line[1:].strip()[:400]
    lines = [l for l in tail.splitlines() if l.strip()]
    return lines[-1][:400] if lines else "pytest exited before running a test"


# --------------------------------------------------------------------------------------------
# Summaries

_COLUMNS = ("passed", "failed", "skipped", "errors", "n/a")


def _bucket(outcome: str) -> str:
    return {"passed": "passed", "failed": "failed", "xpassed": "failed", "error": "errors",
            "skipped": "skipped", "xfailed": "skipped", "not_applicable": "n/a"}[outcome]


def _summarize(run: dict) -> dict:
    classes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures = []
    for nid, r in sorted(run["results"].items()):
        b = _bucket(r["outcome"])
        classes[r.get("class", "?")][b] += 1
        if b in ("failed", "errors"):
            failures.append({"id": r["nodeid"], "outcome": r["outcome"],
                             "error": r.get("message", "")})
        elif b == "n/a":
            failures.append({"id": r["nodeid"], "outcome": "n/a", "error": r.get("message", "")})
    return {
        "classes": {c: {k: cnt.get(k, 0) for k in _COLUMNS} for c, cnt in sorted(classes.items())},
        "failures": [f for f in failures if f["outcome"] != "n/a"],
        "not_applicable": [f for f in failures if f["outcome"] == "n/a"],
        "wall_s": run["wall_s"], "collected": run["collected"], "restarts": run["restarts"],
    }


def _print_table(rel: str, summary: dict) -> None:
    print(f"\n{rel}  ({summary['wall_s']:.0f} s)")
    width = max([len(c) for c in summary["classes"]] + [10])
    print(f"  {'class':{width}s} " + " ".join(f"{c:>7s}" for c in _COLUMNS))
    total = collections.Counter()
    for cls, counts in summary["classes"].items():
        total.update(counts)
        print(f"  {cls:{width}s} " + " ".join(f"{counts[c]:7d}" for c in _COLUMNS))
    if len(summary["classes"]) > 1:
        print(f"  {'total':{width}s} " + " ".join(f"{total[c]:7d}" for c in _COLUMNS))


# --------------------------------------------------------------------------------------------

def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", default="all",
                   help="comma-separated: ops, indexing, reductions, shape_ops, openreg, or "
                        "file names (test_ops.py, openreg/test_device.py); default all present")
    p.add_argument("-k", action="append", default=[], help="pytest -k expression (repeatable)")
    p.add_argument("--mode", choices=("strict", "fused", "debug"), default="strict",
                   help="TORCHTPU_EAGER_MODE for the tests")
    p.add_argument("--ops-dtypes", default="float32",
                   help="test_ops.py's TestCommon dtypes: float32 (default), 'none' (tests "
                        "without a dtype), several comma-separated, or 'all'")
    p.add_argument("--timeout", type=int, default=300, help="seconds per test")
    p.add_argument("--max-restarts", type=int, default=50,
                   help="new pytest processes a file may take after crashes and hangs")
    p.add_argument("--upstream-dir", default=_DEFAULT_UPSTREAM,
                   help="where the stored PyTorch files are (default build/upstream)")
    p.add_argument("--json", default=None,
                   help="results file, merged (default: benchmarks/results/upstream_suites.json, "
                        "or upstream_suites.partial.json for a run with -k)")
    p.add_argument("--list", action="store_true", help="list the files and their sources")
    p.add_argument("--show", action="store_true",
                   help="print the tables and failures of the results file (--json), run nothing")
    p.add_argument("-q", "--quiet", action="store_true", help="tables only")
    return p.parse_args(argv)


def _select(args, upstream: str) -> list[str]:
    present = [f for f in SOURCES if os.path.exists(os.path.join(upstream, f))]
    present += [f for f in sorted(os.listdir(upstream)) if f.startswith("test_")
                and f.endswith(".py") and f not in present] if os.path.isdir(upstream) else []
    openreg = [os.path.join("openreg", f) for f in _openreg_files(upstream)]
    if args.files == "all":
        return present + openreg
    out = []
    for name in args.files.split(","):
        name = name.strip()
        if name == "openreg":
            out += openreg
        elif name in _ALIASES:
            out.append(_ALIASES[name])
        else:
            out.append(name)
    return out


def _show(args) -> int:
    """--show: the tables and failures of the results file."""
    with open(args.json) as f:
        data = json.load(f)
    for mode, files in data.get("runs", {}).items():
        for rel, summary in files.items():
            print(f"\n[{mode}]", end="")
            _print_table(rel, summary)
            for fail in summary.get("failures", []):
                print(f"    {fail['outcome']:7s} {fail['id'].split('::', 1)[-1]}: "
                      f"{fail['error'][:150]}")
    return 0


def _list(upstream: str, selected) -> int:
    """--list (or no file to run): each file, whether it is the expected copy, its source."""
    for name, src in SOURCES.items():
        path = os.path.join(upstream, name)
        state = "missing"
        if os.path.exists(path):
            state = "ok" if _sha256(path) == src["sha256"] else "present, other copy"
        print(f"{name:24s} {state:20s} pytorch/pytorch:{src['path']} "
              f"@{src.get('commit') or 'id ' + src.get('id', '?')}")
    for name in _openreg_files(upstream):
        src = OPENREG_SOURCES.get(name, {})
        ok = _sha256(os.path.join(upstream, "openreg", name)) == src.get("sha256")
        print(f"openreg/{name:16s} {'ok' if ok else 'present, other copy':20s} "
              f"pytorch/pytorch:{_OPENREG_DIR}/{name} @{src.get('commit', '?')}")
    if not selected:
        print(f"no test files in {upstream}: see docs/testing.md", file=sys.stderr)
        return 2
    return 0


def _run_selected(rel: str, args, upstream: str, logs: str) -> dict | None:
    """One selected file run (or reported not applicable): its summary, printed; None if the
    file is missing."""
    local = rel
    if rel.startswith("openreg/"):
        local = rel.replace("openreg/", "openreg_tpu/", 1)
    path = os.path.join(upstream, local)
    if not os.path.exists(path):
        print(f"{rel}: missing in {upstream} (see docs/testing.md)", file=sys.stderr)
        return None
    is_openreg = rel.startswith("openreg/")
    src = OPENREG_SOURCES.get(os.path.basename(rel)) if is_openreg else SOURCES.get(rel)
    stored = os.path.join(upstream, rel)  # the stored copy (OpenReg: before adaptation)
    if src and _sha256(stored) != src["sha256"]:
        print(f"{rel}: not the copy this runner was written against (SHA-256 differs)",
              file=sys.stderr)
    print(f"== {rel} ({args.mode} eager)", flush=True)
    na_reason = OPENREG_NOT_APPLICABLE_FILES.get(os.path.basename(rel)) if is_openreg else None
    if na_reason:
        nid = f"{local}::<file>"
        run = {"results": {nid: {"nodeid": nid, "class": "<file>", "outcome": "not_applicable",
                                 "message": na_reason}},
               "wall_s": 0.0, "collected": 0, "restarts": 0, "log": ""}
        summary = _summarize(run)
        summary["log"] = ""
    else:
        head = _git_head()  # the library may be rebuilt while a long run goes on
        run = _run_file(local, args, upstream, logs)
        summary = _summarize(run)
        summary["torchtpu"] = head
        summary["log"] = run["log"]
    _print_table(rel, summary)
    return summary


def _write_results(args, upstream: str, logs: str, summaries: dict) -> None:
    """The JSON, merged with the file's other entries, under a lock (runs may end at the same
    time)."""
    import fcntl

    import torch
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(os.path.join(logs, "results.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = {}
        if os.path.exists(args.json):
            with open(args.json) as f:
                data = json.load(f)
        data["generated_by"] = "test/upstream/run.py"
        data["torch"] = f"{torch.__version__} ({torch.version.git_version[:10]})"
        data["sources"] = {
            **{k: {"repo": "pytorch/pytorch", **v} for k, v in SOURCES.items()},
            **{f"openreg/{n}": {"repo": "pytorch/pytorch", "path": f"{_OPENREG_DIR}/{n}",
                                **OPENREG_SOURCES.get(n, {})} for n in _openreg_files(upstream)},
        }
        runs = data.setdefault("runs", {}).setdefault(args.mode, {})
        for rel, s in summaries.items():
            s["filter"] = {"k": args.k, "timeout_s": args.timeout,
                           "ops_dtypes": args.ops_dtypes if rel == "test_ops.py" else None}
            runs[rel] = s
        tmp = args.json + f".{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, args.json)


def main(argv=None) -> int:
    args = _parse(argv)
    if args.json is None:
        args.json = _DEFAULT_JSON if not args.k or args.show else \
            _DEFAULT_JSON.replace(".json", ".partial.json")
    upstream = os.path.abspath(args.upstream_dir)
    logs = os.path.join(upstream, "logs")
    os.makedirs(logs, exist_ok=True)
    selected = _select(args, upstream)
    if args.show:
        return _show(args)
    if args.list or not selected:
        return _list(upstream, selected)
    if any(s.startswith("openreg") for s in selected):
        _prepare_openreg(upstream)
    summaries = {}
    for rel in selected:
        summary = _run_selected(rel, args, upstream, logs)
        if summary is not None:
            summaries[rel] = summary
    _write_results(args, upstream, logs, summaries)
    print(f"\nresults: {os.path.relpath(args.json, _REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
