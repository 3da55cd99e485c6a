"""JAX and Pallas kernels as PyTorch ops on "tpu" (docs/custom-kernels.md): the half of
torchtpu.pallas that imports JAX, loaded at the first ``jax_op`` / ``custom_jax_kernel``.

A call on tpu tensors (``JaxKernel.__call__``):

1. inside ``_C._ForeignOp`` (api/Control.h): the work recorded (fused eager) or queued (strict
   eager) before it runs first, so every argument has memory and values, and the ops issued
   during the call run synchronously;
2. each tensor argument goes to JAX without a copy: a CPU view of its device memory
   (``_C.host_view``; device memory is host memory) through DLPack (a non-contiguous one is made
   contiguous first: a copy);
3. the jitted function runs with every ``pallas_call`` in Pallas' TPU interpret mode
   (``pltpu.force_tpu_interpret_mode``): TPU semantics (grid, VMEM, DMAs, semaphores) on the CPU;
   interpret mode's race detector and bounds checks are reported as errors naming the op;
4. each result is copied once into a tpu tensor allocated on the arguments' device (a donated
   argument's memory is taken by a result of its size: ``_C.swap_memory``);
5. the call is charged as one launch (``_C.charge_kernel``) with the work counted from its jaxpr
   (``_cost.py``), after the VMEM its blocks need is checked against the chip's.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import io
import threading
import types
import typing
from typing import Any, Callable, Sequence, Union

import numpy as np
import torch

from .. import _C
from . import _settings

import jax
import jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu

from . import _cost

_TORCH_TO_JAX = {
    torch.float32: jnp.float32, torch.float64: jnp.float64, torch.float16: jnp.float16,
    torch.bfloat16: jnp.bfloat16, torch.float8_e4m3fn: jnp.float8_e4m3fn,
    torch.float8_e5m2: jnp.float8_e5m2, torch.float8_e4m3fnuz: jnp.float8_e4m3fnuz,
    torch.float8_e5m2fnuz: jnp.float8_e5m2fnuz, torch.uint8: jnp.uint8, torch.uint16: jnp.uint16,
    torch.uint32: jnp.uint32, torch.uint64: jnp.uint64, torch.int8: jnp.int8,
    torch.int16: jnp.int16, torch.int32: jnp.int32, torch.int64: jnp.int64,
    torch.complex64: jnp.complex64, torch.complex128: jnp.complex128, torch.bool: jnp.bool_,
}
_JAX_TO_TORCH = {np.dtype(v): k for k, v in _TORCH_TO_JAX.items()}
_lock = threading.RLock()  # (interpret mode keeps process-wide state: one kernel at a time)


class KernelError(RuntimeError):
    """A kernel's failure reported by Pallas' TPU interpret mode (a data race, ...)."""


class KernelIndexError(IndexError):
    """An out-of-bounds access of a kernel, reported by Pallas' TPU interpret mode."""


def _jax_dtype(dtype: torch.dtype):
    try:
        return _TORCH_TO_JAX[dtype]
    except KeyError:
        raise TypeError(f"torchtpu.pallas: {dtype} has no JAX dtype") from None


def _torch_dtype(dtype) -> torch.dtype:
    try:
        return _JAX_TO_TORCH[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"torchtpu.pallas: JAX dtype {dtype} has no torch dtype") from None


# --- signatures: JAX annotations to the op's schema (TorchTPU's rules, docs/custom-kernels.md)

def _optional_of(t):
    if typing.get_origin(t) not in (Union, types.UnionType):
        return None
    args = [a for a in typing.get_args(t) if a is not type(None)]
    return args[0] if len(args) == 1 else None


def _base_ok(t) -> bool:
    return t in (jax.Array, int, float, bool, str)


def _param_ok(p: inspect.Parameter) -> bool:
    if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty:
        return True  # (bound by functools.partial: passed to jax.jit as it is)
    inner = _optional_of(p.annotation)
    return _base_ok(inner if inner is not None else p.annotation)


def _to_torch_type(t):
    if t is jax.Array:
        return torch.Tensor
    inner = _optional_of(t)
    if inner is not None:
        return typing.Optional[_to_torch_type(inner)]
    origin = typing.get_origin(t)
    if origin in (tuple, list, Sequence):
        args = tuple(_to_torch_type(a) for a in typing.get_args(t) if a is not Ellipsis)
        if origin is tuple and Ellipsis not in typing.get_args(t):
            return tuple[args]
        return list[args[0]] if args else list
    return t


def torch_signature(fn) -> tuple[inspect.Signature, tuple[int, ...]]:
    """The op's signature (jax.Array -> Tensor) and the positions of its static (non-array)
    arguments. Raises ValueError for a missing or unsupported annotation, as TorchTPU does."""
    sig = inspect.signature(fn, follow_wrapped=False)
    hints, target = {}, fn
    while isinstance(target, functools.partial):  # (a partial's annotations: its function's)
        target = target.func
    try:
        hints = typing.get_type_hints(target)  # (string annotations resolved: PEP 563 files)
    except Exception:  # (annotations as they are)
        pass
    params, static = [], []
    for i, p in enumerate(sig.parameters.values()):
        ann = hints.get(p.name, p.annotation)
        p = p.replace(annotation=ann)
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty:
            continue
        if ann is inspect.Parameter.empty:
            raise ValueError(f"jax_op: argument '{p.name}' of {getattr(fn, '__name__', fn)} has "
                             "no type annotation (jax.Array, int, float, bool or str, or "
                             "Optional of one)")
        if not _param_ok(p):
            raise ValueError(f"jax_op: argument '{p.name}' is annotated {ann}: only jax.Array, "
                             "int, float, bool, str (or Optional of one) are supported")
        inner = _optional_of(ann)
        if ann is not jax.Array and inner is not jax.Array:
            static.append(i)
        params.append(p.replace(annotation=_to_torch_type(ann), kind=(
            inspect.Parameter.POSITIONAL_OR_KEYWORD
            if p.kind is inspect.Parameter.POSITIONAL_ONLY else p.kind)))
    ret = hints.get("return", sig.return_annotation)
    if ret is inspect.Signature.empty:
        raise ValueError(f"jax_op: {getattr(fn, '__name__', fn)} has no return annotation "
                         "(jax.Array, or a tuple / list of them)")
    return inspect.Signature(params, return_annotation=_to_torch_type(ret)), tuple(static)


# --- the kernel


class JaxKernel:
    """A jitted JAX function called on torch tensors (what ``custom_jax_kernel`` returns and what
    a ``jax_op`` runs)."""

    def __init__(self, fn, name: str, static_argnums=(), donate_argnums=None, mesh=None,
                 input_partition_specs=None, input_output_aliases=None, op_name=None):
        self.fn = fn
        self.name = name
        self.op_name = op_name or f"pallas::{name}"
        self.static_argnums = tuple(static_argnums or ())
        if input_output_aliases:
            if donate_argnums is not None and set(donate_argnums) != set(input_output_aliases):
                raise ValueError("donate_argnums must be None or the keys of "
                                 "input_output_aliases")
            donate_argnums = list(input_output_aliases)
        self.donate_argnums = tuple(donate_argnums or ())
        self.input_output_aliases = dict(input_output_aliases or {})
        self.mesh = mesh
        self.input_partition_specs = input_partition_specs
        if mesh is not None and int(np.prod(mesh.devices.shape)) > 1:
            raise NotImplementedError(
                f"{self.op_name}: a kernel over a mesh of {mesh.devices.size} devices "
                f"(mesh={dict(mesh.shape)}, input_partition_specs) runs on TorchTPU as one "
                "shard_map across the chips of the process group; torchtpu runs a kernel on one "
                "chip in interpret mode and has no cross-process JAX runtime for the mesh. A mesh "
                "of one device works; split the work per rank and use torch.distributed "
                "collectives between kernel calls instead")
        self.jitted = jax.jit(fn, static_argnums=self.static_argnums, keep_unused=True)
        self._works = {}  # signature -> KernelWork (index maps not reading scalar prefetch)
        self._out = {}  # signature -> (flat out avals, out tree)

    def __repr__(self):
        return f"JaxKernel({self.op_name})"

    # (shapes only: register_fake, the output structure)
    def placeholders(self, args):
        out = []
        for i, a in enumerate(args):
            if i in self.static_argnums or not isinstance(a, torch.Tensor):
                out.append(a)
            else:
                out.append(jax.ShapeDtypeStruct(tuple(int(s) for s in a.shape),
                                                _jax_dtype(a.dtype)))
        return out

    def _key(self, args):
        return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else
                     ("static", a) if i in self.static_argnums else (type(a), a)
                     for i, a in enumerate(args))

    def out_avals(self, args):
        key = self._key(args)
        hit = self._out.get(key)
        if hit is None:
            shapes = jax.eval_shape(self.jitted, *self.placeholders(args))
            leaves, tree = jax.tree_util.tree_flatten(shapes)
            hit = self._out[key] = (leaves, tree)
        return hit

    def fake(self, args, device):
        for a in args:
            if isinstance(a, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in a.shape):
                raise RuntimeError(
                    f"{self.op_name}: symbolic sizes reach the default fake kernel (shapes come "
                    "from jax.eval_shape); compile with dynamic=False or register_fake your own")
        leaves, tree = self.out_avals(args)
        outs = [torch.empty(tuple(l.shape), dtype=_torch_dtype(l.dtype), device=device)
                for l in leaves]
        return jax.tree_util.tree_unflatten(tree, outs)

    def work(self, args, host_args) -> _cost.KernelWork:
        key = self._key(args)
        cached = self._works.get(key)
        if cached is not None:
            return cached
        closed = jax.make_jaxpr(self.jitted, static_argnums=self.static_argnums)(
            *self.placeholders(args))
        # (values of small integer arguments: scalar-prefetch operands the index maps read)
        values = [h.numpy() if h is not None and h.numel() <= 4096 and not h.is_floating_point()
                  and not h.is_complex() and h.dtype != torch.bool else None
                  for i, h in enumerate(host_args) if i not in self.static_argnums]
        work = _cost.count(closed, values)
        if not work.data_dependent:
            self._works[key] = work
        return work

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(f"{self.op_name}: pass the kernel's arguments by position")
        for i, a in enumerate(args):
            if i in self.static_argnums:
                if isinstance(a, torch.Tensor):
                    raise ValueError(f"{self.op_name}: argument {i} is static (not a jax.Array) "
                                     "but a tensor was passed")
            elif a is not None and not isinstance(a, torch.Tensor):
                raise TypeError(f"{self.op_name}: argument {i} must be a tensor or None, got "
                                f"{type(a).__name__} (static arguments: annotate them int, "
                                "float, bool or str, or pass static_argnums)")
        devices = {a.device for a in args if isinstance(a, torch.Tensor)}
        tpu = [d for d in devices if d.type == "tpu"]
        if len(devices) > 1:
            raise RuntimeError(f"{self.op_name}: expected all tensors on one device, got "
                               f"{sorted(str(d) for d in devices)}")
        if not tpu:
            return self._run(args, None)
        if _C.dry_run():  # (results without values, charged from the shapes: docs/insight.md)
            work = self.work(args, [None] * len(args))
            _check_vmem(self.op_name, work)
            outs = self.fake(args, tpu[0])
            _C.charge_kernel(self.op_name, work.matmul_rows(), float(work.vpu_units),
                             float(work.hbm_bytes))
            return outs
        scope = _C._ForeignOp()  # noqa: F841  (alive for the call: torchtpu/_custom_ops.py)
        try:
            return self._run(args, tpu[0])
        finally:
            del scope

    def _run(self, args, device):
        host = [(_C.host_view(a) if device is not None else a)
                if isinstance(a, torch.Tensor) else None for a in args]
        jargs = []
        for i, (a, h) in enumerate(zip(args, host)):
            if h is None:
                jargs.append(a)
                continue
            if not h.is_contiguous():
                h = h.contiguous()
            jargs.append(jax.dlpack.from_dlpack(h) if h.numel() else
                         jnp.zeros(tuple(h.shape), _jax_dtype(h.dtype)))
        if device is not None:
            work = self.work(args, host)
            _check_vmem(self.op_name, work)
        leaves, tree = _interpret(self.op_name, lambda: self.jitted(*jargs))
        outs = []
        donated = [args[i] for i in self.donate_argnums
                   if i < len(args) and isinstance(args[i], torch.Tensor)]
        for leaf in leaves:
            cpu = torch.from_dlpack(leaf) if leaf.size else torch.empty(
                tuple(leaf.shape), dtype=_torch_dtype(leaf.dtype))
            if device is None:
                outs.append(cpu.clone())
                continue
            out = torch.empty(tuple(cpu.shape), dtype=cpu.dtype, device=device)
            target = next((d for d in donated if d.dtype == out.dtype and d.shape == out.shape
                           and d.is_contiguous() and d.storage_offset() == 0
                           and d.untyped_storage().nbytes() == out.untyped_storage().nbytes()),
                          None)
            if cpu.numel():
                _C.host_view(out if target is None else target).copy_(cpu)
            if target is not None:  # (the result, written in the donated memory, takes it)
                _C.swap_memory(out, target)
                donated.remove(target)
            outs.append(out)
        del jargs
        if device is not None:
            _C.charge_kernel(self.op_name, work.matmul_rows(), float(work.vpu_units),
                             float(work.hbm_bytes))
        return jax.tree_util.tree_unflatten(tree, outs)


def _check_vmem(op_name, work):
    if work.vmem_bytes <= 0:
        return
    chip = _C.chip()
    capacity = int(chip["vmem_bytes"])
    limit = min(capacity, work.vmem_limit) if work.vmem_limit else capacity
    if work.vmem_bytes > limit:
        what = (f"its vmem_limit_bytes ({work.vmem_limit} bytes)"
                if work.vmem_limit and work.vmem_limit < capacity else
                f"the {capacity} bytes of VMEM of TPU {chip['name']}")
        raise torch.OutOfMemoryError(
            f"{op_name}: RESOURCE_EXHAUSTED: the kernel needs {work.vmem_bytes} bytes of VMEM "
            f"(its blocks double-buffered, and its scratch), more than {what}; use smaller "
            "blocks")


def _interpret(op_name, call):
    """Runs ``call`` with Pallas calls in TPU interpret mode; returns the flat results, ready.
    Interpret mode's reports (data races, out-of-bounds accesses) become errors naming the op."""
    params = _settings.interpret_params(pltpu)
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as ipc
    printed = io.StringIO()
    with _lock:
        try:
            with pltpu.force_tpu_interpret_mode(params), contextlib.redirect_stdout(printed):
                result = call()
                leaves = jax.tree_util.tree_leaves(result)
                for leaf in leaves:
                    leaf.block_until_ready()
        except Exception as e:
            pltpu.reset_tpu_interpret_mode_state()
            text = str(e)
            if "IndexError" in text or "out of bounds" in text or isinstance(e, IndexError):
                raise KernelIndexError(f"{op_name}: out-of-bounds access reported by Pallas' TPU "
                                       f"interpret mode: {_first_line(text)}") from e
            raise KernelError(f"{op_name}: the kernel failed in Pallas' TPU interpret mode: "
                              f"{_first_line(text)}") from e
        races = getattr(ipc, "races", None)
        if params.detect_races and races is not None and races.races_found:
            report = printed.getvalue().strip()
            pltpu.reset_tpu_interpret_mode_state()
            raise KernelError(f"{op_name}: data race detected by Pallas' TPU interpret mode "
                              f"(detect_races=True):\n{report}")
    return leaves, jax.tree_util.tree_structure(result)


def _first_line(text: str) -> str:
    lines = [l for l in text.splitlines() if l.strip()]
    for l in lines:
        if "Error" in l:
            return l.strip()
    return lines[0].strip() if lines else text
