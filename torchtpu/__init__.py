"""torchtpu: a simulated Google TPU as an ordinary PyTorch device, ``"tpu"``.

``import torchtpu`` (or plain ``import torch``, through the ``torch.backends`` autoload entry
point) loads the native library, names PrivateUse1 ``"tpu"``, registers the device module as
``torch.tpu`` and adds ``Tensor.tpu()``, ``Module.tpu()`` and the storage methods.
"""
import os as _os
import sys as _sys

from . import config as _config  # (the standard library only: before torch is imported)

# torch's autoload imports this package while torch itself is being imported; when the user
# imports torchtpu first, keep torch from autoloading us a second time halfway through.
_autoload_env = _config.raw("TORCH_DEVICE_BACKEND_AUTOLOAD")
if "torch" not in _sys.modules:
    _os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
try:
    import torch
finally:
    if _autoload_env is None:
        _os.environ.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    else:
        _os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = _autoload_env

from . import _C  # noqa: E402  loads libtorchtpu: allocator, guard, hooks, kernels, fallback

torch.utils.rename_privateuse1_backend("tpu")

from . import tpu as _device_module  # noqa: E402

torch._register_device_module("tpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)

from . import debug  # noqa: E402,F401
from . import metrics  # noqa: E402
from .compile import inductor_route as _inductor_route  # noqa: E402
from . import _meta_kernels  # noqa: E402
from . import _accelerate_hook  # noqa: E402
from . import _custom_ops  # noqa: E402

_accelerate_hook.install()
_custom_ops.install()  # custom ops without a tpu kernel see computed memory (docs/eager-modes.md)

_meta_kernels.install()  # _grouped_mm in float32 under torch.compile (MoE models)

_inductor_route.install()  # torch.compile(model) on "tpu": backend "tpu" (docs/compiled-mode.md)
from . import _device_interface  # noqa: E402

_device_interface.install()  # Dynamo's DeviceInterface for "tpu" (docs/compiled-mode.md)
from . import _backend_meta  # noqa: E402
from ._backend_meta import copy_backend_meta  # noqa: E402,F401

_backend_meta.install()  # set_tensor_metadata's keys through fake tensors, deepcopy (docs/runtime.md)
from . import distributed as _distributed  # noqa: E402

_distributed.register()  # c10d backend "tpu_dist", the default of device "tpu" (docs/distributed.md)
from . import _torch_tpu_finder  # noqa: E402

_torch_tpu_finder.install()  # `import torch_tpu` without a real TorchTPU (docs/coming-from-torchtpu.md)
from . import profiler as _profiler  # noqa: E402

_profiler.install()  # torch.profiler.xprof_trace_handler, TorchTPU's name (docs/insight.md)
from . import _flex_attention  # noqa: E402

_flex_attention.install()  # FlexAttention takes tpu tensors (docs/cuda-parity.md)
from . import backends as _backends  # noqa: E402

_backends.install()  # torch.backends.tpu (allow_excess_precision)
from . import _libtpu_flags  # noqa: E402

_libtpu_flags.install()  # --xla_jf_conv_full_precision from LIBTPU_INIT_ARGS or absl (docs/precision.md)
from . import lightning as _lightning  # noqa: E402  (imports no Lightning)

_lightning.install()  # Trainer/Fabric(accelerator="torchtpu") once Lightning is imported (docs/lightning.md)
from . import torchrec as _torchrec  # noqa: E402  (imports neither TorchRec nor fbgemm_gpu)

_torchrec.install()  # fbgemm's TBE lookups and TorchRec's sharding on tpu (docs/torchrec.md)
from .tpu import (  # noqa: E402,F401
    Event,
    Stream,
    current_device,
    device_count,
    get_device_properties,
    is_available,
    synchronize,
)

__version__ = "0.1.0"


def set_fallback_mode(mode: str) -> None:
    """What an aten op without a native TPU kernel does.

    ``"warn"`` (default): run it on the CPU, count it in :mod:`torchtpu.metrics` and warn once
    per op; ``"silent"``: the same without the warning; ``"error"``: raise NotImplementedError
    naming the op. The initial mode comes from ``TORCHTPU_FALLBACK``.
    """
    _C.set_fallback_mode(mode)


def get_fallback_mode() -> str:
    return _C.get_fallback_mode()


def set_eager_mode(mode: str) -> None:
    """Selects how ops run in the whole process: ``"strict"`` (default: enqueued on the device
    stream, the host returns at once, errors surface at the next synchronization), ``"debug"``
    (synchronous on the calling thread, errors at the faulting op) or ``"fused"``
    (DeferAndFuse: ops are recorded and run as fused regions). Pending work is finished first.
    Initially TORCHTPU_EAGER_MODE, or TPU_LAUNCH_BLOCKING=1 (debug), TPU_DEFER_AND_FUSE=1
    (fused). An op that is running when another thread switches finishes in the mode it started
    in (docs/eager-modes.md, "Threads")."""
    sync()
    _C.set_eager_mode(mode)


def get_eager_mode() -> str:
    """The mode ops run in."""
    return _C.get_eager_mode()


class eager_mode:
    """Scopes an eager mode: ``with torchtpu.eager_mode("debug"): ...`` sets the process's mode
    and restores the previous one on exit. The mode is the process's, not the thread's: autograd
    runs backward on threads of its own, which must run in the mode of the forward pass. Ops
    running in other threads when it switches finish in the mode they started in
    (docs/eager-modes.md, "Threads")."""

    def __init__(self, mode: str):
        self.mode = mode
        self.prev: str | None = None

    def __enter__(self):
        self.prev = get_eager_mode()
        set_eager_mode(self.mode)
        return self

    def __exit__(self, *args) -> bool:
        set_eager_mode(self.prev)
        return False


def set_check_nans(on: bool) -> None:
    """In debug mode, check every result for NaN/Inf and raise naming the first op that made
    one (initially TORCHTPU_CHECK_NANS=1)."""
    _C.set_check_nans(bool(on))


def sync() -> None:
    """Waits for all work queued on every device (and raises a queued error, naming its op)."""
    _C.sync()


class dry_run:
    """A dry run (docs/insight.md, "Dry runs"): while it is on, tensors on the device carry
    shapes, dtypes and strides but no values, and every op computes only its results' metadata
    and is charged to the cost model. Memory statistics and out-of-memory errors are those of
    the simulated chip's HBM; no host memory backs the device tensors, so models larger than
    this machine can be estimated. Reading values (``.item()``, ``.cpu()``, printing) raises an
    error that names the dry run. Use as a context manager (``with torchtpu.dry_run(): ...``)
    or a decorator; ``TORCHTPU_DRY_RUN=1`` turns it on for the whole process. Tensors made in a
    dry run keep no values after it.
    """

    def __enter__(self):
        self._previous = _C.dry_run()
        _C.set_dry_run(True)
        return self

    def __exit__(self, *exc):
        _C.set_dry_run(self._previous)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dry_run():
                return fn(*args, **kwargs)

        return wrapper


def is_dry_run() -> bool:
    """True while a dry run is on (``torchtpu.dry_run()`` or ``TORCHTPU_DRY_RUN=1``)."""
    return _C.dry_run()


def cmake_prefix_path() -> str:
    """The folder to add to CMAKE_PREFIX_PATH for ``find_package(torchtpu)``."""
    return _os.path.join(_os.path.dirname(__file__), "share", "cmake")


def _finish_pending_work() -> None:
    # Work still queued on the device streams at exit must not run while the interpreter and
    # torch tear down; an error it raises is reported, not lost. After a Ctrl-C (a
    # KeyboardInterrupt raised by a wait for the device, or one that ends the program, or one
    # during this drain) the queued work is dropped instead: nothing can observe it any more,
    # and the user asked to stop.
    interrupted = _C.interrupted_once() or isinstance(
        getattr(_sys, "last_value", None), KeyboardInterrupt
    )
    if not interrupted:
        try:
            _C.sync()
            _let_engine_threads_finish()
            return
        except KeyboardInterrupt:
            pass
        except Exception as e:  # noqa: BLE001
            _sys.stderr.write(f"torchtpu: queued device work failed at exit: {e}\n")
            return
    dropped = _C.cancel_queued_work()
    if dropped:
        _sys.stderr.write(
            f"torchtpu: interrupted: {dropped} queued device operations were dropped at exit\n"
        )


def _let_engine_threads_finish() -> None:
    # The autograd engine's thread for "tpu" releases a finished backward pass's state (which
    # holds Python objects) after the host has moved on, and needs the GIL for it. If the
    # interpreter starts finalizing first, that thread is ended inside a destructor and the
    # process aborts with "terminate called without an active exception" (PyTorch's own race,
    # pytorch/pytorch#190489). The host's waits for the device may run the queued work on both
    # cores (docs/runtime.md, "One OpenMP team"), so the engine's thread may not have run since.
    # Handing over the GIL and the core for a moment lets it finish (with the worker's loops run
    # serially, a design tried on the way, a strict training script aborted in 5 of 40 runs
    # without this and in none with it).
    import time

    time.sleep(0.001)


def _backward_on_the_calling_thread() -> bool:
    """Backward passes over "tpu" tensors started on the importing thread run on that thread, as
    the CPU's do, instead of on the autograd engine's thread for "tpu" (docs/runtime.md,
    "Backward on the calling thread"): device work runs on the thread that keeps the process's
    OpenMP team, and no second team is started beside it. TORCHTPU_BACKWARD_ON_CALLER=0 keeps
    PyTorch's default. Not done where CUDA, XPU or MPS is available (their backward passes would
    move too) or when the importing thread is not the main thread. Returns whether it was done."""
    import threading

    try:
        on = _config.flag("TORCHTPU_BACKWARD_ON_CALLER")
    except ValueError as e:
        raise RuntimeError(str(e)) from None
    if not on or threading.current_thread() is not threading.main_thread():
        return False
    others = (torch.cuda.is_available(),
              hasattr(torch, "xpu") and torch.xpu.is_available(),
              torch.backends.mps.is_available())
    if any(others):
        return False
    torch._C._set_multithreading_enabled(False)
    return True


backward_on_calling_thread = _backward_on_the_calling_thread()

import atexit as _atexit  # noqa: E402

_atexit.register(_finish_pending_work)

if _config.flag("TORCHTPU_METRICS_REPORT"):
    _atexit.register(lambda: _sys.stderr.write(metrics.report() + "\n"))


def _autoload():
    """Entry point of the ``torch.backends`` group: importing this package did the work."""
