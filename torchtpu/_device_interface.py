"""Dynamo's device interface for "tpu" (docs/compiled-mode.md, "Dynamo's device interface").

``torch._dynamo.device_interface`` keeps a ``DeviceInterface`` per device type: how Dynamo and
Inductor reach a device's runtime without naming it (devices, streams, events, synchronize,
properties, and a ``Worker`` that answers compile workers from values cached before they fork).
Dynamo takes the interfaces' ``stream`` functions for stream context managers and their
``current_stream`` and ``Event`` for streams and events it traces. torch 2.13 registers a "tpu"
entry of its own when the registry first fills (``init_device_reg``: ``TpuInterface``, for
Pallas on real TPUs through jax), so on torchtpu ``get_interface_for_device("tpu")`` answered
for another device (``device_count()`` raised NotImplementedError) and a ``torch.tpu.stream``
context in a compiled function was traced into as plain Python (a graph break). The interface
below is ``torch.tpu``'s, registered for "tpu" and every "tpu:<i>" right after
``init_device_reg`` runs (wrapped when the module is first imported: importing torchtpu imports
no Dynamo).
"""
from __future__ import annotations

import functools
from typing import Any

import torch

from . import _C, _import_hooks

_MODULE = "torch._dynamo.device_interface"
_interface = None


def _make_interface(module):
    tpu = torch.tpu

    class TpuEvent(torch.Event):
        """A ``torch.Event`` on the tpu device (Dynamo requires the interface's events to be
        torch.Event instances); ``elapsed_time`` takes any tpu event, which torch 2.13's
        ``torch.Event.elapsed_time`` refuses for a subclass."""

        def __new__(cls, enable_timing: bool = False, blocking: bool = False,
                    interprocess: bool = False):
            return super().__new__(cls, device="tpu", enable_timing=enable_timing,
                                   blocking=blocking, interprocess=interprocess)

        def elapsed_time(self, end_event: torch.Event) -> float:
            return _C.event_elapsed_time(self, end_event)

    def device_index(device: Any) -> int:
        return tpu.current_device() if device is None else tpu._index(device)

    class TpuDeviceInterface(module.DeviceInterface):
        device = tpu.device
        Event = TpuEvent
        Stream = tpu.Stream

        class Worker:
            """Answers from properties cached in the process that forks the compile workers."""

            @staticmethod
            def set_device(device: int) -> None:
                module.caching_worker_current_devices["tpu"] = device

            @staticmethod
            def current_device() -> int:
                return module.caching_worker_current_devices.get("tpu", tpu.current_device())

            @staticmethod
            def get_device_properties(device: Any = None) -> Any:
                if device is None:
                    device = TpuDeviceInterface.Worker.current_device()
                cached = module.caching_worker_device_properties
                if "tpu" not in cached:
                    cached["tpu"] = [tpu.get_device_properties(i) for i in range(tpu.device_count())]
                return cached["tpu"][device_index(device)]

        current_device = staticmethod(tpu.current_device)
        set_device = staticmethod(tpu.set_device)
        device_count = staticmethod(tpu.device_count)
        stream = staticmethod(tpu.stream)
        current_stream = staticmethod(tpu.current_stream)
        set_stream = staticmethod(tpu.set_stream)
        synchronize = staticmethod(tpu.synchronize)
        get_device_properties = staticmethod(tpu.get_device_properties)
        memory_allocated = staticmethod(tpu.memory_allocated)

        @staticmethod
        def exchange_device(device: int) -> int:
            return _C.exchange_device(device)  # (negative: nothing changes, -1)

        @staticmethod
        def maybe_exchange_device(device: int) -> int:
            return _C.exchange_device(device)

        @staticmethod
        def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
            tpu.set_stream(torch.Stream(stream_id=stream_id, device_index=device_index,
                                        device_type=device_type))

        @staticmethod
        def get_raw_stream(device_idx: int) -> int:
            # A stream is a queue of the runtime (runtime/Stream.h), named by its id.
            return tpu.current_stream(device_idx).stream_id

        @staticmethod
        def is_available() -> bool:
            return tpu.is_available()

        @staticmethod
        def get_compute_capability(device: Any = None) -> str:
            return tpu.get_device_properties(device).chip  # the generation: "v5e", "v6e", ...

        @staticmethod
        def is_bf16_supported(including_emulation: bool = False) -> bool:
            return True

    return TpuDeviceInterface


def _register(module) -> None:
    global _interface
    if _interface is None:
        _interface = _make_interface(module)
    module.register_interface_for_device("tpu", _interface)
    for i in range(torch.tpu.device_count()):
        module.register_interface_for_device(f"tpu:{i}", _interface)


def _wrap(module) -> None:
    original = module.init_device_reg
    if getattr(original, "_torchtpu", False):
        return

    @functools.wraps(original)
    def init_device_reg() -> None:
        original()  # (registers torch's own "tpu" entry)
        _register(module)

    init_device_reg._torchtpu = True
    module.init_device_reg = init_device_reg
    if module._device_initialized:
        _register(module)


def _trace_tpu_streams(trace_rules) -> None:
    # Dynamo takes an interface's ``stream`` for a stream context only when a call of it is an
    # in-graph torch function (its special handler), as torch.cuda.stream is by name in
    # trace_rules; torch.tpu.stream is named so too. (torch.tpu.current_stream is traced into:
    # it is torch.accelerator.current_stream, which Dynamo knows.) The rule map is built from
    # the names at its first use.
    trace_rules.torch_non_c_binding_in_graph_functions.setdefault(
        "torch.tpu.stream", trace_rules.TorchInGraphFunctionVariable)
    trace_rules.get_torch_obj_rule_map.cache_clear()


def install() -> None:
    _import_hooks.after_import(_MODULE, _wrap)
    _import_hooks.after_import("torch._dynamo.trace_rules", _trace_tpu_streams)
