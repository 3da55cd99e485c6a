"""vLLM's worker and model runner for "tpu" (torchtpu/vllm/__init__.py).

The runner is vLLM's GPU model runner as its CPU subclass sets it up (no CUDA graphs, streams or
events), but with the device buffers left on the device: input ids, positions, block tables,
slot mappings and the sampler's tensors live on "tpu", copied from their host halves by vLLM's own
``CpuGpuBuffer`` copies, so the model, attention and sampling are device launches. The KV cache
is device memory, its size a fraction (``gpu_memory_utilization``) of the simulated HBM less what
the weights and a profiling step hold (or ``kv_cache_memory_bytes``).
"""
from __future__ import annotations

import contextlib
import time

import torch

import torchtpu  # noqa: F401  (registers "tpu")
from torchtpu import config
from vllm.logger import init_logger
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.cpu_model_runner import CPUModelRunner, _torch_cuda_wrapper
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment

from . import _charge, _finish

logger = init_logger("vllm.torchtpu")

# The chips whose estimated time each request is charged (torchtpu.vllm.request_stats()).
CHIPS = ("v5e", "v6e", "v7")
# TORCHTPU_VLLM_REQUEST_STATS=0: no per-request statistics (pricing the ledger for the three
# chips at every step is host time of its own).
_STATS = config.value("TORCHTPU_VLLM_REQUEST_STATS") != "0"


class TpuModelRunner(CPUModelRunner):
    def __init__(self, vllm_config, device: torch.device):
        with _torch_cuda_wrapper():
            GPUModelRunner.__init__(self, vllm_config, device)
        self.use_cuda_graph = False
        self._last_estimate: dict[str, float] | None = None

    def _sync_device(self) -> None:
        torch.tpu.synchronize(self.device)

    def _step_estimates(self) -> dict[str, float]:
        est = {}
        for chip in CHIPS:
            est[chip] = torchtpu.metrics.estimate(chip=chip)["device_time_s"]
        return est

    def execute_model(self, scheduler_output, *args, **kwargs):
        _finish(getattr(scheduler_output, "finished_req_ids", None))
        shares = dict(getattr(scheduler_output, "num_scheduled_tokens", {}) or {})
        if not shares or not _STATS:
            return super().execute_model(scheduler_output, *args, **kwargs)
        before = self._last_estimate or self._step_estimates()
        start = time.perf_counter()
        out = super().execute_model(scheduler_output, *args, **kwargs)
        return self._charged(out, shares, before, start)

    def sample_tokens(self, *args, **kwargs):
        pending = getattr(self, "_pending_charge", None)
        self._pending_charge = None
        out = super().sample_tokens(*args, **kwargs)
        if pending is not None:
            shares, before, start = pending
            self._record(shares, before, start)
        return out

    def _charged(self, out, shares, before, start):
        if out is None:
            # vLLM samples in sample_tokens(); the step is charged once that has run.
            self._pending_charge = (shares, before, start)
        else:
            self._record(shares, before, start)
        return out

    def _record(self, shares, before, start) -> None:
        host_s = time.perf_counter() - start
        after = self._step_estimates()
        self._last_estimate = after
        _charge(shares, {c: after[c] - before[c] for c in CHIPS}, host_s)


class TpuWorker(CPUWorker):
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method,
                 is_driver_worker=False):
        # vLLM's CPU worker binds NUMA memory for the host; here the memory is the device's.
        Worker.__init__(self, vllm_config, local_rank, rank, distributed_init_method,
                        is_driver_worker=is_driver_worker)
        self.parallel_config.disable_custom_all_reduce = True

    def _maybe_get_memory_pool_context(self, tag: str):
        # vLLM's sleep-mode memory pool is CUDA's; torchtpu's caching allocator holds everything.
        return contextlib.nullcontext()

    def init_device(self):
        self.device = torch.device("tpu", self.local_rank)
        torch.tpu.set_device(self.device)
        # Several ranks: the device groups are torchtpu's "tpu_dist" (collectives on tpu tensors,
        # charged for the ICI), the host groups Gloo as vLLM makes them.
        backend = "gloo"
        if self.parallel_config.world_size > 1:
            import torchtpu.distributed  # noqa: F401  (registers "tpu_dist")

            backend = "tpu_dist"
        init_worker_distributed_environment(
            self.vllm_config, self.rank, self.distributed_init_method, self.local_rank,
            backend)
        set_random_seed(self.model_config.seed)
        self.model_runner = TpuModelRunner(self.vllm_config, self.device)

    def determine_available_memory(self) -> int:
        explicit = self.cache_config.kv_cache_memory_bytes
        if explicit is not None:
            return int(explicit)
        total = torch.tpu.get_device_properties(self.device).total_memory
        torch.tpu.synchronize(self.device)
        torch.tpu.reset_peak_memory_stats(self.device)
        # A step of max_num_batched_tokens tokens, as vLLM's GPU worker profiles one.
        self.model_runner.profile_run()
        torch.tpu.synchronize(self.device)
        peak = torch.tpu.max_memory_allocated(self.device)
        requested = int(total * self.cache_config.gpu_memory_utilization)
        available = requested - peak
        logger.info("torchtpu: %.3f GiB of simulated HBM (%s), %.3f GiB requested, "
                    "%.3f GiB peak after profiling: %.3f GiB for the KV cache.",
                    total / 2**30, torch.tpu.get_device_name(self.device),
                    requested / 2**30, peak / 2**30, available / 2**30)
        if available <= 0:
            raise ValueError(
                f"No simulated HBM left for the KV cache: {requested} bytes requested "
                f"(gpu_memory_utilization={self.cache_config.gpu_memory_utilization}), "
                f"{peak} bytes used by the weights and a profiling step.")
        return available

    def compile_or_warm_up_model(self):
        set_random_seed(self.model_config.seed, self.parallel_config.data_parallel_index)
        from vllm.v1.worker.worker_base import CompilationTimes

        return CompilationTimes(
            language_model=self.compilation_config.compilation_time,
            encoder=self.compilation_config.encoder_compilation_time)

    def sleep(self, level: int = 1) -> None:
        logger.warning("sleep mode is not supported on tpu, ignored.")

    def wake_up(self, tags=None) -> None:
        logger.warning("sleep mode is not supported on tpu, ignored.")
