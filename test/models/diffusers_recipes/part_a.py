"""Recipes for the diffusers zoo, part A (see __init__.py for what a recipe may say)."""
from __future__ import annotations

import torch

from . import Recipe

B = 2  # the zoo's batch


def _steps():
    """A timestep per sample, early and late in the schedule."""
    return torch.tensor([10.0, 500.0])


def _omnigen_inputs(model, cfg, randn):
    """The OmniGen processor's sequence: sample 0 embeds a 4x4-patch input image in its prompt,
    sample 1 is a shorter text-only prompt (left-padded); causal text, bidirectional images."""
    from diffusers.pipelines.omnigen.processor_omnigen import OmniGenCollator

    g = torch.Generator().manual_seed(0)
    c, p = cfg["in_channels"], cfg["patch_size"]
    image_tokens = (8 // p) ** 2
    prompts = [{"input_ids": torch.randint(3, 1000, (24,), generator=g).tolist(), "pixel_values": [randn(c, 8, 8)],
                "image_sizes": [[4, 4 + image_tokens]]},
               {"input_ids": torch.randint(3, 1000, (10,), generator=g).tolist(), "pixel_values": None}]
    ids, positions, mask, _, latents, sizes = OmniGenCollator(hidden_size=cfg["hidden_size"]).process_mllm_input(
        prompts, [(16 * 8, 16 * 8)] * B)
    return {"hidden_states": randn(B, c, 16, 16), "timestep": torch.tensor([0.1, 0.6]), "input_ids": ids,
            "input_img_latents": latents, "input_image_sizes": sizes, "attention_mask": mask,
            "position_ids": positions, "return_dict": False}


def _glm_image_inputs(model, cfg, randn):
    """Latents, glyph embeddings, one prior-VQ token per latent patch (dropped for the second,
    unconditional sample, as in the pipeline's guidance), target size and crop."""
    g = torch.Generator().manual_seed(0)
    tokens = (16 // cfg["patch_size"]) ** 2
    drop = torch.zeros(B, tokens, dtype=torch.bool)
    drop[1] = True
    return {"hidden_states": randn(B, cfg["in_channels"], 16, 16),
            "encoder_hidden_states": randn(B, 8, cfg["text_embed_dim"]),
            "prior_token_id": torch.randint(0, cfg["prior_vq_quantizer_codebook_size"], (B, tokens), generator=g),
            "prior_token_drop": drop, "timestep": _steps(), "target_size": torch.tensor([[128.0, 128.0]] * B),
            "crop_coords": torch.zeros(B, 2), "return_dict": False}


def _kandinsky5_inputs(model, cfg, randn):
    """Channels-last video latents (b, frames, h, w, c), Qwen text and CLIP pooled embeddings, and
    the rotary positions the pipeline builds (frames, latent rows / 2, latent columns / 2; text)."""
    frames, side, text = 2, 8, 8
    return {"hidden_states": randn(B, frames, side, side, cfg["in_visual_dim"]),
            "encoder_hidden_states": randn(B, text, cfg["in_text_dim"]), "timestep": torch.tensor([0.2, 0.9]),
            "pooled_projections": randn(B, cfg["in_text_dim2"]),
            "visual_rope_pos": [torch.arange(frames), torch.arange(side // 2), torch.arange(side // 2)],
            "text_rope_pos": torch.arange(text)}


def _sana_wm_refiner_inputs(model, cfg, randn):
    """One window of packed latent tokens (2 frames of 4x4, patch 1), a per-token timestep, and the
    rotary embedding the refiner pipeline builds with the model's own helper."""
    frames, side = 2, 4
    tokens = frames * side * side
    rotary = model.build_rotary_emb_for_absolute_positions(
        batch_size=B, frame_positions=list(range(frames)), height=side, width=side, device="cpu", fps=24.0)
    sigmas = torch.tensor([0.3, 0.8])[:, None].expand(B, tokens) * cfg["timestep_scale_multiplier"]
    return {"hidden_states": randn(B, tokens, cfg["in_channels"]),
            "encoder_hidden_states": randn(B, 8, cfg["caption_channels"]),
            "timestep": sigmas.contiguous(), "video_rotary_emb": rotary,
            "encoder_attention_mask": torch.tensor([[1] * 8, [1] * 6 + [0] * 2]), "return_dict": False}


def _wan_animate_2_inputs(model, cfg, randn):
    """The reference pass ("extract"): per-sample reference latents and their condition latents
    (together in_dim channels), per-sample text of its own length, CLIP image tokens, a fresh
    per-layer K/V cache and the reference grid that places the reference's rotary offsets."""
    from diffusers.models.transformers.transformer_wan_animate_2 import WanAnimate2KVCache

    frames, side = 2, 8
    c = cfg["out_dim"]
    grid = [frames, side // cfg["patch_size"][1], side // cfg["patch_size"][2]]
    return {"hidden_states": [randn(c, frames, side, side) for _ in range(B)],
            "timestep": torch.tensor([500.0, 500.0]),
            "encoder_hidden_states": [randn(8, cfg["text_dim"]), randn(6, cfg["text_dim"])],
            "condition_latents": [randn(cfg["in_dim"] - c, frames, side, side) for _ in range(B)],
            "kv_cache": WanAnimate2KVCache(cfg["num_layers"]), "kv_cache_mode": "extract",
            "seq_len": grid[0] * grid[1] * grid[2], "encoder_hidden_states_image": randn(B, 257, 1280),
            "offset_grid_sizes": torch.tensor([grid] * B), "return_dict": False}


def _minimax_h3_inputs(model, cfg, randn):
    """One packed document shared by the batch: 8 text rows, a clean conditioning video frame and
    a noisy target frame (4x4 patches each), 4 audio rows; two distinct timesteps (0 for text and
    the conditioning frame, 0.7 for the targets) and the (t, h, w) rotary grid of every row."""
    text, side, audio = 8, 4, 4
    frame = side * side
    rows = text + 2 * frame + audio
    tags = torch.tensor([1] * text + [0] * 2 * frame + [2] * audio)
    step = torch.tensor([0] * (text + frame) + [1] * (frame + audio))
    hw = torch.stack(torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij"), -1).reshape(frame, 2)
    positions = torch.cat([
        torch.stack([torch.arange(text), torch.zeros(text, dtype=torch.long), torch.zeros(text, dtype=torch.long)], -1),
        torch.cat([torch.full((frame, 1), text), hw], -1), torch.cat([torch.full((frame, 1), text + 1), hw], -1),
        torch.stack([text + 2 + torch.arange(audio), torch.zeros(audio, dtype=torch.long),
                     torch.zeros(audio, dtype=torch.long)], -1)])
    patch = cfg["in_channels"] * cfg["patch_size"][0] * cfg["patch_size"][1] * cfg["patch_size"][2]
    return {"hidden_states": randn(B, 2 * frame, patch),
            "audio_hidden_states": randn(B, audio, cfg["audio_in_channels"]),
            "encoder_hidden_states": randn(B, text, cfg["text_dim"]), "timestep": torch.tensor([0.0, 0.7]),
            "timestep_indices": step, "token_tags": tags, "position_ids": positions,
            "video_indices": torch.arange(text, text + 2 * frame), "audio_indices": torch.arange(rows - audio, rows),
            "text_indices": torch.arange(text), "return_dict": False}


def _rfd4_tables(n_residue_types=147, num_token_types=7):
    """The two chemistry tables a checkpoint config carries, in their shapes: the atom37 slots each
    residue type occupies (backbone N, CA, C, O plus a side chain of its own length) and the residue
    types each token type may decode to (contiguous blocks of the vocabulary; 0, the mask token, for none)."""
    atom37 = [[slot < 4 + r % 11 for slot in range(37)] for r in range(n_residue_types)]
    block = (n_residue_types - 1) // num_token_types
    allowed = [[1 + t * block <= r < 1 + (t + 1) * block for r in range(n_residue_types)]
               for t in range(num_token_types)]
    return {"atom37_mask": atom37, "allowed_residue_types": allowed}


def _rfd4_inputs(model, cfg, randn):
    """What the pipeline decodes: local latents and CA coordinates (nm) per token, the padding
    (the second molecule is 2 tokens shorter), token types, and the sequence condition (0: free)."""
    g = torch.Generator().manual_seed(0)
    tokens = 12
    padding = torch.ones(B, tokens, dtype=torch.bool)
    padding[1, -2:] = False
    sequence = torch.randint(1, 1 + (cfg["n_residue_types"] - 1) // cfg["num_token_types"], (B, tokens), generator=g)
    sequence[:, ::3] = 0
    return {"z_latent": randn(B, tokens, cfg["latent_dim"]), "ca_coors_nm": randn(B, tokens, 3),
            "padding_mask": padding, "token_type": torch.zeros(B, tokens, dtype=torch.long),
            "conditioning": {"is_in_context_conditioning": torch.zeros(B, tokens, dtype=torch.bool),
                             "supports_local_latent": padding.clone(), "condition_sequence_1_residue": sequence},
            "return_dict": False}


RECIPES = {
    "CLIPImageProjection": Recipe(
        "projects a CLIP image embedding of hidden_size (the generic inputs are latents)",
        inputs=lambda m, cfg, randn: {"x": randn(B, 1, cfg["hidden_size"])}),
    "Ideogram4PromptEnhancerHead": Recipe(
        "an LM head over text-encoder hidden states of hidden_size",
        inputs=lambda m, cfg, randn: {"hidden_states": randn(B, 8, cfg["hidden_size"])}),
    "StableAudio3DurationEmbedder": Recipe(
        "embeds one duration in seconds per sample (the generic inputs are latents)",
        inputs=lambda m, cfg, randn: {"seconds": torch.tensor([10.0, 47.5])}),
    "UNet1DModel": Recipe(
        "Dance Diffusion concatenates a 16-wide Fourier time embedding to the (b, 2, length) waveform",
        config={"extra_in_channels": 16, "time_embedding_dim": 16},
        inputs=lambda m, cfg, randn: {"sample": randn(B, cfg["in_channels"], 64), "timestep": _steps(),
                                      "return_dict": False}),
    "AceStepAudioTokenDetokenizer": Recipe(
        "expands (b, tokens, hidden_size) quantized audio tokens (the generic inputs are latents)",
        inputs=lambda m, cfg, randn: {"hidden_states": randn(B, 4, cfg["hidden_size"])}),
    "MiniMaxMusic3ConditionEncoder": Recipe(
        "per-frame hidden states of every condition layer, concatenated: (b, frames, layers * width)",
        inputs=lambda m, cfg, randn: {"hidden_states": randn(
            B, 8, cfg["num_condition_layers"] * cfg["condition_hidden_dim"])}),
    "T5FilmDecoder": Recipe(
        "spectrogram diffusion: note and context encodings with masks, mel frames and a noise time in [0, 1)",
        inputs=lambda m, cfg, randn: {
            "encodings_and_masks": [(randn(B, 8, cfg["d_model"]), torch.ones(B, 8, dtype=torch.bool)),
                                    (randn(B, 16, cfg["d_model"]), torch.ones(B, 16, dtype=torch.bool))],
            "decoder_input_tokens": randn(B, 16, cfg["input_dims"]),
            "decoder_noise_time": torch.tensor([0.1, 0.7])}),
    "AudioLDM2ProjectionModel": Recipe(
        "the three widths are required (CLAP, T5, GPT-2); inputs are the CLAP and T5 embeddings with masks",
        config={"text_encoder_dim": 32, "text_encoder_1_dim": 32, "langauge_model_dim": 32},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, 1, cfg["text_encoder_dim"]),
            "hidden_states_1": randn(B, 8, cfg["text_encoder_1_dim"]),
            "attention_mask": torch.ones(B, 1, dtype=torch.long),
            "attention_mask_1": torch.tensor([[1] * 8, [1] * 5 + [0] * 3])}),
    "AutoencoderKLWan": Recipe(
        "the Wan 2.1 VAE patchifies nothing (patch_size None, the generic rule sets 2); video of 1 + 4k frames",
        config={"patch_size": None},
        inputs=lambda m, cfg, randn: {"sample": randn(B, cfg["in_channels"], 5, 16, 16), "return_dict": False}),
    "AutoencoderKLLTX2Video": Recipe(
        "decoder widths halve per upsampler as in checkpoints; 1 + 8k frames, two latents a side",
        config={"decoder_block_out_channels": (8, 16, 32)},
        inputs=lambda m, cfg, randn: {"sample": randn(B, cfg["in_channels"], 9, 64, 64), "return_dict": False}),
    "AutoencoderOobleck": Recipe(
        "the encoder's width holds the latent's mean and scale (2x the decoder input); a waveform of two hops",
        config={"decoder_input_channels": 16},
        inputs=lambda m, cfg, randn: {"sample": randn(B, cfg["audio_channels"], 4096), "return_dict": False}),
    "AutoencoderKLKVAEAudio": Recipe(
        "latent and codebook widths, the encoder's base width (doubled per stage) shrunk; two hops of waveform",
        config={"latent_dim": 64, "codebook_dim": 16, "encoder_dim": 8, "decoder_dim": 64},
        inputs=lambda m, cfg, randn: {"sample": randn(B, cfg["num_channels"], 2 * 960), "return_dict": False}),
    "LatteTransformer3DModel": Recipe(
        "Latte checkpoints: AdaLN-single over T5 captions (caption_channels set), a learned sigma; video_length frames",
        config={"norm_type": "ada_norm_single", "num_embeds_ada_norm": 1000, "caption_channels": 32,
                "cross_attention_dim": 32, "out_channels": 8, "norm_elementwise_affine": False,
                "activation_fn": "gelu-approximate", "attention_bias": True},
        inputs=lambda m, cfg, randn: {"hidden_states": randn(B, cfg["in_channels"], cfg["video_length"], 8, 8),
                                      "timestep": _steps(),
                                      "encoder_hidden_states": randn(B, 8, cfg["caption_channels"]),
                                      "return_dict": False}),
    "WanVACETransformer3DModel": Recipe(
        "the VACE layer list fits the one transformer layer; control latents and one scale per VACE layer",
        config={"vace_layers": [0]},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, cfg["in_channels"], 2, 8, 8), "timestep": _steps(),
            "encoder_hidden_states": randn(B, 8, cfg["text_dim"]),
            "control_hidden_states": randn(B, cfg["vace_in_channels"], 2, 8, 8),
            "control_hidden_states_scale": torch.tensor([0.8]), "return_dict": False}),
    "OmniGenTransformer2DModel": Recipe(
        "the Phi-3 rotary scaling factors checkpoints set (one per rotary frequency); the processor's inputs",
        config={"rope_scaling": {"short_factor": [1.0] * 8, "long_factor": [1.0 + i / 4 for i in range(8)]}},
        inputs=_omnigen_inputs),
    "HunyuanDiT2DControlNetModel": Recipe(
        "the ControlNet copies transformer_num_layers // 2 - 1 blocks: one layer leaves none to output",
        config={"transformer_num_layers": 4}),
    "I2VGenXLUNet": Recipe(
        "the pipeline always passes the CLIP image embedding (optional in the signature, read unconditionally)",
        inputs=lambda m, cfg, randn: {
            "sample": randn(B, cfg["in_channels"], 2, 16, 16), "timestep": _steps(), "fps": torch.tensor([16, 16]),
            "image_latents": randn(B, cfg["in_channels"], 2, 16, 16),
            "image_embeddings": randn(B, cfg["cross_attention_dim"]),
            "encoder_hidden_states": randn(B, 8, cfg["cross_attention_dim"]), "return_dict": False}),
    "GlmImageTransformer2DModel": Recipe(
        "the prior-VQ token ids and their drop mask are required (one per latent patch)",
        inputs=_glm_image_inputs),
    "Kandinsky5Transformer3DModel": Recipe(
        "channels-last latents and the rotary positions the pipeline builds",
        inputs=_kandinsky5_inputs),
    "AceStepTransformer1DModel": Recipe(
        "in_channels is the latent plus its context (source latents and chunk masks, twice as wide)",
        config={"audio_acoustic_hidden_dim": 16, "in_channels": 48},
        inputs=lambda m, cfg, randn: {
            "hidden_states": randn(B, 10, cfg["audio_acoustic_hidden_dim"]), "timestep": torch.tensor([0.3, 0.8]),
            "timestep_r": torch.tensor([0.3, 0.8]), "encoder_hidden_states": randn(B, 8, cfg["hidden_size"]),
            "context_latents": randn(B, 10, cfg["in_channels"] - cfg["audio_acoustic_hidden_dim"]),
            "return_dict": False}),
    "Kandinsky6SRLatentUpscalerBank": Recipe(
        "the pipeline picks the upscaler by its integer scale; K-VAE video latents",
        inputs=lambda m, cfg, randn: {"latents": randn(B, cfg["in_channels"], 2, 8, 8), "scale": 2,
                                      "return_dict": False}),
    "SanaWMLTX2RefinerTransformer3DModel": Recipe(
        "the rotary embedding is an input, built by the model's helper as the refiner pipeline does",
        inputs=_sana_wm_refiner_inputs),
    "WanAnimate2Transformer3DModel": Recipe(
        "the reference pass: list inputs per sample, a K/V cache to fill and the reference grid",
        inputs=_wan_animate_2_inputs),
    "MiniMaxH3Transformer3DModel": Recipe(
        "3 x rope_freq_dim x 2 rotated channels must fit the head; the caller packs rows, tags and grid",
        config={"rope_freq_dim": 2},
        inputs=_minimax_h3_inputs),
    "RFD4ProteinaAutoencoder": Recipe(
        "the atom37 and residue-type tables are required config; one trunk layer; the pipeline's decode inputs",
        config={"nlayers": 1, **_rfd4_tables()},
        inputs=_rfd4_inputs),
}
