"""How benchmarks/calibration.py reproduces each published run of benchmarks/calibration_set.py:
the model's shape (``ARCHS``, from the model's Hugging Face config or MaxText's config), and the
chip's share of the run as it was configured (``CONFIGS``: per-chip batch, sharding, remat
policy, quantization, the slice's topology). Rows of the set left out are in ``LEFT_OUT`` with
the reason.
"""
from __future__ import annotations

from calibration_model import Arch, Run

ARCHS: dict[str, Arch] = {
    # Hugging Face configs (meta-llama/...; config.json): vocab, hidden, layers, heads, KV heads,
    # head size, intermediate size.
    "llama3.1-8b": Arch(128256, 4096, 32, 32, 8, 128, 14336),
    "llama3.1-70b": Arch(128256, 8192, 80, 64, 8, 128, 28672),
    "llama2-70b": Arch(32000, 8192, 80, 64, 8, 128, 28672),
    "llama3.1-405b": Arch(128256, 16384, 126, 128, 8, 128, 53248),
    # MaxText's gpt3-175b: LayerNorm, learned positions, GELU MLP, tied embeddings.
    "gpt3-175b": Arch(50304, 12288, 96, 96, 96, 128, 49152, mlp="gelu", norm="layer",
                      positions="learned", tied=True),
    # MaxText's default decoder at global_parameter_scale 16 (calibration_set.py's row).
    "maxtext-16b": Arch(32768, 5120, 32, 32, 32, 256, 32768, mlp="relu", tied=True),
    "mixtral-8x7b": Arch(32000, 4096, 32, 32, 8, 128, 14336, experts=8, topk=2,
                         expert_ff=14336),
    "mixtral-8x22b": Arch(32768, 6144, 56, 48, 8, 128, 16384, experts=8, topk=2,
                          expert_ff=16384),
    # DeepSeek-V3: 3 dense layers, then 256 routed experts (top 8, sigmoid router) and a shared
    # one; MLA with q_lora 1536, kv_lora 512, 128 + 64 query/key dims, 128 value dims.
    "deepseek-v3": Arch(129280, 7168, 61, 128, 128, 192, 18432, experts=256, topk=8,
                        expert_ff=2048, shared_ff=2048, first_dense=3, router="sigmoid",
                        mla=(1536, 512, 128, 64, 128)),
    "deepseek-v2-lite": Arch(102400, 2048, 27, 16, 16, 192, 10944, experts=64, topk=6,
                             expert_ff=1408, shared_ff=2816, first_dense=1,
                             mla=(0, 512, 128, 64, 128)),
    # Llama 4 (text): Maverick's MoE layers alternate with dense ones (128 experts, top 1, a
    # shared expert); Scout's are all MoE (16 experts).
    "llama4-maverick": Arch(202048, 5120, 48, 40, 8, 128, 16384, experts=128, topk=1,
                            expert_ff=8192, shared_ff=8192, moe_every=2, router="sigmoid"),
    "llama4-scout": Arch(202048, 5120, 48, 40, 8, 128, 16384, experts=16, topk=1,
                         expert_ff=8192, shared_ff=8192, router="sigmoid"),
    "qwen3-235b-a22b": Arch(151936, 4096, 94, 64, 4, 128, 12288, qk_norm=True, experts=128,
                            topk=8, expert_ff=1536),
}

# MaxText's checkpoint names saved (on device or offloaded) by each run's remat policy; the
# layer's input is always kept (it is the checkpoint's input).
_QKV = ("query_proj", "key_proj", "value_proj")
_QKV_OUT = _QKV + ("out_proj",)

# Dropless MoE runs go through MaxText's grouped matmul with (tm, tk, tn) tiles: tile_batch_seq,
# tile_embed_dim, tile_mlp_dim, 512 / 1024 / 1024 in base.yml (maxtext @3eb77db3 and since; the
# wi_tile_* / wo_tile_* defaults at e591f30c are the same; megablox's tile_size in
# MaxText/layers/linears.py @1d27abf8, Oct 2024), unless the row's config sets them.
_GMM = (512, 1024, 1024)
# Splash attention's backward is two kernels unless sa_use_fused_bwd_kernel=True (base.yml's
# default is False at tpu-recipes-v0.1.2, v0.1.4, 92e59fdf, 3eb77db3 and e591f30c; before the key
# existed, maxtext @e7292a3a and @1d27abf8 built splash's BlockSizes without it, whose default is
# the unfused backward; the 2023 v5e run's Pallas flash_attention has separate dK/dV and dQ
# kernels). The value is the dK/dV kernel's block (sa_block_q_dkv: 512 by default).

# Each row: the model, the chip's share of the run, the slice's topology (chips per ICI axis)
# and, for serving rows, the iteration served.
CONFIGS: dict[str, dict] = {
    "llama3.1-8b-v6e-16": dict(arch="llama3.1-8b", topology="4x4",
                               run=Run(3, 8192, fsdp=16, remat=_QKV_OUT)),
    "llama3.1-70b-v6e-256": dict(arch="llama3.1-70b", topology="16x16",
                                 run=Run(5, 8192, fsdp=256, remat=_QKV)),
    "gpt3-175b-v6e-256-bf16": dict(arch="gpt3-175b", topology="16x16",
                                   run=Run(3, 2048, fsdp=256, remat="full",
                                           unfused_attention_bwd=2048)),
    "gpt3-175b-v6e-256-int8": dict(arch="gpt3-175b", topology="16x16",
                                   run=Run(3, 2048, fsdp=256, remat="full", quant="int8",
                                           unfused_attention_bwd=2048)),
    "mixtral-8x7b-v6e-256": dict(arch="mixtral-8x7b", topology="16x16",
                                 run=Run(12, 4096, fsdp=256, remat=_QKV_OUT, capacity=1.25,
                                         unfused_attention_bwd=2048)),
    "mixtral-8x22b-v6e-256": dict(arch="mixtral-8x22b", topology="16x16",
                                  run=Run(8, 4096, fsdp=64, ep=4, remat=_QKV_OUT, capacity=1.25,
                                          grad_bytes=2, unfused_attention_bwd=2048)),
    "gpt3-175b-v5p-1024-int8": dict(arch="gpt3-175b", topology="8x8x8",
                                    run=Run(4, 2048, fsdp=64, tp=8, remat="full",
                                            quant="int8", unfused_attention_bwd=512)),
    "llama3.1-405b-v5p-1024": dict(arch="llama3.1-405b", topology="8x8x8",
                                   run=Run(2, 8192, fsdp=512, remat=("context", "mlpwo"),
                                           unfused_attention_bwd=2048)),
    # deepseek3_671b_v5p_1024 sets tile_batch_seq 512, tile_embed_dim 1024, tile_mlp_dim 1024 and
    # sa_use_fused_bwd_kernel False (maxtext benchmarks/maxtext_v5p_model_configs.py @3eb77db3).
    "deepseek3-671b-v5p-1024": dict(arch="deepseek-v3", topology="8x8x8",
                                    run=Run(6, 8192, fsdp=512, remat=("out_proj",), gmm=_GMM,
                                            unfused_attention_bwd=2048)),
    "llama4-maverick-v5p-256": dict(arch="llama4-maverick", topology="4x4x8",
                                    run=Run(4, 8192, fsdp=32, tp=4, remat=_QKV_OUT, gmm=_GMM,
                                            unfused_attention_bwd=2048)),
    "llama3.1-70b-v7-64-bf16": dict(arch="llama3.1-70b", topology="4x4x4",
                                    run=Run(4, 8192, fsdp=64,
                                            remat=_QKV + ("context", "qkv_proj"))),
    "llama3.1-70b-v7-64-fp8": dict(arch="llama3.1-70b", topology="4x4x4",
                                   run=Run(4, 8192, fsdp=64, remat=_QKV + ("context", "qkv_proj"),
                                           quant="fp8")),
    # v7: tokamax's grouped matmul (use_tokamax_gmm=True), one per TensorCore (2 devices a
    # chip, per_device_batch_size 8 and 16), default tiles (training/ironwood/*/run_recipe.sh).
    "deepseek-v3-v7-128-bf16": dict(arch="deepseek-v3", topology="4x4x8",
                                    run=Run(16, 4096, fsdp=128, remat=(), grad_bytes=2,
                                            gmm=_GMM, devices=2)),
    "qwen3-235b-a22b-v7-256-bf16": dict(arch="qwen3-235b-a22b", topology="4x8x8",
                                        run=Run(32, 4096, fsdp=256, remat=(), gmm=_GMM,
                                                devices=2)),
    # Serving (vLLM, TP 8 on a v6e-8): a mean iteration of the benchmark's steady state. Each
    # request has 1000 prompt and 1000 output tokens, so a running sequence's context averages
    # 1500 tokens, and prompts enter at the rate sequences finish: on average as many prompt
    # tokens per iteration as running sequences (64 or 128), taken as one chunk attending to
    # 500 earlier tokens (a 1000-token prompt's mean prefix in chunks of 512).
    "llama3.3-70b-v6e-8-vllm-c64": dict(arch="llama3.1-70b", topology="2x4",
                                        run=Run(1, 1, fsdp=1, tp=8),
                                        decode=dict(decode=64, context=1500, prefill=64,
                                                    prefill_context=500)),
    "llama3.3-70b-v6e-8-vllm-c128": dict(arch="llama3.1-70b", topology="2x4",
                                         run=Run(1, 1, fsdp=1, tp=8),
                                         decode=dict(decode=128, context=1500, prefill=128,
                                                     prefill_context=500)),
    # Rows whose figure and configuration are not stated together (calibration_set.py's
    # STRONGEST list holds those that are); they run after the strongest.
    "llama2-70b-v6e-256": dict(arch="llama2-70b", topology="16x16",
                               run=Run(2, 4096, fsdp=256, remat=_QKV,
                                       unfused_attention_bwd=2048)),
    "maxtext-16b-v5e-256": dict(arch="maxtext-16b", topology="16x16",
                                run=Run(6, 2048, fsdp=256, remat="full",
                                        unfused_attention_bwd=512)),
    "llama2-70b-v5p-512": dict(arch="llama2-70b", topology="8x8x8",
                               run=Run(4, 4096, fsdp=512,
                                       remat=_QKV_OUT + ("qkv_proj", "mlpwo"),
                                       unfused_attention_bwd=512)),
    "llama3.1-405b-v7-256-bf16": dict(arch="llama3.1-405b", topology="4x8x8",
                                      run=Run(6, 8192, fsdp=256,
                                              remat=("mlpwo", "key_proj", "value_proj"))),
    "llama4-scout-v5p-1024": dict(arch="llama4-scout", topology="8x8x8",
                                  run=Run(8, 8192, fsdp=512, remat=(), gmm=_GMM,
                                          unfused_attention_bwd=2048)),
    "mixtral-8x7b-v5p": dict(arch="mixtral-8x7b", topology="4x4x8",
                             run=Run(36, 4096, fsdp=128, remat="full", grad_bytes=2, gmm=_GMM,
                                     unfused_attention_bwd=512)),
    "deepseek2-16b-v5p-8": dict(arch="deepseek-v2-lite", topology="2x2",
                                run=Run(24, 2048, fsdp=4, remat="full", gmm=_GMM,
                                        unfused_attention_bwd=512)),
}

# Rows of the set not run, and why.
LEFT_OUT: dict[str, str] = {
    "gpt3-175b-v5p-1024-mlperf-v4.0": "an upper bound (the MLPerf block includes an untimed "
        "eval); the recipe row gpt3-175b-v5p-1024-int8 is the same configuration, timed",
    "gpt3-175b-trillium-512-mlperf-v4.1": "an upper bound (eval inside the block) and two "
        "slices over DCN, which the ICI model does not cover; gpt3-175b-v6e-256-int8 is timed",
    "deepseek-v3-v7-128-fp8": "fp8 expert matmuls: PyTorch has no batched fp8 matmul op "
        "(torch._scaled_mm is 2-D) for the dry run to price at the fp8 rate",
    "gpt-oss-120b-v7-64-bf16": "sliding-window attention (128 tokens on every other layer) and "
        "attention sinks: scaled_dot_product_attention has no sliding window, and a dense mask "
        "would be priced as the full attention",
    "gemma3-12b-v6e-256-32k": "sliding-window attention (1024 tokens on 5 of 6 layers at 32k "
        "context): as above, priced as full attention by a dense mask",
    "llama2-7b-v5e-8-decode-bf16": "an upper bound (batch / throughput assumes all 96 slots "
        "busy; prefills share the time)",
    "llama3-8b-v5e-8-decode-int8": "an upper bound as above, and int8 weights with bf16 "
        "activations: no PyTorch op the dry run prices reads int8 weights into a bf16 matmul",
    "gptj-6b-v5e-4-mlperf-offline": "no step time: the summary gives samples/s only",
    "qwen3-coder-480b-v7-4-vllm-1k1k": "an upper bound (concurrency / throughput), fp8 MoE "
        "weights (no batched fp8 matmul op, as above)",
    "qwen3.5-397b-v7-4-vllm-1k8k": "an upper bound, a hybrid linear-attention model and fp8 MoE "
        "weights",
}
