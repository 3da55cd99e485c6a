"""vLLM on "tpu": an out-of-tree vLLM platform (docs/ecosystem.md, "vLLM").

vLLM finds this package through the ``vllm.platform_plugins`` entry point (setup.py) and asks
``register()`` which platform class to use. The platform is active wherever torchtpu and vLLM are
installed together, unless ``TORCHTPU_VLLM=0``; ``VLLM_TARGET_DEVICE=cpu`` (vLLM's own switch)
selects vLLM's CPU backend instead, which is how the tests get their reference.

Pieces, each of them torch ops on "tpu", so every launch is charged to the cost model and
counted in ``torchtpu.metrics`` like any other (no vLLM C++ kernel reads device memory):

- ``platform.TpuPlatform``: vLLM's CPU platform with the device, the memory (the simulated HBM),
  the worker and the attention backend replaced;
- ``worker.TpuWorker`` / ``worker.TpuModelRunner``: vLLM's GPU model runner (through its CPU
  subclass) with its device buffers on "tpu", the KV cache sized from the simulated HBM;
- ``attention.TpuPagedAttentionBackend``: paged attention from torchtpu ops (cache writes by slot
  mapping, prefill, chunked prefill, decode, grouped-query attention, sliding window);
- ``kernels``: torch versions of the Triton kernels the runner launches (slot mapping);
- ``request_stats()``: per-request estimated TPU time (this module).
"""
from __future__ import annotations

import threading

from torchtpu import config

_lock = threading.Lock()
_requests: dict[str, dict] = {}


def register() -> str | None:
    """vLLM's platform-plugin hook: the qualified name of the platform class, or None."""
    if config.value("TORCHTPU_VLLM") == "0":
        return None
    return "torchtpu.vllm.platform.TpuPlatform"


def _charge(shares: dict[str, int], seconds_by_chip: dict[str, float], host_s: float) -> None:
    """Splits one model step's estimated device time over its requests by scheduled tokens."""
    total = sum(shares.values()) or 1
    with _lock:
        for req_id, tokens in shares.items():
            row = _requests.setdefault(req_id, {"tokens": 0, "steps": 0, "host_s": 0.0,
                                                "estimated_s": {}})
            row["tokens"] += tokens
            row["steps"] += 1
            row["host_s"] += host_s * tokens / total
            for chip, s in seconds_by_chip.items():
                row["estimated_s"][chip] = row["estimated_s"].get(chip, 0.0) + s * tokens / total


def _finish(req_ids) -> None:
    """With ``TORCHTPU_VLLM_REQUEST_LOG=path``, appends one JSON line per finished request to
    path (and forgets it): how a server (whose engine runs in a process of its own) reports
    each request's estimated TPU time."""
    path = config.get("TORCHTPU_VLLM_REQUEST_LOG")
    if not path or not req_ids:
        return
    import json

    with _lock:
        rows = [(r, _requests.pop(r)) for r in req_ids if r in _requests]
    if rows:
        import torch.distributed as dist

        # Each rank of a tensor-parallel engine charges its own chip: one line per rank.
        rank = dist.get_rank() if dist.is_initialized() else 0
        with open(path, "a") as f:
            for req_id, row in rows:
                f.write(json.dumps({"request_id": req_id, "rank": rank, **row}) + "\n")


def request_stats(reset: bool = False) -> dict[str, dict]:
    """Per request (vLLM's request id): scheduled tokens, model steps, this host's seconds, and
    the cost model's estimated device seconds per chip (``estimated_s``: {"v5e": ..., ...}),
    each model step's time split over its requests by their scheduled tokens. Filled by the
    worker of this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` puts it in the caller's)."""
    with _lock:
        out = {k: {**v, "estimated_s": dict(v["estimated_s"])} for k, v in _requests.items()}
        if reset:
            _requests.clear()
    return out
