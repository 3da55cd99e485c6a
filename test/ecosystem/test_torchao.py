"""torchao's quantization on "tpu" (docs/ecosystem.md, "torchao"): ``quantize_`` with the int8
dynamic-activation, int8 weight-only, int4 weight-only (``IntxWeightOnlyConfig(torch.int4)``:
torchao's int4 weight-only path outside CUDA, XPU and NPU), int8-activation int4-weight and
float8 weight-only configurations, applied to a model on tpu and to one quantized on the CPU and
moved, in float32 and bfloat16, in strict and fused eager: the quantized weights and every
output equal to the CPU's, with no CPU fallback (fallback mode "error"). A tiny Qwen2 quantized
to int8 generates the CPU's tokens, greedy and sampled.

Runs where torchao is installed (scripts/test_ecosystem.sh makes build/venv-rl); skipped
otherwise.
"""
import copy
import os
import sys

import pytest
import torch
import torchtpu

pytest.importorskip("torchao")
import torchao.quantization as Q  # noqa: E402
from torchao.quantization import quantize_  # noqa: E402
from torchao.quantization.granularity import PerAxis, PerGroup  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from tiny_models import PROMPTS, build  # noqa: E402

CONFIGS = {
    "int8_dynamic_activation_int8_weight": lambda: Q.Int8DynamicActivationInt8WeightConfig(),
    "int8_weight_only": lambda: Q.Int8WeightOnlyConfig(),
    "int4_weight_only": lambda: Q.IntxWeightOnlyConfig(weight_dtype=torch.int4,
                                                       granularity=PerGroup(32)),
    "int8_weight_only_intx": lambda: Q.IntxWeightOnlyConfig(weight_dtype=torch.int8,
                                                            granularity=PerAxis(0)),
    "int8_dynamic_activation_int4_weight": lambda: Q.Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4, weight_granularity=PerGroup(32)),
    "float8_weight_only": lambda: Q.Float8WeightOnlyConfig(),
}


@pytest.fixture(autouse=True)
def _state():
    mode, fallback = torchtpu.get_eager_mode(), torchtpu.get_fallback_mode()
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # compared with the CPU's float32
    torchtpu.set_fallback_mode("error")
    torchtpu.metrics.reset()
    yield
    torch.tpu.synchronize()
    assert torchtpu.metrics.fallbacks() == {}
    torchtpu.set_fallback_mode(fallback)
    torchtpu.set_eager_mode(mode)
    torch.set_float32_matmul_precision(previous)


def mlp(dtype):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 64)).to(dtype)


def inner(t):
    """The plain tensors inside a torchao tensor subclass (its qdata, scales, zero points)."""
    if hasattr(t, "__tensor_flatten__"):
        names, _ = t.__tensor_flatten__()
        return [x for n in names for x in inner(getattr(t, n))]
    return [t]


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_quantize_on_tpu_equals_the_cpu(config, dtype, mode):
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(1)).to(dtype)
    cpu = mlp(dtype)
    quantize_(cpu, CONFIGS[config]())
    expected = cpu(x)
    with torchtpu.eager_mode(mode):
        on_tpu = mlp(dtype).to("tpu")
        quantize_(on_tpu, CONFIGS[config]())  # quantized on the device
        moved = copy.deepcopy(cpu).to("tpu")  # quantized on the CPU, then moved
        for model in (on_tpu, moved):
            w = model[0].weight
            assert type(w) is type(cpu[0].weight) and w.device.type == "tpu"
            for got, want in zip(inner(w), inner(cpu[0].weight)):
                assert got.dtype == want.dtype and torch.equal(got.cpu(), want), config
            y = model(x.to("tpu"))
            assert y.dtype == expected.dtype and torch.equal(y.cpu(), expected), config


@pytest.mark.smoke
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_int8_dynamic_runs_its_matmul_as_integers_on_the_mxu(mode):
    # torchao's int8 dynamic path off CUDA multiplies int8 values as an int32 mm (out_dtype's
    # fallback): native, charged as int8 passes (10 for int32: sim/Mxu.h), no priced fallback.
    x = torch.randn(16, 256, generator=torch.Generator().manual_seed(2))
    with torchtpu.eager_mode(mode):
        model = mlp(torch.float32).to("tpu")
        quantize_(model, Q.Int8DynamicActivationInt8WeightConfig())
        torch.tpu.synchronize()
        torchtpu.metrics.reset()
        model(x.to("tpu")).cpu()
    ops = torchtpu.metrics.native_ops()
    assert any(k.startswith("aten::mm") for k in ops), ops
    assert torchtpu.metrics.estimate()["priced_as_native"] == 0


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    return build(str(tmp_path_factory.mktemp("tiny-qwen2")), "qwen2")


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_an_int8_quantized_model_generates_the_cpus_tokens(qwen_dir, mode):
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(qwen_dir)
    enc = tok(PROMPTS, return_tensors="pt", padding=True, padding_side="left")
    outs = {}
    for device in ("cpu", "tpu"):
        model = transformers.AutoModelForCausalLM.from_pretrained(qwen_dir, dtype=torch.float32)
        model = model.to(device)
        quantize_(model, Q.Int8DynamicActivationInt8WeightConfig())
        with torchtpu.eager_mode(mode if device == "tpu" else torchtpu.get_eager_mode()):
            inputs = {k: v.to(device) for k, v in enc.items()}
            greedy = model.generate(**inputs, max_new_tokens=12, do_sample=False)
            torch.manual_seed(4)
            sampled = model.generate(**inputs, max_new_tokens=12, do_sample=True,
                                     temperature=0.8, top_k=40)
        outs[device] = (greedy.cpu(), sampled.cpu())
    assert torch.equal(outs["tpu"][0], outs["cpu"][0])
    assert torch.equal(outs["tpu"][1], outs["cpu"][1])
    assert torchtpu.metrics.native_ops().get("aten::multinomial", 0) >= 12
