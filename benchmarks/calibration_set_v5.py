"""Published TPU measurements on v5e and v5p (the rows of benchmarks/calibration_set.py, which
describes their fields and how they were chosen)."""

RECIPES = "https://github.com/AI-Hypercomputer/tpu-recipes/blob/main/"
MAXTEXT = "https://github.com/AI-Hypercomputer/maxtext/blob/"

V5_ROWS: list[dict] = [
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
]
