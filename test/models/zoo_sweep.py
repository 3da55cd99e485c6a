"""The loop of a model-zoo sweep, shared by test/models/zoo.py and test/models/diffusers_zoo.py:
each item in a subprocess with a timeout, its records appended to a JSONL file, and an item that
timed out or died classified by whether its CPU reference had run (CPU_DONE)."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

# Printed by a sweep item's subprocess once its CPU reference is built and run: a timeout or a
# death after it is the "tpu" side's (run_sweep).
CPU_DONE = "# cpu reference done"


def run_sweep(items: list[tuple[str, list[str], dict]], args) -> None:
    """The items of this shard (args.shard "i/n"), each by its command (`--modes` added) in a
    subprocess with a timeout; one JSON record per mode appended to args.out and one progress
    line per item ("[k/N] name: mode status, ..." as tools/sweep_progress.py reads it). Also the
    diffusers zoo's loop. The subprocess prints each mode's record when that mode ends; a mode
    without a record is classified by item_outcome."""
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    index, count = (int(x) for x in args.shard.split("/"))
    items = items[index::count]
    modes = args.modes.split(",")
    counts: dict[str, int] = {}
    for i, (name, cmd, extra) in enumerate(items):
        start = time.time()

        try:
            proc = subprocess.run(cmd + ["--modes", args.modes], capture_output=True, text=True,
                                  timeout=args.timeout)
            rows = item_outcome(name, extra, modes, proc.stdout, proc.stderr, proc.returncode, None)
        except subprocess.TimeoutExpired as e:
            rows = item_outcome(name, extra, modes, e.stdout, e.stderr, None, args.timeout)
        for row in rows:
            row["seconds"] = round(time.time() - start, 1)
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        with out.open("a") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
        summary = ", ".join(f"{r['mode']} {r['status']}" for r in rows)
        print(f"[{i + 1}/{len(items)}] {name}: {summary} {rows[-1].get('reason', '')[:100]}", flush=True)
    print(counts)


def item_outcome(name: str, extra: dict, modes: list[str], stdout, stderr, returncode,
                 timeout: int | None) -> list[dict]:
    """The records of one sweep item from its subprocess's output: those it printed, and one for
    every mode it did not finish. Before CPU_DONE, the CPU side was still building or running the
    model: a timeout or the memory guard (an input recipe that explodes) is a harness limit, any
    other death a backend bug (torchtpu is imported). After it, every mode left without a record
    failed on "tpu": a timeout there is a backend bug like any other failure."""
    def text(x):
        return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")

    stdout, stderr = text(stdout), text(stderr)
    rows = [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]
    cpu_done = CPU_DONE in stdout.splitlines()
    missing = [m for m in modes if m not in {r.get("mode") for r in rows}]
    if not missing:
        return rows
    guard = next((l[l.index("memory guard:"):] for l in stderr.splitlines() if "memory guard:" in l), None)
    if timeout is not None:
        why = f"timeout after {timeout} s"
    elif guard:
        why = guard
    else:
        why = f"subprocess died ({returncode}): {stderr[-300:]}"
    if not cpu_done and (timeout is not None or guard):
        status, reason = "harness", f"{why} (CPU side)" if timeout is not None else f"{why} (input recipe)"
    elif not cpu_done:
        status, reason = "backend bug", why
    else:
        status, reason = "backend bug", f"{why} on tpu, in mode {missing[0]}"
        if timeout is not None:
            reason += f" (the CPU reference took {rows[0]['cpu_seconds']} s)" if rows and "cpu_seconds" in rows[0] else ""
    return rows + [{"model_type": name, **extra, "mode": m, "status": status, "reason": reason,
                    **({"stage": "timeout"} if timeout is not None and cpu_done else {})} for m in missing]

