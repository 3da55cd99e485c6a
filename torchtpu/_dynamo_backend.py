"""``torch.compile(model, backend="tpu")`` (docs/compiled-mode.md).

Dynamo finds this backend through the ``torch_dynamo_backends`` entry point (setup.py) the first
time a backend is looked up, so importing torch or torchtpu does not import Dynamo. Dynamo hands
it an FX graph of the user's Python; AOTAutograd turns that into functional ATen graphs (a forward
and a backward for training, one inference graph when no output needs gradients), and each
compiled graph runs its ATen ops through torchtpu's kernels in the eager mode in force: enqueued
on the stream in strict eager, recorded into DeferAndFuse's graph and planned by its passes
(regions, dead ops, memory, the plan cache) in fused eager. Every graph compiled, its ATen ops,
the compile time, graph breaks and recompilations are counted (``torchtpu.metrics.compiled()``).

Not done yet (issue #12): a graph lowered to one program replayed without per-op dispatch and
charged as one launch, a compilation cache on disk, and the default ``torch.compile(model)``
(Inductor) on "tpu" tensors, which fails in Inductor's Pallas code generator (it needs jax).
"""
from __future__ import annotations

import time
import warnings

from . import _C

_GRAPH_KINDS = ("forward", "backward", "inference")
_aot = None
_warned_options = False


def _count(name: str, n: int = 1) -> None:
    _C.metrics_count(name, int(n))


def _graph_compiler(kind: str):
    def compile_graph(gm, example_inputs):
        from functorch.compile import make_boxed_func

        start = time.perf_counter_ns()
        ops = sum(1 for node in gm.graph.nodes if node.op == "call_function")
        compiled = make_boxed_func(gm.forward)
        _count(f"compile.graphs_{kind}")
        _count("compile.graph_ops", ops)
        if kind == "backward":  # (compiled lazily at the first backward, outside tpu_backend)
            _count("compile.time_ns", time.perf_counter_ns() - start)
        return compiled

    return compile_graph


def tpu_backend(gm, example_inputs, mode=None, options=None, **kwargs):
    """The Dynamo backend: AOTAutograd's graphs, run by torchtpu's kernels."""
    global _aot, _warned_options
    if _aot is None:
        from torch._dynamo.backends.common import aot_autograd

        _aot = aot_autograd(
            fw_compiler=_graph_compiler("forward"),
            bw_compiler=_graph_compiler("backward"),
            inference_compiler=_graph_compiler("inference"),
            # input mutations (a static KV cache written by index_copy_) stay in the graph
            keep_inference_input_mutations=True,
        )
    if (options or (mode not in (None, "default"))) and not _warned_options:
        _warned_options = True
        warnings.warn(
            f"torch.compile(backend='tpu') takes no mode or options yet; ignoring mode={mode!r}, "
            f"options={options!r}",
            stacklevel=2,
        )
    _count("compile.dynamo_graphs")
    start = time.perf_counter_ns()  # AOTAutograd's tracing and partitioning, and the compilers
    compiled = _aot(gm, example_inputs)
    _count("compile.time_ns", time.perf_counter_ns() - start)
    return compiled
