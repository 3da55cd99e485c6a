"""vLLM's platform for "tpu" (torchtpu/vllm/__init__.py).

vLLM's CPU platform is the base (this is a host-driven device: no CUDA graphs, no async
scheduling, Gloo for the host groups), with the device, the memory and every kernel choice
replaced: ``PlatformEnum.OOT`` makes vLLM's custom ops (RMSNorm, SiLU-and-mul, rotary embedding)
run their PyTorch-native forms, the linear layers stay ``F.linear`` (the CPU platform's oneDNN
GEMMs are chosen by ``is_cpu()``, which is false here), attention is
``attention.TpuPagedAttentionBackend`` and the runner's Triton kernels are ``kernels``.
"""
from __future__ import annotations

import os

import torch

from vllm.logger import init_logger
from vllm.platforms.cpu import CpuPlatform
from vllm.platforms.interface import PlatformEnum

logger = init_logger("vllm.torchtpu")


class TpuPlatform(CpuPlatform):
    _enum = PlatformEnum.OOT
    device_name: str = "tpu"
    device_type: str = "tpu"
    dispatch_key: str = "PrivateUse1"
    dist_backend: str = "gloo"
    device_control_env_var: str = "TPU_VISIBLE_CHIPS"
    simple_compile_backend: str = "eager"

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float32, torch.float16]

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        import torchtpu  # noqa: F401

        return torch.tpu.get_device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        import torchtpu  # noqa: F401

        return torch.tpu.get_device_properties(device_id).total_memory

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.tpu.set_device(device)

    @classmethod
    def inference_mode(cls):
        return torch.no_grad()

    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None) -> str:
        if attn_selector_config.use_mla or attn_selector_config.use_sparse:
            raise NotImplementedError("MLA and sparse attention are not supported on tpu.")
        from . import attention

        return attention.PATH

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        from vllm.config import CompilationMode

        cache_config = vllm_config.cache_config
        if not cache_config.user_specified_block_size:
            cache_config.block_size = 16
        scheduler_config = vllm_config.scheduler_config
        scheduler_config.async_scheduling = False
        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = "torchtpu.vllm.worker.TpuWorker"
        if parallel_config.enable_dbo:
            parallel_config.enable_dbo = False
        compilation_config = vllm_config.compilation_config
        compilation_config.cudagraph_capture_sizes = []
        if compilation_config.mode != CompilationMode.NONE:
            # Eager on "tpu" (the eager mode is torchtpu's: strict, debug or fused). vLLM's
            # compiled path goes through Inductor's CPU code generation, not torchtpu.
            logger.info("torchtpu: vLLM compilation disabled (eager mode %s).",
                        _eager_mode())
            compilation_config.mode = CompilationMode.NONE
        from vllm.config import CUDAGraphMode

        compilation_config.cudagraph_mode = CUDAGraphMode.NONE
        if vllm_config.model_config is not None:
            vllm_config.model_config.enforce_eager = True
        vllm_config.profiler_config.torch_profiler_dump_cuda_time_total = False
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        os.environ["VLLM_DISABLE_SHARED_EXPERTS_STREAM"] = "1"

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return False

    @classmethod
    def opaque_attention_op(cls) -> bool:
        # Attention is called directly by the layer (eager), not through vLLM's custom op.
        return False

    @classmethod
    def support_hybrid_kv_cache(cls) -> bool:
        return False

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        # torch.distributed's collectives on the device group (vLLM's CPU communicator reduces
        # through shared-memory C++ ops that would read device memory).
        return ("vllm.distributed.device_communicators.base_device_communicator."
                "DeviceCommunicatorBase")

    @classmethod
    def import_kernels(cls) -> None:
        # vLLM's CPU extension stays loaded (some of vLLM's host code calls it on host
        # tensors); it never receives a tpu tensor (test/vllm/test_vllm_tpu.py checks it).
        super().import_kernels()

    @classmethod
    def register_triton_kernel_overrides(cls) -> None:
        from . import kernels

        kernels.register()

    @classmethod
    def pack_kv_cache(cls, kv_cache, indices) -> None:
        raise NotImplementedError("KV transfer is not supported on tpu.")

    @classmethod
    def get_current_memory_usage(cls, device=None) -> float:
        torch.tpu.synchronize()
        return float(torch.tpu.memory_allocated(device))

    @classmethod
    def num_compute_units(cls, device_id: int = 0) -> int:
        return torch.tpu.get_device_properties(device_id).multi_processor_count


def _eager_mode() -> str:
    import torchtpu

    return torchtpu.get_eager_mode()
