"""PyTorch's OpInfo database on "tpu", compared with the CPU (differential testing).

For every OpInfo in `op_db` (minus the committed SKIP list) and every dtype among float32,
bfloat16, int64 and bool that the op supports, each reference input is run on "tpu" and on
the CPU with the same seed, and the results are compared with PyTorch's default tolerances for
the dtype. Which aten ops ran natively and which through the fallback is recorded per OpInfo
(TORCHTPU_OPINFO_REPORT=path.jsonl) for docs/coverage.md.

Tiers: TORCHTPU_OPINFO_SHARD=i/n runs every n-th OpInfo (by position) starting at i; the CI tier
runs one shard (scripts/test.sh), `make sweep`-style full runs all of them
(scripts/opinfo_sweep.sh).
"""
import json
import os
import sys

import torch
import torchtpu
from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, run_tests

from skips import NON_CPU_SEMANTICS, REFERENCE_IN_FLOAT32, SKIP, TOLERANCE, XFAIL

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from compare_errors import same_failure  # noqa: E402

DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.bool)


def _selected():
    shard = os.environ.get("TORCHTPU_OPINFO_SHARD", "0/1")
    index, count = (int(x) for x in shard.split("/"))
    chosen = [op for op in op_db if op.name not in SKIP]
    return [op for i, op in enumerate(chosen) if i % count == index]


# TORCHTPU_COMPILED=1: every sample through torch.compile(backend="tpu") against the same op
# compiled on the CPU with PyTorch's own backend "aot_eager" (Dynamo and AOTAutograd, then eager
# kernels): where compiling changes PyTorch's result (a meta kernel's shape, a decomposition's
# rounding), "tpu" is held to what PyTorch's compiled result is. Fewer samples per op: each is a
# compilation.
COMPILED = os.environ.get("TORCHTPU_COMPILED") == "1"
COMPILED_SAMPLES = 4


def _compiled(op, backend):
    def run(s):
        torch._dynamo.reset()  # (one code object for every op: a fresh cache, no recompile limit)
        return torch.compile(lambda *a, **k: op(*a, **k), backend=backend)(
            s.input, *s.args, **s.kwargs)
    return run


def _in_float32(op, sample, dtype):
    """op on the CPU with the sample's `dtype` tensors widened to float32, results rounded back."""
    widen = sample.transform(lambda x: x.float() if isinstance(x, torch.Tensor) and x.dtype == dtype else x)
    out = op(widen.input, *widen.args, **widen.kwargs)
    return torch.utils._pytree.tree_map(
        lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t, out)


def _to_cpu(x):
    return x.detach().to("cpu") if isinstance(x, torch.Tensor) else x


class TestTpuOpInfo(TestCase):
    @ops(_selected(), allowed_dtypes=DTYPES)
    def test_compare_cpu(self, device, dtype, op):
        key = (op.name, op.variant_test_name, str(dtype).replace("torch.", ""))
        torchtpu.set_fallback_mode("silent")
        torchtpu.metrics.reset()
        compared = 0
        if COMPILED:
            cpu_op, tpu_op = _compiled(op, "aot_eager"), _compiled(op, "tpu")
        else:
            cpu_op = tpu_op = lambda s: op(s.input, *s.args, **s.kwargs)  # noqa: E731
        try:
            for i, sample in enumerate(op.reference_inputs("cpu", dtype, requires_grad=False)):
                tpu_sample = sample.transform(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x)
                torch.manual_seed(i)
                try:
                    # (compiled too: aot_eager runs the same wrong bfloat16 CPU kernel)
                    if key in REFERENCE_IN_FLOAT32:
                        expected = _in_float32(op, sample, dtype)
                    else:
                        expected = cpu_op(sample)
                    if op.name in NON_CPU_SEMANTICS:
                        expected = NON_CPU_SEMANTICS[op.name][0](sample, expected)
                except Exception as cpu_error:  # noqa: BLE001
                    # The CPU refuses this sample (say, a dtype its kernel lacks): "tpu" must
                    # refuse it with the same kind of error, not return something. Compiled, the
                    # CPU's error is PyTorch's compile's as often as the kernel's, so "tpu" must
                    # raise the same failure: the same type and message (compare_errors.py).
                    with self.assertRaises(type(cpu_error)) as raised:
                        tpu_op(tpu_sample)
                        torchtpu.sync()
                    if COMPILED:
                        unlike = same_failure(raised.exception, cpu_error)
                        if unlike is not None:
                            raise AssertionError(f"sample {i}: compiled, the CPU and tpu fail "
                                                 f"differently: {unlike}") from raised.exception
                    compared += 1
                    continue
                torch.manual_seed(i)
                actual = tpu_op(tpu_sample)
                expected = sample.output_process_fn_grad(expected)
                actual = tpu_sample.output_process_fn_grad(actual)
                actual = torch.utils._pytree.tree_map(_to_cpu, actual)
                if key in TOLERANCE:
                    atol, rtol, _ = TOLERANCE[key]
                    self.assertEqual(actual, expected, exact_device=False, atol=atol, rtol=rtol)
                else:
                    self.assertEqual(actual, expected, exact_device=False)
                compared += 1
                if compared >= (COMPILED_SAMPLES if COMPILED else 40):
                    break  # (reference inputs can number in the hundreds)
            outcome = "pass"
        except Exception as e:  # noqa: BLE001 - recorded, then re-raised or xfailed
            outcome = f"fail: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            if key not in XFAIL:
                raise
        finally:
            _record(key, outcome, compared)
        if key in XFAIL and outcome == "pass":
            self.fail(f"{key} is listed in XFAIL ({XFAIL[key]}) but passes: remove it")
        if key in XFAIL:
            self.skipTest(f"expected failure: {XFAIL[key]}")


def _record(key, outcome, compared):
    path = os.environ.get("TORCHTPU_OPINFO_REPORT")
    if not path:
        return
    row = {"op": key[0], "variant": key[1], "dtype": key[2], "outcome": outcome,
           "samples": compared, "native": torchtpu.metrics.native_ops(),
           "fallbacks": torchtpu.metrics.fallbacks()}
    if COMPILED:
        c = torchtpu.metrics.compiled()
        row["compiled"] = {k: c[k] for k in ("dynamo_graphs", "programs", "program_runs",
                                             "runs_op_by_op", "program_failures")}
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


instantiate_device_type_tests(TestTpuOpInfo, globals(), only_for=("tpu",))

if __name__ == "__main__":
    run_tests()
