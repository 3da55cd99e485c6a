"""What Ray Train calls on ``torch_tpu``, called by Ray's own code in one process (no cluster):
test/ray/test_ray_train.py runs this file in a child process of its own and reads its last line.

1. ``ray.air._internal.device_manager.register_custom_torch_dist_backend("tpu_dist")``, which
   Ray's ``_setup_torch_process_group`` calls before ``init_process_group``: it imports
   ``torch_tpu._loader`` and calls ``load()``.
2. ``TPUTorchDeviceManager`` (Ray's device manager of workers that hold "TPU" resources):
   ``is_available()`` imports ``torch_tpu``; ``get_devices()`` is ``[torch.device("tpu")]``.
3. ``ray.train.torch.config._setup_torch_process_group("tpu_dist", ...)``, Ray's own set-up of a
   worker's group, here for a world of one, then a collective and a DDP step on tpu.
"""
import json
import os
import socket

os.environ.setdefault("TORCHTPU_MATMUL_PRECISION", "highest")
os.environ.setdefault("TORCHTPU_HIGHEST_ALGORITHM", "float32")  # (the CPU's GEMM: docs/testing.md)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from ray.air._internal.device_manager import (  # noqa: E402
    get_torch_device_manager_by_device_type,
    register_custom_torch_dist_backend,
)
from ray.train.torch.config import _setup_torch_process_group  # noqa: E402

out = {}
register_custom_torch_dist_backend("tpu_dist")
import torch_tpu._loader  # noqa: E402  (already imported by Ray: the same module)

out["loaded"] = torch_tpu._loader._LOADED
out["twin"] = torch_tpu.__version__.startswith("torchtpu-twin")
manager = get_torch_device_manager_by_device_type("TPU")
out["available"] = manager.is_available()
out["devices"] = [str(d) for d in manager.get_devices()]
out["streams"] = manager.supports_stream()

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ["LOCAL_RANK"] = "0"
_setup_torch_process_group("tpu_dist", world_rank=0, world_size=1,
                           init_method=f"tcp://127.0.0.1:{port}", timeout_s=60)
out["backend"] = dist.get_backend()
t = torch.arange(4.0, device="tpu")
dist.all_reduce(t)
out["all_reduce"] = t.tolist()
torch.manual_seed(0)
net = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2).to(manager.get_devices()[0]))
net(torch.ones(3, 4, device="tpu")).sum().backward()
out["grad_device"] = str(net.module.weight.grad.device)
out["grad"] = net.module.weight.grad.cpu().tolist()
dist.destroy_process_group()
print(json.dumps(out))
