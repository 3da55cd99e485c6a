"""The kernels of benchmarks/calibration_model.py's step that are charged from Python through
torchtpu's kernel-pricing API (``_C.charge_kernel``), and the checkpoint names they read: the
quantized matmuls (MaxText's int8 / fp8), MaxText's grouped matmul for dropless MoE, and the
extra work of splash attention's unfused backward."""
from __future__ import annotations

import contextlib
import math
import typing

import torch
from torch.utils.checkpoint import CheckpointPolicy

from torchtpu import _C

if typing.TYPE_CHECKING:
    from calibration_model import Run


# --- remat by checkpoint name ------------------------------------------------------------------

_NAME: list[str] = [""]
_SAVED: list[frozenset] = [frozenset()]  # the names the running step's remat policy saves


@contextlib.contextmanager
def named(name: str):
    """MaxText's checkpoint_name: the values computed inside carry `name`."""
    _NAME.append(name)
    try:
        yield
    finally:
        _NAME.pop()


def _policy(saved: frozenset, ctx, op, *args, **kwargs):
    return (CheckpointPolicy.MUST_SAVE if _NAME[-1] in saved
            else CheckpointPolicy.PREFER_RECOMPUTE)


# --- dense layers --------------------------------------------------------------------------------

def _padded(rows: int, cols: int, element_bytes: int) -> float:
    """Bytes of a [rows, cols] array in HBM, padded to the memory tiles (sim/CostModel.cpp)."""
    sublanes = 8 * max(1, 4 // element_bytes)
    return (-(-rows // sublanes) * sublanes) * (-(-cols // 128) * 128) * float(element_bytes)


_RATE = {"int8": 1, "fp8": 2}  # (sim::MxuRate)


def _quantized_mm(a: torch.Tensor, b: torch.Tensor, mode: str) -> torch.Tensor:
    """a @ b as MaxText's quantized dot computes it: one fused kernel (XLA fuses the operands'
    quantization into the dot), charged through torchtpu's kernel-pricing API as a Pallas kernel
    is: the bf16 operands read from HBM (int8: twice, a pass for their per-row / per-column
    absolute maximum, AQT's dynamic scales; fp8: once, qwix's static scales), quantized on the
    VPU (int8: abs, max, scale, round and convert, 4 operations per element; fp8: scale and
    convert, 2), the matmul at the dtype's rate, the result dequantized (a scale per row and
    column, 2 operations per element) and written in bf16. The result is a new tensor (a dry
    run's: no values)."""
    M, K = a.shape
    N = b.shape[1]
    out = a.new_empty((M, N))
    if _NAME[-1] in _SAVED[0] and torch._C._current_graph_task_id() != -1:
        return out  # a saved value the recomputation takes from the checkpoint: not run again
    reads = 2 if mode == "int8" else 1
    per_element = 4 if mode == "int8" else 2
    operands = _padded(M, K, 2) + _padded(K, N, 2)
    _C.charge_kernel(f"{mode}_dot (fused quantization)", [[1, M, K, N, 1, 1, _RATE[mode]]],
                     per_element * math.ceil((M * K + K * N) / 1024) + 2 * math.ceil(M * N / 1024),
                     reads * operands + _padded(M, N, 2))
    return out


class _QuantLinear(torch.autograd.Function):
    """y = x @ w.T with the forward and both gradients' matmuls in int8 or fp8 (MaxText's int8:
    AQT with forward, dlhs and drhs bits 8; fp8_full: qwix, forward and backward in fp8)."""

    @staticmethod
    def forward(ctx, x2, w, mode):
        ctx.save_for_backward(x2, w)
        ctx.mode = mode
        return _quantized_mm(x2, w.t(), mode)

    @staticmethod
    def backward(ctx, g):
        x2, w = ctx.saved_tensors
        return _quantized_mm(g, w, ctx.mode), _quantized_mm(g.t(), x2, ctx.mode), None


# --- MoE grouped matmul ---------------------------------------------------------------------------

_TILES: dict = {}


def _gmm_tiles(rows: int, groups: int, tm: int, visit_empty: bool) -> int:
    """The m-tiles of tm rows that megablox's grouped matmul computes over `rows` rows sorted into
    `groups` groups (make_group_metadata in MaxText's kernels/megablox/backend.py and tokamax's
    ragged_dot/pallas_mosaic_tpu_kernel.py): each group's rows are rounded out to whole tiles, so
    a tile that a group boundary falls in is computed once for each of its groups (between
    rows / tm and rows / tm + groups - 1 tiles); tgmm (the weights' gradient) also visits one
    tile per empty group. The group sizes are one seeded draw of uniform random routing: the
    measured runs route at random (use_random_routing) or by an untrained router on random
    tokens, and a boundary falls on a tile edge once in tm."""
    key = (rows, groups, tm, visit_empty)
    if key not in _TILES:
        import numpy as np
        sizes = np.random.default_rng(0).multinomial(rows, [1.0 / groups] * groups)
        ends = np.cumsum(sizes)
        starts = ends - sizes
        tiles = -(-ends // tm) - starts // tm
        _TILES[key] = int(np.where(sizes == 0, 1 if visit_empty else 0, tiles).sum())
    return _TILES[key]


def _charge_gmm(op: str, rows: int, groups: int, K: int, N: int, run: Run, tgmm: bool) -> None:
    """One grouped matmul of each of the chip's devices, as the Pallas kernel runs it: every
    visited tile's full tm x K x N product on the MXU; gmm's grid (n tiles, visits, k tiles)
    fetches an lhs block and a weight block at every step (Pallas fetches a block again when its
    index changes from the previous step: with more than one k tile, the weights of a group
    again at each of its tiles) and writes each visit's output tile; tgmm's grid (n tiles,
    k tiles, visits) fetches the lhs and output-gradient blocks at every step and writes each
    group's K x N gradient."""
    tm, tk, tn = run.gmm
    per_device = rows // run.devices
    visits = _gmm_tiles(per_device, groups, tm, tgmm) * run.devices
    M = visits * tm
    if tgmm:
        hbm = (math.ceil(N / tn) * M * K + math.ceil(K / tk) * M * N
               + run.devices * groups * K * N) * 2.0
    else:
        weights = visits if K > tk else run.devices * groups
        hbm = (math.ceil(N / tn) * M * K + weights * K * N + M * N) * 2.0
    _C.charge_kernel(op, [[1, M, K, N, 1, 2, 0]], math.ceil(M * N / 1024), hbm)


class _GroupedMatmul(torch.autograd.Function):
    """x[e] @ w[e] for each expert e through the grouped matmul (``Run.gmm``): the forward and
    the input's gradient are gmm, the weights' gradient tgmm (MaxText's megablox ops.py). The
    tensors keep the balanced [experts, rows, dim] layout; the charge is the kernel's tiles."""

    @staticmethod
    def forward(ctx, x, w, run):
        ctx.save_for_backward(x, w)
        ctx.run = run
        E, rows, K = x.shape
        out = x.new_empty((E, rows, w.shape[2]))
        if _NAME[-1] in _SAVED[0] and torch._C._current_graph_task_id() != -1:
            return out  # a saved value the recomputation takes from the checkpoint
        _charge_gmm("gmm", E * rows, E, K, w.shape[2], run, tgmm=False)
        return out

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        E, rows, K = x.shape
        N = w.shape[2]
        _charge_gmm("gmm (input gradient)", E * rows, E, N, K, ctx.run, tgmm=False)
        _charge_gmm("tgmm (weight gradient)", E * rows, E, K, N, ctx.run, tgmm=True)
        return x.new_empty(x.shape), w.new_empty(w.shape), None


class _UnfusedAttentionBackward(torch.autograd.Function):
    """Identity on the attention's output whose backward charges what splash attention's unfused
    backward (sa_use_fused_bwd_kernel=False: a dQ kernel and a dK/dV kernel) computes beyond the
    fused one: the dK/dV kernel forms the scores S = QK^T and dP = dO V^T again over the causal
    key blocks (blocks of ``block`` queries and keys: (n + 1) / 2n of them for n blocks) and
    reads Q, K, V and dO again."""

    @staticmethod
    def forward(ctx, o, q, k, v, block):
        ctx.shapes = (q.shape, k.shape, v.shape)
        ctx.block = block
        return o.view_as(o)

    @staticmethod
    def backward(ctx, g):
        (B, H, L, E), (_, Hk, S, _), (_, _, _, Ev) = ctx.shapes
        n = math.ceil(L / ctx.block)
        keys = math.ceil(S * (n + 1) / (2 * n))
        scores = B * H * L * keys
        hbm = 2.0 * (B * H * L * (E + Ev) + B * Hk * S * (E + Ev))
        _C.charge_kernel("splash attention dK/dV kernel: S and dP again (unfused backward)",
                         [[B * H, L, E, keys, 1, 2, 0], [B * H, L, Ev, keys, 1, 2, 0]],
                         4 * math.ceil(scores / 1024), hbm)
        return g, None, None, None, None
