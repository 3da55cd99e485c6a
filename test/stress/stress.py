"""The stress suite: mixed threaded load on "tpu", every result compared with the CPU, each round
in a subprocess under a watchdog so that a hang fails the run instead of freezing it.

    python test/stress/stress.py --minutes 10            # 10 minutes per mode (the release tier)
    python test/stress/stress.py --seconds 20            # the short tier (scripts/test.sh)
    python test/stress/stress.py --mode fused --minutes 1

A round runs, for `--round` seconds, in one process: compute threads over every simulated device,
each on a stream of its own (in switching rounds, half of them switch the process's mode too), a producer and a
consumer on two streams ordered by events, a thread polling the memory statistics, in every other round a thread
switching the process's eager mode under the others, and a queue-bound loop under a small HBM (queued work holds
the memory; the allocator must wait for it, never fail). Every third round is interrupted with
SIGINT while its main thread waits for queued work: the process must be gone within a second. The
instant is drawn per run seed, mode and round (printed); a round whose worker had already ended
when the signal was due tests nothing: it is counted "not tested" and fired again (three times at
most; a mode without a tested interrupt fails). The run ends with a
summary per mode (rounds, iterations checked, wrong results, errors, hangs, interrupt latency)
and exits non-zero on any failure.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")
# ("highest" as the CPU's float32 GEMM, not the chip's six passes: threads and interrupts; results
# compared with the CPU's)
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")

MODES = ("strict", "debug", "fused")
LOOP_DONE = "main loop done"
HBM_BYTES = 96 << 20  # small: the queue-bound loop's queued results do not fit in it


class _Round:
    """What a round's threads share (in the subprocess): the stop flag, the counts, the MLP's
    inputs and the CPU's result for them."""

    def __init__(self, seed: int):
        import torch

        self.seed = seed
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.counts = {"iterations": 0, "wrong": 0, "errors": [], "wrong_in": {}}
        self.lock = threading.Lock()
        g = torch.Generator().manual_seed(seed)
        self.w1, self.b1 = torch.randn(64, 128, generator=g) * 0.1, torch.randn(128, generator=g)
        self.w2 = torch.randn(128, 32, generator=g) * 0.1
        self.x = torch.randn(48, 64, generator=g)
        self.mlp_expect = (torch.nn.functional.gelu(self.x @ self.w1 + self.b1)
                           @ self.w2).softmax(-1).sum(0)

    def note(self, wrong: bool = False, error: str | None = None, where: str = ""):
        with self.lock:
            self.counts["iterations"] += 1
            self.counts["wrong"] += int(wrong)
            if wrong:
                self.counts["wrong_in"][where] = self.counts["wrong_in"].get(where, 0) + 1
            if error:
                self.counts["errors"].append(error)


# The loads, each a thread of the round until `state.stop` is set.

def _compute(state: _Round, i: int, switching: bool):
    """The MLP on device i % count, on a stream of its own; in switching rounds every odd
    thread runs it in a mode of its own (an eager_mode context around each step)."""
    import torch
    import torchtpu

    device = torch.device("tpu", i % torch.tpu.device_count())
    mode = MODES[i % 3] if i % 2 and switching else None  # switches the mode too
    with torch.tpu.device(device):
        stream = torch.tpu.Stream()
        tensors = [t.to(device) for t in (state.w1, state.b1, state.w2, state.x)]
        while not state.stop.is_set():
            try:
                ctx = torchtpu.eager_mode(mode) if mode else _nothing()
                with ctx, torch.tpu.stream(stream):
                    a, b, c, d = tensors
                    out = (torch.nn.functional.gelu(d @ a + b) @ c).softmax(-1).sum(0)
                    got = out.cpu()
                state.note(wrong=not torch.allclose(got, state.mlp_expect, rtol=2e-3, atol=2e-3),
                           where=f"compute on {device} in {mode or 'the process mode'}")
            except Exception as e:  # noqa: BLE001
                state.note(error=f"compute {i}: {type(e).__name__}: {e}")
                return


def _producer_consumer(state: _Round):
    """A producer on one stream hands tensors and events to a consumer on another."""
    import torch

    a, b = torch.tpu.Stream(), torch.tpu.Stream()
    handoff: queue.Queue = queue.Queue(maxsize=4)

    def produce():
        k = 0
        while not state.stop.is_set():
            k += 1
            with torch.tpu.stream(a):
                buf = torch.empty(256, 256, device="tpu").fill_(float(k % 97))
                doubled = buf * 2
                event = torch.tpu.Event()
                event.record(a)
            try:
                handoff.put((k % 97, doubled, event), timeout=0.5)
            except queue.Full:
                pass
        handoff.put(None)

    def consume():
        while True:
            item = handoff.get()
            if item is None:
                return
            k, doubled, event = item
            try:
                with torch.tpu.stream(b):
                    b.wait_event(event)
                    total = doubled.sum().item()
                state.note(wrong=total != 2.0 * k * 256 * 256, where="stream consumer")
            except Exception as e:  # noqa: BLE001
                state.note(error=f"consumer: {type(e).__name__}: {e}")
                return

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _poll_statistics(state: _Round):
    import torch

    while not state.stop.is_set():
        try:
            torch.tpu.memory_allocated()
            torch.tpu.memory_stats()
            torch.tpu.mem_get_info()
            torch.tpu.max_memory_allocated()
        except Exception as e:  # noqa: BLE001
            state.note(error=f"statistics: {type(e).__name__}: {e}")
            return
        time.sleep(0.0005)


def _switch_modes(state: _Round):
    import torchtpu

    while not state.stop.is_set():
        torchtpu.set_eager_mode(state.rng.choice(MODES))
        time.sleep(state.rng.uniform(0.001, 0.02))


def _queue_bound(state: _Round):
    import torch

    big = torch.randn(1024, 1024, device="tpu")  # 4 MiB; HBM_BYTES holds 24 of them
    ref = None
    while not state.stop.is_set():
        try:
            for _ in range(40):
                y = big @ big  # nothing reads y: the queue runs ahead of the device
            value = y[0, :8].cpu()
            if ref is None:
                ref = (big.cpu() @ big.cpu())[0, :8]
            state.note(wrong=not torch.allclose(value, ref, rtol=1e-3, atol=1e-2),
                       where="queue-bound")
        except Exception as e:  # noqa: BLE001
            state.note(error=f"queue-bound: {type(e).__name__}: {e}")
            return


def _resize_storage(state: _Round):
    # FSDP2's pattern: a parameter's storage re-grown and filled, read by ops still
    # pending or queued, then freed with resize_(0) before they ran.
    import torch

    shard = torch.randn(64, 64, generator=torch.Generator().manual_seed(state.seed + 1))
    full = shard.to("tpu")
    nbytes = full.untyped_storage().nbytes()
    xs = state.x[:, :64].to("tpu")
    ref = torch.relu(state.x[:, :64] @ shard).sum(0)
    while not state.stop.is_set():
        try:
            full.untyped_storage().resize_(nbytes)
            full.copy_(shard.to("tpu"))
            out = torch.relu(xs @ full).sum(0)
            full.untyped_storage().resize_(0)
            state.note(wrong=not torch.allclose(out.cpu(), ref, rtol=2e-3, atol=2e-2),
                       where="resize")
        except Exception as e:  # noqa: BLE001
            state.note(error=f"resize: {type(e).__name__}: {e}")
            return


def _start_loads(state: _Round, switching: bool) -> list[threading.Thread]:
    """The round's threads (STRESS_LOADS selects them), started."""
    loads = os.environ.get("STRESS_LOADS", "compute,streams,statistics,switch,queue,resize").split(",")
    if not switching:
        loads = [name for name in loads if name != "switch"]
    threads = [threading.Thread(target=_compute, args=(state, i, switching), daemon=True)
               for i in range(4 if "compute" in loads else 0)]
    threads += [threading.Thread(target=f, args=(state,), daemon=True)
                for name, f in (("streams", _producer_consumer), ("statistics", _poll_statistics),
                                ("switch", _switch_modes), ("queue", _queue_bound),
                                ("resize", _resize_storage))
                if name in loads]
    for t in threads:
        t.start()
    return threads


def worker(seconds: float, seed: int, interruptible: bool, switching: bool) -> None:
    """One round (runs in the subprocess). Prints one JSON line with its counts. `switching`:
    a thread switches the process's mode every few milliseconds and half the compute threads
    switch it too around each step; otherwise every thread runs in the mode the round started in."""
    import torch
    import torchtpu

    if interruptible:
        # (Python keeps SIGINT ignored when it starts with it ignored, as a shell's background
        # job does: Ctrl-C's handler is installed so that the round does not depend on that.)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    state = _Round(seed)
    threads = _start_loads(state, switching)
    print("started", flush=True)
    deadline = time.time() + seconds
    if interruptible:
        # The main thread queues work and waits for it, so that SIGINT lands in host waits.
        big = torch.randn(1024, 1024, device="tpu")
        while time.time() < deadline:
            for _ in range(20):
                y = big @ big
            torch.tpu.synchronize()
        print(LOOP_DONE, flush=True)  # (a SIGINT after this is not the round's test: run_round)
    else:
        while time.time() < deadline:
            time.sleep(0.05)
    state.stop.set()
    for t in threads:
        t.join()
    torchtpu.sync()
    print(json.dumps(state.counts), flush=True)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *args):
        return False


def interrupt_instant(seed: int, mode: str, round_index: int, seconds: float) -> float:
    """When the round's SIGINT is sent, in seconds after its worker started its threads: drawn
    per run seed, mode and round (so that the modes are not all interrupted at one instant),
    inside the worker's main loop (which lasts `seconds`), leaving it a tenth to spare."""
    rng = random.Random(f"interrupt {seed} {mode} {round_index}")  # (str seeds: the same in every process)
    return round(rng.uniform(0.2, max(0.3, 0.9 * seconds)), 3)


def run_round(mode: str, seconds: float, seed: int, interrupt: bool, switching: bool,
              interrupt_at: float | None = None) -> dict:
    """One round in a worker subprocess. With `interrupt`, SIGINT is sent `interrupt_at` seconds
    after the worker started its threads; the round tests the interrupt only if the worker was
    still running then and the signal ended it ("not_tested" otherwise: a worker that had
    already finished proves nothing about Ctrl-C)."""
    env = dict(os.environ, TORCHTPU_EAGER_MODE=mode, TORCHTPU_HBM_BYTES=str(HBM_BYTES))
    cmd = [sys.executable, __file__, "--worker", "--seconds", str(seconds), "--seed", str(seed)]
    if interrupt:
        cmd.append("--interruptible")
    if switching:
        cmd.append("--switching")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    result = {"mode": mode, "seed": seed, "hang": False, "interrupt_s": None, "iterations": 0,
              "wrong": 0, "errors": [], "wrong_in": {}}
    try:
        if interrupt:
            assert proc.stdout.readline().strip() == "started"
            result["interrupt_at"] = interrupt_at
            time.sleep(interrupt_at)
            if proc.poll() is not None:
                out, err = proc.communicate(timeout=30)
                result["not_tested"] = f"the worker had exited ({proc.returncode}) before the signal"
                return result
            sent = time.time()
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                result["hang"] = True
            result["interrupt_s"] = time.time() - sent
            out, err = proc.communicate(timeout=30)
            if not result["hang"] and LOOP_DONE in out.splitlines():
                # its main loop had ended (it was joining its threads or exiting): the signal
                # did not land in the waits the round is about
                result["interrupt_s"] = None
                result["not_tested"] = (f"the worker had left its main loop (exit "
                                        f"{proc.returncode}) when the signal reached it")
            elif not result["hang"] and "KeyboardInterrupt" not in err and proc.returncode != 0:
                result["errors"].append(f"exit {proc.returncode}: {err[-800:]}")
            return result
        out, err = proc.communicate(timeout=seconds + 120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        result["hang"] = True
        return result
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        result["errors"].append(f"exit {proc.returncode}: {err[-1500:]}")
        return result
    result.update(json.loads(lines[-1]))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=MODES, action="append")
    parser.add_argument("--minutes", type=float)
    parser.add_argument("--seconds", type=float, default=20, help="per mode, when no --minutes")
    parser.add_argument("--round", type=float, default=15, help="seconds per round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the summary here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--interruptible", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--switching", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.seconds, args.seed, args.interruptible, args.switching)
        return
    per_mode = args.minutes * 60 if args.minutes else args.seconds
    summary = {}
    failed = False
    total_rounds = failed_rounds = 0
    all_rounds = []
    for mode in args.mode or MODES:
        start = time.time()
        rounds, seed, kind, refires = [], args.seed, 0, 0
        tested = lambda: sum(r.get("interrupt_s") is not None for r in rounds)  # noqa: E731
        # (one round of each kind, and one interrupt that reached a running worker)
        while time.time() - start < per_mode or kind % 3 != 0 or (tested() == 0 and refires < 3):
            length = min(args.round, max(2.0, per_mode - (time.time() - start)))
            # Rounds cycle: the mode alone, modes switched under running threads, interrupted. An
            # interrupt that did not reach a running worker is fired again in the next round.
            interrupt = kind % 3 == 2
            switching = kind % 3 == 1
            seconds = min(length, 5.0) if interrupt else length
            at = interrupt_instant(args.seed, mode, len(rounds), seconds) if interrupt else None
            r = run_round(mode, seconds, seed, interrupt, switching, at)
            rounds.append(r)
            seed += 1
            if r.get("not_tested") and refires < 3:
                refires += 1
            else:
                kind += 1
            bad = bool(r["hang"] or r["wrong"] or r["errors"] or (r["interrupt_s"] or 0) > 1.0)
            r["failed"] = bad
            failed = failed or bad
            if r.get("not_tested"):
                what = f"SIGINT at {at:.3f} s not tested: {r['not_tested']}"
            elif r["interrupt_s"] is not None:
                what = f"SIGINT at {at:.3f} s -> exit in {r['interrupt_s']:.2f} s"
            else:
                what = (f"{r['iterations']} results checked, {r['wrong']} wrong"
                        + (" (modes switched)" if switching else ""))
            print(f"[{mode}] round {len(rounds)} ({time.time() - start:.0f}/{per_mode:.0f} s): {what}"
                  f"{' ' + str(r['wrong_in']) if r['wrong'] else ''}"
                  f"{', HANG' if r['hang'] else ''}{', errors: ' + str(r['errors'][:2]) if r['errors'] else ''}",
                  flush=True)
        if tested() == 0:  # (after three re-fires): a failure, not a pass
            print(f"[{mode}] no interrupt reached a running worker: Ctrl-C not tested", flush=True)
            rounds[-1]["failed"] = failed = True
        all_rounds += rounds
        total_rounds += len(rounds)
        failed_rounds += sum(r["failed"] for r in rounds)
        latencies = [r["interrupt_s"] for r in rounds if r["interrupt_s"] is not None]
        summary[mode] = {
            "seconds": round(time.time() - start, 1),
            "rounds": len(rounds),
            "iterations": sum(r["iterations"] for r in rounds),
            "wrong": sum(r["wrong"] for r in rounds),
            "errors": sum(len(r["errors"]) for r in rounds),
            "hangs": sum(r["hang"] for r in rounds),
            "interrupts": len(latencies),
            "interrupts_not_tested": sum(bool(r.get("not_tested")) for r in rounds),
            "max_interrupt_s": round(max(latencies), 3) if latencies else None,
        }
    print("\nstress summary")
    for mode, s in summary.items():
        print(f"  {mode:6s}: {s['seconds']:.0f} s, {s['rounds']} rounds, {s['iterations']} results "
              f"checked, {s['wrong']} wrong, {s['errors']} errors, {s['hangs']} hangs, "
              f"{s['interrupts']} interrupts (slowest exit {s['max_interrupt_s']} s), "
              f"{s['interrupts_not_tested']} not tested (re-fired)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    not_tested = sum(bool(r.get("not_tested")) and not r["failed"] for r in all_rounds)
    print(f"{total_rounds - failed_rounds - not_tested} passed, {failed_rounds} failed, "
          f"{not_tested} not tested")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
