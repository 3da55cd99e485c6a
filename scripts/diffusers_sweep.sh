#!/usr/bin/env bash
# The diffusers model-zoo sweep (every model class diffusers exports; strict, fused and compiled;
# docs/diffusers.md): scripts/zoo_sweep.sh with ZOO=diffusers. MODES picks the modes.
ZOO=diffusers exec bash "$(dirname "$0")/zoo_sweep.sh" "$@"
