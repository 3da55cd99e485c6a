#!/usr/bin/env bash
# Every long sweep of issue #5, one after the other: the OpInfo sweep (docs/coverage.md) and the
# transformers model-zoo sweep (docs/models.md), each in strict and in fused eager, sharded over
# the cores. About 41 minutes on 2 cores (9 + 32).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
bash scripts/opinfo_sweep.sh || status=1
bash scripts/zoo_sweep.sh || status=1
exit $status
