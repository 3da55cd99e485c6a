"""The twin of Google TorchTPU's package (docs/coming-from-torchtpu.md): `import torch_tpu`
works without a real TorchTPU, never shadows one, and each TorchTPU name does what torchtpu's
feature under it does."""
import math
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torchtpu
from conftest import run_python

pytestmark = pytest.mark.not_in_debug_tier(
    "the TorchTPU twin's names over torchtpu's features, whose behaviour per eager mode "
    "their own files test in every tier")


def test_import_torch_tpu_as_the_first_import_of_a_fresh_process():
    # The start-up finder (torchtpu-torch_tpu.pth): torch_tpu before torch and torchtpu.
    out = run_python(textwrap.dedent("""
        import torch_tpu
        from torch_tpu import api
        import torch
        print(torch_tpu.__file__)
        print(api.tpu_device(), torch.tpu.is_initialized())
    """))
    lines = out.stdout.split()
    assert lines[0].endswith(os.path.join("torchtpu", "_torch_tpu", "__init__.py"))
    assert lines[1:] == ["tpu", "True"]


def test_a_real_torch_tpu_on_the_path_is_the_one_imported(tmp_path):
    # A package named torch_tpu anywhere on sys.path wins over the twin: the finder goes last.
    real = tmp_path / "torch_tpu"
    real.mkdir()
    (real / "__init__.py").write_text("REAL = True\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    code = "import torchtpu, torch_tpu; print(getattr(torch_tpu, 'REAL', False), torch_tpu.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["True", str(real / "__init__.py")]


def test_eager_modes_under_torchtpus_names():
    from torch_tpu._internal import execution_mode as em
    torchtpu.set_eager_mode("strict")
    assert em.get_eager_mode() == em.EagerMode.DEFER_NEVER
    assert str(em.get_eager_mode()) == "EagerMode.DEFER_NEVER"
    expected = {em.EagerMode.DEFER_AND_FUSE: "fused", em.EagerMode.DEFER_NEVER: "strict",
                em.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING: "debug",
                em.EagerMode.INTERNAL_DEFER_ALL: "fused"}
    for mode, name in expected.items():
        with em.eager_mode(mode):
            assert torchtpu.get_eager_mode() == name
            assert em.get_eager_mode() == mode
            x = torch.arange(6.0, device="tpu").reshape(2, 3) * 2
            assert torch.equal(x.cpu(), torch.arange(6.0).reshape(2, 3) * 2)
        assert torchtpu.get_eager_mode() == "strict"
    with pytest.raises(RuntimeError, match="boom"):  # restored on an exception
        with em.eager_mode(em.EagerMode.DEFER_AND_FUSE):
            raise RuntimeError("boom")
    assert em.get_eager_mode() == em.EagerMode.DEFER_NEVER
    with pytest.raises(TypeError):
        em.set_eager_mode("fused")


def test_cpu_fallback_mode_forbids_and_allows_the_fallback():
    from torch_tpu._internal import execution_mode as em
    previous = torchtpu.get_fallback_mode()
    a = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    with em.cpu_fallback_mode(False):
        assert torchtpu.get_fallback_mode() == "error"
        with pytest.raises(NotImplementedError):
            torch.linalg.svd(a.to("tpu"))  # runs through the CPU fallback
    assert torchtpu.get_fallback_mode() == previous
    with em.cpu_fallback_mode(True):
        u, s, vh = torch.linalg.svd(a.to("tpu"))
        torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a))


def test_precision_enum_and_scope():
    import torch_tpu
    a, b = (torch.randn(64, 64, generator=torch.Generator().manual_seed(i)) for i in (0, 1))
    exact = (a.double() @ b.double()).float()
    errors = {}
    for mode in (torch.tpu.Precision.DEFAULT, torch.tpu.Precision.HIGH,
                 torch.tpu.Precision.HIGHEST):
        with torch_tpu.precision(mode):
            assert torch.tpu.get_matmul_precision() == mode.value
            errors[mode] = float(((a.to("tpu") @ b.to("tpu")).cpu() - exact).abs().max())
    # One bf16 pass is far off, three are close, six are float32's product.
    assert errors[torch.tpu.Precision.DEFAULT] > 100 * errors[torch.tpu.Precision.HIGH]
    assert errors[torch.tpu.Precision.HIGHEST] <= errors[torch.tpu.Precision.HIGH]
    assert torch_tpu.Precision is torch.tpu.Precision
    with pytest.raises(ValueError, match="Precision.DEFAULT"):
        torch.tpu.precision("low")


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_synchronize_and_is_materialized(mode):
    from torch_tpu._internal import sync
    torchtpu.set_eager_mode(mode)
    x = torch.ones(8, device="tpu") * 3 + 1
    assert sync.is_materialized(x) == (mode != "fused")
    sync.synchronize([x, torch.zeros(2)], wait=False)  # (CPU tensors are ignored)
    assert sync.is_materialized(x)
    y = x * 2
    sync.synchronize()
    assert sync.is_materialized(y)
    assert torch.equal(y.cpu(), torch.full((8,), 8.0))
    with pytest.raises(ValueError, match="not on the tpu device"):
        sync.is_materialized(torch.ones(2))


def test_cache_statistics_count_fused_eagers_plans():
    torchtpu.set_eager_mode("fused")
    torch.tpu._clear_cache()
    requests, hits = torch.tpu._get_cache_requests(), torch.tpu._get_cache_hits()
    x = torch.randn(16, 16, device="tpu")
    for _ in range(3):  # the same graph three times: one plan, two hits
        ((x * 2 + 1).relu()).sum().item()
    stats = torch.tpu._get_cache_stats()
    assert stats.num_cache_reqs - requests == 3
    assert stats.num_cache_hits - hits == 2
    assert torch.tpu._get_cache_misses() == stats.num_cache_reqs - stats.num_cache_hits
    assert [e.read_count for e in stats.per_entry_stats] == [3]
    assert stats.per_entry_stats[0].compilation_duration.total_seconds() > 0
    assert "num_cache_reqs=" in str(stats)

    torch.tpu._set_cache_only(True)
    try:
        ((x * 2 + 1).relu()).sum().item()  # cached: runs
        with pytest.raises(RuntimeError, match="_set_cache_only"):
            (x - 5).abs().max().item()  # a new graph
    finally:
        torch.tpu._set_cache_only(False)
        torchtpu.sync()

    torch.tpu._set_allow_cache(False)
    try:
        torch.tpu._clear_cache()
        ((x * 2 + 1).relu()).sum().item()
        assert torch.tpu._get_cache_stats().per_entry_stats == []
    finally:
        torch.tpu._set_allow_cache(True)
    assert not torch.tpu._get_dump_on_cache_miss()


def test_dump_on_cache_miss_prints_the_new_plan():
    out = run_python(textwrap.dedent("""
        import torch, torchtpu
        torchtpu.set_eager_mode("fused")
        torch.tpu._set_dump_on_cache_miss(True)
        assert torch.tpu._get_dump_on_cache_miss()
        x = torch.ones(4, device="tpu")
        for _ in range(4):
            (x * 2 + 1).sum().item()
        print(torch.tpu._get_cache_misses())
    """))
    misses = int(out.stdout.split()[-1])
    assert 1 <= misses < 4  # (the first graph also makes x)
    assert out.stderr.count("# plan cache miss") == misses


def test_runtime_start_stop_and_hbm_summary():
    from torch_tpu import api
    assert api.tpu_device() == torch.device("tpu")
    assert torch.ones(1, device=api.tpu_device()).device == torch.device("tpu", 0)
    started = torch.tpu._init_runtime()
    assert (started.device_count, started.device_id) == (torch.tpu.device_count(),
                                                        torch.tpu.current_device())
    x = torch.ones(1024, device="tpu")
    summary = torch.tpu._hbm_usage_summary()
    assert summary.count("\n") == torch.tpu.device_count() - 1
    assert f"{torch.tpu.memory_allocated(0)} bytes allocated" in summary.splitlines()[0]
    torch.tpu._shutdown_runtime()
    assert torch.equal((x + 1).cpu(), torch.full((1024,), 2.0))  # still usable
    with pytest.raises(NotImplementedError, match="no XLA device"):
        api._xla_cpu_device()


def test_tpu_device_is_index_less_and_its_tensors_carry_their_chip_as_cudas_do():
    """api.tpu_device() is torch.device("tpu"), as TorchTPU's; used where PyTorch takes a device
    it means the current chip, as "cuda" does: a tensor made under
    torch.set_default_device(api.tpu_device()) (TorchTPU's deepseek test_set_default_device) is on
    tpu:<current chip> and prints so, as one made under "cuda" prints cuda:0 (that test's GPU
    variant passes "cuda:0"); a model moved to it reports f"{tpu_device()}:0" (TorchTPU's qwen3
    tests); a tensor already there is not copied; the default device reads back with its index,
    as torch.get_default_device() gives CUDA's."""
    from torch_tpu import api
    device = api.tpu_device()
    assert device == torch.device("tpu") and device.index is None and str(device) == "tpu"
    previous = torch.get_default_device()
    try:
        for chip in (0, 1):
            with torch.tpu.device(chip):
                torch.set_default_device(device)
                made = torch.tensor(1.0)
                assert made.device == torch.device("tpu", chip)
                assert str(made.device) == f"tpu:{chip}"
                assert torch.get_default_device() == torch.device("tpu", chip)
                assert torch.arange(3).device == made.device  # (the program's other factories)
                assert made.to(device) is made
                torch.set_default_device("cpu")
                assert str(torch.tensor(1.0).device) == "cpu"
    finally:
        torch.set_default_device(previous)
    model = torch.nn.Linear(2, 2).to(device)
    assert str(next(model.parameters()).device) == f"{device}:0"


def test_assert_close_modes_and_report():
    from torch_tpu._internal.utils import utils
    expected = torch.tensor([1.0, 2.0, 0.0, 4.0])
    actual = torch.tensor([1.0, 2.01, 1e-6, 4.0])
    utils.assert_close(actual, expected, rtol=1e-2, atol=1e-5)  # loose: passes
    with pytest.raises(AssertionError) as report:
        utils.assert_close(actual, expected, rtol=1e-2, atol=1e-5,
                           check_value=utils.CheckValueMode.STRICT)
    text = str(report.value)
    assert "Mismatched elements: 2 / 4" in text  # 2.01 (abs 0.01 > atol) and 1e-6 vs 0
    assert "Tolerance suggestions" in text
    utils.assert_close(actual, expected, rtol=None, atol=lambda v: 0.02)
    with pytest.raises(AssertionError, match="at index"):
        utils.assert_close(actual, expected, atol=lambda v: 1e-9)
    # STRICT with omitted tolerances takes torch.testing's (1.3e-6, 1e-5 for float32).
    with pytest.raises(AssertionError, match="strict check"):
        utils.assert_close(actual, expected, check_value=utils.CheckValueMode.STRICT)
    utils.assert_close(expected + 1e-8, expected, check_value=utils.CheckValueMode.STRICT)
    utils.assert_close(actual, expected * 100, check_value=utils.CheckValueMode.SKIP)
    with pytest.raises(AssertionError, match="shape mismatch"):
        utils.assert_close(actual, expected[:3], check_value=utils.CheckValueMode.SKIP)
    # A tpu result against the CPU's, through the suggested tolerances: they pass exactly.
    a = torch.randn(32, 32, generator=torch.Generator().manual_seed(0))
    with torch.tpu.precision(torch.tpu.Precision.DEFAULT):
        got = (a.to("tpu") @ a.to("tpu")).cpu()
    want = a @ a
    with pytest.raises(AssertionError) as report:
        utils.assert_close(got, want, rtol=0.0, atol=1e-6)
    pair = str(report.value).split("margin): ")[1]
    atol = float(pair.split("atol=")[1].split(",")[0])
    rtol = float(pair.split("rtol=")[1].split()[0])
    utils.assert_close(got, want, rtol=rtol * 1.001, atol=atol * 1.001)


def test_test_utils_assert_close_and_optimal_tolerances():
    from torch_tpu._internal.utils import test_utils
    expected = torch.tensor([0.5, -1.0, 4.0, 10.0])
    actual = torch.tensor([0.51, -1.0, 4.2, 10.0])
    with pytest.raises(ValueError, match="LOOSE mode is the default"):
        test_utils.assert_close(actual, expected, check_value=test_utils.CheckValueMode.LOOSE)
    # |e| <= 1 sets atol (0.01 at 0.5), |e| > 1 sets rtol (0.2 / 4 = 0.05), each times 1.2.
    atol, rtol = test_utils.compute_optimal_tolerances(actual, expected)
    assert atol == pytest.approx(0.012, rel=1e-5) and rtol == pytest.approx(0.06, rel=1e-5)
    test_utils.assert_close(actual, expected, rtol=rtol, atol=atol)
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 4"):
        test_utils.assert_close(actual, expected, rtol=rtol / 2, atol=atol)
    assert test_utils.compute_optimal_tolerances(
        [actual, actual[:2]], [expected, expected[:2]]) == (atol, rtol)
    nan = torch.tensor([float("nan"), 1.0])
    assert all(math.isnan(v) for v in test_utils.compute_optimal_tolerances(
        nan, torch.tensor([0.0, 1.0])))
    assert test_utils.compute_optimal_tolerances(nan, nan.clone()) == (0.0, 0.0)
    # check_dtype=False compares a bfloat16 result with a float32 reference in float32.
    test_utils.assert_close(expected.bfloat16(), expected, check_dtype=False)
    with pytest.raises(AssertionError, match="dtype mismatch"):
        test_utils.assert_close(expected.bfloat16(), expected)
    # Sub-byte dtypes are decoded for the comparison (the CPU has no arithmetic for them).
    packed = torch.tensor([0x21, 0x7F], dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    with pytest.raises(AssertionError, match=r"\(2,\): -6.0 vs 6.0"):
        test_utils.assert_close(packed, torch.tensor([0x21, 0x77], dtype=torch.uint8)
                                .view(torch.float4_e2m1fn_x2))


def test_log_to_stderr_routes_absl_and_logging_to_stderr():
    code = ("import logging; from absl import logging as absl_logging\n"
            "from torch_tpu._internal.utils import log_utils\n"
            "log_utils.log_to_stderr()\n"
            "absl_logging.info('from absl %d', 1); logging.getLogger('mine').info('from logging')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""
    lines = [line for line in out.stderr.splitlines() if "from " in line]
    assert len(lines) == 2 and "[INFO] absl: from absl 1" in lines[0], out.stderr
    assert "[INFO] mine: from logging" in lines[1]


def _run_with(env: dict, code: str) -> subprocess.CompletedProcess:
    names = ("ACCELERATOR_TYPE", "TORCHTPU_CHIP", "TORCHTPU_NUM_DEVICES", "TPU_VISIBLE_DEVICES",
             "TORCHTPU_MATMUL_PRECISION",
             "TPU_VISIBLE_CHIPS", "TORCH_TPU_TOPOLOGY", "TORCHTPU_TOPOLOGY")
    full = {k: v for k, v in os.environ.items() if k not in names}
    return subprocess.run([sys.executable, "-c", code], env={**full, **env}, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("env,expected", [
    ({"ACCELERATOR_TYPE": "v6e-4"}, "4 TPU v6e (simulated) None"),
    ({"ACCELERATOR_TYPE": "v5p-8"}, "4 TPU v5p (simulated) None"),  # (TensorCores: 4 chips)
    ({"ACCELERATOR_TYPE": "v5litepod-8"}, "8 TPU v5e (simulated) None"),
    ({"ACCELERATOR_TYPE": "v6e-4", "TORCHTPU_CHIP": "v4", "TORCHTPU_NUM_DEVICES": "2"},
     "2 TPU v4 (simulated) None"),  # torchtpu's own variables win
    ({"TPU_VISIBLE_DEVICES": "2,3", "TPU_VISIBLE_CHIPS": "0"}, "2 TPU v5e (simulated) None"),
    ({"TORCH_TPU_TOPOLOGY": "2,2,1"}, "4 TPU v5e (simulated) 2x2x1"),
])
def test_torch_tpus_environment_variables(env, expected):
    out = _run_with(env, "import torch, torchtpu\n"
                         "x = torch.ones(2, device='tpu')\n"
                         "print(torch.tpu.device_count(), torch.tpu.get_device_name(0),"
                         " torchtpu.metrics.estimate()['topology'])")
    assert out.stdout.strip() == expected, out.stderr


def test_a_malformed_accelerator_type_says_what_it_expects():
    out = _run_with({"ACCELERATOR_TYPE": "v6e"},
                    "import torch, torchtpu; print(torch.tpu.device_count())")
    assert out.stdout.strip() == "0"
    assert "a generation and a count like 'v6e-4'" in out.stderr


def test_xprof_trace_handler_writes_a_chrome_trace_with_the_device_timeline(tmp_path):
    import json
    from torch_tpu._internal import profiler as tpu_profiler
    model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 4)).to("tpu")
    handler = torch.profiler.xprof_trace_handler(dir_name=tmp_path, worker_rank="rank0")
    assert handler(None) == str(tmp_path) and handler.worker_rank == "rank0"
    with tpu_profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                          torch.profiler.ProfilerActivity.TPU],
                              on_trace_ready=handler):
        model(torch.randn(8, 32, device="tpu")).sum().backward()
        torch.tpu.synchronize()
    (trace,) = tmp_path.glob("rank0.*.pt.trace.json")
    events = json.loads(trace.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert kernels and all(e["dur"] > 0 for e in kernels)  # the device timeline, with estimates
    assert any(e.get("cat") == "cpu_op" and "addmm" in e["name"] for e in events)
    with pytest.raises(ValueError, match="on_trace_ready must be provided"):
        with tpu_profiler.profile():
            pass


@pytest.mark.parametrize("mode", ["strict", "fused"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_out_dtype_matmuls_keep_the_float32_accumulator(mode, dtype):
    # torch.bmm(a, b, out_dtype=torch.float32) (TorchTPU's precision notebook): PyTorch's CPU has
    # no kernel for it. The reference is the exact product of the 16-bit values, accumulated in
    # float64: the float32 accumulator is within float32 rounding of it, and a result rounded to
    # the operands' dtype is far off.
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2, 64, 48, generator=g).to(dtype)
    b = torch.randn(2, 48, 16, generator=g).to(dtype)
    bias = torch.randn(16, generator=g)
    exact = a.double() @ b.double()
    t = {k: v.to("tpu") for k, v in dict(a=a, b=b, bias=bias, b16=bias.to(dtype)).items()}
    results = {
        "bmm": (torch.bmm(t["a"], t["b"], out_dtype=torch.float32), exact),
        "mm": (torch.mm(t["a"][0], t["b"][0], out_dtype=torch.float32), exact[0]),
        "addmm": (torch.addmm(t["bias"], t["a"][0], t["b"][0], out_dtype=torch.float32),
                  bias.double() + exact[0]),
        "baddbmm": (torch.baddbmm(t["b16"], t["a"], t["b"], out_dtype=torch.float32, beta=0.5,
                                  alpha=2.0), 0.5 * bias.to(dtype).double() + 2 * exact),
    }
    for name, (got, want) in results.items():
        assert got.dtype == torch.float32, name
        torch.testing.assert_close(got.cpu().double(), want, rtol=1e-6, atol=1e-5, msg=name)
    rounded = torch.bmm(t["a"], t["b"]).cpu().double()
    assert (rounded - exact).abs().max() > 100 * (results["bmm"][0].cpu().double() - exact).abs().max()
    # The same dtype is the plain matmul; other out dtypes raise CUDA's error at the call.
    assert torch.equal(torch.bmm(t["a"], t["b"], out_dtype=dtype).cpu(), rounded.to(dtype))
    with pytest.raises(RuntimeError, match="out_dtype must be the same as input dtype"):
        torch.bmm(t["a"].float(), t["b"].float(), out_dtype=torch.bfloat16)
    torchtpu.sync()


def test_device_module_class_and_runtime_names_torchtpus_notebook_helpers_read():
    from torch_tpu.api import _device_module
    cls = _device_module.DeviceModule
    assert _device_module._DeviceModule is cls
    torch.tpu.init()
    assert cls._is_initialized and torch.tpu._is_initialized
    cls._is_initialized = False  # (TorchTPU's safe_shutdown resets it; the runtime stays up)
    assert cls.is_initialized() and cls.device_count() == torch.tpu.device_count()
    assert torch.tpu.Event(external=False).device.type == "tpu"
    with pytest.raises(ValueError, match="external"):
        torch.tpu.Event(external=True)


@pytest.mark.one_tier("a torchrun launch of two processes; tpu_dist collectives are tested by "
                     "test_distributed.py in every mode")
def test_the_singlehost_launcher_prepares_torchrun_as_torchtpus_notebook_does(tmp_path):
    # TorchTPU's distributed notebook: eval $(python -m ...singlehost_wrapper | sed 's/^/export /')
    # then torchrun --nproc_per_node=$WORLD_SIZE; each rank all-reduces its rank over tpu_dist.
    from test_distributed import free_port
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent("""
        import os, torch, torch.distributed as dist
        dist.init_process_group(backend="tpu_dist")
        x = torch.tensor([float(dist.get_rank() + 1)], device="tpu")
        dist.all_reduce(x)
        line = f"rank {dist.get_rank()} sum {x.item()} topology {os.environ['TORCH_TPU_TOPOLOGY']}\\n"
        os.write(1, line.encode())  # (one write: the ranks' lines cannot interleave)
        dist.destroy_process_group()
    """))
    command = (f"eval $({sys.executable} -m torch_tpu._internal.distributed.launchers."
               f"singlehost_wrapper | sed 's/^/export /') && "
               f"{sys.executable} -m torch.distributed.run --nproc_per_node=$WORLD_SIZE "
               f"--master-port {free_port()} {script}")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCH_TPU_TOPOLOGY", "TORCHTPU_NUM_DEVICES", "ACCELERATOR_TYPE")}
    env["ACCELERATOR_TYPE"] = "v5e-4"
    out = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True,
                         timeout=300)
    lines = sorted(re.findall(r"rank \d+ sum \S+ topology [\d,]*", out.stdout))
    assert lines == [f"rank {r} sum 10.0 topology 2,2,1" for r in range(4)], out.stderr[-2000:]


def test_float32_matmuls_default_to_torchtpus_one_pass_and_follow_torchs_setting():
    # TorchTPU's default (Precision.DEFAULT: one bfloat16 pass) without a scope; a call of
    # torch.set_float32_matmul_precision sets the device's level as it sets the CPU's; the
    # environment's TORCHTPU_MATMUL_PRECISION sets the starting level.
    code = textwrap.dedent("""
        import torch, torchtpu
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(64, 256, generator=g), torch.randn(256, 32, generator=g)
        exact = a.double() @ b.double()
        def err():
            return float(((a.to("tpu") @ b.to("tpu")).cpu().double() - exact).abs().max())
        one_pass = float(((a.bfloat16().float() @ b.bfloat16().float()).double() - exact)
                         .abs().max())
        print(torch.tpu.get_default_matmul_precision(), torch.get_float32_matmul_precision())
        print(abs(err() - one_pass) < 1e-4, err() > 1e-2)
        with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
            print(err() < 1e-4)
        torch.set_float32_matmul_precision("highest")
        print(torch.tpu.get_default_matmul_precision(), err() < 1e-4)
        torch.set_float32_matmul_precision("medium")
        print(torch.tpu.get_default_matmul_precision(), torch.get_float32_matmul_precision())
    """)
    out = _run_with({}, code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:5] == ["medium highest", "True True", "True",
                                          "highest True", "medium medium"]
    out = _run_with({"TORCHTPU_MATMUL_PRECISION": "high"},
                    "import torch, torchtpu; print(torch.tpu.get_default_matmul_precision())")
    assert out.stdout.strip() == "high", out.stderr
    out = _run_with({"TORCHTPU_MATMUL_PRECISION": "fast"},
                    "import torch, torchtpu; torch.ones(2, 2, device='tpu') @ "
                    "torch.ones(2, 2, device='tpu')")
    assert out.returncode != 0 and "TORCHTPU_MATMUL_PRECISION must be medium" in out.stderr
