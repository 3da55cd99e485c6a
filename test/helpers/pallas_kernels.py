"""The Pallas and JAX kernels of test_pallas_*.py (docs/custom-kernels.md), each a JAX function with
TorchTPU's annotations, registered once per process as an op of the namespace ``tpk``; the blocked
matmul and flash attention are also benchmarks/pallas_kernels.py's."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import flash_attention as jax_flash

from torchtpu import pallas


# --- an element-wise kernel (one block: the whole array)
def _axpy_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = 2.0 * x_ref[...] + y_ref[...]


def axpy(x: jax.Array, y: jax.Array) -> jax.Array:
    return pl.pallas_call(_axpy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


# --- a blocked matmul with a VMEM accumulator: bf16 in, float32 out; square blocks of `block`
# (the benchmark binds 128 and 512 with functools.partial)
def _matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...]


def blocked_matmul(x: jax.Array, y: jax.Array, *, block: int = 128) -> jax.Array:
    (M, K), (_, N) = x.shape, y.shape
    b = block
    return pl.pallas_call(
        _matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(M // b, N // b, K // b),
            in_specs=[pl.BlockSpec((b, b), lambda i, j, k: (i, k)),
                      pl.BlockSpec((b, b), lambda i, j, k: (k, j))],
            out_specs=pl.BlockSpec((b, b), lambda i, j, k: (i, j)),
            scratch_shapes=[pltpu.VMEM((b, b), jnp.float32)]),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


# --- scalar prefetch: rows gathered by indices the index map reads
def _gather_kernel(idx_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * 1.0


def gather_rows(idx: jax.Array, x: jax.Array) -> jax.Array:
    n, (_, d) = idx.shape[0], x.shape
    return pl.pallas_call(
        _gather_kernel,
        out_shape=jax.ShapeDtypeStruct((n, 8, d), x.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(n,),
            in_specs=[pl.BlockSpec((8, d), lambda i, idx_ref: (idx_ref[i], 0))],
            out_specs=pl.BlockSpec((None, 8, d), lambda i, idx_ref: (i, 0, 0))),
    )(idx, x)


# --- donation: the result has the donated argument's size
def _scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0


def scale3(x: jax.Array) -> jax.Array:
    return pl.pallas_call(_scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


# --- JAX's own flash attention (Pallas TPU), forward and its VJP
def flash(q: jax.Array, k: jax.Array, v: jax.Array, sm_scale: float) -> jax.Array:
    return jax_flash.flash_attention(q, k, v, sm_scale=sm_scale)


def flash_bwd(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array,
              sm_scale: float) -> tuple[jax.Array, jax.Array, jax.Array]:
    _, vjp = jax.vjp(functools.partial(jax_flash.flash_attention, sm_scale=sm_scale), q, k, v)
    return vjp(g)


# --- a JAX function without Pallas: population count of uint32 words
def popcount(x: jax.Array) -> jax.Array:
    return jax.lax.population_count(x)


# --- a data race: the kernel reads the buffer its DMA is still writing
def _racy_kernel(x_hbm, o_ref, buf, sem):
    copy = pltpu.make_async_copy(x_hbm, buf, sem)
    copy.start()
    o_ref[...] = buf[...] + 1.0
    copy.wait()


def racy(x: jax.Array) -> jax.Array:
    return pl.pallas_call(
        _racy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA])(x)


# --- VMEM over the chip's: one block of 96 MiB (x2 buffers) on a chip of 64-128 MiB
def huge_block(x: jax.Array) -> jax.Array:
    return pl.pallas_call(_scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


# --- a linear layer's forward and backward (an autograd rule for training)
def linear_fwd(x: jax.Array, w: jax.Array) -> jax.Array:
    return blocked_matmul_f32(x, w)


def blocked_matmul_f32(x, w):
    def kernel(x_ref, w_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32,
                             precision=jax.lax.Precision.HIGHEST)
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(
        (x.shape[0], w.shape[1]), jnp.float32))(x, w)


def linear_bwd(g: jax.Array, x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
    return blocked_matmul_f32(g, w.T), blocked_matmul_f32(x.T, g)


_ops = {}


def op(name: str, **kwargs):
    """The ``jax_op`` of this module's function ``name`` (registered at the first ask)."""
    key = (name, tuple(sorted(kwargs.items())))
    if key not in _ops:
        suffix = "_donated" if kwargs.get("donate_argnums") else ""
        _ops[key] = pallas.jax_op(f"tpk::{name}{suffix}", globals()[name], **kwargs)
    return _ops[key]
