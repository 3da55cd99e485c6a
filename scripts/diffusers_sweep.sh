#!/usr/bin/env bash
# The diffusers model-zoo sweep: every model class diffusers exports, each in its own subprocess
# (CPU reference once, then "tpu" in strict eager, fused eager and compiled), in one shard per core
# run side by side; then docs/diffusers.md regenerated from the shards' records. Set up first
# with scripts/setup.sh. MODES picks the modes (default strict,fused,compiled).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
SHARDS=${SHARDS:-$(nproc)}
mkdir -p build
pids=()
for ((i = 0; i < SHARDS; i++)); do
  "$PYTHON" test/models/diffusers_zoo.py --modes "${MODES:-strict,fused,compiled}" --shard "$i/$SHARDS" \
    --out "build/diffusers_shard$i.jsonl" > "build/diffusers_shard$i.log" 2>&1 &
  pids+=($!)
done
echo "== diffusers zoo: $SHARDS shards running (each item in build/diffusers_shard*.log)"
logs=()
for ((i = 0; i < SHARDS; i++)); do logs+=("build/diffusers_shard$i.log"); done
"$PYTHON" tools/sweep_progress.py --label "diffusers zoo (${MODES:-strict,fused,compiled})" --every 60 \
  --pids "$(IFS=,; echo "${pids[*]}")" "${logs[@]}"
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
"$PYTHON" test/models/diffusers_zoo.py --report build/diffusers_shard*.jsonl || status=1
exit $status
