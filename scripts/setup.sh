#!/usr/bin/env bash
# Installs everything torchtpu needs on a fresh Debian machine and builds it (editable install).
# Idempotent: a second run only rebuilds what changed (ninja + ccache, build tree in build/cmake).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# System packages: compiler, CMake, ninja, ccache, GoogleTest, spdlog, oneDNN (the simulated
# MXU's bf16 GEMMs, docs/host-speed.md) (Debian's packages).
missing=()
for pkg in g++ cmake ninja-build ccache libgtest-dev libspdlog-dev libdnnl-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" != 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python packages. torch is pinned to the CPU build that this machine serves from local disk;
# nothing below may resolve torch again (hence --no-build-isolation).
if ! "$PYTHON" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
  "$PYTHON" -m pip install -q "torch==2.13.0"
fi
"$PYTHON" -m pip install -q numpy pytest pytest-timeout expecttest matplotlib "transformers==5.24.0" "accelerate==1.15.0" "diffusers==0.42.1" "peft==0.21.2" \
  "marimo==0.25.2" absl-py "tensorboard==2.21.0"  # (marimo, absl, tensorboard: running TorchTPU's notebooks and examples, test/torch_tpu_programs)
# JAX on the CPU: the optional dependency of torchtpu.pallas (Pallas / JAX kernels as ops on "tpu",
# run in Pallas' TPU interpret mode: docs/custom-kernels.md). jax[cpu] does not resolve torch.
"$PYTHON" -m pip install -q "jax[cpu]==0.10.2"

# The build: CMake through setup.py, against the installed torch.
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths under the checkout hashed relative to it: a clone elsewhere (CI's) hits the cache too.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
start=$(date +%s)
"$PYTHON" -m pip install -q --no-build-isolation -e . 
echo "setup: torchtpu built and installed in $(( $(date +%s) - start )) s"
