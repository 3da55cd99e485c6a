"""Recipes for the transformers zoo, part D (see __init__.py for what a recipe may say)."""
from __future__ import annotations

import torch  # noqa: F401  (recipes' input functions build tensors)

from . import Recipe

B = 2  # the zoo's batch


def _audioflamingo3_encoder_inputs(model, cfg, ids, randn):
    """Whisper-style log-mel features padded to 2 * max_source_positions frames (shrunk), with the
    processor's feature mask (the second clip shorter)."""
    frames = 2 * cfg.max_source_positions
    mask = torch.ones(B, frames, dtype=torch.long)
    mask[1, frames // 2:] = 0
    return {"input_features": randn(B, cfg.num_mel_bins, frames), "input_features_mask": mask}


def _bros_adjust(cfg):
    # the derived widths the config computes from hidden_size (set before the shrink)
    cfg.dim_bbox_sinusoid_emb_2d = cfg.hidden_size // 4
    cfg.dim_bbox_sinusoid_emb_1d = cfg.dim_bbox_sinusoid_emb_2d // cfg.dim_bbox
    cfg.dim_bbox_projection = cfg.hidden_size // cfg.num_attention_heads


def _boxes(n, g=None):
    """(B, n, 4) normalized word boxes (x0, y0, x1, y1) with x0 < x1, y0 < y1."""
    g = torch.Generator().manual_seed(1) if g is None else g
    lo = torch.rand(B, n, 2, generator=g) * 0.5
    hi = lo + 0.05 + torch.rand(B, n, 2, generator=g) * 0.4
    return torch.cat([lo, hi], -1)


def _blip_2_qformer_inputs(model, cfg, ids, randn):
    """The learned query tokens and the vision tower's patch features they cross-attend to."""
    return {"query_embeds": randn(B, 8, cfg.hidden_size),
            "encoder_hidden_states": randn(B, 17, cfg.encoder_hidden_size)}


def _gemma3n_text_adjust(cfg):
    """Four layers (sliding, full, twice) of which the last two share the first two's key/value
    caches, as the checkpoint's last num_kv_shared_layers do; per-layer lists of that length."""
    n = 4
    cfg.num_hidden_layers = n
    cfg.layer_types = ["sliding_attention", "full_attention"] * 2
    cfg.num_kv_shared_layers = 2
    cfg.intermediate_size = [64] * n
    cfg.activation_sparsity_pattern = [0.95, 0.0, 0.0, 0.0]
    cfg.hidden_size_per_layer_input = 16


def _lengths_mask(frames, short=None):
    """A processor's (B, frames) mask of valid frames: the second clip shorter (padded)."""
    mask = torch.ones(B, frames, dtype=torch.long)
    mask[1, short if short is not None else frames * 3 // 4:] = 0
    return mask


def _gemma4_vision_inputs(model, cfg, ids, randn):
    """The processor's patchified image in [0, 1] (6 x 6 patches of 3 * patch_size^2 values, one
    pooled soft token per pooling window) and each patch's (x, y) position."""
    side = 2 * cfg.pooling_kernel_size
    g = torch.Generator().manual_seed(3)
    ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    positions = torch.stack([xs.flatten(), ys.flatten()], -1)
    return {"pixel_values": torch.rand(B, side * side, 3 * cfg.patch_size ** 2, generator=g),
            "pixel_position_ids": positions.unsqueeze(0).expand(B, -1, -1).clone()}


def _instructblip_inputs(model, cfg, ids, randn):
    """The processor's prompt: num_query_tokens image placeholders before the text, the same text
    for the Q-Former, and the image."""
    image = torch.full((B, cfg.num_query_tokens), cfg.image_token_id, dtype=torch.long)
    input_ids = torch.cat([image, ids], 1)
    size = cfg.vision_config.image_size
    return {"pixel_values": randn(B, 3, size, size), "qformer_input_ids": ids,
            "qformer_attention_mask": torch.ones_like(ids), "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids)}


def _kyutai_adjust(cfg):
    # the audio pad id is the embedding table's last row (after the text and every codebook's rows)
    cfg.audio_pad_token_id = cfg.vocab_size + cfg.num_codebooks * cfg.codebook_vocab_size


def _kyutai_inputs(model, cfg, ids, randn):
    """Per step a text token and one token per audio codebook (B, T, 1 + num_codebooks)."""
    g = torch.Generator().manual_seed(4)
    audio = torch.randint(0, cfg.codebook_vocab_size - 1, (B, ids.shape[1], cfg.num_codebooks), generator=g)
    return {"input_ids": torch.cat([ids.unsqueeze(-1), audio], -1), "attention_mask": torch.ones_like(ids),
            "use_cache": False}


def _mistral4_adjust(cfg):
    # the config derives both from the latent-attention dims (set before the shrink)
    cfg.qk_head_dim = cfg.head_dim = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim


def _lw_detr_adjust(cfg):
    """One projector level at scale 1 (the config derives its channels and level count from the
    scale factors), fed by both shrunk backbone layers."""
    cfg.projector_scale_factors = [1.0]
    cfg.projector_in_channels = [cfg.d_model]
    cfg.projector_out_channels = cfg.d_model
    cfg.num_feature_levels = 1
    bb = cfg.backbone_config
    bb.stage_names = ["stem"] + [f"stage{i}" for i in range(1, bb.num_hidden_layers + 1)]
    bb.out_indices = list(range(1, bb.num_hidden_layers + 1))
    bb.window_block_indices = [0]


def _oneformer_adjust(cfg):
    bb = cfg.backbone_config
    bb.num_layers = len(bb.depths)  # (the shrink's num_layers=2 is Swin's stage count)
    bb.hidden_size = bb.embed_dim * 2 ** (bb.num_layers - 1)


def _oneformer_inputs(model, cfg, ids, randn):
    """The image and the processor's task prompt ("the task is semantic"), token ids padded to
    task_seq_len."""
    g = torch.Generator().manual_seed(6)
    task = torch.zeros(B, cfg.task_seq_len, dtype=torch.long)
    task[:, :6] = torch.randint(3, 100, (1, 6), generator=g)
    return {"pixel_values": randn(B, 3, 64, 64), "task_inputs": task}


def _seggpt_inputs(model, cfg, ids, randn):
    """An image, a prompt image and its prompt mask, each half the model's (shrunk) image_size:
    the model stacks prompt and image vertically."""
    h, w = cfg.image_size[0] // 2, cfg.image_size[1]
    return {"pixel_values": randn(B, 3, h, w), "prompt_pixel_values": randn(B, 3, h, w),
            "prompt_masks": randn(B, 3, h, w)}


def _sam_inputs(model, cfg, ids, randn):
    """The resized image and one point prompt per image (pixel coordinates in it)."""
    size = cfg.vision_config.image_size
    return {"pixel_values": randn(B, 3, size, size),
            "input_points": torch.tensor([[[[20.0, 30.0]]], [[[50.0, 10.0]]]]),
            "input_labels": torch.ones(B, 1, 1, dtype=torch.long)}


def _udop_inputs(model, cfg, ids, randn):
    """Words with their boxes, the page image, and the decoder's start."""
    size = cfg.image_size
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "bbox": _boxes(ids.shape[1]),
            "pixel_values": randn(B, 3, size, size),
            "decoder_input_ids": torch.zeros(B, 4, dtype=torch.long), "use_cache": False}


def _vibevoice_asr_inputs(model, cfg, ids, randn):
    """Two hops of 24 kHz audio per sample and the processor's prompt: audio start, one audio token
    per hop, audio end, then text; latents not sampled (sample=False)."""
    hop = cfg.acoustic_tokenizer_encoder_config.hop_length
    audio = torch.tensor([cfg.audio_bos_token_id, cfg.audio_token_id, cfg.audio_token_id, cfg.audio_eos_token_id])
    input_ids = torch.cat([audio.expand(B, -1), ids], 1)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
            "input_values": randn(B, 1, 2 * hop), "sample": False, "use_cache": False}


_HGNET_SMALL = {"backbone_config.stem_channels": [3, 16, 16], "backbone_config.stage_in_channels": [16, 32, 64, 128],
                "backbone_config.stage_mid_channels": [16, 16, 32, 64],
                "backbone_config.stage_out_channels": [32, 64, 128, 256],
                "backbone_config.stage_numb_of_layers": [2, 2, 2, 2],
                "backbone_config.hidden_sizes": [32, 64, 128, 256], "backbone_config.embedding_size": 16}


# D-FINE and PP-DocLayout-V4: the same HGNetV2 backbone and DETR-style encoder and decoder.
_HGNET_DETR = Recipe(
        why=("HGNetV2's per-stage channel lists (up to 2048) and the encoder/decoder widths fed by them are left "
             "unshrunk; they must agree"),
        config={**_HGNET_SMALL, "encoder_in_channels": [64, 128, 256], "encoder_hidden_dim": 32,
                "decoder_in_channels": [32, 32, 32], "num_queries": 16},
        inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 64, 64)})

RECIPES: dict[str, Recipe] = {
    "audioflamingo3_encoder": Recipe(
        why="the encoder needs the processor's input_features_mask (frame lengths) and 2 * max_source_positions frames",
        config={"max_source_positions": 32},
        inputs=_audioflamingo3_encoder_inputs),
    "bros": Recipe(
        why=("Bros needs word boxes (bbox) and its bbox widths derived from hidden_size (2-d sinusoid of width/4 over "
             "8 coordinates)"),
        config={"hidden_size": 64},
        adjust=_bros_adjust,
        inputs=lambda model, cfg, ids, randn: {"input_ids": ids, "bbox": _boxes(ids.shape[1]),
                                               "attention_mask": torch.ones_like(ids)}),
    "blip_2_qformer": Recipe(
        why=("the Q-Former takes query embeddings and the vision features (encoder_hidden_size, left unshrunk) it "
             "cross-attends to"),
        config={"encoder_hidden_size": 32},
        inputs=_blip_2_qformer_inputs),
    "convnext": Recipe(
        why=("the shrink sets num_hidden_layers, which is num_stages here, to 2 while hidden_sizes and depths list "
             "four stages"),
        config={"num_stages": 4, "image_size": 32}),
    "markuplm": Recipe(
        why="the xpath tag/subscript vocabularies are shrunk below the pad ids the default xpath inputs use",
        config={"max_depth": 8, "tag_pad_id": 31, "subs_pad_id": 31}),
    "clvp": Recipe(
        why=("CLVP needs the mel features with the text; the fixing codes index a speech vocabulary the shrink cuts; "
             "rotary spans >= 32 per head"),
        config={"speech_config.vocab_size": 256, "decoder_config.vocab_size": 256,
                "text_config.num_attention_heads": 1, "speech_config.num_attention_heads": 1},
        inputs=lambda model, cfg, ids, randn: {"input_ids": ids, "input_features": randn(B, cfg.decoder_config.feature_size, 32),
                                               "attention_mask": torch.ones_like(ids)}),
    "dia": Recipe(
        why=("Dia's decoder takes one token per audio channel (B, T, num_channels); its cross-attention widths must "
             "match the shrunk encoder"),
        config={"decoder_config.cross_hidden_size": 32, "decoder_config.cross_num_attention_heads": 4,
                "decoder_config.cross_head_dim": 8, "decoder_config.cross_num_key_value_heads": 4},
        inputs=lambda model, cfg, ids, randn: {
            "input_ids": ids, "attention_mask": torch.ones_like(ids),
            "decoder_input_ids": torch.randint(3, 100, (B, 4, cfg.decoder_config.num_channels),
                                               generator=torch.Generator().manual_seed(2)),
            "use_cache": False}),
    "encodec": Recipe(
        why=("the codebook width must equal the shrunk hidden_size (the quantizer projects nothing); the conv widths "
             "double per stage from num_filters"),
        config={"codebook_dim": 32, "num_filters": 4, "codebook_size": 64},
        inputs=lambda model, cfg, ids, randn: {"input_values": randn(B, 1, 3200)}),
    "deepseek_ocr2": Recipe(
        why=("the text config leaves mlp_layer_types None (a checkpoint lists dense/sparse per layer); SAM's neck "
             "widths end at the encoder's"),
        config={"text_config.mlp_layer_types": ["dense", "sparse"], "vision_config.sam_config.downsample_channels": [16, 32]}),
    "gemma3n_text": Recipe(
        why=("two layers cannot hold the checkpoint's kv-shared tail (15 shared layers); per-layer lists must match "
             "the layer count"),
        adjust=_gemma3n_text_adjust),
    "qwen4_exp_text": Recipe(
        why="its indexed-attention layers need the QSA indexer fields the config class leaves None",
        config={"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 8, "indexer_budget": 4,
                "indexer_compress_ratio": 2}),
    "fun_asr_nano_encoder": Recipe(
        why=("the encoder takes low-frame-rate features (num_stacked_frames mel frames stacked per step) and their "
             "frame mask"),
        inputs=lambda model, cfg, ids, randn: {"input_features": randn(B, 16, cfg.num_mel_bins * cfg.num_stacked_frames),
                                               "input_features_mask": _lengths_mask(16)}),
    "granite_speech5_ctc": Recipe(
        why="the feature extractor gives delta-expanded mel frames stacked in pairs (4 * num_mel_bins per step)",
        inputs=lambda model, cfg, ids, randn: {"input_features": randn(B, 32, 4 * cfg.encoder_config.num_mel_bins),
                                               "attention_mask": _lengths_mask(32)}),
    "gemma4_vision": Recipe(
        why="the tower takes patchified pixels with their (x, y) patch positions, not an image",
        config={"patch_size": 4, "position_embedding_size": 64},
        inputs=_gemma4_vision_inputs),
    "idefics": Recipe(
        why=("IDEFICS takes images per sample (B, images, C, H, W) with the image_attention_mask tying text tokens to "
             "them"),
        config={"vision_config.image_size": 28},
        inputs=lambda model, cfg, ids, randn: {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                               "pixel_values": randn(B, 1, 3, 28, 28),
                                               "image_attention_mask": torch.ones(B, ids.shape[1], 1, dtype=torch.long),
                                               "use_cache": False}),
    "instructblip": Recipe(
        why=("InstructBLIP takes the Q-Former's own text with image placeholder tokens (id unset in the config) in the "
             "prompt"),
        config={"num_query_tokens": 4, "image_token_id": 101, "vision_config.image_size": 28,
                "qformer_config.encoder_hidden_size": 32},
        inputs=_instructblip_inputs),
    "kyutai_speech_to_text": Recipe(
        why=("the audio pad id must be the last row of the shrunk text+codebooks embedding; steps carry one token per "
             "codebook"),
        config={"num_codebooks": 4, "codebook_vocab_size": 65, "audio_bos_token_id": 64,
                "codec_config.codebook_size": 64, "codec_config.num_quantizers": 4},
        adjust=_kyutai_adjust, inputs=_kyutai_inputs),
    "mimo_v2_flash": Recipe(
        why=("sliding-window layers double the key/value heads: more than the shrunk query heads unless kv heads stay "
             "grouped (64:4 in the checkpoint)"),
        config={"num_key_value_heads": 1}),
    "mistral4": Recipe(
        why="head_dim and qk_head_dim are derived from the unshrunk latent-attention dims (nope + rope)",
        adjust=_mistral4_adjust),
    "lightglue": Recipe(
        why=("LightGlue matches an image pair (B, 2, C, H, W); SuperPoint's score head is 8 x 8 cells + a dustbin "
             "(65), not a width"),
        config={"keypoint_detector_config.keypoint_decoder_dim": 65,
                "keypoint_detector_config.encoder_hidden_sizes": [16, 16, 32, 32],
                "keypoint_detector_config.decoder_hidden_size": 32, "keypoint_detector_config.max_keypoints": 32},
        inputs=lambda model, cfg, ids, randn: {
            "pixel_values": torch.rand(B, 2, 3, 64, 64, generator=torch.Generator().manual_seed(5))}),
    "lw_detr": Recipe(
        why=("the backbone's out_indices and stage names are for 10 layers; the projector's scale factors (none by "
             "default) set the feature levels"),
        config={"backbone_config.image_size": 128, "num_queries": 16, "decoder_self_attention_heads": 4,
                "decoder_cross_attention_heads": 4},
        adjust=_lw_detr_adjust),
    "muse_spark_audio": Recipe(
        why=("num_hidden_layers counts the four patching stages (the shrink makes it 2); the waveform is padded to a "
             "multiple of the 1920-sample token"),
        config={"num_hidden_layers": 4, "out_hidden_size": 32},
        inputs=lambda model, cfg, ids, randn: {"input_values": randn(B, 2 * cfg.samples_per_token)}),
    "pe_audio_encoder": Recipe(
        why=("the DAC encoder's channels double per downsampling stage from encoder_hidden_size (64 -> 1024), which "
             "the shrink leaves"),
        config={"dac_config.encoder_hidden_size": 4, "dac_config.decoder_hidden_size": 32, "dac_config.codebook_dim": 8,
                "dac_config.codebook_size": 64}),
    "nemotron3_5_transcribe_word_timestamp": Recipe(
        why="the timestamp head takes the ASR encoder's frame embeddings (inputs_embeds) and their frame mask",
        inputs=lambda model, cfg, ids, randn: {"inputs_embeds": randn(B, 8, cfg.hidden_size), "attention_mask": _lengths_mask(8, 6)}),
    "oneformer": Recipe(
        why=("OneFormer needs the task prompt (task_inputs); Swin's stage count and width follow depths; decoder "
             "widths must agree"),
        config={"hidden_dim": 32, "dim_feedforward": 64, "num_queries": 16, "text_encoder_width": 32,
                "text_encoder_vocab_size": 128, "text_encoder_num_layers": 2},
        adjust=_oneformer_adjust, inputs=_oneformer_inputs),
    "vit_mae": Recipe(
        why="random masking: the forward takes the per-patch noise that orders the patches (deterministic)",
        config={"image_size": 64},
        inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 64, 64),
                                               "noise": randn(B, (64 // cfg.patch_size) ** 2)}),
    "xmod": Recipe(
        why=("X-MOD routes each sample through its language adapter: lang_ids (no default language is set); a causal "
             "LM use is a decoder"),
        config={"is_decoder": True},
        inputs=lambda model, cfg, ids, randn: {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                               "lang_ids": torch.tensor([0, 1])}),
    "seggpt": Recipe(
        why=("SegGPT needs the prompt image and prompt mask; its feature taps (intermediate_hidden_state_indices) are "
             "for 24 layers"),
        config={"image_size": (64, 32), "num_hidden_layers": 4, "intermediate_hidden_state_indices": [0, 1, 2, 3],
                "merge_index": 1},
        inputs=_seggpt_inputs),
    "sam": Recipe(
        why=("SAM's image, prompt-encoder and embedding sizes must agree (set for a 64 px image); its global-attention "
             "layers index 12"),
        config={"vision_config.image_size": 64, "prompt_encoder_config.image_size": 64,
                "prompt_encoder_config.image_embedding_size": 4, "vision_config.global_attn_indexes": [1],
                "vision_config.window_size": 2, "vision_config.num_pos_feats": 16},
        inputs=_sam_inputs),
    "textnet": Recipe(
        why="the stem's output channels must equal the first stage's (hidden_sizes[0]), which the shrink cut",
        config={"stem_out_channels": 8, "image_size": (64, 64)}),
    "udop": Recipe(
        why=("UDOP takes word boxes (bbox) and the page image at its image_size; d_kv and decoder depth are left at "
             "the T5-large values"),
        config={"d_kv": 8, "d_ff": 64, "num_decoder_layers": 2, "image_size": 32, "max_2d_position_embeddings": 128},
        inputs=_udop_inputs),
    "speecht5": Recipe(
        why=("the bare SpeechT5Model has no pre-nets: encoder and decoder take hidden-size frames (what a pre-net "
             "would give), not a waveform"),
        inputs=lambda model, cfg, ids, randn: {"input_values": randn(B, 8, cfg.hidden_size),
                                               "decoder_input_values": randn(B, 4, cfg.hidden_size), "use_cache": False}),
    "pocket_tts_audio_tokenizer": Recipe(
        why=("the upsampling conv is depthwise over hidden_size channels (upsample_groups = hidden_size); conv widths "
             "double from num_filters"),
        config={"upsample_groups": 32, "num_filters": 4}),
    "xcodec": Recipe(
        why=("codebook_dim is acoustic + semantic hidden sizes (derived before the shrink); HuBERT's 512-wide convs "
             "and DAC's doubling channels stay large"),
        config={"semantic_model_config.conv_dim": (32,) * 7, "acoustic_model_config.encoder_hidden_size": 4,
                "acoustic_model_config.decoder_hidden_size": 32, "acoustic_model_config.codebook_size": 64,
                "codebook_size": 64},
        adjust=lambda cfg: setattr(cfg, "codebook_dim", cfg.acoustic_model_config.hidden_size
                                   + cfg.semantic_model_config.hidden_size)),
    "vibevoice_acoustic_tokenizer": Recipe(
        why=("conv widths double over six downsamplings from num_filters (32 -> 2048); the forward samples the VAE "
             "latent unless sample=False"),
        config={"num_filters": 1},
        inputs=lambda model, cfg, ids, randn: {"input_values": randn(B, 1, 3200), "sample": False}),
    "vibevoice_asr": Recipe(
        why=("conv widths double from num_filters (32 -> 2048); the audio token ids lie past the shrunk vocabulary; "
             "latents sampled unless sample=False"),
        config={"acoustic_tokenizer_encoder_config.num_filters": 1, "semantic_tokenizer_encoder_config.num_filters": 1,
                "audio_token_id": 101, "audio_bos_token_id": 102, "audio_eos_token_id": 103},
        inputs=_vibevoice_asr_inputs),
    "d_fine": _HGNET_DETR,
    "pp_doclayout_v4": _HGNET_DETR,
    "evolla": Recipe(
        why=("AutoModel.from_config rejects EvollaConfig (listed, yet unresolved): EvollaModel, the class the auto "
             "mapping names, is built; protein sequence given"),
        model_class="EvollaModel",
        config={"resampler_depth": 2, "resampler_dim_head": 8, "resampler_heads": 4, "resampler_num_latents": 8,
                "aligner_num_add_layers": 1},
        inputs=lambda model, cfg, ids, randn: {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                               "protein_input_ids": torch.randint(5, 30, (B, 12), generator=torch.Generator().manual_seed(7)),
                                               "protein_attention_mask": torch.ones(B, 12, dtype=torch.long),
                                               "use_cache": False}),
    "sam3_lite_text": Recipe(
        why=("SAM 3 detects what a text prompt names (input_ids with the image); image, FPN feature sizes and windows "
             "must agree (set for 56 px)"),
        config={"vision_config.backbone_config.image_size": 56, "vision_config.backbone_config.pretrain_image_size": 56,
                "vision_config.backbone_config.window_size": 2, "vision_config.backbone_config.global_attn_indexes": [1],
                "vision_config.backbone_feature_sizes": [[16, 16], [8, 8], [4, 4]], "vision_config.fpn_hidden_size": 32,
                "detr_decoder_config.num_queries": 16},
        inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 56, 56), "input_ids": ids,
                                               "attention_mask": torch.ones_like(ids)}),
}
