"""``torch_tpu._internal.shims.xprof``: trace annotations (``traceme.TraceMe``)."""
