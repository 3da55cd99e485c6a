"""``torch_tpu._internal.utils``: TorchTPU's debugging utilities."""
from torch_tpu._internal.utils import utils  # noqa: F401
from torch_tpu._internal.utils.utils import CheckValueMode, assert_close, open_output  # noqa: F401
