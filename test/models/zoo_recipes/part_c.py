"""Recipes for the transformers zoo, part C (see __init__.py for what a recipe may say)."""
from __future__ import annotations

import torch  # noqa: F401  (recipes' input functions build tensors)

from . import Recipe

B = 2  # the zoo's batch


def _decision_transformer_inputs(model, cfg, ids, randn):
    """A trajectory of 8 steps: states, actions, rewards, returns-to-go, timesteps and its mask."""
    steps = 8
    return {"states": randn(B, steps, cfg.state_dim), "actions": randn(B, steps, cfg.act_dim),
            "rewards": randn(B, steps, 1), "returns_to_go": randn(B, steps, 1),
            "timesteps": torch.arange(steps).expand(B, steps).contiguous(),
            "attention_mask": torch.ones(B, steps, dtype=torch.long)}


def _blip2_inputs(model, cfg, ids, randn):
    """The processor's prompt: one image token per query token, then the text; the image."""
    size = cfg.vision_config.image_size
    image = torch.full((B, cfg.num_query_tokens), cfg.image_token_index)
    return {"pixel_values": randn(B, 3, size, size), "input_ids": torch.cat([image, ids], 1)}


def _florence2_inputs(model, cfg, ids, randn):
    """The processor's prompt: the image's tokens (one per cell of the last stage's grid, stride
    32, plus the pooled one) before the text; the image; the decoder's start."""
    image = torch.full((B, (64 // 32) ** 2 + 1), cfg.image_token_id)
    return {"pixel_values": randn(B, 3, 64, 64), "input_ids": torch.cat([image, ids], 1),
            "decoder_input_ids": torch.full((B, 4), cfg.text_config.decoder_start_token_id)}


def _kosmos2_inputs(model, cfg, ids, randn):
    """The processor's prompt: <s>, <image>, one placeholder per latent query, </image>, the text;
    the mask of the image's positions; the image."""
    n, size = cfg.latent_query_num, cfg.vision_config.image_size
    input_ids = torch.cat([torch.zeros(B, 1, dtype=torch.long), torch.full((B, 1), 4),
                           torch.full((B, n), 5), torch.full((B, 1), 6), ids], 1)
    mask = torch.zeros_like(input_ids, dtype=torch.bool)
    mask[:, 2:2 + n] = True
    return {"pixel_values": randn(B, 3, size, size), "input_ids": input_ids,
            "image_embeds_position_mask": mask, "attention_mask": torch.ones_like(input_ids)}


def _muse_glimmer_assistant_inputs(model, cfg, ids, randn):
    """One drafting block: the anchor and mask tokens' embeddings (block_size), the target's
    hidden states of 8 accepted tokens (its selected layers, concatenated), positions and mask
    spanning both."""
    context, block = 8, cfg.block_size
    return {"noise_embeds": randn(B, block, cfg.hidden_size),
            "context_hidden_states": randn(B, context, cfg.hidden_size * len(cfg.target_layer_ids)),
            "position_ids": torch.arange(context + block).expand(B, -1).contiguous(),
            "attention_mask": torch.ones(B, context + block, dtype=torch.long)}


def _neucodec_inputs(model, cfg, ids, randn):
    """0.08 s of 16 kHz audio (4 frames of the 320x downsampling encoder) and its 50 Hz features
    for the semantic encoder (stacked mel frames, feature_projection_input_dim wide)."""
    hop = 1
    for r in cfg.downsampling_ratios:
        hop *= r
    frames = 4
    return {"input_values": randn(B, 1, frames * hop),
            "input_features": randn(B, frames, cfg.semantic_model_config.feature_projection_input_dim)}


def _pi0_inputs(model, cfg, ids, randn):
    """The processor's prefix (one camera: its image tokens, then the prompt) with its mask and the
    camera mask; the suffix's embeddings (the state token and one per action of the chunk, as
    PI0ForConditionalGeneration embeds noise, state and timestep)."""
    vlm = cfg.vlm_config
    size = vlm.vision_config.image_size
    tokens = (size // vlm.vision_config.patch_size) ** 2
    input_ids = torch.cat([torch.full((B, tokens), vlm.image_token_id), ids], 1)
    return {"action_embeds": randn(B, 1 + cfg.chunk_size, cfg.dit_config.hidden_size), "input_ids": input_ids,
            "pixel_values": randn(B, 1, 3, size, size), "pixel_attention_mask": torch.ones(B, 1, dtype=torch.bool),
            "attention_mask": torch.ones_like(input_ids)}


def _t5gemma2_encoder_inputs(model, cfg, ids, randn):
    """The processor's prompt: <boi>, the image's tokens (mm_tokens_per_image), <eoi>, the text;
    the image."""
    image = torch.tensor([cfg.boi_token_index] + [cfg.image_token_index] * cfg.mm_tokens_per_image
                         + [cfg.eoi_token_index]).expand(B, -1)
    input_ids = torch.cat([image, ids], 1)
    size = cfg.vision_config.image_size
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
            "pixel_values": randn(B, 3, size, size)}


def _xclip_inputs(model, cfg, ids, randn):
    """Texts and a video of num_frames frames (batch, frames, channels, height, width)."""
    size = cfg.vision_config.image_size
    return {"input_ids": ids, "pixel_values": randn(B, cfg.vision_config.num_frames, 3, size, size)}


def _clap_inputs(model, cfg, ids, randn):
    """Texts and their audio's log-mel spectrogram (batch, 1, frames, mel bins): as many frames as
    the spectrogram image's width (spec_size x spec_size / mel bins)."""
    audio = cfg.audio_config
    frames = audio.spec_size * (audio.spec_size // audio.num_mel_bins)
    return {"input_ids": ids, "input_features": randn(B, 1, frames, audio.num_mel_bins)}


def _siglip2_vision_inputs(model, cfg, ids, randn):
    """The processor's patches (flattened, padded to num_patches), their mask and each image's
    patch grid: a 4 x 4 image and a 2 x 4 one (half padding)."""
    n, p = cfg.num_patches, cfg.patch_size
    mask = torch.ones(B, n, dtype=torch.long)
    mask[1, 8:] = 0
    return {"pixel_values": randn(B, n, cfg.num_channels * p * p), "pixel_attention_mask": mask,
            "spatial_shapes": torch.tensor([[4, 4], [2, 4]])}


def _gemma3n_audio_inputs(model, cfg, ids, randn):
    """48 frames of the feature extractor's log-mel features and the padding mask Gemma3nModel
    passes (True where padded: the second clip is 32 frames long)."""
    mask = torch.zeros(B, 48, dtype=torch.bool)
    mask[1, 32:] = True
    return {"audio_mel": randn(B, 48, cfg.input_feat_size), "audio_mel_mask": mask}


def _minicpmv4_7_vision_inputs(model, cfg, ids, randn):
    """The processor's packing: the patches of every image slice side by side in one row
    (1, 3, patch, patches x patch), with each slice's patch grid (4 x 4 and 2 x 4)."""
    p = cfg.patch_size
    sizes = torch.tensor([[4, 4], [2, 4]])
    total = int((sizes[:, 0] * sizes[:, 1]).sum())
    return {"pixel_values": randn(1, cfg.num_channels, p, total * p), "target_sizes": sizes}


RECIPES: dict[str, Recipe] = {
    "cohere_compass_text": Recipe(
        why="rotary parameters are per layer type (checkpoints give one entry per kind of layer)",
        config={"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                                       "mrope_section": [2, 1, 1]}}}),
    "longcat_flash": Recipe(
        why="qk_head_dim is derived (nope + rope dims) before the shrink; zero experts outnumber the shrunk ones",
        config={"qk_head_dim": 16, "zero_expert_num": 2}),
    "mamba2": Recipe(
        why="state-space heads and groups must divide the shrunk expanded width; the time-step rank is a width",
        config={"head_dim": 16, "num_heads": 4, "n_groups": 2, "state_size": 16, "time_step_rank": 2,
                "chunk_size": 8}),
    "zamba2": Recipe(
        why="widths derived from the hidden size in __post_init__ (attention width, Mamba head dim, "
            "kv channels, query groups, hybrid layer ids) are not derived again after the shrink",
        config={"attention_hidden_size": 64, "attention_head_dim": 16, "mamba_headdim": 8, "kv_channels": 8,
                "num_query_groups": 4, "hybrid_layer_ids": [1], "adapter_rank": 8, "mamba_d_state": 16,
                "chunk_size": 8}),
    "blip-2": Recipe(
        why="the Q-Former's cross-attention width is the vision tower's; the prompt holds an image token per query",
        config={"qformer_config.encoder_hidden_size": 32, "vision_config.image_size": 28, "num_query_tokens": 4,
                "image_text_hidden_size": 32, "image_token_index": 120},
        inputs=_blip2_inputs),
    "bridgetower": Recipe(
        why="the vision tower has hidden_size // 64 heads: its width must stay a multiple of 64",
        config={"vision_config.hidden_size": 64, "vision_config.image_size": 32}),
    "decision_transformer": Recipe(
        why="its inputs are a trajectory (states, actions, rewards, returns-to-go, timesteps)",
        config={"max_ep_len": 64}, inputs=_decision_transformer_inputs),
    "efficientnet": Recipe(
        why="the default is B7 (coefficients 2.0 / 3.1 of B0); a narrow B0, its top width "
            "(hidden_dim = 1280 x width), 32 px",
        config={"width_coefficient": 0.25, "depth_coefficient": 1.0, "hidden_dim": 320, "image_size": 32}),
    "florence2": Recipe(
        why="the DaViT stage widths (embed_dim, a list) and their groups are not shrunk; the image token id "
            "is beyond the shrunk vocabulary and the prompt holds one per image feature",
        config={"vision_config.embed_dim": [16, 32, 32, 64], "vision_config.num_groups": [2, 2, 2, 2],
                "vision_config.window_size": 2, "image_token_id": 120},
        inputs=_florence2_inputs),
    "kosmos-2": Recipe(
        why="the prompt holds a placeholder per latent query and their mask (image_embeds_position_mask)",
        config={"vision_config.image_size": 28, "latent_query_num": 4}, inputs=_kosmos2_inputs),
    "muse_glimmer_assistant": Recipe(
        why="a block-diffusion drafter: its inputs are the block's noise embeddings and the target "
            "model's hidden states of its selected layers (of a two-layer target)",
        config={"target_layer_ids": [0, 1], "block_size": 4, "mask_token_id": 120},
        inputs=_muse_glimmer_assistant_inputs),
    "neucodec": Recipe(
        why="the acoustic encoder doubles its width per downsampling stage from encoder_hidden_size (not "
            "shrunk, 48 -> 1536), the quantizer spans both encoders (2 x 32); waveform and features in",
        config={"encoder_hidden_size": 2, "quantization_dim": 64}, inputs=_neucodec_inputs),
    "pi0": Recipe(
        why="inputs are a camera image with its prompt and the action expert's embedded suffix; the image "
            "token id is beyond the shrunk vocabulary",
        config={"vlm_config.image_token_id": 120, "vlm_config.vision_config.image_size": 28, "chunk_size": 4},
        inputs=_pi0_inputs),
    "pp_doclayout_v3": Recipe(
        why="the HGNetV2 backbone's stage channels and the hybrid encoder's widths (which must equal them) "
            "are not shrunk together; a 64 px page",
        config={"backbone_config.stem_channels": [3, 16, 16], "backbone_config.stage_in_channels": [16, 32, 64, 128],
                "backbone_config.stage_mid_channels": [16, 16, 32, 64],
                "backbone_config.stage_out_channels": [32, 64, 128, 256],
                "backbone_config.hidden_sizes": [32, 64, 128, 256], "backbone_config.embedding_size": 16,
                "backbone_config.stage_numb_of_layers": [2, 2, 2, 2], "backbone_config.stage_num_blocks": [1, 1, 1, 1],
                "encoder_in_channels": [64, 128, 256], "encoder_hidden_dim": 32, "decoder_in_channels": [32, 32, 32],
                "mask_feature_channels": [32, 32], "num_queries": 10, "global_pointer_head_size": 16,
                "x4_feat_dim": 32},
        inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 64, 64)}),
    "sam2_hiera_det_model": Recipe(
        why="the Hiera stage widths start at hidden_size (the first stage's width), global-attention blocks "
            "index the full depth (one inside the third stage, as in the checkpoints); a 64 px image",
        config={"hidden_size": 16, "embed_dim_per_stage": [16, 32, 64, 128], "blocks_per_stage": [1, 1, 2, 1],
                "global_attention_blocks": [3],
                "image_size": [64, 64]}),
    "sapiens2": Recipe(
        why="per-layer key/value heads and the output stage are lists for the full depth (24 layers), "
            "derived before the shrink",
        config={"num_key_value_heads_per_layer": [4, 2], "num_key_value_attention_heads": 2,
                "num_first_full_attention_layers": 1, "num_last_full_attention_layers": 0,
                "stage_names": ["stem", "stage1", "stage2"], "out_features": ["stage2"], "out_indices": [2],
                "image_size": 64}),
    "t5gemma2_encoder": Recipe(
        why="the text config's dropout_rate is set by the composite T5Gemma2 config (checkpoints store it); "
            "image special tokens beyond the shrunk vocabulary; image tokens per image a square of a "
            "divisor of the patch grid",
        config={"text_config.dropout_rate": 0.0, "image_token_index": 120, "boi_token_index": 121,
                "eoi_token_index": 122, "mm_tokens_per_image": 4, "vision_config.image_size": 64},
        inputs=_t5gemma2_encoder_inputs),
    "vision-text-dual-encoder": Recipe(
        why="the ViT tower's pooler width (pooler_output_size) is the projection's input: the shrunk hidden size",
        config={"vision_config.pooler_output_size": 32, "vision_config.image_size": 32}),
    "xclip": Recipe(
        why="its image input is a video (batch, frames, ...); the MIT and prompt widths and heads are not shrunk",
        config={"vision_config.mit_hidden_size": 32, "vision_config.mit_num_attention_heads": 4,
                "prompt_num_attention_heads": 4, "vision_config.num_frames": 4, "vision_config.image_size": 64},
        inputs=_xclip_inputs),
    "axk1": Recipe(
        why="qk_head_dim is derived (nope + rope dims) before the shrink; per-layer MLP kinds and expert "
            "groups are for the full model",
        config={"qk_head_dim": 16, "mlp_layer_types": ["dense", "sparse"], "n_group": 2, "topk_group": 1}),
    "lfm2_moe": Recipe(
        why="checkpoints list the layer kinds (short convolutions and attention); the dense-layer count "
            "covers the shrunk depth (no expert layer left)",
        config={"layer_types": ["conv", "full_attention"], "num_dense_layers": 1}),
    "qwen4_exp": Recipe(
        why="the QSA token indexer's sizes are left None by the class (checkpoints set them); linear-attention "
            "heads, the hyper-connection rank and the vision output width are not shrunk",
        config={"text_config.indexer_n_heads": 2, "text_config.indexer_kv_heads": 1,
                "text_config.indexer_head_dim": 8, "text_config.indexer_budget": 4,
                "text_config.indexer_compress_ratio": 2, "text_config.hc_lowrank": 16,
                "text_config.linear_key_head_dim": 8, "text_config.linear_value_head_dim": 8,
                "text_config.linear_num_key_heads": 2, "text_config.linear_num_value_heads": 4,
                "vision_config.out_hidden_size": 32}),
    "granitemoehybrid": Recipe(
        why="checkpoints interleave Mamba-2 and attention layers (the class default is all Mamba); Mamba heads "
            "must span the shrunk expanded width",
        config={"layer_types": ["linear_attention", "full_attention"], "mamba_n_heads": 4, "mamba_d_head": 16,
                "mamba_d_state": 16, "mamba_chunk_size": 8}),
    "audio-spectrogram-transformer": Recipe(
        why="its input is a (frames, mel bins) spectrogram of max_length frames; a short one (64 x 32)",
        config={"max_length": 64, "num_mel_bins": 32},
        inputs=lambda model, cfg, ids, randn: {"input_values": randn(B, cfg.max_length, cfg.num_mel_bins)}),
    "clap": Recipe(
        why="its audio input is a spectrogram image the Swin tower reshapes to spec_size (64: windows of 2 fit "
            "its last stage); its width (patch_embeds_hidden_size, x8 = hidden_size) and heads are not shrunk",
        config={"audio_config.spec_size": 64, "audio_config.window_size": 2, "audio_config.patch_embeds_hidden_size": 4,
                "audio_config.num_attention_heads": [2, 2, 2, 2]},
        inputs=_clap_inputs),
    "csm": Recipe(
        why="the codec's first width (x16 = its hidden size) and upsampling groups are not shrunk; the depth "
            "decoder's backbone width, text vocabulary, codebook count, audio token ids are the full model's",
        config={"codec_config.upsample_groups": 32, "codec_config.num_filters": 2, "codec_config.num_quantizers": 4,
                "codec_config.codebook_size": 128, "codec_config.codebook_dim": 32,
                "codec_config.vector_quantization_hidden_dimension": 32,
                "depth_decoder_config.backbone_hidden_size": 32, "depth_decoder_config.num_codebooks": 4,
                "num_codebooks": 4, "text_vocab_size": 128, "audio_token_id": 126, "audio_eos_token_id": 127,
                "codebook_pad_token_id": 127}),
    "mimi_decoder": Recipe(
        why="its input is the codec's latents (batch, hidden, frames); its first width (x16 = hidden size) and "
            "upsampling groups (its width) are not shrunk",
        config={"upsample_groups": 32, "num_filters": 2},
        inputs=lambda model, cfg, ids, randn: {"latents": randn(B, cfg.hidden_size, 4)}),
    "esm": Recipe(
        why="the vocabulary and special tokens are left None by the class (ESM-2 checkpoints: 33 tokens, "
            "rotary positions, no embedding layer norm)",
        config={"vocab_size": 33, "pad_token_id": 1, "mask_token_id": 32, "emb_layer_norm_before": False,
                "position_embedding_type": "rotary"}),
    "siglip2_vision_model": Recipe(
        why="its inputs are the processor's flattened patches with their mask and per-image patch grid",
        config={"num_patches": 16}, inputs=_siglip2_vision_inputs),
    "tvp": Recipe(
        why="its input is a video and a query: 2 small frames, a narrower frame-pad prompt; one video (its "
            "column position embeddings are viewed with the batch size: only a batch of one fits)",
        config={"num_frames": 2, "max_img_size": 64, "visual_prompt_size": 8},
        inputs=lambda model, cfg, ids, randn: {
            "input_ids": ids[:1], "pixel_values": randn(1, cfg.num_frames, 3, cfg.max_img_size, cfg.max_img_size),
            "attention_mask": torch.ones_like(ids[:1])}),
    "depth_pro": Recipe(
        why="the patch size (the DINOv2 encoders' image size), the hooked layers and the feature and fusion widths "
            "are for the full model; a 64 px image, its smallest scale (1/4) one 16 px patch",
        config={"patch_size": 16, "intermediate_hook_ids": [1, 0], "intermediate_feature_dims": [32, 32],
                "scaled_images_feature_dims": [32, 32, 32], "fusion_hidden_size": 32,
                **{f"{m}.{k}": v for m in ("image_model_config", "patch_model_config", "fov_model_config")
                   for k, v in (("image_size", 16), ("patch_size", 8), ("out_indices", [2]),
                                ("out_features", ["stage2"]), ("stage_names", ["stem", "stage1", "stage2"]))}},
        inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 64, 64)}),
    "gemma3n_audio": Recipe(
        why="its inputs are (frames, mel bins) features with a padding mask; the conformer's depth and heads "
            "(conf_ fields) are not shrunk",
        config={"conf_num_hidden_layers": 2, "conf_num_attention_heads": 4}, inputs=_gemma3n_audio_inputs),
    "minicpmv4_7_vision": Recipe(
        why="its input is the processor's packed row of patches with each slice's patch grid; the window "
            "merger's layer index is for the full depth",
        config={"insert_layer_id": 0, "image_size": 64}, inputs=_minicpmv4_7_vision_inputs),
    "rf_detr": Recipe(
        why="the windowed DINOv2 backbone's output stages and window blocks index its full depth (the projector "
            "takes one map per output stage); decoder heads and queries are for the full width; a 56 px image",
        config={"backbone_config.num_hidden_layers": 4, "backbone_config.stage_names": [
                    "stem", "stage1", "stage2", "stage3", "stage4"],
                "backbone_config.out_features": ["stage2", "stage4"], "backbone_config.out_indices": [2, 4],
                "backbone_config.window_block_indexes": [0, 2], "backbone_config.image_size": 56,
                "decoder_cross_attention_heads": 4, "decoder_self_attention_heads": 4, "num_queries": 10},
        inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 56, 56)}),
    "sam3": Recipe(
        why="SAM 3 detects what a text prompt names (input_ids with the image); image, FPN feature sizes and "
            "windows must agree (set for 56 px)",
        config={"vision_config.backbone_config.image_size": 56, "vision_config.backbone_config.pretrain_image_size": 56,
                "vision_config.backbone_config.window_size": 2,
                "vision_config.backbone_config.global_attn_indexes": [1],
                "vision_config.backbone_feature_sizes": [[16, 16], [8, 8], [4, 4]], "vision_config.fpn_hidden_size": 32,
                "detr_decoder_config.num_queries": 16},
        inputs=lambda model, cfg, ids, randn: {"pixel_values": randn(B, 3, 56, 56), "input_ids": ids,
                                               "attention_mask": torch.ones_like(ids)}),
    "pe_audio": Recipe(
        why="the DAC encoder doubles its width per stage from encoder_hidden_size (not shrunk: 64 -> 1024); "
            "its output width is the DAC hidden size (2 x 16 = 32); texts and 4 frames of 16 kHz audio",
        config={"audio_config.dac_config.encoder_hidden_size": 2},
        inputs=lambda model, cfg, ids, randn: {"input_ids": ids, "input_values": randn(B, 1, 4 * 1920),
                                               "attention_mask": torch.ones_like(ids)}),
    "vibevoice_acoustic_tokenizer_encoder": Recipe(
        why="the encoder doubles its width per downsampling stage from num_filters (not shrunk: 32 -> 2048); "
            "its waveform input is named hidden_states: 2 frames of 24 kHz audio (hop 3200)",
        config={"num_filters": 2},
        inputs=lambda model, cfg, ids, randn: {"hidden_states": randn(B, 1, 2 * 3200)}),
    "vibevoice": Recipe(
        why="the acoustic and semantic tokenizers double their width per stage from num_filters (not shrunk); "
            "the diffusion head's latent is the acoustic latent width; audio token ids beyond the vocabulary",
        config={"audio_config.num_filters": 2, "semantic_model_config.num_filters": 2,
                "diffusion_head_config.latent_size": 32, "audio_bos_token_id": 125, "audio_eos_token_id": 126,
                "audio_token_id": 127}),
    "inkling_mm_model": Recipe(
        why="the vision tower projects to the text model's width (text_hidden_size, not shrunk with it)",
        config={"vision_config.text_hidden_size": 32}),
    "granite4_vision": Recipe(
        why="the Window Q-Former's downsample rate and the deepstack layer map are left None by the class "
            "(checkpoints set them); the spatial target layers index the full text depth; qformer cross width",
        config={"downsample_rate": "1/2", "deepstack_layer_map": [(0, 0), (1, 1)],
                "spatial_target_layers": [0, 1, 0, 1],
                "qformer_config.encoder_hidden_size": 32, "image_token_index": 120}),
}
