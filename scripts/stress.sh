#!/usr/bin/env bash
# The stress suite (test/stress/stress.py): mixed threaded load on "tpu" in each eager mode --
# threads over every device and stream, producer/consumer streams with events, memory-statistics
# polling, mode switches under running threads, queue-bound loops under a small HBM, SIGINT at
# random points -- every result compared with the CPU, each round under a watchdog.
#   bash scripts/stress.sh              # 10 minutes per mode (STRESS_MINUTES to change)
# scripts/test.sh runs a short tier (one round of each kind per mode).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh
"$PYTHON" test/stress/stress.py --minutes "${STRESS_MINUTES:-10}" --round 30 "$@"
