#!/usr/bin/env bash
# TorchRec on "tpu" (docs/torchrec.md): makes the virtual environment TorchRec lives in
# (build/venv-rec: it sees the main environment's packages, torch and torchtpu among them, but
# TorchRec, fbgemm-gpu-cpu and what they pull stay inside), then runs test/torchrec/ in it.
#   bash scripts/test_torchrec.sh            the whole tier
#   bash scripts/test_torchrec.sh --smoke    the short case: one table-batched lookup, its
#                                            backward and a fused rowwise Adagrad step against
#                                            the CPU
# Extra arguments go to pytest. Without a network or PyPI the tier is skipped, not failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${TORCHTPU_REC_VENV:-build/venv-rec}
# torchrec declares an unpinned `fbgemm-gpu` (the CUDA wheel, built for the newest torch), so it is
# installed without dependencies: fbgemm-gpu-cpu 1.8.0 (built for torch 2.13) in its place, and
# torchrec 1.8.0 (the release made with fbgemm 1.8.0) with its other dependencies named here.
PACKAGES=(--no-deps "fbgemm-gpu-cpu==1.8.0" "torchrec==1.8.0" "tensordict==0.15.3"
          "torchmetrics==1.0.3" "pyre-extensions==0.0.32" "lightning-utilities==0.15.3"
          "pyvers==0.2.3")
start=$(date +%s)

source scripts/lib/library_venv.sh
library_pytest_args "$@"
make_library_venv test_torchrec.sh "$VENV" "import fbgemm_gpu, torchrec" "${PACKAGES[@]}"
case $? in
  0) ;;
  2) run_library_tests test_torchrec.sh "$PYTHON" test/torchrec ;;
  *) exit 1 ;;
esac
run_library_tests test_torchrec.sh "$VENV/bin/python" test/torchrec
