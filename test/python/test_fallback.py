"""The CPU fallback: counted, warned once per op, and an error on request."""
import pytest
import torch
import torchtpu
from conftest import run_python


def test_fallback_ops_are_counted():
    torchtpu.metrics.reset()
    x = torch.randn(8, 3, device="tpu")
    torch.linalg.cross(x, x)
    torch.linalg.cross(x, x)
    fallbacks = torchtpu.metrics.fallbacks()
    assert fallbacks.get("aten::linalg_cross.out") == 2
    assert torchtpu.metrics.native_ops().get("aten::normal_") == 1
    assert torchtpu.metrics.counters()["transfer.device_to_host_bytes"] > 0
    report = torchtpu.metrics.report()
    assert "aten::linalg_cross.out" in report and "CPU fallbacks: " in report
    torchtpu.metrics.reset()
    assert torchtpu.metrics.fallbacks() == {}


def test_error_mode_names_the_op():
    x = torch.randn(3, 3, device="tpu")
    torchtpu.set_fallback_mode("error")
    assert torchtpu.get_fallback_mode() == "error"
    with pytest.raises(NotImplementedError, match=r"'aten::linalg_matrix_exp' has no native TPU kernel"):
        torch.linalg.matrix_exp(x)
    # Native kernels still work in error mode.
    assert torch.zeros(3, device="tpu").cpu().tolist() == [0.0, 0.0, 0.0]
    torchtpu.set_fallback_mode("warn")
    assert torch.linalg.matrix_exp(x).device.type == "tpu"


def test_bad_mode_is_rejected():
    with pytest.raises(ValueError, match="fallback mode"):
        torchtpu.set_fallback_mode("sometimes")


def test_environment_selects_error_mode():
    proc = run_python(
        """
        import torch, torchtpu
        print(torchtpu.get_fallback_mode())
        torch.bincount(torch.tensor([1, 2], device="tpu"))
        """,
        env={"TORCHTPU_FALLBACK": "error"}, check=False,
    )
    assert proc.stdout.strip() == "error"
    assert proc.returncode != 0 and "NotImplementedError" in proc.stderr
    assert "aten::bincount" in proc.stderr


def test_warns_once_per_op():
    out = run_python(
        """
        import warnings, torch, torchtpu
        x = torch.ones(4, 3, device="tpu")
        m = torch.eye(3, device="tpu")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                torch.linalg.cross(x, x); torch.linalg.matrix_exp(m)
        ours = [str(w.message) for w in caught if "no native TPU kernel" in str(w.message)]
        print(len(ours), sum("aten::linalg_cross.out" in m for m in ours),
              sum("aten::linalg_matrix_exp" in m for m in ours))
        print(torchtpu.metrics.fallbacks()["aten::linalg_cross.out"])
        """
    ).stdout.split()
    assert out == ["2", "1", "1", "3"]


def test_silent_mode_counts_without_warning():
    out = run_python(
        """
        import warnings, torch, torchtpu
        torchtpu.set_fallback_mode("silent")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.linalg.matrix_exp(torch.eye(3, device="tpu"))
        print(len([w for w in caught if "TPU" in str(w.message)]),
              torchtpu.metrics.fallbacks()["aten::linalg_matrix_exp"])
        """
    ).stdout.split()
    assert out == ["0", "1"]
