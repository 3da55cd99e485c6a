"""Diffusers zoo recipes, part b: checkpoint fields and pipeline inputs for the classes below."""
from __future__ import annotations

import torch

from . import Recipe

B = 2  # batch


def _ints(high, *shape):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(0))


def _mask(*lengths, total):
    """A padding mask: True for the first `length` tokens of each sample."""
    return torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]


RECIPES = {
    "StableAudioProjectionModel": Recipe(
        why="text width, conditioning width and the seconds range are required (T5 width, DiT width, 0..512 s)",
        config={"text_encoder_dim": 48, "conditioning_dim": 32, "min_value": 0, "max_value": 512},
        inputs=lambda m, cfg, randn: {"text_hidden_states": randn(B, 8, 48),
                                      "start_seconds": torch.tensor([0.0, 5.0]),
                                      "end_seconds": torch.tensor([10.0, 47.0])}),
    "AutoencoderKLHunyuanImage": Recipe(
        why="every architecture field is required; the encoder's last width must be a multiple of 2 * latent",
        config={"in_channels": 3, "out_channels": 3, "latent_channels": 16, "block_out_channels": (32, 64),
                "layers_per_block": 1, "spatial_compression_ratio": 2, "sample_size": 32},
        inputs=lambda m, cfg, randn: {"sample": randn(B, 3, 16, 16), "return_dict": False}),
    "AutoencoderRAE": Recipe(
        why="the encoder's input must be a multiple of its 14-pixel patches and its width of its 64-wide heads",
        config={"encoder_hidden_size": 64, "encoder_input_size": 28},
        inputs=lambda m, cfg, randn: {"sample": randn(B, 3, 32, 32), "return_dict": False}),
    "AceStepConditionEncoder": Recipe(
        why="the forward needs lyrics, their mask and the packed reference-audio latents the pipeline builds",
        inputs=lambda m, cfg, randn: {
            "text_hidden_states": randn(B, 8, cfg["text_hidden_dim"]), "text_attention_mask": _mask(8, 6, total=8),
            "lyric_hidden_states": randn(B, 12, cfg["text_hidden_dim"]),
            "lyric_attention_mask": _mask(12, 9, total=12),
            "refer_audio_acoustic_hidden_states_packed": randn(B, 10, cfg["timbre_hidden_dim"]),
            "refer_audio_order_mask": torch.arange(B)}),
    "AutoencoderKLMagvit": Recipe(
        why="a causal video VAE: videos of 1 + 4k frames (B, C, F, H, W), not images",
        inputs=lambda m, cfg, randn: {"sample": randn(B, 3, 5, 32, 32), "return_dict": False}),
}
