#!/usr/bin/env bash
# Sanitizers as a command (docs/testing.md, "Sanitizers"):
#   1. ASan + UBSan build (build/asan): the GoogleTests, then a pytest subset (reliability, fused
#      eager, streams, memory, modes) with the instrumented library loaded into Python
#      (libasan preloaded; leak detection off: CPython and torch keep memory to the end);
#   2. ThreadSanitizer build (build/tsan, no Python module): the runtime's GoogleTests (allocator,
#      streams, events, devices) and the fused-eager ones.
# Any sanitizer report fails the run (halt_on_error). About 20 minutes on 2 cores from a cold
# ccache; not part of scripts/test.sh (which stays well under CI's budget); run before a release.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash scripts/setup.sh >/dev/null
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
PREFIX=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
SUFFIX=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
start=$(date +%s)

configure() {  # build dir, sanitizers, python module on/off
  cmake -S . -B "$1" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTORCHTPU_SANITIZE="$2" -DTORCHTPU_BUILD_PYTHON="$3" -DPython_EXECUTABLE="$(command -v "$PYTHON")" \
    -DTORCHTPU_PYTHON_EXT_SUFFIX="$SUFFIX" >/dev/null
  cmake --build "$1" -j "${MAX_JOBS:-2}"
}

echo "== ASan + UBSan build"
configure build/asan "address,undefined" ON
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# allocator_may_return_null: a request larger than the host has returns null, as glibc does (the
# host out-of-memory tests rely on it) instead of aborting.
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1
echo "== GoogleTests under ASan + UBSan"
TORCHTPU_HBM_BYTES=$((64 << 20)) build/asan/test/cpp/torchtpu_cpp_tests
echo "== pytest subset under ASan + UBSan"
pkg=build/asan/package
rm -rf "$pkg" && mkdir -p "$pkg"
cp -r torchtpu "$pkg/torchtpu"
rm -rf "$pkg/torchtpu/lib" "$pkg"/torchtpu/_C*.so
cmake --install build/asan --prefix "$pkg/torchtpu" >/dev/null
# (Run from the package folder, so that Python imports the instrumented build, not the source tree.)
root=$PWD
preload="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)"
(cd "$pkg" && LD_PRELOAD="$preload" "$PYTHON" -c \
  'import torchtpu, os; assert torchtpu.__file__.startswith(os.getcwd()), torchtpu.__file__')
for mode in strict fused; do
  (cd "$pkg" && LD_PRELOAD="$preload" PYTHONPATH="$root/test/python" TORCHTPU_EAGER_MODE=$mode \
    "$PYTHON" -m pytest -q -p no:cacheprovider -x -c "$root/pytest.ini" --rootdir="$root" \
      "$root/test/python/test_reliability.py" "$root/test/python/test_defer.py" \
      "$root/test/python/test_memory.py" "$root/test/python/test_modes.py" \
      "$root/test/python/test_autoload_and_streams.py")
done

echo "== ThreadSanitizer build (the C++ libraries and GoogleTests)"
configure build/tsan "thread" OFF
echo "== runtime and fused-eager GoogleTests under ThreadSanitizer"
# torch and its OpenMP runtime are not instrumented: reports whose whole stack is inside them are
# suppressed (test/cpp/tsan.supp says which and why); any report that touches torchtpu fails.
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/test/cpp/tsan.supp" \
  TORCHTPU_HBM_BYTES=$((64 << 20)) \
  build/tsan/test/cpp/torchtpu_cpp_tests --gtest_filter='AllocatorTest.*:Streams.*:Events.*:Devices.*:Tensors.*:StrictEager.*:FusedEager.*:Plan.*'
echo "sanitize.sh: 0 sanitizer reports; everything passed in $(( $(date +%s) - start )) s"
