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
"""
from __future__ import annotations

import zlib
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
    stream wait for the collective in the cost model's clocks (sim/Ledger.h)."""

    def __init__(self, work, flight: int):
        super().__init__()
        self._work, self._flight = work, flight

    def wait(self, timeout=None):
        try:
            return self._work.wait() if timeout is None else self._work.wait(timeout)
        finally:
            _C.collective_waited(self._flight)


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

    # -- helpers
    def _issued(self, kind: str, nbytes: float, work):
        """Charges a collective to the cost model, on the ICI of the current device and stream
        (compute on other streams overlaps it: sim/Ledger.h). Returns its Work, whose wait()
        makes the current stream wait for it."""
        return _InFlight(work, _C.charge_collective(kind, float(nbytes), self._size))

    def _check_same(self, kind: str, tensors) -> None:
        """Raises on every rank when the ranks' tensors differ in shape or dtype."""
        if not _CHECK or self._size == 1:
            return
        described = [(str(t.dtype), tuple(t.shape)) for t in tensors]
        # (crc32: Python's own hash of a string differs between processes.)
        # (On the CPU whatever torch.set_default_device says: it goes to Gloo as it is.)
        mine = torch.tensor([len(tensors), zlib.crc32(repr(described).encode())],
                            dtype=torch.int64, device="cpu")
        everyone = [torch.empty_like(mine) for _ in range(self._size)]
        self._gloo.allgather([everyone], [mine]).wait()
        differ = [r for r, fp in enumerate(everyone) if not torch.equal(fp, mine)]
        if differ:
            raise ValueError(
                f"tpu_dist.{kind}: the ranks passed tensors of different shapes or dtypes; "
                f"rank {self._rank} passed {described}, ranks {differ} passed others. Every "
                f"rank must pass tensors of the same shapes and dtypes to this collective.")

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
        return self._allreduce(self._gloo.allreduce, AllreduceOptions, tensors, opts)

    def allreduce_coalesced(self, tensors, opts=AllreduceCoalescedOptions()):
        return self._allreduce(self._gloo.allreduce_coalesced, AllreduceCoalescedOptions,
                               tensors, opts)

    def broadcast(self, tensors, opts=BroadcastOptions()):
        self._check_same("broadcast", tensors)
        work = self._gloo.broadcast(_views(tensors), opts)
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
        work = self._gloo.reduce(_views(tensors if factor is None else scaled), o)
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
        work = self._gloo.allgather([_views(o) for o in output_tensors], _views(input_tensors),
                                    opts)
        return self._issued("all_gather", _nbytes(input_tensors) * self._size, work)

    def all_gather_single(self, output, input, opts=AllgatherOptions()):
        self._check_same("all_gather_into_tensor", [output, input])
        work = self._gloo._allgather_base(_view(output), _view(input), opts)
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
            w = self._gloo.allreduce([_view(whole)], _allreduce_options(op))
            w.wait()
            out.copy_(whole[self._rank])
            if divide:
                out.div_(self._size)
        return self._issued("reduce_scatter", sum(_nbytes(ins) for ins in input_tensors),
                            _done(output_tensors))

    def reduce_scatter_single(self, output, input, opts=ReduceScatterOptions()):
        self._check_same("reduce_scatter_tensor", [output, input])
        op, divide, factor = self._sum_op(opts.reduceOp)
        whole = input.clone() if factor is None else input * factor
        w = self._gloo.allreduce([_view(whole)], _allreduce_options(op))
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
        work = self._gloo.alltoall_base(_view(output), _view(input), output_split_sizes,
                                        input_split_sizes, opts)
        return self._issued("all_to_all", _nbytes([input]) * self._size, work)

    def alltoall(self, output_tensors, input_tensors, opts=AllToAllOptions()):
        # Gloo has no list all-to-all: the tensors (of any sizes, one dtype) travel flattened
        # through its all-to-all with split sizes, then are copied to their places.
        flat_in = torch.cat([t.reshape(-1) for t in input_tensors])
        flat_out = torch.empty(sum(t.numel() for t in output_tensors), dtype=flat_in.dtype,
                               device=flat_in.device)
        work = self._gloo.alltoall_base(_view(flat_out), _view(flat_in),
                                        [t.numel() for t in output_tensors],
                                        [t.numel() for t in input_tensors], opts)
        work.wait()
        for t, part in zip(output_tensors, flat_out.split([t.numel() for t in output_tensors]),
                           strict=True):
            t.copy_(part.view(t.shape))
        return self._issued("all_to_all", _nbytes(input_tensors) * self._size,
                            _done(output_tensors))

    def gather(self, output_tensors, input_tensors, opts=GatherOptions()):
        work = self._gloo.gather([_views(o) for o in output_tensors], _views(input_tensors), opts)
        return self._issued("all_gather", _nbytes(input_tensors) * self._size, work)

    def scatter(self, output_tensors, input_tensors, opts=ScatterOptions()):
        work = self._gloo.scatter(_views(output_tensors), [_views(i) for i in input_tensors], opts)
        return self._issued("broadcast", _nbytes(output_tensors) * self._size, work)

    def barrier(self, opts=BarrierOptions()):
        return self._issued("barrier", 0.0, self._gloo.barrier(opts))

    def send(self, tensors, dst_rank, tag=0):
        work = self._gloo.send(_views(tensors), dst_rank, tag)
        return self._issued("send_recv", _nbytes(tensors), work)

    def recv(self, tensors, src_rank, tag=0):
        return self._gloo.recv(_views(tensors), src_rank, tag)

    def recv_anysource(self, tensors, tag=0):
        return self._gloo.recv_anysource(_views(tensors), tag)

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
