"""TorchTPU's printing helpers, written for torchtpu: one-line and multi-line tensor summaries,
a lazily formatted description of call inputs, the memory a model's weights need, and
``format_model`` (the model, its parameter and memory counts, the ATen ops its forward pass
runs)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch.utils import _pytree

from torch_tpu._internal.utils.tracers import OpTracer

__all__ = ["InputMetadata", "format_model", "format_tensor", "get_tensor_summary",
           "model_memory"]


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _statistics(t: torch.Tensor) -> tuple[float, float, float, float] | None:
    """Min, max, mean and population variance of ``t``'s values, read on the host; None for an
    empty tensor. Complex values are summarized by their magnitudes, integers and booleans as
    float64."""
    if t.numel() == 0:
        return None
    host = t.detach().to("cpu")
    if host.is_complex():
        host = host.abs()
    host = host.to(torch.float64)
    return (host.min().item(), host.max().item(), host.mean().item(),
            host.var(correction=0).item())


def get_tensor_summary(tensor: torch.Tensor, data: bool = True) -> str:
    """One line about ``tensor``: shape, dtype, device, whether it requires grad and, when
    ``data`` is true, the min, max, mean and variance (population variance: of the values
    themselves) of its elements, copied to the host to compute them. Raises TypeError for
    anything that is not a tensor."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"get_tensor_summary takes a torch.Tensor, got {type(tensor).__name__}")
    head = f"{tuple(tensor.shape)} {_dtype_name(tensor.dtype)} {tensor.device}"
    grad = "grad:Y" if tensor.requires_grad else "grad:N"
    if not data:
        return f"Tensor({head}{', requires_grad' if tensor.requires_grad else ''})"
    stats = _statistics(tensor)
    if stats is None:
        return f"{head} {grad}  (no elements)"
    lo, hi, mean, var = stats
    return f"{head} {grad}  min {lo:.4g}  max {hi:.4g}  mean {mean:.4g}  var {var:.4g}"


def format_tensor(tensor: torch.Tensor, desc: str = "", data: bool = False) -> str:
    """Several lines about ``tensor``: shape, rank, dtype, device, layout, strides, bytes,
    autograd state, value statistics and, when ``data`` is true, the values themselves (copied
    to the host). Anything that is not a tensor gives a one-line error string instead."""
    if not isinstance(tensor, torch.Tensor):
        return f"Error: format_tensor takes a torch.Tensor, got {type(tensor).__name__}"
    stats = _statistics(tensor)
    fields = [
        ("shape", tuple(tensor.shape)),
        ("dims", tensor.dim()),
        ("dtype", _dtype_name(tensor.dtype)),
        ("device", tensor.device),
        ("layout", tensor.layout),
        ("strides", tensor.stride() if tensor.layout == torch.strided else "n/a"),
        ("bytes", tensor.nbytes),
        ("requires grad", tensor.requires_grad),
        ("is leaf", tensor.is_leaf),
        ("grad fn", type(tensor.grad_fn).__name__ if tensor.grad_fn is not None else "none"),
    ]
    if stats is not None:
        fields += list(zip(("min", "max", "mean", "var"), (f"{v:.4g}" for v in stats)))
    lines = [desc] if desc else []
    lines += [f"{key + ':':<15}{value}" for key, value in fields]
    if data:
        lines.append(str(tensor.detach().to("cpu")))
    return "\n".join(lines)


class InputMetadata:
    """The inputs of a call, described without reading any tensor's values (no copy from the
    device): each tensor prints as its shape, dtype and device. The text is made when the object
    is formatted, so passing one to a logging call that is filtered out costs nothing."""

    def __init__(self, inputs: Any):
        self._inputs = inputs if isinstance(inputs, (list, tuple)) else [inputs]

    def __str__(self) -> str:
        described = _pytree.tree_map_only(
            torch.Tensor, lambda t: _Described(get_tensor_summary(t, data=False)),
            list(self._inputs))
        return str(described)

    __repr__ = __str__


class _Described:
    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def model_memory(model: torch.nn.Module, dtype: torch.dtype = torch.float32) -> float:
    """An estimate, in GiB, of the memory ``model`` needs to train: every parameter, a gradient
    for each one that requires grad, and every buffer, all at ``dtype``'s element size (the
    model's own dtypes are not consulted)."""
    weights = sum(p.numel() * (2 if p.requires_grad else 1) for p in model.parameters())
    weights += sum(b.numel() for b in model.buffers())
    element = torch.empty((), dtype=dtype).element_size()
    return weights * element / 1024**3


def _stored_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _trace_function(fn: Callable[..., Any], inputs: Sequence[Any]) -> torch.fx.GraphModule:
    """An FX graph of ATen ops for a plain function, traced on fake tensors (nothing runs on the
    device), or on the inputs themselves when fake tracing cannot follow the function."""
    from torch.fx.experimental.proxy_tensor import make_fx
    try:
        return make_fx(fn, tracing_mode="fake")(*inputs)
    except Exception:  # (data-dependent control flow, ops without a meta kernel)
        return make_fx(fn, tracing_mode="real")(*inputs)


def format_model(model: torch.nn.Module | Callable[..., Any], *input_tensors: Any,
                 params: bool = False, pt: bool = False, aten: bool = False,
                 shlo: bool = False) -> str:
    """A description of ``model`` (a module, or a function of tensors, first traced into an FX
    graph of ATen ops) as a string, with the parts asked for:

    - ``params``: the number of parameters (and trainable ones), buffers, the bytes they take
      as stored, and model_memory's training estimate;
    - ``pt``: PyTorch's own printout of the module (an FX graph's readable code);
    - ``aten``: the ATen ops one call ``model(*input_tensors)`` runs, counted per op (an
      OpTracer that keeps metadata only);
    - ``shlo``: the forward pass as StableHLO text: one call recorded in fused eager and
      written by ``torch_tpu._internal.sync.computation_mlir`` (text to read: nothing compiles
      it; ops without a StableHLO form are ``custom_call``s).
    """
    if not isinstance(model, torch.nn.Module):
        if not callable(model):
            raise TypeError(f"format_model takes a module or a function, got "
                            f"{type(model).__name__}")
        model = _trace_function(model, input_tensors)
    parts = []
    if params:
        parameters = list(model.parameters())
        buffers = list(model.buffers())
        total = sum(p.numel() for p in parameters)
        trainable = sum(p.numel() for p in parameters if p.requires_grad)
        dtypes = sorted({_dtype_name(t.dtype) for t in parameters + buffers})
        devices = sorted({str(t.device) for t in parameters + buffers})
        stored = _stored_bytes(parameters) + _stored_bytes(buffers)
        parts.append(
            f"Parameters: {total} ({trainable} trainable), buffer elements: "
            f"{sum(b.numel() for b in buffers)}\n"
            f"Stored: {stored / 1024**2:.3f} MiB as {', '.join(dtypes) or 'nothing'} on "
            f"{', '.join(devices) or 'no device'}\n"
            f"Training estimate (model_memory: weights, their gradients and buffers at "
            f"float32): {model_memory(model):.3f} GiB")
    if pt:
        if isinstance(model, torch.fx.GraphModule):
            parts.append(model.print_readable(print_output=False).rstrip("\n"))
        else:
            parts.append(str(model))
    if aten:
        with OpTracer(values=False) as tracer:
            model(*input_tensors)
        parts.append(f"ATen ops of one call ({tracer.num_atens()} calls):\n{tracer._pformat()}")
    if shlo:
        from torch_tpu._internal import execution_mode, sync
        with execution_mode.eager_mode(execution_mode.EagerMode.INTERNAL_DEFER_ALL):
            results = model(*input_tensors)
            parts.append(sync.computation_mlir(results).rstrip("\n"))
    return "".join(part + "\n" for part in parts)
