#!/usr/bin/env bash
# The main job: sets up (scripts/setup.sh), then trains a small character-level transformer on
# the simulated "tpu" device and prints its report. Extra arguments go to examples/train.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh
exec "$PYTHON" examples/train.py "$@"
