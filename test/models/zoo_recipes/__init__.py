"""Per-type recipes of the transformers zoo (test/models/zoo.py), for the model types whose
defaults the generic shrink and input rules cannot turn into a model that runs on the CPU.

A recipe says what a checkpoint and a processor would give the model, nothing more:
  config:      attributes set after the generic shrink (in both its passes), by dotted path
               ("vision_config.image_size": 32): a field a checkpoint sets that the class leaves
               None, widths that must agree with each other, sizes a processor pads to, ...;
  adjust:      a function (cfg) -> None for what a fixed value cannot say (a field derived from
               the shrunk ones), run after `config`;
  inputs:      a function (model, cfg, ids, randn) -> the keyword inputs a processor would give
               forward (ids: the zoo's (2, 8) token ids; randn(*shape) draws from a seeded
               generator), tried before the generic input candidates;
  model_class: the name of a transformers class of the same model type, built instead of the
               auto mapping's class (only where that class cannot run a forward pass itself);
  why:         one line: what the generic rules get wrong for this type.
The recipes live in the part_*.py modules of this package, each a dict RECIPES.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Recipe:
    why: str
    config: dict = field(default_factory=dict)
    adjust: Callable | None = None
    inputs: Callable | None = None
    model_class: str | None = None


def recipes() -> dict[str, Recipe]:
    from recipe_book import gather

    return gather(__name__, __path__)


def apply_config(cfg, recipe: Recipe) -> None:
    """Sets the recipe's attributes (dotted paths into sub-configurations), then runs adjust."""
    for path, value in recipe.config.items():
        *parents, name = path.split(".")
        target = cfg
        for parent in parents:
            target = getattr(target, parent)
        setattr(target, name, value)
    if recipe.adjust is not None:
        recipe.adjust(cfg)
