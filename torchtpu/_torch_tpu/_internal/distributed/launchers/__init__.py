"""``torch_tpu._internal.distributed.launchers``: preparing torchrun's environment on one host."""
