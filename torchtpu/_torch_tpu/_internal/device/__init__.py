"""``torch_tpu._internal.device``: the device module TorchTPU registers as ``torch.tpu``
(``_device_module``)."""
