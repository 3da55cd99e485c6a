"""A Pallas TPU kernel as a PyTorch op on "tpu", developed on a CPU (docs/custom-kernels.md).

1. writes a fused "matmul + bias + ReLU" kernel in Pallas: a grid of (M/bm, N/bn, K/bk) blocks,
   bf16 operands, a float32 accumulator in VMEM, the bias and ReLU applied at the last K step;
2. registers it with ``torchtpu.pallas.jax_op`` and calls it on tpu tensors: it runs in Pallas'
   TPU interpret mode (TPU semantics, on the CPU) over the tensors' device memory;
3. checks it against PyTorch on the CPU, eagerly and inside ``torch.compile(backend="tpu")``;
4. prints its estimated time on each TPU generation (the cost model prices the launch from the
   kernel's grid and block specs) next to the roofline, for two block sizes.

    python examples/pallas_kernel.py [--size 1024]
"""
from __future__ import annotations

import argparse
import functools

import torch

import torchtpu
from torchtpu import pallas

import jax  # noqa: E402  (needs: pip install "jax[cpu]==0.10.2"; scripts/setup.sh installs it)
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402


def _kernel(x_ref, w_ref, b_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = jnp.maximum(acc_ref[...] + b_ref[...], 0.0)


def linear_relu(x: jax.Array, w: jax.Array, b: jax.Array, *, block: int = 128) -> jax.Array:
    (M, K), (_, N) = x.shape, w.shape
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            grid=(M // block, N // block, K // block),
            in_specs=[pl.BlockSpec((block, block), lambda i, j, k: (i, k)),
                      pl.BlockSpec((block, block), lambda i, j, k: (k, j)),
                      pl.BlockSpec((1, block), lambda i, j, k: (0, j))],
            out_specs=pl.BlockSpec((block, block), lambda i, j, k: (i, j)),
            scratch_shapes=[pltpu.VMEM((block, block), jnp.float32)]),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, w, b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1024)
    n = ap.parse_args().size
    torch.manual_seed(0)
    x = torch.randn(n, n).bfloat16()
    w = (torch.randn(n, n) / n ** 0.5).bfloat16()
    b = torch.randn(1, n)
    reference = torch.relu(x.float() @ w.float() + b)  # (bf16 products, float32 sums)

    ops = {blk: pallas.jax_op(f"example::linear_relu_{blk}",
                              functools.partial(linear_relu, block=blk))
           for blk in (128, 512) if n % blk == 0}
    op = ops[min(ops)]
    out = op(x.tpu(), w.tpu(), b.tpu())
    torch.testing.assert_close(out.cpu(), reference, rtol=1e-5, atol=1e-4)
    print(f"eager: matches PyTorch on the CPU (max |diff| "
          f"{(out.cpu() - reference).abs().max().item():.2e})")

    @torch.compile(backend="tpu", dynamic=False)
    def layer(a, c, d):
        return op(a, c, d) * 0.5 + 1.0

    out = layer(x.tpu(), w.tpu(), b.tpu())
    torch.testing.assert_close(out.cpu(), reference * 0.5 + 1.0, rtol=1e-5, atol=1e-4)
    print("torch.compile(backend=\"tpu\"): matches too (the kernel is one op of the graph)")

    flops = 2 * n ** 3
    min_bytes = 2 * n * n * 2 + n * 4 + n * n * 4
    chips = {c["name"]: c for c in torchtpu._C.all_chips()}
    print(f"\nestimated time of one call (cost model, from the grid and block specs), "
          f"{n}x{n}x{n}:")
    print(f"{'chip':5} " + "".join(f"{f'blocks {blk}':>22}" for blk in ops) + f"{'roofline':>12}")
    estimates = {}
    for blk, kernel in ops.items():
        torchtpu.metrics.reset()
        kernel(x.tpu(), w.tpu(), b.tpu())
        estimates[blk] = {c: torchtpu.metrics.estimate(chip=c) for c in chips}
    for name, spec in chips.items():
        roofline = max(flops / spec["bf16_flops"], min_bytes / spec["hbm_bytes_per_s"])
        cells = "".join(f"{e[name]['device_time_s'] * 1e6:>12.1f} us ({e[name]['bottleneck']:>4})"
                        for e in estimates.values())
        print(f"{name:5} {cells}{roofline * 1e6:>9.1f} us")


if __name__ == "__main__":
    main()
