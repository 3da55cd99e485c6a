"""``torch_tpu._internal.shims``: TorchTPU's stand-ins for Google-internal libraries its
programs import (``xprof.traceme``, ``pyglib.build_data``)."""
