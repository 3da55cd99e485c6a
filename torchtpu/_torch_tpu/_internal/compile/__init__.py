"""``torch_tpu._internal.compile``: TorchTPU's ``torch.compile`` backend, ``TpuBackend``, over
torchtpu's compiled mode (``_backend.py``; docs/compiled-mode.md, docs/coming-from-torchtpu.md).

Importing TorchTPU's module registers its backend as ``"tpu"`` and changes Dynamo's and
AOTAutograd's configuration for it (graph-safe RNG, collectives kept out of graphs, tracing into
``backward``). torchtpu's ``"tpu"`` is registered already (setup.py's ``torch_dynamo_backends``
entry point, torchtpu/compile/) and needs none of those settings, so importing this
module changes nothing: ``backend="tpu"`` stays torchtpu's backend, which unlike TorchTPU's takes
dynamic shapes, and ``TpuBackend()`` is TorchTPU's object with TorchTPU's refusals.
"""
from torch_tpu._internal.compile import _backend, compiler  # noqa: F401
from torch_tpu._internal.compile._backend import TpuBackend

__all__ = ["TpuBackend"]
