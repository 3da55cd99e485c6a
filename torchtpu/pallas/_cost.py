"""What a JAX / Pallas kernel does, counted from its jaxpr for the cost model (docs/custom-kernels.md,
"Pricing").

The count is chip-independent, as every launch's ``Work`` is (docs/design.md 4.3): the matmuls
(batch, M, K, N, passes, operand bytes, rate), VPU units x vregs and tile-padded HBM bytes. The C++
cost model prices it for the chip in force (``_C.charge_kernel``) and the ledger re-prices it for
any other (``torchtpu.metrics.estimate(chip=...)``).

For a ``pallas_call`` the count follows its grid and block specs, as Mosaic's software pipeline
runs it on a TPU:

- every grid step (row-major order, the last grid axis fastest) copies an input block from HBM to
  VMEM when its block index differs from the previous step's, and writes an output block back when
  the next step's index differs (or at the last step): the block indices come from evaluating the
  index maps over the whole grid (with the scalar-prefetch operands' values where they are the
  kernel's own arguments, zeros otherwise); operands left in HBM (``memory_space=ANY``) move only
  through the kernel's own DMAs, which are counted at their copied size;
- the kernel body's work runs once per grid step: each ``dot_general`` is a matmul on the MXU, each
  other array-valued primitive one VPU unit per (8 x 128) vreg of its result (reductions: of their
  operand); loads and stores of refs are free (their own slots on the TPU). A ``pl.when`` /
  ``cond`` is charged as its costliest branch, a ``fori_loop`` of static trip count (a scan) times
  its length, a ``while_loop`` once.

Work outside any ``pallas_call`` (a plain JAX function, or the glue around the kernels) is priced as
one XLA fusion would: its matmuls on the MXU, its other primitives on the VPU, and HBM bytes of the
function's arguments and results when it has no kernel, of the glue's results otherwise.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

import jax
import jax.numpy as jnp
from jax._src import core as jcore  # (eval_jaxpr, Jaxpr, ClosedJaxpr: jax 0.10's own)

# Primitives that move or relabel data without VPU work.
_FREE = {
    "reshape", "squeeze", "expand_dims", "get", "swap", "addupdate", "program_id", "num_programs",
    "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
    "custom_vjp_call_jaxpr", "remat", "checkpoint", "run_scoped", "semaphore_signal",
    "semaphore_wait", "semaphore_read", "dma_start", "dma_wait", "barrier", "multiple_of",
    "pallas_call", "cond", "while", "scan", "shard_map", "convert_element_type_noop",
    "bitcast_convert_type", "copy_p", "stop_gradient", "optimization_barrier", "device_put",
    "axis_index", "delay", "debug_callback", "debug_print", "iota",
}
_REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
               "reduce_xor", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin",
               "cumlogsumexp", "reduce_precision_sum"}
_VREG = 8 * 128


def padded_bytes(shape, itemsize: int) -> float:
    """Bytes of an array of ``shape`` in HBM, padded to the memory tiles (sim/CostModel.cpp)."""
    shape = tuple(int(s) for s in shape)
    if not shape:
        return float(itemsize)
    numel = math.prod(shape)
    if numel == 0:
        return 0.0
    if len(shape) == 1:
        return float(_round_up(shape[0], 1024) * itemsize)
    sublanes = 8 * max(1, 4 // max(1, itemsize))
    rows, cols = shape[-2], shape[-1]
    outer = numel // (rows * cols)
    return float(outer * _round_up(rows, sublanes) * _round_up(cols, 128) * itemsize)


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


@dataclasses.dataclass
class KernelWork:
    """The chip-independent count of one kernel call (what ``_C.charge_kernel`` takes)."""
    matmuls: dict = dataclasses.field(default_factory=dict)  # (M, K, N, passes, bytes, rate) -> batch
    vpu_units: float = 0.0
    hbm_bytes: float = 0.0
    grid_steps: int = 0
    vmem_bytes: int = 0  # the largest VMEM footprint of one pallas_call (blocks x2, scratch)
    vmem_limit: int | None = None  # a pallas_call's vmem_limit_bytes, where it sets one
    notes: list = dataclasses.field(default_factory=list)
    data_dependent: bool = False  # index maps read scalar-prefetch values
    # What the kernels' authors declared (pallas_call's cost_estimate), summed: flops, bytes.
    declared: dict = dataclasses.field(default_factory=dict)

    def add_matmul(self, batch, M, K, N, passes, nbytes, rate, times=1):
        key = (int(M), int(K), int(N), int(passes), int(nbytes), int(rate))
        self.matmuls[key] = self.matmuls.get(key, 0) + int(batch) * int(times)

    def matmul_rows(self) -> list:
        return [[b, M, K, N, p, e, r] for (M, K, N, p, e, r), b in self.matmuls.items()]

    def flops(self) -> float:
        return sum(2.0 * b * M * K * N for (M, K, N, _, _, _), b in self.matmuls.items())

    def scaled(self, k: float) -> "KernelWork":
        out = KernelWork(vpu_units=self.vpu_units * k, hbm_bytes=self.hbm_bytes * k,
                         grid_steps=int(self.grid_steps * k), vmem_bytes=self.vmem_bytes,
                         vmem_limit=self.vmem_limit, notes=list(self.notes),
                         data_dependent=self.data_dependent,
                         declared={name: v * k for name, v in self.declared.items()})
        out.matmuls = {key: int(round(b * k)) for key, b in self.matmuls.items()}
        return out

    def __iadd__(self, other: "KernelWork"):
        for key, b in other.matmuls.items():
            self.matmuls[key] = self.matmuls.get(key, 0) + b
        self.vpu_units += other.vpu_units
        self.hbm_bytes += other.hbm_bytes
        self.grid_steps += other.grid_steps
        self.vmem_bytes = max(self.vmem_bytes, other.vmem_bytes)
        if other.vmem_limit is not None:
            self.vmem_limit = other.vmem_limit
        self.notes += [n for n in other.notes if n not in self.notes]
        self.data_dependent |= other.data_dependent
        for k, v in other.declared.items():
            self.declared[k] = self.declared.get(k, 0) + v
        return self

    def max_with(self, other: "KernelWork") -> "KernelWork":
        """The costlier of two branches (by FLOPs, then VPU units, then bytes)."""
        key = lambda w: (w.flops(), w.vpu_units, w.hbm_bytes)  # noqa: E731
        return self if key(self) >= key(other) else other


def _shape(v):
    aval = v.aval
    inner = getattr(aval, "inner_aval", None)
    return inner if inner is not None else aval


def _itemsize(dtype) -> int:
    return np.dtype(dtype).itemsize


def _rate(dtype) -> int:
    d = np.dtype(dtype)
    if d.kind in "iu" and d.itemsize == 1:
        return 1
    if d.itemsize == 1:
        return 2  # fp8
    return 0


_PASSES = {"highest": 6, "high": 3, "medium": 1}


def _float32_passes(precision) -> int:
    """bf16 passes of a float32 dot (docs/design.md 4.2): its own ``precision`` where it names one
    (HIGHEST six, HIGH three, DEFAULT one ... as jax.lax.Precision says), else the device's
    default float32 matmul precision."""
    names = [str(p).upper() for p in (precision if isinstance(precision, tuple) else (precision,))
             if p is not None]
    if any("HIGHEST" in n for n in names):
        return 6
    if any("HIGH" in n for n in names):
        return 3
    if any("DEFAULT" in n for n in names):
        return 1
    import torch
    get = getattr(torch.tpu, "get_default_matmul_precision", None)
    level = get() if get is not None else torch.get_float32_matmul_precision()
    return _PASSES.get(level, 1)


def _dot(eqn, work: KernelWork, times: int):
    lhs, rhs = _shape(eqn.invars[0]), _shape(eqn.invars[1])
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    batch = math.prod(lhs.shape[d] for d in lb)
    K = math.prod(lhs.shape[d] for d in lc)
    M = math.prod(s for d, s in enumerate(lhs.shape) if d not in lc and d not in lb)
    N = math.prod(s for d, s in enumerate(rhs.shape) if d not in rc and d not in rb)
    nbytes = min(_itemsize(lhs.dtype), _itemsize(rhs.dtype))
    passes = (_float32_passes(eqn.params.get("precision"))
              if nbytes >= 4 and np.dtype(lhs.dtype).kind == "f" else 1)
    work.add_matmul(batch, M, K, N, passes, min(nbytes, 2) if passes > 1 else nbytes,
                    _rate(lhs.dtype), times)


def _sub_jaxprs(eqn):
    for value in eqn.params.values():
        for item in (value if isinstance(value, (tuple, list)) else (value,)):
            if isinstance(item, jcore.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jcore.Jaxpr):
                yield item


def _walk(jaxpr, work: KernelWork, times: int, in_kernel: bool, ctx):
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "pallas_call":
            work += _pallas_call(eqn, ctx).scaled(times)
            continue
        if name == "dot_general":
            _dot(eqn, work, times)
            if not in_kernel:
                ctx.glue_bytes += sum(padded_bytes(_shape(v).shape, _itemsize(_shape(v).dtype))
                                      for v in eqn.outvars)
            continue
        if name == "cond":
            branches = [KernelWork() for _ in eqn.params["branches"]]
            for b, closed in zip(branches, eqn.params["branches"]):
                _walk(closed.jaxpr, b, times, in_kernel, ctx)
            best = branches[0]
            for b in branches[1:]:
                best = best.max_with(b)
            work += best
            continue
        if name == "scan":
            _walk(eqn.params["jaxpr"].jaxpr, work, times * int(eqn.params["length"]), in_kernel,
                  ctx)
            continue
        if name == "while":
            note = "a while_loop is charged for one trip"
            if note not in work.notes:
                work.notes.append(note)
            for sub in _sub_jaxprs(eqn):
                _walk(sub, work, times, in_kernel, ctx)
            continue
        if name == "dma_start":
            work.hbm_bytes += times * _dma_bytes(eqn)
            continue
        subs = list(_sub_jaxprs(eqn))
        if subs:
            for sub in subs:
                _walk(sub, work, times, in_kernel, ctx)
            continue
        if name in _FREE:
            continue
        if name in _REDUCTIONS:
            elements = sum(math.prod(_shape(v).shape) for v in eqn.invars
                           if hasattr(_shape(v), "shape"))
        else:
            elements = sum(math.prod(_shape(v).shape) for v in eqn.outvars
                           if hasattr(_shape(v), "shape"))
        work.vpu_units += times * math.ceil(elements / _VREG)
        if not in_kernel and name not in ("broadcast_in_dim", "convert_element_type",
                                          "transpose", "slice", "concatenate", "pad", "select_n"):
            ctx.glue_bytes += sum(padded_bytes(_shape(v).shape, _itemsize(_shape(v).dtype))
                                  for v in eqn.outvars if hasattr(_shape(v), "shape"))


def _dma_bytes(eqn) -> float:
    """Bytes one DMA moves: the size of its source ref (its slice where the DMA takes one)."""
    src = _shape(eqn.invars[0])
    shape = getattr(src, "shape", ())
    try:
        tree = eqn.params.get("tree")
        if tree is not None:
            flat = jax.tree_util.tree_unflatten(tree, eqn.invars)
            transforms = flat[1]
            if transforms:
                indexer = transforms[-1]
                shape = indexer.get_indexer_shape()
    except Exception:  # (an indexer of another form: the whole ref)
        pass
    return padded_bytes(shape, _itemsize(src.dtype))


class _Context:
    def __init__(self, prefetch_values):
        self.prefetch_values = prefetch_values  # id(var) -> concrete value
        self.glue_bytes = 0.0


def _grid_points(grid):
    return np.stack([g.reshape(-1) for g in np.meshgrid(*[np.arange(n) for n in grid],
                                                         indexing="ij")], axis=1).astype(np.int32)


def _block_indices(bm, points, prefetch):
    """The block index of every grid point (rows of ``points``) through the index map of ``bm``."""
    closed = bm.index_map_jaxpr
    jaxpr, consts = closed.jaxpr, closed.consts
    n_grid = points.shape[1]
    if len(jaxpr.invars) > n_grid:  # (scalar-prefetch refs: run as values)
        from jax._src.state.discharge import discharge_state
        discharged = discharge_state(closed)
        jaxpr, consts = discharged.jaxpr, discharged.consts
        extra = [jnp.asarray(v) for v in prefetch]

        def one(*idx):
            outs = jcore.eval_jaxpr(jaxpr, consts, *idx, *extra)
            return outs[:len(outs) - len(extra)]
    else:
        def one(*idx):
            return jcore.eval_jaxpr(jaxpr, consts, *idx)
    if n_grid == 0:  # (no grid: one step)
        return np.asarray([[int(np.asarray(c)) for c in one()]], np.int64).reshape(1, -1)
    cols = jax.vmap(one)(*[jnp.asarray(points[:, i]) for i in range(n_grid)])
    return np.stack([np.asarray(c).reshape(len(points)) for c in cols], axis=1) if cols else \
        np.zeros((len(points), 0), np.int32)


def _changes(indices) -> tuple[int, int]:
    """(fetches, write-backs) of one block over the grid's steps: a fetch at every step whose
    index differs from the previous step's, a write-back at every step whose index differs from
    the next step's."""
    if len(indices) == 0:
        return 0, 0
    differs = np.any(indices[1:] != indices[:-1], axis=1)
    runs = 1 + int(differs.sum())
    return runs, runs


def _memory_space(bm) -> str:
    aval = bm.block_aval
    return str(getattr(aval, "memory_space", "")).lower()


def _pallas_call(eqn, ctx) -> KernelWork:
    gm = eqn.params["grid_mapping"]
    work = KernelWork()
    grid = tuple(gm.grid)
    if any(not isinstance(g, (int, np.integer)) for g in grid):
        work.notes.append("a grid of dynamic size is charged as one step")
        grid = tuple(g if isinstance(g, (int, np.integer)) else 1 for g in grid)
    steps = math.prod(grid) if grid else 1
    work.grid_steps = steps
    points = _grid_points(grid) if grid else np.zeros((1, 0), np.int32)
    prefetch = []
    for v in eqn.invars[:gm.num_index_operands]:
        value = ctx.prefetch_values.get(id(v))
        if value is None:
            aval = _shape(v)
            value = np.zeros(aval.shape, aval.dtype)
            if "scalar-prefetch values not known: zeros" not in work.notes:
                work.notes.append("scalar-prefetch values not known: zeros")
        prefetch.append(value)
    if gm.num_index_operands:
        work.data_dependent = True
    vmem = 0
    n_in = gm.num_inputs
    for i, bm in enumerate(gm.block_mappings):
        aval = bm.block_aval
        inner = getattr(aval, "inner_aval", aval)
        block_bytes = padded_bytes(inner.shape, _itemsize(inner.dtype))
        space = _memory_space(bm)
        if "any" in space or "hbm" in space or "semaphore" in space or "smem" in space:
            continue  # (moved by the kernel's own DMAs, or scalars)
        vmem += 2 * int(block_bytes)  # (double-buffered by the pipeline)
        try:
            indices = _block_indices(bm, points, prefetch)
        except Exception as e:  # (an index map this count cannot evaluate: every step copies)
            note = f"block index maps not evaluated ({type(e).__name__}): a copy per step"
            if note not in work.notes:
                work.notes.append(note)
            indices = np.arange(steps).reshape(-1, 1)
        fetches, writebacks = _changes(indices)
        work.hbm_bytes += block_bytes * (fetches if i < n_in else writebacks)
    for aval in gm.scratch_avals:
        inner = getattr(aval, "inner_aval", aval)
        space = str(getattr(aval, "memory_space", "")).lower()
        if hasattr(inner, "shape") and "smem" not in space and "semaphore" not in space:
            vmem += int(padded_bytes(inner.shape, _itemsize(inner.dtype)))
    work.vmem_bytes = vmem
    params = eqn.params.get("compiler_params")
    limit = None
    if params is not None:
        for p in (params.values() if isinstance(params, dict) else (params,)):
            limit = getattr(p, "vmem_limit_bytes", None) or limit
    work.vmem_limit = limit
    declared = eqn.params.get("cost_estimate")
    if declared is not None:
        work.declared = {"flops": float(declared.flops),
                         "bytes_accessed": float(declared.bytes_accessed),
                         "transcendentals": float(declared.transcendentals)}
    body = KernelWork()
    _walk(eqn.params["jaxpr"], body, 1, True, ctx)
    work += body.scaled(steps)
    work.grid_steps = steps
    work.vmem_bytes = max(vmem, body.vmem_bytes)
    return work


def count(closed_jaxpr, arg_values=()) -> KernelWork:
    """The work of one call of the function whose jaxpr is ``closed_jaxpr``; ``arg_values``: the
    concrete values of its arguments (numpy arrays, or None), for scalar-prefetch operands."""
    jaxpr = closed_jaxpr.jaxpr
    values = {}
    for v, value in zip(jaxpr.invars, arg_values):
        if value is not None:
            values[id(v)] = value
    # Scalar-prefetch operands reached through a pjit keep their identity only at the top; the
    # values of pjit's own invars are mapped as the walk goes down.
    _map_through_calls(jaxpr, values)
    ctx = _Context(values)
    work = KernelWork()
    _walk(jaxpr, work, 1, False, ctx)
    has_kernel = _has_pallas(jaxpr)
    if not has_kernel:
        work.hbm_bytes += sum(padded_bytes(_shape(v).shape, _itemsize(_shape(v).dtype))
                              for v in list(jaxpr.invars) + list(jaxpr.outvars)
                              if hasattr(_shape(v), "shape"))
    else:
        work.hbm_bytes += ctx.glue_bytes
    return work


def _map_through_calls(jaxpr, values):
    for eqn in jaxpr.eqns:
        subs = list(_sub_jaxprs(eqn))
        if len(subs) == 1 and eqn.primitive.name != "pallas_call" and \
                len(subs[0].invars) == len(eqn.invars):
            for outer, inner in zip(eqn.invars, subs[0].invars):
                if id(outer) in values:
                    values[id(inner)] = values[id(outer)]
            _map_through_calls(subs[0], values)


def _has_pallas(jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            return True
        if any(_has_pallas(sub) for sub in _sub_jaxprs(eqn)):
            return True
    return False
