"""The program of one ATen graph (``_GraphProgram``): captured through fused eager's recorder at
its first call, planned by fused eager's passes, then replayed as one launch per call, one
program per input shape (docs/compiled-mode.md); made and kept (weakly) by ``_new_graph``, listed
by ``programs()``."""
from __future__ import annotations

from typing import NamedTuple

import torch

from .. import _C, metrics as _metrics
from .buckets import _Busy, _Unpriced, _at_sizes, _bind_symbols, _symbolic_inputs
from .counters import _count, _count_failure
from .options import _DEFAULT_OPTIONS

class _Captured(NamedTuple):
    """A program captured from the graph, and the graph's non-tensor outputs (None where a
    tensor output goes)."""
    program: object
    template: list


class _Entry(NamedTuple):
    """A program of the graph for one tuple of non-tensor inputs (the sizes of dynamic
    shapes)."""
    others: tuple
    captured: _Captured


class _Bucket(NamedTuple):
    """The bucket of dynamic sizes that holds a call's sizes: its key, whether the call's sizes
    are the bucket's, and its program (None: not priced)."""
    key: tuple
    exact: bool
    captured: _Captured | None


class _GraphProgram:
    """One ATen graph of AOTAutograd, called with AOTAutograd's boxed convention (a list of
    inputs it may clear). Programs are kept per tuple of non-tensor inputs (the sizes of dynamic
    shapes); the C++ side checks the tensors' shapes, strides, dtypes and aliasing."""

    # A graph whose capture failed this often runs op by op from then on.
    _MAX_FAILURES = 2

    def __init__(self, gm, name: str, random_op=..., options=None, symbolic=...):
        self.gm = gm
        self.name = name
        self.options = options or _DEFAULT_OPTIONS
        self.programs: list[_Entry] = []
        # Buckets of dynamic sizes (docs/compiled-mode.md, "Buckets"): the inputs' symbolic
        # sizes (None: the graph has none), and per bucket its program (None: not priced).
        self.symbolic = _symbolic_inputs(gm) if symbolic is ... else symbolic  # (saved)
        self.buckets: dict[tuple, _Captured | None] = {}
        self.failures = 0
        self.lines_known = False
        self.random_op = random = _random_op(gm) if random_op is ... else random_op  # (saved)
        if random is not None:
            # Its numbers would be drawn once, at the capture, and replayed.
            self.failures = self._MAX_FAILURES
            _count_failure(f"random op: {random}")

    def _op_by_op(self, args):
        return self.gm(*args)

    def __call__(self, args):
        precision = self.options.matmul_precision
        if precision is None:
            return self._call(args)
        previous = _C.get_precision_override()  # (this thread's: the backward runs on autograd's)
        _C.set_precision_override(precision)
        try:
            return self._call(args)
        finally:
            _C.set_precision_override(previous)

    def _call(self, args):
        args = list(args)
        tensors = [a if isinstance(a, torch.Tensor) else None for a in args]
        others = tuple(a for a in args if not isinstance(a, torch.Tensor))
        for entry in self.programs:
            if entry.others == others:
                outs = _C.program_run(entry.captured.program, tensors)
                if outs is not None:
                    return _merge(entry.captured.template, outs)
        if not self.lines_known:
            # (The errors of its ops name the user's lines. A lazy graph module writes its code,
            # and the map of its lines, at its first call.)
            self.lines_known = True
            force = getattr(type(self.gm), "force_recompile", None)
            if force is not None:
                force(self.gm)
            _C.add_fx_lines(_user_lines(self.gm))
        full = self.options.replay and len(self.programs) >= self.options.max_programs
        bucketed = self.symbolic is not None and self.options.buckets is not None
        if full:
            _count("compile.graph_runs_op_by_op.max_programs")
            bucket = self._bucket(args) if bucketed else None
            if bucket is not None and bucket.captured is not None:
                # Run op by op on the host, charged as its bucket's program (the program a TPU
                # would run), not op by op.
                _count("compile.graph_runs_op_by_op")
                _C.begin_uncharged()
                try:
                    outs = self._op_by_op(args)
                finally:
                    _C.end_uncharged()
                _C.program_charge(bucket.captured.program)
                return outs
        if (
            full
            or _C.get_eager_mode() == "debug"  # (op by op, synchronous: errors at their op)
            or not self.options.replay
            or self.failures >= self._MAX_FAILURES
        ):
            _count("compile.graph_runs_op_by_op")
            return self._op_by_op(args)
        bucket = charged_as = None
        if bucketed:
            bucket = self._bucket(args)
            if bucket is not None and bucket.captured is not None:
                charged_as, template = bucket.captured
                if bucket.exact:  # (the call's sizes are the bucket's: its program may take them)
                    outs = _C.program_run(charged_as, tensors)
                    if outs is not None:
                        _count("compile.programs")
                        self.programs.append(_Entry(others, bucket.captured))
                        return _merge(template, outs)
                    charged_as = None  # (a program of these sizes is captured, the bucket's)
        if not _C.program_begin(tensors):
            _count("compile.graph_runs_op_by_op")
            return self._op_by_op(args)
        try:
            outs = self.gm(*args)
        except BaseException:
            _C.program_abort()
            raise
        flat = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        program, results, failure = _C.program_end(tensors, flat, self.name,
                                                   charged_as=charged_as)
        if program is None:
            self.failures += 1
            _count_failure(failure)
            _count("compile.graph_runs_op_by_op")
            return outs
        template = [None if isinstance(o, torch.Tensor) else o for o in flat]
        captured = _Captured(program, template)
        self.programs.append(_Entry(others, captured))
        if bucket is not None and bucket.exact and charged_as is None:
            self.buckets[bucket.key] = captured  # (its program: sizes of the bucket)
        return _merge(template, results)

    def _bucket(self, args):
        """The _Bucket that holds this call's sizes (docs/compiled-mode.md, "Buckets"), or
        None. A bucket first met at other sizes is priced then; one first met at its own sizes
        gets the program captured at this call (_call)."""
        sizes = _bind_symbols(self.symbolic, args)
        if sizes is None:
            return None
        at = {sym: self.options.bucket(n) for sym, n in sizes.items()}
        key = tuple(sorted((str(sym), n) for sym, n in at.items()))
        exact = at == sizes
        if key not in self.buckets:
            try:
                self.buckets[key] = None if exact else self._price(args, at)
            except _Busy:  # (priced at a later call)
                _count("compile.buckets_unpriced.a capture in progress")
                return None
            _count("compile.buckets")
        return _Bucket(key, exact, self.buckets[key])

    def _price(self, args, at):
        """Captures the graph at the bucket's sizes `at` (inputs padded with zeros around the
        call's values, written inputs copied), charging nothing and leaving the generators as
        they were: the _Captured program, or None (the reason counted:
        compiled()["buckets_unpriced"])."""
        # The capture's run (program_end) may raise a kernel's error at the bucket's sizes (a
        # padded input it refuses), or enqueue it, to be reported at the next synchronization
        # (strict and fused eager). The devices are synchronized before, so that what that one
        # reports is the pricing's, and after: such an error leaves the bucket unpriced instead
        # of reaching the user.
        devices = {a.device for a in args
                   if isinstance(a, torch.Tensor) and a.device.type == "tpu"}
        for device in devices:
            torch.tpu.synchronize(device)  # (errors of the user's earlier work are the user's)
        _C.begin_uncharged()
        rng = torch.tpu.get_rng_state_all()  # (its random ops draw nothing the user's will)
        try:
            try:
                padded = [_at_sizes(a, spec, at, i in self.symbolic.written)
                          for i, (a, spec) in enumerate(zip(args, self.symbolic.inputs))]
            except _Unpriced as e:
                _count(f"compile.buckets_unpriced.{e}")
                return None
            tensors = [a if isinstance(a, torch.Tensor) else None for a in padded]
            if not _C.program_begin(tensors):
                raise _Busy
            try:
                outs = self.gm(*padded)
            except Exception as e:  # (an error the call's own sizes do not raise)
                _C.program_abort()
                _count(f"compile.buckets_unpriced.{type(e).__name__} at the bucket's sizes")
                return None
            except BaseException:
                _C.program_abort()
                raise
            flat = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            template = [None if isinstance(o, torch.Tensor) else o for o in flat]
            try:  # (program_end has ended the capture when its run raises)
                program, _, failure = _C.program_end(tensors, flat, self.name, bucket=True)
                del padded, tensors, outs, flat  # (their memory is the pricing's)
                for device in devices:
                    torch.tpu.synchronize(device)
            except Exception as e:  # (the run's error, at the bucket's sizes)
                _count(f"compile.buckets_unpriced.{type(e).__name__} at the bucket's sizes")
                return None
        finally:
            torch.tpu.set_rng_state_all(rng)
            _C.end_uncharged()
        if program is None:
            _count(f"compile.buckets_unpriced.{failure}")
            return None
        return _Captured(program, template)

    def stats(self) -> list:
        return [_C.program_stats(entry.captured.program) for entry in self.programs]


def _user_lines(gm) -> dict:
    """Lines of the graph's generated code ("<eval_with_key>.3:12") -> the user's line that made
    the op there ("model.py:40"), from the nodes' stack traces."""
    import re

    lineno_map = getattr(gm, "_lineno_map", None)
    code = getattr(gm.forward, "__code__", None)
    if not lineno_map or code is None:
        return {}
    nodes = list(gm.graph.nodes)
    out = {}
    for rel, idx in lineno_map.items():
        if idx is None or idx >= len(nodes):
            continue
        trace = nodes[idx].meta.get("stack_trace") or ""
        found = re.findall(r'File "([^"]+)", line (\d+)', trace)
        if found:
            path, line = found[-1]
            out[f"{code.co_filename}:{code.co_firstlineno + rel}"] = f"{path}:{line}"
    return out


def _random_op(gm):
    """The name of the first op of the graph that draws random numbers on the host (a CPU random
    op, which no torchtpu kernel sees: a capture would draw its numbers once), or None. (Random
    ops on "tpu" are recorded into programs and draw at every run.)"""
    for node in gm.graph.nodes:
        tags = getattr(node.target, "tags", ()) if node.op == "call_function" else ()
        if torch.Tag.nondeterministic_seeded not in tags:
            continue
        values = node.meta.get("val")
        values = values if isinstance(values, (tuple, list)) else [values]
        if not any(isinstance(v, torch.Tensor) and v.device.type == "tpu" for v in values):
            return str(node.target)
    return None


def _merge(template, tensors):
    return [t if t is not None else o for o, t in zip(template, tensors)]


_programs = []  # every _GraphProgram compiled (weakly: they die with their graphs)
_graphs_compiled = 0  # (names them)


def _new_graph(gm, kind: str, random_op=..., options=None, symbolic=...) -> _GraphProgram:
    """A program for one ATen graph, counted and kept (weakly) for programs()."""
    import weakref

    global _graphs_compiled
    from ..pallas import _graphs as _kernel_graphs

    if _kernel_graphs.has_kernels(gm):  # (cut at its JAX kernels: torchtpu/pallas/_graphs.py)
        _count("compile.graphs_cut_at_kernels")
        return _kernel_graphs.SplitGraph(
            gm, lambda piece: _new_graph(piece, kind, random_op, options))
    from .. import _excess_precision

    _excess_precision.apply(gm)  # (torch.backends.tpu.allow_excess_precision, as it is now)
    _count(f"compile.graphs_{kind}")
    _count("compile.graph_ops", sum(1 for node in gm.graph.nodes if node.op == "call_function"))
    graph = _GraphProgram(gm, f"{kind}_{_graphs_compiled}", random_op, options, symbolic)
    _graphs_compiled += 1
    _programs[:] = [ref for ref in _programs if ref() is not None]  # (drop the dead)
    _programs.append(weakref.ref(graph))
    return graph


def programs() -> list:
    """Statistics of every compiled program alive: name, ops, regions, runs, estimate."""
    out = []
    for ref in _programs:
        graph = ref()
        if graph is not None:
            out.extend(graph.stats())
    return out


_metrics._register_compiled(programs=programs)
