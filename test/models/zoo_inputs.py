"""The inputs the transformers zoo tries a model with (test/models/zoo.py), in order, for its main
input (token ids, images, videos, audio waveforms or features, time series, the patches and grid
of a Qwen-VL style vision tower): the first candidate the CPU model accepts is the one compared.
Also how a record shows an input (`shapes`)."""
from __future__ import annotations

from zoo_config import config_value


def input_candidates(model, cfg, ids):
    """Inputs to try, in order, for the model's main input (the CPU decides which one fits)."""
    import inspect

    import torch

    name = model.main_input_name
    g = torch.Generator().manual_seed(0)
    params = inspect.signature(model.forward).parameters

    def images():
        size = config_value(cfg, ["image_size", "img_size", "input_size"], 224)
        sizes = [tuple(size[-2:]) if isinstance(size, (list, tuple)) else (size, size), (224, 224), (64, 64)]
        channels = config_value(cfg, ["num_channels", "in_channels", "in_chans"], 3)
        return [torch.randn(2, c, *hw, generator=g) for hw in dict.fromkeys(sizes)
                for c in dict.fromkeys([channels if isinstance(channels, int) else 3, 3])]

    cands = []
    grid_key = next((k for k in ("grid_thw", "image_grid_thw")
                     if k in params and params[k].default is inspect.Parameter.empty), None)
    if grid_key is not None:
        return _patch_grid_candidates(cfg, params, grid_key, g)
    if name == "input_ids":
        cands = [{"input_ids": ids}]
        if "pixel_values" in params and config_value(cfg, ["image_size"]) is not None:
            # text and image towers (CLIP-like): both inputs, when the text alone is refused
            cands += [{"input_ids": ids, "pixel_values": x} for x in images()]
    elif name == "pixel_values":
        cands = [{name: x} for x in images()]
        frames = config_value(cfg, ["num_frames"])
        if isinstance(frames, int):  # video models take (batch, frames, channels, height, width)
            cands += [{name: x.unsqueeze(1).expand(-1, frames, -1, -1, -1).contiguous()} for x in images()]
    elif name == "pixel_values_videos":
        size = config_value(cfg, ["image_size", "crop_size"], 224)
        hw = tuple(size[-2:]) if isinstance(size, (list, tuple)) else (size, size)
        frames = config_value(cfg, ["num_frames", "frames_per_clip"], 4)
        for t in dict.fromkeys([frames if isinstance(frames, int) else 4, 2, 4, 8, 16]):
            cands.append({name: torch.randn(2, t, 3, *hw, generator=g)})
    elif name == "input_values":
        channels = config_value(cfg, ["audio_channels", "channels", "num_channels"], 1)
        shapes = [(2, 8000), (2, 1, 8000), (2, 16000), (2, 1, 16000)]
        if isinstance(channels, int) and channels > 1:
            shapes.insert(1, (2, channels, 8000))
        cands = [{name: torch.randn(*s, generator=g)} for s in shapes]
    elif name in ("input_features", "audio_mel"):
        mel = config_value(cfg, ["num_mel_bins", "feature_size", "n_mels", "num_mels"], 80)
        positions = config_value(cfg, ["max_source_positions"], None)
        shapes = []
        if isinstance(mel, int) and isinstance(positions, int):
            shapes.append((2, mel, 2 * positions))
        feats = [config_value(cfg, [k]) for k in ("input_feat_per_channel", "feature_projection_input_dim",
                                                    "num_mel_bins", "feature_size", "n_mels", "hidden_size")]
        if isinstance(feats[0], int):
            feats[0] *= config_value(cfg, ["input_channels"], 1)
        for f in dict.fromkeys([f for f in feats if isinstance(f, int)] + [80, 128, 160]):
            shapes += [(2, 64, f), (2, f, 64)]
        cands = [{name: torch.randn(*s, generator=g)} for s in dict.fromkeys(shapes)]
    elif name == "past_values":  # time series: (batch, context, channels) or (batch, context)
        context = config_value(cfg, ["context_length"], 32)
        context = context if isinstance(context, int) else 32
        channels = config_value(cfg, ["num_input_channels"], 1)
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
    patch = config_value(cfg, ["patch_size"], 14)
    patch = patch[0] if isinstance(patch, (list, tuple)) else patch
    merge = config_value(cfg, ["spatial_merge_size", "merge_kernel_size", "merge_size"], 2)
    merge = merge[0] if isinstance(merge, (list, tuple)) else merge
    frames = config_value(cfg, ["temporal_patch_size", "patch_temporal"], 1)
    channels = config_value(cfg, ["in_channels", "num_channels", "in_chans"], 3)
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


def shapes(value):
    """An input as the record shows it: tensors by their shapes, in their lists and dicts
    (a model's cache of tensors too), other values as they are or by their type's name."""
    import torch

    if torch.is_tensor(value):
        return list(value.shape)
    if isinstance(value, (list, tuple)):
        return [shapes(v) for v in value]
    if isinstance(value, dict):
        return {str(k): shapes(v) for k, v in value.items()}
    return value if isinstance(value, (int, float, str, bool, type(None))) else type(value).__name__
