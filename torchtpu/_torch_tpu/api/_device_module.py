"""``torch_tpu.api._device_module``: the module registered as ``torch.tpu`` (torchtpu/tpu.py)."""
from torchtpu.tpu import *  # noqa: F401,F403
from torchtpu.tpu import (  # noqa: F401
    _clear_cache, _get_cache_hits, _get_cache_misses, _get_cache_requests, _get_cache_stats,
    _get_dump_on_cache_miss, _hbm_usage_summary, _init_runtime, _init_runtime_options,
    _set_allow_cache, _set_cache_only, _set_dump_on_cache_miss, _shutdown_runtime)
