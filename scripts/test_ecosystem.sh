#!/usr/bin/env bash
# TRL and torchao on "tpu" (docs/ecosystem.md "TRL", "torchao"): makes the virtual environment
# they live in (build/venv-rl: it sees the main environment's packages, torch, transformers and
# torchtpu among them, but TRL, torchao, datasets and what they pull stay inside), then runs
# test/ecosystem/ in it.
#   bash scripts/test_ecosystem.sh            the whole tier
#   bash scripts/test_ecosystem.sh --smoke    the short cases (GRPO in strict eager, int8 dynamic)
# Extra arguments go to pytest. Without a network or PyPI the tier is skipped, not failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${TORCHTPU_RL_VENV:-build/venv-rl}
PACKAGES=("trl==1.16.0" "torchao==0.18.0")
PYTEST_ARGS=()
for a in "$@"; do
  if [ "$a" = "--smoke" ]; then PYTEST_ARGS+=(-m smoke); else PYTEST_ARGS+=("$a"); fi
done
start=$(date +%s)

if ! "$VENV/bin/python" -c "import trl, torchao, datasets" 2>/dev/null; then
  echo "== making $VENV (${PACKAGES[*]}, torch held at the installed build)"
  "$PYTHON" -m venv --system-site-packages "$VENV" || exit 1
  torch_version=$("$VENV/bin/python" -c "import torch; print(torch.__version__)")
  echo "torch==$torch_version" > "$VENV/constraints.txt"
  # Never let pip resolve another torch: refuse the install if the plan holds one.
  plan=$("$VENV/bin/pip" install --dry-run -q --report - -c "$VENV/constraints.txt" \
         "${PACKAGES[@]}" 2>/dev/null | "$VENV/bin/python" -c \
         "import json,sys; print(' '.join(i['metadata']['name'] for i in json.load(sys.stdin)['install']))")
  if [ -z "$plan" ]; then
    echo "test_ecosystem.sh: ${PACKAGES[*]} cannot be resolved here (no PyPI?): tier skipped"
    "$PYTHON" -m pytest -q -p no:cacheprovider test/ecosystem "${PYTEST_ARGS[@]}"
    exit $?
  fi
  if echo " $plan " | grep -qi " torch "; then
    echo "test_ecosystem.sh: installing ${PACKAGES[*]} would replace torch ($plan): refused"; exit 1
  fi
  "$VENV/bin/pip" install -q -c "$VENV/constraints.txt" "${PACKAGES[@]}" || exit 1
fi
"$VENV/bin/python" -m pytest -q -p no:cacheprovider test/ecosystem "${PYTEST_ARGS[@]}"
rc=$?
echo "test_ecosystem.sh: exit $rc in $(( $(date +%s) - start )) s"
exit $rc
