#!/usr/bin/env bash
# The test command: sets up (scripts/setup.sh), then runs the GoogleTest suite through CTest,
# the pytest suite in each eager mode (which also builds and runs the LibTorch C++ example through
# find_package(torchtpu)), the stress suite's short tier, PyTorch's ModuleInfo sweep (also
# compiled with torch.compile(backend="tpu")), and the CI tier of the OpInfo sweep (one
# shard of eight; the whole sweep is scripts/opinfo_sweep.sh). The sweeps run in pytest
# processes of their own: PyTorch's test utilities change global state when imported.
#
# `bash scripts/test.sh --quick`: the fast tier, every layer once (a few minutes on 2 cores):
# set-up, CTest, and in strict eager one pytest file per layer and mechanism (QUICK below), fused
# eager's own tests in fused eager; the full command stays the CI gate.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
start=$(date +%s)
# Each stage's heading says how long the run has taken so far (the CI budget is 25 minutes).
stage() { echo "== [$(( $(date +%s) - start )) s] $*"; }
quick=0
if [[ "${1:-}" == "--quick" ]]; then
  quick=1
  shift
fi
bash scripts/setup.sh
stage "C++ tests (GoogleTest via CTest)"
ctest --test-dir build/cmake --output-on-failure
if (( quick )); then
  # runtime and device module, the configuration table, ops against the CPU, attention, fused
  # eager (planner, loop detection), compiled mode, the TorchTPU twin, collectives at 2 ranks,
  # and the code's shape (file and function sizes, imports, includes: a few seconds)
  QUICK=(test/python/test_code_structure.py
         test/python/test_device_module.py test/python/test_config.py
         test/python/test_parity.py test/python/test_out_arguments.py
         test/python/test_attention.py test/python/test_defer.py
         test/python/test_loop_detection.py test/python/test_compile_programs.py
         test/python/test_torch_tpu_modules.py
         "test/python/test_distributed.py::test_every_collective_matches_its_definition[2]")
  echo "== quick tier: one file per layer, strict eager"
  "$PYTHON" -m pytest -q -p no:cacheprovider "${QUICK[@]}" "$@"
  echo "== quick tier: fused eager's tests in fused eager"
  TORCHTPU_EAGER_MODE=fused "$PYTHON" -m pytest -q -p no:cacheprovider \
    test/python/test_defer.py test/python/test_fused_regions.py "$@"
  echo "test.sh --quick: passed in $(( $(date +%s) - start )) s"
  exit 0
fi
stage "Python tests (pytest), strict eager (the default)"
"$PYTHON" -m pytest -q "$@"
stage "Python tests (pytest) again in debug eager"
TORCHTPU_EAGER_MODE=debug "$PYTHON" -m pytest -q "$@"
stage "Python tests (pytest) again in fused eager (DeferAndFuse)"
TORCHTPU_EAGER_MODE=fused "$PYTHON" -m pytest -q "$@"
stage "stress suite, short tier (one round of each kind per mode, about 20 s each: the mode alone, modes switched, interrupted; the release tier is scripts/stress.sh)"
"$PYTHON" test/stress/stress.py --seconds 10 --round 4
stage "PyTorch ModuleInfo, OptimizerInfo and foreach OpInfo sweeps (all entries), OpInfo error inputs (raised at the call), OpInfo sweep CI tier (shard 0 of 8)"
(cd test/opinfo && "$PYTHON" -m pytest -q -p no:cacheprovider test_moduleinfo.py test_optiminfo.py test_foreach.py test_errors.py)
(cd test/opinfo && TORCHTPU_OPINFO_SHARD=0/8 "$PYTHON" -m pytest -q -p no:cacheprovider test_opinfo.py)
stage "half of ModuleInfo (shard 0 of 2) and of the OpInfo shard (shard 0 of 16) again compiled: torch.compile(backend=\"tpu\") against the CPU (OpInfo: against the op compiled by PyTorch's aot_eager; the other halves: TORCHTPU_COMPILED=1 TORCHTPU_OPINFO_SHARD=1/2 with test_moduleinfo.py, scripts/opinfo_sweep.sh)"
(cd test/opinfo && TORCHTPU_COMPILED=1 TORCHTPU_OPINFO_SHARD=0/16 "$PYTHON" -m pytest -q -p no:cacheprovider test_opinfo.py)
(cd test/opinfo && TORCHTPU_COMPILED=1 TORCHTPU_OPINFO_SHARD=0/2 "$PYTHON" -m pytest -q -p no:cacheprovider test_moduleinfo.py)
stage "the same sweeps in fused eager"
(cd test/opinfo && TORCHTPU_EAGER_MODE=fused "$PYTHON" -m pytest -q -p no:cacheprovider test_moduleinfo.py test_optiminfo.py test_foreach.py test_errors.py)
(cd test/opinfo && TORCHTPU_EAGER_MODE=fused TORCHTPU_OPINFO_SHARD=0/8 "$PYTHON" -m pytest -q -p no:cacheprovider test_opinfo.py)
stage "model zoos, CI tier (5 transformers architectures, 2 diffusers models: each built once, then strict, fused and compiled; the sweeps are scripts/zoo_sweep.sh and scripts/diffusers_sweep.sh)"
"$PYTHON" -m pytest -q -p no:cacheprovider test/models/test_zoo_smoke.py
echo "test.sh: everything passed in $(( $(date +%s) - start )) s"
