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

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")
# ("highest" as the CPU's float32 GEMM, not the chip's six passes: PyTorch's tests, whose float32
# tolerances assume IEEE float32 GEMMs)
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))
_DEFAULT_UPSTREAM = os.path.join(_REPO, "build", "upstream")
_DEFAULT_JSON = os.path.join(_REPO, "benchmarks", "results", "upstream_suites.json")
_OPENREG_DIR = "test/cpp_extensions/open_registration_extension/torch_openreg/tests"

# Local file name -> where it comes from. "commit" is the stored commit the search tool named for
# the text that was read ("id" where the tool reached the file by its index id and named no
# commit); chars and sha256 are of the file as written to build/upstream/.
SOURCES: dict[str, dict] = {
    "test_shape_ops.py": {
        "path": "test/test_shape_ops.py",
        "commit": "00972c015f0846e856f3fb8d46de73804a55a4de",
        "chars": 35524,
        "sha256": "a1c4916d0aef0fc69be208745f8c921d2371d0f81089693dc0fb4792e0e25a5b",
    },
    "test_indexing.py": {
        "path": "test/test_indexing.py",
        "commit": "017943b70f6920c395e3b6dac100e2cd7ecfa92a",
        "chars": 98599,
        "sha256": "f9b099d66c4100932a6a487b6cdecbc3315ae2d80228277daa8a2372052cee60",
    },
    "test_ops.py": {
        # The stored versions the tool lists by path (c2148844..., 000ca08b...) are of 2021 and
        # 2022 and do not import against torch 2.13; this one (TestCommon with
        # test_reduction_tag_coverage, onlyNativeDeviceTypesAnd) was reached by its text
        # (find_string "_ops_and_refs_with_no_numpy_ref = [", index id 14400257), for which the
        # tool names no commit.
        "path": "test/test_ops.py",
        "commit": None,
        "id": "14400257",
        "chars": 124474,
        "sha256": "a560bdc11e930a4faacc110dfc1f0040e4e2698aec2244bd92300c6403ce5153",
    },
    "test_reductions.py": {
        "path": "test/test_reductions.py",
        "commit": "002ca6715ba1ab4d2369262b487eeb30bf249911",
        "chars": 188835,
        "sha256": "04347168f8cd986e9bad16ac10a92785d1d1c3d0e6fc6a329f98b492453e180b",
    },
}

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


def _run_file(rel: str, args, upstream: str, logs: str) -> dict:
    tag = rel.replace("/", "_").replace(".py", "")
    # One set of files per runner process: several runs (several engineers) may share the tree.
    stem = f"{tag}.{args.mode}.{os.getpid()}"
    results_path = os.path.join(logs, f"{stem}.jsonl")
    control_path = os.path.join(logs, f"{stem}.control.json")
    log_path = os.path.join(logs, f"{stem}.log")
    for p in (results_path, log_path):
        if os.path.exists(p):
            os.remove(p)
    control = _file_filters(rel, args)
    control["sys_path"] = [os.path.dirname(os.path.join(upstream, rel))]
    results: dict[str, dict] = {}     # nodeid -> result (worst of its phases)
    order = {"passed": 0, "skipped": 1, "not_applicable": 1, "xfailed": 1, "xpassed": 2,
             "failed": 3, "error": 4}
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
    start = time.time()
    collected = None
    restarts = 0
    done_count = 0
    while True:
        control["done"] = sorted(results)
        with open(control_path, "w") as f:
            json.dump(control, f)
        cmd = [sys.executable, "-m", "pytest", rel, "-p", "upstream_plugin", "-q",
               "-p", "no:cacheprovider", "--rootdir", upstream, "-c", os.devnull,
               f"--timeout={args.timeout}", "--timeout-method=signal"]
        # No -W filters: tests count warnings under Python's default filter
        # (test_warn_invalid_degrees_of_freedom, test_bool_indices...); torchtpu's once-per-op
        # fallback warning is silenced with TORCHTPU_FALLBACK=silent instead.
        for k in args.k:
            cmd += ["-k", k]
        with open(log_path, "a") as log:
            log.write(f"\n=== {' '.join(cmd)}\n")
            log.flush()
            proc = subprocess.Popen(cmd, cwd=upstream, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            pos = 0
            running: tuple[str, float] | None = None
            finished = False
            finished_at: float | None = None
            while True:
                rc = proc.poll()
                events, pos = _read_events(results_path, pos)
                for ev in events:
                    kind = ev.get("event")
                    if kind == "collected":
                        if collected is None:
                            collected = ev["count"]
                    elif kind == "start":
                        running = (ev["nodeid"], ev["time"])
                    elif kind == "result":
                        nid = ev["nodeid"]
                        prev = results.get(nid)
                        if prev is None or order[ev["outcome"]] > order[prev["outcome"]]:
                            results[nid] = ev
                        if prev is None:
                            done_count += 1
                            if ev["outcome"] in ("failed", "error", "xpassed") and not args.quiet:
                                print(f"  {ev['outcome'].upper():7s} {nid}: {ev['message'][:160]}",
                                      flush=True)
                            if done_count % 25 == 0 and not args.quiet:
                                el = time.time() - start
                                total = (collected or 0)
                                eta = (el / done_count * (total - done_count)) if total else 0
                                print(f"  [{rel}] {done_count}/{total or '?'} tests, "
                                      f"{el:.0f} s, ETA {eta:.0f} s", flush=True)
                        running = None
                    elif kind == "finished":
                        finished = True
                if rc is not None:
                    events, pos = _read_events(results_path, pos)
                    if any(e.get("event") == "finished" for e in events):
                        finished = True
                    for ev in events:
                        if ev.get("event") == "result" and ev["nodeid"] not in results:
                            results[ev["nodeid"]] = ev
                            done_count += 1
                    break
                if finished and finished_at is None:
                    finished_at = time.time()
                if finished_at is not None and time.time() - finished_at > 30:
                    # pytest is done but the process lingers (children a test spawned and left
                    # hanging, e.g. OpenReg's IPC tests): end it with its process group.
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    rc = proc.returncode
                    break
                if running is not None and time.time() - running[1] > args.timeout + 60:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    nid = running[0]
                    results[nid] = {"nodeid": nid, "class": nid.split("::")[-2],
                                    "outcome": "error", "duration": args.timeout + 60,
                                    "message": f"hang: killed by the runner's watchdog after "
                                               f"{args.timeout + 60} s"}
                    done_count += 1
                    print(f"  ERROR   {nid}: hang, killed after {args.timeout + 60} s", flush=True)
                    running = None
                    rc = -9
                    break
                time.sleep(0.5)
        if finished or rc == 5 and not results:
            break
        if running is not None and running[0] not in results:
            nid = running[0]
            results[nid] = {"nodeid": nid, "class": nid.split("::")[-2], "outcome": "error",
                            "duration": time.time() - running[1],
                            "message": f"the pytest process died in this test (exit {rc})"}
            done_count += 1
            print(f"  ERROR   {nid}: process died (exit {rc})", flush=True)
        elif rc == -9:
            pass
        else:
            # died outside a test (collection error, interpreter exit): nothing to resume
            if not results:
                tail = open(log_path).read()[-2000:]
                results["<collection>"] = {"nodeid": f"{rel}::<collection>", "class": "<collection>",
                                           "outcome": "error", "duration": 0,
                                           "message": _collection_error(tail)}
            break
        restarts += 1
        if restarts > args.max_restarts:
            print(f"  giving up on {rel} after {restarts} restarts", flush=True)
            break
    return {"results": results, "wall_s": round(time.time() - start, 1),
            "collected": collected, "restarts": restarts, "log": os.path.relpath(log_path, _REPO)}


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
    if args.list or not selected:
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
    if any(s.startswith("openreg") for s in selected):
        _prepare_openreg(upstream)
    summaries = {}
    for rel in selected:
        local = rel
        if rel.startswith("openreg/"):
            local = rel.replace("openreg/", "openreg_tpu/", 1)
        path = os.path.join(upstream, local)
        if not os.path.exists(path):
            print(f"{rel}: missing in {upstream} (see docs/testing.md)", file=sys.stderr)
            continue
        is_openreg = rel.startswith("openreg/")
        src = OPENREG_SOURCES.get(os.path.basename(rel)) if is_openreg else SOURCES.get(rel)
        stored = os.path.join(upstream, rel)  # the stored copy (OpenReg: before adaptation)
        if src and _sha256(stored) != src["sha256"]:
            print(f"{rel}: not the copy this runner was written against (SHA-256 differs)",
                  file=sys.stderr)
        print(f"== {rel} ({args.mode} eager)", flush=True)
        na_reason = OPENREG_NOT_APPLICABLE_FILES.get(os.path.basename(rel)) \
            if rel.startswith("openreg/") else None
        if na_reason:
            nid = f"{local}::<file>"
            run = {"results": {nid: {"nodeid": nid, "class": "<file>", "outcome": "not_applicable",
                                     "message": na_reason}},
                   "wall_s": 0.0, "collected": 0, "restarts": 0, "log": ""}
            summaries[rel] = _summarize(run)
            summaries[rel]["log"] = ""
            _print_table(rel, summaries[rel])
            continue
        head = _git_head()  # the library may be rebuilt while a long run goes on
        run = _run_file(local, args, upstream, logs)
        summaries[rel] = _summarize(run)
        summaries[rel]["torchtpu"] = head
        summaries[rel]["log"] = run["log"]
        _print_table(rel, summaries[rel])
    # JSON, merged with the file's other entries, under a lock (runs may end at the same time)
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
    print(f"\nresults: {os.path.relpath(args.json, _REPO)}")
    return 0


# OpenReg test file (build/upstream/openreg/<name>, from <_OPENREG_DIR>/<name>) -> (stored commit
# the tool named, characters, SHA-256). The files are of several commits, all of them newer than
# torch 2.13's OpenReg.
_OPENREG_ROWS = {
    "test_autocast.py": ("1a77ceaeb46f211facc0f32832597750b269bf74", 1408, "00744a6a125e1bb897e69445d9296e616c4f58c0d5ddf263824c632d33aa3022"),
    "test_autograd.py": ("248ab79e343e16af35e2809e7ea5a559003b389e", 1076, "94a1be850782b0aebaabd5a79aaa55d3f70780012325660307e0f527ee9b6d02"),
    "test_compile.py": ("007239ee87e5a23135b8bc067560377378bfbfee", 7357, "84b977b3b5207e320d2773082951c7d7dd0a54e5f07a4c4a22555d9bf6e00171"),
    "test_device.py": ("0f73d8fb15625b81f8035a82b1f15ba535e592de", 14042, "5d84706e9f4edba766836409a603aacac697dee59994d4aed242236261035102"),
    "test_device_type.py": ("b8ed89c9175fbbcc82bfd393d414e5a9562be060", 8367, "8533c019c7fad3334033db5b82ba04a7ad0de843f7e720e4d21b2da45fd083dc"),
    "test_distributed.py": ("123527f6f7b16502625d521cba47169c7c675fa5", 3401, "fddb3322543b6f1ad0f1a2e34eb332e0a5258be884a4f945c6cf738db747d3c0"),
    "test_event.py": ("0f73d8fb15625b81f8035a82b1f15ba535e592de", 11616, "898711186b21124e13fabc6426302fb9c12125b9f61b90b9ee696faed402daa2"),
    "test_ipc.py": ("e6983c9205c75d77d52e60fb67501d0787d47f1b", 7799, "a938b2b9aaaf8860856d3784bc57e40c566009f5bff24c0aa1cd7a1a30142949"),
    "test_memory.py": ("022e153b0d16d619a7afcd9e17394beeecae3d9b", 17819, "0e92c23fe6473161ebf62e85e64acb88d0d625534a27abafe99e00a448dd30b3"),
    "test_misc.py": ("1deb726328daf1bca21a137820cc17e4211c3c38", 9588, "06f4b0a2a5eff0e38a3b761bcbaae4865711d2b59e96ba0b615e4cad7d21bf70"),
    "test_opinfo.py": ("0aef7d2ce2d6879b37cc8af2b045c34d73289d19", 6309, "28738e615478cdcc851f06e2ab4dd5b42872606651a3b952391c4ae0ebad4573"),
    "test_ops.py": ("08289702bf50ae5405cfb82b863dcbb266a14daf", 27201, "df5ebaff2add1cba6b687371defd75bd5f8c47632a0ca9123cff40232e5d0e4c"),
    "test_profiler.py": ("0104bfb6f8f8c233228584a4faec409ad1482d75", 21869, "72a0d71e660695a3e01622721caaf5f097b2be89d36b240ceb38826fb741657f"),
    "test_rng.py": ("1effc28d7c131c9004106260026e2dcc66080ff3", 1640, "67d09c7cc35506143a7ca661a9d6ee5e62df097143e6a4bfc1b84a0c9210ef56"),
    "test_rnn.py": ("2868a43d10604208f63ce3f56f9f02ea352508e3", 5331, "fd8508e6e3d639bf3cc137ca9b163a7151c8bbb28843c04a40c5410985ebd43c"),
    "test_sdpa.py": ("60dc3e8e2519d2a340fc67e555b979d885950a95", 3823, "bcfa1452bbb008ab4a31eac9434f4749d103edfa522a72bde3b5e93a83c81ae9"),
    "test_storage.py": ("3922f4d589bb3b4b6f803f67707522148556aeaa", 13575, "1fa400c81c9f25cad417da81d117ec63cf665e37daebc3fbffb246ffe5ea38d4"),
    "test_streams.py": ("07ddd06eb45abc5dbdd57bbacb10aed83d5165ff", 2419, "34998fddbb08234db14fbfc4ee93437fb538565af429fc5a9da634cd4de1284d"),
    "test_testing.py": ("0046565d83ea02088f1735bb7bcf35e1cbaceada", 1897, "43b7b09a2c1f74bd92ba4c0bdf56146e223315a11e2c8b08added1317418c99c"),
    "test_utils.py": ("248ab79e343e16af35e2809e7ea5a559003b389e", 565, "eea7e43f7175496459e55c265a31b72aede6aba141786b3ef78dd770691c40a7"),
}
OPENREG_SOURCES: dict[str, dict] = {
    name: {"commit": c, "chars": n, "sha256": h} for name, (c, n, h) in _OPENREG_ROWS.items()
}

if __name__ == "__main__":
    sys.exit(main())
