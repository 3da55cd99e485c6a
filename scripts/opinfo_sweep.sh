#!/usr/bin/env bash
# The full OpInfo sweep (every OpInfo in PyTorch's op_db, float32 / bfloat16 / int64 / bool),
# in 8 shards, each in its own pytest process, then docs/coverage.md regenerated from the
# recorded results. About 20 minutes on 2 cores. Set up first with scripts/setup.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
report=build/opinfo.jsonl
mkdir -p build && rm -f "$report"
status=0
for i in 0 1 2 3 4 5 6 7; do
  echo "== shard $i/8"
  (cd test/opinfo && TORCHTPU_OPINFO_SHARD=$i/8 TORCHTPU_OPINFO_REPORT=../../$report \
     "$PYTHON" -m pytest -q -p no:cacheprovider test_opinfo.py) || status=1
done
"$PYTHON" tools/coverage_report.py "$report"
exit $status
