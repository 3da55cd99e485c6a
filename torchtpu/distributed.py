"""The c10d backend of the tpu device, ``"tpu_dist"`` (docs/distributed.md).

Registered when torchtpu loads, for device type "tpu": ``init_process_group("tpu_dist")``,
``init_process_group(device_id=torch.device("tpu", rank))`` and a plain
``init_process_group()`` in a process that uses tpu tensors all take it.

Data moves through Gloo, PyTorch's own CPU collective engine: device memory is host memory, so
each tpu tensor is handed to Gloo as a CPU view of the same bytes (no staging copy), once the
work queued on its device has run (and, in fused eager, once it has memory). CPU tensors go to
Gloo as they are. Each collective is charged to the cost model as a launch of its own, for the
ICI of the simulated chip (sim/CostModel.cpp, "ICI"), on the ICI beside the TensorCore and on
the current stream (compute on other streams overlaps it until they wait for it: sim/Ledger.h),
and counted in torchtpu.metrics ("collectives.<kind>", "collectives.<kind>_bytes").

Ops Gloo lacks are built from its own: AVG is a SUM divided by the group size; PREMUL_SUM (FSDP2's
gradient reduction) a SUM of the inputs multiplied by its factor first; reduce-scatter is an
all-reduce of the input whose own chunk is copied out.

Ranks that pass tensors of different shapes or dtypes to a collective would make Gloo abort the
processes; each such collective first compares a small fingerprint of its tensors across ranks
and raises a ValueError on every rank instead (TORCHTPU_DIST_CHECK=0 skips the check, one small
all-gather per collective).

In fused eager with Google TorchTPU's ``TORCH_TPU_INTERNAL_MATERIALIZE_COLLECTIVE_TENSORS`` at 0
or false (or inside an SPMD-safe region, ``spmd_safe``), all_reduce, all_gather_into_tensor,
reduce_scatter_tensor and broadcast of tpu tensors are recorded into the pending graph as ops of
their own (``tpu_dist::*``, csrc/aten/Collectives.h), which call Gloo from C++ when the graph
runs; the ops around them fuse across the collective. Every collective run here on the host first
runs the recorded ones and waits for them: Gloo pairs the ranks' collectives by their order.
"""
from __future__ import annotations

import contextvars
import functools
import itertools
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ProcessGroupGloo,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
    _create_work_from_future,
)

from . import _C, config

BACKEND = "tpu_dist"
_CHECK = config.value("TORCHTPU_DIST_CHECK") != "0"


def _materializes(value: str) -> bool:
    """TorchTPU's reading of its variable: "0" or "false" (any case) turn the cut off."""
    return value.strip().lower() not in ("0", "false")


# Cut fused eager's graph at every collective (TorchTPU's default), or record them inside it.
_materialize = _materializes(config.value("TORCH_TPU_INTERNAL_MATERIALIZE_COLLECTIVE_TENSORS"))
# The depth of SPMD-safe regions entered (and not left) in this context: inside one, collectives
# are recorded whatever the variable says. A context variable: the thread's, and the backward
# passes it starts (which run in its context).
_spmd_depth = contextvars.ContextVar("torchtpu_spmd_safe_depth", default=0)
_group_ids = itertools.count(1)
# A recorded collective may not have run yet (recorded, or queued on a stream), and the stream
# (device index, stream id) those collectives were recorded on.
_recorded_pending = False
_recorded_stream = None


def materialize_collective_tensors(on: bool | None = None) -> bool:
    """Whether fused eager's pending graph is cut at every collective (True, the default, as
    Google TorchTPU's ``TORCH_TPU_INTERNAL_MATERIALIZE_COLLECTIVE_TENSORS``), or collectives are
    recorded inside it (False: the variable at 0 or false). Sets it when ``on`` is given; returns
    the setting."""
    global _materialize
    if on is not None:
        _materialize = bool(on)
    return _materialize


def enter_spmd_safe_region() -> None:
    """Enters an SPMD-safe region (TorchTPU's ``tpu_distributed.enter_spmd_safe_region``): until it
    is left, collectives are recorded into fused eager's graph as with the variable at 0."""
    _spmd_depth.set(_spmd_depth.get() + 1)


def exit_spmd_safe_region() -> None:
    """Leaves the SPMD-safe region entered last."""
    depth = _spmd_depth.get()
    if depth == 0:
        raise RuntimeError("exit_spmd_safe_region: no SPMD-safe region was entered")
    _spmd_depth.set(depth - 1)


def is_spmd_safe() -> bool:
    """Whether the caller is inside an SPMD-safe region."""
    return _spmd_depth.get() > 0


def spmd_safe(func):
    """Decorator (TorchTPU's ``spmd_safe``): the function runs in an SPMD-safe region, its
    collectives recorded into fused eager's graph, and the graph is cut where it starts and where
    it returns when it is given or returns tpu tensors, so that no op outside the function fuses
    into its graphs. Under torch.compile the function is called as it is (compiled mode:
    docs/distributed.md)."""
    @functools.wraps(func)
    def run(*args, **kwargs):
        if torch.compiler.is_compiling():
            return func(*args, **kwargs)
        _cut_if_tpu((args, kwargs))
        enter_spmd_safe_region()
        try:
            result = func(*args, **kwargs)
        finally:
            exit_spmd_safe_region()
        _cut_if_tpu(result)
        return result

    return run


def _cut_if_tpu(tree) -> None:
    leaves = torch.utils._pytree.tree_leaves(tree)
    if any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in leaves):
        _C.sync()


def _recordable(tensors, reduce_op=None) -> bool:
    """Whether a collective of these tensors is recorded into fused eager's graph: the variable
    at 0 (or an SPMD-safe region), fused eager, plain dense contiguous tensors of one tpu device
    and an arithmetic reduce op (anything else runs on the host as before, raising what it
    raised where it raised it). Not while a compiled graph is captured as a program: the capture
    stops at the collective, and the graph runs op by op (docs/distributed.md, "Collectives
    inside fused eager's graphs")."""
    if ((_materialize and _spmd_depth.get() == 0) or _C.get_eager_mode() != "fused"
            or _C.dry_run() or _C.program_capturing()):
        return False
    if reduce_op is not None and _op_code(reduce_op) not in _RECORDED_REDUCE_OPS:
        return False
    device = tensors[0].device
    return device.type == "tpu" and all(
        type(t) in (torch.Tensor, torch.nn.Parameter) and t.device == device
        and t.layout == torch.strided and t.is_contiguous() for t in tensors)


def _run_recorded() -> None:
    """Before a collective runs on the host: the recorded collectives run first, and the host
    waits for them (Gloo pairs collectives by their order on each rank)."""
    global _recorded_pending
    if _recorded_pending:
        _recorded_pending = False
        _C.run_recorded_collectives()


def _record_on(device: torch.device) -> None:
    """Before a collective is recorded on the current stream of `device`: when the collectives
    recorded before it are on another stream, they run first and the host waits for them. Each
    stream's worker runs its work in order, but two workers run side by side: collectives on two
    streams (FSDP2's all-gathers and reduce-scatters) would reach Gloo in either order."""
    global _recorded_stream
    where = (device.index, torch.tpu.current_stream(device).stream_id)
    if _recorded_pending and _recorded_stream != where:
        _run_recorded()
    _recorded_stream = where


_RECORDED_REDUCE_OPS = frozenset(int(o) for o in (
    dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN,
    dist.ReduceOp.MAX, dist.ReduceOp.PREMUL_SUM))


@functools.cache
def _ops():
    """The recorded collectives' ops (csrc/aten/Collectives.cpp), found once."""
    return torch.ops.tpu_dist


def _op_code(op) -> int:
    """A ReduceOp (or its RedOpType) as the integer the recorded ops take."""
    return int(getattr(op, "op", op))


def _nbytes(tensors) -> float:
    return float(sum(t.numel() * t.element_size() for t in tensors))


def _view(t: torch.Tensor) -> torch.Tensor:
    """What Gloo gets for `t`: a CPU view of a tpu tensor's memory, a CPU tensor as it is."""
    if t.device.type == "tpu":
        return _C.host_view(t)
    if t.device.type != "cpu":
        raise ValueError(f"tpu_dist: tensors must be on a tpu device or the CPU, got {t.device}")
    return t


def _views(tensors):
    return [_view(t) for t in tensors]


class _InFlight(dist.Work):
    """A collective's Work (Gloo's, or a finished one): waiting for it also makes the current
    stream wait for the collective in the cost model's clocks (sim/Ledger.h), through `waited`."""

    def __init__(self, work, waited):
        super().__init__()
        self._work, self._waited = work, waited

    def wait(self, timeout=None):
        try:
            return self._work.wait() if timeout is None else self._work.wait(timeout)
        finally:
            self._waited()


# The rest of Work's interface answers from the wrapped Work.
for _name in ("get_future", "is_completed", "is_success", "exception", "result", "source_rank"):
    setattr(_InFlight, _name, lambda self, _name=_name: getattr(self._work, _name)())


def _done(result=None):
    """A Work that has completed (for collectives finished here)."""
    fut = torch.futures.Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


class TpuProcessGroup(dist.ProcessGroup):
    """A process group over the tpu devices of several processes (one chip per rank)."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)
        self._gloo = ProcessGroupGloo(store, rank, size, timeout)
        self._rank, self._size = rank, size
        # The id the recorded collectives and the cross-rank check name the group by.
        self._id = next(_group_ids)
        _C.register_collective_group(self._id, self._gloo, _CHECK)
        self._recorded = 0  # collectives recorded so far (their waits: _recorded_work)
        # What PyTorch asks of a group's per-device backends (bound devices, splitting, the
        # default backend): Gloo's. Collectives themselves come to the methods below.
        self._register_backend(torch.device("tpu"), dist.ProcessGroup.BackendType.CUSTOM,
                               self._gloo)
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO,
                               self._gloo)

    # -- identity
    def getBackendName(self) -> str:  # noqa: N802 - PyTorch's name
        return BACKEND

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank

    def __repr__(self) -> str:
        return f"TpuProcessGroup(rank={self._rank}, size={self._size})"

    def shutdown(self):
        _run_recorded()  # (destroy_process_group: the recorded collectives run first)
        return super().shutdown()

    # -- helpers
    @property
    def _on_host(self):
        """Gloo, for a collective run now on the host: the recorded collectives run first."""
        _run_recorded()
        return self._gloo

    def _issued(self, kind: str, nbytes: float, work):
        """Charges a collective to the cost model, on the ICI of the current device and stream
        (compute on other streams overlaps it: sim/Ledger.h). Returns its Work, whose wait()
        makes the current stream wait for it."""
        flight = _C.charge_collective(kind, float(nbytes), self._size)
        return _InFlight(work, lambda: _C.collective_waited(flight))

    def _recorded_work(self, result):
        """The Work of a collective just recorded (its kernel charges it when the graph runs):
        complete, since what reads its results runs after it; its wait() makes the current stream
        wait for it in the cost model's clocks once it has run."""
        global _recorded_pending
        _recorded_pending = True
        sequence, self._recorded = self._recorded, self._recorded + 1
        return _InFlight(_done(list(result)),
                         lambda: _C.recorded_collective_waited(self._id, sequence))

    def _check_same(self, kind: str, tensors) -> None:
        """Raises on every rank when the ranks' tensors differ in shape or dtype (the recorded
        collectives make the same check when they run: csrc/aten/Collectives.cpp)."""
        if not _CHECK or self._size == 1:
            return
        _run_recorded()
        _C.check_same_across_ranks(self._id, kind, list(tensors))

    def _sum_op(self, op):
        """Gloo has neither AVG nor PREMUL_SUM: AVG is a SUM divided by the group size afterwards,
        PREMUL_SUM a SUM of the inputs each multiplied by the op's factor first (a number or a
        tensor, as FSDP2 gives it), as NCCL computes it. Returns the op for Gloo, whether to
        divide, and the factor (None but for PREMUL_SUM)."""
        if op == dist.ReduceOp.AVG:
            return dist.ReduceOp.SUM, True, None
        if op == dist.ReduceOp.PREMUL_SUM:
            return dist.ReduceOp.SUM, False, op.factor
        return op, False, None

    def _finish(self, work, divide_these=()):
        if not divide_these:
            return work
        work.wait()
        for t in divide_these:
            t.div_(self._size)
        return _done(list(divide_these))

    # -- collectives
    def _allreduce(self, gloo_fn, options_type, tensors, opts):
        self._check_same("all_reduce", tensors)
        op, divide, factor = self._sum_op(opts.reduceOp)
        if factor is not None:
            for t in tensors:  # (the inputs are the outputs)
                t.mul_(factor)
        views = _views(tensors)
        o = options_type()
        o.reduceOp = op
        o.timeout = opts.timeout
        work = self._finish(gloo_fn(views, o), tensors if divide else ())
        return self._issued("all_reduce", _nbytes(tensors), work)

    def allreduce(self, tensors, opts=AllreduceOptions()):
        if len(tensors) == 1 and _recordable(tensors, opts.reduceOp):
            (t,) = tensors
            op, divide, factor = self._sum_op(opts.reduceOp)
            _record_on(t.device)
            with torch.no_grad():  # (as Gloo's writes through a view: no autograd)
                if factor is not None:
                    t.mul_(factor)
                _ops().all_reduce_(t, self._id, _op_code(op))
                if divide:
                    t.div_(self._size)
            return self._recorded_work(tensors)
        return self._allreduce(self._on_host.allreduce, AllreduceOptions, tensors, opts)

    def allreduce_coalesced(self, tensors, opts=AllreduceCoalescedOptions()):
        return self._allreduce(self._on_host.allreduce_coalesced, AllreduceCoalescedOptions,
                               tensors, opts)

    def broadcast(self, tensors, opts=BroadcastOptions()):
        if len(tensors) == 1 and _recordable(tensors):
            _record_on(tensors[0].device)
            with torch.no_grad():
                _ops().broadcast_(tensors[0], self._id, opts.rootRank)
            return self._recorded_work(tensors)
        self._check_same("broadcast", tensors)
        work = self._on_host.broadcast(_views(tensors), opts)
        return self._issued("broadcast", _nbytes(tensors), work)

    def reduce(self, tensors, opts=ReduceOptions()):
        self._check_same("reduce", tensors)
        op, divide, factor = self._sum_op(opts.reduceOp)
        root = self._rank == opts.rootRank
        if factor is not None:
            # (a rank other than the root keeps its input: the scaled copy is reduced)
            scaled = [t * factor for t in tensors]
        o = ReduceOptions()
        o.reduceOp, o.rootRank, o.rootTensor, o.timeout = op, opts.rootRank, opts.rootTensor, opts.timeout
        work = self._on_host.reduce(_views(tensors if factor is None else scaled), o)
        if factor is not None:
            work.wait()
            if root:
                for t, r in zip(tensors, scaled):
                    t.copy_(r)
            work = _done(list(tensors))
        work = self._finish(work, tensors if divide and root else ())
        return self._issued("reduce", _nbytes(tensors), work)

    def allgather(self, output_tensors, input_tensors, opts=AllgatherOptions()):
        self._check_same("all_gather", list(input_tensors) + [t for o in output_tensors for t in o])
        work = self._on_host.allgather([_views(o) for o in output_tensors],
                                       _views(input_tensors), opts)
        return self._issued("all_gather", _nbytes(input_tensors) * self._size, work)

    def all_gather_single(self, output, input, opts=AllgatherOptions()):
        if (_recordable([output, input]) and output.dtype == input.dtype
                and output.numel() == input.numel() * self._size):
            _record_on(output.device)
            with torch.no_grad():
                _ops().all_gather_into_tensor_(output, input, self._id)
            return self._recorded_work([output])
        self._check_same("all_gather_into_tensor", [output, input])
        work = self._on_host._allgather_base(_view(output), _view(input), opts)
        return self._issued("all_gather", _nbytes([output]), work)

    def all_gather_single_coalesced(self, outputs, inputs, opts=AllgatherOptions()):
        work = None
        for out, inp in zip(outputs, inputs, strict=True):
            work = self.all_gather_single(out, inp, opts)
            work.wait()
        return work if work is not None else _done()

    def reduce_scatter(self, output_tensors, input_tensors, opts=ReduceScatterOptions()):
        # Gloo's reduce-scatter: an all-reduce of this rank's inputs, then its own chunk.
        op, divide, factor = self._sum_op(opts.reduceOp)
        for out, ins in zip(output_tensors, input_tensors, strict=True):
            whole = torch.stack([i.to(out.device) for i in ins]) if ins else None
            if whole is None:
                continue
            if factor is not None:
                whole.mul_(factor)
            w = self._on_host.allreduce([_view(whole)], _allreduce_options(op))
            w.wait()
            out.copy_(whole[self._rank])
            if divide:
                out.div_(self._size)
        return self._issued("reduce_scatter", sum(_nbytes(ins) for ins in input_tensors),
                            _done(output_tensors))

    def reduce_scatter_single(self, output, input, opts=ReduceScatterOptions()):
        op, divide, factor = self._sum_op(opts.reduceOp)
        if (_recordable([output, input], opts.reduceOp) and output.dtype == input.dtype
                and input.numel() == output.numel() * self._size):
            _record_on(output.device)
            with torch.no_grad():
                source = input if factor is None else input * factor
                _ops().reduce_scatter_tensor_(output, source, self._id, _op_code(op))
                if divide:
                    output.div_(self._size)
            return self._recorded_work([output])
        self._check_same("reduce_scatter_tensor", [output, input])
        whole = input.clone() if factor is None else input * factor
        w = self._on_host.allreduce([_view(whole)], _allreduce_options(op))
        w.wait()
        chunk = whole.reshape(self._size, -1)[self._rank].reshape(output.shape)
        output.copy_(chunk)
        if divide:
            output.div_(self._size)
        return self._issued("reduce_scatter", _nbytes([input]), _done([output]))

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=ReduceScatterOptions()):
        work = None
        for out, inp in zip(outputs, inputs, strict=True):
            work = self.reduce_scatter_single(out, inp, opts)
        return work if work is not None else _done()

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=AllToAllOptions()):
        work = self._on_host.alltoall_base(_view(output), _view(input), output_split_sizes,
                                           input_split_sizes, opts)
        return self._issued("all_to_all", _nbytes([input]) * self._size, work)

    def alltoall(self, output_tensors, input_tensors, opts=AllToAllOptions()):
        # Gloo has no list all-to-all: the tensors (of any sizes, one dtype) travel flattened
        # through its all-to-all with split sizes, then are copied to their places.
        flat_in = torch.cat([t.reshape(-1) for t in input_tensors])
        flat_out = torch.empty(sum(t.numel() for t in output_tensors), dtype=flat_in.dtype,
                               device=flat_in.device)
        work = self._on_host.alltoall_base(_view(flat_out), _view(flat_in),
                                           [t.numel() for t in output_tensors],
                                           [t.numel() for t in input_tensors], opts)
        work.wait()
        for t, part in zip(output_tensors, flat_out.split([t.numel() for t in output_tensors]),
                           strict=True):
            t.copy_(part.view(t.shape))
        return self._issued("all_to_all", _nbytes(input_tensors) * self._size,
                            _done(output_tensors))

    def gather(self, output_tensors, input_tensors, opts=GatherOptions()):
        work = self._on_host.gather([_views(o) for o in output_tensors], _views(input_tensors),
                                    opts)
        return self._issued("all_gather", _nbytes(input_tensors) * self._size, work)

    def scatter(self, output_tensors, input_tensors, opts=ScatterOptions()):
        work = self._on_host.scatter(_views(output_tensors), [_views(i) for i in input_tensors],
                                     opts)
        return self._issued("broadcast", _nbytes(output_tensors) * self._size, work)

    def barrier(self, opts=BarrierOptions()):
        return self._issued("barrier", 0.0, self._on_host.barrier(opts))

    def send(self, tensors, dst_rank, tag=0):
        work = self._on_host.send(_views(tensors), dst_rank, tag)
        return self._issued("send_recv", _nbytes(tensors), work)

    def recv(self, tensors, src_rank, tag=0):
        return self._on_host.recv(_views(tensors), src_rank, tag)

    def recv_anysource(self, tensors, tag=0):
        return self._on_host.recv_anysource(_views(tensors), tag)

    def allgather_coalesced(self, output_lists, input_tensors, opts=AllgatherOptions()):
        # output_lists[r][j]: the j-th input of rank r (one list per rank, not per input)
        work = None
        for j, inp in enumerate(input_tensors):
            work = self.allgather([[outs[j] for outs in output_lists]], [inp], opts)
            work.wait()
        return work if work is not None else _done()

    # The names PyTorch's C++ callers use (the trampoline of ProcessGroup).
    _allgather_base = all_gather_single
    allgather_into_tensor_coalesced = all_gather_single_coalesced
    _reduce_scatter_base = reduce_scatter_single
    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced
    alltoall_base = all_to_all_single


# Under torch.compile, code that calls a collective (DDP's forward, a user's) must not have
# Dynamo trace into the group's Python: each collective runs eagerly, as a C++ group's would.
for _name, _method in list(vars(TpuProcessGroup).items()):
    if callable(_method) and not _name.startswith("__"):
        setattr(TpuProcessGroup, _name, torch._disable_dynamo(_method))


def _allreduce_options(op) -> AllreduceOptions:
    o = AllreduceOptions()
    o.reduceOp = op
    return o


def bind_local_rank() -> None:
    """One simulated chip per process: under torchrun (LOCAL_RANK set) a process still on tpu:0
    takes tpu:LOCAL_RANK (modulo the devices simulated). Called when a "tpu_dist" group is made,
    and by the TorchTPU twin's ``api.tpu_device()`` (TorchTPU binds a process's chip when its
    runtime starts)."""
    local = config.get("LOCAL_RANK")
    if local is not None and torch.tpu.current_device() == 0:
        torch.tpu.set_device(int(local) % torch.tpu.device_count())


def _create(store, rank, size, timeout):
    bind_local_rank()
    return TpuProcessGroup(store, rank, size, timeout)


def register() -> None:
    """Registers "tpu_dist" as a c10d backend and the default one of device type "tpu"."""
    if BACKEND in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND, _create, devices=["tpu"])
