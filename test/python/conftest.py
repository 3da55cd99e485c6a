"""Shared set-up for the pytest suite: the device is registered before any test imports torch
stuff, and a helper runs code in a fresh interpreter (for environment variables that are read
once, autoload, and once-per-process warnings). The tests' helpers (fixtures, the fuzzer, the
programs tests start as child processes) are in test/helpers/, put on sys.path here."""
import os
import re
import subprocess
import sys
import textwrap

HELPERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers")
sys.path.insert(0, HELPERS)

import pytest  # noqa: E402
import torch  # noqa: E402
import torchtpu  # noqa: E402,F401  registers "tpu" even with autoload disabled

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")  # (docs/testing.md, "Precision")
# ... and "highest" as the CPU's float32 GEMM, not the chip's six bf16 passes: the suite compares
# the device's plumbing with the CPU (many results bit for bit); the tests of the chip's numerics
# ask for its algorithm themselves (test_precision_algorithms.py, test_simulated_chip.py).
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")
torch.set_float32_matmul_precision("highest")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "one_tier(reason): runs in the strict tier only (scripts/test.sh runs the suite "
        "in strict, debug and fused eager); for tests whose subject does not depend on the eager "
        "mode, to keep CI within its time budget: the reason says why")
    config.addinivalue_line(
        "markers", "not_in_debug_tier(reason): runs in the strict and fused tiers, not the debug "
        "one, where it would repeat the strict tier's run: the reason says why")


EAGER_MODES = ("strict", "debug", "fused")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("TORCHTPU_EAGER_MODE", "strict") == "strict":
        return
    for item in items:
        marker = item.get_closest_marker("one_tier")
        if marker is not None:
            item.add_marker(pytest.mark.skip(reason=f"strict tier only: {marker.args[0]}"))
        marker = item.get_closest_marker("not_in_debug_tier")
        if marker is not None and os.environ.get("TORCHTPU_EAGER_MODE") == "debug":
            item.add_marker(pytest.mark.skip(reason=f"not in the debug tier: {marker.args[0]}"))
        # A test parametrized by the eager mode sets that mode itself (set_eager_mode, or the
        # environment of its child process): the strict tier runs every mode it names; the other
        # tiers would run the same cases again.
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("mode") in EAGER_MODES:
            item.add_marker(pytest.mark.skip(
                reason="sets its eager mode itself: the strict tier runs each of its modes"))


@pytest.fixture
def no_loop_detection():
    """Fused eager's loop detection off for the test (docs/eager-modes.md, "Loops that read
    nothing"): for tests that count the plans, graphs or launches of code that repeats, which
    loop detection would cut at other places (its window of recorded ops is kept across graphs
    and tests)."""
    detection = torchtpu.debug.detect_repeated_ops("off")
    yield
    torchtpu.debug.detect_repeated_ops(detection)


@pytest.fixture
def fresh_state():
    """Fresh metrics and a fresh Dynamo for the test, which starts at the suite's float32 matmul
    precision ("highest"; a precision the test sets is undone after it). The autouse fixtures of
    the fused-eager tests (defer_helpers.fused), of the compiled-mode tests (compile_helpers.fresh)
    and of test_torch_tpu_compile_twin.py are this one."""
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    torch._dynamo.reset()
    torchtpu.metrics.reset()
    yield
    torch._dynamo.reset()
    torch.set_float32_matmul_precision(precision)


def _highest_algorithm(algorithm):
    before = torch.tpu.get_highest_algorithm()
    torch.tpu.set_highest_algorithm(algorithm)
    yield
    torch.tpu.set_highest_algorithm(before)


@pytest.fixture
def chip_highest():
    """"highest" as the chip computes it, six bf16 passes (docs/precision.md), for the test,
    whatever the suite's opt-in; restored after it."""
    yield from _highest_algorithm("bf16_6x")


@pytest.fixture
def float32_highest():
    """"highest" as the host CPU's float32 GEMM (the suite's opt-in, set here for tests whose
    subject it is); restored after the test."""
    yield from _highest_algorithm("float32")


@pytest.fixture(autouse=True)
def _clean_state():
    """Each test starts on tpu:0, default streams, and the fallback and eager modes of the tier
    (the environment): a test that switches the eager mode does not change the next test's."""
    mode, eager = torchtpu.get_fallback_mode(), torchtpu.get_eager_mode()
    yield
    torchtpu.set_fallback_mode(mode)
    torchtpu.set_eager_mode(eager)
    for i in range(torch.tpu.device_count()):
        torch.accelerator.set_stream(torch.tpu.default_stream(i))  # also selects device i
    torch.tpu.set_device(0)


# PyTorch 2.13's autograd engine saves the caller's contextvars context in every backward's
# thread-local state (torch.autograd.graph._engine_run_backward); a device's autograd thread
# that drops the last reference to a finished backward after the interpreter started to
# finalize asks for the GIL, Python ends the thread, and the C++ frame aborts the process with
# this message (exit code -6; one run of a DDP or FSDP script in ten to twenty on this 2-core
# machine; CUDA's device threads share the code). Tests of multi-process runs accept this
# abort only once the process has written all its results, which they then check in full.
EXIT_ABORT = "terminate called without an active exception"
# torchrun exits with 1 whenever a rank fails, and lists each failed rank with its exit code
# ("exitcode  : -6 (pid: ...)  (SIGABRT)"): a rank that failed for real (an example's "the loss
# did not decrease", exit code 1) is listed beside one that aborted at exit. Ranks still running
# when one aborted are ended by torchrun and listed with -15 (SIGTERM).
TORCHRUN_EXITCODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)", re.M)


def aborted_at_exit(returncode: int, stderr: str) -> bool:
    """The process (-6, or 134 through a shell) aborted at exit with EXIT_ABORT; or, under
    torchrun (1), a rank did and every other rank torchrun lists as failed was ended by torchrun
    (-15) after it: no rank exited with an error of its own."""
    if EXIT_ABORT not in stderr:
        return False
    if returncode in (-6, 134):
        return True
    if returncode == 1:
        codes = {int(c) for c in TORCHRUN_EXITCODE.findall(stderr)}
        return -6 in codes and codes <= {-6, -15}
    return False


def close_to_cpu(got, expected, **tol):
    """Asserts that a tpu result equals the CPU's `expected` (torch.testing.assert_close's
    tolerances unless given)."""
    torch.testing.assert_close(got.cpu(), expected, **tol)


def run_python(code: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter; returns the completed process (text output)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env, capture_output=True, text=True, timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc
