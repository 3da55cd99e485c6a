"""Insight (docs/insight.md): estimates for any chip after the fact, honest prices, the device
timeline in torch.profiler, and the `python -m torchtpu` commands."""
import json
import os
import subprocess
import sys

import pytest
import torch
import torchtpu
from conftest import aborted_at_exit, run_python

pytestmark = pytest.mark.not_in_debug_tier(
    "estimates: debug eager charges the launches strict eager charges (the same kernels, run "
    "at once); CI time budget")

# A small training step (matmuls, element-wise work, a reduction, the optimizer), identical in
# every process that runs it.
STEP = """
import json, torch, torchtpu

torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10)).to("tpu")
opt = torch.optim.AdamW(m.parameters())
x = torch.randn(32, 64, device="tpu")
y = torch.randint(0, 10, (32,), device="tpu")
torchtpu.metrics.reset()
for _ in range(2):
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
loss.item()
torch.tpu.synchronize()
"""


def _estimates_of_step(env: dict) -> dict:
    out = run_python(STEP + """
print(json.dumps({c: torchtpu.metrics.estimate(chip=c) for c in ["v5e", "v6e", "v7", "v4"]}
                 | {"self": torchtpu.metrics.estimate()}))
""", env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_an_estimate_for_another_chip_equals_a_run_under_that_chip():
    # Regression of the issue: the chip was fixed per process, so comparing chips meant a rerun.
    on_v5e = _estimates_of_step({"TORCHTPU_CHIP": "v5e"})
    on_v7 = _estimates_of_step({"TORCHTPU_CHIP": "v7"})
    assert on_v5e["self"]["chip"] == "v5e" and on_v7["self"]["chip"] == "v7"
    for priced, ran in ((on_v5e["v7"], on_v7["self"]), (on_v7["v5e"], on_v5e["self"])):
        assert priced["chip"] == ran["chip"]
        assert priced["launches"] == ran["launches"] > 0
        for key in ("device_time_s", "mxu_time_s", "vpu_time_s", "hbm_time_s", "flops",
                    "hbm_bytes"):
            assert priced[key] == pytest.approx(ran[key], rel=1e-9), key
    # The generations differ, and the faster chip is estimated faster.
    assert on_v5e["v7"]["device_time_s"] < on_v5e["v5e"]["device_time_s"]
    assert on_v5e["self"] == on_v5e["v5e"]


def test_the_launch_cost_is_settable_per_chip():
    out = run_python(STEP + """
e = torchtpu.metrics.estimate
print(json.dumps([e()["launch_us"], e(chip="v7")["launch_us"], e(chip="v6e")["launch_us"],
                  e(launch_us=0)["device_time_s"], e()["device_time_s"], e()["launches"],
                  e()["launch_time_s"]]))
""", env={"TORCHTPU_CHIP": "v5e", "TORCHTPU_LAUNCH_US": "v5e:1,v7:0.5"})
    v5e, v7, v6e, busy, total, launches, launch_time = json.loads(out.stdout.splitlines()[-1])
    assert (v5e, v7, v6e) == (1.0, 0.5, 2.0)
    assert total == pytest.approx(busy + launches * 1e-6, rel=1e-9)
    assert launch_time == pytest.approx(launches * 1e-6, rel=1e-9)
    bad = run_python("import torch, torchtpu; print((torch.ones(2, device='tpu') + 1).cpu())",
                     env={"TORCHTPU_LAUNCH_US": "v5e:fast"}, check=False)
    assert bad.returncode != 0 and "TORCHTPU_LAUNCH_US" in bad.stderr


def test_int8_matmuls_are_priced_at_the_int8_rate():
    a8 = torch.randint(-8, 8, (1024, 1024), dtype=torch.int8, device="tpu")
    ab = torch.randn(1024, 1024, dtype=torch.bfloat16, device="tpu")
    torch.tpu.synchronize()
    times = {}
    for name, a in (("int8", a8), ("bf16", ab)):
        torchtpu.metrics.reset()
        (torch._int_mm(a, a) if name == "int8" else a @ a).cpu()
        times[name] = {c: torchtpu.metrics.estimate(chip=c)["mxu_time_s"] for c in ("v5e", "v7")}
    # v5e: 394 int8 TOP/s against 197 bf16 TFLOP/s. v7 has no int8 MXU path (JAX's table:
    # "Not Available"; XLA converts the operands): its int8 matmuls run at the bf16 rate.
    assert times["int8"]["v5e"] == pytest.approx(times["bf16"]["v5e"] / 2, rel=1e-9)
    assert times["int8"]["v7"] == pytest.approx(times["bf16"]["v7"], rel=1e-9)


def test_fallback_ops_are_priced_as_if_native_and_flagged():
    # Regression of the issue: ops through the CPU fallback were priced at 0 us and 0 launches.
    a = torch.randn(256, 256, dtype=torch.float64, device="tpu")
    x = torch.randn(8, 3, device="tpu")
    torch.tpu.synchronize()
    torchtpu.metrics.reset()
    (a @ a).cpu()
    torch.linalg.cross(x, x).cpu()
    est = torchtpu.metrics.estimate()
    flagged = est["priced_as_native_ops"]
    assert flagged == {"aten::mm": 1, "aten::linalg_cross.out": 1}, flagged
    assert est["priced_as_native"] == 2
    times = torchtpu.metrics.op_times()
    assert times["aten::mm"] > 0 and times["aten::linalg_cross.out"] > 0
    assert est["flops"] >= 2 * 256**3
    assert "priced as if native" in torchtpu.metrics.report()


def _profile_step(activities, **kw):
    from torch.profiler import profile

    m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                            torch.nn.Linear(128, 8)).to("tpu")
    x = torch.randn(16, 64, device="tpu")
    m(x).sum().item()
    torch.tpu.synchronize()
    torchtpu.metrics.reset()
    with profile(activities=activities, **kw) as prof:
        loss = m(x).sum()
        loss.backward()
        loss.item()
        torch.tpu.synchronize()
    return prof


def test_the_profiler_shows_one_device_event_per_launch(tmp_path):
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity

    prof = _profile_step([ProfilerActivity.CPU, ProfilerActivity.TPU], profile_memory=True)
    est = torchtpu.metrics.estimate()
    device = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    assert len(device) == est["launches"] > 0
    # Each event lasts the cost model's estimate (whole nanoseconds in the trace).
    total_us = sum(e.time_range.elapsed_us() for e in device)
    assert total_us == pytest.approx(est["device_time_s"] * 1e6, abs=1e-3 * len(device))
    assert sum(e.self_device_time_total for e in prof.key_averages()) > 0
    if torchtpu._C.get_eager_mode() != "fused":
        # Each launch is charged to the CPU op that issued it (fused eager issues its regions
        # when the pending graph runs, at the op that needed a value).
        by_name = {e.key: e for e in prof.key_averages()}
        assert by_name["aten::addmm"].device_time_total > 0
        assert by_name["aten::mm"].device_time_total > 0
    # The device allocator's events, charged to the ops that allocated (the "TPU Mem" column).
    assert any(e.device_memory_usage > 0 for e in prof.events()), "no device allocation seen"
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in trace if e.get("cat") == "kernel"]
    assert len(kernels) == len(device)
    assert all("estimated for TPU" in e["args"]["device time"] for e in kernels)
    # The measured host time of each launch's work, as an annotation (fused eager's regions are
    # launched before they are charged and carry none).
    host = [e["args"]["host us (measured, this machine)"] for e in kernels]
    measured = [float(h) for h in host if h[0].isdigit()]
    if torchtpu._C.get_eager_mode() != "fused":
        assert len(measured) >= len(kernels) // 2 and all(m > 0 for m in measured), host
    assert any(e.get("cat") == "ac2g" for e in trace) or torchtpu._C.get_eager_mode() == "fused"


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_host_times_count_all_device_work_once(mode):
    """torchtpu.metrics.host_times() sees the work run on the issuing thread (the fused attention,
    convolutions, debug eager) as well as the stream's, and counts every nanosecond once: a
    product run inside a fused region is under its own name, not the region's too."""
    import time
    import torch.nn.functional as F
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 128, 64, device="tpu") for _ in range(3))
    a = torch.randn(1024, 1024, device="tpu")
    img, w = torch.randn(2, 3, 32, 32, device="tpu"), torch.randn(8, 3, 3, 3, device="tpu")

    def step():
        with torchtpu.eager_mode(mode):
            out = F.scaled_dot_product_attention(q, k, v)
            y = torch.relu(a @ a + 1.0)  # fused eager: a matmul region with its epilogue
            c = F.conv2d(img, w)
            (out.sum() + y.sum() + c.sum()).item()

    step()  # (fused eager plans the graph in its first run)
    torch.tpu.synchronize()
    torchtpu.metrics.reset()
    start = time.perf_counter()
    step()
    wall = time.perf_counter() - start
    times = torchtpu.metrics.host_times()
    assert times.get("aten::_scaled_dot_product_flash_attention", 0) > 0, times  # (no mask)
    assert times.get("aten::convolution_overrideable", 0) > 0, times
    product = sum(t for name, t in times.items() if name.startswith("aten::mm"))
    # (The 1024^3 product is most of the work: counted twice, the sum would pass the wall time.)
    assert product > 0.3 * wall, times
    assert sum(times.values()) <= wall, (wall, times)


def test_the_profiler_records_no_device_events_unless_asked():
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity

    prof = _profile_step([ProfilerActivity.CPU])
    assert not [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    assert torchtpu.metrics.estimate()["launches"] > 0  # still charged


# The autograd profiler with use_device="tpu" (its default use_kineto=False: PyTorch's fallback
# mode) records a device event through PyTorch's PrivateUse1 profiler stubs as every op starts and
# ends, and reports the time between them as the op's device time.
DEVICE_TIME_PER_OP = """
import json, torch, torchtpu
from torch.autograd.profiler import profile, record_function
side = torch.tpu.Stream()
x, y = torch.randn(256, 256, device="tpu"), torch.randn(256, 256, device="tpu")
(x @ y).cpu()  # (warm-up)
start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
with profile(use_device="tpu", record_shapes=True) as prof:
    with torch.tpu.stream(side):
        start.record()
        with record_function("products"):
            z = x
            for _ in range(10):
                z = z @ y
        end.record()
    side.synchronize()
    model = torch.nn.Linear(256, 8).to("tpu")
    model(z).sum().backward()
    torch.tpu.synchronize()
events = prof.function_events
print(json.dumps({
    "events": len(events),
    "min_device_us": min(e.device_time_total for e in events),
    "min_average_us": min(min(a.device_time_total, a.self_device_time_total)
                          for a in prof.key_averages()),
    "products_us": next(e.device_time_total for e in events if e.name == "products"),
    "between_events_us": start.elapsed_time(end) * 1000,
    "products": sum(e.device_time_total for e in events if e.name == "aten::matmul"
                    and e.cpu_parent is not None and e.cpu_parent.name == "products"),
}))
"""


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_the_autograd_profilers_device_time_per_op_is_measured_on_the_tpu_stream(mode):
    """Every op under torch.autograd.profiler.profile(use_device="tpu") logged "PrivateUse1 used
    in profiler but not enabled" (no stubs were registered) and the device times were garbage
    (-3.7e17 us; negative key_averages). Now each op's device time is the time between marks on
    the current tpu stream (csrc/api/Profiler.cpp), as torch.tpu.Event's: never negative, and a
    range's time lies within that of events recorded around it on the same stream (and, where
    ops run as they are issued, is most of it). Fused eager's recorded products run when the
    graph is flushed, outside their ops' marks."""
    proc = run_python(DEVICE_TIME_PER_OP, env={"TORCHTPU_EAGER_MODE": mode})
    assert "not enabled" not in proc.stderr and "RecordFunction callback" not in proc.stderr, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["events"] > 20 and r["min_device_us"] >= 0 and r["min_average_us"] >= 0, r
    # (whole microseconds in the profiler's events)
    assert r["products_us"] <= r["between_events_us"] + 1, r
    if mode != "fused":
        assert r["products_us"] >= 0.5 * r["between_events_us"] > 0, r
        assert 0 < r["products"] <= r["products_us"] + 10, r


def _torchtpu_command(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchtpu", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def test_the_estimate_command_prices_a_script_for_each_chip(tmp_path):
    script = tmp_path / "step.py"
    script.write_text(STEP + "print('step done')\n")
    out_json, plot = tmp_path / "est.json", tmp_path / "roofline.png"
    proc = _torchtpu_command("estimate", "--chips", "v5e,v6e,v7", "--json", str(out_json),
                             "--plot", str(plot), "--samples", "64", "--price", "v7=5",
                             str(script))
    assert proc.returncode == 0, proc.stderr
    assert "step done" in proc.stdout
    data = json.loads(out_json.read_text())
    rows = {r["chip"]: r for r in data["chips"]}
    assert list(rows) == ["v5e", "v6e", "v7"]
    for r in rows.values():
        assert r["device_time_s"] > 0 and r["fits_in_hbm"] and r["bottleneck"]
        assert r["chips"] == 1 and r["time_s"] == r["device_time_s"]
        assert r["price_per_run_usd"] == pytest.approx(
            r["time_s"] * r["price_per_chip_hour_usd"] / 3600)
        assert r["price_per_million_samples_usd"] == pytest.approx(
            r["price_per_run_usd"] / 64 * 1e6)
    assert rows["v7"]["price_per_chip_hour_usd"] == 5.0
    assert plot.stat().st_size > 10000
    for chip in rows:
        assert f"\n{chip} " in proc.stdout


# A data-parallel step on two ranks, one simulated chip each (DDP all-reduces the gradients).
DDP_STEP = """
import torch, torch.distributed as dist, torchtpu
dist.init_process_group()
dev = torch.device("tpu", torch.tpu.current_device())
torch.manual_seed(0)
m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(256, 256).to(dev))
torchtpu.metrics.reset()  # the step only (DDP's set-up broadcasts the parameters)
loss = m(torch.randn(16, 256, device=dev)).square().mean()
loss.backward()
torch.tpu.synchronize()
dist.destroy_process_group()
print("step done")
"""


@pytest.mark.one_tier("combining the ranks' estimates does not depend on the eager mode; each "
                     "mode's estimate of a script is test_the_estimate_command_prices_a_script_for_each_chip")
def test_the_estimate_command_estimates_a_slice_under_torchrun(tmp_path):
    """--nproc-per-node runs the script as ranks under torchrun; the slice's time is its slowest
    rank's, its collectives are priced on --topology, and the price pays every chip."""
    script = tmp_path / "ddp_step.py"
    script.write_text(DDP_STEP)
    out_json = tmp_path / "slice.json"
    proc = _torchtpu_command("estimate", "--nproc-per-node", "2", "--topology", "2x1",
                             "--chips", "v5e,v5p", "--json", str(out_json), "--samples", "32",
                             str(script))
    # (torchrun exits with 1 when a rank aborted at exit after writing its estimate: conftest's
    # EXIT_ABORT; the rank's figures are all there and checked below.)
    assert proc.returncode == 0 or (
        aborted_at_exit(proc.returncode, proc.stdout + proc.stderr)
        and proc.stdout.count("step done") == 2), proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "a slice of 2 chips (2 ranks), topology 2x1" in proc.stdout
    rows = {r["chip"]: r for r in json.loads(out_json.read_text())["chips"]}
    # The gradients' all-reduce (256 x 256 + 256 float32) on two chips: one link one way.
    grad_bytes = (256 * 256 + 256) * 4
    for chip, link in (("v5e", 9e10), ("v5p", 1.8e11)):
        r = rows[chip]
        assert r["chips"] == 2 and r["ranks"] == 2 and r["topology"] == "2x1"
        assert r["time_s"] == max(r["time_per_rank_s"]) and min(r["time_per_rank_s"]) > 0
        assert r["ici_time_s"] == pytest.approx(max(1e-6, 2 * 0.5 * grad_bytes / (link / 2)))
        assert r["price_per_run_usd"] == pytest.approx(
            2 * r["time_s"] * r["price_per_chip_hour_usd"] / 3600)
        assert r["price_per_million_samples_usd"] == pytest.approx(
            r["price_per_run_usd"] / 32 * 1e6)


def test_the_ici_model_follows_the_slice_topology():
    """TORCHTPU_TOPOLOGY lays each collective's group along the slice's axes: an all-reduce uses
    the links of every axis it spans (a wraparound axis both ways at W, others one way at W / 2)
    and waits for the hops of each; a topology the chip cannot have, or too small for the group,
    is an error that says what to set."""
    out = run_python("""
import json, torchtpu
res = {}
for chip, chips in (("v5e", 4), ("v5e", 8), ("v5e", 16), ("v5p", 16), ("v5p", 64), ("v5p", 8)):
    torchtpu.metrics.reset()
    torchtpu._C.charge_collective("all_reduce", float(64 * 2**20), chips)
    e = torchtpu.metrics.estimate(chip=chip)
    res[f"{chip}/{chips}"] = [e["ici_time_s"], e["topology"]]
for chips in (128,):
    try:
        torchtpu._C.charge_collective("all_reduce", 1024.0, chips)
    except ValueError as err:
        res["too_small"] = str(err)
print(json.dumps(res))
""", env=dict(os.environ, TORCHTPU_TOPOLOGY="v5e:4x4,v5p:4x4x4", TORCHTPU_CHIP="v5p"))
    res = json.loads(out.stdout.strip().splitlines()[-1])
    v = 64 * 2**20

    def all_reduce(n, bandwidth, hops):
        return max(hops * 1e-6, 2 * (n - 1) / n * v / bandwidth)

    w5e, w5p = 9e10, 1.8e11
    assert res["v5e/4"] == [pytest.approx(all_reduce(4, w5e / 2, 3)), "4x4"]       # a row
    assert res["v5e/8"][0] == pytest.approx(all_reduce(8, w5e, 3 + 1))           # two rows
    assert res["v5e/16"][0] == pytest.approx(all_reduce(16, w5e, 6))             # the slice
    assert res["v5p/16"] == [pytest.approx(all_reduce(16, 2 * w5p, 4)), "4x4x4"]  # wraparounds
    assert res["v5p/64"][0] == pytest.approx(all_reduce(64, 3 * w5p, 6))
    assert res["v5p/8"][0] == pytest.approx(all_reduce(8, w5p + w5p / 2, 2 + 1))
    assert "over 128 chips does not fit the slice topology 4x4x4 (64 chips)" in res["too_small"]
    bad = run_python("import torchtpu\ntorchtpu._C.charge_collective('all_reduce', 8.0, 2)",
                     env=dict(os.environ, TORCHTPU_TOPOLOGY="2x2x2"), check=False)
    assert "has 3 axes; v5e's torus has 2" in bad.stderr and "v5p:2x2x2" in bad.stderr


def test_the_estimate_command_reports_a_failing_script(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("import torch\nx = torch.ones(3, device='tpu') * 2\nraise ValueError('boom')\n")
    proc = _torchtpu_command("estimate", "--chips", "v5e", str(script))
    assert proc.returncode == 1
    assert "raised ValueError: boom" in proc.stdout and "\nv5e " in proc.stdout


def test_the_info_command_names_chips_and_settings(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "torchtpu", "info", "--json",
                           str(tmp_path / "info.json")], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, TORCHTPU_LAUNCH_US="1.5"))
    assert proc.returncode == 0, proc.stderr
    assert "torch: " + torch.__version__ in proc.stdout
    assert "TORCHTPU_LAUNCH_US=1.5" in proc.stdout
    info = json.loads((tmp_path / "info.json").read_text())
    assert [c["name"] for c in info["chips"]] == ["v4", "v5e", "v5p", "v6e", "v7"]
    assert info["launch cost (us)"] == pytest.approx(1.5)


# ---- Dry runs


def _strict(fn):
    """Runs fn in strict eager (a dry run charges op by op, as strict eager does)."""
    mode = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode("strict")
    try:
        return fn()
    finally:
        torchtpu.set_eager_mode(mode)


def _llama_step(seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=176,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)
    with torch.device("tpu"):
        model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters())
    ids = torch.randint(0, 128, (2, 32), device="tpu")
    torchtpu.metrics.reset()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch.tpu.synchronize()
    return torchtpu.metrics.op_times(), torchtpu.metrics.estimate(), loss


def test_a_dry_run_charges_what_running_charges():
    """Differential: a Hugging Face Llama training step, run with values and in a dry run,
    is charged the same launches, per op, to the picosecond."""
    real_times, real, _ = _strict(_llama_step)
    with torchtpu.dry_run():
        assert torchtpu.is_dry_run()
        dry_times, dry, loss = _strict(_llama_step)
        assert loss.shape == () and loss.dtype == torch.float32 and loss.device.type == "tpu"
    assert not torchtpu.is_dry_run()
    assert dry["launches"] == real["launches"] > 100
    assert dry_times.keys() == real_times.keys()
    for op, t in real_times.items():
        assert dry_times[op] == pytest.approx(t, rel=1e-12), op
    assert torchtpu.metrics.counters()["dry_run.ops"] > 100


def test_reading_values_in_a_dry_run_is_an_error_that_names_it():
    with torchtpu.dry_run():
        x = torch.ones(4, device="tpu") * 3
        for read in (lambda: x.sum().item(), lambda: x.cpu(), lambda: bool(x[0] > 1),
                     lambda: x.tolist()):
            with pytest.raises(RuntimeError, match="this is a dry run"):
                read()
        with pytest.raises(RuntimeError, match="dry run"):
            print(x)
        # An op whose result's shape depends on values.
        with pytest.raises(RuntimeError, match="cannot run in a dry run"):
            torch.nonzero(x)
        # The checks made at the call read no device value in a dry run (masked_fill_ reads a
        # device value of another dtype otherwise, as CUDA's kernel does).
        x.masked_fill_(x > 0, torch.tensor(-1.0, dtype=torch.float64, device="tpu"))
    # After the dry run its tensors still have no values.
    with pytest.raises(RuntimeError, match="made in a dry run"):
        x.cpu()
    assert torch.ones(2, device="tpu").sum().item() == 2.0  # and the device works as before


def test_a_dry_run_runs_out_of_memory_as_the_chip_would_without_host_memory():
    def rss():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))

    torch.tpu.empty_cache()
    capacity = torch.tpu.mem_get_info()[1]
    before = rss()
    with torchtpu.dry_run():
        # 12 GiB of device tensors on the simulated 16 GiB v5e, with no host memory behind them.
        big = [torch.empty(2**30, dtype=torch.float32, device="tpu") for _ in range(3)]
        for t in big:
            t.normal_()
            t.mul_(2)
        assert torch.tpu.memory_allocated() >= 12 * 2**30
        assert rss() - before < 256 * 2**20
        with pytest.raises(torch.OutOfMemoryError, match="TPU out of memory"):
            torch.empty(capacity, dtype=torch.uint8, device="tpu")
        del big, t
    torch.tpu.empty_cache()
    assert torch.tpu.memory_reserved() < 2**30


def test_the_environment_turns_a_dry_run_on_for_the_process():
    out = run_python("""
        import torch, torchtpu
        assert torchtpu.is_dry_run()
        w = torch.empty(4096, 4096, device="tpu", dtype=torch.bfloat16)
        x = torch.empty(512, 4096, device="tpu", dtype=torch.bfloat16)
        torchtpu.metrics.reset()
        y = x @ w
        print(torchtpu.metrics.estimate()["flops"], y.shape)
        y.cpu()
    """, env={"TORCHTPU_DRY_RUN": "1"}, check=False)
    assert out.returncode != 0 and "this is a dry run" in out.stderr
    assert out.stdout.split()[0] == str(float(2 * 512 * 4096 * 4096))


# ---- Memory tools


def _allocate_named_buffer():
    t = torch.ones(300_000, device="tpu")  # 1.2 MB: the large pool
    t.add_(1)
    t.sum().item()  # (fused eager: makes it real here)
    return t


def test_the_memory_history_records_allocations_and_frees_with_python_stacks():
    torch.tpu.synchronize()
    torch.tpu.memory._record_memory_history(max_entries=10000)
    try:
        t = _allocate_named_buffer()
        address = t.untyped_storage().data_ptr()
        del t
        torch.tpu.synchronize()
        snap = torch.tpu.memory._snapshot()
    finally:
        torch.tpu.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][0]
    allocs = [e for e in trace if e["action"] == "alloc" and e["addr"] == address]
    frees = [e for e in trace if e["action"] == "free_completed" and e["addr"] == address]
    assert allocs and frees and frees[-1]["time_us"] >= allocs[-1]["time_us"]
    frames = allocs[-1]["frames"]
    assert any(f["filename"].endswith("test_insight.py") for f in frames), frames
    assert any(f["name"] in ("_allocate_named_buffer",
                             "test_the_memory_history_records_allocations_and_frees_with_python_stacks")
               for f in frames), frames
    # Stopped: nothing more is recorded.
    u = torch.ones(10, device="tpu") + 1
    assert torch.tpu.memory._snapshot()["device_traces"][0] == []
    del u


def test_memory_snapshots_read_in_pytorch_memory_visualizer(tmp_path):
    from torch.cuda import _memory_viz

    torch.tpu.memory._record_memory_history(max_entries=1000)
    try:
        keep = [_allocate_named_buffer() for _ in range(3)]
        torch.tpu.synchronize()
        path = tmp_path / "snapshot.pickle"
        torch.tpu.memory._dump_snapshot(str(path))
    finally:
        torch.tpu.memory._record_memory_history(enabled=None)
    import pickle

    snap = pickle.loads(path.read_bytes())
    live = sum(s["allocated_size"] for s in snap["segments"] if s["device"] == 0)
    assert live == torch.tpu.memory_allocated(0)
    assert torch.tpu.memory_snapshot() and all("blocks" in s for s in torch.tpu.memory_snapshot())
    # PyTorch's own tools read it.
    assert "total_allocated" in _memory_viz.segsum(snap)
    for html in (_memory_viz.trace_plot(snap), _memory_viz.segment_plot(snap)):
        assert "MemoryViz.js" in html and len(html) > 1000
    del keep


def test_memory_summary_tells_the_allocators_figures():
    x = torch.ones(1024, 1024, device="tpu:1")
    torch.tpu.synchronize(1)
    text = torch.tpu.memory_summary("tpu:1")
    assert "device 1" in text and "simulated v5e HBM" in text
    allocated = torch.tpu.memory_stats(1)["allocated_bytes.all.current"]
    line = next(l for l in text.splitlines() if l.strip().startswith("Allocated memory"))
    assert f"{allocated / 2**20:.2f} MiB" in line
    assert len(torch.tpu.memory_summary(abbreviated=True).splitlines()) < len(text.splitlines())
    del x


def test_devices_run_in_parallel_in_the_estimate():
    a = {d: torch.randn(512, 512, device=f"tpu:{d}") for d in (0, 1)}
    torch.tpu.synchronize(0)
    torch.tpu.synchronize(1)
    torchtpu.metrics.reset()
    for d in (0, 1):
        with torch.tpu.device(d):
            (a[d] @ a[d]).sum().item()
    with torch.tpu.device(0):
        (a[0] @ a[0]).sum().item()
    est = torchtpu.metrics.estimate()
    per = est["device_time_per_device_s"]
    assert set(per) == {0, 1}
    assert per[0] == pytest.approx(2 * per[1], rel=1e-9)
    assert est["parallel_time_s"] == per[0]
    assert est["device_time_s"] == pytest.approx(per[0] + per[1], rel=1e-9)


def test_the_estimate_example_runs(tmp_path):
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "estimate_chips.py")
    proc = subprocess.run([sys.executable, example, "--trace", str(tmp_path / "t.json")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "1.21B parameters" in proc.stdout and "fits in 16 GiB" in proc.stdout
    trace = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert any(e.get("cat") == "kernel" for e in trace)
