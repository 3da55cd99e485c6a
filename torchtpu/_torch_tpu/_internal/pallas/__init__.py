"""``torch_tpu._internal.pallas``: TorchTPU's Pallas API (``jax_op``, ``custom_jax_kernel``,
``custom_kernel``) over torchtpu's one implementation, torchtpu/pallas/ (docs/custom-kernels.md).
JAX is imported at the first ``jax_op`` call, not here."""
from torchtpu.pallas import custom_jax_kernel, custom_kernel, jax_op  # noqa: F401

from . import pallas  # noqa: F401,E402  (TorchTPU's module of the same names)

__all__ = ["custom_jax_kernel", "custom_kernel", "jax_op"]
