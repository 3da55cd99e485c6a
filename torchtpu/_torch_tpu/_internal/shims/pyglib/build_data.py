"""``build_data.BuildDebugMode()``: whether timing thresholds should be the lenient ones.

True, as in TorchTPU's open-source build: a simulated chip's host time is not a TPU's, so the
programs' debug-build limits are the ones that apply."""

__all__ = ["BuildDebugMode"]


def BuildDebugMode() -> bool:  # noqa: N802 (TorchTPU's name)
    return True
