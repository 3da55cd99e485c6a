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


def _call_then_sync(call):
    """The exception the call raised (or None), then the one the next synchronization raised."""
    raised = late = None
    try:
        call()
    except Exception as e:  # noqa: BLE001 - checked by the caller
        raised = e
    try:
        torchtpu.sync()
    except Exception as e:  # noqa: BLE001
        late = e
    return raised, late


@pytest.mark.parametrize("op", OPS, ids=[f"{o.name}.{o.variant_test_name}" for o in OPS])
def test_error_inputs_raise_at_the_call(op):
    torchtpu.set_fallback_mode("silent")
    checked = 0
    for i, error in enumerate(op.error_inputs("tpu")):
        sample = error.sample_input
        if not _cpu_raises(op, sample):
            continue
        key = (op.name, op.variant_test_name, error.error_regex, i)
        raised, late = _call_then_sync(lambda: op(sample.input, *sample.args, **sample.kwargs))
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


OUT_OPS = [op for op in op_db if op.supports_out and torch.float32 in op.supported_dtypes("cpu")]


def _long_like(result):
    if isinstance(result, torch.Tensor):
        return torch.empty(result.shape, dtype=torch.long, device="tpu")
    return type(result)(_long_like(r) for r in result)


def _floating(result) -> bool:
    if isinstance(result, torch.Tensor):
        return result.is_floating_point() or result.is_complex()
    return any(_floating(r) for r in result)


@pytest.mark.parametrize("op", OUT_OPS, ids=[f"{o.name}.{o.variant_test_name}" for o in OUT_OPS])
def test_out_tensors_of_a_dtype_the_result_cannot_be_cast_to_raise_at_the_call(op):
    # PyTorch's test_ops.test_out, its case of an out= tensor of the right shape and a dtype the
    # (floating-point) result cannot be cast to (long): the CPU's kernel refuses it. On "tpu" that
    # check lives in the same CPU kernel, which strict eager runs on a worker and fused eager in
    # a region: it must be made at the call, with the CPU's exception type (the op's meta kernel
    # and its CPU kernel run on scratch copies for each new call signature, aten/CallChecks.cpp).
    torchtpu.set_fallback_mode("silent")
    sample = next(iter(op.sample_inputs("cpu", torch.float32)), None)
    if sample is None:
        pytest.skip("no sample")
    try:
        expected = op(sample.input, *sample.args, **sample.kwargs)
    except Exception:  # noqa: BLE001
        pytest.skip("the CPU refuses its first sample")
    if not isinstance(expected, torch.Tensor) and not (
            isinstance(expected, (tuple, list))
            and all(isinstance(r, torch.Tensor) for r in expected)):
        pytest.skip("results that are not tensors")
    if not _floating(expected):
        pytest.skip("an integer or boolean result: a long out= tensor holds it")
    cpu_out = (torch.empty(expected.shape, dtype=torch.long) if isinstance(expected, torch.Tensor)
               else type(expected)(torch.empty(r.shape, dtype=torch.long) for r in expected))
    try:
        op(sample.input, *sample.args, **sample.kwargs, out=cpu_out)
        cpu_error = None
    except Exception as e:  # noqa: BLE001
        cpu_error = e
    tpu = sample.transform(lambda x: x.to("tpu") if isinstance(x, torch.Tensor) else x)
    torchtpu.sync()
    raised, late = _call_then_sync(
        lambda: op(tpu.input, *tpu.args, **tpu.kwargs, out=_long_like(expected)))
    if cpu_error is None:
        assert raised is None and late is None, (raised, late)
        return
    assert raised is not None, (
        f"the CPU refuses it ({type(cpu_error).__name__}: {cpu_error}); on tpu "
        + (f"it was raised at synchronization: {late}" if late else "nothing was raised"))
    assert type(raised) is type(cpu_error), (raised, cpu_error)
    assert late is None, late
