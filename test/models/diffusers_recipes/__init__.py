"""Per-class recipes of the diffusers zoo (test/models/diffusers_zoo.py), for the classes whose
defaults the generic shrink and input rules cannot turn into a model that runs.

A recipe says what a checkpoint and a pipeline would give the class, nothing more:
  config:  configuration fields set after the generic shrink (a field a checkpoint sets that
           the class leaves None, widths that must agree with each other, a layer list that must
           fit the shrunk depth, ...);
  inputs:  a function (model, cfg, randn) -> the keyword inputs a pipeline passes to forward
           (randn(*shape) draws from the zoo's seeded generator); tried before the generic
           input recipes;
  why:     one line: what the generic rules get wrong for this class.
The recipes live in the part_*.py modules of this package, each a dict RECIPES.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Recipe:
    why: str
    config: dict = field(default_factory=dict)
    inputs: Callable | None = None


def recipes() -> dict[str, Recipe]:
    from recipe_book import gather

    return gather(__name__, __path__)
