#!/usr/bin/env bash
# A full model-zoo sweep, each item in its own subprocess (CPU reference once, then "tpu" in each
# mode), one shard per core run side by side; then the zoo's page regenerated from the shards'
# records. Set up first with scripts/setup.sh.
#   ZOO=transformers (default): every model type of transformers' auto mappings, strict and
#     fused eager (32 minutes on 2 cores over the 463 types built before the per-type recipes;
#     585 build now), docs/models.md;
#   ZOO=diffusers: every model class diffusers exports, strict, fused and compiled (about an
#     hour since the recipes build 145 of the 161), docs/diffusers.md (scripts/diffusers_sweep.sh).
# MODES picks the modes ("compiled" is torch.compile(backend="tpu"): forward, backward and a
# capturable AdamW step compiled); REPORT the page written (transformers only); PREFIX the name
# of the shards' records and logs under build/ (default: the zoo's name, "zoo" for transformers).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
SHARDS=${SHARDS:-$(nproc)}
ZOO=${ZOO:-transformers}
if [ "$ZOO" = diffusers ]; then
  script=test/models/diffusers_zoo.py; prefix=${PREFIX:-diffusers}; modes=${MODES:-strict,fused,compiled}
  report=()
else
  script=test/models/zoo.py; prefix=${PREFIX:-zoo}; modes=${MODES:-strict,fused}
  report=(--report-to "${REPORT:-docs/models.md}")
fi
mkdir -p build
pids=()
for ((i = 0; i < SHARDS; i++)); do
  "$PYTHON" "$script" --modes "$modes" --shard "$i/$SHARDS" \
    --out "build/${prefix}_shard$i.jsonl" > "build/${prefix}_shard$i.log" 2>&1 &
  pids+=($!)
done
echo "== $ZOO zoo: $SHARDS shards running (each item in build/${prefix}_shard*.log)"
logs=()
for ((i = 0; i < SHARDS; i++)); do logs+=("build/${prefix}_shard$i.log"); done
"$PYTHON" tools/sweep_progress.py --label "$ZOO zoo ($modes)" --every 30 \
  --pids "$(IFS=,; echo "${pids[*]}")" "${logs[@]}"
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
"$PYTHON" "$script" --report build/${prefix}_shard*.jsonl "${report[@]}" || status=1
exit $status
