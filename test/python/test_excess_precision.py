"""torch.backends.tpu.allow_excess_precision: compiled mode keeps a bfloat16 matmul's float32
accumulator when the graph widens the result again (torchtpu/_excess_precision.py), as XLA does
on the chip; eager modes and the switch off keep every cast."""
import pytest
import torch

import torchtpu

BIT_6, BIT_7 = 1 + 2**-6, 1 + 2**-7
ROUNDED = 1 + 2**-6 + 2**-7  # (1 + 2^-6)(1 + 2^-7) in bfloat16: the 2^-13 bit is gone
EXACT = ROUNDED + 2**-13  # the float32 accumulator's value


@pytest.fixture
def switch():
    before = torch.backends.tpu.allow_excess_precision
    yield
    torch.backends.tpu.allow_excess_precision = before
    torch.compiler.reset()


def _operands():
    eye = torch.eye(64, dtype=torch.bfloat16, device="tpu")
    return eye * BIT_6, eye * BIT_7, torch.tensor([1.0], device="tpu")


def _compiled(fn, allow):
    torch.compiler.reset()
    torch.backends.tpu.allow_excess_precision = allow
    return torch.compile(fn, backend="tpu")


def _rewrites():
    return torchtpu.metrics.counters().get("compile.excess_precision_matmuls", 0)


def test_the_switch_is_torch_backends_tpu_and_takes_only_bools(switch):
    assert torch.backends.tpu.allow_excess_precision is True  # XLA's default
    torch.backends.tpu.allow_excess_precision = False
    assert torch.backends.tpu.allow_excess_precision is False
    with pytest.raises(TypeError, match="True or False"):
        torch.backends.tpu.allow_excess_precision = 1
    import torch.backends.tpu as module  # (also importable by name)
    assert module is torch.backends.tpu


@pytest.mark.parametrize("widen", ["promoting_mul", "cast"])
def test_a_widened_matmul_keeps_its_accumulator_only_when_allowed(switch, widen):
    a, b, one = _operands()
    fn = (lambda a, b, c: a @ b * c) if widen == "promoting_mul" else \
        (lambda a, b, c: (a @ b).float() + c)
    offset = 0.0 if widen == "promoting_mul" else 1.0
    eager = fn(a, b, one)
    assert eager.dtype == torch.float32
    assert eager[0, 0].item() == ROUNDED + offset
    strict = _compiled(fn, False)(a, b, one)
    assert torch.equal(strict.cpu(), eager.cpu())
    before = _rewrites()
    wide = _compiled(fn, True)(a, b, one)
    assert _rewrites() == before + 1
    assert wide.dtype == torch.float32
    assert wide[0, 0].item() == EXACT + offset
    assert wide[1, 0].item() == offset
    # The CPU in float32 agrees with the accumulator's value.
    want = (a.cpu().float() @ b.cpu().float()) * one.cpu() + offset
    torch.testing.assert_close(wide.cpu(), want, rtol=0, atol=0)


def test_a_matmul_also_read_in_bfloat16_is_left_as_it_is(switch):
    a, b, one = _operands()

    def fn(a, b, c):
        m = a @ b
        return m * c, m + a  # (the second use reads the bfloat16 result)

    before = _rewrites()
    got = _compiled(fn, True)(a, b, one)
    assert _rewrites() == before
    want = fn(a, b, one)
    assert all(torch.equal(g.cpu(), w.cpu()) for g, w in zip(got, want))


def test_training_under_the_switch_matches_float32_gradients(switch):
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8, bias=True).to(torch.bfloat16)
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    scale = torch.randn(8)
    ref_lin = lin.float()
    ref = (ref_lin(x.float()) * scale).sum()
    ref.backward()
    model = torch.nn.Linear(16, 8, bias=True).to(torch.bfloat16)
    model.load_state_dict({k: v.to(torch.bfloat16) for k, v in ref_lin.state_dict().items()})
    model = model.to("tpu")
    step = _compiled(lambda x, s: (model(x) * s).sum(), True)
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        loss = step(x.to("tpu"), scale.to("tpu"))
        loss.backward()
    torch.testing.assert_close(loss.cpu(), ref.detach(), rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(model.weight.grad.cpu().float(), ref_lin.weight.grad,
                               rtol=1e-2, atol=1e-2)
