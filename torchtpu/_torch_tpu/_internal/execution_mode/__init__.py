"""``torch_tpu._internal.execution_mode``: TorchTPU's eager modes over torchtpu's
(docs/eager-modes.md): ``DEFER_NEVER`` is strict eager, ``DEFER_NEVER_AND_LAUNCH_BLOCKING`` debug
eager, ``DEFER_AND_FUSE`` fused eager. ``INTERNAL_DEFER_ALL`` (TorchTPU defers every op for
torch.compile's tracing) is fused eager too: torchtpu's fused eager already records every op it
can, and compiled mode captures graphs its own way (docs/compiled-mode.md)."""
import contextlib
import enum

import torchtpu

__all__ = ["EagerMode", "cpu_fallback_mode", "eager_mode", "get_eager_mode", "set_eager_mode"]


class EagerMode(enum.IntEnum):
    __str__ = enum.Enum.__str__  # (EagerMode.DEFER_AND_FUSE, as TorchTPU's enum prints)

    DEFER_AND_FUSE = 0
    DEFER_NEVER = 1
    DEFER_NEVER_AND_LAUNCH_BLOCKING = 2
    INTERNAL_DEFER_ALL = 3


_MODES = {
    EagerMode.DEFER_AND_FUSE: "fused",
    EagerMode.DEFER_NEVER: "strict",
    EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING: "debug",
    EagerMode.INTERNAL_DEFER_ALL: "fused",
}
_asked_for_defer_all = False  # (the process's mode was set as INTERNAL_DEFER_ALL)


def _mode_name(mode) -> str:
    if not isinstance(mode, EagerMode):
        raise TypeError(f"expected a torch_tpu EagerMode, got {mode!r}")
    return _MODES[mode]


def set_eager_mode(mode: EagerMode) -> None:
    global _asked_for_defer_all
    torchtpu.set_eager_mode(_mode_name(mode))
    _asked_for_defer_all = mode == EagerMode.INTERNAL_DEFER_ALL


def get_eager_mode() -> EagerMode:
    name = torchtpu.get_eager_mode()
    if name == "fused":
        return EagerMode.INTERNAL_DEFER_ALL if _asked_for_defer_all else EagerMode.DEFER_AND_FUSE
    return EagerMode.DEFER_NEVER if name == "strict" else EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING


@contextlib.contextmanager
def eager_mode(mode: EagerMode):
    """Runs the block in ``mode`` and restores the mode before it, even on an exception."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)


@contextlib.contextmanager
def cpu_fallback_mode(enabled: bool):
    """Allows (``True``) or forbids (``False``: ops without a tpu kernel raise) the CPU fallback
    in the block (torchtpu.set_fallback_mode)."""
    previous = torchtpu.get_fallback_mode()
    if enabled:
        torchtpu.set_fallback_mode("warn" if previous == "error" else previous)
    else:
        torchtpu.set_fallback_mode("error")
    try:
        yield
    finally:
        torchtpu.set_fallback_mode(previous)
