"""``torch.compile(model, backend="tpu")`` (docs/compiled-mode.md).

Dynamo finds this backend through the ``torch_dynamo_backends`` entry point (setup.py) the first
time a backend is looked up, so importing torch or torchtpu does not import Dynamo. Dynamo hands
it an FX graph of the user's Python; AOTAutograd turns that into functional ATen graphs (a forward
and a backward for training, one inference graph when no output needs gradients). Each ATen
graph becomes a program (``_GraphProgram``): its first call records its ops through fused eager's
capture (in strict eager too), plans them with fused eager's passes (regions, matmul epilogues,
dead ops, memory) and keeps the plan; later calls with inputs of the same shapes replay the plan
without dispatching or recording any op, charged to the cost model as one launch. A graph whose
ops cannot all be recorded (a random op, a host read, a CPU fallback) runs op by op, with the
reason counted. Every graph compiled, its ATen ops, programs, replays, the compile time, graph
breaks and recompilations are counted (``torchtpu.metrics.compiled()``). With
the disk cache on (``TORCHTPU_CACHE_DIR`` or TorchTPU's tier-2/tier-3 variables,
``_cache_location.py``), AOTAutograd's graphs are kept on disk (``_compile_cache.py``).
"""
from __future__ import annotations

import os
import time

import torch

from . import _C, _cache_location

_aots = {}  # aot_autograd with this backend's compilers, per set of options


class CompileOptions:
    """What ``torch.compile(..., backend="tpu", mode=..., options={...})`` asks of the graphs
    it compiles (docs/compiled-mode.md, "Modes and options").

    options:
      ``"matmul_precision"``: ``"highest"``, ``"high"`` or ``"medium"``: the MXU passes of the
        graphs' float32 matmuls and convolutions, whatever ``torch.set_float32_matmul_precision``
        says (XLA keeps a precision per program the same way); None (default): the level in force
        at each call.
      ``"replay"``: False runs each ATen graph op by op in the current eager mode instead of as a
        program (to tell a program's result from eager's when looking for a bug); default True.
      ``"max_programs"``: programs kept per graph, one per input shape (default 16); a graph
        called with more shapes runs op by op, counted.
      ``"buckets"``: how a graph with dynamic sizes is priced (docs/compiled-mode.md, "Buckets"):
        ``"pow2"`` (default): each symbolic size rounded up to a power of two, an int N: up to a
        multiple of N, None: each size priced as itself (a TPU program per size). Every call is
        charged the estimate of the graph at its bucket's sizes, as a TPU would run it padded;
        the host still computes at the call's own sizes.
    mode: ``"default"``, ``"reduce-overhead"``, ``"max-autotune"`` and
      ``"max-autotune-no-cudagraphs"`` give the same programs: a program already replays as one
      launch with no per-op host work (what CUDA graphs give "reduce-overhead"), and its plan has
      no kernel variants to tune.
    """

    MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
    KNOWN = {"matmul_precision": (None, "highest", "high", "medium"), "replay": (True, False),
             "max_programs": int, "buckets": (None, "pow2", int)}

    def __init__(self, mode=None, options=None):
        if mode is not None and mode not in self.MODES:
            raise RuntimeError(
                f"torch.compile(backend='tpu'): unrecognized mode={mode!r}; the modes are "
                f"{', '.join(self.MODES)} (all give the same programs: docs/compiled-mode.md)")
        options = dict(options or {})
        for key, value in options.items():
            allowed = self.KNOWN.get(key)
            if allowed is None:
                raise RuntimeError(
                    f"torch.compile(backend='tpu'): unexpected option {key!r}; the options are "
                    f"{', '.join(self.KNOWN)} (Inductor's options do not apply: "
                    "docs/compiled-mode.md)")
            whole = isinstance(value, int) and not isinstance(value, bool)
            if allowed is int:
                ok = whole and value >= 0
            else:
                ok = (whole and value >= 1) if int in allowed and whole else value in allowed
            if not ok:
                wanted = ("an int >= 0" if allowed is int else
                          " or ".join("an int >= 1" if a is int else repr(a) for a in allowed))
                raise RuntimeError(
                    f"torch.compile(backend='tpu'): option {key!r} must be {wanted}, not {value!r}")
        self.matmul_precision = options.get("matmul_precision")
        self.replay = options.get("replay", True)
        self.max_programs = options.get("max_programs", 16)
        self.buckets = options.get("buckets", "pow2")

    def key(self) -> tuple:
        return (self.matmul_precision, self.replay, self.max_programs, self.buckets)

    def bucket(self, n: int) -> int:
        """The size a TPU program for size ``n`` of a dynamic dimension is compiled at."""
        if self.buckets is None or n <= 0:
            return n
        if self.buckets == "pow2":
            return 1 << (n - 1).bit_length()
        return -(-n // self.buckets) * self.buckets


_DEFAULT_OPTIONS = CompileOptions()


def _count(name: str, n: int = 1) -> None:
    _C.metrics_count(name, int(n))


def _count_failure(reason: str) -> None:
    """A graph that is not a program (torchtpu.metrics.compiled()["program_failures"])."""
    _count("compile.program_failures")
    _count(f"compile.program_failure.{reason}")


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
        self.programs = []  # (non-tensor inputs, program, non-tensor outputs)
        # Buckets of dynamic sizes (docs/compiled-mode.md, "Buckets"): the inputs' symbolic
        # sizes (None: the graph has none), and per bucket its program (None: not priced).
        self.symbolic = _symbolic_inputs(gm) if symbolic is ... else symbolic  # (saved)
        self.buckets = {}
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
        for key, program, template in self.programs:
            if key == others:
                outs = _C.program_run(program, tensors)
                if outs is not None:
                    return _merge(template, outs)
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
            if bucket is not None and bucket[2] is not None:
                # Run op by op on the host, charged as its bucket's program (the program a TPU
                # would run), not op by op.
                _count("compile.graph_runs_op_by_op")
                _C.begin_uncharged()
                try:
                    outs = self._op_by_op(args)
                finally:
                    _C.end_uncharged()
                _C.program_charge(bucket[2][0])
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
            if bucket is not None and bucket[2] is not None:
                charged_as, template = bucket[2]
                if bucket[1]:  # (the call's sizes are the bucket's: its program may take them)
                    outs = _C.program_run(charged_as, tensors)
                    if outs is not None:
                        _count("compile.programs")
                        self.programs.append((others, charged_as, template))
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
        self.programs.append((others, program, template))
        if bucket is not None and bucket[1] and charged_as is None:
            self.buckets[bucket[0]] = (program, template)  # (its program: sizes of the bucket)
        return _merge(template, results)

    def _bucket(self, args):
        """The bucket that holds this call's sizes (docs/compiled-mode.md, "Buckets"): (its
        key, whether the call's sizes are the bucket's, (its program, its non-tensor outputs) or
        None). A bucket first met at other sizes is priced then; one first met at its own sizes
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
        return key, exact, self.buckets[key]

    def _price(self, args, at):
        """Captures the graph at the bucket's sizes `at` (inputs padded with zeros around the
        call's values, written inputs copied), charging nothing and leaving the generators as
        they were: (program, non-tensor outputs), or None (the reason counted:
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
        return program, template

    def stats(self) -> list:
        return [_C.program_stats(p) for _, p, _ in self.programs]


class _Unpriced(Exception):
    """A bucket's inputs cannot be made (the reason is counted)."""


class _Busy(Exception):
    """A bucket cannot be priced now: another capture is in progress (of another thread)."""


class _Symbolic:
    """The symbolic sizes of a graph's inputs, as sympy expressions (or ints), so that the disk
    cache keeps them with the graph: per input None (a static input), ("int", expr) or
    ("tensor", sizes, strides); `written`: the inputs the graph writes."""

    def __init__(self, inputs, written):
        self.inputs = inputs
        self.written = written


def _expr(d):
    return d.node.expr if isinstance(d, torch.SymInt) else int(d)


def _symbolic_inputs(gm):
    """_Symbolic of the graph's inputs (their fake values), or None when no size is symbolic."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inputs, any_symbolic = [], False
    for v in (n.meta.get("val") for n in placeholders):
        if isinstance(v, torch.SymInt):
            inputs.append(("int", _expr(v)))
            any_symbolic = True
        elif isinstance(v, torch.Tensor) and any(
                isinstance(d, torch.SymInt) for d in (*v.shape, *v.stride())):
            inputs.append(("tensor", [_expr(d) for d in v.shape], [_expr(d) for d in v.stride()]))
            any_symbolic = True
        else:
            inputs.append(None)
    if not any_symbolic:
        return None
    index = {n: i for i, n in enumerate(placeholders)}
    written = set()
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        for i, arg in enumerate(schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            while isinstance(value, torch.fx.Node) and value.op == "call_function" and value.args:
                value = value.args[0]  # (a view of an input: the input is written)
            if value in index:
                written.add(index[value])
    return _Symbolic(inputs, written)


def _bind_symbols(symbolic, args):
    """{symbol: this call's value} from the inputs whose sizes are bare symbols; None when a
    symbol of some input's sizes stays unbound."""
    sizes, needed = {}, set()
    for spec, a in zip(symbolic.inputs, args):
        if spec is None:
            continue
        pairs = [(spec[1], a)] if spec[0] == "int" else list(zip(spec[1], a.shape))
        for expr, n in pairs:
            if isinstance(expr, int):
                continue
            needed |= expr.free_symbols
            if expr.is_Symbol:
                sizes[expr] = int(n)
    if not needed <= sizes.keys():
        _count("compile.buckets_unpriced.a size no input gives")
        return None
    return sizes


def _size_at(expr, at) -> int:
    if isinstance(expr, int):
        return expr
    value = expr.xreplace(at)
    if not (isinstance(value, int) or value.is_Integer):
        raise _Unpriced(f"size {expr} at the bucket")
    return int(value)


def _at_sizes(a, spec, at, written):
    """Input `a` at the bucket's sizes: an int evaluated there, a tensor of the bucket's sizes
    holding zeros around `a`'s values; a static input as it is (a copy where the graph writes
    it, so pricing changes nothing the user holds)."""
    if spec is None:
        return a.clone() if written and isinstance(a, torch.Tensor) else a
    if spec[0] == "int":
        return _size_at(spec[1], at)
    sizes = [_size_at(d, at) for d in spec[1]]
    strides = [_size_at(d, at) for d in spec[2]]
    if any(n < m for n, m in zip(sizes, a.shape)):
        raise _Unpriced("a size that shrinks at the bucket")
    out = torch.empty_strided(sizes, strides, dtype=a.dtype, device=a.device)
    out.zero_()
    out[tuple(slice(0, m) for m in a.shape)].copy_(a)
    return out


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


def _run_on_annotated_streams(gm) -> bool:
    """Dynamo traces a stream context in a compiled function (``with torch.tpu.stream(s):``,
    known to it through the device interface, torchtpu/_device_interface.py) into an annotation
    of the ops inside, ``node.meta["custom"]["stream"]``: the stream's index among the objects the
    compiled frame hands its graph (index 0: the stream current when it runs). Inductor's
    scheduler switches streams by it; AOTAutograd leaves it to the backend, and torch 2.13's
    AOTAutograd fails on training graphs with one (its stream pass needs triton, its partitioner
    and the backward's dead stream references fail too). This puts PyTorch's stream ops around
    each run of annotated ops (``streams::fork`` to their stream, ``streams::join`` back to index
    0), so they run on their stream as in eager; true when the graph has any."""
    from torch._dynamo.graph_bytecode_inputs import CURRENT_STREAM_INDEX

    fork, join = torch.ops.streams.fork.default, torch.ops.streams.join.default
    graph = gm.graph
    current = CURRENT_STREAM_INDEX
    changed = False
    for node in list(graph.nodes):
        if node.op == "call_function":
            target = (node.meta.get("custom") or {}).get("stream", CURRENT_STREAM_INDEX)
        elif node.op == "output":
            target = CURRENT_STREAM_INDEX
        else:
            continue
        if target != current:
            with graph.inserting_before(node):
                graph.call_function(join if target == CURRENT_STREAM_INDEX else fork,
                                    (current, target))
            current, changed = target, True
    if changed:
        gm.recompile()
    return changed


def _on_streams(gm):
    """A Dynamo graph with stream contexts runs as eager runs it, op by op with its streams
    switched (a program runs on one stream: a stream change ends its capture), its backward by
    autograd on the streams of the forward's ops, as in eager. Counted."""
    _count_failure("stream context")

    def run(*args):
        _count("compile.graph_runs_op_by_op")
        current = torch.accelerator.current_stream()
        try:
            return gm(*args)
        finally:  # (the graph switches back itself, unless one of its ops raised)
            torch.accelerator.set_stream(current)

    return run


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
    from .pallas import _graphs as _kernel_graphs

    if _kernel_graphs.has_kernels(gm):  # (cut at its JAX kernels: torchtpu/pallas/_graphs.py)
        _count("compile.graphs_cut_at_kernels")
        return _kernel_graphs.SplitGraph(
            gm, lambda piece: _new_graph(piece, kind, random_op, options))
    from . import _excess_precision

    _excess_precision.apply(gm)  # (torch.backends.tpu.allow_excess_precision, as it is now)
    _count(f"compile.graphs_{kind}")
    _count("compile.graph_ops", sum(1 for node in gm.graph.nodes if node.op == "call_function"))
    graph = _GraphProgram(gm, f"{kind}_{_graphs_compiled}", random_op, options, symbolic)
    _graphs_compiled += 1
    _programs[:] = [ref for ref in _programs if ref() is not None]  # (drop the dead)
    _programs.append(weakref.ref(graph))
    return graph


def _graph_compiler(kind: str, options: CompileOptions, on_graph=None):
    def compile_graph(gm, example_inputs):
        start = time.perf_counter_ns()
        graph = _new_graph(gm, kind, options=options)
        if on_graph is not None:
            on_graph(graph)
        if kind == "backward":  # (compiled lazily at the first backward, outside tpu_backend)
            _count("compile.time_ns", time.perf_counter_ns() - start)

        def run(args):
            return graph(args)

        run._boxed_call = True  # (AOTAutograd looks for it on a function)
        run.graph = graph
        return run

    return compile_graph


def programs() -> list:
    """Statistics of every compiled program alive: name, ops, regions, runs, estimate."""
    out = []
    for ref in _programs:
        graph = ref()
        if graph is not None:
            out.extend(graph.stats())
    return out


def tpu_backend(gm, example_inputs, mode=None, options=None, *, on_graph=None, disk_cache=True,
                **kwargs):
    """The Dynamo backend: AOTAutograd's graphs, run by torchtpu's kernels. ``mode`` and
    ``options``: CompileOptions. For callers that wrap the backend (the TorchTPU twin's
    ``TpuBackend``, torchtpu/_torch_tpu/_internal/compile/_backend.py): ``on_graph`` is called
    with each ATen graph's ``_GraphProgram`` when it is made (a backward one at the first
    backward), and ``disk_cache=False`` keeps this Dynamo graph out of the disk cache
    (``_cache_location.py``)."""
    opts = CompileOptions(mode, options) if (mode or options) else _DEFAULT_OPTIONS
    _count("compile.dynamo_graphs")
    if _run_on_annotated_streams(gm):
        return _on_streams(gm)
    start = time.perf_counter_ns()  # AOTAutograd's tracing and partitioning, and the compilers
    if not (disk_cache and _cache_location.enabled()):
        aot = _aots.get(opts.key()) if on_graph is None else None
        if aot is None:
            from torch._dynamo.backends.common import aot_autograd

            aot = aot_autograd(
                fw_compiler=_graph_compiler("forward", opts, on_graph),
                bw_compiler=_graph_compiler("backward", opts, on_graph),
                inference_compiler=_graph_compiler("inference", opts, on_graph),
                # input mutations (a static KV cache written by index_copy_) stay in the graph
                keep_inference_input_mutations=True,
            )
            if on_graph is None:  # (one per caller's hook otherwise: made per Dynamo graph)
                _aots[opts.key()] = aot
        compiled = aot(gm, example_inputs)
    else:  # (docs/compiled-mode.md, "The compilation cache"; imported only then)
        from . import _compile_cache

        compiled = _compile_cache.compile(gm, example_inputs, opts, on_graph)
    _count("compile.time_ns", time.perf_counter_ns() - start)
    return compiled
