"""Paged attention on "tpu" from torchtpu ops (torchtpu/vllm/__init__.py).

The KV cache of a layer is one device tensor, blocks of ``block_size`` token slots, each slot
holding the key and the value of every KV head side by side (``[..., :head_size]`` the key,
``[..., head_size:]`` the value), laid out block, slot, head (vLLM's ``LBNHC``), so the slots
are the rows of a ``(num_blocks * block_size, num_kv_heads, 2 * head_size)`` view.

- Cache writes: one ``index_copy_`` of the step's keys and values into the rows of their slots
  (vLLM's slot mapping).
- Attention, the same code for prefill, chunked prefill, decode and any mix: the queries of the
  step are gathered into ``(requests, longest query)`` rows, each request's context (its cached
  tokens, the step's included) gathered from the cache through its block table into
  ``(requests, longest context)`` rows, scores are one batched matmul per KV head group
  (grouped-query attention: the query heads sharing a KV head are rows of one matmul), masked
  (causal by absolute position, the context length, the sliding window), softmax in float32, and
  a second batched matmul; the rows of the step's tokens are gathered back into vLLM's output.

The two ops that touch the cache are each one launch priced by the bytes they move (rows read
and written, and their indices): torchtpu's generic price for a gather or a scatter is a pass
over every operand, the whole cache of the layer here, which made the cache ops 86-91% of the
estimated time of a step with a 64 MiB cache (benchmarks/vllm.py before this pricing) and would
grow with the cache. They run in a ``_ForeignOp`` scope (work before them first, theirs
synchronously: docs/eager-modes.md, "C++ extensions"), their generic charges kept off the
ledger (``begin_uncharged``), and ``charge_kernel`` charges the launch (docs/custom-kernels.md,
"Pricing"), under the names ``torchtpu_vllm::kv_cache_write`` and
``torchtpu_vllm::kv_cache_gather``.

What depends on the step only (gather indices, the mask) is built once per step on the host by
the metadata builder from vLLM's host copies of the query starts and sequence lengths, and copied
to the device; what reads device values (block table, slots, cache) is device ops, so every step
is a fixed set of launches per layer that the cost model charges like any other.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from torchtpu import _C
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
    MultipleOf,
)
from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend
from vllm.v1.kv_cache_interface import KVCacheLayout

PATH = "torchtpu.vllm.attention.TpuPagedAttentionBackend"


class TpuPagedAttentionBackend(AttentionBackend):
    forward_includes_kv_cache_update: bool = False
    accept_output_buffer: bool = True
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float32, torch.bfloat16, torch.float16]
    supported_kv_cache_dtypes: ClassVar[list] = ["auto", "float16", "bfloat16"]

    @staticmethod
    def get_name() -> str:
        # vLLM names backends by its enum; a third party's is CUSTOM (registered below).
        return "CUSTOM"

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None):
        return [MultipleOf(1)]

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return []

    @classmethod
    def supports_head_size(cls, head_size: int) -> bool:
        return head_size > 0

    @classmethod
    def supported_kv_cache_layouts(cls):
        return (KVCacheLayout.LBNHC,)

    @classmethod
    def supports_sliding_window(cls) -> bool:
        return True

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER

    @staticmethod
    def get_impl_cls():
        return TpuPagedAttentionImpl

    @staticmethod
    def get_builder_cls():
        return TpuPagedAttentionMetadataBuilder


@dataclass
class TpuPagedAttentionMetadata:
    num_actual_tokens: int
    num_reqs: int
    max_query_len: int
    max_seq_len: int
    slot_mapping: torch.Tensor  # (tokens,) device: the cache row of each token of the step
    context_slots: torch.Tensor  # (reqs, max_seq_len) device: the cache rows of each context
    query_rows: torch.Tensor  # (reqs * max_query_len,) device: token of each padded query row
    output_rows: torch.Tensor  # (tokens,) device: padded query row of each token
    positions: torch.Tensor  # (reqs, max_query_len) host int64: absolute position of a query
    seq_lens: torch.Tensor  # (reqs,) host int64
    masks: dict  # sliding window (or -1) -> (reqs, 1, max_query_len, max_seq_len) device bool
    device: torch.device

    def mask(self, window: int) -> torch.Tensor:
        m = self.masks.get(window)
        if m is None:
            j = torch.arange(self.max_seq_len)
            pos = self.positions[:, :, None]
            allowed = (j <= pos) & (j < self.seq_lens[:, None, None])
            if window > 0:
                allowed &= j > pos - window
            # Padding rows (past a request's query) see slot 0, so their softmax stays finite.
            allowed[..., 0] |= ~allowed.any(-1)
            m = allowed[:, None].to(self.device)
            self.masks[window] = m
        return m


class TpuPagedAttentionMetadataBuilder(AttentionMetadataBuilder[TpuPagedAttentionMetadata]):
    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size
        self.device = device

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
              fast_build: bool = False) -> TpuPagedAttentionMetadata:
        m = common_attn_metadata
        num_reqs, num_tokens = m.num_reqs, m.num_actual_tokens
        qsl = m.query_start_loc_cpu[: num_reqs + 1].to(torch.int64)
        seq_lens = m.seq_lens_cpu_upper_bound
        if seq_lens is None:
            seq_lens = m.seq_lens[:num_reqs].cpu()
        seq_lens = seq_lens[:num_reqs].to(torch.int64)
        query_lens = qsl[1:] - qsl[:-1]
        max_q = int(query_lens.max()) if num_reqs else 0
        max_s = int(seq_lens.max()) if num_reqs else 0
        i = torch.arange(max_q)
        valid = i[None, :] < query_lens[:, None]
        query_rows = torch.where(valid, qsl[:-1, None] + i[None, :], 0).reshape(-1)
        req_of_token = torch.repeat_interleave(torch.arange(num_reqs), query_lens)
        output_rows = req_of_token * max_q + (torch.arange(num_tokens) - qsl[req_of_token])
        positions = (seq_lens - query_lens)[:, None] + i[None, :]
        # Cache rows of every context token, from the block table (device values).
        j = torch.arange(max_s)
        cols = (j // self.block_size).to(self.device)
        offs = (j % self.block_size).to(self.device)
        blocks = m.block_table_tensor[:num_reqs].index_select(1, cols).to(torch.int64)
        context_slots = blocks * self.block_size + offs
        return TpuPagedAttentionMetadata(
            num_actual_tokens=num_tokens, num_reqs=num_reqs, max_query_len=max_q,
            max_seq_len=max_s, slot_mapping=m.slot_mapping[:num_tokens],
            context_slots=context_slots, query_rows=query_rows.to(self.device),
            output_rows=output_rows.to(self.device), positions=positions,
            seq_lens=seq_lens, masks={}, device=self.device)


def _priced(name: str, hbm_bytes: int, fn):
    """fn() as one launch charged hbm_bytes of HBM traffic (the module docstring)."""
    scope = _C._ForeignOp()
    try:
        _C.begin_uncharged()
        try:
            out = fn()
        finally:
            _C.end_uncharged()
    finally:
        del scope
    _C.charge_kernel(name, [], 0.0, float(hbm_bytes))
    return out


def _slot_rows(kv_cache: torch.Tensor) -> torch.Tensor:
    """(num_blocks, kv_heads, block_size, 2 * head_size) in LBNHC memory -> its slot rows."""
    num_blocks, heads, block_size, width = kv_cache.shape
    return kv_cache.permute(0, 2, 1, 3).view(num_blocks * block_size, heads, width)


class TpuPagedAttentionImpl(AttentionImpl):
    def __init__(self, num_heads, head_size, scale, num_kv_heads, alibi_slopes, sliding_window,
                 kv_cache_dtype, logits_soft_cap=None, attn_type=AttentionType.DECODER,
                 kv_sharing_target_layer_name=None, sinks=None) -> None:
        if alibi_slopes is not None:
            raise NotImplementedError("ALiBi is not supported by torchtpu's paged attention")
        if sinks is not None:
            raise NotImplementedError(
                "attention sinks are not supported by torchtpu's paged attention")
        if attn_type != AttentionType.DECODER:
            raise NotImplementedError(f"{attn_type} attention is not supported on tpu")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads
        self.group = num_heads // num_kv_heads
        self.sliding_window = -1 if sliding_window is None else int(sliding_window)
        self.logits_soft_cap = logits_soft_cap or 0.0
        self.kv_cache_dtype = kv_cache_dtype
        self.attn_type = attn_type
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping) -> None:
        n = slot_mapping.shape[0]
        rows = _slot_rows(kv_cache)
        kv = torch.cat([key[:n], value[:n]], dim=-1).to(rows.dtype)
        slots = slot_mapping.clamp_min(0)
        # The step's rows read and written once, and their slot indices.
        nbytes = 2 * kv.numel() * kv.element_size() + n * slots.element_size()
        _priced("torchtpu_vllm::kv_cache_write", nbytes, lambda: rows.index_copy_(0, slots, kv))

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output,
                output_scale=None, output_block_scale=None):
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("fused output quantization is not supported on tpu")
        if attn_metadata is None:  # profiling run
            return output.fill_(0)
        md: TpuPagedAttentionMetadata = attn_metadata
        t, r, q_len, s_len = md.num_actual_tokens, md.num_reqs, md.max_query_len, md.max_seq_len
        h, hk, g, d = self.num_heads, self.num_kv_heads, self.group, self.head_size
        rows = _slot_rows(kv_cache)
        index = md.context_slots.reshape(-1)
        # Every context row read from the cache and written gathered, and the row indices.
        row_bytes = rows[0].numel() * rows.element_size()
        nbytes = 2 * index.numel() * row_bytes + index.numel() * index.element_size()
        ctx = _priced("torchtpu_vllm::kv_cache_gather", nbytes,
                      lambda: rows.index_select(0, index)).view(r, s_len, hk, 2 * d)
        k = ctx[..., :d].permute(0, 2, 3, 1)  # (r, hk, d, s)
        v = ctx[..., d:].permute(0, 2, 1, 3)  # (r, hk, s, d)
        q = query[:t].view(t, h, d).index_select(0, md.query_rows)  # (r * q_len, h, d)
        q = q.view(r, q_len, hk, g, d).permute(0, 2, 3, 1, 4).reshape(r, hk, g * q_len, d)
        scores = torch.matmul(q, k.to(q.dtype)).float().mul_(self.scale)
        if self.logits_soft_cap:
            scores = torch.tanh(scores / self.logits_soft_cap) * self.logits_soft_cap
        scores = scores.view(r, hk, g, q_len, s_len)
        scores = scores.masked_fill(~md.mask(self.sliding_window)[:, :, None], float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(v.dtype).view(r, hk, g * q_len, s_len)
        out = torch.matmul(probs, v)  # (r, hk, g * q_len, d)
        out = out.view(r, hk, g, q_len, d).permute(0, 3, 1, 2, 4).reshape(r * q_len, h, d)
        output[:t].view(t, h, d).copy_(out.index_select(0, md.output_rows))
        return output


register_backend(AttentionBackendEnum.CUSTOM, PATH)
