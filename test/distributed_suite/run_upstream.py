#!/usr/bin/env python
"""PyTorch's own distributed test suite against the c10d backend "tpu_dist".

The suite is the one in the wheel, ``torch/testing/_internal/distributed/distributed_test.py``
(``DistributedTest._DistTestBase``), driven the way upstream's
``test/distributed/test_distributed_spawn.py`` drives it: a class
``TestDistBackend + DistributedTest._DistTestBase`` whose ``setUp`` spawns WORLD_SIZE processes
(``MultiProcessTestCase``), each of which calls ``init_process_group(BACKEND, file://...)``, runs
one test method and exits; the parent joins them with a timeout and turns exit codes into
pass / fail / skip. Environment as upstream's run_test.py sets it: BACKEND, WORLD_SIZE,
TEMP_DIR (with ``barrier/`` and ``test_dir/``), INIT_METHOD.

    python test/distributed_suite/run_upstream.py                      # everything, world size 2
    python test/distributed_suite/run_upstream.py -k all_reduce -k broadcast
    python test/distributed_suite/run_upstream.py --world-size 8 -k _group$   # subgroups of 8
    python test/distributed_suite/run_upstream.py --lift-name-gates gloo,mpi  # see below
    python test/distributed_suite/run_upstream.py --list               # what would run / skip
    python test/distributed_suite/run_upstream.py --rerun-failures \
        benchmarks/results/upstream_distributed.json                    # after a fix

How the backend name gates the suite, and what this runner does about it
-------------------------------------------------------------------------
* Many tests carry ``skip_but_pass_in_sandcastle_if(BACKEND != "nccl" / "gloo" ...)``: they are
  NCCL-only or Gloo-only and stay skipped for "tpu_dist" (their reason says which).
* ``DistTestCases.backend_feature`` names the backends that implement a feature. "tpu_dist" is
  added (in memory, before the suite is imported: the sets are read when its decorators run) to
  ``plugin`` (it is a third-party backend registered with ``Backend.register_backend``, what
  that set is for), ``ddp`` and ``subgroup`` (it runs DDP and subgroups), and ``gpu``, which the
  suite uses only as the allow-list of ``require_backend_is_available`` (every test behind it
  that needs CUDA has its own CUDA skip). Not to ``cuda`` (DDP comm hooks on CUDA tensors).
  ``--no-features`` runs without any of this.
* CUDA tests (``skip_if_no_gpu``, ``skip_if_lt_x_gpu``, ``rank_to_GPU`` / ``.cuda()``) skip on
  this CPU build; there is no device hook in the suite (``init_multigpu_helper`` only knows
  cuda / hpu / xpu), so they cannot be pointed at tpu devices without rewriting them.
* The tests that do not use CUDA (the Gloo path) build their tensors with factory functions and
  no device (``_build_tensor(...)`` = ``torch.empty(...)``, ``torch.ones(...)``, models from
  ``nn.Linear``...): CPU tensors. With ``--device tpu`` (the default for tpu_dist) each rank
  process takes its own chip, ``tpu:(rank % device_count)``, and runs the test body under
  ``torch.set_default_device`` of that chip, PyTorch's own switch for "code that names no
  device": those tensors and models are then tpu tensors, and tpu_dist receives tpu tensors. Code
  that names the CPU (``device="cpu"``, ``.cpu()``) keeps CPU tensors, as it would for any
  backend, and so do c10d's object collectives (their tensors go on the CPU for a group that
  has a CPU backend) and legacy constructors (``torch.DoubleTensor(1)``). Each rank counts the
  devices of the tensors tpu_dist's collectives receive ("backend_tensors" in the JSON).
  ``--device cpu`` runs the tests unchanged: tpu_dist then receives CPU tensors, which it hands
  to Gloo as they are.
* The ``_group`` tests use the subgroup [1, 2] and ``skip_if_small_worldsize`` skips them
  below a world size of 8 (``--world-size 8``: 8 processes per test).
* Some tests that do not need CUDA are skipped only by a gate on the backend's name
  (``BACKEND != "gloo"``: all_reduce_coalesced, scatter_object_list, get_future, no_sync...;
  "Only MPI supports CPU all_to_all_single"...). ``--lift-name-gates gloo,mpi`` runs them too,
  against tpu_dist, and marks them as lifted in the results (found by evaluating each
  decorator again with the suite's BACKEND set to those names; see _name_gated). Off by
  default: the default counts are the suite's own verdict for the name "tpu_dist".
* ``--backend gloo --device cpu`` runs the same suite on stock Gloo, as a reference for which
  failures come from this environment rather than from tpu_dist.

Results: a progress line per test, a summary, and JSON (default
benchmarks/results/upstream_distributed.json for an unfiltered run with the defaults,
benchmarks/results/upstream_distributed.partial.json otherwise; ``--json`` to choose).
"""
from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")
# ("highest" as the CPU's float32 GEMM, not the chip's six passes: PyTorch's tests, whose float32
# tolerances assume IEEE float32 GEMMs)
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))
_RESULTS = os.path.join(_REPO, "benchmarks", "results")
_UPSTREAM_BACKENDS = {"gloo", "nccl", "ucc", "mpi", "xccl"}
# Features of DistTestCases.backend_feature granted to a plugin backend (see the docstring).
_FEATURES = ("plugin", "ddp", "subgroup", "gpu")


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-k", dest="patterns", action="append", default=[],
                   help="run only tests whose name matches this regular expression "
                        "(repeatable: any of them)")
    p.add_argument("--exclude", action="append", default=[],
                   help="skip tests whose name matches this regular expression (repeatable)")
    p.add_argument("--world-size", type=int, default=2, help="ranks (processes) per test")
    p.add_argument("--timeout", type=int, default=180,
                   help="seconds a test may take before its processes are killed (upstream's "
                        "longer ones for its two slowest tests are kept)")
    p.add_argument("--backend", default="tpu_dist",
                   help="c10d backend (tpu_dist; gloo for a reference run)")
    p.add_argument("--device", choices=("tpu", "cpu"), default=None,
                   help="device of the tensors the tests create without naming one "
                        "(default: tpu for tpu_dist, cpu otherwise)")
    p.add_argument("--lift-name-gates", default="", metavar="BACKENDS",
                   help="comma-separated backends (gloo, mpi): also run the tests whose every "
                        "decorator skip is a gate on the backend's name that these backends "
                        "pass (e.g. BACKEND != 'gloo'); reported as lifted, off by default")
    p.add_argument("--no-features", action="store_true",
                   help="do not add the backend to DistTestCases.backend_feature")
    p.add_argument("--json", default=None, help="where to write the results")
    p.add_argument("--list", action="store_true",
                   help="list the selected tests and their static skips, run nothing")
    p.add_argument("--rerun-failures", metavar="RESULTS_JSON",
                   help="run again the failures and errors of an earlier run (its JSON; other "
                        "options must match it) and merge them into it, marked as re-run "
                        "(written to that file unless --json)")
    p.add_argument("--keep-logs", action="store_true",
                   help="keep the rank processes' output (printed at the end where it is)")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-test lines")
    args = p.parse_args(argv)
    if args.device is None:
        args.device = "tpu" if args.backend == "tpu_dist" else "cpu"
    if args.device == "tpu" and args.backend in _UPSTREAM_BACKENDS:
        p.error(f"--device tpu needs a backend that takes tpu tensors, not {args.backend}")
    if args.world_size < 2:
        p.error("--world-size must be at least 2")
    return args


# ---------------------------------------------------------------------------------------------
# Environment: set by the parent before the suite is imported (it reads BACKEND and WORLD_SIZE
# at import time, in its decorators); the spawned rank processes inherit it and re-import this
# file as __mp_main__, building the same class.
if __name__ == "__main__":
    ARGS = _parse(sys.argv[1:])
    _tmp = tempfile.mkdtemp(prefix="tpu_dist_suite_")
    for _d in ("barrier", "test_dir", "notes"):
        os.mkdir(os.path.join(_tmp, _d))
    os.environ.update({
        "BACKEND": ARGS.backend,
        "WORLD_SIZE": str(ARGS.world_size),
        # TestDistBackend.setUp replaces TEMP_DIR / INIT_METHOD with a fresh directory per
        # test (initialize_temp_directories); this one serves the import and the notes.
        "TEMP_DIR": _tmp,
        "INIT_METHOD": os.environ.get("INIT_METHOD", "env://"),
        "DISTRIBUTED_TESTS_DEFAULT_TIMEOUT": str(ARGS.timeout),
        "TORCHTPU_SUITE_DEVICE": ARGS.device,
        "TORCHTPU_SUITE_NOTES": os.path.join(_tmp, "notes"),
        "TORCHTPU_SUITE_FEATURES": "" if ARGS.no_features else ",".join(_FEATURES),
        "TORCHTPU_SUITE_LIFT": ARGS.lift_name_gates,
    })

BACKEND = os.environ.get("BACKEND", "tpu_dist")
DEVICE = os.environ.get("TORCHTPU_SUITE_DEVICE", "tpu")
NOTES = os.environ.get("TORCHTPU_SUITE_NOTES")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import torchtpu  # noqa: E402,F401  (registers "tpu_dist")
from torch.testing._internal import common_distributed  # noqa: E402

if BACKEND not in _UPSTREAM_BACKENDS:
    for _f in filter(None, os.environ.get("TORCHTPU_SUITE_FEATURES", "").split(",")):
        common_distributed.DistTestCases.backend_feature[_f].add(BACKEND)

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


def _note(test_name: str, rank: int, text: str) -> None:
    """What a rank process tells the parent besides its exit code (a skip's real reason)."""
    if NOTES:
        with open(os.path.join(NOTES, f"{test_name}.{rank}"), "w") as f:
            f.write(text)


# Devices of the tensors tpu_dist's collectives receive in a rank process ("tpu" / "cpu"):
# counted around torchtpu.distributed._view, which every collective's tensors pass through on
# their way to Gloo (it returns what it returned before).
_SEEN: dict = {}


def _count_backend_tensors() -> None:
    import torchtpu.distributed as tpu_dist

    view = getattr(tpu_dist, "_view", None)
    if view is None:  # (the backend changed: nothing to count, nothing else changes)
        _SEEN["uncounted"] = 1
        return

    @functools.wraps(view)
    def counting_view(t):
        _SEEN[t.device.type] = _SEEN.get(t.device.type, 0) + 1
        return view(t)

    tpu_dist._view = counting_view


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    """Upstream's TestDistBackendWithSpawn (test_distributed_spawn.py), plus one chip per rank
    and, with --device tpu, that chip as the default device of the test body."""

    def setUp(self):
        super().setUp()
        self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

    @classmethod
    def _run(cls, rank, test_name, file_name, pipe, **kwargs):
        if NOTES:
            # The rank's output goes to a log of its own (its exception reaches the parent
            # through the pipe, as upstream's does).
            log = open(os.path.join(NOTES, f"{test_name}.{rank}.log"), "w")
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        if BACKEND == "tpu_dist" or DEVICE == "tpu":
            # One simulated chip per rank, as under torchrun (docs/distributed.md).
            torch.tpu.set_device(rank % torch.tpu.device_count())
        if BACKEND == "tpu_dist":
            _count_backend_tensors()
        super()._run(rank, test_name, file_name, pipe, **kwargs)

    def run_test(self, test_name, parent_pipe):
        # (Called in the rank process after init_process_group and the first barrier.)
        if DEVICE == "tpu":
            torch.set_default_device(torch.device("tpu", torch.tpu.current_device()))
        fn = getattr(self, test_name)

        @functools.wraps(fn)
        def noting_skips():
            try:
                return fn()
            except unittest.SkipTest as e:
                _note(test_name, self.rank, str(e))
                raise
            finally:
                _note(test_name + ".devices", self.rank, json.dumps(_SEEN))

        setattr(self, test_name, noting_skips)
        super().run_test(test_name, parent_pipe)


TestDistBackendWithSpawn.__name__ = TestDistBackendWithSpawn.__qualname__ = (
    "TestDistBackendWithSpawn")


def _name_gated(lift_as) -> dict:
    """{test: (backend, reason)}: the tests a decorator skips only because of the backend's
    name. Each decorator of each test of _DistTestBase is evaluated again, in the suite's
    module with its BACKEND set to each of `lift_as` in turn; a test qualifies for backend X
    when every decorator that skips it now lets it run under X (decorators that do not skip it
    now stay as they are; the test still runs against BACKEND)."""
    import ast
    import inspect

    from torch.testing._internal.distributed import distributed_test as suite

    tree = ast.parse(inspect.getsource(suite))
    base = next(n for n in ast.walk(tree)
                if isinstance(n, ast.ClassDef) and n.name == "_DistTestBase")

    def skips(expr, backend) -> bool:
        saved = suite.BACKEND
        suite.BACKEND = backend
        try:
            deco = eval(compile(ast.Expression(expr), "<decorator>", "eval"), vars(suite))

            def probe():
                pass

            return bool(getattr(deco(probe), "__unittest_skip__", False))
        finally:
            suite.BACKEND = saved

    out = {}
    for fn in base.body:
        if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test_"):
            continue
        now = [e for e in fn.decorator_list if skips(e, suite.BACKEND)]
        for b in lift_as if now else ():
            if not any(skips(e, b) for e in now):
                why = getattr(getattr(DistributedTest._DistTestBase, fn.name),
                              "__unittest_skip_why__", "")
                out[fn.name] = (b, why)
                break
    return out


def _lift(name: str) -> None:
    original = getattr(DistributedTest._DistTestBase, name)

    def lifted(self):  # (no functools.wraps: it would copy the skip marks)
        return original(self)

    lifted.__name__ = lifted.__qualname__ = name
    lifted.__doc__ = original.__doc__
    setattr(TestDistBackendWithSpawn, name, lifted)


LIFTED = _name_gated([b for b in os.environ.get("TORCHTPU_SUITE_LIFT", "").split(",") if b])
for _name in LIFTED:
    _lift(_name)

# The longer timeouts upstream gives its slowest tests stay, unless --timeout is longer.
if __name__ == "__main__":
    for _k, _v in list(common_distributed.TIMEOUT_OVERRIDE.items()):
        common_distributed.TIMEOUT_OVERRIDE[_k] = max(_v, ARGS.timeout)


# ---------------------------------------------------------------------------------------------
# Running and reporting (parent process only).

_CHILD_BLOCK = re.compile(r"Process (\d+) exited with error code \d+ and exception:\n")


def _exception_of(traceback_text: str) -> str:
    """The exception a formatted traceback ends with (type: message, possibly several lines)."""
    lines = traceback_text.rstrip().splitlines()
    last_file = max((i for i, l in enumerate(lines) if l.startswith("  File ")), default=-1)
    i = last_file + 1
    while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
        i += 1
    return "\n".join(lines[i:]).strip() or traceback_text.strip()[-2000:]


def _headline(exc: str) -> str:
    """First line of an exception, without C++ frames, addresses and numbers that vary."""
    first = exc.strip().splitlines()[0] if exc.strip() else ""
    first = re.sub(r"0x[0-9a-f]+", "0x…", first)
    return first[:300]


def _classify_error(err_text: str):
    """(outcome, kind, summary, per-rank exceptions) of a test that raised in the parent."""
    blocks = _CHILD_BLOCK.split(err_text)
    if len(blocks) > 1:
        per_rank = {}
        for j in range(1, len(blocks), 2):
            per_rank[int(blocks[j])] = _exception_of(blocks[j + 1])
        first = per_rank[min(per_rank)]
        outcome = "failed" if first.startswith("AssertionError") else "error"
        return outcome, "exception", _headline(first), per_rank
    exc = _exception_of(err_text)
    if "terminated or timed out" in exc:
        return "error", "timeout", _headline(exc), {}
    if exc.startswith("AssertionError"):
        # The parent's own check of the exit codes (a rank that crashed or exited oddly).
        return "failed", "exit_code", _headline(exc), {}
    return "error", "parent", _headline(exc), {}


class _Result(unittest.TestResult):
    def __init__(self, total: int, quiet: bool):
        super().__init__()
        self.total, self.quiet, self.index = total, quiet, 0
        self.records: list[dict] = []
        self._t0 = 0.0

    def startTest(self, test):
        super().startTest(test)
        self.index += 1
        self._t0 = time.time()

    def _record(self, test, outcome, **extra):
        name = test.id().split(".")[-1]
        rec = {"name": name, "outcome": outcome, "duration_s": round(time.time() - self._t0, 2)}
        rec.update(extra)
        if name in LIFTED:
            rec["lifted"] = {"as": LIFTED[name][0], "skip_reason": LIFTED[name][1]}
        if outcome != "skipped" or extra.get("where") == "rank process":
            rec["backend_tensors"] = _backend_tensors(name)
        if outcome in ("failed", "error"):
            rec["rank_logs_tail"] = _log_tails(name)
        self.records.append(rec)
        if not self.quiet:
            tail = extra.get("reason") or extra.get("summary") or ""
            print(f"[{self.index:3d}/{self.total}] {name} ... {outcome.upper()} "
                  f"({rec['duration_s']:.1f}s){'  ' + tail[:160] if tail else ''}", flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        name = test.id().split(".")[-1]
        where = "decorator" if _static_skip(name) else "rank process"
        noted = _read_notes(name)
        if noted:
            reason = noted
        self._record(test, "skipped", reason=reason, where=where)

    def _add_problem(self, test, err):
        text = self._exc_info_to_string(err, test)
        outcome, kind, summary, per_rank = _classify_error(text)
        self._record(test, outcome, kind=kind, summary=summary,
                     ranks={str(r): e[:4000] for r, e in per_rank.items()},
                     parent_error=None if per_rank else _exception_of(text)[:4000])

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._add_problem(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._add_problem(test, err)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed", note="expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", kind="unexpected_success", summary="unexpected success")


def _rank_files(name: str, suffix: str = "") -> dict:
    """{rank: text} of what the rank processes of test `name` left in the notes directory."""
    out = {}
    for rank in range(int(os.environ.get("WORLD_SIZE", "2"))):
        path = os.path.join(NOTES or "", f"{name}.{rank}{suffix}")
        if NOTES and os.path.exists(path):
            with open(path, errors="replace") as f:
                out[rank] = f.read()
    return out


def _read_notes(name: str):
    texts = _rank_files(name)
    return texts[min(texts)] if texts else None


def _backend_tensors(name: str) -> dict:
    total: dict = {}
    for text in _rank_files(name + ".devices").values():
        for dev, n in json.loads(text).items():
            total[dev] = total.get(dev, 0) + n
    return total


def _log_tails(name: str, lines: int = 25) -> dict:
    tails = {}
    for rank, text in _rank_files(name, ".log").items():
        kept = [l for l in text.splitlines() if l.strip() and not l.startswith("USDT:")]
        tails[str(rank)] = "\n".join(kept[-lines:])[-3000:]
    return tails


def _selected(args):
    names = sorted(n for n in dir(TestDistBackendWithSpawn) if n.startswith("test_"))
    if args.patterns:
        names = [n for n in names if any(re.search(p, n) for p in args.patterns)]
    if args.exclude:
        names = [n for n in names if not any(re.search(p, n) for p in args.exclude)]
    return names


def _static_skip(name):
    fn = getattr(TestDistBackendWithSpawn, name)
    return getattr(fn, "__unittest_skip_why__", None) if getattr(fn, "__unittest_skip__",
                                                                  False) else None


def _tree_state() -> dict:
    """The commit of the torchtpu checkout under test, and its uncommitted files (the backend
    is Python: an edit during a run changes what later tests run against)."""
    import hashlib
    import subprocess

    def git(*a):
        try:
            return subprocess.run(["git", *a], cwd=_REPO, capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    def sha1(path):
        with open(path, "rb") as f:
            return hashlib.sha1(f.read()).hexdigest()

    here = os.path.dirname(torchtpu.__file__)
    ext = os.path.realpath(torchtpu._C.__file__)
    return {"commit": git("rev-parse", "HEAD"),
            "modified": (git("status", "--short", "--untracked-files=no") or "").splitlines(),
            "distributed_py_sha1": sha1(os.path.join(here, "distributed.py")),
            "extension_sha1": sha1(ext)}


def _summarize(recs) -> dict:
    counts = collections.Counter(r["outcome"] for r in recs)
    problems = collections.defaultdict(list)
    for r in recs:
        if r["outcome"] in ("failed", "error"):
            problems[r["summary"]].append(r["name"])
    ran = [r for r in recs if r["outcome"] != "skipped" and "backend_tensors" in r]

    def by_devices(rs):
        return dict(collections.Counter(
            "+".join(sorted(r["backend_tensors"])) or "none" for r in rs).most_common())

    return {
        "counts": {
            "total": len(recs),
            "passed": counts.get("passed", 0),
            "failed": counts.get("failed", 0),
            "errors": counts.get("error", 0),
            "skipped": counts.get("skipped", 0),
            "timeouts": sum(1 for r in recs if r.get("kind") == "timeout"),
        },
        "skip_reasons": dict(collections.Counter(
            r["reason"] for r in recs if r["outcome"] == "skipped").most_common()),
        # Tests that ran, by the devices of the tensors the backend's collectives received
        # (counted in the rank processes of tpu_dist; "none": no collective through it).
        "backend_tensor_devices": {
            "all_ran": by_devices(ran),
            "passed": by_devices(r for r in ran if r["outcome"] == "passed")},
        "problems": {k: sorted(v) for k, v in sorted(problems.items(),
                                                      key=lambda kv: -len(kv[1]))},
    }


def _print_summary(report, backend) -> None:
    c = report["counts"]
    print("\n=== summary ===")
    print(f"{c['total']} tests: {c['passed']} passed, {c['failed']} failed, {c['errors']} "
          f"errors ({c['timeouts']} timeouts), {c['skipped']} skipped")
    if backend == "tpu_dist":
        dev = report["backend_tensor_devices"]
        print("tests that ran, by the devices of the tensors tpu_dist received: "
              + ", ".join(f"{k} {v}" for k, v in dev["all_ran"].items())
              + " (passed: " + ", ".join(f"{k} {v}" for k, v in dev["passed"].items()) + ")")
    print("skips:")
    for reason, n in report["skip_reasons"].items():
        print(f"  {n:4d}  {reason[:150]}")
    if report["problems"]:
        print("failures and errors:")
        for head, tests in report["problems"].items():
            print(f"  {len(tests):4d}  {head[:150]}")
            print(f"        {', '.join(tests[:6])}{' ...' if len(tests) > 6 else ''}")


def _list(names) -> int:
    for n in names:
        why = _static_skip(n)
        lifted = (f" (lifted: skipped for {LIFTED[n][1]!r}, runs as {LIFTED[n][0]} "
                  f"would)" if n in LIFTED else "")
        print(f"{n}: {'skip: ' + why if why else 'runs'}{lifted}")
    print(f"{len(names)} tests, {sum(1 for n in names if not _static_skip(n))} not "
          f"skipped by a decorator")
    return 0


def _results_path(args) -> str:
    unfiltered = not args.patterns and not args.exclude
    default_run = (unfiltered and args.world_size == 2 and args.backend == "tpu_dist"
                   and args.device == "tpu" and not args.no_features
                   and not args.lift_name_gates)
    return args.json or args.rerun_failures or os.path.join(
        _RESULTS, "upstream_distributed.json" if default_run
        else "upstream_distributed.partial.json")


def _run_suite(names, args):
    """The selected tests of the suite: their records and the run's description."""
    common_distributed.logger.setLevel("WARNING")  # ("Started process ..." per rank)
    tree_before = _tree_state()
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    result = _Result(len(names), args.quiet)
    t0 = time.time()
    try:
        suite.run(result)
    except KeyboardInterrupt:
        print("interrupted: writing what ran", flush=True)
    elapsed = time.time() - t0
    tree_after = _tree_state()
    run = {
        "command": " ".join([os.path.relpath(sys.argv[0], _REPO)] + sys.argv[1:]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t0)),
        "duration_s": round(elapsed, 1),
        "torchtpu_tree": tree_before,
        # Someone editing the checkout during the run: later tests ran against other code.
        "torchtpu_tree_changed_during_run": tree_after != tree_before,
        "torchtpu_tree_after": tree_after if tree_after != tree_before else None,
    }
    return result.records, run


def _merged_report(previous: dict, records, run: dict) -> dict:
    """The previous run's records, those of the tests run again replaced (marked "rerun")."""
    fresh = {r["name"]: dict(r, rerun=True) for r in records}
    recs = [fresh.get(r["name"], r) for r in previous["tests"]]
    report = {k: v for k, v in previous.items() if k not in ("tests",)}
    report["reruns"] = previous.get("reruns", []) + [
        dict(run, tests=sorted(fresh), counts=_summarize(records)["counts"])]
    report.update(_summarize(recs))
    report["tests"] = recs
    return report


def _new_report(args, names, records, run: dict) -> dict:
    return {
        "suite": "torch/testing/_internal/distributed/distributed_test.py "
                 "(DistributedTest._DistTestBase, driven as test_distributed_spawn.py)",
        **run,
        "torch": torch.__version__,
        "backend": args.backend,
        "world_size": args.world_size,
        "device": args.device,
        "eager_mode": torchtpu.get_eager_mode(),
        "features_added": os.environ["TORCHTPU_SUITE_FEATURES"].split(",")
        if os.environ["TORCHTPU_SUITE_FEATURES"] else [],
        "per_test_timeout_s": args.timeout,
        "lifted_name_gates": {n: {"as": b, "skip_reason": w}
                              for n, (b, w) in LIFTED.items() if n in names},
        "env": {k: os.environ.get(k)
                for k in ("TORCHTPU_DIST_CHECK", "TORCHTPU_EAGER_MODE")},
        "filters": {"k": args.patterns, "exclude": args.exclude},
        **_summarize(records),
        "tests": records,
    }


def main(args) -> int:
    names = _selected(args)
    if args.list:
        return _list(names)
    previous = None
    if args.rerun_failures:
        with open(args.rerun_failures) as f:
            previous = json.load(f)
        again = {r["name"] for r in previous["tests"] if r["outcome"] in ("failed", "error")}
        names = [n for n in names if n in again]
    out_path = _results_path(args)

    print(f"torch {torch.__version__}, backend {args.backend}, world size {args.world_size}, "
          f"tensors the tests create without a device on: {args.device}, timeout "
          f"{args.timeout}s, eager mode {torchtpu.get_eager_mode()}, "
          f"features {os.environ['TORCHTPU_SUITE_FEATURES'] or 'none'}", flush=True)
    lifted = [n for n in names if n in LIFTED]
    print(f"{len(names)} tests selected"
          + (f" (the failures and errors of {args.rerun_failures})" if previous else "")
          + (f", {len(lifted)} of them with a skip on the backend's name lifted "
             f"(--lift-name-gates {args.lift_name_gates})" if lifted else ""), flush=True)

    records, run = _run_suite(names, args)
    if previous is not None:
        report = _merged_report(previous, records, run)
    else:
        report = _new_report(args, names, records, run)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1)

    _print_summary(report, args.backend)
    print(f"run time: {run['duration_s'] / 60:.1f} min"
          + (f" (re-ran {len(names)} tests; the counts above are the merged ones)"
             if previous else ""))
    if run["torchtpu_tree_changed_during_run"]:
        print("warning: the torchtpu checkout changed during the run (torchtpu_tree_after in "
              "the JSON): later tests ran against other code than earlier ones")
    print(f"results: {out_path}")
    if args.keep_logs:
        print(f"rank logs: {NOTES}")
    else:
        shutil.rmtree(os.path.dirname(NOTES), ignore_errors=True)
    c = report["counts"]
    return 0 if c["failed"] == c["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(ARGS))
