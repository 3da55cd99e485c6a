"""The device module, registered as ``torch.tpu``: the counterpart of ``torch.cuda``."""
from __future__ import annotations

import enum
import functools
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch._utils import _LazySeedTracker

from . import _C

__all__ = [
    "Event", "Stream", "current_device", "current_stream", "default_generators", "device",
    "device_count", "empty_cache", "get_amp_supported_dtype", "get_default_matmul_precision",
    "get_device_name", "get_device_properties", "get_matmul_precision", "get_rng_state",
    "get_rng_state_all", "init", "initial_seed",
    "is_available", "is_initialized", "manual_seed", "manual_seed_all", "max_memory_allocated",
    "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_reserved",
    "memory_stats", "host_memory_stats", "reset_peak_host_memory_stats",
    "reset_accumulated_host_memory_stats", "precision", "reset_accumulated_memory_stats", "reset_peak_memory_stats", "seed",
    "seed_all", "default_stream", "set_device", "set_rng_state", "set_rng_state_all", "set_stream", "stream",
    "StreamContext",
    "synchronize", "Precision", "get_highest_algorithm", "set_highest_algorithm",
]

# ---------------------------------------------------------------------------------------------
# Devices and lazy initialization (the same protocol as torch.cuda).

_initialized = False
_init_lock = threading.Lock()
_queued_calls: list[tuple[Callable[[], None], list[str]]] = []
_lazy_seed_tracker = _LazySeedTracker()


def is_available() -> bool:
    """True when at least one simulated device exists (TORCHTPU_NUM_DEVICES > 0)."""
    return _C.device_count() > 0


def device_count() -> int:
    return _C.device_count()


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def is_initialized() -> bool:
    return _initialized and not _is_in_bad_fork()


def _lazy_call(callable: Callable[[], None], **kwargs: Any) -> None:
    if is_initialized():
        callable()
        return
    if kwargs.get("seed_all", False):
        _lazy_seed_tracker.queue_seed_all(callable, traceback.format_stack())
    elif kwargs.get("seed", False):
        _lazy_seed_tracker.queue_seed(callable, traceback.format_stack())
    else:
        _queued_calls.append((callable, traceback.format_stack()))


def _lazy_init() -> None:
    global _initialized
    if is_initialized():
        return
    with _init_lock:
        if is_initialized():
            return
        if _is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize TPU in forked subprocess. To use TPU with "
                "multiprocessing, you must use the 'spawn' start method"
            )
        _C._init()
        _queued_calls.extend(call for call in _lazy_seed_tracker.get_calls() if call)
        try:
            for queued_call, origin in _queued_calls:
                try:
                    queued_call()
                except Exception as e:
                    raise Exception(  # noqa: TRY002
                        "TPU call failed lazily at initialization with error: "
                        f"{e}\n\nTPU call was originally invoked at:\n\n{''.join(origin)}"
                    ) from e
        finally:
            _queued_calls.clear()
        _initialized = True


def init() -> None:
    _lazy_init()


# Google TorchTPU's names for starting and stopping the runtime (its notebooks' helpers call
# them). The simulated runtime starts once per process; stopping it finishes the queued work and
# returns cached memory, and it stays usable.
@dataclass(frozen=True)
class _RuntimeInitialization:
    device_count: int
    device_id: int


def _init_runtime(device_type: str = "tpu") -> _RuntimeInitialization:
    if device_type != "tpu":
        raise ValueError(f"torch.tpu starts the 'tpu' runtime, not {device_type!r}")
    _lazy_init()
    return _RuntimeInitialization(device_count(), current_device())


def _init_runtime_options(device_type: str = "tpu") -> None:
    import atexit
    _init_runtime(device_type)
    atexit.register(_shutdown_runtime)


def _shutdown_runtime() -> None:
    if not is_initialized():
        return
    import torchtpu
    torchtpu.sync()
    empty_cache()


def _hbm_usage_summary() -> str:
    """HBM in use per device, as TorchTPU prints it. Plans of fused eager and compiled programs
    live in host memory here (TorchTPU keeps its executables in HBM), so this is the tensors'."""
    lines = []
    for i in range(device_count()):
        stats = memory_stats(i)
        lines.append(
            f"tpu:{i} ({get_device_name(i)}): {stats.get('allocated_bytes.all.current', 0)} bytes "
            f"allocated, {stats.get('reserved_bytes.all.current', 0)} reserved, "
            f"{stats.get('allocated_bytes.all.peak', 0)} peak, of "
            f"{get_device_properties(i).total_memory} bytes of HBM")
    return "\n".join(lines)


def _index(dev: Any, optional: bool = True) -> int:
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != "tpu":
            raise ValueError(f"Expected a tpu device, but got: {dev}")
        return current_device() if dev.index is None else dev.index
    if dev is None:
        if optional:
            return current_device()
        raise ValueError("Expected a tpu device index, got None")
    return int(dev)


def current_device() -> int:
    return _C.current_device()


def set_device(device: Any) -> None:
    """Selects the current device and initializes the runtime, as ``torch.cuda.set_device``
    does: code that asks whether the device is initialized to choose an index (FakeTensor's
    device of ``torch.empty(device="tpu")``, meta-device initialization) then sees this one."""
    idx = _index(device)
    if idx >= 0:
        _lazy_init()
        _C.set_device(idx)


class device:
    """Context manager that selects a TPU device: ``with torch.tpu.device(1): ...``."""

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            _lazy_init()  # (as torch.cuda.device: its exchange initializes the runtime)
        self.prev_idx = _C.exchange_device(self.idx)

    def __exit__(self, *args: Any) -> bool:
        if self.prev_idx >= 0:
            _C.set_device(self.prev_idx)
        return False


def synchronize(device: Any = None) -> None:
    """Waits for all work queued on the device (default: the current one)."""
    _C.synchronize(_index(device))


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


class Precision(enum.Enum):
    """The MXU precision of float32 matmuls and convolutions, under Google TorchTPU's names (its
    ``torch.tpu.Precision``, StableHLO's precision configuration): ``DEFAULT`` rounds the
    operands to bfloat16 (1 pass), ``HIGH`` multiplies in 3 bfloat16 passes (XLA's bf16_3x),
    ``HIGHEST`` in 6 (bf16_6x; docs/precision.md)."""

    DEFAULT = "medium"
    HIGH = "high"
    HIGHEST = "highest"


class precision:
    """Overrides the float32 matmul precision of the MXU on this thread, for a scope.

    ``Precision.HIGHEST`` or ``"highest"`` (6 bf16 passes), ``Precision.HIGH`` or ``"high"``
    (3 passes, bf16_3x), ``Precision.DEFAULT`` or ``"medium"`` (1 pass); outside any scope the
    process's level applies (``get_default_matmul_precision()``).
    """

    def __init__(self, level: "str | Precision"):
        if isinstance(level, Precision):
            level = level.value
        if level not in ("highest", "high", "medium"):
            raise ValueError(
                "precision must be torch.tpu.Precision.DEFAULT, .HIGH or .HIGHEST (or 'medium', "
                f"'high', 'highest'), not {level!r}")
        self.level = level
        self.prev: str | None = None

    def __enter__(self):
        self.prev = _C.get_precision_override()
        _C.set_precision_override(self.level)
        return self

    def __exit__(self, *args: Any) -> bool:
        _C.set_precision_override(self.prev)
        return False


def get_matmul_precision() -> str:
    """The MXU precision level in force on this thread."""
    return _C.current_precision()


def get_default_matmul_precision() -> str:
    """The MXU precision of float32 matmuls outside ``precision`` scopes: ``"medium"``
    (TorchTPU's ``Precision.DEFAULT``, one bfloat16 pass, as the chip runs them) unless
    ``TORCHTPU_MATMUL_PRECISION`` or a call of ``torch.set_float32_matmul_precision`` set
    another. ``torch.get_float32_matmul_precision()`` is PyTorch's setting for the CPU, which
    stays "highest" until set (docs/simulated-chip.md, "MXU numerics")."""
    return _C.default_precision()


def get_highest_algorithm() -> str:
    """What float32 matmuls and convolutions at ``"highest"`` (``Precision.HIGHEST``) compute:
    ``"bf16_6x"``, the chip's six bfloat16 passes (the default), or ``"float32"``, the host CPU's
    float32 GEMM, whose results are the CPU's bit for bit (docs/precision.md)."""
    return _C.highest_algorithm()


def set_highest_algorithm(algorithm: str) -> None:
    """Sets what ``"highest"`` computes for the whole process: ``"bf16_6x"`` (the chip's six
    bfloat16 passes, the default) or ``"float32"`` (the host CPU's float32 GEMM, an opt-in for
    programs and tests that compare with the CPU and test something else than the chip's
    numerics). ``TORCHTPU_HIGHEST_ALGORITHM`` sets the starting value. Work issued before the
    call runs first, with the algorithm it was issued under (docs/precision.md)."""
    if algorithm not in ("bf16_6x", "float32"):
        raise ValueError("the 'highest' matmul algorithm must be 'bf16_6x' (the chip's six bf16 "
                         f"passes) or 'float32' (the host CPU's float32 GEMM), not {algorithm!r}")
    _C.set_highest_algorithm(algorithm)


def _follow_torch_float32_matmul_precision() -> None:
    """Makes ``torch.set_float32_matmul_precision(level)`` set the MXU's default level too, as it
    sets the CPU's and CUDA's: a program that asks for "highest" gets six passes on tpu. Only
    the call sets it: PyTorch's initial "highest" is the CPU's default, not a request."""
    original = torch.set_float32_matmul_precision
    if getattr(original, "_torchtpu_follows", False):
        return

    @functools.wraps(original)
    def set_float32_matmul_precision(precision: str) -> None:
        original(precision)
        _C.set_default_precision(precision)

    set_float32_matmul_precision._torchtpu_follows = True
    torch.set_float32_matmul_precision = set_float32_matmul_precision


_follow_torch_float32_matmul_precision()


# ---------------------------------------------------------------------------------------------
# Properties of the simulated chip.


@dataclass(frozen=True)
class _TpuDeviceProperties:
    name: str
    chip: str
    total_memory: int
    mxu_dim: int
    mxus_per_core: int
    tensor_cores: int
    bf16_flops: float
    int8_ops: float
    hbm_bytes_per_s: float
    vmem_bytes: int
    vpu_sublanes: int
    vpu_lanes: int
    source: str
    physical_chip: int  # the host's chip behind this index (TPU_VISIBLE_CHIPS renumbers)

    @property
    def multi_processor_count(self) -> int:
        """The units that run a program's work side by side: the chip's TensorCores (what
        torch.cuda's property of this name counts in SMs; Dynamo's device interface reads it)."""
        return self.tensor_cores

    def __repr__(self) -> str:
        return (
            f"_TpuDeviceProperties(name='{self.name}', total_memory="
            f"{self.total_memory // (1 << 20)}MB, mxu={self.mxu_dim}x{self.mxu_dim}"
            f"x{self.mxus_per_core * self.tensor_cores}, bf16={self.bf16_flops / 1e12:g} TFLOP/s, "
            f"hbm_bw={self.hbm_bytes_per_s / 1e9:g} GB/s)"
        )


def get_device_properties(device: Any = None) -> _TpuDeviceProperties:
    idx = _index(device)
    if not 0 <= idx < device_count():
        raise AssertionError(f"Invalid device id tpu:{idx}; there are {device_count()} devices")
    chip = _C.chip()
    return _TpuDeviceProperties(
        name=f"TPU {chip['name']} (simulated)",
        chip=chip["name"],
        total_memory=_C.hbm_capacity_bytes(),
        mxu_dim=chip["mxu_dim"],
        mxus_per_core=chip["mxus_per_core"],
        tensor_cores=chip["tensor_cores"],
        bf16_flops=chip["bf16_flops"],
        int8_ops=chip["int8_ops"],
        hbm_bytes_per_s=chip["hbm_bytes_per_s"],
        vmem_bytes=chip["vmem_bytes"],
        vpu_sublanes=chip["vpu_sublanes"],
        vpu_lanes=chip["vpu_lanes"],
        source=chip["source"],
        physical_chip=_C.physical_chip(idx),
    )


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


# ---------------------------------------------------------------------------------------------
# Memory: the simulated HBM allocator, through torch.accelerator's memory API.


def _device(dev: Any) -> torch.device:
    return torch.device("tpu", _index(dev))


def memory_stats(device: Any = None) -> dict[str, Any]:
    return torch.accelerator.memory_stats(_device(device))


def memory_allocated(device: Any = None) -> int:
    return torch.accelerator.memory_allocated(_device(device))


def max_memory_allocated(device: Any = None) -> int:
    return torch.accelerator.max_memory_allocated(_device(device))


def memory_reserved(device: Any = None) -> int:
    return torch.accelerator.memory_reserved(_device(device))


def max_memory_reserved(device: Any = None) -> int:
    return torch.accelerator.max_memory_reserved(_device(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_device(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_device(device))


def empty_cache() -> None:
    """Releases the cached, unused blocks of every device (reserved bytes drop)."""
    for idx in range(device_count()):
        _C.empty_cache_device(idx)


def host_memory_stats() -> dict[str, int]:
    """The pinned host memory allocator's statistics (pin_memory(), non-blocking copies), in the
    keys of ``torch.cuda.host_memory_stats()``: requests and bytes active / allocated (current,
    peak, allocated, freed), the host allocations and frees it made, their times (µs)."""
    return dict(sorted(_C.host_memory_stats().items()))


def reset_peak_host_memory_stats() -> None:
    _C.reset_host_memory_stats(True)


def reset_accumulated_host_memory_stats() -> None:
    _C.reset_host_memory_stats(False)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the simulated HBM; free excludes memory reserved by the cache."""
    return torch.accelerator.get_memory_info(_device(device))


# torch.tpu.memory: summaries, snapshots and the allocation history (torchtpu/memory.py).
from . import memory  # noqa: E402
from .memory import memory_snapshot, memory_summary  # noqa: E402,F401
from .cache import (  # noqa: E402,F401
    _clear_cache, _get_cache_hits, _get_cache_misses, _get_cache_requests, _get_cache_stats,
    _get_dump_on_cache_miss, _set_allow_cache, _set_cache_only, _set_dump_on_cache_miss)


# ---------------------------------------------------------------------------------------------
# Streams and events: the generic torch.Stream / torch.Event on the tpu device.


class Stream(torch.Stream):
    """A TPU stream: a work queue run in order by its own worker thread."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs: Any):
        if "stream_id" in kwargs:  # rebuilt from (stream_id, device_index, device_type)
            return super().__new__(cls, priority=priority, **kwargs)
        with torch.tpu.device(device):
            return super().__new__(cls, device=_device(device), priority=priority)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
          external: bool = False):
    """A ``torch.Event`` on the tpu device; ``enable_timing=True`` allows ``elapsed_time``.

    A factory rather than a subclass: torch 2.13's ``Event.elapsed_time`` accepts only exact
    ``torch.Event`` instances as its argument. ``external`` (an event shared with work outside
    PyTorch's streams, as CUDA's and TorchTPU's signatures have it) must be False: the simulated
    device has no such work.
    """
    if external:
        raise ValueError("torch.tpu.Event(external=True): the simulated device has no work "
                         "outside its streams to share an event with")
    return torch.Event(
        device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess
    )


def current_stream(device: Any = None) -> torch.Stream:
    # (The current device's as torch.accelerator names it: torch.compile traces this into the
    # stream current at that point of the compiled function.)
    if device is None:
        return torch.accelerator.current_stream(torch.device("tpu"))
    return torch.accelerator.current_stream(_device(device))


_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1, as torch.Stream's device_type argument


def default_stream(device: Any = None) -> torch.Stream:
    """The device's default stream (id 0), where work goes unless another stream is current."""
    return torch.Stream(stream_id=0, device_index=_index(device), device_type=_PRIVATEUSE1)


def set_stream(stream: torch.Stream) -> None:
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes ``stream`` current for its device (nothing for None)."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.prev: torch.Stream | None = None

    def __enter__(self):
        if self.stream is not None:
            self.prev = current_stream(self.stream.device)
            set_stream(self.stream)

    def __exit__(self, *args: Any) -> bool:
        if self.prev is not None:
            set_stream(self.prev)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    """``with torch.tpu.stream(s): ...`` makes ``s`` current for its device. A function, as
    torch.cuda.stream is: torch.compile takes a call of it for a stream context (Dynamo's device
    interface, torchtpu/_device_interface.py) and traces the ops inside onto that stream."""
    return StreamContext(stream)


# ---------------------------------------------------------------------------------------------
# Random numbers: one default generator per device, seeded like the CPU's.


def _generator(idx: int) -> torch.Generator:
    return _C._get_default_generator(idx)


def __getattr__(name: str) -> Any:
    if name == "default_generators":
        return tuple(_generator(i) for i in range(device_count()))
    if name == "_is_initialized":  # (Google TorchTPU's name for is_initialized())
        return is_initialized()
    raise AttributeError(f"module 'torch.tpu' has no attribute '{name}'")


def get_rng_state(device: Any = "tpu") -> torch.Tensor:
    _lazy_init()  # (runs a queued torch.manual_seed first, as torch.cuda.get_rng_state does)
    return _generator(_index(device)).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: Any = "tpu") -> None:
    state = new_state.clone(memory_format=torch.contiguous_format)
    idx = _index(device)
    _lazy_call(lambda: _generator(idx).set_state(state))


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def _set_rng_state_offset(offset: int, device: Any = "tpu") -> None:
    """Positions the device's generator ``offset`` 32-bit words after its seed (as CUDA's)."""
    offset = int(offset)
    idx = _index(device)
    _lazy_call(lambda: _generator(idx).set_offset(offset))


def _get_rng_state_offset(device: Any = "tpu") -> int:
    """The number of 32-bit words the device's generator drew since its seed (as CUDA's)."""
    return _generator(_index(device)).get_offset()


def manual_seed(seed: int) -> None:
    seed = int(seed)
    idx = current_device()
    _lazy_call(lambda: _generator(idx).manual_seed(seed), seed=True)


def manual_seed_all(seed: int) -> None:
    seed = int(seed)

    def cb() -> None:
        for i in range(device_count()):
            _generator(i).manual_seed(seed)

    _lazy_call(cb, seed_all=True)


def seed() -> None:
    idx = current_device()
    _lazy_call(lambda: _generator(idx).seed())


def seed_all() -> None:
    def cb() -> None:
        random_seed = 0
        for i in range(device_count()):
            gen = _generator(i)
            if i == 0:
                gen.seed()
                random_seed = gen.initial_seed()
            else:
                gen.manual_seed(random_seed)

    _lazy_call(cb)


def initial_seed() -> int:
    _lazy_init()
    return _generator(current_device()).initial_seed()
