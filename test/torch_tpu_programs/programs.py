"""Which of Google TorchTPU's tutorials, notebooks and examples test/torch_tpu_programs/run.py
runs, and how: the program (its path in TorchTPU's repository, vendored at the same path under
third_party/torch_tpu_programs/), its kind, argv, environment and stand-ins, what its output
must show, or why it is skipped.

Rules (docs/coming-from-torchtpu.md, "TorchTPU's own programs"): a program is never edited.
Allowed: a local stand-in for a data set download or Hub weights (test/torch_tpu_programs/
standins/), and argv or environment variables that shrink sizes. A program that needs a real
TPU (libtpu, XLA devices, Pallas' TPU lowering, jax with a TPU) or something else outside any
CPU machine's reach is skipped with that reason; one that needs something torchtpu's twin of
``torch_tpu`` lacks runs and fails, and ``why_fails`` names the missing API.
"""
from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass
class Program:
    path: str  # in TorchTPU's repository (and under third_party/torch_tpu_programs/)
    kind: str  # marimo | ipynb | script | shell | torchrun
    argv: tuple = ()
    env: dict = dataclasses.field(default_factory=dict)
    # Stand-ins (test/torch_tpu_programs/standins/): "mnist" (the download of MNIST), "hf:ORG/NAME"
    # (a Hub checkpoint), "data:ORG/NAME" (the same at TorchTPU's /data/weights/huggingface).
    standins: tuple = ()
    expect: tuple = ()  # regular expressions the output must match
    skip: str | None = None  # why it is not run
    requires: tuple = ()  # optional Python packages it imports (skipped where one is missing)
    why_fails: str | None = None  # the missing TorchTPU API or behaviour, for a known failure
    timeout: float = 600.0
    ci: bool = False  # run by test/python/test_torch_tpu_programs.py
    nproc: int = 2  # torchrun only
    cwd: str | None = None  # shell only: "root" runs it from the repository's root
    name: str = ""
    note: str = ""  # said beside its result in docs/coming-from-torchtpu.md

    def __post_init__(self):
        if not self.name:
            stem = os.path.splitext(self.path)[0]
            self.name = stem.replace("examples/", "").replace("docs/notebooks/", "nb/") \
                .replace("torch_tpu/nb/", "pkg-nb/").replace("torch_tpu/docs/", "pkg-docs/")


# The reasons shared by several programs.
GOOGLE_LAUNCHER = ("Google-internal launcher (torch.google, torch_tpu shims' g3_multiprocessing), "
                   "which TorchTPU's public package does not have; launch.sh starts the same "
                   "worker")
BAZEL = ("finds its model configuration through Bazel's runfiles (rules_python): runs only "
         "inside TorchTPU's Bazel workspace")
TESTS_PKG = ("imports TorchTPU's repository test helpers (tests.seed_test_utils), part of its "
             "test infrastructure, not of the examples")
CPU_ONLY = ("never uses the tpu device (CPU tensors, torch.compile's aot_eager): runs as on any "
            "PyTorch")
LIBTPU_FLAGS = ("puts libtpu's dump flags (--xla_jf_dump_to) on its absl command line, which only "
                "a libtpu install defines (absl refuses them elsewhere)")
NO_TORCHVISION = ("imports torchvision, which does not import beside the CPU torch 2.13.0 here: "
                  "PyPI's torchvision for it, 0.28.0 (it declares torch==2.13.0), is a CUDA 13.0 "
                  "build (0.28.0+cu130) whose _C.so needs libtorch_cuda.so and libc10_cuda.so, "
                  "which a CPU torch does not have; torchvision then loads none of its ops and "
                  "its import stops at register_fake(\"torchvision::nms\") (RuntimeError: "
                  "operator torchvision::nms does not exist), before any model is built (tried: "
                  "pip install --no-deps torchvision==0.28.0 in a venv seeing this torch); PyPI "
                  "has no torchvision source to build a CPU one from, and PyTorch's CPU wheels are "
                  "on its own index, which this machine does not reach")

PROGRAMS: list[Program] = [
    # --- marimo notebooks: docs/notebooks ---
    Program("docs/notebooks/index.py", "marimo", ci=True),
    Program("docs/notebooks/get_started_tpu.py", "marimo", ci=True,
            expect=(r"Result Checksum \(Sum\): ",)),
    Program("docs/notebooks/api_mapping.py", "marimo", ci=True),
    Program("docs/notebooks/eager_mode.py", "marimo", ci=True),
    Program("docs/notebooks/deferred_execution.py", "marimo", ci=True),
    Program("docs/notebooks/precision_management.py", "marimo",
            expect=(r"\[PASSED\] Successfully disabled excess precision",
                    r"\[PASSED\] Successfully enabled excess precision")),
    Program("docs/notebooks/compilation_cache.py", "marimo", ci=True),
    Program("docs/notebooks/numerical_parity.py", "marimo", ci=True),
    Program("docs/notebooks/error_glossary.py", "marimo", ci=True),
    Program("docs/notebooks/environment_variables.py", "marimo", ci=True),
    Program("docs/notebooks/performance_profiling.py", "marimo", ci=True),
    Program("docs/notebooks/advanced_compile.py", "marimo", ci=True),
    Program("docs/notebooks/distributed_training_101.py", "marimo",
            note="its code cells are disabled (reference only): marimo runs its text"),
    Program("docs/notebooks/porting_vit_mnist.py", "marimo", standins=("mnist",)),
    Program("docs/notebooks/background_on_aten_ops.py", "marimo", note=CPU_ONLY),
    Program("docs/notebooks/background_on_torch_compile.py", "marimo", note=CPU_ONLY),
    Program("docs/notebooks/background_on_torch_compile_on_tpus_via_xla.py", "marimo", ci=True),
    Program("docs/notebooks/customizing_autograd_via_torch_autograd_function.py", "marimo",
            note=CPU_ONLY),
    Program("docs/notebooks/extending_modules_and_functions_via_composition.py", "marimo",
            note=CPU_ONLY),
    Program("docs/notebooks/quant.py", "marimo"),
    Program("docs/notebooks/quantized_sum.py", "marimo", requires=("jax",)),
    Program("docs/notebooks/custom_ops_via_pallas.py", "marimo", requires=("jax",)),
    Program("docs/notebooks/custom_pallas_kernel.py", "marimo", requires=("jax",),
            expect=(r"Verification complete: Pallas integration functional",)),
    # --- marimo notebooks: torch_tpu/docs ---
    Program("torch_tpu/docs/get_started_tpu.py", "marimo",
            skip="imports tpu_utils from torch_tpu/docs/, which its BUILD names but the copy of "
                 "TorchTPU's repository it comes from does not have"),
    Program("torch_tpu/docs/notebooks/index.py", "marimo", ci=True),
    Program("torch_tpu/docs/notebooks/compilation_cache.py", "marimo", ci=True),
    Program("torch_tpu/docs/notebooks/numerical_parity.py", "marimo", ci=True),
    Program("torch_tpu/docs/notebooks/error_glossary.py", "marimo"),
    Program("torch_tpu/docs/notebooks/porting_vit_mnist.py", "marimo", standins=("mnist",)),
    # --- tutorials ---
    Program("examples/tutorials/precision/precision_tutorial.ipynb", "ipynb", ci=True),
    Program("examples/tutorials/large_language_model/hello_world_llm.ipynb", "ipynb",
            standins=("hf:Qwen/Qwen3-0.6B",), ci=True),
    Program("examples/tutorials/hello_world_llm_eager_test.py", "script",
            standins=("hf:Qwen/Qwen3-0.6B",)),
    Program("examples/tutorials/large_language_model/hello_world_llm_eager_test.py", "script",
            standins=("data:Qwen/Qwen3-0.6B",)),
    Program("examples/tutorials/distributed/hello_world_distributed.ipynb", "ipynb",
            env={"ACCELERATOR_TYPE": "v6e-8"},
            note="starts 8 workers: run on a simulated v6e-8 host"),
    Program("examples/tutorials/distributed/hello_world_distributed_run_script.sh", "shell",
            skip="runs examples/tutorials/distributed/hello_world_distributed_test.py, which "
                 "TorchTPU's repository does not have (run_hello_world_distributed.sh runs the "
                 "same worker)"),
    Program("examples/tutorials/distributed/run_hello_world_distributed.sh", "shell", cwd="root"),
    # --- examples ---
    Program("examples/simple_nn/simple_ops_nn_example.py", "script", ci=True),
    Program("examples/dlrm/dlrm_simple.py", "script", ci=True),
    Program("examples/resnet/resnet.py", "script"),
    Program("examples/deepseek/trace.py", "script"),
    Program("examples/deepseek/deepseek_decomposition_one_acc_test.py", "script",
            argv=("--acc=tpu",),
            skip="broken in TorchTPU itself: its BUILD marks the TPU variant notap, \"Currently "
                 "broken\"; test_set_default_device compares str(api.tpu_device()), \"tpu\" "
                 "(TorchTPU's tpu_device() has no index), with the device of a tensor made "
                 "under torch.set_default_device(api.tpu_device()), tpu:0 (as under \"cuda\" it "
                 "is cuda:0); torchtpu gives TorchTPU's values for both, so it fails the same way "
                 "(its other 59 tests pass)"),
    Program("examples/mingpt/mingpt_example.py", "script", requires=("jax",),
            argv=("--device=tpu", "--xla_jf_conv_full_precision"),
            note="run with its BUILD's arguments: libtpu's --xla_jf_conv_full_precision (\"highest "
                 "precision for matmuls for tests only\"), which torchtpu honours"),
    Program("examples/mingpt/mingpt_training_example.py", "script"),
    Program("examples/mingpt/mingpt_decomposition_tests.py", "script"),
    Program("examples/ops_and_kernels/call_linear.py", "script", note=CPU_ONLY),
    Program("examples/ops_and_kernels/qat_linear.py", "script", note=CPU_ONLY),
    Program("examples/ops_and_kernels/sigmoid_no_vanishing_grad.py", "script", note=CPU_ONLY),
    Program("examples/ops_and_kernels/pointwise_fusion_xla.py", "script", skip=LIBTPU_FLAGS),
    Program("examples/ops_and_kernels/quant.py", "script", skip=LIBTPU_FLAGS),
    Program("examples/ops_and_kernels/quantized_sum.py", "script", skip=LIBTPU_FLAGS,
            note="its notebook twin, nb/quantized_sum, runs the same kernel"),
    Program("examples/ops_and_kernels/call_pallas_add.py", "script", requires=("jax",)),
    Program("examples/ops_and_kernels/quant_pallas.py", "script", skip=LIBTPU_FLAGS,
            note="its notebook twin, nb/custom_ops_via_pallas, runs the same kernel"),
    Program("examples/ops_and_kernels/pointwise_fusion_cuda.py", "script",
            skip="needs a CUDA GPU (the CUDA half of TorchTPU's fusion comparison)"),
    Program("examples/huggingface_transformers/functional_test.py", "script",
            argv=("--device=tpu",)),
    Program("examples/huggingface_transformers/trace_ops.py", "script",
            skip="broken in TorchTPU itself without --model_id: the last of the mini configs it "
                 "traces, TorchTPU's own Llama-4-Scout-17B-16E-Instruct-MINI (model_configs/), "
                 "has no \"architectures\", and its loop over config.architectures raises "
                 "TypeError on any device; the two runs below pass the others by --model_id"),
    Program("examples/huggingface_transformers/trace_ops.py", "script",
            name="huggingface_transformers/trace_ops[Qwen3-235B-A22B-MINI]",
            argv=("--model_id=Qwen/Qwen3-235B-A22B-Instruct-2507-MINI",)),
    Program("examples/huggingface_transformers/trace_ops.py", "script",
            name="huggingface_transformers/trace_ops[Qwen3-Coder-30B-A3B-MINI]",
            argv=("--model_id=Qwen/Qwen3-Coder-30B-A3B-Instruct-MINI",)),
    Program("examples/huggingface_transformers/single_accelerator_smoke_test.py", "script",
            skip="reads model_configs/Qwen/Qwen3-1.7B/config.json, which the copy of TorchTPU's "
                 "repository does not have"),
    Program("examples/qwen3/qwen3_0_6b_forward_test.py", "script", skip=TESTS_PKG),
    Program("examples/qwen3/qwen_kv_cache.py", "script"),
    Program("examples/qwen3/qwen3_example.py", "script"),
    Program("examples/qwen3/qwen3_0_6b.ipynb", "ipynb", standins=("hf:Qwen/Qwen3-0.6B",)),
    Program("examples/llama3/llama3_2_example.py", "script",
            why_fails="its float32 logits (the 1B model with random weights, one token) against "
                      "the CPU's at rtol 1e-3, atol 1e-5 fail at the default float32 matmul "
                      "precision, one bfloat16 pass, as its BUILD runs it on a v5e (no precision "
                      "flag): 110001 of 128256 logits differ, by up to 0.012, in strict and fused eager "
                      "alike; at \"high\" 632 "
                      "still do, by up to 6.6e-5; it passes at \"highest\" "
                      "(TORCHTPU_MATMUL_PRECISION=highest, the chip's six bfloat16 passes)"),
    Program("examples/resnet/resnet_hf_example.py", "script",
            argv=("--device=tpu", "--image_h=64", "--image_w=64", "--num_epochs=3"),
            standins=("data:microsoft/resnet-50",)),
    Program("examples/gemma4/model_test.py", "script"),
    Program("examples/gemma4/correctness_test.py", "script"),
    Program("examples/gemma4/model_baseline_test.py", "script", skip=TESTS_PKG),
    Program("examples/gemma4/correctness_tpu_test.py", "script", skip=TESTS_PKG),
    Program("examples/gemma4/gemma4_hf_example.py", "script"),
    Program("examples/huggingface_transformers/model_configs_test.py", "script", skip=TESTS_PKG),
    Program("examples/huggingface_transformers/trace_activations.py", "script",
            argv=("--device=tpu", "--output_dir=."), standins=("data:Qwen/Qwen3-0.6B",)),
    Program("examples/huggingface_transformers/generate_cli.py", "script"),
    Program("examples/qwen3/qwen3_hf_example.py", "script", standins=("data:Qwen/Qwen3-0.6B",)),
    Program("examples/qwen3/qwen3_hf_pipe_example.py", "script",
            standins=("data:Qwen/Qwen3-0.6B",), expect=(r"Generation time: ",)),
    Program("examples/qwen3/qwen3_0_6b_custom_sampling_test.py", "script",
            argv=("--device=tpu",), standins=("data:Qwen/Qwen3-0.6B",)),
    Program("examples/qwen3/qwen3_0_6b_custom_sampling.ipynb", "ipynb",
            skip="reads its weights from /cns/..., Google's internal file system"),
    Program("examples/qwen3/qwen3_dynamic_kv_cache.py", "script",
            standins=("data:Qwen/Qwen3-0.6B",), expect=(r"output_tpu_compiled=",)),
    Program("examples/qwen3/qwen3_kv_cache_bd.py", "script", skip=BAZEL),
    Program("examples/qwen3/qwen3_vl_dynamic_kv_cache.py", "script", skip=BAZEL),
    Program("examples/qwen3/test_qwen3_vl_load.py", "script", skip=BAZEL),
    Program("examples/qwen3/qwen3_multi_wrapper.py", "script",
            skip="a benchmark driver that runs qwen3_vl_dynamic_kv_cache.py, which runs only "
                 "inside TorchTPU's Bazel workspace"),
    Program("examples/qwen3/xm_launch_bd.py", "script",
            skip="launches jobs on Google's XManager (xmanager)"),
    Program("examples/llama3/llama3_2_1b_training_nb.py", "script",
            skip="this version of the notebook sets torch.device(\"cuda\"): needs a CUDA GPU"),
    Program("examples/llama3/llama3_2_1b_training_test.py", "script", skip=BAZEL),
    Program("examples/llama3/llama3_2_1b_random_data_training_test.py", "script", skip=BAZEL),
    Program("examples/llama3/llama3_2_1b_training_peft_test.py", "script",
            skip="fine-tunes Llama 3.2 1B on a downloaded data set (datasets) with the 8B "
                 "Instruct tokenizer: no stand-in yet for either"),
    Program("examples/llama3/llama3_2_1b_hf_pipe_example.py", "script",
            skip="needs the Llama 3.2 1B checkpoint at /data/weights: no stand-in yet (only "
                 "Qwen3-0.6B has one)"),
    Program("examples/resnet/resnet50_tv_test.py", "script", argv=("--device=tpu",),
            why_fails=NO_TORCHVISION + "; past the import, two of its three tests read "
                      "goldfish.jpg (its BUILD's data, which the copy of TorchTPU's repository "
                      "does not have) and ImageNet weights at /data/weights/torchvision/ (no "
                      "stand-in yet)"),
    Program("examples/resnet/resnet50_tv_tool.py", "script", argv=("--device=tpu",),
            why_fails=NO_TORCHVISION + "; past the import, its test_store_weights downloads "
                      "torchvision's ImageNet weights (IMAGENET1K_V1)"),
    Program("examples/mingpt/mingpt_threshold_test.py", "script",
            skip="asserts a real chip's forward latency (6 ms for minGPT-L on a v5e) on the host's "
                 "clock: a simulator's wall time is not the chip's"),
    Program("examples/huggingface_diffusers/flux_1_schnell_test.py", "script",
            skip="its inference test loads FLUX.1-schnell's 12B checkpoint: not on a CPU in "
                 "minutes, and no stand-in yet"),
    Program("examples/huggingface_diffusers/sdxl_test.py", "script",
            skip="its inference test loads the SDXL checkpoint: no stand-in yet"),
    Program("examples/huggingface_diffusers/wan2_2_ti2v_5b_diffusers_test.py", "script",
            skip="loads Wan 2.2 TI2V 5B's checkpoint: not on a CPU in minutes, and no stand-in "
                 "yet"),
    Program("examples/distributed/tensor_parallel_multihost/main.py", "script",
            skip="several hosts of a TPU slice (torch_tpu shims' multihost launcher)"),
    Program("examples/distributed/fsdp/fsdp_worker.py", "torchrun", nproc=8,
            note="8 ranks, as its BUILD runs it (requires-tpu-v5lite:8): its model's width and "
                 "its check depend on the world size"),
    Program("examples/distributed/tensor_parallel/tp_worker.py", "torchrun",
            skip="the worker of an older layout: imports examples.distributed.tensor_parallel."
                 "model, which the copy of TorchTPU's repository does not have "
                 "(manual/tp_worker.py is its current form)"),
    Program("examples/distributed/tensor_parallel/manual/tp_worker.py", "torchrun"),
    Program("examples/distributed/tensor_parallel/dtensor_wrapped/dtp_worker.py", "torchrun"),
    Program("examples/distributed/hf_llama3/hf_llama3_worker.py", "torchrun",
            standins=("data:meta-llama/Llama-3.2-1B",),
            expect=(r"\[Rank 0\] Losses: tensor\(\[", r"\[Rank 1\] Losses: tensor\(\["),
            note="the Llama 3.2 1B stand-in's embeddings are untied: the worker's FSDP groups "
                 "split the tied pair, which torch 2.13's fully_shard refuses on any device"),
    Program("examples/distributed/data_parallel/manual/launch.sh", "shell"),
    Program("examples/distributed/data_parallel/manual/dp_worker.py", "torchrun"),
    Program("examples/distributed/data_parallel/wrapped/launch.sh", "shell"),
    Program("examples/distributed/data_parallel/wrapped/dp_worker.py", "torchrun"),
]
