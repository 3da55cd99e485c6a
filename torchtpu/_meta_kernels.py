"""Meta kernels that compiled mode needs where PyTorch's are stricter than PyTorch's own kernels.

torch.compile traces with fake tensors, whose shapes come from the ops' meta kernels. The meta
kernel of ``aten::_grouped_mm`` (the grouped expert matmul of transformers' mixture-of-experts
layers) implements the checks of the CUDA kernel and refuses float32 and float16, which the CPU
kernel and torchtpu's accept: every MoE model (mixtral, qwen2_moe, afmoe, ...) would fail to
compile in float32 with "Expected inputs of BF16 type". The replacement keeps PyTorch's checks
for bfloat16 and, for float32 and float16, checks what the CPU kernel checks (dimensions,
contraction, offsets) and sizes the result with PyTorch's own helper. Registered once, at import
(torch's meta registrations are loaded with torch itself).
"""
from __future__ import annotations

import torch


def _relaxed_grouped_mm(original):
    from torch._meta_registrations import _create_grouped_mm_output_tensor

    def meta_grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
        if mat_a.dtype == torch.bfloat16 or mat_a.dtype not in (torch.float32, torch.float16):
            return original(mat_a, mat_b, offs=offs, bias=bias, out_dtype=out_dtype)
        torch._check(mat_a.dtype == mat_b.dtype,
                     lambda: f"grouped_mm: mat_a is {mat_a.dtype} and mat_b is {mat_b.dtype}")
        torch._check(mat_a.dim() in (2, 3) and mat_b.dim() in (2, 3),
                     lambda: "grouped_mm: multiplicands must be 2D or 3D")
        if mat_a.dim() == 3 or mat_b.dim() == 3:
            torch._check(mat_a.size(-1) == mat_b.size(-2),
                         lambda: "contraction dimension of mat_a and mat_b must match")
        if mat_a.dim() == 2 or mat_b.dim() == 2:
            torch._check(offs is not None and offs.dim() == 1 and offs.dtype == torch.int32,
                         lambda: "grouped_mm: 2D multiplicands need 1D int32 offsets")
        torch._check(bias is None, lambda: "Bias tensor provided, but it is not supported yet.")
        return _create_grouped_mm_output_tensor(mat_a, mat_b, offs, out_dtype)

    return meta_grouped_mm


_library = None


def install() -> None:
    global _library
    if _library is not None:
        return
    from torch._decomp import meta_table

    op = torch.ops.aten._grouped_mm.default
    original = meta_table.get(op)
    if original is None:  # (a torch without it: nothing to relax)
        return
    relaxed = _relaxed_grouped_mm(original)
    meta_table[op] = relaxed
    op.py_kernels[torch._C.DispatchKey.Meta] = relaxed
    op._dispatch_cache.clear()
    _library = torch.library.Library("aten", "IMPL")
    _library.impl(op, relaxed, "Meta", allow_override=True)
