"""The compilation cache on disk of ``torch.compile(backend="tpu")`` (``TORCHTPU_CACHE_DIR``;
docs/compiled-mode.md).

With ``TORCHTPU_CACHE_DIR`` set, the ATen graphs AOTAutograd makes of a Dynamo graph are kept on
disk by PyTorch's own AOTAutograd cache, in its bundled form (the graphs travel inside the
entry, as ``TpuOutputCode``), keyed by the Dynamo graph, the inputs' metadata, the autograd
state and configuration, torch's version and this torchtpu build. A second process that traces
the same code finds them there and skips AOTAutograd's tracing and partitioning; each graph is
rebuilt as a program, captured and planned at its first call as after a cold compile. Dynamo's
bytecode tracing runs in every process (PyTorch keeps no cache of it outside its experimental
precompile). Hits, misses and bypasses are counted (``torchtpu.metrics.compiled()["cache"]``).

This module imports Inductor's ``output_code`` (the base class of what the AOTAutograd cache
keeps); the backend imports it only when the directory is set.
"""
from __future__ import annotations

import hashlib
import os

import torch
import torch._functorch.config as functorch_config
import torch._inductor.config as inductor_config
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd import autograd_cache
from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCacheDetails
from torch._inductor.output_code import OutputCode

from . import _C

_build = None  # this build's subdirectory name
_aot = None  # aot_autograd with cacheable compilers
_options = None  # the CompileOptions of the compile() running (not saved: entries serve any)
_on_graph = None  # the caller's hook of the compile() running (tpu_backend's on_graph)


def directory():
    """The directory of this build's entries, or None without TORCHTPU_CACHE_DIR."""
    root = os.environ.get("TORCHTPU_CACHE_DIR")
    if not root:
        return None
    global _build
    if _build is None:
        # The build: torch's version and the size and time of torchtpu's Python files and
        # libraries (its meta kernels shape AOTAutograd's graphs): another build's entries are
        # never read.
        import glob

        package = os.path.dirname(os.path.abspath(__file__))
        files = sorted(glob.glob(os.path.join(package, "*.py")) + glob.glob(os.path.join(package, "*.so"))
                       + glob.glob(os.path.join(package, "lib", "*.so*")))
        key = torch.__version__ + "".join(
            f"|{f}:{os.stat(f).st_size}:{os.stat(f).st_mtime_ns}" for f in files)
        _build = "build-" + hashlib.sha256(key.encode()).hexdigest()[:16]
    return os.path.join(os.path.abspath(root), _build)


class TpuOutputCode(OutputCode):
    """An ATen graph of AOTAutograd as PyTorch's AOTAutograd cache keeps it: pickled with FX's
    GraphPickler when saved, rebuilt as a program (_GraphProgram) when loaded."""

    def __init__(self, gm, kind: str):
        super().__init__()
        self._gm = gm
        self._kind = kind
        self._serialized = None
        self._graph = _new_graph(gm, kind, options=_options)
        if _on_graph is not None:
            _on_graph(self._graph)
        # (the saved graph keeps no values in its nodes: what the program needs of them is kept)
        self._random_op = self._graph.random_op
        self._symbolic = self._graph.symbolic  # (sympy expressions: buckets of dynamic sizes)
        self._boxed_call = True  # (AOTAutograd calls it with a list of inputs)

    def __call__(self, inputs):
        return self._graph(inputs)

    def prepare_for_serialization(self) -> None:
        # (called on a shallow copy: the live object keeps its graph and program)
        from torch.fx._graph_pickler import GraphPickler, Options

        # Nodes keep their stack traces (errors name the user's lines) and nothing else: the
        # fake values of every node would triple the time of a load.
        self._serialized = GraphPickler.dumps(
            self._gm, Options(ops_filter=None, node_metadata_key_filter=_kept_metadata))
        self._gm = None
        self._graph = None

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        if self._graph is not None:
            return
        from torch._guards import detect_fake_mode
        from torch._subclasses import FakeTensorMode
        from torch.fx._graph_pickler import GraphPickler

        gm = GraphPickler.loads(self._serialized, detect_fake_mode(example_inputs) or FakeTensorMode())
        gm.recompile()
        self._gm = gm
        self._graph = _new_graph(gm, self._kind, self._random_op, _options, self._symbolic)
        if _on_graph is not None:
            _on_graph(self._graph)

    def set_triton_bundle(self, triton_bundle) -> None:
        pass


def _kept_metadata(key: str) -> bool:
    return key == "stack_trace"


def _new_graph(gm, kind, random_op=..., options=None, symbolic=...):
    from ._dynamo_backend import _new_graph as new_graph

    return new_graph(gm, kind, random_op, options, symbolic)


def _cacheable_aot():
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler

    def compiler(kind):
        return SerializableAOTDispatchCompiler(TpuOutputCode, lambda gm, _: TpuOutputCode(gm, kind))

    return aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        keep_inference_input_mutations=True,  # (as the backend without the cache)
    )


def _cache_key(mod, example_inputs, aot_config, compiler_config_extra=None):
    """The key of an entry: PyTorch's AOTAutograd cache key (the Dynamo graph with its constants,
    the inputs' metadata and symbolic sizes, AOTAutograd's configuration, grad mode, autocast
    state, deterministic algorithms) without its Inductor half (Inductor's configuration and the
    hash of torch's sources, which would import Inductor's code generators: 1.2 s per process and
    nothing this backend uses). torch's version and this build name the directory."""
    cache = autograd_cache
    gm = mod.gm if isinstance(mod, torch._dynamo.utils.GmWrapper) else mod
    try:
        with cache.sanitize_gm_for_cache(gm):
            cache.check_cacheable(gm)
            details = _KeyDetails(gm, example_inputs, aot_config, {})
            return "tpu" + cache.AOTAutogradCachePickler(gm).get_hash(details), []
    except Exception as e:
        global _bypass_reason
        _bypass_reason = f"{type(e).__name__}: {str(e)[:160]}"
        raise


class _KeyDetails(AOTAutogradCacheDetails):
    """What _cache_key hashes: PyTorch's AOTAutograd details, with the graph's own part of
    Inductor's (the graph, the inputs, the deterministic-algorithm settings) and no more."""

    def _init_fx_graph_hash_details(self, gm, example_inputs, fx_config) -> None:
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.deterministic_algorithms_settings = (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
            torch.utils.deterministic.fill_uninitialized_memory,
        )


_COUNTERS = (("autograd_cache_hit", "hits"), ("autograd_cache_miss", "misses"),
             ("autograd_cache_saved", "saved"))
_bypass_reason = None  # why the last key could not be made


def compile(gm, example_inputs, options, on_graph=None):
    """AOTAutograd on a Dynamo graph with its cache on, in this build's directory, for this call
    only (the backward compiled now, not at the first backward, so that the entry is complete
    when it is saved); hits, misses, bypasses and saves counted. ``options`` (CompileOptions)
    apply to the programs made of the graphs, saved or loaded: they are not part of an entry."""
    global _aot, _bypass_reason, _options, _on_graph
    if _aot is None:
        _aot = _cacheable_aot()
    _bypass_reason = None
    _options, _on_graph = options, on_graph
    before = dict(counters["aot_autograd"])
    old = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = directory()  # (where the AOTAutograd cache works)
    pytorch_key = autograd_cache.autograd_cache_key
    autograd_cache.autograd_cache_key = _cache_key  # (looked up there by AOTAutogradCache.try_load)
    try:
        with functorch_config.patch(enable_autograd_cache=True, bundled_autograd_cache=True,
                                    force_non_lazy_backward_lowering=True), \
                inductor_config.patch(fx_graph_cache=True):
            return _aot(gm, example_inputs)
    finally:
        _options = _on_graph = None
        autograd_cache.autograd_cache_key = pytorch_key
        if old is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = old
        after = counters["aot_autograd"]
        for key, name in _COUNTERS:
            if after.get(key, 0) > before.get(key, 0):
                _C.metrics_count(f"compile.cache_{name}", after[key] - before.get(key, 0))
        bypassed = after.get("autograd_cache_bypass", 0) - before.get("autograd_cache_bypass", 0)
        if bypassed:
            reason = _bypass_reason or "the entry could not be read (TORCH_LOGS=aot_graphs)"
            _C.metrics_count(f"compile.cache_bypass.{reason}", bypassed)
            _bypass_reason = None
