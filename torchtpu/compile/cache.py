"""The compilation cache on disk of ``torch.compile(backend="tpu")`` (``TORCHTPU_CACHE_DIR``, or
Google TorchTPU's tier-2 and tier-3 caches: ``cache_location.py``; docs/compiled-mode.md).

With the cache on, the ATen graphs AOTAutograd makes of a Dynamo graph are kept on
disk by PyTorch's own AOTAutograd cache, in its bundled form (the graphs travel inside the
entry, as ``TpuOutputCode``), keyed by the Dynamo graph, the inputs' metadata, the autograd
state and configuration, torch's version and this torchtpu build. A second process that traces
the same code finds them there and skips AOTAutograd's tracing and partitioning; each graph is
rebuilt as a program, captured and planned at its first call as after a cold compile. Dynamo's
bytecode tracing runs in every process (PyTorch keeps no cache of it outside its experimental
precompile). Hits, misses and bypasses are counted (``torchtpu.metrics.compiled()["cache"]``).

This module imports Inductor's ``output_code`` (the base class of what the AOTAutograd cache
keeps); the backend imports it only when the cache is on.
"""
from __future__ import annotations

import hashlib
import os
import shutil

import torch
import torch._functorch.config as functorch_config
import torch._inductor.config as inductor_config
from torch._dynamo.utils import counters
from torch._functorch._aot_autograd import autograd_cache
from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCacheDetails
from torch._inductor.output_code import OutputCode

from .. import _C, config as _config, metrics as _metrics
from . import cache_location as _cache_location
from .program import _new_graph

_build = None  # this build's subdirectory name
_aot = None  # aot_autograd with cacheable compilers
_options = None  # the CompileOptions of the compile() running (not saved: entries serve any)
_on_graph = None  # the caller's hook of the compile() running (tpu_backend's on_graph)


def _build_name() -> str:
    """This build's subdirectory: torch's version and the size and time of torchtpu's Python files
    and libraries (its meta kernels shape AOTAutograd's graphs): another build's entries are never
    read."""
    global _build
    if _build is None:
        import glob

        package = os.path.dirname(os.path.abspath(__file__))
        files = sorted(glob.glob(os.path.join(package, "*.py")) + glob.glob(os.path.join(package, "*.so"))
                       + glob.glob(os.path.join(package, "lib", "*.so*")))
        key = torch.__version__ + "".join(
            f"|{f}:{os.stat(f).st_size}:{os.stat(f).st_mtime_ns}" for f in files)
        _build = "build-" + hashlib.sha256(key.encode()).hexdigest()[:16]
    return _build


def _build_dir(root: str | None) -> str | None:
    return None if root is None else os.path.join(os.path.abspath(root), _build_name())


def directory():
    """The directory of this build's entries the cache works in, or None when it is off
    (cache_location.py says which variables choose it)."""
    return _build_dir(_cache_location.location().working)


def _entry_dir(build_dir: str, key: str) -> str:
    return os.path.join(build_dir, "aotautograd", key)  # (PyTorch's AOTAutogradCache layout)


def _copy_entries(source: str, target: str) -> int:
    """Copies the entry files of one key that `target` lacks (each written under a temporary
    name, then renamed: a reader never sees half a file); returns how many."""
    if not os.path.isdir(source):
        return 0
    os.makedirs(target, exist_ok=True)
    copied = 0
    for name in os.listdir(source):
        if name.startswith(".") or os.path.exists(os.path.join(target, name)):
            continue
        tmp = os.path.join(target, f".{name}.{os.getpid()}.tmp")
        shutil.copyfile(os.path.join(source, name), tmp)
        os.replace(tmp, os.path.join(target, name))
        copied += 1
    return copied


class _Tiers:
    """One compilation's use of a working (tier-2) directory and a kept one: before the lookup the
    key's entries missing from the working directory are read from the kept one; the key is
    locked in the working directory until the compilation ends, so that the host's processes
    compiling the same graph compile it once (the others wait, then load it); after it, new
    entries are written to the kept directory."""

    def __init__(self, working: str, kept: str | None):
        self.working, self.kept = working, kept
        self.key = None
        self._lock = None

    def on_key(self, key: str) -> None:
        import fcntl

        self.key = key
        os.makedirs(os.path.join(self.working, "aotautograd"), exist_ok=True)
        self._lock = open(_entry_dir(self.working, key) + ".lock", "a")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        if self.kept is not None:
            read = _copy_entries(_entry_dir(self.kept, key), _entry_dir(self.working, key))
            if read:
                _C.metrics_count("compile.cache_kept_reads", read)

    def finish(self) -> None:
        try:
            if self.key is not None and self.kept is not None:
                written = _copy_entries(_entry_dir(self.working, self.key),
                                        _entry_dir(self.kept, self.key))
                if written:
                    _C.metrics_count("compile.cache_kept_writes", written)
        finally:
            if self._lock is not None:
                self._lock.close()  # (releases the lock)
                self._lock = None


_tiers = None  # the _Tiers of the compile() running, with a tier-2 directory


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
            key = "tpu" + cache.AOTAutogradCachePickler(gm).get_hash(details)
    except Exception as e:
        global _bypass_reason
        _bypass_reason = f"{type(e).__name__}: {str(e)[:160]}"
        raise
    if _tiers is not None:
        _tiers.on_key(key)
    return key, []


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
    global _aot, _bypass_reason, _options, _on_graph, _tiers
    if _aot is None:
        _aot = _cacheable_aot()
    _bypass_reason = None
    _options, _on_graph = options, on_graph
    before = dict(counters["aot_autograd"])
    where = _cache_location.location()
    working = _build_dir(where.working)
    if where.tier2:
        _tiers = _Tiers(working, _build_dir(where.kept))
    old = _config.raw("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = working  # (where the AOTAutograd cache works)
    pytorch_key = autograd_cache.autograd_cache_key
    autograd_cache.autograd_cache_key = _cache_key  # (looked up there by AOTAutogradCache.try_load)
    try:
        with functorch_config.patch(enable_autograd_cache=True, bundled_autograd_cache=True,
                                    force_non_lazy_backward_lowering=True), \
                inductor_config.patch(fx_graph_cache=True):
            return _aot(gm, example_inputs)
    finally:
        if _tiers is not None:
            _tiers.finish()
            _tiers = None
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


_metrics._register_compiled(cache_directory=directory)
