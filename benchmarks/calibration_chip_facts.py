"""Public per-chip figures (peaks, HBM and ICI bandwidth, clock, VPU shape) with their sources,
for the constants of csrc/runtime/ChipSpec.cpp (benchmarks/calibration_set.py; issue 46, item 3)."""

from calibration_set_v5 import RECIPES

GCP = "https://cloud.google.com/tpu/docs/"
JAX_TPU_INFO = ("https://github.com/jax-ml/jax/blob/1ebd186c6174f43c2853adc2e8594a5f3729e395/"
                "jax/_src/tpu_info.py")
TOKAMAX_KDA = ("https://github.com/openxla/tokamax/blob/24175b72d30e370fa6d65f3995c84bc162a2481c/"
               "tokamax/_src/ops/experimental/kda/utils.py")
SCALING_BOOK = "https://jax-ml.github.io/scaling-book/tpus/ (jax-ml/scaling-book tpus.md@54e2c439)"
PALLAS_MATMUL = ("https://github.com/jax-ml/jax/blob/1082251cde876f91608b403d1995b5e0025f0398/"
                 "docs/pallas/tpu/matmul.ipynb (docs.jax.dev/en/latest/pallas/tpu/matmul.html)")
IRONWOOD_MICRO = ("https://github.com/AI-Hypercomputer/accelerator-microbenchmarks/blob/"
                  "v1.1-legacy/Ironwood/Ironwood_Microbenchmarks_readme.md")

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
        dict(figure="large bf16 GEMM, measured", value=181.82317539503744e12,
             unit="FLOP/s/chip (XLA's jnp.matmul, 8192^3, host-timed: 0.923 of peak)",
             source_url=PALLAS_MATMUL,
             quote="----- 8192 x 8192 x 8192 ----- ... Matmul FLOP/s:  181823175395037.44 ... "
                   "FLOP/s utilization: 92.2960%"),
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
        dict(figure="large bf16 GEMM, measured", value=827.474382048629e12,
             unit="FLOP/s/chip (8192^3 on a v6e-1, timed from the trace: 0.901 of peak)",
             source_url=RECIPES + "microbenchmarks/README.md",
             quote="dtype: bfloat16, matrix dimensions: (8192, 8192, 8192), time taken (median, "
                   "ms): 1.328756094, TFLOPS: 827.474382048629"),
        dict(figure="HBM copy bandwidth, measured", value=1359.5960438266143e9,
             unit="B/s/chip (a 32 MiB copy, reads and writes counted: 0.829 of 1.64e12)",
             source_url=RECIPES + "microbenchmarks/README.md",
             quote="Tensor size (bytes): 33554432, time taken (ms, median): 0.049359414, "
                   "bandwidth (GBps, median): 1359.5960438266143"),
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
        dict(figure="large bf16 GEMM, measured", value=956.3824592e12,
             unit="FLOP/s per TensorCore (m=n=k=32768; 0.829 of 2307e12 / 2)",
             source_url=IRONWOOD_MICRO,
             quote="| 16384 | 950.1286983 | / | 32768 | 956.3824592 | (Throughput "
                   "TFLOP/s/device, gemm_multiple_run, bfloat16)"),
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
