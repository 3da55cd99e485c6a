"""Recipes for the transformers zoo, part B (see __init__.py for what a recipe may say)."""
from __future__ import annotations

import torch  # noqa: F401  (recipes' input functions build tensors)

from . import Recipe

B = 2  # the zoo's batch


def _series_inputs(model, cfg, ids, randn):
    """What a time-series dataloader gives the model: the context plus its lags, with time features
    and an all-observed mask, and the future window the decoder reads (teacher forcing)."""
    past = cfg.context_length + max(cfg.lags_sequence)
    return {"past_values": randn(B, past), "past_time_features": randn(B, past, cfg.num_time_features),
            "past_observed_mask": torch.ones(B, past), "future_values": randn(B, cfg.prediction_length),
            "future_time_features": randn(B, cfg.prediction_length, cfg.num_time_features)}


_SERIES = {"prediction_length": 4, "context_length": 8, "num_time_features": 2}


def _series_features(cfg):
    """feature_size, derived in __init__ from the lags and the (now two) time features."""
    cfg.feature_size = cfg.input_size * len(cfg.lags_sequence) + cfg._number_of_features


def _compass_rope(cfg):
    """Rotary parameters per layer type, as the checkpoint gives them (its sections for the shrunk
    head_dim)."""
    text = cfg.text_config
    half = text.head_dim // 2
    section = [half - 2 * (half // 3), half // 3, half // 3]
    text.rope_parameters = {kind: {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": section}
                            for kind in dict.fromkeys(text.layer_types)}


def _zamba_layers(cfg):
    """Four layers with the checkpoint's layout (two Mamba layers, then the shared attention block
    every attn_layer_period layers), so the shared block is tied across more than one layer; the
    widths __post_init__ derives from hidden_size."""
    cfg.num_hidden_layers = 4
    cfg.layers_block_type = ["linear_attention", "hybrid", "linear_attention", "hybrid"]
    cfg.attention_hidden_size = 2 * cfg.hidden_size
    cfg.attention_head_dim = 2 * cfg.hidden_size // cfg.num_attention_heads
    cfg.mamba_dt_rank = -(-cfg.hidden_size // 16)


# The released PP-OCRv6 medium detector's intra-class blocks: [kernel, stride, padding] per conv.
_INTRACLASS = {
    "reduce_channel": [1, 1, 0], "return_channel": [1, 1, 0],
    "vertical_long_to_small_conv_longratio": [[7, 1], [1, 1], [3, 0]],
    "vertical_long_to_small_conv_midratio": [[5, 1], [1, 1], [2, 0]],
    "vertical_long_to_small_conv_shortratio": [[3, 1], [1, 1], [1, 0]],
    "horizontal_small_to_long_conv_longratio": [[1, 7], [1, 1], [0, 3]],
    "horizontal_small_to_long_conv_midratio": [[1, 5], [1, 1], [0, 2]],
    "horizontal_small_to_long_conv_shortratio": [[1, 3], [1, 1], [0, 1]],
    "symmetric_conv_long_longratio": [[7, 7], [1, 1], [3, 3]],
    "symmetric_conv_long_midratio": [[5, 5], [1, 1], [2, 2]],
    "symmetric_conv_long_shortratio": [[3, 3], [1, 1], [1, 1]],
}


def _ppocr_det_backbone(cfg):
    """The released detector's PP-LCNetV4 layout (square strides 1, 2, 2, 2 between stages; the
    library default is the recognizer's [2, 1] strides), one or two blocks per stage at small widths,
    every stage returned to the neck; the fields __post_init__ derives from the blocks."""
    bb = cfg.backbone_config
    bb.stem_channels = [3, 8, 16]
    bb.block_configs = [[[3, 16, 16, 1, True]], [[3, 16, 32, 2, False], [3, 32, 32, 1, True]],
                        [[3, 32, 48, 2, False], [3, 48, 48, 1, True]], [[3, 48, 64, 2, False]]]
    bb.depths = [len(blocks) for blocks in bb.block_configs]
    bb.stage_out_channels = [blocks[-1][2] for blocks in bb.block_configs]
    bb.out_features = ["stage1", "stage2", "stage3", "stage4"]
    bb.out_indices = [1, 2, 3, 4]


def _boxes(n=8, seed=2):
    """Word boxes as an OCR processor gives them: (x0, y0, x1, y1) on a 0-1000 grid, x0 <= x1, y0 <= y1."""
    g = torch.Generator().manual_seed(seed)
    corner = torch.randint(0, 900, (B, n, 2), generator=g)
    size = torch.randint(1, 100, (B, n, 2), generator=g)
    return torch.cat([corner, corner + size], dim=-1)


def _chameleon_vocabulary(cfg):
    """The tokenizer's vocabulary map the checkpoint carries: "<image>" and one BPE token per VQ code
    ("IMGIMG" + the code's digits as letters A-J + "Z"), here for the codes the small vocabulary holds."""
    digits = lambda code: "".join(chr(ord("A") + int(d)) for d in str(code))  # noqa: E731
    image = {f"IMGIMG{digits(code)}Z": 4 + code for code in range(cfg.vocab_size - 4)}
    cfg.vocabulary_map = {"<image>": 3, **image}
    cfg.image_token_id = 3


def _instructblip_video_inputs(model, cfg, ids, randn):
    """Four frames (the processor's fixed count) at the vision tower's size, the instruction for the
    Q-Former, and the prompt with num_query_tokens video tokens per frame before the text."""
    frames, side = 4, cfg.vision_config.image_size
    video = torch.full((B, cfg.num_query_tokens * frames), cfg.video_token_index)
    return {"pixel_values": randn(B, frames, 3, side, side), "qformer_input_ids": ids,
            "input_ids": torch.cat([video, ids], dim=1)}


def _paddleocr_rope(cfg):
    """The checkpoint's multimodal rotary sections ([16, 24, 24] of 64 frequencies) for the shrunk head_dim."""
    half = cfg.text_config.head_dim // 2
    cfg.text_config.rope_parameters["mrope_section"] = [half // 4, half // 4, half - 2 * (half // 4)]


def _minicpm_ocr_inputs(model, cfg, ids, randn):
    """Two images of 4 x 4 patches, packed as the processor does: one strip of patches
    (1, channels, patch, patches * patch), with each image's patch grid."""
    p = cfg.patch_size
    return {"pixel_values": randn(1, cfg.num_channels, p, 2 * 16 * p), "target_sizes": torch.tensor([[4, 4], [4, 4]])}


def _loftr_stages(cfg):
    """Stage widths ending at the shrunk hidden_size (the config requires out_features[-1] ==
    hidden_size), fewer blocks, and the per-block lists __post_init__ derives from them."""
    cfg.stage_num_blocks = [1, 2, 2, 2]
    cfg.out_features = [16, 16, 32, cfg.hidden_size]
    cfg.stage_in_channels = [1] + cfg.out_features[:-1]
    cfg.stage_block_stride = [[stride] + [1] * (n - 1) for stride, n in zip(cfg.stage_stride, cfg.stage_num_blocks)]
    cfg.stage_block_out_channels = [[cfg.out_features[i]] * n for i, n in enumerate(cfg.stage_num_blocks)]
    cfg.stage_block_in_channels = [[cfg.stage_in_channels[i]] + cfg.stage_block_out_channels[i][:-1]
                                   for i in range(len(cfg.stage_num_blocks))]
    cfg.fine_fusion_dims = list(reversed(cfg.out_features))[:-1]
    cfg.intermediate_size = cfg.hidden_size * 2


def _sam2_vision(cfg):
    """Hiera's hidden_size is its first stage's width; 64 px images (the processor resizes) and the
    feature-map sizes the neck expects for them (a quarter, an eighth, a sixteenth of the side)."""
    hiera = cfg.backbone_config
    hiera.hidden_size = hiera.embed_dim_per_stage[0]
    hiera.image_size = [64, 64]
    cfg.backbone_feature_sizes = [[16, 16], [8, 8], [4, 4]]


def _ernie_rope(cfg):
    """The checkpoint's rotary sections give height and width equal shares ([22, 22, 20] of 64)."""
    half = cfg.text_config.head_dim // 2 if getattr(cfg.text_config, "head_dim", None) else \
        cfg.text_config.hidden_size // cfg.text_config.num_attention_heads // 2
    cfg.text_config.rope_parameters["mrope_section"] = [half // 4, half // 4, half - 2 * (half // 4)]


def _fastspeech_units(cfg):
    """The encoder and decoder module configs __init__ derives from the flat fields, for the shrunk
    ones (two layers), and feed-forward and postnet widths the shrink does not reach."""
    model = cfg.model_config
    model.speech_decoder_postnet_units = 32
    for part, layers in (("encoder_config", model.encoder_layers), ("decoder_config", model.decoder_layers)):
        getattr(model, part).update(layers=layers, linear_units=64)


def _sam2(cfg):
    """The vision tower as for sam2_vision_model; the FPN width is the mask decoder's (256 and 256 in the
    checkpoint); the prompt encoder's image size is the processor's (64 px)."""
    _sam2_vision(cfg.vision_config)
    cfg.vision_config.fpn_hidden_size = cfg.mask_decoder_config.hidden_size
    cfg.prompt_encoder_config.image_size = 64


def _point_prompt(model, cfg, ids, randn):
    """A 64 px image and one foreground point per image (pixel coordinates), as the processor gives them."""
    return {"pixel_values": randn(B, 3, 64, 64), "input_points": torch.tensor([[[[20.0, 30.0]]], [[[45.0, 12.0]]]]),
            "input_labels": torch.ones(B, 1, 1, dtype=torch.long)}


def _naflex_inputs(model, cfg, ids, randn):
    """What the Siglip2 processor gives: each image as patches flattened to channels * patch * patch,
    padded to a common count, with a patch mask and each image's patch grid (rows, columns)."""
    p, c = cfg.vision_config.patch_size, cfg.vision_config.num_channels
    grids = [(4, 4), (2, 4)]
    mask = torch.zeros(B, 16, dtype=torch.long)
    for i, (h, w) in enumerate(grids):
        mask[i, : h * w] = 1
    return {"input_ids": ids, "pixel_values": randn(B, 16, c * p * p) * mask[..., None],
            "pixel_attention_mask": mask, "spatial_shapes": torch.tensor(grids)}


def _uvdoc_widths(cfg):
    """Every channel count of the backbone's lists (which the shrink does not reach) at most 32, so
    that each stage's output still feeds the next; the head's widths to match."""
    bb = cfg.backbone_config
    bb.resnet_head = [[min(a, 32), min(b, 32)] for a, b in bb.resnet_head]
    bb.resnet_configs = [[[min(i, 32), min(o, 32), *rest] for i, o, *rest in stage] for stage in bb.resnet_configs]
    bb.stage_configs = [[[min(c, 32), d] for c, d in bridge] for bridge in bb.stage_configs]
    cfg.bridge_connector = [32, 32]
    cfg.out_point_positions2D = [[32, 32], [32, 2]]


def _blt_widths(cfg):
    """The global transformer is cross_attn_k times as wide as the local ones (the local models'
    hidden_size_global); the hash n-gram embedding table gets a small vocabulary like the tokens'."""
    wide = cfg.cross_attn_k * cfg.encoder_config.hidden_size
    cfg.encoder_config.hidden_size_global = cfg.decoder_config.hidden_size_global = wide
    cfg.global_config.hidden_size = wide
    cfg.global_config.head_dim = wide // cfg.global_config.num_attention_heads
    cfg.encoder_hash_byte_group_vocab = 128


def _align_vision(cfg):
    """A small EfficientNet: scaling coefficients 1, two narrow stages (the second with a residual
    block), 64 px images; the image embedding is the last stage's width, which must be projection_dim.
    (Seven stages of randomly initialized blocks shrink the features to ~1e-27, whose squared norm
    underflows in float32: the normalized image embedding is then 0 / 0 on any device.)"""
    v = cfg.vision_config
    v.width_coefficient = v.depth_coefficient = 1.0
    v.in_channels = [32, 16]  # the stem always gives round_filters(32)
    v.out_channels = [16, 32]
    v.kernel_sizes, v.strides, v.num_block_repeats, v.expand_ratios = [3, 3], [1, 2], [1, 2], [1, 6]
    v.image_size = 64
    cfg.projection_dim = v.out_channels[-1]


def _deimv2_widths(cfg):
    """HGNetV2's stage channel lists (which the shrink does not reach) narrow, the hybrid encoder reading
    the last three stages' widths, the decoder reading the encoder's width; fewer queries."""
    bb = cfg.backbone_config
    bb.stem_channels = [3, 16, 16]
    bb.stage_in_channels = [16, 32, 48, 64]
    bb.stage_mid_channels = [16, 16, 24, 32]
    bb.stage_out_channels = [32, 48, 64, 64]
    bb.stage_num_blocks = [1, 1, 1, 1]
    bb.stage_numb_of_layers = [2, 2, 2, 2]
    bb.hidden_sizes = bb.stage_out_channels  # the widths the backbone reports (equal in the checkpoint)
    bb.embedding_size = bb.stem_channels[-1]
    cfg.encoder_in_channels = bb.stage_out_channels[1:]
    cfg.encoder_hidden_dim = cfg.d_model
    cfg.decoder_in_channels = [cfg.d_model] * 3
    cfg.num_queries = 20


def _xcodec2_widths(cfg):
    """The quantizer reads the concatenated semantic and acoustic features: quantization_dim is the sum
    of the two widths (1024 + 1024 = 2048 in the checkpoint)."""
    cfg.quantization_dim = cfg.hidden_size + cfg.semantic_model_config.hidden_size


def _xcodec2_inputs(model, cfg, ids, randn):
    """What its feature extractor gives: the waveform (four hops of audio) and the semantic model's
    features, one frame per hop."""
    frames = 4
    return {"input_values": randn(B, 1, frames * cfg.hop_length),
            "input_features": randn(B, frames, cfg.semantic_model_config.feature_projection_input_dim)}


RECIPES: dict[str, Recipe] = {
    "align": Recipe(
        why="EfficientNet-B7's scaling (55 blocks) escapes the shrink; the image embedding (last stage width) "
            "must be projection_dim",
        adjust=_align_vision),
    "autoformer": Recipe(
        why="the config leaves prediction_length None; the forward needs the past and future series",
        config={**_SERIES, "label_length": 4}, adjust=_series_features, inputs=_series_inputs),
    "bit": Recipe(
        why="group norms of 32 groups do not divide the shrunk 8-channel stages",
        config={"num_groups": 8}),
    "blt": Recipe(
        why="the global width must be cross_attn_k times the local width (hidden_size_global); the hash "
            "n-gram vocabulary (500002) escapes the shrink",
        adjust=_blt_widths),
    "chameleon": Recipe(
        why="the config leaves the tokenizer's vocabulary map (image token, VQ-code tokens) None",
        adjust=_chameleon_vocabulary),
    "cohere_compass": Recipe(
        why="checkpoints give rotary parameters per layer type; the vision output width must be the text width",
        config={"vision_config.out_hidden_size": 32, "vision_config.deepstack_visual_indexes": [1]},
        adjust=_compass_rope),
    "convnextv2": Recipe(
        why="the shrink's num_hidden_layers=2 is num_stages, but the stage lists still have four entries",
        config={"num_stages": 4}),
    "dbrx": Recipe(
        why="checkpoints carry rope_theta and clip_qkv in attn_config; the expert width escapes the shrink",
        config={"attn_config.rope_theta": 500000.0, "attn_config.clip_qkv": 8.0,
                "ffn_config.ffn_hidden_size": 64}),
    "deimv2": Recipe(
        why="the backbone's stage channel lists escape the shrink; encoder and decoder input widths must match them",
        adjust=_deimv2_widths, inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 64, 64)}),
    "diffusion_gemma": Recipe(
        why="the text config leaves num_experts and top_k_experts None; without a canvas the forward samples one",
        config={"text_config.num_experts": 4, "text_config.top_k_experts": 2, "canvas_length": 8},
        inputs=lambda model, cfg, ids, randn: {
            "input_ids": ids, "decoder_input_ids": torch.randint(
                3, 100, (B, cfg.canvas_length), generator=torch.Generator().manual_seed(1))}),
    "efficientloftr": Recipe(
        why="the stage widths escape the shrink but must end at hidden_size; the model matches an image pair "
            "(batch, 2, 1, h, w), grayscale; 8 heads as in the checkpoint (the rotary fills hidden_size / 4)",
        config={"num_attention_heads": 8, "num_key_value_heads": 8}, adjust=_loftr_stages,
        inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 2, 1, 64, 64)}),
    "ernie4_5_vl_moe": Recipe(
        why="the checkpoint's rotary sections give height and width equal shares ([22, 22, 20]); "
            "the shrink's [2, 1, 1] cannot be interleaved; expert widths escape the shrink",
        config={"text_config.moe_intermediate_size": [64, 32]}, adjust=_ernie_rope),
    "fastspeech2_conformer_with_hifigan": Recipe(
        why="the vocoder reads the acoustic model's mel bins (model_in_dim = num_mel_bins); widths the shrink misses",
        config={"vocoder_config.model_in_dim": 80, "vocoder_config.upsample_initial_channel": 32},
        adjust=_fastspeech_units),
    "granite_speech5_encoder": Recipe(
        why="the processor stacks four mel frames per step: num_mel_bins * 4 features",
        inputs=lambda model, cfg, ids, randn: {"input_features": randn(B, 16, cfg.num_mel_bins * 4)}),
    "informer": Recipe(
        why="the config leaves prediction_length None; the forward needs the past and future series; "
            "full attention (ProbSparse samples keys at random)",
        config={**_SERIES, "attention_type": "full"}, adjust=_series_features, inputs=_series_inputs),
    "instructblipvideo": Recipe(
        why="the Q-Former's cross-attention width must be the vision width; the video token id is None; "
            "the forward needs the Q-Former instruction and video tokens in the prompt",
        config={"qformer_config.encoder_hidden_size": 32, "video_token_index": 127, "num_query_tokens": 4,
                "vision_config.image_size": 28},
        inputs=_instructblip_video_inputs),
    "layoutlmv3": Recipe(
        why="four coordinate and two shape embeddings must sum to the width (48 = 4*8 + 2*8); "
            "the model takes word boxes and the page image (resized to 64 px)",
        config={"hidden_size": 48, "coordinate_size": 8, "shape_size": 8, "input_size": 64},
        inputs=lambda model, cfg, ids, randn: {"input_ids": ids, "bbox": _boxes(),
                                               "pixel_values": randn(B, 3, 64, 64)}),
    "lilt": Recipe(
        why="the six box embeddings (hidden_size // 6 each) must fill the width: 48; the model takes word boxes",
        config={"hidden_size": 48},
        inputs=lambda model, cfg, ids, randn: {"input_ids": ids, "bbox": _boxes()}),
    "lxmert": Recipe(
        why="the model needs its detector's region features and boxes (normalized corners)",
        inputs=lambda model, cfg, ids, randn: {
            "input_ids": ids, "visual_feats": randn(B, 6, cfg.visual_feat_dim),
            "visual_pos": _boxes(6).float().div(1000)[..., :cfg.visual_pos_dim]}),
    "mimi": Recipe(
        why="the upsampling conv's groups must be the shrunk width (checkpoint: groups = hidden_size); "
            "filters and codebooks escape the shrink",
        config={"upsample_groups": 32, "num_filters": 8, "num_quantizers": 4, "codebook_size": 128, "codebook_dim": 32,
                "vector_quantization_hidden_dimension": 32}),
    "minicpm_ocr_vision": Recipe(
        why="the tower takes packed patches with each image's patch grid; the merger's layer must be within "
            "the shrunk depth",
        config={"insert_layer_id": 0}, inputs=_minicpm_ocr_inputs),
    "moonshine_streaming": Recipe(
        why="the decoder config has no num_key_value_heads attribute (checkpoints set it)",
        config={"num_key_value_heads": 4}),
    "neomme": Recipe(
        why="the 2-D rotary interleaves rows and columns over head_dim * 0.25 dims: at least 4 (head_dim 16)",
        config={"head_dim": 16}),
    "paddleocr_vl": Recipe(
        why="the text config's rotary parameters lack the checkpoint's mrope_section (the default is for head_dim 128)",
        adjust=_paddleocr_rope),
    "perceiver": Recipe(
        why="the base model has no preprocessor: its inputs are already embedded (d_model wide)",
        inputs=lambda model, cfg, ids, randn: {"inputs": randn(B, 8, cfg.d_model)}),
    "pocket_tts_audio_tokenizer_decoder": Recipe(
        why="the upsampling conv's groups must be the shrunk width (checkpoint: groups = hidden_size); "
            "filters escape the shrink; its input is latent frames",
        config={"upsample_groups": 32, "num_filters": 8},
        inputs=lambda model, cfg, ids, randn: {"latents": randn(B, cfg.hidden_size, 4)}),
    "pp_ocrv6_medium_det": Recipe(
        why="the config leaves the neck's intra-class convs, scale factors and head kernels None; "
            "the default backbone is the recognizer's (non-square strides, last stage only)",
        config={"intraclass_block_config": _INTRACLASS, "scale_factor_list": [1, 2, 4, 8], "kernel_list": [3, 2, 2]},
        adjust=_ppocr_det_backbone, inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 64, 64)}),
    "qwen3_asr_encoder": Recipe(
        why="the encoder reads whole windows (feature length a multiple of n_window * 2) with a feature mask; "
            "its downsampling width escapes the shrink",
        config={"downsample_hidden_size": 32},
        inputs=lambda model, cfg, ids, randn: {
            "input_features": randn(B, cfg.num_mel_bins, 2 * cfg.n_window),
            "input_features_mask": torch.ones(B, 2 * cfg.n_window, dtype=torch.long)}),
    "sam2": Recipe(
        why="Hiera's hidden_size must be its first stage width, the FPN width the mask decoder's; image, "
            "feature-map and prompt sizes must agree (64 px); a point prompt",
        adjust=_sam2, inputs=_point_prompt),
    "sam2_vision_model": Recipe(
        why="Hiera's hidden_size must be its first stage width; image and feature-map sizes must agree (64 px)",
        adjust=_sam2_vision, inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 64, 64)}),
    "sam3_lite_text_text_model": Recipe(
        why="main_input_name says pixel_values, but the text tower takes token ids",
        inputs=lambda model, cfg, ids, randn: {"input_ids": ids}),
    "sam_hq": Recipe(
        why="the positional features (2 * num_pos_feats) must be the shrunk width; image and prompt sizes must "
            "agree (64 px, 4 x 4 patches, window 2, one global layer in the two); a point prompt",
        config={"vision_config.num_pos_feats": 16, "vision_config.image_size": 64, "vision_config.window_size": 2,
                "vision_config.global_attn_indexes": [1], "prompt_encoder_config.image_size": 64,
                "prompt_encoder_config.image_embedding_size": 4},
        inputs=_point_prompt),
    "siglip2": Recipe(
        why="the vision tower takes the processor's padded patch sequence with its mask and patch grids",
        inputs=_naflex_inputs),
    "step3p7": Recipe(
        why="the text config leaves sliding_window None; the forward builds the sliding mask even when no layer slides",
        config={"text_config.sliding_window": 512}),
    "time_series_transformer": Recipe(
        why="the config leaves prediction_length None; the forward needs the past and future series",
        config=_SERIES, adjust=_series_features, inputs=_series_inputs),
    "uvdoc": Recipe(
        why="the head concatenates every bridge stage's features: the backbone must return all six, not the last; "
            "its channel lists escape the shrink",
        config={"backbone_config.out_features": [f"stage{i}" for i in range(1, 7)],
                "backbone_config.out_indices": list(range(1, 7))},
        adjust=_uvdoc_widths, inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 64, 64)}),
    "vibevoice_acoustic_tokenizer_decoder": Recipe(
        why="the decoder doubles num_filters over six stages (32 -> 2048 channels): the base width escapes the shrink; "
            "its input is latent frames",
        config={"num_filters": 4},
        inputs=lambda model, cfg, ids, randn: {"hidden_states": randn(B, cfg.hidden_size, 4)}),
    "voxtral_realtime": Recipe(
        why="the model adds the audio encoder's output to every token: mel features of audio_length_per_tok "
            "frames per token, and the processor's delay-token count",
        inputs=lambda model, cfg, ids, randn: {
            "input_ids": ids,
            "input_features": randn(B, cfg.audio_config.num_mel_bins, ids.shape[1] * cfg.audio_length_per_tok),
            "num_delay_tokens": cfg.default_num_delay_tokens}),
    "xcodec2": Recipe(
        why="the acoustic encoder doubles encoder_hidden_size over five stages (48 -> 1536 channels): the base "
            "width escapes the shrink; quantization_dim must be the two encoders' widths together; "
            "it takes audio and features",
        config={"encoder_hidden_size": 4}, adjust=_xcodec2_widths, inputs=_xcodec2_inputs),
    "zamba": Recipe(
        why="two layers leave one hybrid layer, so the shared attention block has nothing to tie to; "
            "derived widths stay at their full-size values",
        adjust=_zamba_layers),
}
