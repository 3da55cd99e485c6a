"""PyTorch Lightning on torchtpu's device (docs/ecosystem.md, "Lightning").

``Trainer(accelerator="torchtpu")`` trains on tpu: single-device (``devices=1``), DDP over
``tpu_dist`` (``devices=2, strategy="ddp"``) and with ``precision="bf16-mixed"`` (autocast on
"tpu"). The name is not "tpu" because Lightning's "tpu" is its XLA accelerator (torch_xla),
which its Trainer special-cases by that name (XLA strategies, XLA precision).

When Lightning is imported (``lightning.pytorch`` or the standalone ``pytorch_lightning``; not
when torchtpu is, through ``_import_hooks.after_import``), this module:

- registers ``TorchTPUAccelerator`` in the package's ``AcceleratorRegistry`` as "torchtpu";
- wraps two choices of the Trainer's ``_AcceleratorConnector`` that name CUDA where a custom
  accelerator is given: the single-device strategy (Lightning takes the CPU as the device of
  every accelerator but CUDA's and MPS's) and the autocast device of ``"16-mixed"`` and
  ``"bf16-mixed"`` (Lightning's is "cuda" for every accelerator but the CPU's and MPS's: without
  CUDA ``torch.autocast("cuda")`` turns itself off, so bf16-mixed would train in float32 with
  no more than a warning). For this accelerator the strategy's device is the chosen chip and
  the autocast device "tpu";
- wraps ``DDPStrategy._setup_model`` for a tpu root device: Lightning builds DDP inside a new
  ``torch.cuda.Stream`` whenever it passes device ids, which fails without CUDA; on tpu DDP is
  built on the current stream, with the chip's index as its device id.

DDP needs no setting: Lightning's default process group backend is PyTorch's default for the
root device's type (``torch.distributed.Backend.default_device_backend_map``), which torchtpu
sets to "tpu_dist" for "tpu" when it loads.

``accelerator="auto"`` keeps Lightning's choice (XLA, MPS, CUDA, else the CPU): Lightning has
no registration point for it, and ``devices="auto"`` would then take every simulated chip and
start a DDP process for each.
"""
from __future__ import annotations

import importlib

import torch

from ._import_hooks import after_import

NAME = "torchtpu"
_ROOTS = ("lightning.pytorch", "pytorch_lightning")
_classes: dict[str, type] = {}  # package root -> its TorchTPUAccelerator


def _parse_devices(devices) -> list[int]:
    """Lightning's device forms (an int n: the first n chips, -1 or "-1": all, "0,2" or [0, 2]:
    those indices) as a list of chip indices, checked against the simulated chips."""
    count = torch.tpu.device_count()
    if isinstance(devices, str):
        text = devices.strip()
        if text in ("-1", "auto"):
            devices = -1
        elif "," in text:
            devices = [int(d) for d in text.split(",") if d.strip()]
        else:
            devices = int(text)
    if isinstance(devices, int):
        if devices == -1:
            devices = count
        if devices < 1:
            raise ValueError(f"devices={devices}: give a positive number of chips, -1 or a list")
        devices = list(range(devices))
    ids = [int(d) for d in devices]
    if not ids or any(i < 0 or i >= count for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"devices={ids}: torchtpu simulates {count} chips (indices 0 to "
                         f"{count - 1}; TORCHTPU_NUM_DEVICES sets how many)")
    return ids


def _build(root: str) -> type:
    base = importlib.import_module(f"{root}.accelerators.accelerator").Accelerator
    error = importlib.import_module(f"{root}.utilities.exceptions").MisconfigurationException

    class TorchTPUAccelerator(base):
        """torchtpu's simulated TPU chips ("tpu" tensors) as a Lightning accelerator."""

        def setup_device(self, device: torch.device) -> None:
            if device.type != "tpu":
                raise error(f"the torchtpu accelerator needs a tpu device, got {device}")
            torch.tpu.set_device(device)

        def get_device_stats(self, device) -> dict:
            return torch.tpu.memory_stats(device)

        def teardown(self) -> None:
            torch.tpu.empty_cache()

        @staticmethod
        def parse_devices(devices) -> list[int]:
            return _parse_devices(devices)

        @staticmethod
        def get_parallel_devices(devices) -> list[torch.device]:
            return [torch.device("tpu", i) for i in _parse_devices(devices)]

        @staticmethod
        def auto_device_count() -> int:
            return torch.tpu.device_count()

        @staticmethod
        def is_available() -> bool:
            return torch.tpu.is_available()

        @staticmethod
        def name() -> str:
            return NAME

        @classmethod
        def register_accelerators(cls, accelerator_registry) -> None:
            accelerator_registry.register(NAME, cls, description=cls.__name__, override=True)

    TorchTPUAccelerator.__module__ = __name__
    TorchTPUAccelerator.__qualname__ = "TorchTPUAccelerator"
    return TorchTPUAccelerator


def accelerator_class(root: str = "lightning.pytorch") -> type:
    """The accelerator class for a Lightning package (``"lightning.pytorch"`` or
    ``"pytorch_lightning"``), made the first time it is asked for."""
    if root not in _classes:
        _classes[root] = _build(root)
    return _classes[root]


def __getattr__(name: str):
    if name == "TorchTPUAccelerator":  # `from torchtpu.lightning import TorchTPUAccelerator`
        return accelerator_class("lightning.pytorch")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _ours(accelerator) -> bool:
    return any(isinstance(accelerator, cls) for cls in _classes.values())


def _register(root: str, module) -> None:
    cls = accelerator_class(root)
    if NAME not in module.AcceleratorRegistry:
        cls.register_accelerators(module.AcceleratorRegistry)


def _patch_connector(root: str, module) -> None:
    connector = module._AcceleratorConnector
    if getattr(connector, "_torchtpu", False):
        return
    choose_strategy = connector._choose_strategy
    init_precision = connector._check_and_init_precision

    def _choose_strategy(self):
        if (_ours(self.accelerator) and self._num_nodes_flag == 1
                and len(self._parallel_devices) <= 1):
            strategies = importlib.import_module(f"{root}.strategies")
            return strategies.SingleDeviceStrategy(device=self._parallel_devices[0])
        return choose_strategy(self)

    def _check_and_init_precision(self):
        if (_ours(self.accelerator) and self._precision_plugin_flag is None
                and self._precision_flag in ("16-mixed", "bf16-mixed")):
            self._validate_precision_choice()
            precision = importlib.import_module(f"{root}.plugins.precision")
            return precision.MixedPrecision(self._precision_flag, "tpu")
        return init_precision(self)

    connector._choose_strategy = _choose_strategy
    connector._check_and_init_precision = _check_and_init_precision
    connector._torchtpu = True


def _patch_ddp(root: str, module) -> None:
    strategy = module.DDPStrategy
    if getattr(strategy, "_torchtpu", False):
        return
    setup_model = strategy._setup_model

    def _setup_model(self, model):
        if self.root_device.type != "tpu":
            return setup_model(self, model)
        return torch.nn.parallel.DistributedDataParallel(
            module=model, device_ids=self.determine_ddp_device_ids(), **self._ddp_kwargs)

    strategy._setup_model = _setup_model
    strategy._torchtpu = True


def install() -> None:
    """Registers the accelerator and the patches for each Lightning package once it is
    imported (now for one already imported)."""
    for root in _ROOTS:
        after_import(f"{root}.accelerators", lambda m, r=root: _register(r, m))
        after_import(f"{root}.trainer.connectors.accelerator_connector",
                     lambda m, r=root: _patch_connector(r, m))
        after_import(f"{root}.strategies.ddp", lambda m, r=root: _patch_ddp(r, m))


__all__ = ["NAME", "accelerator_class", "install"]
