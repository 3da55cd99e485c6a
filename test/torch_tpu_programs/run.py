"""Runs Google TorchTPU's own tutorials, notebooks and examples, unmodified, on torchtpu, and
prints a table (docs/coming-from-torchtpu.md, "TorchTPU's own programs").

    python test/torch_tpu_programs/run.py                  # every program, strict and fused eager
    python test/torch_tpu_programs/run.py --only eager_mode,dlrm --modes fused
    python test/torch_tpu_programs/run.py --tier ci        # the ones test/python/test_torch_tpu_programs.py runs
    python test/torch_tpu_programs/run.py --list           # the programs and how each is run

The programs are vendored byte for byte in third_party/torch_tpu_programs/ (SOURCES.md there);
which ones run, with what argv, environment and stand-ins, is test/torch_tpu_programs/programs.py.
Each runs in a fresh subprocess per eager mode:

- strict: ``TORCHTPU_EAGER_MODE=strict``, ``TPU_DEFER_AND_FUSE`` unset;
- fused: ``TPU_DEFER_AND_FUSE=1`` (TorchTPU's variable), ``TORCHTPU_EAGER_MODE`` unset.

How a program is run depends on its kind: a marimo notebook as marimo runs an app as a script
(``python notebook.py``: every notebook has the ``if __name__ == "__main__": app.run()`` guard);
a Jupyter notebook through test/torch_tpu_programs/ipynb_exec.py (code cells in order in one
namespace, in the notebook's folder); a Python program as ``python program.py ARGV`` (absl apps
and absltest files alike); a shell launcher with bash in its folder; a distributed worker under
``torch.distributed.run``. ``PYTHONPATH`` starts with the vendored examples (the programs import
``examples.*`` as TorchTPU's Bazel workspace provides it: a folder with a link to the vendored
``examples``, see import_root), then the program's stand-ins.

A program passes when it exits with 0 and prints what programs.py expects of it (each
program's own checks, which raise, are the main test); it is skipped, without being run, when
programs.py says why it cannot run on a simulator or a CPU. The table has the program, the
mode, passed/failed/skipped with the reason, the seconds, and the first error line (the
exception that ended the program, or the timeout). JSON goes to
benchmarks/results/torch_tpu_programs.json (``--json`` elsewhere; ``--no-json`` for none).
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import programs as programs_mod  # noqa: E402  (test/torch_tpu_programs/programs.py)

VENDORED = os.path.join(REPO, "third_party", "torch_tpu_programs")
STANDINS = os.path.join(HERE, "standins")
CACHE = os.path.join(REPO, "build", "torch_tpu_programs")  # stand-in weights (not committed)
WEIGHTS_MOUNT = "/data/weights/huggingface"  # TorchTPU's examples/paths.py: XM_HOME + weights/huggingface
DEFAULT_JSON = os.path.join(REPO, "benchmarks", "results", "torch_tpu_programs.json")
MODES = ("strict", "fused")
# The line of a traceback that names the exception ("ValueError: ...", "torch.AcceleratorError:
# ...", "absl.flags._exceptions.UnrecognizedFlagError: ...").
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failure)|AssertionError"
                       r"|KeyboardInterrupt)\b.*")
# torchrun prefixes each line a rank writes with "[rank0]:".
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s*")
_WRAPPER = re.compile(r"^(torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError"
                      r"|subprocess\.CalledProcessError|SystemExit)\b")


# Folders TorchTPU's notebooks name outright (nb/quant, nb/quantized_sum: XLA_FLAGS's
# --xla_dump_to) and read back, printing every file in them as text. jax's CPU backend, the one
# this host has, dumps object files there too (a TPU VM's TPU backend does not), which the next
# program's listing cannot decode: each program starts without them, as on a fresh VM.
FRESH_FOLDERS = ("/tmp/xla_dump", "/tmp/llo_dump")


def import_root() -> str:
    """A folder that holds only a link to the vendored ``examples``: the programs import
    ``examples.*`` from their Bazel workspace's root. The vendored root itself cannot go on
    ``sys.path``: its ``torch_tpu/docs`` folder would make ``import torch_tpu`` a namespace
    package ahead of the twin (torchtpu/_torch_tpu_finder.py is asked last)."""
    root = os.path.join(CACHE, "import_root")
    link = os.path.join(root, "examples")
    target = os.path.join(VENDORED, "examples")
    if not (os.path.islink(link) and os.readlink(link) == target):  # (also a checkout moved)
        os.makedirs(root, exist_ok=True)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(target, link)
    return root


def mode_env(mode: str) -> dict:
    env = dict(os.environ)
    # (and TorchTPU's default matmul precision and the chip's "highest": the test harnesses'
    # "highest" as the CPU's float32 GEMM is not theirs)
    for var in ("TPU_DEFER_AND_FUSE", "TORCH_TPU_DEFER_AND_FUSE", "TORCHTPU_EAGER_MODE",
                "TPU_LAUNCH_BLOCKING", "TORCHTPU_MATMUL_PRECISION", "TORCHTPU_HIGHEST_ALGORITHM"):
        env.pop(var, None)
    if mode == "strict":
        env["TORCHTPU_EAGER_MODE"] = "strict"
    elif mode == "fused":
        env["TPU_DEFER_AND_FUSE"] = "1"
    else:
        raise ValueError(f"unknown mode {mode!r}")
    return env


def _hf_commit() -> str:
    """The snapshot name hf_hub.py writes the stand-ins under (read without importing it)."""
    with open(os.path.join(STANDINS, "hf_hub.py")) as f:
        return re.search(r'^COMMIT = "([0-9a-f]{40})"', f.read(), re.M).group(1)


def build_hf_standin(repo_id: str) -> str:
    """Builds a Hub stand-in once (build/torch_tpu_programs/hf_home), in a process of its own:
    building one seeds and uses torch, which the caller's process (pytest's) should not see."""
    hf_home = os.path.join(CACHE, "hf_home")
    subprocess.run([sys.executable, os.path.join(STANDINS, "hf_hub.py"), hf_home, repo_id],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return hf_home


def prepare_standins(program) -> dict:
    """Builds the program's stand-ins (once, under build/torch_tpu_programs/) and returns the
    environment they need."""
    env = {}
    paths = []
    for name in program.standins:
        if name == "mnist":
            paths.append(os.path.join(STANDINS, "mnist"))
        elif name.startswith("hf:"):
            hf_home = build_hf_standin(name[3:])
            env.update(HF_HOME=hf_home, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        elif name.startswith("data:"):
            # Weights a program reads from TorchTPU's weights mount (examples/paths.py: XM_HOME
            # "/data/", then weights/huggingface/ORG/NAME): a link there to the Hub stand-in,
            # made only where nothing is (a real checkpoint there is used as it is).
            hf_home = build_hf_standin(name[5:])
            target = os.path.join(WEIGHTS_MOUNT, name[5:])
            if not os.path.lexists(target):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.symlink(os.path.join(hf_home, "hub", "models--" + name[5:].replace("/", "--"),
                                        "snapshots", _hf_commit()), target)
        else:
            raise ValueError(f"{program.name}: unknown stand-in {name!r}")
    env["_standin_paths"] = paths
    return env


def command(program, path: str) -> tuple[list[str], str | None]:
    """The command line and working directory (None: a fresh temporary one)."""
    py = sys.executable
    if program.kind == "marimo":
        return [py, path, *program.argv], None
    if program.kind == "script":
        return [py, path, *program.argv], None
    if program.kind == "ipynb":
        return [py, os.path.join(HERE, "ipynb_exec.py"), path], os.path.dirname(path)
    if program.kind == "shell":  # in its folder, or the repository's root where it says so
        return ["bash", path, *program.argv], (
            VENDORED if program.cwd == "root" else os.path.dirname(path))
    if program.kind == "torchrun":
        return [py, "-m", "torch.distributed.run", "--standalone",
                f"--nproc-per-node={program.nproc}", path, *program.argv], None
    raise ValueError(f"{program.name}: unknown kind {program.kind!r}")


def first_error_line(stdout: str, stderr: str) -> str:
    """The line naming the exception that ended the program: the last exception line of stderr,
    then of stdout, passing over the wrappers that only say a child failed (torchrun's
    ChildFailedError, subprocess' CalledProcessError) when the child's own exception is there;
    else absl's flag error, else the last line of stderr."""
    for text in (stderr, stdout):
        lines = [_RANK_PREFIX.sub("", ln.strip()) for ln in text.splitlines()]
        found = [ln for ln in lines if _EXC_LINE.match(ln)]
        own = [ln for ln in found if not _WRAPPER.match(ln)]
        if own or found:
            return (own or found)[-1][:300]
    for line in stderr.splitlines():
        if line.startswith("FATAL Flags parsing error"):
            return line.strip()[:300]
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def run_one(program, mode: str, timeout: float | None = None, keep_output: bool = False) -> dict:
    """Runs one program in one eager mode and returns its row (with ``stdout``/``stderr`` when
    keep_output)."""
    row = {"program": program.name, "path": program.path, "mode": mode}
    if program.skip:
        row.update(status="skipped", reason=program.skip, seconds=0.0, error="")
        return row
    absent = [m for m in program.requires if importlib.util.find_spec(m) is None]
    if absent:
        row.update(status="skipped", seconds=0.0, error="",
                   reason=f"imports {absent[0]}, not installed here (pip install {absent[0]}: "
                          "the CPU build is enough)")
        return row
    path = os.path.join(VENDORED, program.path)
    env = mode_env(mode)
    extra = prepare_standins(program)
    standin_paths = extra.pop("_standin_paths")
    env.update(extra)
    env.update(program.env)
    env["PYTHONPATH"] = os.pathsep.join(
        [import_root(), *standin_paths] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    argv, cwd = command(program, path)
    for folder in FRESH_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)
    scratch = tempfile.mkdtemp(prefix="torch_tpu_program_")
    timeout = timeout or program.timeout
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd or scratch, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace",
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the program and anything it started
        stdout, stderr = proc.communicate()
        timed_out = True
    seconds = time.monotonic() - start
    shutil.rmtree(scratch, ignore_errors=True)
    row["seconds"] = round(seconds, 1)
    missing = [p for p in program.expect if not re.search(p, stdout + stderr, re.M)]
    if timed_out:
        row.update(status="failed", error=f"timeout after {timeout:.0f} s")
    elif proc.returncode != 0:
        error = first_error_line(stdout, stderr).replace(REPO + os.sep, "")  # (repo-relative)
        row.update(status="failed", error=error or f"exit code {proc.returncode}")
    elif missing:
        row.update(status="failed", error=f"output lacks {missing[0]!r}")
    else:
        row.update(status="passed", error="")
    row["returncode"] = proc.returncode
    if row["status"] == "failed" and program.why_fails:
        row["reason"] = program.why_fails
    if keep_output:
        row["stdout"], row["stderr"] = stdout, stderr
    return row


def format_table(rows: list[dict]) -> str:
    head = ("program", "mode", "result", "s", "first error line")
    body = []
    for r in rows:
        result = r["status"]
        if r["status"] == "skipped":
            result = f"skipped: {r['reason']}"
        body.append((r["program"], r["mode"], result, f"{r['seconds']:.1f}",
                     r.get("error", "")))
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    widths[2] = min(widths[2], 60)
    widths[4] = min(widths[4], 120)

    def line(cells):
        return "  ".join(str(c)[:w].ljust(w) for c, w in zip(cells, widths)).rstrip()

    out = [line(head), line(["-" * w for w in widths])]
    out += [line(b) for b in body]
    counts = {s: sum(r["status"] == s for r in rows) for s in ("passed", "failed", "skipped")}
    out.append(f"{counts['passed']} passed, {counts['failed']} failed, "
               f"{counts['skipped']} skipped")
    return "\n".join(out)


def markdown_table(rows: list[dict]) -> str:
    """The table of docs/coming-from-torchtpu.md: one line per program, its result in strict and
    in fused eager, and why not where it did not pass (the skip's reason, the missing API
    programs.py names, else the first error line), with programs.py's note."""
    by_name = {p.name: p for p in programs_mod.PROGRAMS}
    runs_of_path = collections.Counter(p.path for p in programs_mod.PROGRAMS)
    order, results = [], {}
    for r in rows:  # (one file run with different argv is one line per run)
        if r["program"] not in results:
            order.append(r["program"])
            results[r["program"]] = {}
        results[r["program"]][r["mode"]] = r
    out = ["| program | strict | fused | why not / note |", "|---|---|---|---|"]
    for name in order:
        modes = results[name]
        cells, why = [], []
        for mode in MODES:
            r = modes.get(mode)
            if r is None:
                cells.append("")
                continue
            cells.append({"passed": "passes", "failed": "fails", "skipped": "skipped"}[r["status"]])
            if r["status"] != "passed":
                program = by_name.get(name)
                if r["status"] == "failed" and program is not None and program.why_fails:
                    r = dict(r, reason=program.why_fails)  # (programs.py's current words)
                text = r.get("reason") or ""
                if r["status"] == "failed" and not text:  # the exception, without file paths
                    text = "`" + re.sub(r" \((/|\w:)[^)]*\)", "", r.get("error", ""))[:200] + "`"
                if text not in why:
                    why.append(text)
        program = by_name.get(name)
        if program is not None and program.note:
            why.append(program.note)
        label = next(iter(modes.values()))["path"]
        if program is not None and runs_of_path[label] > 1 and program.argv:
            label += " " + " ".join(program.argv)
        out.append(f"| `{label}` | {cells[0]} | {cells[1]} | {'; '.join(why)} |")
    return "\n".join(out)


def select(only: str | None, tier: str | None):
    chosen = programs_mod.PROGRAMS
    if tier == "ci":
        chosen = [p for p in chosen if p.ci]
    if only:
        names = [n.strip() for n in only.split(",") if n.strip()]
        chosen = [p for p in chosen if any(n == p.name or n in p.path for n in names)]
    return chosen


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated program names or path fragments")
    ap.add_argument("--modes", default=",".join(MODES), help="strict,fused (default both)")
    ap.add_argument("--tier", choices=["ci"], help="only the programs the pytest tier runs")
    ap.add_argument("--timeout", type=float, help="per-program timeout in s (default: each "
                    "program's own, programs.py)")
    ap.add_argument("--json", default=DEFAULT_JSON, help="where to write the results")
    ap.add_argument("--no-json", action="store_true")
    ap.add_argument("--update", action="store_true", help="replace only these programs' rows "
                    "in the JSON, keep the others' (rows of programs no longer listed dropped)")
    ap.add_argument("--list", action="store_true", help="list the programs and exit")
    ap.add_argument("--markdown", metavar="JSON", help="print the docs' table from a results "
                    "file and exit")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print each program's output tail")
    args = ap.parse_args(argv)
    if args.markdown:
        with open(args.markdown) as f:
            print(markdown_table(json.load(f)["results"]))
        return 0
    chosen = select(args.only, args.tier)
    if args.list:
        for p in chosen:
            how = f"skipped: {p.skip}" if p.skip else " ".join([p.kind, *p.argv])
            print(f"{p.name:45s} {p.path:70s} {how}")
        return 0
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    rows = []
    for program in chosen:
        for mode in modes:
            row = run_one(program, mode, timeout=args.timeout, keep_output=args.verbose)
            rows.append(row)
            print(f"[{len(rows)}/{len(chosen) * len(modes)}] {program.name} {mode}: "
                  f"{row['status']} ({row['seconds']:.1f} s) {row.get('error', '')}"[:250],
                  flush=True)
            if args.verbose and row["status"] != "skipped":
                tail = (row.pop("stdout")[-3000:], row.pop("stderr")[-3000:])
                print("  stdout tail:\n" + tail[0] + "\n  stderr tail:\n" + tail[1])
            row.pop("stdout", None), row.pop("stderr", None)
    print()
    print(format_table(rows))
    if not args.no_json:
        os.makedirs(os.path.dirname(args.json), exist_ok=True)
        doc = {"command": "python test/torch_tpu_programs/run.py " + " ".join(argv or sys.argv[1:]),
               "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "modes": modes, "results": rows}
        if args.update and os.path.exists(args.json):
            with open(args.json) as f:
                old = json.load(f)
            # (keyed by program name: one file may run as several programs, with other argv)
            fresh = {(r["program"], r["mode"]): r for r in rows}
            listed = [p.name for p in programs_mod.PROGRAMS]
            merged = {(r["program"], r["mode"]): r for r in old["results"]
                      if r["program"] in listed}
            merged.update(fresh)
            doc = dict(old, results=sorted(
                merged.values(),
                key=lambda r: (listed.index(r["program"]), MODES.index(r["mode"]))))
            doc["updated"] = {"command": "python test/torch_tpu_programs/run.py "
                              + " ".join(argv or sys.argv[1:]),
                              "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"results: {os.path.relpath(args.json, REPO)}")
    return 1 if any(r["status"] == "failed" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
