"""Recipes of the diffusers zoo, part C (see __init__.py)."""
from __future__ import annotations

import torch

from . import Recipe


def _anyflow(model, cfg, randn):
    # (batch, frames, channels, height, width) latents; per-frame flow-map timesteps t and r
    return dict(hidden_states=randn(2, 2, 16, 8, 8), timestep=torch.tensor([[900.0, 900.0], [400.0, 400.0]]),
                r_timestep=torch.tensor([[600.0, 600.0], [100.0, 100.0]]), encoder_hidden_states=randn(2, 8, 32),
                return_dict=False)


RECIPES = {
    "AnyFlowTransformer3DModel": Recipe(
        "latents are (batch, frames, channels, h, w) and the timesteps t, r are per frame (batch, frames)",
        inputs=_anyflow),
}
