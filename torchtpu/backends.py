"""``torch.backends.tpu``: the device's compiler switches, set before ``torch.compile`` compiles.

``allow_excess_precision`` (default True, as XLA's flag of that name): True gives compiled mode
the option to keep a bfloat16 or float16 matmul's float32 accumulator when the graph only widens
the result to float32 again, dropping the narrowing cast in between (what XLA's
SimplifyFPConversions does on the chip); False keeps every cast the program asks for, so compiled
results equal eager ones. Read when a graph is compiled (torchtpu/_excess_precision.py): set it,
then ``torch.compiler.reset()`` for functions compiled already. Eager modes never use the option
(docs/compiled-mode.md, "Excess precision")."""
from __future__ import annotations

import sys
import types

import torch

__all__ = ["allow_excess_precision"]


class _TpuBackendModule(types.ModuleType):
    _allow_excess_precision = True

    @property
    def allow_excess_precision(self) -> bool:
        return type(self)._allow_excess_precision

    @allow_excess_precision.setter
    def allow_excess_precision(self, value) -> None:
        if not isinstance(value, bool):
            raise TypeError("torch.backends.tpu.allow_excess_precision must be True or False, "
                            f"not {value!r}")
        type(self)._allow_excess_precision = value


def install() -> None:
    """Makes this module ``torch.backends.tpu``."""
    module = sys.modules[__name__]
    module.__class__ = _TpuBackendModule
    sys.modules["torch.backends.tpu"] = module
    torch.backends.tpu = module
