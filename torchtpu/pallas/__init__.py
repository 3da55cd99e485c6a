"""Pallas and JAX kernels as PyTorch ops on "tpu" (docs/custom-kernels.md).

``jax_op(name, fn)`` wraps a JAX function (typically one calling ``pl.pallas_call``) as a
``torch.library`` custom op: eager in every mode, under ``torch.compile(backend="tpu")``, with
``register_fake`` from ``jax.eval_shape`` and ``register_autograd`` as for any custom op. The
kernel runs on the CPU in Pallas' TPU interpret mode, over the tensors' device memory, and each
call is one launch in the ledger, priced from its grid and block specs (``_cost.py``).

JAX is optional: this module imports it at the first ``jax_op`` / ``custom_jax_kernel`` /
``custom_kernel`` (``import torchtpu`` never does); without it they raise an ImportError that says
what to install. TorchTPU's module path ``torch_tpu._internal.pallas`` re-exports these names.
"""
from __future__ import annotations

import functools
import typing
import warnings

import torch

from ._settings import interpret_checks  # noqa: F401

__all__ = ["jax_op", "custom_jax_kernel", "custom_kernel", "interpret_checks", "kernel_work",
           "KernelError"]

_INSTALL = ("torchtpu.pallas needs JAX (CPU): pip install \"jax[cpu]==0.10.2\" "
            "(scripts/setup.sh installs it)")


def _impl():
    try:
        from . import _op
    except ImportError as e:
        if "jax" in str(e).lower():
            raise ImportError(f"{_INSTALL}; importing it failed: {e}") from e
        raise
    return _op


def __getattr__(name):
    if name in ("KernelError", "KernelIndexError"):
        return getattr(_impl(), name)
    raise AttributeError(f"module 'torchtpu.pallas' has no attribute '{name}'")


def _check_name(name: str) -> None:
    if not isinstance(name, str) or "::" not in name:
        raise ValueError(f"Op name {name} does not contain a namespace.")
    if len(name.split("::")) != 2:
        raise ValueError(f"Op name {name} must have exactly one '::' separator.")


def _shape_result(out, annotation):
    origin = typing.get_origin(annotation)
    if origin is tuple or annotation is tuple:
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)
    if origin is list or annotation is list:
        return list(out) if isinstance(out, (list, tuple)) else [out]
    if isinstance(out, (list, tuple)) and len(out) == 1:
        return out[0]
    return out


def jax_op(name, fn=None, /, *, donate_argnums=None, mesh=None, input_partition_specs=None):
    """Registers the JAX function ``fn`` as the custom op ``name`` ("namespace::op") and returns
    its ``CustomOpDef``; without ``fn``, a decorator.

    ``fn``'s arguments are annotated ``jax.Array`` (tensors), ``int`` / ``float`` / ``bool`` /
    ``str`` (static: part of the specialization) or ``Optional`` of one, its result ``jax.Array`` or
    a tuple / list of them; keyword-only arguments with defaults (``functools.partial``) are bound
    as they are. ``donate_argnums``: arguments whose memory a result of the same size may take (the
    donated tensor then holds that result's discarded buffer: unspecified values; do not use it).
    ``mesh`` / ``input_partition_specs``: a mesh of one device runs as without; a larger one
    raises NotImplementedError (docs/custom-kernels.md, "Meshes").
    """
    _check_name(name)

    def decorate(fn):
        _op = _impl()
        sig, static = _op.torch_signature(fn)
        kernel = _op.JaxKernel(fn, name.split("::")[1], static_argnums=static,
                               donate_argnums=donate_argnums, mesh=mesh,
                               input_partition_specs=input_partition_specs, op_name=name)
        returns = sig.return_annotation

        def positional(args, kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            return list(bound.args)

        def impl(*args, **kwargs):
            return _shape_result(kernel(*positional(args, kwargs)), returns)

        def fake(*args, **kwargs):
            args = positional(args, kwargs)
            device = next((a.device for a in args if isinstance(a, torch.Tensor)), "cpu")
            return _shape_result(kernel.fake(args, device), returns)

        impl.__signature__ = sig
        impl.__name__ = name.split("::")[1]
        impl.__qualname__ = impl.__name__
        op = torch.library.custom_op(name, impl, mutates_args=())
        op.register_fake(fake)
        op._torchtpu_kernel = kernel
        _registered[name] = kernel
        return op

    return decorate if fn is None else decorate(fn)


_registered = {}  # op name -> JaxKernel (the compiled-graph runner finds them here)


def custom_jax_kernel(jax_fn=None, name=None, static_argnums=(), donate_argnums=None,
                      input_output_aliases=None, mesh=None, input_partition_specs=None, *,
                      warn_deprecated=True, **jit_kwargs):
    """TorchTPU's older decorator: a jitted JAX function callable on torch tensors (not a torch
    op: under torch.compile prefer ``jax_op``). Non-tensor arguments go in ``static_argnums``."""
    if warn_deprecated:
        warnings.warn("the use of `custom_jax_kernel` is deprecated and will be removed soon. "
                      "Please use `jax_op` instead.", DeprecationWarning, stacklevel=2)
    if jit_kwargs:
        raise TypeError(f"custom_jax_kernel: jit options {sorted(jit_kwargs)} are not supported "
                        "(the kernel is jitted by torchtpu.pallas)")

    def decorate(fn):
        _op = _impl()
        kname = name or getattr(fn, "__name__", "kernel")
        return _op.JaxKernel(fn, kname, static_argnums=static_argnums,
                             donate_argnums=donate_argnums, mesh=mesh,
                             input_partition_specs=input_partition_specs,
                             input_output_aliases=input_output_aliases)

    return decorate if jax_fn is None else decorate(jax_fn)


def custom_kernel(output_shapes, pallas_kernel=None, **pl_kwargs):
    """TorchTPU's oldest form: a Pallas kernel body and its output shapes (tensors, or a function
    of the arguments returning them), ``pl.pallas_call``'s options in ``pl_kwargs``."""

    def decorate(body):
        _op = _impl()
        import jax
        from jax.experimental import pallas as pl

        @functools.wraps(body)
        def call(*args):
            shapes = output_shapes(*args) if callable(output_shapes) else output_shapes
            single = isinstance(shapes, torch.Tensor)
            leaves = [shapes] if single else list(shapes)
            out_shape = [jax.ShapeDtypeStruct(tuple(t.shape), _op._jax_dtype(t.dtype))
                         for t in leaves]
            fn = pl.pallas_call(body, out_shape=out_shape[0] if single else out_shape,
                                **pl_kwargs)
            kernel = _kernels.get((body, tuple((tuple(t.shape), t.dtype) for t in leaves)))
            if kernel is None:
                kernel = _op.JaxKernel(fn, pl_kwargs.get("name", body.__name__))
                _kernels[(body, tuple((tuple(t.shape), t.dtype) for t in leaves))] = kernel
            return kernel(*args)

        return call

    _kernels = {}
    return decorate if pallas_kernel is None else decorate(pallas_kernel)


def kernel_work(op_or_fn, *args) -> dict:
    """What the cost model charges for one call of a ``jax_op`` (or JAX function) on ``args``
    (tensors, or shapes as tensors on "meta"), without running it: matmuls, VPU units, HBM bytes,
    grid steps, VMEM footprint and the count's approximations (``notes``)."""
    _op = _impl()
    kernel = getattr(op_or_fn, "_torchtpu_kernel", None)
    if kernel is None:
        sig_static = ()
        try:
            _, sig_static = _op.torch_signature(op_or_fn)
        except ValueError:
            pass
        kernel = _op.JaxKernel(op_or_fn, getattr(op_or_fn, "__name__", "kernel"),
                               static_argnums=sig_static)
    host = [a.cpu() if isinstance(a, torch.Tensor) and a.device.type != "meta" else None
            for a in args]
    w = kernel.work(list(args), host)
    return {"matmuls": w.matmul_rows(), "flops": w.flops(), "vpu_units": w.vpu_units,
            "hbm_bytes": w.hbm_bytes, "grid_steps": w.grid_steps, "vmem_bytes": w.vmem_bytes,
            "notes": list(w.notes), "declared": dict(w.declared)}

