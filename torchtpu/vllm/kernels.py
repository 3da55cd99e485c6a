"""torch versions of the Triton kernels vLLM's model runner launches (torchtpu/vllm/platform.py).

vLLM's CPU platform replaces them with C++ functions (``vllm.utils.cpu_triton_utils``) that read
their tensors' memory directly; on "tpu" those tensors live in device memory, so the
replacements here are torch ops on the tensors' own device (charged and counted as any launch).
"""
from __future__ import annotations

import torch


def compute_slot_mapping(
    num_tokens: int,
    max_num_tokens: int,
    query_start_loc: torch.Tensor,  # [num_reqs + 1] int32
    positions: torch.Tensor,  # [>= num_tokens] int64
    block_table: torch.Tensor,  # [max_num_reqs, max_num_blocks_per_req] int32
    block_table_stride: int,
    slot_mapping: torch.Tensor,  # [max_num_tokens] int64
    KV_CACHE_BLOCK_SIZE: int,
    TOTAL_CP_WORLD_SIZE: int = 1,
    TOTAL_CP_RANK: int = 0,
    CP_KV_CACHE_INTERLEAVE_SIZE: int = 1,
    PAD_ID: int = -1,
    BLOCK_SIZE: int = 1024,
) -> None:
    """``vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel``: the cache slot of each
    scheduled token, from its request's block table row and its position; the rest padded."""
    if TOTAL_CP_WORLD_SIZE != 1:
        raise NotImplementedError("context parallelism is not supported on tpu")
    if num_tokens > 0:
        device = slot_mapping.device
        token = torch.arange(num_tokens, device=device, dtype=torch.int32)
        # The request of each token: how many request ends lie at or before it.
        req = torch.searchsorted(query_start_loc[1:].contiguous(), token, right=True)
        pos = positions[:num_tokens]
        block_index = torch.div(pos, KV_CACHE_BLOCK_SIZE, rounding_mode="floor")
        flat = block_table.reshape(-1)[: block_table.shape[0] * block_table_stride]
        block = flat[req.to(torch.int64) * block_table_stride + block_index].to(torch.int64)
        offset = pos - block_index * KV_CACHE_BLOCK_SIZE
        slot_mapping[:num_tokens] = block * KV_CACHE_BLOCK_SIZE + offset
    if max_num_tokens > num_tokens:
        slot_mapping[num_tokens:max_num_tokens].fill_(PAD_ID)


_registered = False


def register() -> None:
    global _registered
    if _registered:
        return
    from vllm.triton_utils.dispatcher import register_kernels

    register_kernels({
        "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel": compute_slot_mapping,
    })
    _registered = True
