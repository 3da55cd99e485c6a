"""``torch.compile(model, backend="tpu")`` (docs/compiled-mode.md).

Dynamo finds this backend through the ``torch_dynamo_backends`` entry point (setup.py) the first
time a backend is looked up, so importing torch or torchtpu does not import Dynamo. Dynamo hands
it an FX graph of the user's Python; AOTAutograd turns that into functional ATen graphs (a forward
and a backward for training, one inference graph when no output needs gradients). Each ATen
graph becomes a program (``program._GraphProgram``): its first call records its ops through fused eager's
capture (in strict eager too), plans them with fused eager's passes (regions, matmul epilogues,
dead ops, memory) and keeps the plan; later calls with inputs of the same shapes replay the plan
without dispatching or recording any op, charged to the cost model as one launch. A graph whose
ops cannot all be recorded (a random op, a host read, a CPU fallback) runs op by op, with the
reason counted. Every graph compiled, its ATen ops, programs, replays, the compile time, graph
breaks and recompilations are counted (``torchtpu.metrics.compiled()``). With
the disk cache on (``TORCHTPU_CACHE_DIR`` or TorchTPU's tier-2/tier-3 variables,
``cache_location.py``), AOTAutograd's graphs are kept on disk (``cache.py``).

The package, one module per part, imports pointing one way (backend -> cache -> program ->
buckets, options): ``options`` (CompileOptions), ``buckets`` (dynamic sizes), ``program`` (the
program of one ATen graph), ``backend`` (the Dynamo backend), ``cache`` and ``cache_location``
(the disk cache), ``inductor_route`` (``torch.compile(model)``'s default backend on tpu).
Importing it imports neither Dynamo nor Inductor.
"""
from __future__ import annotations

from .backend import tpu_backend
from .options import CompileOptions
from .program import programs

__all__ = ["CompileOptions", "programs", "tpu_backend"]
