"""The recipe loader shared by the two model zoos' recipe packages (diffusers_recipes/ for
test/models/diffusers_zoo.py, zoo_recipes/ for test/models/zoo.py): each package holds
part_*.py modules with a dict RECIPES (name -> recipe), gathered here; a name twice is an error."""
from __future__ import annotations

import importlib
import pkgutil


def gather(package: str, path) -> dict:
    found: dict = {}
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if info.name.startswith("part_"):
            part = importlib.import_module(f"{package}.{info.name}")
            for name, recipe in part.RECIPES.items():
                assert name not in found, f"two recipes for {name}"
                found[name] = recipe
    return found
