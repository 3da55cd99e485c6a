"""``torch_tpu._internal.shims.pyglib``: build facts (``build_data``)."""
