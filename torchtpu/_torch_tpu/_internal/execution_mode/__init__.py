"""``torch_tpu._internal.execution_mode``: TorchTPU's eager modes over torchtpu's
(docs/eager-modes.md): ``DEFER_NEVER`` is strict eager, ``DEFER_NEVER_AND_LAUNCH_BLOCKING`` debug
eager, ``DEFER_AND_FUSE`` fused eager. ``INTERNAL_DEFER_ALL`` (TorchTPU defers every op for
torch.compile's tracing) is fused eager too: torchtpu's fused eager already records every op it
can, and compiled mode captures graphs its own way (docs/compiled-mode.md).

``DeferMode`` (DEFAULT, ALL, NEVER), ``defer_mode``, ``set_defer_mode`` and ``get_defer_mode`` are
TorchTPU's earlier names of the same modes, which its older notebooks use."""
import contextlib
import enum

import torchtpu

__all__ = ["DeferMode", "EagerMode", "cpu_fallback_mode", "defer_mode", "eager_mode",
           "get_defer_mode", "get_eager_mode", "set_defer_mode", "set_eager_mode"]


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


class DeferMode(enum.IntEnum):
    """TorchTPU's earlier mode names: DEFAULT defers and fuses, ALL defers every op, NEVER runs
    each op as it is called."""
    __str__ = enum.Enum.__str__

    DEFAULT = 0
    ALL = 1
    NEVER = 2


_DEFER_TO_EAGER = {DeferMode.DEFAULT: EagerMode.DEFER_AND_FUSE,
                   DeferMode.ALL: EagerMode.INTERNAL_DEFER_ALL,
                   DeferMode.NEVER: EagerMode.DEFER_NEVER}


def set_defer_mode(defer_mode: DeferMode) -> None:
    if not isinstance(defer_mode, DeferMode):
        raise TypeError(f"expected a torch_tpu DeferMode, got {defer_mode!r}")
    set_eager_mode(_DEFER_TO_EAGER[defer_mode])


def get_defer_mode() -> DeferMode:
    """The mode in DeferMode's terms (debug eager, which DeferMode cannot name, reads NEVER)."""
    mode = get_eager_mode()
    for defer, eager in _DEFER_TO_EAGER.items():
        if eager == mode:
            return defer
    return DeferMode.NEVER


@contextlib.contextmanager
def defer_mode(mode: DeferMode):
    """Runs the block in ``mode`` and restores the mode before it (EagerMode's, debug included)."""
    previous = get_eager_mode()
    set_defer_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)
