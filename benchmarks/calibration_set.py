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
"""

RECIPES = "https://github.com/AI-Hypercomputer/tpu-recipes/blob/main/"
MAXTEXT = "https://github.com/AI-Hypercomputer/maxtext/blob/"

ROWS: list[dict] = [
    # ------------------------------------------------------------------ v5e
    dict(
        name="maxtext-16b-v5e-256",
        chip="v5e",
        kind="training",
        model="MaxText default decoder at global_parameter_scale=16 (~16.3B params): 32 layers, "
              "d_model 5120, 32 heads x head_dim 256 (attention width 8192 != d_model), "
              "non-gated ReLU MLP 32768 (mlp_activations ['relu']), vocab 32768, tied "
              "embeddings (logits_via_embedding: True); MaxText's late-2023 default decoder",
        hf_config=None,
        chips=256,
        global_batch=1536,
        seq=2048,
        per_chip_batch=6,
        sharding="FSDP 256 (ici_fsdp_parallelism=-1), 1 slice",
        remat="full (remat_policy=full)",
        precision="bf16 compute, fp32 weights",
        attention="causal flash (attention='flash')",
        optimizer="AdamW (b1 0.9, b2 0.95, wd 0.1)",
        measured=120.0,
        measured_unit="TFLOP/s/chip (MaxText model FLOPs; MFU 61.10% of 197 TFLOP/s)",
        step_s=10.33,
        derivation="MaxText at the README's commit (train.py calculate_training_tflops) counts "
                   "6*N*tokens + causal attention 6*L*H*hd*S^2*B per chip: N = 16.274e9 "
                   "(computed from base.yml emb 2560, heads 8, mlp 8192, layers 16, head_dim 256, "
                   "relu, tied vocab 32768, scaled x2/x4/x4/x2 for scale 16), tokens = 6*2048 = "
                   "12288 -> 1199.9 + 39.6 = 1239.5 TFLOP per chip per step; / 120 TFLOP/s = "
                   "10.33 s. Formula version uncertainty (causal vs non-causal attention) ~3%.",
        source_url=MAXTEXT + "76bd53b0f44caf989c88189afadeb1062f9254f0/MaxText/configs/v5e/README.md "
                   "(config: MaxText/configs/v5e/16b.sh at the same commit; now "
                   "src/maxtext/configs/tpu/v5e/README.md)",
        source_quote="| 1x v5e-256  | 120                | 61.10%  |",
    ),
    dict(
        name="llama2-7b-v5e-8-decode-bf16",
        chip="v5e",
        kind="inference-decode",
        model="Llama 2 7B (chat weights)",
        hf_config="meta-llama/Llama-2-7b-hf",
        chips=8,
        global_batch=96,
        seq=2048,
        per_chip_batch=None,
        sharding="TP 8 (jetstream-pytorch model parallel over the 8 chips of a v5e-8 host)",
        remat=None,
        precision="bf16 weights and KV cache",
        attention="causal decode attention over a KV cache of length <= 2048",
        optimizer=None,
        measured=3663.0,
        measured_unit="output tokens/s (whole v5e-8), batch 96, ShareGPT prompts, max input "
                      "1024 / max output 1024",
        step_s=0.0262,
        derivation="Decode iteration <= batch / throughput = 96 / 3663 = 26.2 ms (upper bound: "
                   "assumes all 96 slots busy; prefills of new requests share the time).",
        source_url="https://github.com/AI-Hypercomputer/jetstream-pytorch/blob/main/benchmarks/summary.md",
        source_quote="2024-03-28 | TPU v5e-8 | bfloat16 | 96 | 2048 | 1024 | 1024 | 3663",
    ),
    dict(
        name="llama3-8b-v5e-8-decode-int8",
        chip="v5e",
        kind="inference-decode",
        model="Llama 3 8B",
        hf_config="meta-llama/Meta-Llama-3-8B",
        chips=8,
        global_batch=256,
        seq=2048,
        per_chip_batch=None,
        sharding="TP 8 (jetstream-pytorch model parallel)",
        remat=None,
        precision="int8 weights and int8 KV cache (quantize_weights, quantize_kv_cache)",
        attention="causal decode attention over a KV cache of length <= 2048",
        optimizer=None,
        measured=10873.0,
        measured_unit="output tokens/s (whole v5e-8), batch 256, ShareGPT prompts",
        step_s=0.0235,
        derivation="Decode iteration <= 256 / 10873 = 23.5 ms (upper bound, as above).",
        source_url="https://github.com/AI-Hypercomputer/jetstream-pytorch/blob/main/benchmarks/summary.md",
        source_quote="2024-04-24 | TPU v5e-8 | int8 | 256 | 2048 | 1024 | 1024 | 10873",
    ),
    dict(
        name="gptj-6b-v5e-4-mlperf-offline",
        chip="v5e",
        kind="inference-throughput",
        model="GPT-J 6B (MLPerf Inference v4.0 gptj-99, CNN-DailyMail summarization)",
        hf_config="EleutherAI/gpt-j-6b",
        chips=4,
        global_batch=32,
        seq=None,
        per_chip_batch=None,
        sharding="Saxml model 'GPTJ4TokenizedINT8BS32XLAWait40MB6Offline' on a 2x2 v5e slice "
                 "(sharding not stated)",
        remat=None,
        precision="int8 weights (checkpoint gptj_sax_int8_converted)",
        attention="causal",
        optimizer=None,
        measured=10.1502,
        measured_unit="samples/s (whole tpu-v5e-4, Offline scenario, 13368 samples)",
        step_s=None,
        derivation="Not derivable: the MLPerf summary gives samples/s only (no input/output "
                   "token counts, no per-iteration timing); 'BS32' in the Saxml model name is "
                   "the only batch information.",
        source_url="https://github.com/mlcommons/inference_results_v4.0/blob/main/closed/Google/"
                   "results/tpu_v5e_x4/gptj-99/offline/performance/run_1/mlperf_log_summary.txt",
        source_quote="Samples per second: 10.1502",
    ),
    # ------------------------------------------------------------------ v5p
    dict(
        name="gpt3-175b-v5p-1024-int8",
        chip="v5p",
        kind="training",
        model="GPT-3 175B (MaxText gpt3-175b: 96 layers, d 12288, 96 heads x 128, gelu MLP 49152, "
              "vocab 50304, tied embeddings, learned positions, LayerNorm)",
        hf_config=None,
        chips=512,
        global_batch=2048,
        seq=2048,
        per_chip_batch=4,
        sharding="FSDP 64 x TP 8 (ici_fsdp_parallelism=64, ici_tensor_parallelism=8)",
        remat="full",
        precision="int8 matmuls (quantization=int8, AQT), bf16 elsewhere, fp32 weights",
        attention="causal flash",
        optimizer="adam_pax (MaxText gpt3-175b model config)",
        measured=22.197,
        measured_unit="s/step",
        step_s=22.197,
        derivation="As published. 369.059 tokens/s/device x 22.197 s = 8192 = 4 x 2048 per chip.",
        source_url=RECIPES + "training/v5p/GPT3-175B-MaxText/README.md (config: maxtext "
                   "src/maxtext/configs/tpu/v5p/gpt3_175b/v5p_1024.sh -> gpt3_175b_base.sh "
                   "4 full 1 64 8)",
        source_quote="completed step: 2, seconds: 22.197, TFLOP/s/device: 397.246, "
                     "Tokens/s/device: 369.059, total_weights: 4194304",
    ),
    dict(
        name="gpt3-175b-v5p-1024-mlperf-v4.0",
        chip="v5p",
        kind="training",
        model="GPT-3 175B (MLPerf Training v4.0 gpt3 benchmark, MaxText)",
        hf_config=None,
        chips=512,
        global_batch=2048,
        seq=2048,
        per_chip_batch=4,
        sharding="FSDP 64 x TP 8",
        remat="full",
        precision="int8 matmuls (quantization=int8), fp32 weights",
        attention="causal flash",
        optimizer="Adam (mllog opt_name adam, wd 0.1, grad clip 1.0)",
        measured=285.77,
        measured_unit="s per mllog block (12 training steps of 4,194,304 tokens + one eval of "
                      "24567 samples at eval_per_device_batch_size=1); run time 114.8 min",
        step_s=23.81,
        derivation="Mean block time over blocks 2-24 of result_0.txt: (run_stop 1709190685725 - "
                   "block_start 1709184112964) ms / 23 = 285.77 s; epoch_count 50331648 tokens / "
                   "(2048 x 2048) = 12 steps -> <= 23.81 s/step. An upper bound: the block also "
                   "contains the eval, which the log does not time separately (recipe row: "
                   "22.197 s).",
        source_url="https://github.com/mlcommons/training_results_v4.0/blob/main/Google/results/"
                   "cloud-tpu-v5p-1024-maxtext/gpt3/result_0.txt (config: Google/benchmarks/gpt3/"
                   "implementations/maxtext/v5p-1024.sh)",
        source_quote='"key": "block_start", ... "epoch_count": 50331648 ... "time_ms": '
                     '1709184398702 ... "key": "block_stop"',
    ),
    dict(
        name="llama2-70b-v5p-512",
        chip="v5p",
        kind="training",
        model="Llama 2 70B",
        hf_config="meta-llama/Llama-2-70b-hf",
        chips=512,
        global_batch=2048,
        seq=4096,
        per_chip_batch=4,
        sharding="FSDP over all chips (ici_fsdp_parallelism=-1)",
        remat="save_dot_except_mlpwi",
        precision="bf16 compute, fp32 weights",
        attention="causal; attention not set in the config (MaxText default 'autoselected')",
        optimizer="AdamW",
        measured=692.0,
        measured_unit="approx tokens/s/device (MFU 65.4%)",
        step_s=23.68,
        derivation="per_device_batch_size 4 x 4096 / 692 = 23.68 s (batch from the linked config "
                   "llama2_70b_v5p_128; the table gives 'Approx' tokens/s). Per-token ratios are "
                   "independent of the batch assumed.",
        source_url="https://github.com/AI-Hypercomputer/maxtext/blob/main/docs/reference/models/"
                   "tiering.md (config: benchmarks/maxtext_v5p_model_configs.py@92e59fdf, "
                   "llama2_70b_v5p_128)",
        source_quote="| Llama 2 70B | ... | 512 Chips, BF16, SL=4096 | 65.4% | 692 |",
    ),
    dict(
        name="llama3.1-405b-v5p-1024",
        chip="v5p",
        kind="training",
        model="Llama 3.1 405B",
        hf_config="meta-llama/Llama-3.1-405B",
        chips=512,
        global_batch=1024,
        seq=8192,
        per_chip_batch=2,
        sharding="FSDP 512",
        remat="custom: context=offload, mlpwo=offload (decoder_layer_input kept on device; rest "
              "recomputed); num_vocab_tiling=4",
        precision="bf16 compute, fp32 weights",
        attention="causal flash (splash, 2048 blocks)",
        optimizer="AdamW",
        measured=131.474,
        measured_unit="s/step",
        step_s=131.474,
        derivation="As published. 124.618 x 131.474 = 16384 = 2 x 8192 tokens per chip; "
                   "total_weights 8388608 = 512 chips x 16384.",
        source_url=RECIPES + "training/v5p/Llama3.1-405B-MaxText/README.md (config "
                   "llama3_1_405b_8192_v5p_1024 in maxtext benchmarks/maxtext_v5p_model_configs.py"
                   "@3eb77db3)",
        source_quote="completed step: 10, seconds: 131.474, TFLOP/s/device: 314.530, "
                     "Tokens/s/device: 124.618, total_weights: 8388608",
    ),
    dict(
        name="deepseek3-671b-v5p-1024",
        chip="v5p",
        kind="training",
        model="DeepSeek-V3 671B (MoE 256 routed experts top-8 + 1 shared, MLA attention, 3 dense "
              "layers; MaxText deepseek3-671b, no MTP module)",
        hf_config="deepseek-ai/DeepSeek-V3",
        chips=512,
        global_batch=3072,
        seq=8192,
        per_chip_batch=6,
        sharding="FSDP 512, TP 1; experts sharded by FSDP; megablox dropless grouped matmul "
                 "(sparse_matmul=True)",
        remat="custom: decoder_layer_input=offload, out_proj=offload",
        precision="bf16 compute, fp32 weights",
        attention="causal flash (MLA), sa_use_fused_bwd_kernel=False",
        optimizer="AdamW",
        measured=90.668,
        measured_unit="s/step",
        step_s=90.668,
        derivation="As published. 542.108 x 90.668 = 49152 = 6 x 8192 tokens per chip; "
                   "total_weights 25165824 = 512 x 49152.",
        source_url=RECIPES + "training/v5p/DeepSeek3-671B-MaxText/README.md (config "
                   "deepseek3_671b_v5p_1024 in maxtext benchmarks/maxtext_v5p_model_configs.py"
                   "@3eb77db3)",
        source_quote="completed step: 11, seconds: 90.668, TFLOP/s/device: 152.415, "
                     "Tokens/s/device: 542.108, total_weights: 25165824",
    ),
    dict(
        name="llama4-maverick-v5p-256",
        chip="v5p",
        kind="training",
        model="Llama 4 Maverick 17B-128E (MoE on every 2nd layer, 128 experts top-1 + shared; "
              "text only)",
        hf_config="meta-llama/Llama-4-Maverick-17B-128E",
        chips=128,
        global_batch=512,
        seq=8192,
        per_chip_batch=4,
        sharding="FSDP 32 x TP 4; megablox dropless (sparse_matmul=True)",
        remat="custom: decoder_layer_input, out_proj, query_proj, key_proj, value_proj = offload",
        precision="bf16 compute, fp32 weights",
        attention="causal flash (splash, 2048 blocks; chunked attention window 8192 = seq)",
        optimizer="AdamW",
        measured=24.792,
        measured_unit="s/step",
        step_s=24.792,
        derivation="As published. 1321.725 x 24.792 = 32768 = 4 x 8192; total_weights 4194304 = "
                   "128 chips x 32768.",
        source_url=RECIPES + "training/v5p/Llama4-Maverick-17B-128E-Maxtext/README.md",
        source_quote="completed step: 12, seconds: 24.792, TFLOP/s/device: 160.005, "
                     "Tokens/s/device: 1321.725, total_weights: 4194304",
    ),
    dict(
        name="llama4-scout-v5p-1024",
        chip="v5p",
        kind="training",
        model="Llama 4 Scout 17B-16E (MoE 16 experts top-1 + shared; text only)",
        hf_config="meta-llama/Llama-4-Scout-17B-16E",
        chips=512,
        global_batch=4096,
        seq=8192,
        per_chip_batch=8,
        sharding="FSDP over all chips; megablox dropless",
        remat="custom: decoder_layer_input=offload",
        precision="bf16 compute, fp32 weights",
        attention="causal flash (splash, 2048 blocks)",
        optimizer="AdamW",
        measured=31.652,
        measured_unit="s/step",
        step_s=31.652,
        derivation="As published. 2070.487 x 31.652 = 65536 = 8 x 8192; total_weights 33554432 / "
                   "65536 = 512 chips (the README offers v5p-256/512/1024; the log is from 512 "
                   "chips = v5p-1024).",
        source_url=RECIPES + "training/v5p/Llama4-Scout-17B-16E-Maxtext/README.md (config "
                   "llama4_scout_dropless_v5p_256 @3eb77db3)",
        source_quote="completed step: 11, seconds: 31.652, TFLOP/s/device: 225.491, "
                     "Tokens/s/device: 2070.487, total_weights: 33554432",
    ),
    dict(
        name="mixtral-8x7b-v5p",
        chip="v5p",
        kind="training",
        model="Mixtral 8x7B",
        hf_config="mistralai/Mixtral-8x7B-v0.1",
        chips=128,
        global_batch=4608,
        seq=4096,
        per_chip_batch=36,
        sharding="FSDP over all chips; megablox dropless (MaxText default at the script's date)",
        remat="full (base.yml default; the script sets none)",
        precision="bf16 compute and bf16 weights (weight_dtype=bfloat16)",
        attention="causal flash",
        optimizer="AdamW",
        measured=2909.0,
        measured_unit="approx tokens/s/device (MFU 52.56%)",
        step_s=50.69,
        derivation="36 x 4096 / 2909 = 50.69 s. Chip count is ambiguous: tiering says '256 "
                   "Chips(8x4x4)' but an 8x4x4 v5p slice is 128 chips (v5p-256); the recipe "
                   "README uses v5p-128. The per-chip step does not depend on it under FSDP.",
        source_url="https://github.com/AI-Hypercomputer/maxtext/blob/main/docs/reference/models/"
                   "tiering.md (config: tpu-recipes training/v5p/Mixtral-8X7B-Maxtext/scripts/"
                   "run_mixtral-8x7b.sh)",
        source_quote="| Mixtral 8X7B | ... | 256 Chips(8x4x4), bf16, SL=4096 | 52.56% | 2,909 |",
    ),
    dict(
        name="deepseek2-16b-v5p-8",
        chip="v5p",
        kind="training",
        model="DeepSeek-V2-Lite 16B (MoE 64 experts top-6 + 2 shared, MLA attention)",
        hf_config="deepseek-ai/DeepSeek-V2-Lite",
        chips=4,
        global_batch=96,
        seq=2048,
        per_chip_batch=24,
        sharding="FSDP 4 (single host v5p-8); megablox dropless (defaults)",
        remat="full (default)",
        precision="bf16 compute, fp32 weights",
        attention="causal; attention not set (MaxText default 'autoselected')",
        optimizer="AdamW (default)",
        measured=5.667,
        measured_unit="s/step",
        step_s=5.667,
        derivation="As published (last of 10 steps of a documentation example run with "
                   "synthetic data; MFU 29.4% per the same page).",
        source_url="https://github.com/AI-Hypercomputer/maxtext/blob/main/docs/guides/"
                   "monitoring_and_debugging/understand_logs_and_metrics.md",
        source_quote="completed step: 9, seconds: 5.667, TFLOP/s/device: 134.924, "
                     "Tokens/s/device: 8672.758, total_weights: 196608",
    ),
    # ------------------------------------------------------------------ v6e
    dict(
        name="llama3.1-8b-v6e-16",
        chip="v6e",
        kind="training",
        model="Llama 3.1 8B",
        hf_config="meta-llama/Llama-3.1-8B",
        chips=16,
        global_batch=48,
        seq=8192,
        per_chip_batch=3,
        sharding="FSDP 16",
        remat="custom: decoder_layer_input, out_proj, query_proj, key_proj, value_proj = offload "
              "(MLP recomputed)",
        precision="bf16 compute, fp32 weights",
        attention="causal flash (splash 2048 blocks, fused bwd kernel)",
        optimizer="AdamW",
        measured=3.393,
        measured_unit="s/step",
        step_s=3.393,
        derivation="As published. 7243.378 x 3.393 = 24576 = 3 x 8192.",
        source_url=RECIPES + "training/trillium/Llama3.1-8B-MaxText/v6e-16/README.md (config "
                   "llama3_1_8b_8192_no_collective_matmul, MaxText tpu-recipes-v0.1.4)",
        source_quote="completed step: 14, seconds: 3.393, TFLOP/s/device: 419.485, "
                     "Tokens/s/device: 7243.378, total_weights: 393216",
    ),
    dict(
        name="llama3.1-70b-v6e-256",
        chip="v6e",
        kind="training",
        model="Llama 3.1 70B",
        hf_config="meta-llama/Llama-3.1-70B",
        chips=256,
        global_batch=1280,
        seq=8192,
        per_chip_batch=5,
        sharding="FSDP 256",
        remat="custom: decoder_layer_input, query_proj, key_proj, value_proj = offload",
        precision="bf16 compute, fp32 weights",
        attention="causal flash (splash 2048 blocks, fused bwd kernel)",
        optimizer="AdamW",
        measured=42.656,
        measured_unit="s/step",
        step_s=42.656,
        derivation="As published. 960.248 x 42.656 = 40960 = 5 x 8192.",
        source_url=RECIPES + "training/trillium/Llama3.1-70B-MaxText/v6e-256/README.md (config "
                   "llama3_1_70b_8192, MaxText tpu-recipes-v0.1.4)",
        source_quote="completed step: 14, seconds: 42.656, TFLOP/s/device: 462.297, "
                     "Tokens/s/device: 960.248, total_weights: 10485760",
    ),
    dict(
        name="llama2-70b-v6e-256",
        chip="v6e",
        kind="training",
        model="Llama 2 70B",
        hf_config="meta-llama/Llama-2-70b-hf",
        chips=256,
        global_batch=512,
        seq=4096,
        per_chip_batch=2,
        sharding="FSDP-transpose 256 (ici_fsdp_transpose_parallelism=-1, ici_fsdp_parallelism=1)",
        remat="qkv_proj_offloaded",
        precision="bf16 compute, fp32 weights",
        attention="causal flash",
        optimizer="AdamW",
        measured=9.052,
        measured_unit="s/step",
        step_s=9.052,
        derivation="As published. The README's listed config says per_device_batch_size 3, but "
                   "the log line gives 905.021 x 9.052 = 8192 = 2 x 4096 tokens per chip and "
                   "total_weights 2097152 = 256 x 8192, so the logged run used 2 per chip.",
        source_url=RECIPES + "training/trillium/Llama2-70B-MaxText/README.md (config "
                   "llama2_70b_4096_sc, MaxText tpu-recipes-v0.1.2)",
        source_quote="completed step: 16, seconds: 9.052, TFLOP/s/device: 402.274, "
                     "Tokens/s/device: 905.021, total_weights: 2097152",
    ),
    dict(
        name="gpt3-175b-v6e-256-bf16",
        chip="v6e",
        kind="training",
        model="GPT-3 175B (MaxText gpt3-175b)",
        hf_config=None,
        chips=256,
        global_batch=768,
        seq=2048,
        per_chip_batch=3,
        sharding="FSDP 256",
        remat="full",
        precision="bf16 compute, fp32 weights",
        attention="causal flash",
        optimizer="adam_pax",
        measured=17.182,
        measured_unit="s/step",
        step_s=17.182,
        derivation="As published. 357.580 x 17.182 = 6144 = 3 x 2048.",
        source_url=RECIPES + "training/trillium/GPT3-175B-MaxText/bf16/README.md (config "
                   "gpt_3_175b_bf16, MaxText tpu-recipes-v0.1.2)",
        source_quote="completed step: 15, seconds: 17.182, TFLOP/s/device: 384.891, "
                     "Tokens/s/device: 357.580, total_weights: 1572864",
    ),
    dict(
        name="gpt3-175b-v6e-256-int8",
        chip="v6e",
        kind="training",
        model="GPT-3 175B (MaxText gpt3-175b)",
        hf_config=None,
        chips=256,
        global_batch=768,
        seq=2048,
        per_chip_batch=3,
        sharding="FSDP 256",
        remat="full",
        precision="int8 matmuls (quantization=int8, AQT), fp32 weights. The recipe folder is "
                  "named 'fp8' but the config it runs (gpt_3_175b at maxtext e7292a3a) sets "
                  "quantization int8; v6e has no fp8 MXU rate above bf16",
        attention="causal flash",
        optimizer="adam_pax",
        measured=14.245,
        measured_unit="s/step",
        step_s=14.245,
        derivation="As published. 431.318 x 14.245 = 6144 = 3 x 2048. Pair with the bf16 row "
                   "(17.182 s) for an int8-vs-bf16 check on the same model and batch.",
        source_url=RECIPES + "training/trillium/GPT3-175B-MaxText/fp8/README.md (config "
                   "gpt_3_175b in maxtext benchmarks/maxtext_trillium_model_configs.py@e7292a3a)",
        source_quote="step: 100, seconds: 14.245, TFLOP/s/device: 464.261, "
                     "Tokens/s/device: 431.318, total_weights: 1572864",
    ),
    dict(
        name="gpt3-175b-trillium-512-mlperf-v4.1",
        chip="v6e",
        kind="training",
        model="GPT-3 175B (MLPerf Training v4.1 gpt3 benchmark, MaxText)",
        hf_config=None,
        chips=512,
        global_batch=1536,
        seq=2048,
        per_chip_batch=3,
        sharding="FSDP over 256 chips per slice (ici_fsdp_parallelism=-1), 2 slices over DCN "
                 "(topology 16x16 per slice)",
        remat="full",
        precision="int8 matmuls (quantization=int8, tff_quant=true), fp32 weights",
        attention="causal flash (sa_block_q 1024)",
        optimizer="Adam (mllog opt_name adam)",
        measured=254.98,
        measured_unit="s per mllog block (16 training steps of 3,145,728 tokens + one eval); "
                      "run time 103.0 min",
        step_s=15.94,
        derivation="(run_stop 1728607006913 - second block_start 1728601142335) ms / 23 blocks = "
                   "254.98 s; 50331648 / (1536 x 2048) = 16 steps per block -> <= 15.94 s/step "
                   "(upper bound; eval included). Compare the 256-chip int8 recipe row 14.245 s. "
                   "The log's submission_platform field reads 'tpu-v5p' (a label slip); the "
                   "system file says TPU-trillium, 128 nodes x 4.",
        source_url="https://github.com/mlcommons/training_results_v4.1/blob/main/Google/results/"
                   "cloud-tpu-trillium-512-maxtext/gpt3/result_0.txt (config: Google/benchmarks/"
                   "gpt3/implementations/maxtext/cloud-tpu-trillium/trillium-512.sh; read from "
                   "the mirror swsok/training_results_v4.1)",
        source_quote='"key": "global_batch_size", "value": 1536 ... "epoch_count": 50331648',
    ),
    dict(
        name="mixtral-8x7b-v6e-256",
        chip="v6e",
        kind="training",
        model="Mixtral 8x7B",
        hf_config="mistralai/Mixtral-8x7B-v0.1",
        chips=256,
        global_batch=3072,
        seq=4096,
        per_chip_batch=12,
        sharding="FSDP 256; token-dropping dense dispatch (megablox=False, sparse_matmul=False, "
                 "capacity_factor=1.25)",
        remat="custom: decoder_layer_input, out_proj, query_proj, key_proj, value_proj = offload",
        precision="bf16 compute, fp32 weights",
        attention="causal flash",
        optimizer="AdamW",
        measured=13.484,
        measured_unit="s/step",
        step_s=13.484,
        derivation="As published. 3645.203 x 13.484 = 49152 = 12 x 4096. Capacity factor 1.25 "
                   "means each expert computes up to 1.25x its balanced share of tokens.",
        source_url=RECIPES + "training/trillium/Mixtral-8x7B-MaxText/README.md (config "
                   "mixtral_8x7b_dropped, MaxText tpu-recipes-v0.1.2)",
        source_quote="completed step: 11, seconds: 13.484, TFLOP/s/device: 302.311, "
                     "Tokens/s/device: 3645.203, total_weights: 12582912",
    ),
    dict(
        name="mixtral-8x22b-v6e-256",
        chip="v6e",
        kind="training",
        model="Mixtral 8x22B",
        hf_config="mistralai/Mixtral-8x22B-v0.1",
        chips=256,
        global_batch=2048,
        seq=4096,
        per_chip_batch=8,
        sharding="FSDP 64 x EP 4 (custom_mesh hybrid_ring_64x4); token dropping, "
                 "capacity_factor=1.25, megablox=False",
        remat="custom: decoder_layer_input, out_proj, query_proj, key_proj, value_proj = offload",
        precision="bf16 compute and bf16 weights (weight_dtype=bfloat16)",
        attention="causal flash",
        optimizer="AdamW",
        measured=24.706,
        measured_unit="s/step",
        step_s=24.706,
        derivation="As published. 1326.307 x 24.706 = 32768 = 8 x 4096. Config from maxtext "
                   "benchmarks/maxtext_trillium_model_configs.py mixtral_8x22b_dropped (added "
                   "449b4fe5, 2025-02-12; same in tag tpu-recipes-v0.1.2); libtpu 20241119.",
        source_url=RECIPES + "training/trillium/Mixtral-8x22B-MaxText/README.md",
        source_quote="completed step: 9, seconds: 24.706, TFLOP/s/device: 332.463, "
                     "Tokens/s/device: 1326.307, total_weights: 8388608",
    ),
    dict(
        name="gemma3-12b-v6e-256-32k",
        chip="v6e",
        kind="training",
        model="Gemma 3 12B text decoder (48 layers, sliding_window_size 1024 on local layers, "
              "global layers full; head_dim 256, vocab 262144; MaxText gemma3-12b)",
        hf_config="google/gemma-3-12b-pt",
        chips=256,
        global_batch=256,
        seq=32768,
        per_chip_batch=1,
        sharding="FSDP 256",
        remat="custom: decoder_layer_input=device, query_proj/key_proj/value_proj=remat; "
              "num_vocab_tiling=16",
        precision="bf16 compute, fp32 weights",
        attention="causal flash; sliding-window 1024 on local layers, full causal on global "
                  "layers (block skipping matters at 32k context)",
        optimizer="AdamW",
        measured=7.318,
        measured_unit="s/step",
        step_s=7.318,
        derivation="As published. 4477.768 x 7.318 = 32768 = 1 x 32768.",
        source_url=RECIPES + "training/trillium/Gemma3-12B-MaxText/v6e-256/README.md (config "
                   "gemma3_12b_32768_v6e256, MaxText tpu-recipes-v0.1.5)",
        source_quote="completed step: 29, seconds: 7.318, TFLOP/s/device: 349.442, "
                     "Tokens/s/device: 4477.768, total_weights: 8388608",
    ),
    dict(
        name="llama3.3-70b-v6e-8-vllm-c64",
        chip="v6e",
        kind="inference-decode",
        model="Llama 3.3 70B Instruct",
        hf_config="meta-llama/Llama-3.3-70B-Instruct",
        chips=8,
        global_batch=64,
        seq=2000,
        per_chip_batch=None,
        sharding="TP 8 (vLLM --tensor-parallel-size 8)",
        remat=None,
        precision="bf16 weights and KV cache (vLLM TPU defaults; no quantization flag)",
        attention="causal ragged paged attention; chunked prefill (max-num-batched-tokens 512)",
        optimizer=None,
        measured=0.02535,
        measured_unit="s mean TPOT (output 2494.80 tok/s for the 8 chips; random 1000-in/1000-out,"
                      " 3000 prompts, max-concurrency 64, max-num-seqs 256, max-model-len 2048)",
        step_s=0.02535,
        derivation="TPOT is the per-iteration time seen by a running request. Check: 64 / 2494.80 "
                   "= 25.7 ms. Each iteration carries ~64 decode tokens (context 1000-2000) plus "
                   "on average ~64 prefill tokens (equal input and output lengths), in chunks of "
                   "<= 512.",
        source_url=RECIPES + "inference/trillium/vLLM/Llama3.x/README.md (vllm/vllm-tpu:v0.12.0)",
        source_quote="Output token throughput (tok/s):         2494.80 ... "
                     "Mean TPOT (ms):                          25.35",
    ),
    dict(
        name="llama3.3-70b-v6e-8-vllm-c128",
        chip="v6e",
        kind="inference-decode",
        model="Llama 3.3 70B Instruct",
        hf_config="meta-llama/Llama-3.3-70B-Instruct",
        chips=8,
        global_batch=128,
        seq=2000,
        per_chip_batch=None,
        sharding="TP 8",
        remat=None,
        precision="bf16 weights and KV cache",
        attention="causal ragged paged attention; chunked prefill (512)",
        optimizer=None,
        measured=0.03512,
        measured_unit="s mean TPOT (output 3544.46 tok/s; same setup, max-concurrency 128)",
        step_s=0.03512,
        derivation="As above: 128 / 3544.46 = 36.1 ms. With the c64 row, gives the slope of "
                   "iteration time in batch (KV-cache reads) at fixed weights.",
        source_url=RECIPES + "inference/trillium/vLLM/Llama3.x/README.md",
        source_quote="Output token throughput (tok/s):         3544.46 ... "
                     "Mean TPOT (ms):                          35.12",
    ),
    # ------------------------------------------------------------------ v7
    dict(
        name="llama3.1-70b-v7-64-bf16",
        chip="v7",
        kind="training",
        model="Llama 3.1 70B",
        hf_config="meta-llama/Llama-3.1-70B",
        chips=64,
        global_batch=256,
        seq=8192,
        per_chip_batch=4,
        sharding="FSDP over 128 devices (64 chips x 2 TensorCores; per_device_batch_size=2)",
        remat="custom: decoder_layer_input, context, query_proj, key_proj, value_proj, qkv_proj = "
              "device (saved in HBM; MLP recomputed)",
        precision="bf16 compute, fp32 weights, AdamW mu in bf16",
        attention="causal flash (tokamax splash, 2048 blocks, fused bwd)",
        optimizer="AdamW",
        measured=12.20,
        measured_unit="s/step (1207.05 TFLOP/s/chip, 2686.98 tokens/s/chip)",
        step_s=12.20,
        derivation="As published. 2686.98 x 12.20 = 32781 ~ 4 x 8192.",
        source_url=RECIPES + "training/ironwood/README.md (config: training/ironwood/llama3.1-70b/"
                   "8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh)",
        source_quote="| llama3.1-70b | 64 | 256 | 8192 | bf16 | 12.20 | 1,207.05 | 2,686.98 |",
    ),
    dict(
        name="llama3.1-70b-v7-64-fp8",
        chip="v7",
        kind="training",
        model="Llama 3.1 70B",
        hf_config="meta-llama/Llama-3.1-70B",
        chips=64,
        global_batch=256,
        seq=8192,
        per_chip_batch=4,
        sharding="FSDP over 128 devices",
        remat="custom: as the bf16 row (decoder_layer_input, context, q/k/v/qkv_proj = device)",
        precision="fp8 matmuls forward and backward (quantization=fp8_full via qwix, static "
                  "scales 'fixed,-224,224'), fp32 weights, bf16 mu",
        attention="causal flash (splash, different block sizes from bf16 row)",
        optimizer="AdamW",
        measured=7.93,
        measured_unit="s/step (1854.19 TFLOP/s/chip)",
        step_s=7.93,
        derivation="As published. 4127.56 x 7.93 = 32732 ~ 32768.",
        source_url=RECIPES + "training/ironwood/README.md (config: training/ironwood/llama3.1-70b/"
                   "8k-fp8-tpu7x-4x4x4/xpk/run_recipe.sh)",
        source_quote="| llama3.1-70b | 64 | 256 | 8192 | fp8_full | 7.93 | 1,854.19 | 4127.56 |",
    ),
    dict(
        name="llama3.1-405b-v7-256-bf16",
        chip="v7",
        kind="training",
        model="Llama 3.1 405B",
        hf_config="meta-llama/Llama-3.1-405B",
        chips=256,
        global_batch=1536,
        seq=8192,
        per_chip_batch=6,
        sharding="FSDP over 512 devices (per_device_batch_size=3)",
        remat="custom: decoder_layer_input=offload, mlpwo=offload, key_proj=device, "
              "value_proj=device; num_vocab_tiling=4",
        precision="bf16 compute, fp32 weights, bf16 mu",
        attention="causal flash (tokamax splash)",
        optimizer="AdamW",
        measured=98.34,
        measured_unit="s/step (1261.40 TFLOP/s/chip)",
        step_s=98.34,
        derivation="As published. 499.77 x 98.34 = 49147 ~ 6 x 8192.",
        source_url=RECIPES + "training/ironwood/README.md (config: training/ironwood/llama3.1-405b/"
                   "8k-bf16-tpu7x-4x8x8/run_recipe.sh)",
        source_quote="| llama3.1-405b | 256 | 1536 | 8192 | bf16 | 98.34 | 1,261.40 | 499.77 |",
    ),
    dict(
        name="deepseek-v3-v7-128-bf16",
        chip="v7",
        kind="training",
        model="DeepSeek-V3 671B (MaxText deepseek3-671b)",
        hf_config="deepseek-ai/DeepSeek-V3",
        chips=128,
        global_batch=2048,
        seq=4096,
        per_chip_batch=16,
        sharding="FSDP over 256 devices, experts sharded on the FSDP axis (fsdp_shard_on_exp); "
                 "megablox dropless; use_random_routing=True (synthetic, balanced routing)",
        remat="custom: decoder_layer_input=offload (rest recomputed)",
        precision="bf16 compute (weights fp32 default), bf16 grads and mu",
        attention="causal flash (MLA, tokamax splash 2048 blocks)",
        optimizer="AdamW",
        measured=27.02,
        measured_unit="s/step (607.53 TFLOP/s/chip)",
        step_s=27.02,
        derivation="As published. 2425.75 x 27.02 = 65544 ~ 16 x 4096.",
        source_url=RECIPES + "training/ironwood/README.md (config: training/ironwood/"
                   "deepseek3-671b/4k-bf16-tpu7x-4x4x8/xpk/run_recipe.sh)",
        source_quote="| deepseek-v3 | 128 | 2048 | 4096 | bf16 | 27.02 | 607.53 | 2,425.75 |",
    ),
    dict(
        name="deepseek-v3-v7-128-fp8",
        chip="v7",
        kind="training",
        model="DeepSeek-V3 671B (MaxText deepseek3-671b)",
        hf_config="deepseek-ai/DeepSeek-V3",
        chips=128,
        global_batch=2048,
        seq=4096,
        per_chip_batch=16,
        sharding="FSDP over 256 devices, experts on FSDP axis; megablox dropless with tuned "
                 "wi/wo tiles; routing learned (no use_random_routing flag in this recipe)",
        remat="custom: decoder_layer_input=offload",
        precision="fp8 matmuls (quantization=fp8_full via qwix, static scales), bf16 grads/mu",
        attention="causal flash (MLA)",
        optimizer="AdamW",
        measured=22.47,
        measured_unit="s/step (730.60 TFLOP/s/chip)",
        step_s=22.47,
        derivation="As published. 2917.15 x 22.47 = 65548 ~ 65536.",
        source_url=RECIPES + "training/ironwood/README.md (config: training/ironwood/"
                   "deepseek3-671b/4k-fp8-tpu7x-4x4x8/xpk/run_recipe.sh)",
        source_quote="| deepseek-v3 | 128 | 2048 | 4096 | fp8_full | 22.47 | 730.60 | 2,917.15 |",
    ),
    dict(
        name="qwen3-235b-a22b-v7-256-bf16",
        chip="v7",
        kind="training",
        model="Qwen3-235B-A22B (94 layers, 128 experts top-8, GQA 64q/4kv, qk-norm)",
        hf_config="Qwen/Qwen3-235B-A22B",
        chips=256,
        global_batch=8192,
        seq=4096,
        per_chip_batch=32,
        sharding="FSDP over 512 devices (per_device_batch_size=16); sparse_matmul with tokamax "
                 "GMM, megablox=False; use_random_routing=True",
        remat="custom: decoder_layer_input=offload",
        precision="bf16 compute, fp32 weights",
        attention="causal flash (tokamax splash)",
        optimizer="AdamW",
        measured=30.87,
        measured_unit="s/step (629.79 TFLOP/s/chip)",
        step_s=30.87,
        derivation="As published. 4245.89 x 30.87 = 131070 ~ 32 x 4096.",
        source_url=RECIPES + "training/ironwood/README.md (config: training/ironwood/"
                   "qwen3-235b-a22b/4k-bf16-tpu7x-4x8x8/xpk/run_recipe.sh)",
        source_quote="| qwen3-235b-a22b | 256 | 8192 | 4096 | bf16 | 30.87 | 629.79 | 4,245.89 |",
    ),
    dict(
        name="gpt-oss-120b-v7-64-bf16",
        chip="v7",
        kind="training",
        model="gpt-oss-120b (36 layers, 128 experts top-4, alternating sliding-window 128 / full "
              "attention with sinks, head_dim 64)",
        hf_config="openai/gpt-oss-120b",
        chips=64,
        global_batch=1280,
        seq=8192,
        per_chip_batch=20,
        sharding="FSDP 64 x data 2 over 128 devices (per_device_batch_size=10); experts on FSDP "
                 "axis; megablox + tokamax GMM; use_random_routing=True",
        remat="custom: decoder_layer_input=offload, mlpwo=offload",
        precision="bf16 compute, fp32 weights",
        attention="causal flash; sliding window 128 on every other layer",
        optimizer="AdamW",
        measured=17.10,
        measured_unit="s/step (330.25 TFLOP/s/chip)",
        step_s=17.10,
        derivation="As published. 9581.66 x 17.10 = 163846 ~ 20 x 8192.",
        source_url=RECIPES + "training/ironwood/README.md (config: training/ironwood/"
                   "gpt-oss-120b/8k-bf16-tpu7x-4x4x4/xpk/run_recipe.sh)",
        source_quote="| gpt-oss-120b | 64 | 1280 | 8192 | bf16 | 17.10 | 330.25 | 9,581.66 |",
    ),
    dict(
        name="qwen3-coder-480b-v7-4-vllm-1k1k",
        chip="v7",
        kind="inference-decode",
        model="Qwen3-Coder-480B-A35B-Instruct (MoE, 35B active; qwen3_moe architecture)",
        hf_config="Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8",
        chips=4,
        global_batch=64,
        seq=2048,
        per_chip_batch=None,
        sharding="TP 8 over 8 TensorCores (tpu7x-standard-4t), --enable-expert-parallel, DP 1",
        remat=None,
        precision="FP8 checkpoint (block-scaled e4m3 weights), fp8 KV cache",
        attention="causal ragged paged attention; max-num-batched-tokens 8192, max-num-seqs 512",
        optimizer=None,
        measured=499.0,
        measured_unit="output tok/s/chip (1996.00 tok/s total), 1k input / 1k output, "
                      "max-concurrency 64, 320 prompts, random-range-ratio 0.8 (InferenceX client)",
        step_s=0.0321,
        derivation="Iteration time <= concurrency / total output rate = 64 / 1996 = 32.1 ms "
                   "(upper bound: prefill iterations are inside the same wall time).",
        source_url=RECIPES + "inference/ironwood/vLLM/Qwen3-Coder-480B-A35B/README.md",
        source_quote="1k/1k    | 1996.00 tok/s (499 tok/s/chip)",
    ),
    dict(
        name="qwen3.5-397b-v7-4-vllm-1k8k",
        chip="v7",
        kind="inference-decode",
        model="Qwen3.5-397B-A17B (hybrid Gated DeltaNet linear attention + full attention, MoE; "
              "language model only)",
        hf_config="Qwen/Qwen3.5-397B-A17B-FP8",
        chips=4,
        global_batch=64,
        seq=9216,
        per_chip_batch=None,
        sharding="TP 8 over 8 TensorCores, --enable-expert-parallel, DP attention "
                 "(enable_dp_attention)",
        remat=None,
        precision="FP8 weights, fp8 KV cache",
        attention="causal; linear-attention (gated delta rule) layers plus paged full attention",
        optimizer=None,
        measured=1293.0,
        measured_unit="output tok/s/chip (5171.98 tok/s total), 1k input / 8k output, "
                      "max-concurrency 128 with max-num-seqs 64",
        step_s=0.0124,
        derivation="max-num-seqs 64 caps running sequences at 64: 64 / 5171.98 = 12.4 ms per "
                   "iteration (upper bound). Weakest LLM row: hybrid architecture, and the "
                   "server's DP-attention layout is not fully stated.",
        source_url=RECIPES + "inference/ironwood/vLLM/Qwen3.5-397B/README.md (server args: "
                   "qwen3_5-server.yaml in the same folder)",
        source_quote="1k/8k    | 5171.98 tok/s (1293.00 tok/s/chip)",
    ),
]

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

GCP = "https://cloud.google.com/tpu/docs/"
JAX_TPU_INFO = ("https://github.com/jax-ml/jax/blob/1ebd186c6174f43c2853adc2e8594a5f3729e395/"
                "jax/_src/tpu_info.py")
TOKAMAX_KDA = ("https://github.com/openxla/tokamax/blob/24175b72d30e370fa6d65f3995c84bc162a2481c/"
               "tokamax/_src/ops/experimental/kda/utils.py")
SCALING_BOOK = "https://jax-ml.github.io/scaling-book/tpus/ (jax-ml/scaling-book tpus.md@54e2c439)"

CHIP_FACTS: dict[str, list[dict]] = {
    "v5e": [
        dict(figure="peak bf16", value=197e12, unit="FLOP/s/chip", source_url=GCP + "v5e",
             quote="Peak compute per chip (bf16) | 197 TFLOPs"),
        dict(figure="peak int8", value=393e12, unit="OP/s/chip", source_url=GCP + "v5e",
             quote="Peak compute per chip (Int8) | 393 TOPs"),
        dict(figure="HBM bandwidth", value=800 * 2**30, unit="B/s/chip", source_url=GCP + "v5e",
             quote="HBM bandwidth per chip | 800 GiBps"),
        dict(figure="HBM bandwidth (JAX table)", value=8.20e11, unit="B/s/chip",
             source_url=JAX_TPU_INFO, quote="mem_bw_bytes_per_second=int(8.20e11)"),
        dict(figure="ICI bandwidth", value=400e9, unit="B/s/chip bidirectional, 4 ports",
             source_url=GCP + "v5e",
             quote="Bidirectional inter-chip interconnect (ICI) bandwidth (per chip) | 400 GBps"),
        dict(figure="MXUs", value=4, unit="128x128 MXUs per TensorCore, 1 TensorCore per chip",
             source_url=GCP + "v5e",
             quote="Each TensorCore has four matrix-multiply units (MXUs)"),
        dict(figure="clock", value=1.5e9, unit="Hz", source_url=SCALING_BOOK,
             quote="about `5e13` bf16 FLOPs/s per MXU at 1.5GHz on TPU v5e"),
        dict(figure="VPU shape", value=(8, 128), unit="(sublanes, lanes) per TensorCore",
             source_url=JAX_TPU_INFO, quote="NUM_LANES = 128 / NUM_SUBLANES = 8 (all "
             "generations in the table)"),
        dict(figure="fp8 MXU rate", value=0, unit="not available", source_url=JAX_TPU_INFO,
             quote="TPU_V5E ... fp8_ops_per_second=0,  # Not Available"),
    ],
    "v5p": [
        dict(figure="peak bf16", value=459e12, unit="FLOP/s/chip", source_url=GCP + "v5p",
             quote="Peak compute per chip (BF16) (TFLOPs) | 459"),
        dict(figure="peak int8", value=918e12, unit="OP/s/chip", source_url=JAX_TPU_INFO,
             quote="int8_ops_per_second=int(9.18e14 // tensor_cores_per_chip)"),
        dict(figure="HBM bandwidth", value=2765e9, unit="B/s/chip", source_url=GCP + "v5p",
             quote="HBM bandwidth per chip (GBps) | 2765"),
        dict(figure="HBM bandwidth (JAX table)", value=2.46e12, unit="B/s/chip",
             source_url=JAX_TPU_INFO, quote="mem_bw_bytes_per_second=int(2.46e12 // "
             "tensor_cores_per_chip)"),
        dict(figure="ICI bandwidth", value=1200e9, unit="B/s/chip bidirectional",
             source_url=GCP + "v5p",
             quote="Bidirectional inter-chip interconnect (ICI) bandwidth per chip (GBps) | 1200"),
        dict(figure="ICI per link", value=9e10, unit="B/s one-way per link (1.8e11 bidi), 3 axes",
             source_url=SCALING_BOOK, quote="| **TPU v5p** | 9e10 | 1.8e11 |"),
        dict(figure="MXUs", value=4, unit="128x128 MXUs per TensorCore, 2 TensorCores per chip",
             source_url=GCP + "v5p",
             quote="Each TensorCore has four Matrix Multiply Units (MXU)"),
        dict(figure="clock", value=1.75e9, unit="Hz (approximate)", source_url=SCALING_BOOK,
             quote="A TPU v5p has a clock speed of about 1.75GHz."),
        dict(figure="VPU", value=1.4e13, unit="vector FLOP/s per chip: (8,128) lanes x 4 ALUs x "
             "2 cores x 1.75 GHz", source_url=SCALING_BOOK,
             quote="Each (lane, sublane) pair on v5 contains 4 standard floating-point ALUs ... "
                   "8 * 128 * 4 * 2 * 1.75e9 = 1.4e13 FLOPs/s"),
        dict(figure="fp8 peak (docs)", value=459e12, unit="FLOP/s/chip (same as bf16)",
             source_url=GCP + "v5p", quote="Peak compute per chip (FP8) (TFLOPs) | 459"),
    ],
    "v6e": [
        dict(figure="peak bf16", value=918e12, unit="FLOP/s/chip", source_url=GCP + "v6e",
             quote="Peak compute per chip (bf16) | 918 TFLOPs"),
        dict(figure="peak int8", value=1836e12, unit="OP/s/chip", source_url=GCP + "v6e",
             quote="Peak compute per chip (Int8) | 1836 TOPs"),
        dict(figure="fp8 rate", value=9.20e14, unit="FLOP/s/chip (= bf16)",
             source_url=JAX_TPU_INFO, quote="fp8_ops_per_second=int(9.20e14)"),
        dict(figure="HBM bandwidth", value=1638e9, unit="B/s/chip", source_url=GCP + "v6e",
             quote="HBM bandwidth per chip | 1638 GBps"),
        dict(figure="ICI bandwidth", value=800e9, unit="B/s/chip bidirectional, 4 ports",
             source_url=GCP + "v6e",
             quote="Bidirectional inter-chip interconnect (ICI) bandwidth (per chip) | 800 GBps"),
        dict(figure="MXUs and VPU", value=(2, 256, 8, 128),
             unit="(MXUs per TensorCore, MXU side, VPU sublanes, VPU lanes); 1 TensorCore/chip",
             source_url=GCP + "v6e",
             quote="Each TensorCore contains two 256x256 matrix-multiply units (MXU), a 128x8 "
                   "vector processing unit (VPU) with 128 lanes x 8 sublanes"),
        dict(figure="clock", value=1.75e9, unit="Hz (kernel-tuning table in Google code, not "
             "an official spec page)", source_url=TOKAMAX_KDA,
             quote='TPU_V6E = TpuConfig(... frequency_ghz=1.75, tflops_fp32_1d=7.168, '
                   'description="TPU v6e (Trillium)"'),
        dict(figure="VPU fp32 rate", value=7.168e12, unit="FLOP/s/chip (= 4096 FLOP/cycle at "
             "1.75 GHz)", source_url=TOKAMAX_KDA, quote="tflops_fp32_1d=7.168"),
        dict(figure="clock (official docs)", value=None, unit="not stated",
             source_url=GCP + "v6e",
             quote="(no clock figure on the v6e page; MLPerf v4.1 system file "
                   "cloud-tpu-trillium-512-maxtext.json has accelerator_frequency \"\")"),
    ],
    "v7": [
        dict(figure="peak bf16", value=2307e12, unit="FLOP/s/chip", source_url=GCP + "tpu7x",
             quote="Peak compute per chip (BF16) (TFLOPs) | 459 | 918 | 2307"),
        dict(figure="peak fp8", value=4614e12, unit="FLOP/s/chip", source_url=GCP + "tpu7x",
             quote="Peak compute per chip (FP8) (TFLOPs) | 459 | 918 | 4614"),
        dict(figure="int8 MXU rate", value=0, unit="not available (no int8 matmul path)",
             source_url=JAX_TPU_INFO,
             quote="case ChipVersion.TPU_7 | ChipVersion.TPU_7X: ... int8_ops_per_second=0,  "
                   "# Not Available"),
        dict(figure="HBM capacity", value=192 * 2**30, unit="B/chip", source_url=GCP + "tpu7x",
             quote="HBM capacity per chip (GiB) | 95 | 32 | 192"),
        dict(figure="HBM bandwidth (JAX table)", value=7.40e12, unit="B/s/chip",
             source_url=JAX_TPU_INFO,
             quote="mem_bw_bytes_per_second=int(7.40e12 // tensor_cores_per_chip)"),
        dict(figure="HBM copy bandwidth, measured", value=6.42e12,
             unit="B/s/chip (8 GiB copy on tpu7x-2x2x1; 3.21e12 per core)",
             source_url=RECIPES + "microbenchmarks/ironwood/hbm/hbm.md",
             quote="| 8589934592 | 3210.480912 | 6420.961823 |"),
        dict(figure="ICI", value=9.6e12, unit="bit/s per chip (= 1.2 TB/s)",
             source_url="https://blog.google/products/google-cloud/ironwood-google-tpu-things-to-know",
             quote="Inter-Chip Interconnect (ICI) network operating at 9.6 Tb/s"),
        dict(figure="TensorCores", value=2, unit="per chip (each a separate JAX device, no "
             "megacore)", source_url=GCP + "tpu7x",
             quote="Each TPU7x chip contains two TensorCores and four SparseCores."),
        dict(figure="MXUs and VPU", value=(2, 256, 8, 128),
             unit="(MXUs per TensorCore, MXU column size, VPU sublanes, VPU lanes)",
             source_url=JAX_TPU_INFO,
             quote="generation=7, ... num_lanes=128, num_sublanes=8, mxu_column_size=256, "
                   "num_mxus=2"),
        dict(figure="clock", value=2.2e9, unit="Hz (kernel-tuning table in Google code, not an "
             "official spec page)", source_url=TOKAMAX_KDA,
             quote='TPU_V7 = TpuConfig(... frequency_ghz=2.2, tflops_fp32_1d=9.0112, '
                   'description="TPU v7 (Ironwood) - 2 devices per chip, values are per-device"'),
        dict(figure="VPU fp32 rate", value=2 * 9.0112e12, unit="FLOP/s/chip (9.0112e12 per "
             "TensorCore = 4096 FLOP/cycle at 2.2 GHz)", source_url=TOKAMAX_KDA,
             quote="tflops_fp32_1d=9.0112"),
        dict(figure="clock (official docs)", value=None, unit="not stated; the chip uses DVFS",
             source_url=GCP + "tpu7x",
             quote="(no clock figure on the TPU7x page; Hot Chips 2025 coverage mentions dynamic "
                   "voltage and frequency scaling)"),
    ],
}

# Consistency notes on the clocks above (arithmetic on the cited figures, no new source):
# v5e 197e12 / (4 MXU * 128*128 * 2 * 1.5e9) = 1.00 and v5p 459e12 / (2 * 4 * 128*128 * 2 *
# 1.75e9) = 1.00, so for 128x128 MXUs peak = MXUs * side^2 * 2 FLOP * clock. For the 256x256
# generations the same formula with the published MXU counts (v6e: 2 per chip; v7: 2 per core, 4
# per chip) and the tokamax clocks gives 918e12 / (2*65536*2*1.75e9) = 2.00 and 2307e12 /
# (4*65536*2*2.2e9) = 2.00: either each 256x256 MXU does two MACs per cell per cycle or the
# clocks are 3.5 / 4.4 GHz (what torchtpu derives today). The VPU figures (4096 FLOP/cycle per
# TensorCore on v6e and v7, as on v5p) agree with the 1.75 / 2.2 GHz clocks.
