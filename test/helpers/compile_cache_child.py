"""A process of test_compile.py's cache tests: compiles a training step, an inference graph, a
graph with a CPU random op and one with dynamic sizes with backend "tpu" (TORCHTPU_CACHE_DIR set
by the test), runs them and prints, as one JSON line, the losses, outputs and
torchtpu.metrics.compiled()."""
import json
import sys

import torch
import torch.nn as nn

import torchtpu

batch = int(sys.argv[1])
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)).to("tpu")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step = torch.compile(model, backend="tpu")
torch.manual_seed(1)
x, y = torch.randn(batch, 32), torch.randint(0, 8, (batch,))
losses = []
for _ in range(3):
    loss = nn.functional.cross_entropy(step(x.to("tpu")), y.to("tpu"))
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(loss.item())
noisy = torch.compile(lambda t: t + torch.rand(8).to(t.device), backend="tpu")  # (a CPU random op)
with torch.no_grad():
    out = step(x.to("tpu")).cpu()
    draws = [noisy(torch.zeros(8, device="tpu")).cpu() for _ in range(2)]
# dynamic sizes: the graph loaded from the disk keeps its symbolic sizes, so its calls are
# charged per bucket as when it was compiled (docs/compiled-mode.md, "Buckets of dynamic sizes")
wide = nn.Linear(256, 256).to("tpu")
dynamic = torch.compile(wide, backend="tpu", dynamic=True)
with torch.no_grad():
    for rows in (200, 300):
        dynamic(torch.randn(rows, 256, device="tpu"))
c = torchtpu.metrics.compiled()
print(json.dumps({"buckets": c["buckets"], "bucket_programs": c["bucket_programs"],
                  "padding_s": c["padding_s"],"losses": losses, "out": out.tolist(), "draws_differ": not torch.equal(*draws),
                  "cache": c["cache"], "programs": c["programs"],
                  "program_runs": c["program_runs"], "failures": c["program_failures"],
                  "report": torchtpu.metrics.report()}))
