#!/usr/bin/env bash
# The full transformers model-zoo sweep: every model type of transformers' auto mappings, each in
# its own subprocess (CPU reference once, then "tpu" in strict and in fused eager), in one shard
# per core run side by side; then docs/models.md regenerated from the shards' records.
# About 32 minutes on 2 cores. Set up first with scripts/setup.sh.
# MODES picks the modes (default strict,fused; "compiled" is torch.compile(backend="tpu"): forward,
# backward and a capturable AdamW step compiled); REPORT the page written (default docs/models.md).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
SHARDS=${SHARDS:-$(nproc)}
mkdir -p build
pids=()
for ((i = 0; i < SHARDS; i++)); do
  "$PYTHON" test/models/zoo.py --modes "${MODES:-strict,fused}" --shard "$i/$SHARDS" \
    --out "build/zoo_shard$i.jsonl" > "build/zoo_shard$i.log" 2>&1 &
  pids+=($!)
done
echo "== model zoo: $SHARDS shards running (each item in build/zoo_shard*.log)"
logs=()
for ((i = 0; i < SHARDS; i++)); do logs+=("build/zoo_shard$i.log"); done
"$PYTHON" tools/sweep_progress.py --label "model zoo (${MODES:-strict,fused})" --every 30 \
  --pids "$(IFS=,; echo "${pids[*]}")" "${logs[@]}"
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
"$PYTHON" test/models/zoo.py --report build/zoo_shard*.jsonl --report-to "${REPORT:-docs/models.md}" || status=1
exit $status
