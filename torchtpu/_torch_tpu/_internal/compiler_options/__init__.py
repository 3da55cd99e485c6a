"""``torch_tpu._internal.compiler_options``: TorchTPU's XLA compiler options for the work
materialized inside a block (``custom_compiler_options``; docs/coming-from-torchtpu.md).

TorchTPU hands these options to XLA when it compiles the graphs materialized in the block: XLA
flags (``xla_tpu_enable_deduplicated_calls``, ...) and two effort levels of its own,
``xla_optimization_level`` and ``xla_memory_fitting_level`` (``O0`` to ``O3``). They choose how
hard XLA works at scheduling, fusion and memory fitting; a program's values do not depend on
them.

torchtpu has no XLA compiler: fused eager and compiled mode plan their graphs with their own
passes (docs/design.md 3.1), which take no XLA flags. So the options are accepted and checked
as TorchTPU checks them (names and values are strings, the two levels are ``O0``-``O3``), kept on
a per-thread stack whose merged view ``current_compiler_options()`` gives (inner blocks win, as
in TorchTPU), and applied to nothing: a warning names them the first time each is set in a
process. Results are the same as without them, as on a TPU.
"""
from __future__ import annotations

import contextlib
import threading
import warnings

__all__ = ["current_compiler_options", "custom_compiler_options"]

_LEVELS = ("O0", "O1", "O2", "O3")
_LEVEL_OPTIONS = ("xla_optimization_level", "xla_memory_fitting_level")

_local = threading.local()  # .stack: the options of the blocks this thread is inside
_warned: set = set()  # option names already warned about in this process


def _stack() -> list:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _checked(options) -> dict:
    if not isinstance(options, dict):
        raise TypeError(f"custom_compiler_options takes a dict of option name -> value (strings), "
                        f"got {type(options).__name__}")
    for name, value in options.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"custom_compiler_options: option names and values are strings, got "
                            f"{name!r}: {value!r}")
        if name in _LEVEL_OPTIONS and value not in _LEVELS:
            raise ValueError(f"custom_compiler_options: {name} must be one of "
                             f"{', '.join(_LEVELS)}, got {value!r}")
    return dict(options)


def push_compiler_options(options: dict) -> None:
    """Pushes ``options`` onto this thread's stack (TorchTPU's ``compiler_options_impl``)."""
    options = _checked(options)
    new = sorted(set(options) - _warned)
    if new:
        _warned.update(new)
        warnings.warn(
            f"torch_tpu compiler options {', '.join(new)}: torchtpu simulates the TPU without "
            "XLA, so XLA compiler options apply to nothing here (fused eager and compiled mode "
            "plan graphs with torchtpu's own passes); results are unchanged "
            "(docs/coming-from-torchtpu.md)", stacklevel=4)
    _stack().append(options)


def pop_compiler_options() -> None:
    stack = _stack()
    if stack:
        stack.pop()


def current_compiler_options() -> dict:
    """The options in force on this thread: the blocks' options merged, the innermost winning
    (torchtpu's own; TorchTPU keeps the same stack inside libtpu)."""
    merged = {}
    for options in _stack():
        merged.update(options)
    return merged


@contextlib.contextmanager
def custom_compiler_options(options: dict[str, str]):
    """XLA compiler options for the work materialized in the block (TorchTPU's meaning; nested
    blocks merge, the inner options winning). On torchtpu they are checked and recorded
    (``current_compiler_options()``) but change nothing: there is no XLA compiler (this module's
    docstring). TypeError for names or values that are not strings, ValueError for an effort
    level other than O0-O3."""
    push_compiler_options(options)
    try:
        yield
    finally:
        pop_compiler_options()
