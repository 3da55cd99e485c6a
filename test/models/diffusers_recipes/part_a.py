"""Recipes for the diffusers zoo, part A (see __init__.py for what a recipe may say)."""
from __future__ import annotations

import torch

from . import Recipe

B = 2


def _steps():
    return torch.tensor([10.0, 500.0])


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
}
