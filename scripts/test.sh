#!/usr/bin/env bash
# The test command: sets up (scripts/setup.sh), then runs the GoogleTest suite through CTest and
# the pytest suite (which also builds and runs the LibTorch C++ example through
# find_package(torchtpu)).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
start=$(date +%s)
bash scripts/setup.sh
echo "== C++ tests (GoogleTest via CTest)"
ctest --test-dir build/cmake --output-on-failure
echo "== Python tests (pytest)"
"$PYTHON" -m pytest -q "$@"
echo "test.sh: everything passed in $(( $(date +%s) - start )) s"
