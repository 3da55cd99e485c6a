#!/usr/bin/env bash
# The full OpInfo sweep (every OpInfo in PyTorch's op_db, float32 / bfloat16 / int64 / bool),
# in 8 shards, each in its own pytest process, in strict eager and again in fused eager, then
# docs/coverage.md regenerated from the recorded results. About 9 minutes on 2 cores. Set up
# first with scripts/setup.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
mkdir -p build
status=0
start=$(date +%s)
done_shards=0
fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
for mode in strict fused; do
  report=build/opinfo_$mode.jsonl
  rm -f "$report"
  for i in 0 1 2 3 4 5 6 7; do
    elapsed=$(($(date +%s) - start))
    eta=""
    if ((done_shards > 0)); then eta=", ETA $(fmt $((elapsed * (16 - done_shards) / done_shards)))"; fi
    echo "== $mode eager, shard $i/8 ($((done_shards + 1)) of 16, elapsed $(fmt $elapsed)$eta)"
    (cd test/opinfo && TORCHTPU_EAGER_MODE=$mode TORCHTPU_OPINFO_SHARD=$i/8 \
       TORCHTPU_OPINFO_REPORT=../../$report \
       "$PYTHON" -m pytest -q -p no:cacheprovider test_opinfo.py) || status=1
    done_shards=$((done_shards + 1))
  done
done
echo "== OpInfo sweep: 16 shards in $(fmt $(($(date +%s) - start)))"
"$PYTHON" tools/coverage_report.py build/opinfo_strict.jsonl --fused build/opinfo_fused.jsonl
exit $status
