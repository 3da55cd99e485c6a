"""The Dynamo backend ``"tpu"`` (``tpu_backend``): AOTAutograd's graphs, each made a program
(program.py), through PyTorch's AOTAutograd cache when the disk cache is on (cache.py)."""
from __future__ import annotations

import time

import torch

from . import cache_location
from .options import _DEFAULT_OPTIONS, CompileOptions
from .counters import _count, _count_failure
from .program import _new_graph

_aots = {}  # aot_autograd with this backend's compilers, per set of options


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


def tpu_backend(gm, example_inputs, mode=None, options=None, *, on_graph=None, disk_cache=True,
                **kwargs):
    """The Dynamo backend: AOTAutograd's graphs, run by torchtpu's kernels. ``mode`` and
    ``options``: CompileOptions. For callers that wrap the backend (the TorchTPU twin's
    ``TpuBackend``, torchtpu/_torch_tpu/_internal/compile/_backend.py): ``on_graph`` is called
    with each ATen graph's ``_GraphProgram`` when it is made (a backward one at the first
    backward), and ``disk_cache=False`` keeps this Dynamo graph out of the disk cache
    (``cache_location.py``)."""
    opts = CompileOptions(mode, options) if (mode or options) else _DEFAULT_OPTIONS
    _count("compile.dynamo_graphs")
    if _run_on_annotated_streams(gm):
        return _on_streams(gm)
    start = time.perf_counter_ns()  # AOTAutograd's tracing and partitioning, and the compilers
    if not (disk_cache and cache_location.enabled()):
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
        from . import cache

        compiled = cache.compile(gm, example_inputs, opts, on_graph)
    _count("compile.time_ns", time.perf_counter_ns() - start)
    return compiled
