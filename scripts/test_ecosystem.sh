#!/usr/bin/env bash
# TRL, torchao and Lightning on "tpu" (docs/ecosystem.md "TRL", "torchao"; docs/lightning.md):
# makes the virtual environment they live in (build/venv-rl: it sees the main environment's
# packages, torch, transformers and torchtpu among them, but TRL, torchao, Lightning, datasets and
# what they pull stay inside), then runs test/ecosystem/ in it.
#   bash scripts/test_ecosystem.sh            the whole tier
#   bash scripts/test_ecosystem.sh --smoke    the short cases (GRPO in strict eager, int8 dynamic,
#                                             Lightning's Trainer and Fabric single-device)
# Extra arguments go to pytest. Without a network or PyPI the tier is skipped, not failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${TORCHTPU_RL_VENV:-build/venv-rl}
PACKAGES=("trl==1.16.0" "torchao==0.18.0" "lightning==2.6.6")
start=$(date +%s)

source scripts/lib/library_venv.sh
library_pytest_args "$@"
make_library_venv test_ecosystem.sh "$VENV" "import trl, torchao, datasets, lightning" \
  "${PACKAGES[@]}"
case $? in
  0) ;;
  2) run_library_tests test_ecosystem.sh "$PYTHON" test/ecosystem ;;
  *) exit 1 ;;
esac
run_library_tests test_ecosystem.sh "$VENV/bin/python" test/ecosystem
