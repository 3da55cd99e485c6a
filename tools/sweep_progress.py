"""Progress of a sharded sweep on the terminal: watches the shards' logs, where each finished
item prints a line starting "[k/N]", until the shards' processes have exited; every --every
seconds prints items done of all shards, the rate, the ETA and the statuses seen so far, then a
final summary. Used by scripts/zoo_sweep.sh.

    python tools/sweep_progress.py --pids 123,124 --every 30 build/zoo_shard0.log build/zoo_shard1.log
"""
from __future__ import annotations

import argparse
import os
import re
import time

ITEM = re.compile(r"^\[(\d+)/(\d+)\] (\S+): (.*)$")
# An item's line: "<mode> <status>" pairs separated by commas, then the reason of the last one
# (which may hold commas itself: only pairs with a status word count).
STATUS = re.compile(r"^\s*(\S+) (pass|harness|backend bug)\b")


def alive(pid: int) -> bool:
    """The process runs (an exited one its parent has not reaped yet, a zombie, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def progress(logs: list[str]) -> tuple[int, int, dict[str, int]]:
    """Items done and in all (over every shard that has started), and the statuses seen."""
    done = total = 0
    statuses: dict[str, int] = {}
    for path in logs:
        last = None
        try:
            with open(path, errors="replace") as f:
                for line in f:
                    m = ITEM.match(line)
                    if m:
                        last = m
                        for part in m.group(4).split(","):
                            pair = STATUS.match(part)
                            if pair:
                                key = f"{pair.group(1)} {pair.group(2)}"
                                statuses[key] = statuses.get(key, 0) + 1
        except FileNotFoundError:
            continue
        if last:
            done += int(last.group(1))
            total += int(last.group(2))
    return done, total, statuses


def fmt(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pids", required=True, help="comma-separated shard process ids")
    p.add_argument("--every", type=float, default=30.0, help="seconds between progress lines")
    p.add_argument("--label", default="sweep")
    p.add_argument("logs", nargs="+")
    args = p.parse_args()
    pids = [int(x) for x in args.pids.split(",") if x]
    start = time.time()
    last_print = 0.0
    while any(alive(pid) for pid in pids):
        time.sleep(1.0)
        now = time.time()
        if now - last_print < args.every:
            continue
        last_print = now
        done, total, _ = progress(args.logs)
        elapsed = now - start
        if done:
            eta = elapsed / done * (total - done)
            print(f"[{time.strftime('%H:%M:%S')}] {args.label}: {done}/{total} done "
                  f"({done / total:.0%}), {elapsed / done:.1f} s each, elapsed {fmt(elapsed)}, "
                  f"ETA {fmt(eta)}", flush=True)
        else:
            print(f"[{time.strftime('%H:%M:%S')}] {args.label}: starting "
                  f"(elapsed {fmt(elapsed)})", flush=True)
    done, total, statuses = progress(args.logs)
    seen = ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))
    print(f"== {args.label} finished: {done}/{total} in {fmt(time.time() - start)}; {seen}",
          flush=True)


if __name__ == "__main__":
    main()
