"""``torch_tpu._internal.utils``: TorchTPU's debugging utilities (``utils``: comparisons, the
tracers and model printing; ``tracer_utils``: formatting the tracers' records and replaying them
on another device)."""
from torch_tpu._internal.utils import tracer_utils, utils  # noqa: F401
from torch_tpu._internal.utils.utils import CheckValueMode, assert_close, open_output  # noqa: F401
