"""pytest plugin loaded (``-p upstream_plugin``) into every pytest process test/upstream/run.py
starts. It is the runner's hands inside the process; see run.py's docstring for the whole.

* Before any test module is imported: torchtpu is imported (so that PyTorch's device-type test
  framework sees the PrivateUse1 backend when common_device_type is first imported), and the
  compatibility shims of ``_install_compat`` fill in names the stored test files import from
  places the installed torch no longer has them.
* Collection: tests the runner excludes (its per-file filter, tests already recorded by an earlier
  attempt of the same run, tests listed as not applicable) are deselected or marked skipped with
  their reason.
* Every test's start and result go, one JSON object a line, to the file named by
  ``UPSTREAM_RESULTS`` (flushed at once), so that the runner can show progress, and so that a
  process that dies in a test (a crash, a hang killed by the runner's watchdog) loses nothing
  but that test.
"""
from __future__ import annotations

import json
import os
import re
import time

import pytest

_RESULTS = os.environ.get("UPSTREAM_RESULTS")
_CONTROL = os.environ.get("UPSTREAM_CONTROL")  # JSON written by run.py: filters, done ids, n/a
_out = None
_control: dict = {}


def _emit(obj: dict) -> None:
    global _out
    if not _RESULTS:
        return
    if _out is None:
        _out = open(_RESULTS, "a", buffering=1)
    _out.write(json.dumps(obj) + "\n")
    _out.flush()


def _install_compat() -> None:
    """Names the stored test files import that the installed torch 2.13 keeps elsewhere.

    test_ops.py imports ``skip``, ``xfail`` and ``skipOps`` from common_methods_invocations and
    calls ``skipOps(test_case_name, base_test_name, to_skip)``; the installed torch defines
    ``skip``/``xfail`` (the same SkipSpec tuples) and a one-argument ``skipOps(to_skip)`` (which
    reads the class and test names from the decorated function) in common_device_type. The
    three-argument form is mapped onto it; nothing else of the files is changed."""
    import torch.testing._internal.common_device_type as cdt
    import torch.testing._internal.common_methods_invocations as cmi

    if not hasattr(cmi, "skip") and hasattr(cdt, "skip"):
        cmi.skip = cdt.skip
    if not hasattr(cmi, "xfail") and hasattr(cdt, "xfail"):
        cmi.xfail = cdt.xfail
    if not hasattr(cmi, "skipOps") and hasattr(cdt, "skipOps"):
        def skipOps(*args):  # noqa: N802 (upstream's name)
            to_skip = args[-1]
            return cdt.skipOps(to_skip)
        cmi.skipOps = skipOps


def pytest_configure(config):
    global _control
    if _CONTROL and os.path.exists(_CONTROL):
        with open(_CONTROL) as f:
            _control = json.load(f)
    import torchtpu  # noqa: F401  (before common_device_type is imported by a test module)
    _install_compat()
    for path in _control.get("sys_path", []):
        import sys
        if path not in sys.path:
            sys.path.insert(0, path)


def _class_and_test(item) -> tuple[str, str]:
    cls = item.cls.__name__ if getattr(item, "cls", None) is not None else "<module>"
    return cls, item.name


def pytest_collection_modifyitems(session, config, items):
    done = set(_control.get("done", []))
    dtype_re = _control.get("name_filter")  # regex a test's name must match (file's filter)
    class_re = _control.get("class_filter")
    not_applicable = _control.get("not_applicable", {})  # regex on "file::Class::test" -> reason
    keep, drop = [], []
    for item in items:
        cls, name = _class_and_test(item)
        if item.nodeid in done:
            drop.append(item)
            continue
        if class_re and not re.search(class_re, cls):
            drop.append(item)
            continue
        if dtype_re and not re.search(dtype_re, name):
            drop.append(item)
            continue
        key = f"{os.path.basename(str(item.fspath))}::{cls}::{name}"
        for pattern, reason in not_applicable.items():
            if re.search(pattern, key):
                item.add_marker(pytest.mark.skip(reason=f"not applicable: {reason}"))
                item.user_properties.append(("not_applicable", reason))
                break
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
    _emit({"event": "collected", "count": len(keep), "time": time.time()})


def pytest_runtest_logstart(nodeid, location):
    _emit({"event": "start", "nodeid": nodeid, "time": time.time()})


def _first_line(report) -> str:
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # skip: (file, line, reason)
        return str(longrepr[2]).splitlines()[0] if longrepr[2] else ""
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message.strip().splitlines()[0][:400]
    text = str(longrepr).strip().splitlines()
    # The last "E   ..." line is the exception pytest shows.
    for line in reversed(text):
        if line.startswith("E "):
            return line[1:].strip()[:400]
    return (text[-1] if text else "")[:400]


def pytest_runtest_logreport(report):
    item_class = report.nodeid.split("::")[-2] if report.nodeid.count("::") >= 2 else "<module>"
    na = dict(report.user_properties).get("not_applicable")
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed") or \
            (report.when == "teardown" and report.outcome == "failed"):
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        if na is not None and report.skipped:
            outcome = "not_applicable"
        kind = outcome
        if report.when != "call" and report.outcome == "failed":
            kind = "error"  # setup/teardown failure: pytest counts it as an error
        _emit({
            "event": "result", "nodeid": report.nodeid, "class": item_class,
            "when": report.when, "outcome": kind, "duration": round(report.duration, 3),
            "message": na if na is not None else _first_line(report),
            "time": time.time(),
        })


def pytest_sessionfinish(session, exitstatus):
    _emit({"event": "finished", "exitstatus": int(exitstatus), "time": time.time()})
