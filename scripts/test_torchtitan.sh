#!/usr/bin/env bash
# TorchTitan on "tpu" (docs/ecosystem.md "TorchTitan"): makes the virtual environment TorchTitan
# lives in (build/venv-titan: it sees the main environment's packages, torch and torchtpu among
# them, but TorchTitan, triton, datasets, wandb and what they pull stay inside), then runs
# test/torchtitan/ in it.
#   bash scripts/test_torchtitan.sh            the whole tier (6 tests)
#   bash scripts/test_torchtitan.sh --smoke    the short case: 1 rank, strict eager, TorchTitan's
#                                              default precision, against the CPU
# Extra arguments go to pytest. Without a network or PyPI the tier is skipped, not failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${TORCHTPU_TITAN_VENV:-build/venv-titan}
# TorchTitan 0.3.0 imports triton (its expert-parallel kernels) whatever the model; CUDA's torch
# wheels bring it, the CPU's do not. triton 3.9.0 is the newest; it needs no torch.
PACKAGES=("torchtitan==0.3.0" "triton==3.9.0")
start=$(date +%s)

source scripts/lib/library_venv.sh
library_pytest_args "$@"
make_library_venv test_torchtitan.sh "$VENV" "import torchtitan.train" "${PACKAGES[@]}"
case $? in
  0) ;;
  2) run_library_tests test_torchtitan.sh "$PYTHON" test/torchtitan ;;
  *) exit 1 ;;
esac
run_library_tests test_torchtitan.sh "$VENV/bin/python" test/torchtitan
