"""Recipes for the transformers zoo, part A (see __init__.py for what a recipe may say)."""
from __future__ import annotations

import torch  # noqa: F401  (recipes' input functions build tensors)

from . import Recipe

B = 2  # the zoo's batch

RECIPES: dict[str, Recipe] = {
}
