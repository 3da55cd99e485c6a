#!/usr/bin/env bash
# Configures, builds and runs the linear_tpu LibTorch example against the installed torchtpu.
# Works from any directory. Override the interpreter with PYTHON=/path/to/python.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
PY="${PYTHON:-python}"

# Autoload off for the torch query: it must not depend on any backend plugin importing cleanly.
TORCH_PREFIX="$(TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
TORCHTPU_PREFIX="$("$PY" -c 'import torchtpu; print(torchtpu.cmake_prefix_path())')"

start_ns=$(date +%s%N)
cmake -S . -B build -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="${TORCH_PREFIX};${TORCHTPU_PREFIX}"
cmake --build build
elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
printf 'run.sh: configure+build took %d.%03d s\n' $((elapsed_ms / 1000)) $((elapsed_ms % 1000))

./build/linear_tpu
./build/device_only
