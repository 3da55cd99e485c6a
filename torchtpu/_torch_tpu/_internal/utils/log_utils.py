"""``torch_tpu._internal.utils.log_utils``: TorchTPU's ``log_to_stderr()``, which its example
programs call first thing: absl's log calls go through Python's ``logging``, and the root logger
writes every INFO-or-higher record to standard error with a time, level and logger name."""
import logging
import sys

__all__ = ["log_to_stderr"]

_FORMAT = "%(asctime)s [%(levelname)s] %(name)s: %(message)s"


def log_to_stderr() -> None:
    """Routes absl logging (when absl is installed) into Python's ``logging`` and replaces the
    root logger's handlers with one that writes to standard error, at level INFO."""
    try:
        from absl import logging as absl_logging
    except ImportError:  # absl is optional here; programs that log through it import it first
        absl_logging = None
    if absl_logging is not None:
        absl_logging.use_python_logging()
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
