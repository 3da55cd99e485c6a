# The library tiers' virtual environment and test run (sourced by scripts/test_vllm.sh,
# test_ray.sh, test_ecosystem.sh, test_torchtitan.sh): a library that would change the main
# environment lives in a venv under build/ that sees the main environment's packages (torch and
# torchtpu among them) and keeps the library and what it pulls inside.
#
#   make_library_venv TIER VENV CHECK_IMPORT PACKAGE...
#
# makes VENV unless `python -c CHECK_IMPORT` already works there, holding torch at the installed
# build: the install is refused if pip's plan holds a torch. Returns 0 when the venv is ready, 1
# when the install failed or was refused, 2 when the packages cannot be resolved (no PyPI): the
# caller then runs its tier in the main environment, where it skips.
make_library_venv() {
  local tier=$1 venv=$2 check=$3
  shift 3
  if "$venv/bin/python" -c "$check" 2>/dev/null; then return 0; fi
  echo "== making $venv ($*, torch held at the installed build)"
  "${PYTHON:-python3}" -m venv --system-site-packages "$venv" || return 1
  local torch_version plan
  torch_version=$("$venv/bin/python" -c "import torch; print(torch.__version__)")
  echo "torch==$torch_version" > "$venv/constraints.txt"
  plan=$("$venv/bin/pip" install --dry-run -q --report - -c "$venv/constraints.txt" "$@" \
         2>/dev/null | "$venv/bin/python" -c \
         "import json,sys; print(' '.join(i['metadata']['name'] for i in json.load(sys.stdin)['install']))")
  if [ -z "$plan" ]; then
    echo "$tier: $* cannot be resolved here (no PyPI?): tier skipped"
    return 2
  fi
  if echo " $plan " | grep -qi " torch "; then
    echo "$tier: installing $* would replace torch ($plan): refused"
    return 1
  fi
  "$venv/bin/pip" install -q -c "$venv/constraints.txt" "$@" || return 1
}

# The tier's pytest arguments in PYTEST_ARGS: --smoke becomes `-m smoke` (the short cases), every
# other argument goes to pytest as it is.
library_pytest_args() {
  PYTEST_ARGS=()
  local a
  for a in "$@"; do
    if [ "$a" = "--smoke" ]; then PYTEST_ARGS+=(-m smoke); else PYTEST_ARGS+=("$a"); fi
  done
}

#   run_library_tests TIER PYTHON TEST_DIR
#
# runs TEST_DIR's tests with PYTHON and PYTEST_ARGS, says how long the tier took (since $start)
# and exits with pytest's status.
run_library_tests() {
  local tier=$1 python=$2 dir=$3
  "$python" -m pytest -q -p no:cacheprovider "$dir" "${PYTEST_ARGS[@]}"
  local rc=$?
  echo "$tier: exit $rc in $(( $(date +%s) - start )) s"
  exit $rc
}
