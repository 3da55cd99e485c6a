"""PyTorch's OpInfo error inputs on "tpu": each must raise at the call, as on the CPU.

Every OpInfo of `op_db` with error inputs gives samples that PyTorch's own test_ops
(`test_errors`) expects to raise a given exception type whose message matches a given pattern.
Here each one runs on "tpu" in the eager mode of the run (TORCHTPU_EAGER_MODE) and must raise
that exception **at the call**: not at the next synchronization (strict eager queues ops, fused
eager records them), and not never (a fused region whose result is dropped). Inputs the CPU
accepts are not argument errors of the op (they target other devices or Python bindings) and are
skipped. docs/design.md, "Errors at the call".
"""
import re

import pytest
import torch
import torchtpu
from torch.testing._internal.common_methods_invocations import op_db

OPS = [op for op in op_db if op.error_inputs_func is not None]

# (op, variant, pattern, index) -> why it is not raised at the call yet. (Empty: the last one, a
# non-empty out= tensor of another shape, is resized at the call now, issue #18 item 2.)
XFAIL = {}


def _cpu_raises(op, sample) -> bool:
    cpu = sample.transform(
        lambda x: x.to("cpu") if isinstance(x, torch.Tensor) and x.device.type == "tpu" else x)
    try:
        op(cpu.input, *cpu.args, **cpu.kwargs)
    except Exception:  # noqa: BLE001 - any refusal counts
        return True
    return False


@pytest.mark.parametrize("op", OPS, ids=[f"{o.name}.{o.variant_test_name}" for o in OPS])
def test_error_inputs_raise_at_the_call(op):
    torchtpu.set_fallback_mode("silent")
    checked = 0
    for i, error in enumerate(op.error_inputs("tpu")):
        sample = error.sample_input
        if not _cpu_raises(op, sample):
            continue
        key = (op.name, op.variant_test_name, error.error_regex, i)
        raised = None
        try:
            op(sample.input, *sample.args, **sample.kwargs)
        except Exception as e:  # noqa: BLE001 - checked below
            raised = e
        try:
            torchtpu.sync()
            late = None
        except Exception as e:  # noqa: BLE001
            late = e
        if key in XFAIL:
            assert raised is None, f"{key} now raises at the call: remove it from XFAIL"
            continue
        assert raised is not None, (
            f"error input {i} of {op.name}: expected {error.error_type.__name__} matching "
            f"/{error.error_regex}/ at the call; "
            + (f"it was raised at synchronization: {late}" if late else "nothing was raised"))
        assert isinstance(raised, error.error_type), (i, raised)
        assert re.search(error.error_regex, str(raised)), (i, error.error_regex, str(raised))
        assert late is None, f"error input {i}: the call raised, then synchronization: {late}"
        checked += 1
    if checked == 0:
        pytest.skip("no error input the CPU refuses")
