"""TorchTPU's two tracers, written for torchtpu: ``OpTracer`` (every ATen op run in a block, with
its tensors' metadata and, by default, host copies of their values) and ``ActivationTracer``
(every module's inputs and outputs through forward and backward hooks). Formatting, replaying on
another device and comparing a replay are in tracer_utils.py."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from typing import Any, Callable, MutableSequence

import torch
from torch.utils import _pytree
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["ActivationTracer", "Event", "OpTracer", "TensorMeta"]

# One record of a tracer: a plain dict, so programs can read and add keys as they like.
Event = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class TensorMeta:
    """What a tracer keeps of a tensor whose values it does not copy: shape, dtype, device and
    strides. ``str()`` gives the compact form the reports print, ``float32[3, 8] tpu:0``."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: str
    stride: tuple[int, ...] | None

    @classmethod
    def of(cls, t: torch.Tensor) -> "TensorMeta":
        try:
            stride = tuple(t.stride())
        except RuntimeError:  # (sparse and other layouts without strides)
            stride = None
        return cls(tuple(t.shape), t.dtype, str(t.device), stride)

    def __str__(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        return f"{dtype}[{', '.join(str(s) for s in self.shape)}] {self.device}"


def _has_values(t: torch.Tensor) -> bool:
    """False for tensors whose elements cannot be read: meta tensors, fake tensors (make_fx's
    fake tracing, torch.compile's), and other wrapper subclasses."""
    if t.is_meta or type(t) not in (torch.Tensor, torch.nn.Parameter):
        return False
    return t.layout == torch.strided


def _host_copy(t: torch.Tensor) -> torch.Tensor | TensorMeta:
    """A detached host copy of ``t`` (a new tensor even when ``t`` is on the CPU, so later
    in-place ops on ``t`` do not reach it), or its metadata when its values cannot be read."""
    if not _has_values(t):
        return TensorMeta.of(t)
    return t.detach().to("cpu", copy=True)


def _tensor_metas(tree: Any) -> list[TensorMeta]:
    return [TensorMeta.of(t) for t in _pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _first_device(*trees: Any) -> str | None:
    for tree in trees:
        for leaf in _pytree.tree_leaves(tree):
            if isinstance(leaf, torch.Tensor):
                return str(leaf.device)
    return None


class OpTracer(TorchDispatchMode, contextlib.ContextDecorator):
    """Records every op dispatched while it is active (a context manager, or a decorator: each
    entry starts a new record). It sits below autograd, so it sees the ATen ops that actually
    run, on every device, backward included.

    After the block:

    - ``ops_log``: namespace -> {op name: calls}, names in order of first call (TorchTPU's form:
      ``ops_log["aten"]["aten.addmm.default"] == 2``).
    - ``log``: one Event per call, in order: ``idx``, ``op`` (the OpOverload), ``name``,
      ``device`` (of its first tensor), ``inputs`` / ``outputs`` (TensorMeta of each tensor),
      ``args`` / ``kwargs`` (as passed, tensors replaced by host copies taken before the op ran)
      and ``output`` (host copies of what it returned), ``time`` (seconds, host clock), and
      ``error`` when the op raised (the exception is re-raised).

    By default (``values=False``, as TorchTPU's tracer, which counts ops only) the events hold
    metadata only (TensorMeta in place of the copies): no copy to the host, no wait for the
    device, memory that does not grow with the tensors. ``values=True`` keeps host copies of
    every op's inputs and outputs, which ``tracer_utils.replay_log(tracer.log, "cpu")`` reruns on
    another device: the copies of a large model's every op take as much host memory as all its
    intermediate tensors together (a Llama-3.2-1B forward over 1,024 tokens needs more than this
    24 GiB host), and copying makes the host wait for each op (in fused eager it materializes
    each op's inputs and outputs), which changes what fuses but not the values.
    """

    def __init__(self, values: bool = False):
        super().__init__()
        self.values = values
        self.ops_log: dict[str, dict[str, int]] = collections.defaultdict(dict)
        self.log: list[Event] = []

    def __enter__(self):
        self.ops_log = collections.defaultdict(dict)
        self.log = []
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        counts = self.ops_log[func.namespace]
        counts[name] = counts.get(name, 0) + 1
        snap = _host_copy if self.values else TensorMeta.of
        event: Event = {
            "idx": len(self.log), "op": func, "name": name,
            "device": _first_device(args, kwargs),
            "inputs": _tensor_metas((args, kwargs)),
            "args": _pytree.tree_map_only(torch.Tensor, snap, args),
            "kwargs": _pytree.tree_map_only(torch.Tensor, snap, kwargs),
            "time": time.perf_counter(),
        }
        self.log.append(event)
        try:
            out = func(*args, **kwargs)
        except Exception as e:
            event["error"] = e
            raise
        if event["device"] is None:
            event["device"] = _first_device(out)
        event["outputs"] = _tensor_metas(out)
        event["output"] = _pytree.tree_map_only(torch.Tensor, snap, out)
        return out

    def num_atens(self) -> int:
        """How many ATen op calls were recorded."""
        return sum(self.ops_log.get("aten", {}).values())

    def op_names(self) -> list[str]:
        """The name of every recorded call, in order (``"aten.t.default"``, ...)."""
        return [e["name"] for e in self.log]

    def _pformat(self) -> str:
        """The calls per op, by namespace, each op with the devices its tensors were on (an
        ``aten._to_copy`` between tpu and cpu is a copy across the host link)."""
        devices: dict[str, list[str]] = {}
        for e in self.log:
            seen = devices.setdefault(e["name"], [])
            for m in e["inputs"] + e.get("outputs", []):
                if m.device not in seen:
                    seen.append(m.device)
        lines = []
        for namespace in sorted(self.ops_log):
            ops = self.ops_log[namespace]
            if not ops:  # (a caller emptied it: TorchTPU's trace_ops subtracts one log from another)
                continue
            lines.append(f"namespace '{namespace}': {sum(ops.values())} calls of "
                         f"{len(ops)} distinct ops")
            width = max(len(op) for op in ops)
            for op, calls in ops.items():
                where = ", ".join(devices.get(op, [])) or "no tensors"
                lines.append(f"  {op:<{width}}  x{calls:<4} on {where}")
        return "\n".join(lines) if lines else "no ops recorded"


class _Hook:
    """A tracer's hook on one module. A deep copy of the module (tracer_utils.replay_log copies
    modules) gets a hook that does nothing, not a copy of the tracer and its records."""

    __slots__ = ("fn", "depth", "name")

    def __init__(self, fn: Callable[..., None], depth: int, name: str):
        self.fn, self.depth, self.name = fn, depth, name

    def __call__(self, module, *args, **kwargs):
        self.fn(module, *args, depth=self.depth, name=self.name, **kwargs)

    def __deepcopy__(self, memo):
        return _inert_hook


def _inert_hook(*args, **kwargs) -> None:
    return None


def _versions(tree: Any) -> tuple[int, ...]:
    return tuple(t._version for t in _pytree.tree_leaves(tree) if isinstance(t, torch.Tensor))


class ActivationTracer(contextlib.ContextDecorator):
    """Records what every module of ``model`` (itself and all its submodules, each once even when
    shared) receives and returns while the tracer is active, through forward hooks and, when
    ``backward`` is true, full backward hooks.

    Four logs of Events (each a dict with ``module``, ``name`` (its qualified name in the model,
    ``""`` for the model), ``depth`` (0 for the model; the children of a ModuleList or
    ModuleDict sit at the container's depth, since containers are never called), ``time`` and
    ``idx`` (one counter over all four logs, in the order the hooks ran)):

    - ``forward_pre_log``: before each forward, in call order: ``args``, ``kwargs``.
    - ``forward_log``: after each forward (children before their parent): ``args``, ``kwargs``,
      ``output``, ``device`` (of its first output tensor, else input) and (without
      ``snapshot``) ``versions``: the tensors' version counters when
      recorded, so tracer_utils.pformat_replay notices a value changed in place later (by
      ``ReLU(inplace=True)``, say).
    - ``backward_pre_log``: ``grad_output``; ``backward_log``: ``grad_input``, ``grad_output``.

    Tensors are kept as they are (on their device, alive until the tracer goes) unless
    ``snapshot`` is true, which stores detached host copies instead (made when the hook runs,
    so later in-place changes do not reach them; a forward event's ``args`` and ``kwargs`` are
    then the copies made before the call, as the module received them). Full backward hooks
    cannot be combined with in-place ops on a module's output in a graph that requires grad
    (PyTorch refuses); ``backward=False`` leaves them out.
    """

    forward_pre_log: MutableSequence[Event]
    forward_log: MutableSequence[Event]
    backward_pre_log: MutableSequence[Event]
    backward_log: MutableSequence[Event]

    def __init__(self, model: torch.nn.Module, *, backward: bool = True, snapshot: bool = False):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"ActivationTracer traces a torch.nn.Module, got {type(model).__name__}")
        self._model = model
        self._backward = backward
        self._snapshot = snapshot
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self._idx = 0
        self._open: list[Event] = []  # forward-pre events of the calls still running
        self.forward_pre_log = []
        self.forward_log = []
        self.backward_pre_log = []
        self.backward_log = []

    def _keep(self, tree: Any) -> Any:
        if not self._snapshot:
            return tree
        return _pytree.tree_map_only(torch.Tensor, _host_copy, tree)

    def _record(self, log: MutableSequence[Event], module, depth: int, name: str, **values):
        event: Event = {"module": module, "name": name, "depth": depth}
        event.update(values)
        event["time"] = time.perf_counter()
        event["idx"] = self._idx
        self._idx += 1
        log.append(event)

    def _forward_pre(self, module, args, kwargs, *, depth, name):
        self._record(self.forward_pre_log, module, depth, name,
                     args=self._keep(args), kwargs=self._keep(kwargs))
        self._open.append(self.forward_pre_log[-1])

    def _forward(self, module, args, kwargs, output, *, depth, name):
        extra = {"device": _first_device(output, args, kwargs)}
        while self._open and self._open[-1]["module"] is not module:
            self._open.pop()  # (a call inside this one that raised)
        pre = self._open.pop() if self._open else None
        if not self._snapshot:
            extra["versions"] = _versions((args, kwargs, output))
            kept_args, kept_kwargs = args, kwargs
        elif pre is not None:  # (the copies taken before the forward: an in-place module
            kept_args, kept_kwargs = pre["args"], pre["kwargs"]  # changed its inputs since)
        else:
            kept_args, kept_kwargs = self._keep(args), self._keep(kwargs)
        self._record(self.forward_log, module, depth, name, args=kept_args, kwargs=kept_kwargs,
                     output=self._keep(output), **extra)

    def _backward_pre(self, module, grad_output, *, depth, name):
        self._record(self.backward_pre_log, module, depth, name,
                     grad_output=self._keep(grad_output))

    def _backward_post(self, module, grad_input, grad_output, *, depth, name):
        self._record(self.backward_log, module, depth, name, grad_input=self._keep(grad_input),
                     grad_output=self._keep(grad_output))

    def _register(self, module: torch.nn.Module, depth: int, name: str, seen: set[int]) -> None:
        if id(module) in seen:
            return
        seen.add(id(module))
        add = self._handles.append
        add(module.register_forward_pre_hook(_Hook(self._forward_pre, depth, name),
                                             with_kwargs=True))
        add(module.register_forward_hook(_Hook(self._forward, depth, name), with_kwargs=True))
        if self._backward:
            add(module.register_full_backward_pre_hook(_Hook(self._backward_pre, depth, name)))
            add(module.register_full_backward_hook(_Hook(self._backward_post, depth, name)))
        containers = (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.ParameterList,
                      torch.nn.ParameterDict)
        child_depth = depth if isinstance(module, containers) else depth + 1
        for child_name, child in module.named_children():
            self._register(child, child_depth, f"{name}.{child_name}" if name else child_name,
                           seen)

    def __enter__(self):
        for log in (self.forward_pre_log, self.forward_log, self.backward_pre_log,
                    self.backward_log):
            log.clear()
        self._idx = 0
        self._open = []
        self._register(self._model, 0, "", set())
        return self

    def __exit__(self, *exc) -> bool:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        return False
