#!/usr/bin/env bash
# Ray Train on "tpu" (docs/ecosystem.md "Ray"): makes the virtual environment Ray lives in
# (build/venv-ray: it sees the main environment's packages, torch and torchtpu among them, but
# Ray and what it pulls stay inside), then runs test/ray/ in it.
#   bash scripts/test_ray.sh            the whole tier (5 tests)
#   bash scripts/test_ray.sh --smoke    the short case: examples/ray_train.py, 4 steps, strict eager
# Extra arguments go to pytest. Without a network or PyPI the tier is skipped, not failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${TORCHTPU_RAY_VENV:-build/venv-ray}
RAY_VERSION=2.60.0
start=$(date +%s)

source scripts/lib/library_venv.sh
library_pytest_args "$@"
make_library_venv test_ray.sh "$VENV" "import ray.train.torch" "ray[train]==$RAY_VERSION"
case $? in
  0) ;;
  2) run_library_tests test_ray.sh "$PYTHON" test/ray ;;
  *) exit 1 ;;
esac
# Ray Train finds TorchTPU as the module torch_tpu: torchtpu's TorchTPU-compatible package,
# which the torchtpu-torch_tpu.pth of torchtpu's install makes importable.
if ! "$VENV/bin/python" -c "import torch_tpu._loader" 2>/dev/null; then
  echo "test_ray.sh: torch_tpu is not importable in $VENV:" \
       "pip install --no-build-isolation --no-deps -e ."; exit 1
fi
run_library_tests test_ray.sh "$VENV/bin/python" test/ray
