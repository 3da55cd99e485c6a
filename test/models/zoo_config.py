"""The transformers zoo's shrink of a model's default configuration (test/models/zoo.py): small
hidden sizes, two layers, a small vocabulary, nested text/vision/audio and per-layer configs
shrunk too; a second, harder pass for models the first leaves too large or the CPU cannot build
or run (vocabularies, stage widths, scaling coefficients). Also how the zoo reads a size from a
configuration or its vision/audio parts (`config_value`)."""
from __future__ import annotations

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


def _set(cfg, key, value) -> None:
    try:
        setattr(cfg, key, value)
    except (AttributeError, TypeError, ValueError, NotImplementedError):
        pass  # a read-only property, derived from other fields (or one the class refuses)


def _get(cfg, key):
    try:
        return getattr(cfg, key, None)
    except Exception:  # noqa: BLE001 - some configs raise for per-layer attributes
        return None


def _shrink_named_sizes(cfg) -> None:
    """The sizes SMALL names, fields a checkpoint would set, sampling noise, hybrid layers."""
    for key, value in SMALL.items():
        current = _get(cfg, key)
        if isinstance(current, int) and not isinstance(current, bool):
            _set(cfg, key, value)
    # Fields a checkpoint sets but the config class leaves None (the model cannot be built).
    for key, value in FILL_IF_NONE.items():
        if key in vars(cfg) and _get(cfg, key) is None:
            _set(cfg, key, value)
    for key in ("noise_scale", "noise_scale_duration"):  # sampling noise in the forward (VITS)
        if isinstance(_get(cfg, key), float):
            _set(cfg, key, 0.0)
    for key, value in HYBRID.items():
        if isinstance(_get(cfg, key), int):
            _set(cfg, key, value)


def _shrink_rope_sections(cfg, head_dim) -> None:
    rope = _get(cfg, "rope_parameters")
    if (isinstance(rope, dict) and "mrope_section" not in rope and isinstance(head_dim, int)
            and "mrope_section" in getattr(type(cfg), "ignore_keys_at_rope_validation", ())):
        # the model's default sections are for its full head_dim: three for the shrunk one
        factor = rope.get("partial_rotary_factor") or _get(cfg, "partial_rotary_factor") or 1.0
        half = int(head_dim * factor) // 2
        rope["mrope_section"] = [half - 2 * (half // 3), half // 3, half // 3]
    if isinstance(rope, dict) and isinstance(rope.get("mrope_section"), list) and isinstance(head_dim, int):
        # multimodal rotary sections cover head_dim / 2 frequencies: keep their proportions
        sections, half = rope["mrope_section"], head_dim // 2
        scaled = [max(1, v * half // sum(sections)) for v in sections]
        scaled[-1] += half - sum(scaled)
        if scaled[-1] >= 1:
            rope["mrope_section"] = scaled


def _shrink_heads(cfg, old_heads, old_kv) -> None:
    """Key/value heads grouped as before, the head width, rotary sections, state-space heads."""
    heads = _get(cfg, "num_attention_heads")
    if "num_key_value_heads" in vars(cfg) and _get(cfg, "num_key_value_heads") is None and heads:
        _set(cfg, "num_key_value_heads", heads)  # None: one per query head
    if isinstance(old_kv, int) and isinstance(old_heads, int) and old_kv and heads:
        # keep the grouping: as many query heads per key/value head as before, where possible
        group = max(1, old_heads // old_kv)
        _set(cfg, "num_key_value_heads", heads // group if heads % group == 0 else heads)
    width = _get(cfg, "hidden_size") or _get(cfg, "d_model")
    if "head_dim" in vars(cfg) and (isinstance(_get(cfg, "head_dim"), int)
                                    or _get(cfg, "head_dim") is None):
        if isinstance(width, int) and isinstance(heads, int) and heads:
            _set(cfg, "head_dim", width // heads)
    head_dim = _get(cfg, "head_dim")
    if not isinstance(head_dim, int) and isinstance(width, int) and isinstance(heads, int) and heads:
        head_dim = width // heads
    _shrink_rope_sections(cfg, head_dim)
    if all(isinstance(_get(cfg, k), int) for k in ("expand", "num_heads", "head_dim", "hidden_size")):
        # state-space heads (Mamba-2): num_heads * head_dim spans the expanded width
        _set(cfg, "num_heads", max(1, _get(cfg, "expand") * _get(cfg, "hidden_size")
                                   // _get(cfg, "head_dim")))
    if isinstance(_get(cfg, "rotary_dim"), int):
        _set(cfg, "rotary_dim", 4)


def _shrink_token_ids_and_layers(cfg) -> None:
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        if isinstance(_get(cfg, key), int) and _get(cfg, key) >= 100:
            _set(cfg, key, 1)
    if isinstance(_get(cfg, "layer_types"), list) and cfg.layer_types:
        # as many layers as before the shrink allows, and every kind of layer kept
        kinds = list(dict.fromkeys(cfg.layer_types))
        n = max(_get(cfg, "num_hidden_layers") or 2, len(kinds))
        _set(cfg, "num_hidden_layers", n)
        _set(cfg, "layer_types", (kinds * n)[:n])


def _shrink_other_fields(cfg, harder: bool) -> None:
    """Every other field by its name: widths, feed-forward sizes, per-stage lists; with
    `harder`, vocabularies, scaling coefficients, heads of parts and channel lists too."""
    for key, value in list(vars(cfg).items()):
        if key.startswith("_") or key in SMALL or isinstance(value, bool):
            continue
        name = key.lower()
        if harder and isinstance(value, int) and value > 128 and "vocab" in name:
            _set(cfg, key, 128)  # (an entity vocabulary, hashed byte groups)
        elif harder and isinstance(value, float) and name in ("width_coefficient", "depth_coefficient"):
            _set(cfg, key, min(value, 1.0))  # (EfficientNet's scaling of B0's stages)
        elif harder and isinstance(value, int) and value > 4 and name.endswith("num_attention_heads"):
            _set(cfg, key, 4)  # (heads of a part whose width the rule below makes 32)
        elif isinstance(value, int) and value > 64 and not any(
                (w in name.split("_")) if (harder and w == "id") else (w in name) for w in NOT_A_WIDTH):
            # (the first pass finds "id" inside "hidden" too: the harder one takes it as a word)
            if any(w in name for w in ("intermediate", "ffn", "mlp")):
                _set(cfg, key, 64)
            elif any(w in name for w in WIDTH_WORDS) or name.endswith("_dim"):
                _set(cfg, key, 32)
        elif isinstance(value, (list, tuple)) and value and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            if name in STAGE_HEADS:
                _set(cfg, key, [2] * len(value))
            elif name in STAGE_DEPTHS:
                _set(cfg, key, [1] * len(value))
            elif name in STAGE_WIDTHS and max(value) > 64:
                # keep the proportions between stages, multiples of 8, at most 64 wide
                _set(cfg, key, [max(8, v * 64 // max(value) // 8 * 8) for v in value])
            elif harder and max(value) > 64 and (name.endswith("_channels") or name.endswith("_dim")
                                                 or name in ("in_channels", "out_channels", "embed_dim")):
                _set(cfg, key, type(value)(_smaller_width(v) for v in value))


def shrink(cfg, harder: bool = False) -> None:
    """Makes the configuration small. `harder`: a second pass for a model the first leaves over
    PARAM_CAP or the CPU cannot build or run (run_one; models that pass keep the first pass's
    configuration). The steps in order: each reads what the ones before it set."""
    from transformers import PretrainedConfig

    old_heads, old_kv = _get(cfg, "num_attention_heads"), _get(cfg, "num_key_value_heads")
    _shrink_named_sizes(cfg)
    _shrink_heads(cfg, old_heads, old_kv)
    _shrink_token_ids_and_layers(cfg)
    _shrink_other_fields(cfg, harder)
    for key, value in vars(cfg).items():
        if isinstance(value, PretrainedConfig):
            shrink(value, harder)
        elif isinstance(value, (list, tuple)):
            for item in value:  # per-layer configs
                if isinstance(item, PretrainedConfig):
                    shrink(item, harder)


def config_value(cfg, names, default=None):
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
