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
PYTEST_ARGS=()
for a in "$@"; do
  if [ "$a" = "--smoke" ]; then PYTEST_ARGS+=(-m smoke); else PYTEST_ARGS+=("$a"); fi
done
start=$(date +%s)

if ! "$VENV/bin/python" -c "import ray.train.torch" 2>/dev/null; then
  echo "== making $VENV (ray[train] $RAY_VERSION, torch held at the installed build)"
  "$PYTHON" -m venv --system-site-packages "$VENV" || exit 1
  torch_version=$("$VENV/bin/python" -c "import torch; print(torch.__version__)")
  echo "torch==$torch_version" > "$VENV/constraints.txt"
  # Never let pip resolve another torch: refuse the install if the plan holds one.
  plan=$("$VENV/bin/pip" install --dry-run -q --report - -c "$VENV/constraints.txt" \
         "ray[train]==$RAY_VERSION" 2>/dev/null | "$VENV/bin/python" -c \
         "import json,sys; print(' '.join(i['metadata']['name'] for i in json.load(sys.stdin)['install']))")
  if [ -z "$plan" ]; then
    echo "test_ray.sh: ray[train] $RAY_VERSION cannot be resolved here (no PyPI?): tier skipped"
    "$PYTHON" -m pytest -q -p no:cacheprovider test/ray "${PYTEST_ARGS[@]}"
    exit $?
  fi
  if echo " $plan " | grep -qi " torch "; then
    echo "test_ray.sh: installing ray[train] would replace torch ($plan): refused"; exit 1
  fi
  "$VENV/bin/pip" install -q -c "$VENV/constraints.txt" "ray[train]==$RAY_VERSION" || exit 1
fi
# Ray Train finds TorchTPU as the module torch_tpu: torchtpu's TorchTPU-compatible package,
# which the torchtpu-torch_tpu.pth of torchtpu's install makes importable.
if ! "$VENV/bin/python" -c "import torch_tpu._loader" 2>/dev/null; then
  echo "test_ray.sh: torch_tpu is not importable in $VENV:" \
       "pip install --no-build-isolation --no-deps -e ."; exit 1
fi
"$VENV/bin/python" -m pytest -q -p no:cacheprovider test/ray "${PYTEST_ARGS[@]}"
rc=$?
echo "test_ray.sh: exit $rc in $(( $(date +%s) - start )) s"
exit $rc
