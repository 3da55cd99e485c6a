"""``torch_tpu._internal.utils``: TorchTPU's debugging utilities (``utils``: comparisons, the
tracers and model printing; ``test_utils``: the comparison and its tolerance suggestions;
``tracer_utils``: formatting the tracers' records and replaying them on another device;
``log_utils``: logging to standard error; ``benchmarking``: step-time statistics for TensorBoard)."""
from torch_tpu._internal.utils import log_utils, test_utils, tracer_utils, utils  # noqa: F401
from torch_tpu._internal.utils.utils import CheckValueMode, assert_close, open_output  # noqa: F401
