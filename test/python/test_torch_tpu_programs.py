"""Google TorchTPU's own tutorials, notebooks and examples run unmodified on torchtpu: the CI tier
of test/torch_tpu_programs/run.py (the programs marked ``ci`` in programs.py, each well under
20 s), each in a fresh subprocess in strict and in fused eager. Each must exit 0 (their own
checks raise) and print what it prints on TorchTPU; the checks below read the numbers they print
where those can be held against the CPU or against what the program says should happen.

The whole list, with the programs too slow for CI and those that fail or cannot run on a
simulator: ``python test/torch_tpu_programs/run.py`` (docs/coming-from-torchtpu.md, "TorchTPU's
own programs").
"""
import hashlib
import json
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "test", "torch_tpu_programs"))
import programs  # noqa: E402  (test/torch_tpu_programs/programs.py)
import run  # noqa: E402  (test/torch_tpu_programs/run.py)

CI = [p for p in programs.PROGRAMS if p.ci]
CI_TIMEOUT = 90.0  # per program and mode: a hang fails the test, not the tier


def _floats(pattern: str, text: str) -> list[float]:
    return [float(m) for m in re.findall(pattern, text)]


def _check_get_started(out: str, mode: str) -> None:
    assert "tpu_tensor is on: tpu:0" in out and "direct_tpu_tensor is on: tpu:0" in out
    (checksum,) = _floats(r"Result Checksum \(Sum\): (-?[\d.]+)", out)
    # ones(5, 5) + randn(5, 5): 25 plus a sum of 25 standard normals (|.| < 30 always here).
    assert abs(checksum - 25.0) < 30.0


def _check_api_mapping(out: str, mode: str) -> None:
    assert "torch.tpu.is_available():    True" in out
    assert "torch.tpu.device_count():    4" in out  # the default slice of 4 simulated v5e chips
    assert "Seeded all TPU cores with value 42." in out
    assert "torch.bfloat16" in out  # AMP supported dtypes


def _check_compilation_cache(out: str, mode: str) -> None:
    (reqs,) = _floats(r"Total Requests: (\d+)", out)
    (hits,) = _floats(r"Total Hits:\s+(\d+)", out)
    assert 0 <= hits <= reqs
    if mode == "fused":
        # The same graph twice: the second run is a hit of the first's plan, as the notebook says.
        assert hits >= 1 and "Entry 0:" in out


def _check_numerical_parity(out: str, mode: str) -> None:
    # The notebook compares a bfloat16 Linear on tpu with the CPU's under STRICT tolerances and
    # prints either outcome; a failure must come with TorchTPU's report and suggested tolerances.
    if "Parity check passed" not in out:
        assert "Parity check failed" in out and re.search(r"atol|rtol", out)


def _check_profiling(out: str, mode: str) -> None:
    (files,) = _floats(r"Files found: (\d+)", out)
    assert files >= 1 and "Traces ready" in out


def _check_environment_variables(out: str, mode: str) -> None:
    assert "Caught Expected Error with C++" in out  # (10,) + (20,): shape mismatch at the op
    assert "Caught Expected Debug Exception" in out  # torch.take out of bounds
    assert "Executed complex math with O3 optimization." in out


def _check_advanced_compile(out: str, mode: str) -> None:
    assert "Compilation complete!" in out


def _check_eager_mode(out: str, mode: str) -> None:
    # The notebook asks sync.computation_mlir for the pending graph in each mode: in
    # DEFER_AND_FUSE the add and multiply are waiting in one graph, in DEFER_NEVER they ran.
    fused, strict = out.split("--- Mode: Fused Eager (DEFER_AND_FUSE) ---", 1)[1].split(
        "--- Mode: Strict Eager (DEFER_NEVER) ---", 1)
    assert "fused 'add': True" in fused and "fused 'multiply': True" in fused
    assert "fused 'add': False" in strict and "fused 'multiply': False" in strict


def _check_error_glossary(out: str, mode: str) -> None:
    assert "expected m1 and m2 to have the same dtype" in out  # mm float32 x int64, at the op
    assert "OpTracer Report:" in out and "aten.addmm.default" in out
    assert "EagerMode.DEFER_NEVER forces immediate execution" in out


def _check_precision_tutorial(out: str, mode: str) -> None:
    # An (8, 2048, 2048) float32 batched matmul against the CPU's at each precision: one bf16
    # pass, three (bf16_3x), six (bf16_6x): TorchTPU's DEFAULT, HIGH, HIGHEST (docs/precision.md).
    errors = {}
    for name, max_abs, mean_rel in re.findall(
            r"Mode: Precision\.(\w+)\s+Max Absolute Error: ([\d.e+-]+)\s+"
            r"Mean Relative Error:\s+([\d.e+-]+)", out):
        errors[name] = (float(max_abs), float(mean_rel))
    assert set(errors) == {"DEFAULT", "HIGH", "HIGHEST"}, out[-2000:]
    # The largest errors are within 25% of the ones the notebook printed on a real TPU; its mean
    # relative errors hang on the few outputs nearest zero of an unseeded draw (the seeded
    # comparison with the published figures: test_precision_algorithms.py), so only their order
    # and size here; HIGHEST is not the CPU's float32 GEMM (the chip's six passes round too).
    published = {"DEFAULT": 5.958481e-01, "HIGH": 3.295898e-03, "HIGHEST": 1.678467e-04}
    for name, (max_abs, _) in errors.items():
        assert abs(max_abs / published[name] - 1) <= 0.25, errors
    assert errors["DEFAULT"][1] > errors["HIGH"][1] > errors["HIGHEST"][1] > 1e-7, errors
    assert errors["DEFAULT"][1] > 1e-3  # bfloat16 inputs
    assert errors["HIGH"][1] < 1e-3


def _check_hello_world_llm(out: str, mode: str) -> None:
    # Qwen3-0.6B's stand-in (random weights, test/torch_tpu_programs/standins/hf_hub.py) on the
    # current accelerator; generate() keeps the prompt at the start of what it decodes.
    assert "Current accelerator is: tpu" in out
    assert "Output: 'Hello, I am a" in out


def _check_simple_nn(out: str, mode: str) -> None:
    for what in ("Tensor creation (torch.ones) PASSED.", "CPU -> TPU .to() PASSED.",
                 "Binary op (add) PASSED.", "Backward pass PASSED."):
        assert what in out
    # The program prints the tpu SimpleNN's output beside the CPU's and asserts them close.
    assert "y_tpu_to_cpu: tensor(" in out and "y_ref_cpu: tensor(" in out


def _check_dlrm(out: str, mode: str) -> None:
    # Prints the CPU's and the tpu's predictions (then asserts them close: rtol 1e-3, atol 4e-4).
    cpu = out.split("\nCPU\n", 1)[1].split("\nTPU\n", 1)
    assert len(cpu) == 2
    p_cpu = _floats(r"\[(-?[\d.e+-]+)\]", cpu[0])
    p_tpu = _floats(r"\[(-?[\d.e+-]+)\]", cpu[1])
    assert len(p_cpu) == len(p_tpu) == 16
    assert all(abs(a - b) <= 4e-4 + 1e-3 * abs(b) + 1e-4 for a, b in zip(p_tpu, p_cpu))


CHECKS = {
    "nb/get_started_tpu": _check_get_started,
    "nb/api_mapping": _check_api_mapping,
    "nb/compilation_cache": _check_compilation_cache,
    "pkg-nb/compilation_cache": _check_compilation_cache,
    "nb/numerical_parity": _check_numerical_parity,
    "pkg-nb/numerical_parity": _check_numerical_parity,
    "nb/performance_profiling": _check_profiling,
    "nb/environment_variables": _check_environment_variables,
    "nb/advanced_compile": _check_advanced_compile,
    "simple_nn/simple_ops_nn_example": _check_simple_nn,
    "nb/eager_mode": _check_eager_mode,
    "tutorials/large_language_model/hello_world_llm": _check_hello_world_llm,
    "nb/error_glossary": _check_error_glossary,
    "tutorials/precision/precision_tutorial": _check_precision_tutorial,
    "dlrm/dlrm_simple": _check_dlrm,
}


# In fused eager as well, in CI: the programs whose output shows the eager mode (the pending graph,
# training steps and their checks). The others run in strict eager in CI and in both modes with
# TORCHTPU_PROGRAMS_BOTH_MODES=1 (and under run.py --tier ci), for CI's time budget: each is a
# notebook of API calls whose fused run repeats its strict one (docs/testing.md).
FUSED_IN_CI = {"nb/get_started_tpu", "nb/eager_mode", "nb/deferred_execution",
               "tutorials/precision/precision_tutorial", "simple_nn/simple_ops_nn_example",
               "dlrm/dlrm_simple"}
_BOTH_MODES = os.environ.get("TORCHTPU_PROGRAMS_BOTH_MODES") == "1"
CASES = [(p, m) for p in CI for m in ("strict", "fused")
         if m == "strict" or _BOTH_MODES or p.name in FUSED_IN_CI]


@pytest.mark.one_tier("each program runs in a process of its own in its mode, whatever the "
                     "tier's mode")
@pytest.mark.parametrize("program, mode", CASES, ids=[f"{p.name}-{m}" for p, m in CASES])
def test_program(program, mode):
    row = run.run_one(program, mode, timeout=CI_TIMEOUT, keep_output=True)
    out = row["stdout"] + row["stderr"]
    assert row["status"] == "passed", (
        f"{program.path} ({mode}): {row['error']}\n--- stdout tail\n{row['stdout'][-2000:]}"
        f"\n--- stderr tail\n{row['stderr'][-3000:]}")
    check = CHECKS.get(program.name)
    if check is not None:
        check(out, mode)


@pytest.mark.one_tier("checks files, not a device")
def test_vendored_files_are_the_listed_bytes():
    """third_party/torch_tpu_programs/ holds TorchTPU's files unmodified: each file's SHA-256 is
    the one SOURCES.md lists, every file is listed, and every program run.py runs is there."""
    root = run.VENDORED
    listed = {}
    with open(os.path.join(root, "SOURCES.md")) as f:
        for line in f:
            m = re.match(r"\| `([^`]+)` \| `([0-9a-f]{40})` \| `([0-9a-f]{64})` \|", line)
            if m:
                listed[m.group(1)] = m.group(3)
    on_disk = set()
    for folder, _, files in os.walk(root):
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), root)
            if rel != "SOURCES.md":
                on_disk.add(rel)
    assert on_disk == set(listed)
    for rel, sha in listed.items():
        with open(os.path.join(root, rel), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == sha, rel
    for p in programs.PROGRAMS:
        assert p.path in listed, p.path


@pytest.mark.one_tier("checks files, not a device")
def test_notebooks_have_no_shell_or_magic_lines():
    """ipynb_exec.py runs code cells as Python; the vendored Jupyter notebooks have no `!` shell
    lines or `%` magics it would have to stand in for."""
    for p in programs.PROGRAMS:
        if p.kind != "ipynb":
            continue
        with open(os.path.join(run.VENDORED, p.path)) as f:
            cells = [c for c in json.load(f)["cells"] if c["cell_type"] == "code"]
        for cell in cells:
            for line in "".join(cell["source"]).splitlines():
                assert not line.lstrip().startswith(("!", "%")), (p.path, line)


def test_the_error_column_names_the_exception_a_rank_raised():
    # torchrun ends with its ChildFailedError; the rank's own exception, behind torchrun's
    # "[rank0]:" prefix, is the one reported.
    stderr = ("[rank0]:   File \"w.py\", line 3\n[rank0]:     raise AssertionError\n"
              "[rank0]: AssertionError: step 8\n"
              "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n")
    assert run.first_error_line("", stderr) == "AssertionError: step 8"
    assert run.first_error_line("", "ValueError: x\n") == "ValueError: x"
    assert run.first_error_line("", "subprocess.CalledProcessError: y\n") == \
        "subprocess.CalledProcessError: y"
