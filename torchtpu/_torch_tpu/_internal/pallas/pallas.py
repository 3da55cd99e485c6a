"""``torch_tpu._internal.pallas.pallas``: where TorchTPU defines its Pallas API; the same names
as the package, from torchtpu/pallas/."""
from torchtpu.pallas import custom_jax_kernel, custom_kernel, jax_op  # noqa: F401
