"""The libtpu flags the simulated chip honours, where a TPU program passes them: in
``LIBTPU_INIT_ARGS`` (read when torchtpu loads) or on an absl command line (``app.run`` parses
``--xla_jf_conv_full_precision`` once torchtpu or ``import torch_tpu`` has defined it, as libtpu's
flags are defined in a TorchTPU process).

Honoured: ``--xla_jf_conv_full_precision[=true|false]``, which on a TPU makes every float32
matmul and convolution run at the highest precision whatever the program or a scope asks (the
"for tests only" switch TorchTPU's mingpt example passes; docs/precision.md). Other libtpu flags
in ``LIBTPU_INIT_ARGS`` are not read; on an absl command line they stay undefined, so ``app.run``
refuses them as it does without libtpu.
"""
from __future__ import annotations

import shlex
import sys

from . import _C, config

FULL_PRECISION = "xla_jf_conv_full_precision"
_TRUE = ("", "1", "true", "True", "t")
_FALSE = ("0", "false", "False", "f")


def _parse_bool(name: str, text: str) -> bool:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"LIBTPU_INIT_ARGS: --{name} takes true or false, got {text!r}")


def flags_in(args: str) -> dict[str, bool]:
    """The honoured flags set in a LIBTPU_INIT_ARGS string (``--name``, ``--name=v``,
    ``--noname``)."""
    found: dict[str, bool] = {}
    for word in shlex.split(args):
        if not word.startswith("--"):
            continue
        name, _, text = word[2:].partition("=")
        if name == FULL_PRECISION:
            found[name] = _parse_bool(name, text)
        elif name == "no" + FULL_PRECISION and not text:
            found[FULL_PRECISION] = False
    return found


def set_full_precision(on: bool) -> None:
    """Forces (or stops forcing) "highest" for every float32 matmul and convolution."""
    _C.set_full_precision(bool(on))


def define_absl_flag(import_absl: bool = False) -> None:
    """Defines the flag for absl's parser, so that parsing a command line applies it: when absl is
    imported already (a program that calls ``app.run`` imports it before torch), or, with
    ``import_absl``, when it is importable (``import torch_tpu``: TorchTPU itself loads absl)."""
    if "absl.flags" not in sys.modules:
        if not import_absl:
            return
        try:
            import absl.flags  # noqa: F401
        except ImportError:
            return
    from absl import flags

    if FULL_PRECISION in flags.FLAGS:
        return
    flags.DEFINE_bool(FULL_PRECISION, _C.full_precision_forced(),
                      "libtpu: every float32 matmul and convolution at the highest precision "
                      "(the simulated chip honours it: torchtpu/_libtpu_flags.py)")

    def apply(value):
        set_full_precision(value)
        return True

    flags.register_validator(FULL_PRECISION, apply)


def install() -> None:
    args = config.get("LIBTPU_INIT_ARGS")
    if args:
        for name, on in flags_in(args).items():
            if name == FULL_PRECISION:
                set_full_precision(on)
    define_absl_flag()
