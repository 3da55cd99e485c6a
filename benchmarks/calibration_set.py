"""Calibration set: published, measured performance of real TPUs (v5e, v5p, v6e, v7) with the
configuration each figure was measured under, for checking torchtpu's cost model (issue 46,
item 2) and the public chip figures its constants can cite (issue 46, item 3).

This module is data only: it runs nothing. ``ROWS`` holds one dict per published measurement;
``CHIP_FACTS`` holds public per-chip figures (peaks, HBM and ICI bandwidth, clock, VPU shape)
with their sources. ``STRONGEST`` names the rows whose figure and configuration are both stated
in one place (a log line printed next to the exact config that produced it).

How rows were chosen
--------------------
* Only figures measured on real TPUs and published by Google or MLCommons: the step-time log
  lines of the AI-Hypercomputer/tpu-recipes training recipes (each printed next to the MaxText
  config that produced it), the Ironwood training summary table in tpu-recipes, the MaxText
  tiering and per-chip TFLOP/s tables, Google's MLPerf Training result logs (mllog), Google's
  MLPerf Inference summary, the jetstream-pytorch benchmark table and the vLLM serving figures
  printed in tpu-recipes inference READMEs. Announcement claims ("4x faster") are not used.
* Each row's model has a Hugging Face config of the same architecture and shape, or says which
  config would have to be written (GPT-3 175B and the MaxText v5e "16B" model have none).
* The set spans v5e, v5p, v6e and v7; training and inference (decode-dominated serving and
  offline throughput); dense and MoE (Mixtral 8x7B/8x22B, DeepSeek-V2-Lite, DeepSeek-V3,
  Llama 4 Scout/Maverick, Qwen3-235B-A22B, gpt-oss-120b, Qwen3-Coder-480B, Qwen3.5-397B);
  bf16, int8 (MaxText quantization=int8, AQT) and fp8 (quantization=fp8_full on v7).

Field conventions
-----------------
``measured`` and ``measured_unit`` are the figure exactly as published. ``step_s`` is the
published step time in seconds where one is printed; otherwise it is derived and
``derivation`` says how (``None`` where no step time can be derived honestly). For training,
one step is one optimizer step of the whole global batch; each chip processes
``per_chip_batch`` sequences of ``seq`` tokens. On v7 (TPU7x) each chip is two JAX devices
(TensorCores), so MaxText's ``per_device_batch_size`` is half the per-chip batch and
"TFLOP/s/device" in its logs is per TensorCore. For inference rows ``step_s`` is the time of one
engine iteration (one decode token for every running sequence, plus the prefill chunk that
iteration carries), derived from the published TPOT or from concurrency / output tokens per
second. ``sharding`` uses MaxText's mesh axes (FSDP over all chips unless stated; TP, EP
degrees where set). ``remat`` quotes MaxText's remat_policy; for ``custom``, tensors named
"offload" are saved to host memory, "device" saved in HBM, everything else recomputed
(MaxText base.yml: every custom-policy tensor defaults to 'remat' except decoder_layer_input,
which defaults to 'device'). Unless a row says otherwise MaxText keeps float32 master weights
(base.yml weight_dtype: float32), computes in bf16 (dtype: bfloat16) and uses AdamW.

Sources were read from stored snapshots of the public repositories (tpu-recipes at commit
c8cfe2f6, maxtext at e591f30c, mlcommons result repositories as cited); every row names its file
and the line the figure comes from. Quotes are limited to the figure lines.

The rows are kept in calibration_set_v5.py (v5e, v5p) and calibration_set_v6_v7.py (v6e,
v7), the chip facts in calibration_chip_facts.py; this module joins them.
"""

from calibration_chip_facts import (CHIP_FACTS, GCP, JAX_TPU_INFO,  # noqa: F401
                                     SCALING_BOOK, TOKAMAX_KDA)
from calibration_set_v5 import MAXTEXT, RECIPES, V5_ROWS  # noqa: F401
from calibration_set_v6_v7 import V6_V7_ROWS

ROWS: list[dict] = V5_ROWS + V6_V7_ROWS

# Rows whose figure and full configuration are printed together by the measuring party, with
# batch arithmetic that checks out (tokens/s x seconds = per-chip tokens).
STRONGEST: list[str] = [
    "llama3.1-8b-v6e-16",
    "llama3.1-70b-v6e-256",
    "gpt3-175b-v6e-256-bf16",
    "gpt3-175b-v6e-256-int8",
    "mixtral-8x7b-v6e-256",
    "mixtral-8x22b-v6e-256",
    "gpt3-175b-v5p-1024-int8",
    "llama3.1-405b-v5p-1024",
    "deepseek3-671b-v5p-1024",
    "llama4-maverick-v5p-256",
    "llama3.1-70b-v7-64-bf16",
    "llama3.1-70b-v7-64-fp8",
    "deepseek-v3-v7-128-bf16",
    "qwen3-235b-a22b-v7-256-bf16",
    "llama3.3-70b-v6e-8-vllm-c64",
]
