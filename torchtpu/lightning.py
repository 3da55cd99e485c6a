"""PyTorch Lightning on torchtpu's device, the Trainer and Fabric (docs/lightning.md).

``Trainer(accelerator="torchtpu")`` and ``Fabric(accelerator="torchtpu")`` train on tpu:
single-device (``devices=1``), DDP over ``tpu_dist`` (``devices=2, strategy="ddp"``) and with
``precision="bf16-mixed"`` (autocast on "tpu"). The name is not "tpu" because Lightning's "tpu"
is its XLA accelerator (torch_xla), which the Trainer and Fabric special-case by that name (XLA
strategies, XLA precision).

When a Lightning package is imported (the Trainer's ``lightning.pytorch`` or standalone
``pytorch_lightning``, Fabric's ``lightning.fabric`` or standalone ``lightning_fabric``; not when
torchtpu is, through ``_import_hooks.after_import``), this module, for that package:

- registers a ``TorchTPUAccelerator`` built on the package's ``Accelerator`` as "torchtpu" (the
  Trainer's ``AcceleratorRegistry``, Fabric's ``ACCELERATOR_REGISTRY``);
- wraps two choices of the package's connector (the Trainer's ``_AcceleratorConnector``,
  Fabric's ``_Connector``: two classes with the same code) that name CUDA where a custom
  accelerator is given: ``_choose_strategy``, the single-device strategy (Lightning takes the
  CPU as the device of every accelerator but CUDA's and MPS's), and
  ``_check_and_init_precision``, the autocast device of ``"16-mixed"`` and ``"bf16-mixed"``
  (Lightning's is "cuda" for every accelerator but the CPU's and MPS's: without CUDA
  ``torch.autocast("cuda")`` turns itself off, so bf16-mixed would train in float32 with no more
  than a warning). For this accelerator the strategy's device is the chosen chip and the
  autocast device "tpu";
- wraps the DDP strategy's construction of DDP for a tpu root device (the Trainer's
  ``DDPStrategy._setup_model``, Fabric's ``DDPStrategy.setup_module``): Lightning builds DDP
  inside a new ``torch.cuda.Stream`` whenever it passes device ids, which fails without CUDA; on
  tpu DDP is built on the current stream, with the chip's index as its device id.

The wrapped methods are Lightning 2.6.6's, private but Fabric's ``setup_module``; each wrapper
acts only for this accelerator or a tpu device and calls Lightning's method otherwise.

DDP needs no setting: Lightning's default process group backend is PyTorch's default for the
root device's type (``torch.distributed.Backend.default_device_backend_map``), which torchtpu
sets to "tpu_dist" for "tpu" when it loads.

``accelerator="auto"`` keeps Lightning's choice (XLA, MPS, CUDA, else the CPU): Lightning has
no registration point for it, and ``devices="auto"`` would then take every simulated chip and
start a DDP process for each.
"""
from __future__ import annotations

import functools
import importlib

import torch

from ._import_hooks import after_import

NAME = "torchtpu"
_ROOTS = ("lightning.pytorch", "pytorch_lightning")  # the Trainer's packages
_FABRIC_ROOTS = ("lightning.fabric", "lightning_fabric")
_classes: dict[str, type] = {}  # package root -> its TorchTPUAccelerator (Trainer or Fabric)


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
    """The accelerator class for a Lightning package: the Trainer's (``"lightning.pytorch"``,
    ``"pytorch_lightning"``) or Fabric's (``"lightning.fabric"``, ``"lightning_fabric"``), made
    the first time it is asked for."""
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


def _register_fabric(root: str, module) -> None:
    cls = accelerator_class(root)
    if NAME not in module.ACCELERATOR_REGISTRY:
        cls.register_accelerators(module.ACCELERATOR_REGISTRY)


def _fabric_autocasts_on_tpu(connector, module) -> bool:
    """Whether Fabric's ``_Connector._check_and_init_precision`` (2.6.6) would reach its last
    branch, ``MixedPrecision(precision, device="cuda")``, for this accelerator: no precision
    plugin given, a mixed precision, and none of the strategies that bring their own precision
    (XLA's, DeepSpeed, FSDP; ModelParallelStrategy refuses "16-mixed" itself)."""
    if not _ours(connector.accelerator) or connector._precision_instance is not None:
        return False
    if connector._precision_input not in ("16-mixed", "bf16-mixed"):
        return False
    own = (module.SingleDeviceXLAStrategy, module.XLAStrategy, module.XLAFSDPStrategy,
           module.DeepSpeedStrategy, module.FSDPStrategy)
    if isinstance(connector.strategy, own):
        return False
    return not (isinstance(connector.strategy, module.ModelParallelStrategy)
                and connector._precision_input != "bf16-mixed")


def _patch_fabric_connector(root: str, module) -> None:
    """Fabric's ``_Connector`` (``<fabric>.connector``) has the Trainer's two CUDA defaults in
    methods of its own: ``_choose_strategy`` (the CPU as the single device of every accelerator
    but CUDA's and MPS's) and ``_check_and_init_precision`` (autocast on "cuda" for every
    accelerator but the CPU's and MPS's)."""
    connector = module._Connector
    if getattr(connector, "_torchtpu", False):
        return
    choose_strategy = connector._choose_strategy
    init_precision = connector._check_and_init_precision

    @functools.wraps(choose_strategy)
    def _choose_strategy(self):
        if (_ours(self.accelerator) and self._num_nodes_flag == 1
                and len(self._parallel_devices) <= 1):
            return module.SingleDeviceStrategy(device=self._parallel_devices[0])
        return choose_strategy(self)

    @functools.wraps(init_precision)
    def _check_and_init_precision(self):
        if _fabric_autocasts_on_tpu(self, module):
            return module.MixedPrecision(precision=self._precision_input, device="tpu")
        return init_precision(self)

    connector._choose_strategy = _choose_strategy
    connector._check_and_init_precision = _check_and_init_precision
    connector._torchtpu = True


def _patch_fabric_ddp(root: str, module) -> None:
    """Fabric's ``DDPStrategy.setup_module`` builds DDP inside a new ``torch.cuda.Stream`` as the
    Trainer's ``_setup_model`` does; on a tpu root device it is built on the current stream."""
    strategy = module.DDPStrategy
    if getattr(strategy, "_torchtpu", False):
        return
    setup_module = strategy.setup_module

    @functools.wraps(setup_module)
    def _setup_module(self, model):
        if self.root_device.type != "tpu":
            return setup_module(self, model)
        return torch.nn.parallel.DistributedDataParallel(
            module=model, device_ids=self._determine_ddp_device_ids(), **self._ddp_kwargs)

    strategy.setup_module = _setup_module
    strategy._torchtpu = True


def install() -> None:
    """Registers the accelerator and the patches for each Lightning package once it is
    imported (now for one already imported)."""
    for root in _ROOTS:
        after_import(f"{root}.accelerators", lambda m, r=root: _register(r, m))
        after_import(f"{root}.trainer.connectors.accelerator_connector",
                     lambda m, r=root: _patch_connector(r, m))
        after_import(f"{root}.strategies.ddp", lambda m, r=root: _patch_ddp(r, m))
    for root in _FABRIC_ROOTS:
        after_import(f"{root}.accelerators", lambda m, r=root: _register_fabric(r, m))
        after_import(f"{root}.connector", lambda m, r=root: _patch_fabric_connector(r, m))
        after_import(f"{root}.strategies.ddp", lambda m, r=root: _patch_fabric_ddp(r, m))


__all__ = ["NAME", "accelerator_class", "install"]
