"""The transformers model zoo on "tpu": tiny random models built offline from config classes.

For each model type of transformers' auto mappings (causal LMs first, then the remaining base
models), in its own subprocess with a timeout:
  1. the default config, shrunk (small hidden sizes, two layers, small vocabulary, nested
     text/vision/audio and per-layer configs shrunk too), checked against a parameter cap on the
     meta device (a model still over it, or that the CPU cannot build or run, is shrunk harder:
     vocabularies, stage widths, scaling coefficients); inputs made for its main input (token ids, images, videos, audio waveforms or
     features, the patches and grid of a Qwen-VL style vision tower: the first candidate shape the
     CPU model accepts);
  2. on the CPU once: forward, backward of the mean square of the output, generate() for causal
     LMs (max_new_tokens=4, greedy), one AdamW step;
  3. on "tpu", in each eager mode asked for: the same stages, compared with the CPU.
Every model is classified per mode: pass, backend bug (tpu fails or differs where the CPU works),
or harness limitation (the CPU side could not build or run it: the reason is recorded).

    python test/models/zoo.py --modes strict,fused [--limit N] [--shard i/n] [--out F.jsonl]
    python test/models/zoo.py --report F1.jsonl F2.jsonl ...      (writes docs/models.md)
    bash scripts/zoo_sweep.sh                                     (both, sharded over the cores)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "test"))
from compare_errors import same_failure  # noqa: E402  when a CPU compile's error excuses tpu's
from zoo_recipes import apply_config, recipes as _recipes  # noqa: E402  per-type recipes
from zoo_recipes.limits import LIMITS  # noqa: E402  types no recipe can lift, and why

RECIPES = _recipes()
PARAM_CAP = 20_000_000
# float32 models of a few layers: matmuls at "highest" equal fp32 GEMMs up to addition order,
# and addmm adds the bias after the product (one extra rounding); through a few layers and a
# softmax this stays far below 1e-4.
ATOL, RTOL = 1e-4, 1e-4

SMALL = {
    "hidden_size": 32, "d_model": 32, "n_embd": 32, "embed_dim": 32, "dim": 32,
    "intermediate_size": 64, "ffn_dim": 64, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
    "n_inner": 64, "hidden_dim": 64,
    "num_hidden_layers": 2, "num_layers": 2, "n_layer": 2, "n_layers": 2,
    "encoder_layers": 2, "decoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "vocab_size": 128, "unpadded_vocab_size": 128, "vocab_size_per_layer_input": 128, "max_position_embeddings": 128, "n_positions": 128,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_intermediate_size": 32,
    "num_experts_per_tok": 2, "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8, "v_head_dim": 8,
}


FILL_IF_NONE = {"n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
                "moe_intermediate_size": 32, "attn_layer_indices": [1]}
# Hybrid (state-space + attention) models: with two layers, the second one attends.
HYBRID = {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
          "expert_layer_offset": 1}
# Other integer fields that are widths (shrunk to 32, or 64 for feed-forward sizes) when above 64:
# names with one of WIDTH_WORDS or ending in _dim, unless they name something that is not a width.
WIDTH_WORDS = ("hidden", "embed", "d_latents", "channels", "projection", "width")
NOT_A_WIDTH = ("token", "vocab", "size_per", "position", "length", "rate", "codebook", "id", "window",
               "bins", "temperature", "stride", "kernel", "image", "patch", "frames", "steps", "num_")
# Per-stage lists of convolutional / hierarchical models.
STAGE_DEPTHS = {"depths", "blocks_per_stage", "num_blocks", "stage_depths"}
STAGE_HEADS = {"num_heads", "num_attention_heads", "heads"}  # per stage: two divide every width
STAGE_WIDTHS = {"hidden_sizes", "embed_dims", "dims", "embed_dim_per_stage", "widths", "channels",
                "backbone_channel_list", "stage_channels"}


def _smaller_width(v: int) -> int:
    """A stage width shrunk by its value alone, so that lists which repeat a width (one stage's
    output channels, the next one's input channels) still agree: a sixteenth, a multiple of 8."""
    return v if v <= 64 else max(16, v // 16 // 8 * 8)


def shrink(cfg, harder: bool = False) -> None:
    """Makes the configuration small. `harder`: a second pass for a model the first leaves over
    PARAM_CAP or the CPU cannot build or run (run_one; models that pass keep the first pass's
    configuration)."""
    from transformers import PretrainedConfig

    def set_if_writable(key, value):
        try:
            setattr(cfg, key, value)
        except (AttributeError, TypeError, ValueError, NotImplementedError):
            pass  # a read-only property, derived from other fields (or one the class refuses)

    def get(key):
        try:
            return getattr(cfg, key, None)
        except Exception:  # noqa: BLE001 - some configs raise for per-layer attributes
            return None

    old_heads, old_kv = get("num_attention_heads"), get("num_key_value_heads")
    for key, value in SMALL.items():
        current = get(key)
        if isinstance(current, int) and not isinstance(current, bool):
            set_if_writable(key, value)
    # Fields a checkpoint sets but the config class leaves None (the model cannot be built).
    for key, value in FILL_IF_NONE.items():
        if key in vars(cfg) and get(key) is None:
            set_if_writable(key, value)
    for key in ("noise_scale", "noise_scale_duration"):  # sampling noise in the forward (VITS)
        if isinstance(get(key), float):
            set_if_writable(key, 0.0)
    for key, value in HYBRID.items():
        if isinstance(get(key), int):
            set_if_writable(key, value)
    heads = get("num_attention_heads")
    if "num_key_value_heads" in vars(cfg) and get("num_key_value_heads") is None and heads:
        set_if_writable("num_key_value_heads", heads)  # None: one per query head
    if isinstance(old_kv, int) and isinstance(old_heads, int) and old_kv and heads:
        # keep the grouping: as many query heads per key/value head as before, where possible
        group = max(1, old_heads // old_kv)
        set_if_writable("num_key_value_heads", heads // group if heads % group == 0 else heads)
    width = get("hidden_size") or get("d_model")
    if "head_dim" in vars(cfg) and (isinstance(get("head_dim"), int) or get("head_dim") is None):
        if isinstance(width, int) and isinstance(heads, int) and heads:
            set_if_writable("head_dim", width // heads)
    rope = get("rope_parameters")
    head_dim = get("head_dim")
    if not isinstance(head_dim, int) and isinstance(width, int) and isinstance(heads, int) and heads:
        head_dim = width // heads
    if (isinstance(rope, dict) and "mrope_section" not in rope and isinstance(head_dim, int)
            and "mrope_section" in getattr(type(cfg), "ignore_keys_at_rope_validation", ())):
        # the model's default sections are for its full head_dim: three for the shrunk one
        factor = rope.get("partial_rotary_factor") or get("partial_rotary_factor") or 1.0
        half = int(head_dim * factor) // 2
        rope["mrope_section"] = [half - 2 * (half // 3), half // 3, half // 3]
    if isinstance(rope, dict) and isinstance(rope.get("mrope_section"), list) and isinstance(head_dim, int):
        # multimodal rotary sections cover head_dim / 2 frequencies: keep their proportions
        sections, half = rope["mrope_section"], head_dim // 2
        scaled = [max(1, v * half // sum(sections)) for v in sections]
        scaled[-1] += half - sum(scaled)
        if scaled[-1] >= 1:
            rope["mrope_section"] = scaled
    if all(isinstance(get(k), int) for k in ("expand", "num_heads", "head_dim", "hidden_size")):
        # state-space heads (Mamba-2): num_heads * head_dim spans the expanded width
        set_if_writable("num_heads", max(1, get("expand") * get("hidden_size") // get("head_dim")))
    if isinstance(get("rotary_dim"), int):
        set_if_writable("rotary_dim", 4)
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        if isinstance(get(key), int) and get(key) >= 100:
            set_if_writable(key, 1)
    if isinstance(get("layer_types"), list) and cfg.layer_types:
        # as many layers as before the shrink allows, and every kind of layer kept
        kinds = list(dict.fromkeys(cfg.layer_types))
        n = max(get("num_hidden_layers") or 2, len(kinds))
        set_if_writable("num_hidden_layers", n)
        set_if_writable("layer_types", (kinds * n)[:n])
    for key, value in list(vars(cfg).items()):
        if key.startswith("_") or key in SMALL or isinstance(value, bool):
            continue
        name = key.lower()
        if harder and isinstance(value, int) and value > 128 and "vocab" in name:
            set_if_writable(key, 128)  # (an entity vocabulary, hashed byte groups)
        elif harder and isinstance(value, float) and name in ("width_coefficient", "depth_coefficient"):
            set_if_writable(key, min(value, 1.0))  # (EfficientNet's scaling of B0's stages)
        elif harder and isinstance(value, int) and value > 4 and name.endswith("num_attention_heads"):
            set_if_writable(key, 4)  # (heads of a part whose width the rule below makes 32)
        elif isinstance(value, int) and value > 64 and not any(
                (w in name.split("_")) if (harder and w == "id") else (w in name) for w in NOT_A_WIDTH):
            # (the first pass finds "id" inside "hidden" too: the harder one takes it as a word)
            if any(w in name for w in ("intermediate", "ffn", "mlp")):
                set_if_writable(key, 64)
            elif any(w in name for w in WIDTH_WORDS) or name.endswith("_dim"):
                set_if_writable(key, 32)
        elif isinstance(value, (list, tuple)) and value and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            if name in STAGE_HEADS:
                set_if_writable(key, [2] * len(value))
            elif name in STAGE_DEPTHS:
                set_if_writable(key, [1] * len(value))
            elif name in STAGE_WIDTHS and max(value) > 64:
                # keep the proportions between stages, multiples of 8, at most 64 wide
                set_if_writable(key, [max(8, v * 64 // max(value) // 8 * 8) for v in value])
            elif harder and max(value) > 64 and (name.endswith("_channels") or name.endswith("_dim")
                                                 or name in ("in_channels", "out_channels", "embed_dim")):
                set_if_writable(key, type(value)(_smaller_width(v) for v in value))
    for key, value in vars(cfg).items():
        if isinstance(value, PretrainedConfig):
            shrink(value, harder)
        elif isinstance(value, (list, tuple)):
            for item in value:  # per-layer configs
                if isinstance(item, PretrainedConfig):
                    shrink(item, harder)


def _config_value(cfg, names, default=None):
    """The first integer (or list) value of `names` on the config or its vision/audio parts."""
    parts = [cfg] + [getattr(cfg, k, None) for k in ("vision_config", "audio_config", "encoder_config",
                                                      "backbone_config")]
    for part in parts:
        for name in names:
            try:
                value = getattr(part, name, None) if part is not None else None
            except Exception:  # noqa: BLE001 - per-layer attributes raise
                value = None
            if isinstance(value, (int, list, tuple)) and not isinstance(value, bool):
                return value
    return default


def input_candidates(model, cfg, ids):
    """Inputs to try, in order, for the model's main input (the CPU decides which one fits)."""
    import inspect

    import torch

    name = model.main_input_name
    g = torch.Generator().manual_seed(0)
    params = inspect.signature(model.forward).parameters

    def images():
        size = _config_value(cfg, ["image_size", "img_size", "input_size"], 224)
        sizes = [tuple(size[-2:]) if isinstance(size, (list, tuple)) else (size, size), (224, 224), (64, 64)]
        channels = _config_value(cfg, ["num_channels", "in_channels", "in_chans"], 3)
        return [torch.randn(2, c, *hw, generator=g) for hw in dict.fromkeys(sizes)
                for c in dict.fromkeys([channels if isinstance(channels, int) else 3, 3])]

    cands = []
    grid_key = next((k for k in ("grid_thw", "image_grid_thw")
                     if k in params and params[k].default is inspect.Parameter.empty), None)
    if grid_key is not None:
        return _patch_grid_candidates(cfg, params, grid_key, g)
    if name == "input_ids":
        cands = [{"input_ids": ids}]
        if "pixel_values" in params and _config_value(cfg, ["image_size"]) is not None:
            # text and image towers (CLIP-like): both inputs, when the text alone is refused
            cands += [{"input_ids": ids, "pixel_values": x} for x in images()]
    elif name == "pixel_values":
        cands = [{name: x} for x in images()]
        frames = _config_value(cfg, ["num_frames"])
        if isinstance(frames, int):  # video models take (batch, frames, channels, height, width)
            cands += [{name: x.unsqueeze(1).expand(-1, frames, -1, -1, -1).contiguous()} for x in images()]
    elif name == "pixel_values_videos":
        size = _config_value(cfg, ["image_size", "crop_size"], 224)
        hw = tuple(size[-2:]) if isinstance(size, (list, tuple)) else (size, size)
        frames = _config_value(cfg, ["num_frames", "frames_per_clip"], 4)
        for t in dict.fromkeys([frames if isinstance(frames, int) else 4, 2, 4, 8, 16]):
            cands.append({name: torch.randn(2, t, 3, *hw, generator=g)})
    elif name == "input_values":
        channels = _config_value(cfg, ["audio_channels", "channels", "num_channels"], 1)
        shapes = [(2, 8000), (2, 1, 8000), (2, 16000), (2, 1, 16000)]
        if isinstance(channels, int) and channels > 1:
            shapes.insert(1, (2, channels, 8000))
        cands = [{name: torch.randn(*s, generator=g)} for s in shapes]
    elif name in ("input_features", "audio_mel"):
        mel = _config_value(cfg, ["num_mel_bins", "feature_size", "n_mels", "num_mels"], 80)
        positions = _config_value(cfg, ["max_source_positions"], None)
        shapes = []
        if isinstance(mel, int) and isinstance(positions, int):
            shapes.append((2, mel, 2 * positions))
        feats = [_config_value(cfg, [k]) for k in ("input_feat_per_channel", "feature_projection_input_dim",
                                                    "num_mel_bins", "feature_size", "n_mels", "hidden_size")]
        if isinstance(feats[0], int):
            feats[0] *= _config_value(cfg, ["input_channels"], 1)
        for f in dict.fromkeys([f for f in feats if isinstance(f, int)] + [80, 128, 160]):
            shapes += [(2, 64, f), (2, f, 64)]
        cands = [{name: torch.randn(*s, generator=g)} for s in dict.fromkeys(shapes)]
    elif name == "past_values":  # time series: (batch, context, channels) or (batch, context)
        context = _config_value(cfg, ["context_length"], 32)
        context = context if isinstance(context, int) else 32
        channels = _config_value(cfg, ["num_input_channels"], 1)
        channels = channels if isinstance(channels, int) else 1
        for shape in ((2, context, channels), (2, context), (2, min(context, 512))):
            c = {name: torch.randn(*shape, generator=g)}
            if "past_values_padding" in params:
                c["past_values_padding"] = torch.zeros(shape)
            if "freq" in params:
                c["freq"] = torch.zeros(2, 1, dtype=torch.long)
            cands.append(c)
    required = [k for k, p in params.items()
                if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD and k != "self"]
    if "input_ids" in required and name != "input_ids":  # image and text (detection, retrieval)
        cands = [{**c, "input_ids": ids} for c in cands]
    masks = [k for k in required if k.endswith("_mask") and k[: -len("_mask")] in params]
    for key in masks:  # a mask of its input that keeps everything, by the shapes such masks take
        base = key[: -len("_mask")]
        cands = [{**c, key: torch.ones(shape, dtype=torch.long)} for c in cands if base in c
                 for shape in dict.fromkeys([tuple(c[base].shape[:2]), (c[base].shape[0], c[base].shape[-1])])]
    if "use_cache" in params:  # the forward compared is one pass; a cache only adds harness trouble
        cands = [{**c, "use_cache": False} for c in cands]
    if "decoder_input_ids" in params and getattr(cfg, "is_encoder_decoder", False):
        start = getattr(cfg, "decoder_start_token_id", None)
        dec = torch.full((2, 4), start if isinstance(start, int) else 1, dtype=torch.long)
        cands = [{**c, "decoder_input_ids": dec} for c in cands]
    return cands


def _patch_grid_candidates(cfg, params, grid_key, g) -> list[dict]:
    """Vision towers of Qwen-VL style models take an image as its patches, flattened, with the
    grid they came from (frames, rows, columns per image; rows and columns a multiple of the
    patch merger's window): one 4 x 4-window image, its patches in the layouts such towers use."""
    import torch

    first = next(k for k in params if k not in ("self", grid_key))
    patch = _config_value(cfg, ["patch_size"], 14)
    patch = patch[0] if isinstance(patch, (list, tuple)) else patch
    merge = _config_value(cfg, ["spatial_merge_size", "merge_kernel_size", "merge_size"], 2)
    merge = merge[0] if isinstance(merge, (list, tuple)) else merge
    frames = _config_value(cfg, ["temporal_patch_size", "patch_temporal"], 1)
    channels = _config_value(cfg, ["in_channels", "num_channels", "in_chans"], 3)
    side = 2 * merge
    n = side * side
    grid = torch.tensor([[1, side, side]])
    layouts = [(n, channels * frames * patch * patch), (n, channels * patch * patch),
               (n, channels, frames, patch, patch), (n, channels, patch, patch),
               (1, channels, side * patch, side * patch)]
    cands = []
    for shape in dict.fromkeys(layouts):
        inputs = {first: torch.randn(*shape, generator=g), grid_key: grid}
        if "merge_sizes" in params:
            inputs["merge_sizes"] = torch.tensor([merge])
        cands.append(inputs)
    # grouped by the merger's window, the grid counted in windows (Inkling)
    cands.append({first: torch.randn(n // merge ** 2, patch * merge, patch * merge, channels, generator=g),
                  grid_key: torch.tensor([[1, side // merge, side // merge]])})
    return cands


def first_tensor(out):
    """The main floating-point output: logits, last hidden state, or the first tensor found."""
    import torch

    if isinstance(out, torch.Tensor):  # (a bare tensor: its .values() is the sparse accessor)
        if out.is_floating_point():
            return out
        raise LookupError("no floating-point tensor in the model output")
    for k in ("logits", "last_hidden_state", "audio_values", "reconstruction"):
        value = getattr(out, k, None) if not isinstance(out, (tuple, list, torch.Tensor)) else None
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value
    values = out.values() if hasattr(out, "values") else out if isinstance(out, (tuple, list)) else [out]
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return v
        if isinstance(v, (tuple, list)) or (hasattr(v, "values") and not isinstance(v, torch.Tensor)):
            try:
                return first_tensor(v)
            except LookupError:
                pass
    raise LookupError("no floating-point tensor in the model output")


def _shapes(value):
    """An input as the record shows it: tensors by their shapes, in their lists and dicts
    (a model's cache of tensors too), other values as they are or by their type's name."""
    import torch

    if torch.is_tensor(value):
        return list(value.shape)
    if isinstance(value, (list, tuple)):
        return [_shapes(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _shapes(v) for k, v in value.items()}
    return value if isinstance(value, (int, float, str, bool, type(None))) else type(value).__name__


LR, WEIGHT_DECAY, EPS = 1e-3, 1e-2, 1e-8  # the AdamW step of the zoos (AdamW's defaults but lr)
# The gradient below which an element's first AdamW step is not pinned by the gradient: see
# check_adamw_update.
GRAD_FLOOR = 1e-5
# Relative tolerance of an update pinned by its gradient: 2 * EPS / GRAD_FLOOR (see
# check_adamw_update: the updates of two gradients of the same sign, both at least GRAD_FLOOR,
# differ by at most EPS / GRAD_FLOOR = 1e-3 of lr; twice that for margin).
STEP_RTOL = 2 * EPS / GRAD_FLOOR


def adamw_step(model) -> list:
    """One AdamW step (lr 1e-3) of the model's parameters; their new values."""
    import torch

    torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, eps=EPS).step()
    return [p.detach().clone() for p in model.parameters()]


def check_adamw_update(name: str, old, new_tpu, new_cpu, grad_tpu, grad_cpu,
                       compiled: bool = False) -> int:
    """Raises AssertionError unless one AdamW step moved a parameter on "tpu" as it moved it on
    the CPU. `old`: its values before the step (equal on both devices); `new_*`: after it;
    `grad_*`: the gradients each step used (None: no gradient, the step must leave it alone).
    `compiled`: the "tpu" backward ran through AOTAutograd, which gives a parameter that the
    outputs depend on but the loss does not (a pooler beside the hidden state compared) a zero
    gradient where eager autograd leaves None (PyTorch's own aot_eager on the CPU does the same):
    its step is then weight decay alone. Returns the number of elements whose update was
    compared with the CPU's.

    The update itself (new - old) is compared, not the new values: an update is ~lr = 1e-3 and
    a step that does nothing would pass a comparison of the values at any tolerance above lr.
    AdamW's first step moves an element by u = -lr * (g / (|g| + eps) + wd * old) (bias
    corrections cancel: m_hat = g, v_hat = g^2). Where both gradients have one sign and both
    are at least GRAD_FLOOR, g / (|g| + eps) is that sign within eps / GRAD_FLOOR = 1e-3,
    whatever the gradients' values: the two updates must agree within STEP_RTOL of the CPU's,
    plus one float32 rounding of each device's new value (an ulp of the parameter each: the
    update is the difference of two float32 values near `old`; with lr = 1e-3 an ulp of a
    parameter of magnitude 1 is 1.2e-4 of the update, and far more of the weight decay's part,
    -1e-5 * old, where the gradient is exactly zero). Where the gradients are smaller, or of
    opposite signs (a true gradient of ~0 whose float32 rounding noise has either sign: within
    the gradient comparison's atol 1e-4), the update's sign is the noise's, and only Adam's
    bound is checked: |u| <= lr * (1 + wd * |old|). A step that does nothing fails wherever
    a gradient is pinned; a parameter without any pinned element counts none."""
    import torch

    dtype = new_tpu.dtype if new_tpu.is_floating_point() else torch.float32
    old, new_tpu, new_cpu = (t.detach().cpu().double() for t in (old, new_tpu, new_cpu))
    u_tpu, u_cpu = new_tpu - old, new_cpu - old
    ulp = torch.finfo(dtype).eps * old.abs()  # (at least an ulp of |old| in its dtype)
    if compiled and grad_cpu is None and grad_tpu is not None and not grad_tpu.detach().cpu().any():
        grad_cpu = torch.zeros_like(grad_tpu, device="cpu")
        new_cpu = (old * (1 - LR * WEIGHT_DECAY)).to(dtype).double()  # weight decay alone
        u_cpu = new_cpu - old
    if grad_cpu is None or grad_tpu is None:
        if grad_cpu is not None or grad_tpu is not None:
            raise AssertionError(f"step of {name}: a gradient on one device only "
                                 f"(tpu {grad_tpu is not None}, cpu {grad_cpu is not None})")
        if not torch.equal(u_tpu, torch.zeros_like(u_tpu)) or not torch.equal(u_cpu, u_tpu):
            raise AssertionError(f"step of {name}: no gradient, yet it moved")
        return 0
    g_tpu, g_cpu = grad_tpu.detach().cpu().double(), grad_cpu.detach().cpu().double()
    pinned = (g_tpu.abs().minimum(g_cpu.abs()) >= GRAD_FLOOR) & (g_tpu.sign() == g_cpu.sign())
    pinned |= (g_tpu == 0) & (g_cpu == 0)  # weight decay alone, the same on both
    allowed = STEP_RTOL * u_cpu.abs() + 2 * ulp
    bad = pinned & ((u_tpu - u_cpu).abs() > allowed)
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(
            f"step of {name}: {int(bad.sum())} of {int(pinned.sum())} updates pinned by their "
            f"gradient differ from the CPU's beyond rtol {STEP_RTOL:g}; first at flat index {i}: "
            f"tpu {u_tpu.flatten()[i].item():.6g}, cpu {u_cpu.flatten()[i].item():.6g} "
            f"(gradients tpu {g_tpu.flatten()[i].item():.3g}, cpu {g_cpu.flatten()[i].item():.3g})")
    bound = LR * (1 + WEIGHT_DECAY * old.abs()) * (1 + STEP_RTOL) + 2 * ulp
    over = ~pinned & (u_tpu.abs() > bound)
    if over.any():
        i = int(over.flatten().nonzero()[0])
        raise AssertionError(f"step of {name}: {int(over.sum())} updates beyond Adam's first-step "
                             f"bound lr * (1 + wd |p|); first at flat index {i}: "
                             f"{u_tpu.flatten()[i].item():.6g}")
    return int(pinned.sum())


def cpu_side_failure(result: dict, stage: str, e: Exception) -> dict:
    """The record of a model the CPU side could not build or run (a harness limitation)."""
    return {**result, "status": "harness", "reason": f"CPU side ({stage}): {type(e).__name__}: {str(e)[:160]}"}


def cpu_reference(model_type: str, causal: bool, harder: bool = False) -> tuple[dict, dict | None]:
    """Build the shrunk model and run every stage on the CPU. Returns (result, reference);
    reference is None when the CPU side could not build or run it (a harness limitation).
    `harder`: shrink the configuration a second time (see shrink)."""
    import copy

    import torch
    import transformers

    result = {"model_type": model_type, "causal_lm": causal}
    stage = "config"
    try:
        cfg = transformers.AutoConfig.for_model(model_type)
        shrink(cfg)
        if harder:
            shrink(cfg, harder=True)
            result["shrink"] = "harder"
        recipe = RECIPES.get(model_type)
        if recipe is not None:
            result["recipe"] = recipe.why
            apply_config(cfg, recipe)
        auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
        build = (getattr(transformers, recipe.model_class)._from_config
                 if recipe is not None and recipe.model_class else auto.from_config)
        stage = "build"
        with torch.device("meta"):
            n = sum(p.numel() for p in build(cfg).parameters())
        result["parameters"] = n
        if n > PARAM_CAP:
            return {**result, "status": "harness", "reason": f"{n} parameters after shrinking"}, None
        torch.manual_seed(0)
        model = build(cfg).eval()
        pristine = copy.deepcopy(model)
        vocab = min(getattr(cfg, "vocab_size", 100) or 100, 100)
        ids = torch.randint(3, vocab, (2, 8))
        stage = "forward"
        candidates = input_candidates(model, cfg, ids)
        if recipe is not None and recipe.inputs is not None:
            g = torch.Generator().manual_seed(0)
            candidates.insert(0, recipe.inputs(model, cfg, ids, lambda *shape: torch.randn(*shape, generator=g)))
        if not candidates:
            return {**result, "status": "harness", "reason": f"main input {model.main_input_name}"}, None
        for i, inputs in enumerate(candidates):
            try:
                torch.manual_seed(0)
                out = first_tensor(model(**inputs))
                break
            except Exception:  # noqa: BLE001 - try the next input shape; the last error is reported
                if i == len(candidates) - 1:
                    raise
        result["inputs"] = {k: _shapes(v) for k, v in inputs.items()}
        torch.manual_seed(1)
        with torch.no_grad():
            again = first_tensor(model(**inputs))
        if not torch.allclose(again, out.detach(), atol=ATOL, rtol=RTOL, equal_nan=True):
            # CPU and device have separate generators (as with CUDA): a forward that draws random
            # numbers cannot give the same result on both.
            return {**result, "status": "harness",
                    "reason": "the forward pass draws random numbers (another seed changes it)"}, None
        stage = "backward"
        out.float().pow(2).mean().backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        generated = None
        if causal:
            stage = "generate"
            try:
                with torch.no_grad():
                    generated = model.generate(ids, max_new_tokens=4, do_sample=False)
            except Exception as e:  # noqa: BLE001 - forward/backward/step are still compared
                result["generate"] = f"skipped, fails on the CPU: {type(e).__name__}: {str(e)[:120]}"
        stage = "optimizer"
        stepped = adamw_step(model)
    except Exception as e:  # noqa: BLE001
        return cpu_side_failure(result, stage, e), None
    return result, {"model": pristine, "inputs": inputs, "out": out.detach(), "grads": grads,
                    "ids": ids, "generated": generated, "stepped": stepped}


def tree_map_only(kind, fn, tree):
    """fn applied to every `kind` leaf of nested lists, tuples and dicts (inputs such as a list
    of conditioning images, one per ControlNet)."""
    from torch.utils._pytree import tree_map_only as _map

    return _map(kind, fn, tree)


def fresh_model(ref: dict):
    """A new copy of the reference's untrained model: ref["make"]() where the model cannot be
    deep-copied (weight-normalized layers hold non-leaf tensors), else a deep copy."""
    import copy

    return ref["make"]() if ref.get("make") else copy.deepcopy(ref["model"])


class IllConditioned(Exception):
    """The CPU's float32 result is itself far from float64: the comparison means nothing."""


def float64_grads(ref: dict) -> dict:
    """Gradients of the same forward and loss on the CPU in float64 (computed once; {} when the
    model does not run in float64)."""
    import torch

    if "float64_grads" not in ref:
        try:
            model = fresh_model(ref).double()
            torch.manual_seed(0)
            inputs = tree_map_only(torch.Tensor, lambda v: v.double() if v.is_floating_point() else v,
                                   ref["inputs"])
            first_tensor(model(**inputs)).pow(2).mean().backward()
            ref["float64_grads"] = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        except Exception:  # noqa: BLE001 - no float64 reference: the plain comparison decides
            ref["float64_grads"] = {}
    return ref["float64_grads"]


def run_on_tpu(ref: dict, mode: str) -> dict:
    """Run the stages of `ref` on "tpu" in eager `mode`, compared with the CPU results. Mode
    "compiled": the forward (with AOTAutograd's backward) and a capturable AdamW step compiled
    with torch.compile(backend="tpu"), in strict eager (generate() runs eagerly)."""
    import torch
    import torchtpu

    compiled = mode == "compiled"
    torchtpu.set_eager_mode("strict" if compiled else mode)
    stage = "forward"
    checked: list[str] = []
    a = None  # the forward's output on "tpu"
    try:
        dev_model = fresh_model(ref).to("tpu")
        torchtpu.metrics.reset()
        if compiled:
            import torch._dynamo

            torch._dynamo.reset()
        forward = torch.compile(dev_model, backend="tpu") if compiled else dev_model
        torch.manual_seed(0)
        a = first_tensor(forward(**tree_map_only(torch.Tensor, lambda v: v.to("tpu"), ref["inputs"])))
        torch.testing.assert_close(a.detach().cpu(), ref["out"], atol=ATOL, rtol=RTOL)
        stage = "backward"
        a.float().pow(2).mean().backward()
        for name, p_tpu in dev_model.named_parameters():
            if name not in ref["grads"]:
                continue
            got, want = p_tpu.grad.cpu(), ref["grads"][name]
            if torch.allclose(got, want, atol=1e-4, rtol=1e-3):
                continue
            # An ill-conditioned gradient (a sum of many large terms that cancel) can differ by
            # more than the tolerance between two float32 summation orders. Then tpu passes if
            # it is as close to a float64 reference as the CPU is (within 2x, plus 1e-6).
            exact = float64_grads(ref).get(name)
            if exact is not None:
                err_tpu = (got.double() - exact).abs().max().item()
                err_cpu = (want.double() - exact).abs().max().item()
                scale = exact.abs().max().item()
                if err_cpu > 0.1 * scale:
                    # the CPU's float32 gradient is no reference: nothing to compare with
                    raise IllConditioned(f"grad of {name}: the CPU's float32 gradient is off by "
                                         f"{err_cpu:.2e} from float64 (largest |grad| {scale:.2e})")
                if err_tpu <= 2 * err_cpu + 1e-6:
                    checked.append(f"{name}: |tpu - f64| {err_tpu:.2e}, |cpu - f64| {err_cpu:.2e}")
                    continue
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3,
                                       msg=lambda m: f"grad of {name}: {m}")
        if ref["generated"] is not None:
            stage = "generate"
            with torch.no_grad():
                g_tpu = dev_model.generate(ref["ids"].to("tpu"), max_new_tokens=4, do_sample=False)
            if not torch.equal(g_tpu.cpu(), ref["generated"]):
                raise AssertionError(f"generated tokens differ: {g_tpu.cpu().tolist()} vs "
                                     f"{ref['generated'].tolist()}")
        stage = "optimizer"
        named = list(dev_model.named_parameters())
        before = [p.detach().cpu() for _, p in named]
        opt = torch.optim.AdamW(dev_model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY, eps=EPS,
                                capturable=compiled)
        (torch.compile(opt.step, backend="tpu") if compiled else opt.step)()
        # The update of every parameter against the CPU's (check_adamw_update: a step that does
        # nothing fails), and at least one element somewhere pinned by its gradient.
        pinned = sum(check_adamw_update(name, old, p_tpu, p_cpu, p_tpu.grad, ref["grads"].get(name),
                                        compiled)
                     for (name, p_tpu), old, p_cpu in zip(named, before, ref["stepped"]))
        if pinned == 0:
            raise AssertionError("optimizer step: no gradient element is large enough to pin its "
                                 "update: the step was not compared")
        torchtpu.sync()
        row = {"status": "pass", "fallbacks": torchtpu.metrics.fallbacks()}
        if checked:
            row["checked_against_float64"] = checked
        if compiled:
            c = torchtpu.metrics.compiled()
            row["compiled"] = {k: c[k] for k in ("dynamo_graphs", "programs", "program_runs",
                                                 "runs_op_by_op", "program_failures")}
            row["compiled"]["graph_breaks"] = sum(c["graph_breaks"].values())
        return row
    except IllConditioned as e:
        return {"status": "harness", "reason": f"ill-conditioned in float32: {e}"}
    except Exception as e:  # noqa: BLE001
        try:
            torchtpu.sync()
        except Exception:  # noqa: BLE001 - a deferred error of the same failure
            pass
        unlike = None
        if compiled and stage in ("forward", "backward"):
            tpu_out = a.detach().cpu() if stage == "forward" and a is not None else None
            cpu_failure = compiled_on_cpu_fails(ref, tpu_out)
            if isinstance(cpu_failure, str):
                return {"status": "harness", "stage": stage,
                        "reason": f"PyTorch's own compile (backend aot_eager) on the CPU does "
                                  f"the same: {cpu_failure}"}
            if cpu_failure is not None:
                # A CPU compile that fails excuses this failure only if it is the same one
                # (test/compare_errors.py: same exception type, same message).
                unlike = same_failure(e, cpu_failure)
                if unlike is None:
                    return {"status": "harness", "stage": stage,
                            "reason": f"PyTorch's own compile (backend aot_eager) on the CPU does "
                                      f"the same: {type(cpu_failure).__name__}: {str(cpu_failure)[:200]}"}
        row = {"status": "backend bug", "stage": stage, "reason": f"{type(e).__name__}: {str(e)[:300]}",
               "fallbacks": torchtpu.metrics.fallbacks()}
        if unlike is not None:
            row["cpu_compile_fails_otherwise"] = unlike
        return row


def compiled_on_cpu_fails(ref: dict, tpu_out=None):
    """How the same forward and backward compiled on the CPU by PyTorch's own backend
    "aot_eager" (Dynamo and AOTAutograd, then eager kernels) fails, or None when it runs: its
    exception (a compiled "tpu" failure that raises the same one is PyTorch's, not torchtpu's:
    run_on_tpu compares them). With `tpu_out` (a compiled "tpu" forward that differs from
    eager): a sentence, when the CPU's compiled forward differs from eager as well and the "tpu"
    one equals it (the model computes another thing when compiled, as transformers' code does
    under torch.compiler.is_compiling())."""
    import torch

    try:
        torch._dynamo.reset()
        model = torch.compile(fresh_model(ref), backend="aot_eager")
        torch.manual_seed(0)
        out = first_tensor(model(**ref["inputs"]))
        cpu_compiled = out.detach()
        out.float().pow(2).mean().backward()
        if tpu_out is not None and not torch.allclose(cpu_compiled, ref["out"], atol=ATOL, rtol=RTOL):
            vs_eager = (cpu_compiled - ref["out"]).abs().max().item()
            vs_tpu = (cpu_compiled - tpu_out).abs().max().item()
            if torch.allclose(tpu_out, cpu_compiled, atol=ATOL, rtol=RTOL):
                return (f"its forward differs from eager on the CPU too (max |diff| {vs_eager:.3g}); "
                        f"the compiled tpu forward equals it (max |diff| {vs_tpu:.3g})")
        return None
    except Exception as e:  # noqa: BLE001
        return e
    finally:
        torch._dynamo.reset()


# Printed by a sweep item's subprocess once its CPU reference is built and run: a timeout or a
# death after it is the "tpu" side's (run_sweep).
CPU_DONE = "# cpu reference done"


def run_one(model_type: str, causal: bool, modes: list[str]):
    """In a subprocess: build one model type, run it on the CPU once, then on "tpu" in each
    eager mode; yields one record per mode as each mode ends (CPU_DONE printed between)."""
    import torchtpu

    torchtpu.set_fallback_mode("silent")
    start = time.perf_counter()
    result, ref = cpu_reference(model_type, causal)
    reason = result.get("reason", "")
    if ref is None and (reason.startswith(("CPU side (config)", "CPU side (build)", "CPU side (forward)"))
                        or reason.endswith("parameters after shrinking")):
        # Shrunk harder, a model the first configuration does not fit or run on the CPU may;
        # models that pass keep the first one. The first failure is reported if both fail.
        again, ref = cpu_reference(model_type, causal, harder=True)
        if ref is not None:
            result = again
    cpu_seconds = round(time.perf_counter() - start, 2)
    if ref is None:
        yield from ({**result, "mode": m} for m in modes)
        return
    print(CPU_DONE, flush=True)
    for m in modes:
        start = time.perf_counter()
        row = {**result, "mode": m, **run_on_tpu(ref, m)}
        # (the CPU reference's time and each mode's: what the sweep's wall time is made of)
        yield {**row, "cpu_seconds": cpu_seconds, "tpu_seconds": round(time.perf_counter() - start, 2)}


def model_types() -> list[tuple[str, bool]]:
    from transformers.models.auto import modeling_auto as m

    causal = sorted(m.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    base = sorted(set(m.MODEL_MAPPING_NAMES) - set(causal))
    return [(t, True) for t in causal] + [(t, False) for t in base]


def sweep(args) -> None:
    types = model_types()[: args.limit] if args.limit else model_types()
    if args.types:
        wanted = set(args.types.split(","))
        types = [t for t in model_types() if t[0] in wanted]
    run_sweep([(t, [sys.executable, __file__, "--one", t] + (["--causal"] if causal else []),
                {"causal_lm": causal}) for t, causal in types], args)


def run_sweep(items: list[tuple[str, list[str], dict]], args) -> None:
    """The items of this shard (args.shard "i/n"), each by its command (`--modes` added) in a
    subprocess with a timeout; one JSON record per mode appended to args.out and one progress
    line per item ("[k/N] name: mode status, ..." as tools/sweep_progress.py reads it). Also the
    diffusers zoo's loop. The subprocess prints each mode's record when that mode ends; a mode
    without a record is classified by item_outcome."""
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("")
    index, count = (int(x) for x in args.shard.split("/"))
    items = items[index::count]
    modes = args.modes.split(",")
    counts: dict[str, int] = {}
    for i, (name, cmd, extra) in enumerate(items):
        start = time.time()

        try:
            proc = subprocess.run(cmd + ["--modes", args.modes], capture_output=True, text=True,
                                  timeout=args.timeout)
            rows = item_outcome(name, extra, modes, proc.stdout, proc.stderr, proc.returncode, None)
        except subprocess.TimeoutExpired as e:
            rows = item_outcome(name, extra, modes, e.stdout, e.stderr, None, args.timeout)
        for row in rows:
            row["seconds"] = round(time.time() - start, 1)
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        with out.open("a") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
        summary = ", ".join(f"{r['mode']} {r['status']}" for r in rows)
        print(f"[{i + 1}/{len(items)}] {name}: {summary} {rows[-1].get('reason', '')[:100]}", flush=True)
    print(counts)


def item_outcome(name: str, extra: dict, modes: list[str], stdout, stderr, returncode,
                 timeout: int | None) -> list[dict]:
    """The records of one sweep item from its subprocess's output: those it printed, and one for
    every mode it did not finish. Before CPU_DONE, the CPU side was still building or running the
    model: a timeout or the memory guard (an input recipe that explodes) is a harness limit, any
    other death a backend bug (torchtpu is imported). After it, every mode left without a record
    failed on "tpu": a timeout there is a backend bug like any other failure."""
    def text(x):
        return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")

    stdout, stderr = text(stdout), text(stderr)
    rows = [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]
    cpu_done = CPU_DONE in stdout.splitlines()
    missing = [m for m in modes if m not in {r.get("mode") for r in rows}]
    if not missing:
        return rows
    guard = next((l[l.index("memory guard:"):] for l in stderr.splitlines() if "memory guard:" in l), None)
    if timeout is not None:
        why = f"timeout after {timeout} s"
    elif guard:
        why = guard
    else:
        why = f"subprocess died ({returncode}): {stderr[-300:]}"
    if not cpu_done and (timeout is not None or guard):
        status, reason = "harness", f"{why} (CPU side)" if timeout is not None else f"{why} (input recipe)"
    elif not cpu_done:
        status, reason = "backend bug", why
    else:
        status, reason = "backend bug", f"{why} on tpu, in mode {missing[0]}"
        if timeout is not None:
            reason += f" (the CPU reference took {rows[0]['cpu_seconds']} s)" if rows and "cpu_seconds" in rows[0] else ""
    return rows + [{"model_type": name, **extra, "mode": m, "status": status, "reason": reason,
                    **({"stage": "timeout"} if timeout is not None and cpu_done else {})} for m in missing]


def report(paths: list[str], target: Path | None = None, note: str | None = None) -> None:
    """Writes the zoo's page (docs/models.md unless `target`) from the records in `paths`; `note`:
    a paragraph after the header (say, that the records are a sample of the types)."""
    rows = [json.loads(l) for path in paths for l in open(path) if l.strip()]
    # a type rerun in a later file replaces its earlier records
    latest = {(r["model_type"], r.get("mode", "strict")): r for r in rows}
    rows = list(latest.values())
    modes = list(dict.fromkeys(r.get("mode", "strict") for r in rows))
    by_mode = {m: [r for r in rows if r.get("mode", "strict") == m] for m in modes}
    first = by_mode[modes[0]]
    harness = [r for r in first if r["status"] == "harness"]
    lines = [
        "# Coverage: the transformers model zoo on \"tpu\"", "",
        "Generated by `python test/models/zoo.py --report ...` from `bash scripts/zoo_sweep.sh` "
        "(every model type of transformers' auto mappings; tiny random configurations built "
        "offline from config classes; forward, backward and an AdamW step compared with the CPU; "
        "generate() for causal LMs; each type in its own subprocess, run on the CPU once and then "
        "on \"tpu\" in each eager mode). Records: " + ", ".join(f"`{Path(x).name}`" for x in paths)
        + " (a type in a later file replaces its earlier records). Do not edit by hand.", ""]
    if note:
        lines += [note, ""]
    if "compiled" in modes:
        lines += [
            "Mode compiled: the model through `torch.compile(model, backend=\"tpu\")` (forward, "
            "AOTAutograd's backward), a capturable AdamW step compiled, generate() eagerly; a "
            "failure that PyTorch's own `aot_eager` backend reproduces on the CPU (the same error: its "
            "type and message, device and backend names aside, test/compare_errors.py; or a compiled "
            "forward that differs from eager as the tpu one does) is a harness limit.", ""]
    lines += [
        "| eager mode | model types tried | built and run | passed | % of built | backend bugs |",
        "|---|---|---|---|---|---|"]
    for m in modes:
        built = [r for r in by_mode[m] if r["status"] != "harness"]
        passed = [r for r in built if r["status"] == "pass"]
        lines.append(f"| {m} | {len(by_mode[m])} | {len(built)} | {len(passed)} | "
                     f"{100.0 * len(passed) / max(len(built), 1):.1f}% | {len(built) - len(passed)} |")
    if len(modes) > 1:
        status = {(r["model_type"], r.get("mode", "strict")): r["status"] for r in rows}
        worse = sorted({t for (t, m), st in status.items() if m != modes[0] and st != "pass"
                        and status.get((t, modes[0])) == "pass"})
        lines += ["", f"Types that pass in {modes[0]} eager but not in another mode: "
                  f"{', '.join(worse) or 'none'}."]
    for m in modes:
        bugs = [r for r in by_mode[m] if r["status"] == "backend bug"]
        lines += ["", f"## Backend bugs in {m} eager", "", "| model type | stage | reason |", "|---|---|---|"]
        for r in bugs:
            lines.append(f"| {r['model_type']} | {r.get('stage', '')} | {cell(r['reason'])} |")
    skipped_generate = [r for r in first if r.get("generate")]
    fallback_models: dict[str, set] = {}
    for r in rows:
        for op in r.get("fallbacks") or {}:
            fallback_models.setdefault(op, set()).add(r["model_type"])
    lines += ["", "## CPU fallbacks hit by models", "",
              "Ops that ran through the CPU fallback, ranked by how many model types hit them.", "",
              "| op | model types |", "|---|---|"]
    for op, types in sorted(fallback_models.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"| {op} | {len(types)} ({', '.join(sorted(types)[:8])}) |")
    if not fallback_models:
        lines.append("| (none) | 0 |")
    checked = [r for r in rows if r.get("checked_against_float64")]
    lines += ["", "## Gradients compared with a float64 reference", "",
              "Where a gradient differs from the CPU's by more than the tolerance, the model runs "
              "again on the CPU in float64: tpu passes if its error is at most twice the CPU's "
              "float32 error (an ill-conditioned sum, not a wrong result).", "",
              "| model type | mode | gradients |", "|---|---|---|"]
    lines += [f"| {r['model_type']} | {r.get('mode', '')} | {cell('; '.join(r['checked_against_float64']))} |"
              for r in checked]
    harder = [r["model_type"] for r in first if r.get("shrink") == "harder" and r["status"] != "harness"]
    lines += ["", "## Passed (" + modes[0] + " eager)", "",
              ", ".join(r["model_type"] for r in first if r["status"] == "pass"), "",
              f"Built by the second, harder shrink (the first configuration was too large or the "
              f"CPU could not build or run it): {', '.join(harder) or 'none'}.", "",
              f"Built with a per-type recipe (test/models/zoo_recipes/: configuration fields and "
              f"inputs as a checkpoint and its processor give them): "
              f"{', '.join(r['model_type'] for r in first if r.get('recipe') and r['status'] != 'harness') or 'none'}.", "",
              "## generate() not compared (it fails on the CPU too)", "",
              "| model type | reason |", "|---|---|"]
    lines += [f"| {r['model_type']} | {cell(r['generate'])} |" for r in skipped_generate]
    reasons: dict[str, int] = {}
    for r in harness:
        key = harness_kind(r["reason"])
        reasons[key] = reasons.get(key, 0) + 1
    lines += ["", f"## Harness limitations ({len(harness)})", "",
              "The CPU side could not build or run the shrunk model; the reason is recorded. By kind: "
              + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])) + ".", "",
              "| model type | reason |", "|---|---|"]
    lines += [f"| {r['model_type']} | {cell(r['reason'])}"
              + (f" — no recipe: {LIMITS[r['model_type']]}" if r["model_type"] in LIMITS else "") + " |"
              for r in harness]
    target = target or ROOT / "docs" / "models.md"
    target.write_text("\n".join(lines) + "\n")
    print(f"wrote {target}:", "; ".join(l for l in lines if l.startswith("| ") and "% |" in l))


def harness_kind(reason: str) -> str:
    if reason.startswith("CPU side"):
        return reason.split(":")[0]
    for prefix, kind in (("main input", "no input recipe for the main input"),
                         ("ill-conditioned", "ill-conditioned in float32"),
                         ("the forward pass draws", "random forward pass"),
                         ("timeout", "timeout"),
                         ("PyTorch's own compile", "PyTorch's own compile (aot_eager) on the CPU does the same")):
        if reason.startswith(prefix):
            return kind
    return "too large after shrinking" if "parameters after shrinking" in reason else reason[:40]


def cell(text: str) -> str:
    return text[:200].replace("|", "/").replace("\n", " ")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--modes", default=os.environ.get("TORCHTPU_EAGER_MODE") or "strict",
                   help="comma-separated eager modes to run on tpu (the CPU reference runs once)")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--shard", default="0/1", help="i/n: every n-th model type starting at i")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--out", default=str(ROOT / "build" / "zoo.jsonl"))
    p.add_argument("--types", help="comma-separated model types (instead of --limit)")
    p.add_argument("--report", nargs="+", help="JSONL files of sweep shards: write docs/models.md")
    p.add_argument("--report-to", help="write the report here instead of docs/models.md")
    p.add_argument("--note", help="a paragraph the report adds after its header")
    a = p.parse_args()
    if a.one:
        for row in run_one(a.one, a.causal, a.modes.split(",")):
            print(json.dumps(row), flush=True)
    elif a.report:
        report(a.report, Path(a.report_to) if a.report_to else None, a.note)
    else:
        sweep(a)
