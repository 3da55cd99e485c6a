"""The diffusers model zoo on "tpu": every model class diffusers registers, tiny and offline.

For each model class diffusers exports (a ModelMixin subclass: UNets, autoencoders, DiT/MMDiT
transformers, ControlNets, adapters, priors ...), in its own subprocess with a timeout:
  1. a tiny configuration from the class's own defaults (`__init__`'s signature), shrunk by the
     rules of `tiny_config` (one layer per stack, two heads, widths of 32, small samples, rotary
     axes rescaled to the new head size), checked against a parameter cap on the meta device;
  2. inputs from the forward's signature by parameter name (`input_recipes`: latents of rank 3, 4
     or 5, timesteps, text embeddings at the width the config names, masks, position ids ...):
     the first set the CPU model accepts is the one compared; classes the generic rules cannot
     build or feed have a recipe (test/models/diffusers_recipes/: configuration fields and
     inputs as a checkpoint and a pipeline would give them);
  3. on the CPU once: forward, backward of the mean square of the output, one AdamW step; then on
     "tpu" in each mode asked for (strict, fused, compiled), the same stages compared with the CPU
     (test/models/zoo_compare.py's run_on_tpu: the same tolerances and float64 rule as the transformers zoo).
Every class is classified per mode: pass, backend bug, or harness limitation (the reason recorded).

    python test/models/diffusers_zoo.py --modes strict,fused,compiled [--shard i/n] [--out F.jsonl]
    python test/models/diffusers_zoo.py --probe [--classes A,B]   (the CPU side only, in-process)
    python test/models/diffusers_zoo.py --report F1.jsonl ...     (writes docs/diffusers.md)
    bash scripts/diffusers_sweep.sh                                (both, sharded over the cores)
"""
from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")
# ("highest" as the CPU's float32 GEMM, not the chip's six passes: model coverage; deep models
# carry a last-bit difference into the checks)
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo_report  # noqa: E402  the transformers zoo's page, rewritten for diffusers.md
from zoo_compare import (adamw_step, cpu_side_failure, first_tensor, random_forward,  # noqa: E402
                         run_on_tpu, tree_map_only)  # the run on tpu against the CPU
from zoo_sweep import CPU_DONE, run_sweep  # noqa: E402  the sweep's loop
from diffusers_recipes import recipes as _recipes  # noqa: E402  per-class recipes

RECIPES = _recipes()

ROOT = zoo_report.ROOT
PARAM_CAP = 20_000_000
BATCH, TEXT_LEN = 2, 8

# Keys whose integer value counts layers or blocks of a stack: one of each.
LAYER_KEYS = ("num_layers", "layers_per_block", "num_blocks", "depth", "n_layers", "num_hidden_layers",
              "transformer_layers_per_block", "num_res_blocks", "layers")
# Width keys (the value is a feature size): 32 when above 32, 64 for feed-forward sizes.
# Words of a key (split at "_") that say the integer is not a feature width.
NOT_A_WIDTH = {"patch", "sample", "kernel", "vocab", "codebook", "num", "max", "length", "len", "frames",
               "latent", "conditioning", "image", "resolution", "stride", "scale", "factor", "index", "id",
               "ids", "steps", "bins", "sampling", "rate", "groups", "compression", "period", "seq",
               "position", "positions", "lens", "tokens", "multiple", "window"}
# Channels of the data itself (latents, pixels): kept unless far wider than latents ever are.
DATA_CHANNELS = {"in_channels", "out_channels", "latent_channels", "conditioning_channels"}
WIDTH_SUFFIXES = ("_dim", "_size", "_channels", "_width", "hidden_size", "inner_dim", "d_model", "channels",
                  "_features")
FEED_FORWARD = ("ffn", "mlp", "intermediate", "ff_", "feed_forward")
ROPE_AXES = ("axes_dims_rope", "axes_dim", "rope_axes_dim", "axes_dims", "rope_dim_list")
WIDTH_LISTS = ("block_out_channels", "channels", "hidden_sizes", "decoder_block_out_channels",
               "encoder_block_out_channels", "conditioning_embedding_out_channels", "channel_mult",
               "block_channels", "down_block_out_channels", "up_block_out_channels")


# Wrappers that run several models of one class side by side: built from two tiny models of that
# class; their conditioning inputs and scales are lists, one entry per model.
WRAPPED = {"MultiControlNetModel": "ControlNetModel", "SD3MultiControlNetModel": "SD3ControlNetModel",
           "FluxMultiControlNetModel": "FluxControlNetModel",
           "QwenImageMultiControlNetModel": "QwenImageControlNetModel",
           "HunyuanDiT2DMultiControlNetModel": "HunyuanDiT2DControlNetModel"}
LISTED = ("controlnet_cond", "conditioning_scale", "controlnet_mode")


def tiny_config(cls) -> dict:
    """The class's default configuration, shrunk."""
    params = inspect.signature(cls.__init__).parameters
    cfg = {k: p.default for k, p in params.items()
           if k != "self" and p.default is not inspect.Parameter.empty
           and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    transformer_like = "patch_size" in cfg or "Transformer" in cls.__name__ or "DiT" in cls.__name__
    head_dim = 32 if any(isinstance(cfg.get(k), (list, tuple)) for k in ROPE_AXES) else 16
    for key, value in list(cfg.items()):
        name = key.lower()
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            if name in LAYER_KEYS or name.endswith("_layers") or name.endswith("_blocks") and "num" in name:
                cfg[key] = min(value, 1) if value > 0 else value
            elif name.endswith("heads") and "dim" not in name:
                cfg[key] = min(value, 2)
            elif name in ("attention_head_dim", "head_dim", "dim_head", "attention_head_dims"):
                # in UNets, attention_head_dim counts heads (diffusers' legacy naming)
                cfg[key] = head_dim if transformer_like else min(value, 8)
            elif name in DATA_CHANNELS:
                if value > 64:
                    cfg[key] = 32
            elif name == "groups" and value > 8:  # group norms' groups (Kandinsky 3)
                cfg[key] = 8
            elif value > 32 and (re.sub(r"_(t5|\d+)$", "", name).endswith(WIDTH_SUFFIXES)
                                 or name in ("dim", "width", "hidden_dim", "block_out_channels")) \
                    and not set(name.split("_")) & NOT_A_WIDTH:
                cfg[key] = 64 if any(w in name for w in FEED_FORWARD) else 32
            elif name in ("sample_size", "sample_height", "sample_width") and value > 32:
                cfg[key] = 16 if name != "sample_size" else 32
            elif name == "num_frames" and value > 4:
                cfg[key] = 4
            elif name == "sample_frames" and value > 9:
                cfg[key] = 9  # causal video latents: 1 + 4k frames
        elif isinstance(value, (list, tuple)) and value and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            if (name in WIDTH_LISTS or name.endswith("_channels")) and max(value) > 32 and name != "channel_mult":
                cfg[key] = type(value)([32] * len(value))
            elif name in ("attention_head_dim", "num_attention_heads", "head_dim"):
                cfg[key] = type(value)([head_dim if transformer_like and "dim" in name else 2] * len(value))
            elif name in LAYER_KEYS or name.endswith("_layers") or "layers_per" in name:
                cfg[key] = type(value)([min(v, 1) if v > 0 else v for v in value])
            elif name in ROPE_AXES:
                total = head_dim
                scaled = [max(2, round(v * total / sum(value) / 2) * 2) for v in value]
                scaled[-1] = total - sum(scaled[:-1])
                if scaled[-1] >= 2:
                    cfg[key] = type(value)(scaled)
            elif name == "sample_size" and max(value) > 32:
                cfg[key] = type(value)([32] * len(value))
    # fields a checkpoint sets that the class leaves None
    if "in_channels" in cfg and cfg["in_channels"] is None:
        cfg["in_channels"] = 4
    if transformer_like:
        for key, value in (("patch_size", 2), ("sample_size", 16), ("num_attention_heads", 2),
                           ("attention_head_dim", head_dim)):
            if key in cfg and cfg[key] is None:
                cfg[key] = value
    if isinstance(cfg.get("norm_num_groups"), int):
        widths = [v for k in WIDTH_LISTS for v in (cfg.get(k) or []) if isinstance(v, int)]
        if widths and any(w % cfg["norm_num_groups"] for w in widths):
            cfg["norm_num_groups"] = 8
        if isinstance(cfg.get("in_channels"), int) and cfg["in_channels"] % cfg["norm_num_groups"]:
            # models that normalize their input itself (temporal transformers)
            cfg["norm_num_groups"] = math.gcd(cfg["in_channels"], cfg["norm_num_groups"])
    return cfg


def _int(cfg: dict, *names, default=None):
    for n in names:
        v = cfg.get(n)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return default


def text_widths(cfg: dict) -> list[int]:
    """Widths a text embedding may need: the config's cross-attention / joint / caption widths."""
    keys = ("cross_attention_dim", "joint_attention_dim", "caption_channels", "text_embed_dim", "text_dim",
            "encoder_hid_dim", "context_dim", "text_hidden_dim", "caption_dim", "cap_feat_dim",
            "text_states_dim", "encoder_hidden_dim", "context_in_dim", "text_in_dim", "txt_in_dim")
    found = [cfg[k] for k in keys if isinstance(cfg.get(k), int) and not isinstance(cfg.get(k), bool)]
    for k in keys:  # per-block widths (UNets): the first
        if isinstance(cfg.get(k), (list, tuple)) and cfg[k]:
            found.append(cfg[k][0])
    return list(dict.fromkeys(found + [32]))


class _RecipeInputs:
    """What the recipes of one model are made from: its forward's parameters, the sizes its
    config names, and one generator (seed 0) every random input draws from, in order."""

    def __init__(self, model, cfg: dict):
        import torch

        self.cfg = cfg
        self.g = torch.Generator().manual_seed(0)
        self.params = inspect.signature(model.forward).parameters
        self.names = [k for k in self.params if k != "self"]
        self.required = [k for k, p in self.params.items()
                         if k != "self" and p.default is inspect.Parameter.empty
                         and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        self.main = self.names[0]
        self.c_in = _int(cfg, "in_channels", "latent_channels", "in_dim", "num_channels",
                         "input_channels", "audio_channels", default=4)
        size = min(_int(cfg, "sample_height", "sample_size", default=16), 32)
        self.patch = _int(cfg, "patch_size", default=1)
        blocks = cfg.get("block_out_channels") or cfg.get("down_block_types")
        levels = len(blocks) if isinstance(blocks, (list, tuple)) else 1
        step = max(self.patch, 2 ** max(levels - 1, 0))
        self.size = max(step, size // step * step)
        self.frames = _int(cfg, "num_frames", default=2)
        self.b = BATCH
        self.pooled = _int(cfg, "pooled_projection_dim", "text_embed_dim", "pooled_dim",
                           "projection_class_embeddings_input_dim", default=32)
        axes = next((cfg[k] for k in ROPE_AXES if isinstance(cfg.get(k), (list, tuple))), (0, 0, 0))
        self.id_axes = len(axes)
        # text lengths the model's learned positions are made for (or any length: TEXT_LEN)
        self.text_len = min(_int(cfg, "max_text_seq_length", "text_len", "max_text_len",
                                 "num_embeddings", default=TEXT_LEN), 256)
        self.text_len_t5 = min(_int(cfg, "text_len_t5", default=self.text_len), 256)
        self.embedding_channels = next(
            (v for k, v in cfg.items() if k.endswith("conditioning_embedding_out_channels")
             and isinstance(v, (list, tuple))), None)

    def randn(self, *shape):
        import torch

        return torch.randn(*shape, generator=self.g)


def _main_inputs(r: _RecipeInputs) -> list:
    """Candidates for the forward's first input, in order."""
    import torch

    b, c_in, size, randn = r.b, r.c_in, r.size, r.randn
    mains = [randn(b, c_in, size, size)]
    for f in dict.fromkeys([r.frames, 2, 3, 5, 1]):  # video latents: (b, c, f, h, w) or (b, f, c, h, w)
        mains += [randn(b, c_in, f, size, size), randn(b, f, c_in, size, size)]
    mains += [randn(b, (size // r.patch) ** 2, c_in), randn(b, c_in, 64), randn(b, c_in, 1024),
              randn(b, c_in, 8, 8), randn(b, 64, c_in), randn(b, c_in), randn(b, c_in, 64, 64),
              randn(b, c_in, 8192)]
    if c_in != 3:  # an image (pixel-space models, encoders of 3 channels)
        mains.insert(1, randn(b, 3, size, size))
    # vectors and sequences of a width the config names (projections, image encoders, priors)
    for key in ("embedding_dim", "hidden_size", "in_features", "redux_dim", "input_dim"):
        w = _int(r.cfg, key)
        if w and w <= 64:
            mains += [randn(b, w), randn(b, TEXT_LEN, w)]
    if r.main.endswith("ids"):  # token ids (masked image models): a grid of ids, then a sequence
        vocab = min(_int(r.cfg, "codebook_size", "vocab_size", default=100), 100)
        mains = [torch.randint(0, vocab, (b, size, size), generator=r.g),
                 torch.randint(0, vocab, (b, TEXT_LEN), generator=r.g)]
    return mains


_NO_INPUT = object()  # (None is an input: controlnet_mode)


def _text_and_conditioning_input(r: _RecipeInputs, k: str, n: str, width, tokens):
    """The input named k (n: lowered) for timesteps, text, masks and the conditioning vectors;
    _NO_INPUT for another name (then _grid_and_image_input decides)."""
    import torch

    b, size, randn = r.b, r.size, r.randn
    if n in ("timestep", "timesteps", "t", "r_timestep", "timestep_r", "sigma"):
        return torch.tensor([10.0, 500.0][:b])
    if n == "guidance" and (r.cfg.get("guidance_embeds") or k in r.required):
        return torch.tensor([3.5] * b)
    if n in ("encoder_hidden_states", "text_hidden_states", "context", "encoder_hidden_states_t5",
             "text_embeds", "prompt_embeds", "caption", "cap_feats", "y"):
        return randn(b, r.text_len_t5 if n.endswith("t5") else r.text_len, width)
    if n in ("encoder_attention_mask", "text_attention_mask", "encoder_mask", "cap_mask",
             "attention_mask_t5", "text_embedding_mask", "text_embedding_mask_t5",
             "encoder_hidden_states_mask"):
        # (optional ones too: some models read them unconditionally; the required-only
        # recipes leave them out)
        return torch.ones(b, r.text_len_t5 if n.endswith("t5") else r.text_len, dtype=torch.long)
    if n == "img_mask":
        return torch.ones(b, tokens, dtype=torch.bool)
    if n == "image_meta_size":  # (original size, target size, crop top-left)
        return torch.tensor([[size * 8, size * 8, size * 8, size * 8, 0, 0]] * b, dtype=torch.float32)
    if n == "style":
        return torch.zeros(b, dtype=torch.long)
    if n == "added_time_ids":  # (fps, motion bucket, noise augmentation) as many as fit
        per = _int(r.cfg, "addition_time_embed_dim", default=32)
        return torch.tensor([[6.0, 127.0, 0.02][: max(1, r.pooled // per)]] * b)
    if n == "timestep_ratio":
        return torch.tensor([0.3, 0.7][:b])
    if n == "clip_text_pooled":
        return randn(b, 1, _int(r.cfg, "clip_text_pooled_in_channels", default=32))
    if n == "pooled_text_emb":
        return randn(b, _int(r.cfg, "cond_embed_dim", default=r.pooled))
    if n == "micro_conds":
        return torch.tensor([[size * 8, size * 8, 0, 0, 6.0]] * b)
    return _NO_INPUT


def _grid_and_image_input(r: _RecipeInputs, k: str, n: str, x, tokens):
    """The input named k (n: lowered) for latent grids, positions, images and labels; _NO_INPUT
    for a name no recipe knows (the forward's default is used)."""
    import torch

    b, size, randn = r.b, r.size, r.randn
    if n in ("num_frames", "height", "width") and x.dim() == 3:
        # sequence models given their latent grid (one frame of side x side patches)
        side = int(tokens ** 0.5)
        return 1 if n == "num_frames" else side
    if n in ("pooled_projections", "pooled_prompt_embeds", "text_embeds_pooled"):
        return randn(b, r.pooled)
    if n == "img_ids":  # (row, column) positions in the last two of the rotary axes
        side = int(tokens ** 0.5)
        ids = torch.zeros(side, side, r.id_axes)
        ids[..., -2] = torch.arange(side)[:, None]
        ids[..., -1] = torch.arange(side)[None, :]
        return ids.reshape(-1, r.id_axes)
    if n == "txt_ids":
        return torch.zeros(r.text_len, r.id_axes)
    if n == "controlnet_cond" and x.dim() == 4 and r.embedding_channels:
        # an image at the pixel resolution the conditioning embedding brings down to x's
        up = 2 ** (len(r.embedding_channels) - 1)
        chans = _int(r.cfg, "conditioning_channels", default=3)
        return randn(b, chans, x.shape[-2] * up, x.shape[-1] * up)
    if n in ("controlnet_cond", "image_latents", "condition_latents", "cond"):
        return randn(*x.shape)
    if n in ("class_labels", "labels") and (k in r.required or _int(
            r.cfg, "num_embeds_ada_norm", "num_class_embeds", "num_classes") is not None):
        return torch.tensor([1, 3][:b])
    if n in ("original_size", "target_size"):
        return torch.tensor([[size * 8, size * 8]] * b, dtype=torch.float32)
    if n == "crop_coords":
        return torch.zeros(b, 2)
    if n in ("fps",):
        return torch.tensor([8] * b)
    if n == "proj_embedding":
        return randn(b, _int(r.cfg, "embedding_dim", default=32))
    if n == "controlnet_mode":
        return None
    if n == "conditioning_scale":
        return 1.0
    if n == "img_shapes":  # per sample: the (frames, rows, columns) of its latent patches
        side = int(tokens ** 0.5)
        return [[(1, side, side)]] * b
    if n == "return_dict":
        return False
    return _NO_INPUT


def _other_inputs(r: _RecipeInputs, x, width) -> dict:
    """The other inputs, by name, for the main input x and text width `width`."""
    out = {}
    tokens = x.shape[1] if x.dim() == 3 else (x.shape[-1] // r.patch) * (x.shape[-2] // r.patch)
    for k in r.names[1:]:
        p = r.params[k]
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        n = k.lower()
        value = _text_and_conditioning_input(r, k, n, width, tokens)
        if value is _NO_INPUT:
            value = _grid_and_image_input(r, k, n, x, tokens)
        if value is not _NO_INPUT:
            out[k] = value
    return out


def input_recipes(model, cfg: dict) -> list[dict]:
    """Keyword inputs to try, in order (the CPU decides which one the model accepts)."""
    r = _RecipeInputs(model, cfg)
    mains = _main_inputs(r)
    widths = text_widths(cfg)
    cands = []
    for x in mains:
        for width in widths:
            cands.append({r.main: x, **_other_inputs(r, x, width)})
    # also with the required arguments only (optional ones filled by name can be the trouble)
    for x in mains:
        filled = _other_inputs(r, x, widths[0])
        cands.append({r.main: x, **{k: v for k, v in filled.items()
                                    if k in r.required or k == "return_dict"}})
    return cands


def model_classes() -> list[str]:
    import diffusers
    from diffusers import ModelMixin

    found = []
    for name in dir(diffusers):
        try:
            obj = getattr(diffusers, name)
        except Exception:  # noqa: BLE001 - an optional backend missing: not a class we can test
            continue
        if inspect.isclass(obj) and issubclass(obj, ModelMixin) and obj is not ModelMixin:
            found.append(name)
    return sorted(found)


def cpu_reference(class_name: str) -> tuple[dict, dict | None]:
    """Build the tiny model and run every stage on the CPU: (result, reference); reference None
    when the CPU side could not build or run it (a harness limitation, the reason recorded)."""
    import diffusers
    import torch

    result = {"model_type": class_name}
    stage = "config"
    try:
        cls = getattr(diffusers, class_name)
        inner = getattr(diffusers, WRAPPED[class_name]) if class_name in WRAPPED else None
        recipe = RECIPES.get(class_name)
        cfg = tiny_config(inner or cls)
        if recipe is not None:
            result["recipe"] = recipe.why
            cfg.update(recipe.config)
        stage = "build"

        def make():
            torch.manual_seed(0)
            if inner is not None:
                return cls([inner(**cfg), inner(**cfg)]).eval()
            return cls(**cfg).eval()

        with torch.device("meta"):
            n = sum(p.numel() for p in make().parameters())
        result["parameters"] = n
        if n > PARAM_CAP:
            return {**result, "status": "harness", "reason": f"{n} parameters after shrinking"}, None
        if n == 0:
            return {**result, "status": "harness", "reason": "no parameters (nothing to train)"}, None
        model = make()
        # The tpu side builds the model again: a class that leaves a parameter uninitialized
        # (torch.empty, never written) gives another model each time.
        again = make().state_dict()
        if any(not torch.equal(v, again[k]) and not (v.is_floating_point() and
                                                     torch.allclose(v, again[k], equal_nan=True))
               for k, v in model.state_dict().items()):
            return {**result, "status": "harness",
                    "reason": "two builds differ: the class leaves a parameter uninitialized"}, None
        stage = "forward"
        errors = []
        recipes = input_recipes(model.nets[0] if inner is not None else model, cfg)
        if recipe is not None and recipe.inputs is not None:
            g = torch.Generator().manual_seed(0)
            recipes.insert(0, recipe.inputs(model, cfg,
                                            lambda *shape: torch.randn(*shape, generator=g)))
        if inner is not None:  # one conditioning input and scale per wrapped model
            recipes = [{k: [v, v] if k in LISTED else v for k, v in r.items()} for r in recipes]
            recipes = [{**r, "conditioning_scale": [1.0, 0.5]} for r in recipes]
        for inputs in recipes:
            try:
                torch.manual_seed(0)
                out = first_tensor(model(**inputs))
                break
            except Exception as e:  # noqa: BLE001 - try the next recipe
                errors.append(e)
        else:
            raise telling_error(errors)
        result["inputs"] = tree_map_only(torch.Tensor, lambda v: list(v.shape), inputs)
        if (failure := random_forward(result, model, inputs, out)) is not None:
            return failure, None
        if not torch.isfinite(out).all():
            return {**result, "status": "harness", "reason": "the CPU's forward gives NaN or Inf"}, None
        stage = "backward"
        out.float().pow(2).mean().backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        stage = "optimizer"
        stepped = adamw_step(model)
    except Exception as e:  # noqa: BLE001
        return cpu_side_failure(result, stage, e), None
    return result, {"model": None, "make": make, "inputs": inputs, "out": out.detach(), "grads": grads,
                    "ids": None, "generated": None, "stepped": stepped}


SHAPE_MISMATCH = ("unpack", "same number of dimensions", "to have", "must match the size", "shapes cannot be",
                  "number of dimensions", "invalid for input of size", "but got", "out of range", "expected")


def telling_error(errors: list[Exception]) -> Exception:
    """Of the errors of every input recipe, the one that says most: the first that is not a
    mismatch of the main input's shape (the recipe was wrong, not the model), else the first."""
    for e in errors:
        if not any(m in str(e) for m in SHAPE_MISMATCH):
            return e
    return errors[0]


def memory_guard(limit_gib: float = 6.0) -> None:
    """Ends this process with a message when its resident memory passes `limit_gib` (a model
    whose input recipe explodes, such as a vocoder upsampling a long input, would otherwise take
    the machine's memory and be killed by the kernel with the sweep's other shard)."""
    import threading

    page = os.sysconf("SC_PAGE_SIZE")

    def watch():
        while True:
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * page
            if rss > limit_gib * 2**30:
                print(f"memory guard: {rss / 2**30:.1f} GiB resident, above {limit_gib} GiB", file=sys.stderr,
                      flush=True)
                os._exit(3)
            time.sleep(0.1)

    threading.Thread(target=watch, daemon=True).start()


def run_one(class_name: str, modes: list[str]):
    """Yields one record per mode as each mode ends (CPU_DONE printed once the CPU side has
    run: a timeout after it is a failure on "tpu", zoo_sweep.item_outcome)."""
    import torchtpu

    torchtpu.set_fallback_mode("silent")
    result, ref = cpu_reference(class_name)
    if ref is None:
        yield from ({**result, "mode": m} for m in modes)
        return
    print(CPU_DONE, flush=True)
    for m in modes:
        yield {**result, "mode": m, **run_on_tpu(ref, m)}


def probe(classes: list[str]) -> None:
    counts = {}
    for i, c in enumerate(classes):
        start = time.time()
        result, ref = cpu_reference(c)
        status = "built" if ref is not None else "harness"
        counts[status] = counts.get(status, 0) + 1
        print(f"[{i + 1}/{len(classes)}] {c}: {status} {result.get('parameters', '')} "
              f"{result.get('reason', result.get('inputs', ''))!s:.200} ({time.time() - start:.1f} s)", flush=True)
    print(counts)


def sweep(args) -> None:
    classes = args.classes.split(",") if args.classes else model_classes()
    run_sweep([(c, [sys.executable, __file__, "--one", c], {}) for c in classes], args)


def report(paths: list[str], target: Path | None = None, note: str | None = None) -> None:
    """docs/diffusers.md (or `target`) in the style of docs/models.md (the same generator, another
    title); `note`: a paragraph after the header."""
    target = target or ROOT / "docs" / "diffusers.md"
    zoo_report.report(paths, target, note)
    text = target.read_text()
    text = text.replace("# Coverage: the transformers model zoo on \"tpu\"",
                        "# Coverage: the diffusers model zoo on \"tpu\"")
    text = text.replace("`python test/models/zoo.py --report ...` from `bash scripts/zoo_sweep.sh` "
                        "(every model type of transformers' auto mappings; tiny random configurations built "
                        "offline from config classes; forward, backward and an AdamW step compared with the CPU; "
                        "generate() for causal LMs;",
                        "`python test/models/diffusers_zoo.py --report ...` from `bash scripts/diffusers_sweep.sh` "
                        "(every model class diffusers exports; tiny configurations from each class's defaults, "
                        "shrunk; inputs from the forward's signature, or a per-class recipe where those rules "
                        "fall short (test/models/diffusers_recipes/: configuration fields a checkpoint sets, "
                        "inputs a pipeline passes); forward, backward and an AdamW step compared with the CPU;")
    text = text.replace("| eager mode | model types tried |", "| mode | model classes tried |")
    text = text.replace("| model type |", "| model class |")
    target.write_text(text)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one")
    p.add_argument("--probe", action="store_true", help="the CPU side only, every class in this process")
    p.add_argument("--modes", default=os.environ.get("TORCHTPU_EAGER_MODE") or "strict")
    p.add_argument("--classes", help="comma-separated class names (default: every class)")
    p.add_argument("--shard", default="0/1")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--out", default=str(ROOT / "build" / "diffusers.jsonl"))
    p.add_argument("--report", nargs="+")
    p.add_argument("--report-to", help="write the report here instead of docs/diffusers.md")
    p.add_argument("--note", help="a paragraph the report adds after its header")
    a = p.parse_args()
    if a.one or a.probe:
        memory_guard()
    if a.one:
        for row in run_one(a.one, a.modes.split(",")):
            print(json.dumps(row, default=str), flush=True)  # (an input may be a model's own cache object)
    elif a.probe:
        probe(a.classes.split(",") if a.classes else model_classes())
    elif a.report:
        report(a.report, Path(a.report_to) if a.report_to else None, a.note)
    else:
        sweep(a)
