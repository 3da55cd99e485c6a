"""A randomized differential fuzzer for the eager modes: random programs of element-wise ops,
reductions, matmuls, scaled-dot-product attention (value heads as long as or half the query's),
views, in-place updates on bases and views, foreach ops (in-place updates of lists of tensors,
as an optimizer's step makes, and functional ones), broadcasting, non-contiguous
inputs, mixed dtypes, random ops (dropout, bernoulli_, randperm, randn on the device) interleaved
with draws from the CPU generator, torch.save/torch.load and copy.deepcopy of tensors not computed
yet, collectives of a one-rank "tpu_dist" group (recorded into fused eager's graphs, as with
TORCH_TPU_INTERNAL_MATERIALIZE_COLLECTIVE_TENSORS=0: their results feed the ops after them, so one
run out of order or dropped shows), and errors raised inside the graph (an index out of range) run
on the CPU and on "tpu" in
debug, strict and fused eager (in fused eager also three times in a row, as a loop whose body
loop detection finds); every value, every error and every host read of the program must match
the CPU's.

    python test/helpers/defer_fuzz.py --programs 2000          # the long run
    python test/helpers/defer_fuzz.py --seed 1234 --programs 1 --show   # replay one program
    python test/helpers/defer_fuzz.py --threads 4 --programs 2000   # programs run concurrently
    python test/helpers/defer_fuzz.py --compiled --programs 200     # torch.compile(backend="tpu")
    python test/helpers/defer_fuzz.py --compiled --dynamic --programs 200   # ... dynamic=True

With --threads N, N threads each run programs against CPU references computed first, each thread
switching the (process's) eager mode to its own before each program, so that modes change under
the other threads' running programs; random ops and
errors are left out of those programs (SHARED_STATE_KINDS says why).

With --compiled, each program (without saves, copies, errors and CPU draws) is compiled with
torch.compile(backend="tpu") and called twice with different input values, capturing its graphs
as programs and replaying them, in strict and fused eager (check_compiled).

test_defer.py runs a fixed-seed subset in CI (test_compile.py the compiled one). A failure prints the seed of the program; every
failure it ever found is kept as a regression test in test_defer.py (REGRESSION_SEEDS).
"""
from __future__ import annotations

import argparse
import copy
import io
import os
import random
import sys
import threading
import time

import torch

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")
# ("highest" as the CPU's float32 GEMM, not the chip's six passes: eager modes against the CPU;
# casts and comparisons after a matmul amplify its last bit)
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")
import torchtpu  # noqa: E402

SHAPES = [(8, 16), (16,), (1, 16), (8, 1), (4, 8, 16), (33, 7)]
# An empty tensor in place of some inputs (gen_program's `empty`; most shapes do not broadcast
# with it: the errors are compared).
EMPTY_SHAPE = (8, 0, 1)
UNARY = ["relu", "sigmoid", "tanh", "neg", "abs", "exp_clamped", "sin", "square"]
BINARY = ["add", "sub", "mul", "maximum", "where_gt", "div_safe"]
# Binary steps that gen_program's `ternary` turns into an op of AdamW's update (by a generator of
# their own: the rest of the program is the same with or without them).
TERNARY = ["lerp_small", "lerp_large", "addcmul", "addcdiv_safe"]
# gen_program's `foreach` turns some in-place steps into in-place foreach updates of a list of
# pool tensors (an optimizer's step: one launch in strict eager, its per-tensor ops in fused
# eager) and some unary steps into functional foreach ops, by a generator of their own;
# `collective` some scalar steps into collectives (left out of threaded programs: a group's
# collectives are in one order, the program's, whichever thread issues them).


KINDS = ["unary", "binary", "scalar", "reduce", "matmul", "view", "inplace", "inplace_view", "cast",
         "read", "dropout", "random", "host_random", "save", "deepcopy", "error"]
WEIGHTS = [4, 5, 3, 2, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]
# Left out of programs that run in concurrent threads: the threads share the device generator (so
# the order of draws is not the program's) and the default stream and fused eager's graph (so an
# error is reported to whichever thread synchronizes first, as CUDA reports an error of a shared
# stream to whoever synchronizes it).
SHARED_STATE_KINDS = ("dropout", "random", "host_random", "error")


def gen_program(seed: int, length: int = 12, shared_state_ops: bool = True, attention: bool = True,
                empty: bool = True, ternary: bool = True, foreach: bool = True,
                collective: bool = True):
    """`attention`: the steps added since the first regression seeds were found: some matmul
    steps become scaled-dot-product attention and some cast steps a detour through complex128
    (16-byte values inside fused regions), each chosen by a generator of its own so that the
    rest of the program is the same for a seed with or without them (the regression seeds
    replay programs found before those steps existed, without them). `empty`: an input is
    sometimes EMPTY_SHAPE instead, chosen the same way (the rest of the program unchanged)."""
    rng = random.Random(seed)
    empty_rng = random.Random(seed * 31 + 7)
    inputs = []
    for _ in range(rng.randint(2, 4)):
        shape = rng.choice(SHAPES)
        transposed = len(shape) == 2 and rng.random() < 0.3
        if empty and empty_rng.random() < 0.1:
            shape, transposed = EMPTY_SHAPE, False
        inputs.append({"shape": shape, "transposed": transposed, "dtype": "float32"})
    steps = []
    n = len(inputs)
    for _ in range(length):
        kind = rng.choices(KINDS, weights=WEIGHTS)[0]
        while not shared_state_ops and kind in SHARED_STATE_KINDS:
            kind = rng.choices(KINDS, weights=WEIGHTS)[0]
        step = {"kind": kind, "a": rng.randrange(n), "b": rng.randrange(n),
                "op": rng.choice(UNARY if kind == "unary" else BINARY),
                "s": round(rng.uniform(-2, 2), 3), "r": rng.random()}
        steps.append(step)
        if kind not in ("inplace", "inplace_view", "read", "error"):
            n += 1
    if attention:
        side = random.Random(seed * 7919 + 1)
        for st in steps:
            if st["kind"] == "matmul" and side.random() < 0.5:
                st["kind"] = "attention"
        side = random.Random(seed * 7919 + 2)
        for st in steps:
            if st["kind"] == "cast" and side.random() < 0.5:
                st["kind"] = "complex"
    if ternary:
        side = random.Random(seed * 7919 + 3)
        for st in steps:
            if st["kind"] == "binary" and side.random() < 0.4:
                st["op"] = side.choice(TERNARY)
    if foreach:
        side = random.Random(seed * 7919 + 4)
        for st in steps:
            if st["kind"] in ("inplace", "unary") and side.random() < 0.3:
                st["kind"] = "foreach_" + st["kind"]
    if collective and shared_state_ops:
        side = random.Random(seed * 7919 + 5)
        for st in steps:
            if st["kind"] == "scalar" and side.random() < 0.4:
                st["kind"] = "collective"
    return inputs, steps


_GROUP = []


def one_rank_group():
    """A "tpu_dist" process group of this process alone (made once, not the default group): its
    collectives give every value back (AVG divides by 1), on the CPU through Gloo as they are."""
    if not _GROUP:
        from datetime import timedelta

        import torch.distributed as dist
        from torchtpu.distributed import TpuProcessGroup
        _GROUP.append(TpuProcessGroup(dist.HashStore(), 0, 1, timedelta(seconds=120)))
    return _GROUP[0]


def collective(x, st):
    """A collective of the one-rank group on a value made from x; fused eager records it."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import (AllreduceOptions, BroadcastOptions,
                                            ReduceScatterOptions)
    from torchtpu import distributed as tpu_dist

    group, r = one_rank_group(), st["r"]
    y = (x * st["s"]).contiguous()
    previous = tpu_dist.materialize_collective_tensors(False)
    try:
        if r < 0.4:  # in place: max, avg (a division by 1) or premul_sum (a product first)
            o = AllreduceOptions()
            o.reduceOp = (dist.ReduceOp.MAX if r < 0.15 else dist.ReduceOp.AVG if r < 0.3
                          else dist._make_nccl_premul_sum(0.5))
            group.allreduce([y], o).wait()
            return y
        if r < 0.8:  # into a fresh tensor, which the ops after it read
            out = torch.empty(y.numel(), device=y.device)
            if r < 0.6:
                group.all_gather_single(out, y.reshape(-1)).wait()
            else:
                o = ReduceScatterOptions()
                o.reduceOp = dist.ReduceOp.AVG
                group.reduce_scatter_single(out, y.reshape(-1), o).wait()
            return out.reshape(y.shape) + 1
        group.broadcast([y], BroadcastOptions()).wait()
        return y
    finally:
        tpu_dist.materialize_collective_tensors(previous)


def unary(op, x):
    if op == "exp_clamped":
        return torch.exp(x.clamp(-5, 5))
    if op == "square":
        return x * x
    return getattr(torch, op)(x)


def binary(op, x, y):
    if op in ("lerp_small", "lerp_large"):  # (both of ATen's formulas)
        return torch.lerp(x, y, 0.1 if op == "lerp_small" else 0.8)
    if op == "addcmul":
        return torch.addcmul(x, y, x, value=-0.7)
    if op == "addcdiv_safe":
        return torch.addcdiv(x, y, y.abs() + 1.0, value=0.3)
    if op == "where_gt":
        return torch.where(x > y, x, y * 0.5)
    if op == "div_safe":
        return x / (y.abs() + 1.0)
    return getattr(torch, op)(x, y)


def broadcastable(x, y):
    # (from the shapes alone, without catching an error: Dynamo traces it in compiled programs)
    for a, b in zip(reversed(x.shape), reversed(y.shape)):
        if a != b and a != 1 and b != 1:
            return False
    return True


def run_program(program, device: str, seed: int, seeded: bool = True, values: int | None = None):
    """Runs the program; returns the values it made, its host reads and the errors it raised.
    `values`: the seed of its input values (default: `seed`).

    Random ops on the device draw from the device generator, seeded with seed + 1; on the CPU
    reference they draw from a generator of their own seeded the same way (the tpu generator
    gives the CPU's numbers for a seed), so that draws from the CPU generator in between
    ("host_random") must not disturb them, nor they the CPU generator.
    """
    inputs, steps = program
    if seeded:
        torch.manual_seed(seed)
        if device != "cpu":
            torch.tpu.manual_seed(seed + 1)
    device_gen = torch.Generator().manual_seed(seed + 1) if device == "cpu" else None
    # Every fifth program runs under torch.inference_mode() (its values read after it ends): the
    # work it issues runs where the mode is not in force (a stream's worker, a later flush).
    with torch.inference_mode(seed % 5 == 0):
        return run_steps(steps, make_inputs(inputs, device, seed if values is None else values),
                         device, device_gen)


def make_inputs(inputs, device: str, seed: int):
    """The program's inputs, drawn from a generator seeded with `seed`."""
    gen = torch.Generator().manual_seed(seed)
    pool = []
    for spec in inputs:
        shape = spec["shape"]
        if spec["transposed"]:
            t = torch.randn(tuple(reversed(shape)), generator=gen).t()
        else:
            t = torch.randn(shape, generator=gen)
        if device != "cpu":
            t = t.to(device) if not spec["transposed"] else t.t().contiguous().to(device).t()
        pool.append(t)
    return pool


def run_steps(steps, pool, device: str, device_gen, contiguous_random: bool = False):
    """The program's steps on `pool` (its inputs, updated in place by some steps).
    `contiguous_random`: random ops fill contiguous tensors (compiled programs: AOTAutograd lays
    out empty_like's result contiguously where eager keeps a transposed input's layout, so the
    numbers land elsewhere; PyTorch's own aot_eager backend differs from eager the same way)."""
    events = []
    reads = []
    for st in steps:
        x = pool[st["a"] % len(pool)]
        y = pool[st["b"] % len(pool)]
        kind = st["kind"]
        if contiguous_random and kind in ("dropout", "random"):
            x = x.contiguous()
        if kind in VALUE_KINDS:
            _value_step(kind, st, x, y, pool)
        elif kind == "inplace":
            if broadcastable(x, y) and torch.broadcast_shapes(x.shape, y.shape) == x.shape and x is not y:
                if st["r"] < 0.3:
                    # an in-place call through an out= variant: ldexp_ is mul.out(x, 2**y, out=x)
                    x.ldexp_(y.clamp(-3, 3).round())
                else:
                    x.add_(y, alpha=st["s"])
            else:
                x.mul_(st["s"])
        elif kind == "foreach_inplace":
            lst = [x] if x is y else [x, y]  # (a view of another pool tensor too, at times)
            if st["r"] < 0.4:
                torch._foreach_mul_(lst, st["s"])
            elif st["r"] < 0.7:
                torch._foreach_addcmul_(lst, [t.sin() for t in lst], [t.cos() for t in lst],
                                        value=st["s"])
            else:
                torch._foreach_lerp_(lst, [t * 0.5 for t in lst], 0.3)
        elif kind == "inplace_view":
            if st["r"] < 0.25:
                # an in-place op between in-place metadata changes (dropout3d of an unbatched
                # input): it runs on the geometry it was called with
                x.unsqueeze_(0)
                x.mul_(x.cos() * st["s"])  # (an operand of the unsqueezed shape)
                x.squeeze_(0)
            elif x.dim() >= 1 and x.shape[0] > 1:
                x[1:].mul_(st["s"]).add_(0.5)  # a view of the base, updated in place
            else:
                x.add_(st["s"])
        elif kind == "dropout":
            # on views too: the mask is laid out like the input, as on the CPU
            if device == "cpu":  # native_dropout's CPU kernel, with the device generator
                mask = torch.empty_like(x).bernoulli_(0.75, generator=device_gen)
                pool.append(x * (mask * (1 / 0.75)))
            else:
                pool.append(torch.nn.functional.dropout(x, 0.25))
        elif kind == "random":
            g = {"generator": device_gen} if device == "cpu" else {}
            if st["r"] < 0.4:
                pool.append(torch.empty_like(x).bernoulli_(0.5, **g) * x)
            elif st["r"] < 0.7:
                perm = torch.randperm(x.shape[0] if x.dim() else 1, device=device, **g)
                pool.append(x[perm] if x.dim() else x + perm.sum())
            else:
                pool.append(torch.randn(x.shape, device=device, **g) + x)
        elif kind == "host_random":
            # a draw from the CPU generator, moved to the device
            pool.append(x + torch.rand(x.shape).to(device))
        elif kind == "save":
            buf = io.BytesIO()
            torch.save({"t": x, "u": x * 2}, buf)  # x may not be computed yet
            buf.seek(0)
            loaded = torch.load(buf)
            pool.append(loaded["u"] + loaded["t"])
        elif kind == "deepcopy":
            pool.append(copy.deepcopy(x * st["s"]))
        elif kind == "error":
            # an op that raises on its values (an index out of range); its result is dead
            try:
                torch.index_select(x.reshape(-1), 0, torch.tensor([x.numel() + 3], device=device))
                if device != "cpu":
                    torchtpu.sync()
                events.append("no error")
            except IndexError:
                events.append("IndexError")
        elif kind == "read":
            reads.append(float(x.sum().item()))  # a host read in the middle of the program
    return pool, reads, events


# Step kinds that append one new tensor computed from their operands (_value_step). The others
# (in-place updates, random draws, host round trips, errors) stay in run_steps' own frame:
# Dynamo cuts a compiled program at a graph break in the frame where it happens, and a break
# inside a called function would cut the fuzzer's compiled programs elsewhere.
VALUE_KINDS = ("unary", "binary", "scalar", "collective", "reduce", "matmul", "attention", "view",
              "cast", "complex", "foreach_unary")


def _value_step(kind, st, x, y, pool):
    """Appends the step's new tensor to the pool.

    Its frame is invisible to Dynamo (skip_code below), as if its code were still written inside
    run_steps: traced, it is inlined into run_steps' graph; where Dynamo gives up on run_steps
    (a host read inside its loop) and runs it eagerly, this frame runs eagerly too, and only the
    functions it calls are compiled as graphs of their own, so that the compiled programs, and
    what the regression seeds of test_compile_programs.py exercise, stay those of one function."""
    if kind == "unary":
        pool.append(unary(st["op"], x))
    elif kind == "binary":
        pool.append(binary(st["op"], x, y) if broadcastable(x, y) else unary("relu", x))
    elif kind == "scalar":
        pool.append(x * st["s"] + (st["s"] / 3))
    elif kind == "collective":
        pool.append(collective(x, st))
    elif kind == "reduce":
        if x.dim() == 0:
            pool.append(x + 1)
        elif st["r"] < 0.4:
            pool.append(x.sum(dim=-1, keepdim=st["r"] < 0.2))
        elif st["r"] < 0.7:
            pool.append(x.amax(dim=0))
        else:
            pool.append(x.mean())
    elif kind == "matmul":
        if x.dim() == 2:
            pool.append(x @ x.t().contiguous())
        elif x.dim() == 3 and st["r"] < 0.5:
            # a linear layer on [batch, seq, features]: one matmul of the flattened input,
            # viewed back, with a (strided) bias; later element-wise ops are its epilogue
            pool.append(torch.nn.functional.linear(x, x[0], x[0, :, 0]))
        else:
            pool.append(x.flatten().dot(x.flatten()).reshape(1))
    elif kind == "attention":
        # the tokens of x attending to themselves: value heads half as long as the query's
        # when r < 0.5 (multi-head latent attention's shapes), causal when r < 0.3
        if x.dim() == 0 or x.shape[-1] < 2:
            pool.append(x + 1)
        else:
            q = x.reshape(1, 1, -1, x.shape[-1])
            v = q[..., : q.shape[-1] // 2] if st["r"] < 0.5 else q.sin()
            # (.contiguous(): the output's layout is the chosen kernel's, not one of PyTorch's
            # semantics: the CPU's math path pads and narrows it, CUDA's and tpu's fused
            # kernels lay it out like the query)
            pool.append(torch.nn.functional.scaled_dot_product_attention(
                q, q.flip(2) * 0.5, v, is_causal=st["r"] < 0.3).contiguous())
    elif kind == "view":
        if x.dim() >= 2 and st["r"] < 0.5:
            pool.append(x.transpose(0, 1))
        elif x.dim() >= 1 and x.shape[0] > 1:
            pool.append(x[::2])
        else:
            pool.append(x.reshape(-1))
    elif kind == "cast":
        pool.append(x.to(torch.bfloat16).to(torch.float32) if st["r"] < 0.5 else (x > 0).to(torch.float32))
    elif kind == "complex":  # through complex128 and back
        z = torch.complex(x.double(), (x * 0.5).double())
        z = (z * 2 + 1) * z - 0.5
        pool.append(z.abs().float() if st["r"] < 0.5 else z.real.float())
    elif kind == "foreach_unary":
        roots = torch._foreach_sqrt(torch._foreach_add([x.abs(), y.abs()], 1.0))
        pool.append(roots[0] * roots[1] if broadcastable(x, y) else roots[0])


torch._dynamo.eval_frame.skip_code(_value_step.__code__)


def check(seed: int, modes=("debug", "strict", "fused"), length: int = 12, show: bool = False,
          attention: bool = True, empty: bool = True, ternary: bool = True,
          foreach: bool = True, collective: bool = True) -> str | None:
    """Runs program `seed` on CPU and on tpu in each mode; returns a description of the first
    mismatch, or None."""
    program = gen_program(seed, length, attention=attention, empty=empty, ternary=ternary,
                          foreach=foreach, collective=collective)
    if show:
        for s in program[1]:
            print(s)
    try:
        reference = run_program(program, "cpu", seed)
    except (RuntimeError, IndexError) as cpu_error:
        # The CPU refuses the program (IndexError: a reduction over an empty dimension): every
        # mode must refuse it with the same kind of error.
        for mode in modes:
            with torchtpu.eager_mode(mode):
                try:
                    run_program(program, "tpu", seed)
                    torchtpu.sync()
                except type(cpu_error):
                    continue
                return f"seed {seed} mode {mode}: ran a program the CPU refuses ({cpu_error})"
        return None
    for mode in modes:
        err = compare(seed, program, mode, reference)
        if err:
            return err
    if "fused" in modes:
        # Fused eager again on other input values: the same graphs, so their cached plans and
        # fused regions (made at the first run, docs/design.md 3.1) are bound to new storages
        # and values.
        try:
            reference = run_program(program, "cpu", seed, values=seed + 100_000)
        except (RuntimeError, IndexError):
            return None  # (these values make the CPU refuse it)
        err = compare(seed, program, "fused", reference, values=seed + 100_000)
        if err:
            return err
        # The program's steps three times in a row: a loop, whose body fused eager's loop
        # detection finds where the steps read nothing (docs/eager-modes.md, "Loops that read
        # nothing"), cutting the graph where the body repeats.
        looped = (program[0], list(program[1]) * 3)
        try:
            reference = run_program(looped, "cpu", seed)
        except (RuntimeError, IndexError):
            return None
        return compare(seed, looped, "fused", reference)
    return None


def compare(seed, program, mode, reference, seeded=True, values=None) -> str | None:
    """Runs the program on tpu in `mode` and compares it with the CPU's."""
    what = f"seed {seed} mode {mode}" + ("" if values is None else f", inputs {values}")
    with torchtpu.eager_mode(mode):
        try:
            got, reads, events = run_program(program, "tpu", seed, seeded, values)
            strides = [t.stride() for t in got]
            got = [t.cpu() for t in got]
        except Exception as e:  # noqa: BLE001 - report, with the seed
            return f"{what}: raised {type(e).__name__}: {e}"
    return compare_results(what, reference, (got, reads, events), strides)


def compare_results(what, reference, result, strides) -> str | None:
    """The first difference between a run and the CPU's (`strides`: of the run's values, or None
    not to compare layouts)."""
    ref, ref_reads, ref_events = reference
    got, reads, events = result
    if events != ref_events:
        return f"{what}: errors {events}, CPU {ref_events}"
    if len(got) != len(ref):
        return f"{what}: {len(got)} values, CPU {len(ref)}"
    for i, (r, g) in enumerate(zip(ref, got)):
        if r.shape != g.shape or r.dtype != g.dtype:
            return f"{what}: value {i} is {g.dtype}{tuple(g.shape)}, CPU {r.dtype}{tuple(r.shape)}"
        # (Not for empty values, whose strides address nothing: fused eager lays out relu of a
        # (0, 1, 0)-strided empty tensor as PyTorch's meta kernel does, (0, 1, 0), the CPU kernel
        # contiguously.)
        if strides is not None and r.numel() > 0 and ([st for st, n in zip(strides[i], r.shape) if n > 1] !=
                                    [st for st, n in zip(r.stride(), r.shape) if n > 1]):
            # layouts are PyTorch semantics too (and decide where a dropout mask lands)
            return f"{what}: value {i} has strides {strides[i]}, CPU {r.stride()}"
        # Matmuls run on the simulated MXU ("highest", here the CPU's float32 GEMM; an
        # out_dtype or bf16 matmul is the MXU's bf16 passes, another order of float32 sums);
        # bf16 casts are exact; everything else runs the CPU's kernels.
        if not torch.allclose(g, r, rtol=1e-4, atol=1e-4, equal_nan=True):
            err = (g - r).abs().max().item()
            return f"{what}: value {i} differs from the CPU by {err}"
    if len(reads) != len(ref_reads):
        return f"{what}: {len(reads)} host reads, CPU {len(ref_reads)}"
    for a, b in zip(ref_reads, reads):
        if abs(a - b) > 1e-3 * max(1.0, abs(a)):
            return f"{what}: host read {b} != CPU {a}"
    return None


# Left out of compiled programs: torch.save / deepcopy / errors, which are host work around a
# graph rather than graph ops, and draws from the CPU generator (a graph with a CPU random op runs
# op by op, tested in test_compile.py). Random ops on the device are in: a program draws them at
# every run, in program order, the numbers eager draws for the seed.
COMPILED_EXCLUDED_KINDS = ("host_random", "error", "save", "deepcopy")


def check_compiled(seed: int, modes=("strict", "fused"), length: int = 12,
                   dynamic: bool = False) -> str | None:
    """Compiles program `seed` with torch.compile(backend="tpu") and calls it twice, on two sets
    of input values (the capture of its programs, then their replay), in each mode; every value
    and host read must match the CPU's for the same inputs. `dynamic`: compiled with
    dynamic=True, so every size is symbolic and each graph is first priced at its bucket's sizes
    (docs/compiled-mode.md, "Buckets": a capture on padded copies of the inputs), which must
    change nothing the program computes or writes."""
    # (ternary=False, foreach=False, collective=False: the programs the compiled regression
    # seeds were found with)
    inputs, steps = gen_program(seed, length, empty=False, ternary=False, foreach=False,
                                collective=False)
    steps = [st for st in steps if st["kind"] not in COMPILED_EXCLUDED_KINDS]
    # The in-place op between in-place metadata changes (inplace_view, r < 0.25) takes another
    # variant: PyTorch's own aot_eager on the CPU computes other values than eager for it (seed
    # 4's program), so a compiled difference there is not torchtpu's to find.
    steps = [dict(st, r=st["r"] + 0.25) if st["kind"] == "inplace_view" and st["r"] < 0.25
             else st for st in steps]
    value_seeds = (seed, seed + 100_000)
    references = []
    for vs in value_seeds:
        device_gen = torch.Generator().manual_seed(vs + 1)  # (the tpu generator's numbers)
        try:
            references.append(run_steps(steps, make_inputs(inputs, "cpu", vs), "cpu", device_gen,
                                        contiguous_random=True))
        except RuntimeError:
            return None  # the CPU refuses it (the eager fuzzer covers those)
    for mode in modes:
        torch._dynamo.reset()  # (one code object for every program: fresh caches)
        body = torch.compile(
            lambda *pool: run_steps(steps, list(pool), "tpu", None, contiguous_random=True),
            backend="tpu", dynamic=dynamic or None)
        for vs, reference in zip(value_seeds, references):
            with torchtpu.eager_mode(mode):
                try:
                    pool = make_inputs(inputs, "tpu", vs)
                    torch.tpu.manual_seed(vs + 1)
                    got, reads, events = body(*pool)
                    result = ([t.cpu() for t in got], reads, events)
                except Exception as e:  # noqa: BLE001 - report, with the seed
                    return f"seed {seed} compiled ({mode}), inputs {vs}: raised {type(e).__name__}: {e}"
            err = compare_results(f"seed {seed} compiled ({mode}), inputs {vs}", reference, result,
                                  strides=None)
            if err:
                return err
    return None


# The exception types PyTorch raises for input an op refuses (an IndexError for a reduction
# over an empty dimension, as `amax(dim=0)` of a (0, n) tensor in seed 1086's program).
CPU_REFUSALS = (RuntimeError, IndexError, ValueError, TypeError)


def check_threaded(seeds, threads: int, length: int, modes=("debug", "strict", "fused")):
    """Runs the programs of `seeds` (without SHARED_STATE_KINDS) in `threads` threads at once,
    thread i in mode modes[i % 3]; returns the failures."""
    programs = {seed: gen_program(seed, length, shared_state_ops=False) for seed in seeds}
    references = {}
    for seed, program in programs.items():
        try:
            references[seed] = run_program(program, "cpu", seed, seeded=False)
        except CPU_REFUSALS:
            pass  # the CPU refuses it: the single-threaded fuzzer covers those
    work = sorted(references)
    failures = []
    lock = threading.Lock()

    def worker(i):
        mode = modes[i % len(modes)]
        for seed in work[i::threads]:
            err = compare(seed, programs[seed], mode, references[seed], seeded=False)
            if err:
                with lock:
                    failures.append(err)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return failures


def main():
    parser = argparse.ArgumentParser(description="differential fuzzer of the eager modes")
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--length", type=int, default=12)
    parser.add_argument("--show", action="store_true")
    parser.add_argument("--dynamic", action="store_true",
                        help="with --compiled: dynamic=True (each graph priced at its bucket's "
                             "sizes first)")
    parser.add_argument("--compiled", action="store_true",
                        help="compile each program with torch.compile(backend='tpu') and call it "
                             "twice (capture, replay) in strict and fused eager")
    parser.add_argument("--threads", type=int, default=0,
                        help="run programs in this many threads at once (modes per thread)")
    args = parser.parse_args()
    failures = []
    start = time.time()
    if args.threads:
        batch = 200
        for first in range(args.seed, args.seed + args.programs, batch):
            seeds = range(first, min(first + batch, args.seed + args.programs))
            for err in check_threaded(seeds, args.threads, args.length):
                print("FAIL", err, flush=True)
                failures.append(int(err.split()[1]))
            print(f"  {seeds[-1] - args.seed + 1}/{args.programs} programs, "
                  f"{len(failures)} failures, {time.time() - start:.0f} s", flush=True)
    else:
        for seed in range(args.seed, args.seed + args.programs):
            err = (check_compiled(seed, length=args.length, dynamic=args.dynamic)
                   if args.compiled else check(seed, length=args.length, show=args.show))
            if err:
                print("FAIL", err, flush=True)
                failures.append(seed)
            done = seed - args.seed + 1
            if done % (50 if args.compiled else 500) == 0:
                print(f"  {done}/{args.programs} programs, {len(failures)} failures, "
                      f"{time.time() - start:.0f} s", flush=True)
    print(f"{args.programs} programs, {len(failures)} failures: {failures[:50]}")
    if args.compiled:
        c = torchtpu.metrics.compiled()
        print(f"compiled: {c['programs']} programs captured ({c['program_ops']} ops, "
              f"{c['ops_folded']} folded), {c['program_runs']} runs as programs, "
              f"{c['runs_op_by_op']} graph calls op by op, "
              f"{sum(c['graph_breaks'].values())} graph breaks; not programs: "
              f"{c['program_failures']}")
        if args.dynamic:
            print(f"buckets: {c['buckets']} ({c['bucket_programs']} priced by a capture at the "
                  f"bucket's sizes); unpriced: {c['buckets_unpriced']}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
