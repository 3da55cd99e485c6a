"""``torch_tpu._internal``: TorchTPU's tool modules (execution modes, synchronization, precision,
debugging utilities) over torchtpu's."""
