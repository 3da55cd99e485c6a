"""Eager modes: the API, asynchronous strict eager, synchronous debug eager and NaN checks."""
import pytest
import torch
import torchtpu
from conftest import run_python


@pytest.fixture(autouse=True)
def _restore_mode():
    mode = torchtpu.get_eager_mode()
    yield
    torchtpu.set_check_nans(False)
    torchtpu.set_eager_mode(mode)


def test_default_is_strict_and_modes_switch():
    assert torchtpu.get_eager_mode() in ("strict", "debug", "fused")  # the suite runs in each
    torchtpu.set_eager_mode("debug")
    assert torchtpu.get_eager_mode() == "debug"
    with torchtpu.eager_mode("strict"):
        assert torchtpu.get_eager_mode() == "strict"
    assert torchtpu.get_eager_mode() == "debug"
    with pytest.raises(ValueError, match="Unknown eager mode"):
        torchtpu.set_eager_mode("lazy")


@pytest.mark.parametrize("env,expected", [
    ({}, "strict"),
    ({"TORCHTPU_EAGER_MODE": "debug"}, "debug"),
    ({"TPU_LAUNCH_BLOCKING": "1"}, "debug"),
    ({"TPU_DEFER_AND_FUSE": "1"}, "fused"),  # TorchTPU's variable
    ({"TORCH_TPU_DEFER_AND_FUSE": "1"}, "fused"),
    ({"TORCHTPU_EAGER_MODE": "fused"}, "fused"),
])
def test_mode_from_environment(env, expected):
    base = {"TORCHTPU_EAGER_MODE": "", "TPU_LAUNCH_BLOCKING": "", "TORCH_TPU_DEFER_AND_FUSE": "",
            "TPU_DEFER_AND_FUSE": ""}
    out = run_python("import torchtpu; print(torchtpu.get_eager_mode())", env={**base, **env})
    assert out.stdout.strip() == expected


def bad_scatter():
    x = torch.zeros(4, device="tpu")
    index = torch.tensor([0, 9], device="tpu")  # 9 is out of range: found only when it runs
    x.scatter_(0, index, torch.ones(2, device="tpu"))
    return x


def test_strict_errors_surface_at_the_next_synchronization_naming_the_op():
    torchtpu.set_eager_mode("strict")
    x = bad_scatter()  # returns: the kernel has not run yet
    with pytest.raises(RuntimeError, match=r"TPU error in 'aten::scatter.*' on tpu:0 .*index 9 is out of bounds"):
        torch.tpu.synchronize()
    # Nothing is left pending: the next operations work.
    assert (torch.ones(3, device="tpu") * 2).sum().item() == 6.0
    del x


def test_strict_errors_of_work_run_on_the_issuing_thread_surface_at_the_next_synchronization():
    """Parallel work (here a scatter into 100 000 elements) enqueued on an idle stream runs on the
    issuing thread (runtime/Stream.h): its error is still kept for the next synchronization, and
    work queued behind a busy stream keeps its order."""
    torchtpu.set_eager_mode("strict")
    x = torch.zeros(100_000, device="tpu")
    index, src = torch.tensor([0, 100_009], device="tpu"), torch.ones(2, device="tpu")
    torch.tpu.synchronize()  # (idle)
    before = torchtpu.metrics.counters().get("stream.work_run_inline", 0)
    x.scatter_(0, index, src)  # returns
    assert torchtpu.metrics.counters().get("stream.work_run_inline", 0) == before + 1
    with pytest.raises(RuntimeError, match=r"TPU error in 'aten::scatter.*' on tpu:0 .*index 100009 is out of bounds"):
        torch.tpu.synchronize()
    # small work on the worker, then parallel work reading its result, then small work again
    y = torch.ones(8, device="tpu")
    for _ in range(50):
        y = y + 1
    big = torch.arange(100_000, device="tpu", dtype=torch.float32) * y[3] + y.sum()
    assert big[10].item() == 10 * 51 + 8 * 51 and (y * 2).sum().item() == 8 * 102


def test_debug_errors_are_raised_at_the_faulting_op():
    torchtpu.set_eager_mode("debug")
    with pytest.raises(RuntimeError, match="out of bounds"):
        bad_scatter()


def test_debug_nan_check_names_the_first_op():
    torchtpu.set_eager_mode("debug")
    torchtpu.set_check_nans(True)
    x = torch.tensor([1.0, -1.0], device="tpu")
    y = x * 2  # finite
    with pytest.raises(RuntimeError, match=r"TORCHTPU_CHECK_NANS: aten::log\.out produced NaN"):
        torch.log(y)
    torchtpu.set_check_nans(False)
    assert torch.isnan(torch.log(y)).any().item()


def test_strict_results_match_debug_results():
    torch.manual_seed(0)
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    results = {}
    for mode in ("debug", "strict"):
        torchtpu.set_eager_mode(mode)
        ta, tb = a.to("tpu"), b.to("tpu")
        h = torch.relu(ta @ tb + 1).softmax(-1)
        h.mul_(3).add_(ta[:, :16])
        results[mode] = h.cpu()
    assert torch.equal(results["strict"], results["debug"])


def test_streams_order_work_in_strict_mode():
    torchtpu.set_eager_mode("strict")
    s = torch.tpu.Stream()
    x = torch.ones(1000, device="tpu")
    with torch.tpu.stream(s):
        s.wait_stream(torch.tpu.default_stream())
        y = x * 3  # runs on s, after x was filled on the default stream
    torch.tpu.default_stream().wait_stream(s)
    assert y.sum().item() == 3000.0


def test_queued_work_never_releases_python_tensors_on_its_thread():
    # Regression (OptimizerInfo sweep): queued work was the last owner of tensors Python had
    # dropped, released them on the stream's thread (which needs the GIL) while the host held
    # the GIL waiting for that stream in .item(): a deadlock. Run in a subprocess so that a
    # regression fails on the timeout instead of hanging the suite.
    out = run_python(
        """
        import torch, torchtpu
        torchtpu.set_eager_mode("strict")
        total = 0.0
        for i in range(300):
            x = torch.full((64,), float(i), device="tpu")
            y = x * 2
            del x
            total += y.sum().item()
        print(total)
        """
    ).stdout.strip()
    assert float(out) == sum(128.0 * i for i in range(300))


BINARY = {
    "add": lambda x, y: x + y, "add_alpha": lambda x, y: torch.add(x, y, alpha=-0.5),
    "sub": lambda x, y: x - y, "sub_alpha": lambda x, y: torch.sub(x, y, alpha=2),
    "mul": lambda x, y: x * y, "div": lambda x, y: x / y,
    # with Python numbers
    "add_number": lambda x, y: x + 0.25, "rsub_number": lambda x, y: 1 - x,
    "mul_number": lambda x, y: x * 3, "div_number": lambda x, y: x / 1.5, "mul_bool": lambda x, y: x * True,
}
# Exact in IEEE arithmetic: compared bit for bit (the others within the dtype's tolerance).
EXACT = {"add", "add_alpha", "sub", "sub_alpha", "mul", "div", "add_number", "rsub_number",
         "mul_number", "div_number", "mul_bool", "neg"}
UNARY = ["sigmoid", "tanh", "exp", "sqrt", "rsqrt", "neg", "log", "sin", "cos", "reciprocal", "erf",
         "exp2", "log1p", "expm1"]
for _name in UNARY:
    BINARY[_name] = lambda x, y, name=_name: getattr(torch, name)(x.abs() if name in ("sqrt", "rsqrt", "log") else x)
BINARY["silu"] = lambda x, y: torch.nn.functional.silu(x)
IN_PLACE = {
    "add_": lambda x, y: x.add_(y), "sub_": lambda x, y: x.sub_(y, alpha=3),
    "mul_": lambda x, y: x.mul_(y), "div_": lambda x, y: x.div_(y), "add_self": lambda x, y: x.add_(x),
    "mul_number_": lambda x, y: x.mul_(0.5), "sub_number_": lambda x, y: x.sub_(2),
    "exp_": lambda x, y: x.exp_(), "tanh_": lambda x, y: x.tanh_(), "sqrt_": lambda x, y: x.abs_().sqrt_(),
    "neg_": lambda x, y: x.neg_(), "silu_": lambda x, y: torch.nn.functional.silu(x, inplace=True),
}


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_binary_ops_of_same_shape_tensors_match_the_cpu_with_its_strides(mode, dtype):
    # add/sub/mul/div of two same-shape contiguous float tensors (or of one and a Python number)
    # and the unary float ops skip PyTorch's generic kernel (aten/Elementwise.cpp): the result must
    # still be the CPU's, values, dtype and strides, for size-1 dimensions (which TensorIterator
    # orders by stride) and empty tensors too.
    shapes = [(), (1,), (5,), (2, 1, 3), (1, 1), (4, 1), (1, 4), (3, 4, 1, 1), (0, 3), (2, 0, 1)]
    with torchtpu.eager_mode(mode):
        for shape in shapes:
            a = torch.randn(shape).to(dtype)
            b = (torch.randn(shape) + 3).to(dtype)
            for name, f in BINARY.items():
                expected, got = f(a, b), f(a.to("tpu"), b.to("tpu"))
                assert got.stride() == expected.stride(), (name, shape)
                assert got.dtype == expected.dtype, (name, shape)
                # (bit for bit but for the transcendental ones: the VPU kernels' vectorization
                # of a block may differ from the CPU's by an ulp)
                exact = name in EXACT
                torch.testing.assert_close(got.cpu(), expected, rtol=0 if exact else None,
                                           atol=0 if exact else None, equal_nan=True)
            for name, f in IN_PLACE.items():
                expected, got = f(a.clone(), b), f(a.to("tpu"), b.to("tpu"))
                exact = name in ("add_", "sub_", "mul_", "div_", "add_self", "mul_number_",
                                 "sub_number_", "neg_")
                torch.testing.assert_close(got.cpu(), expected, rtol=0 if exact else None,
                                           atol=0 if exact else None, equal_nan=True)
        # Mixed dtypes, broadcasting and strided operands take PyTorch's own path.
        x = torch.randn(4, 6)
        for other in (torch.randn(6), torch.randn(6, 4).t(), torch.randn(4, 6).double(), 2.5):
            other_tpu = other.to("tpu") if isinstance(other, torch.Tensor) else other
            expected, got = x * other, x.to("tpu") * other_tpu
            assert got.dtype == expected.dtype and got.stride() == expected.stride()
            torch.testing.assert_close(got.cpu(), expected)


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_binary_ops_keep_the_errors_of_pytorchs_generic_kernel(mode):
    x = torch.arange(10.0, device="tpu")
    with torchtpu.eager_mode(mode):
        with pytest.raises(RuntimeError, match="written-to tensor refer to a single memory location"):
            x[1:].add_(x[:-1])
            torch.tpu.synchronize()
        with pytest.raises(RuntimeError, match="alpha must not be a complex number"):
            torch.add(x, x, alpha=1j)
        with pytest.raises(RuntimeError, match="Boolean alpha only supported"):
            torch.add(x, x, alpha=True)


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_a_dtype_the_cpu_kernel_lacks_is_refused_at_the_call_even_when_the_result_is_unused(mode):
    # Antialiased bilinear interpolation has no bfloat16 CPU kernel. Fused eager used to drop the
    # op (its result unused) and with it the error the CPU raises (found by the OpInfo sweep).
    x = torch.randn(2, 3, 34, 45, dtype=torch.bfloat16)
    with pytest.raises(NotImplementedError, match="not implemented for 'BFloat16'"):
        torch.nn.functional.interpolate(x, size=(27, 27), mode="bilinear", antialias=True)
    with torchtpu.eager_mode(mode):
        with pytest.raises(NotImplementedError, match="not implemented for 'BFloat16'"):
            torch.nn.functional.interpolate(x.to("tpu"), size=(27, 27), mode="bilinear", antialias=True)
            torchtpu.sync()
        y = torch.nn.functional.interpolate(x.float().to("tpu"), size=(27, 27), mode="bilinear",
                                            antialias=True)
        torch.testing.assert_close(y.cpu(), torch.nn.functional.interpolate(
            x.float(), size=(27, 27), mode="bilinear", antialias=True))


# Factories of the unsigned dtypes PyTorch added (uint16, uint32, uint64; "barebones": few CPU
# kernels take them). Where the CPU makes the tensor, tpu makes the same one; where the CPU's
# kernel lacks the dtype (arange, linspace in torch 2.13: "arange_cpu" not implemented for
# 'UInt32'), tpu computes it as the chip does (in int64, narrowed: docs/simulated-chip.md,
# "Unsigned integers"), so the reference is the same factory in int64 on the CPU, cast. Eager
# against the CPU's eager, compiled against PyTorch's aot_eager on the CPU.
_UNSIGNED_FACTORIES = {
    "arange": lambda dtype, device: torch.arange(2, 20, 3, dtype=dtype, device=device),
    "linspace": lambda dtype, device: torch.linspace(0, 20, 6, dtype=dtype, device=device),
    "full": lambda dtype, device: torch.full((2, 3), torch.iinfo(dtype).max, dtype=dtype,
                                             device=device),
    "zeros": lambda dtype, device: torch.zeros(2, 3, dtype=dtype, device=device),
    "ones": lambda dtype, device: torch.ones(2, 3, dtype=dtype, device=device),
    "empty_fill_": lambda dtype, device: torch.empty(5, dtype=dtype, device=device).fill_(7),
    "new_full": lambda dtype, device: torch.zeros(2, dtype=dtype, device=device).new_full((3,), 11),
    "randint": lambda dtype, device: torch.randint(3, 1 << 15, (64,), dtype=dtype, device=device),
}


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("op", list(_UNSIGNED_FACTORIES))
@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_factories_of_unsigned_dtypes_give_the_cpus_tensor_or_the_chips(mode, compiled, op, dtype):
    factory = _UNSIGNED_FACTORIES[op]

    def run(device):
        f = lambda: factory(dtype, device)  # noqa: E731
        if compiled:
            torch._dynamo.reset()
            f = torch.compile(f, backend="tpu" if device == "tpu" else "aot_eager")
        torch.manual_seed(0)  # (the tpu generator draws the CPU's numbers for a seed)
        try:
            result = f()
            return result.cpu() if device == "tpu" else result
        finally:
            torch._dynamo.reset()

    try:
        want = run("cpu")
    except NotImplementedError:
        torch.manual_seed(0)
        want = factory(torch.int64, "cpu").to(dtype)  # (the values fit every unsigned dtype)
    with torchtpu.eager_mode(mode):
        got = run("tpu")
    assert got.dtype == want.dtype and torch.equal(got, want), (got, want)


# A training step in every eager mode, with parallel loops on the stream's worker and on the
# autograd engine's thread, after PyTorch's own CPU work made the initial thread's OpenMP team;
# then the names of the process's threads. An OpenMP helper thread takes the name of the thread
# that started its team.
_THREADS_AFTER_TRAINING = """
    import json, os, time, torch, torchtpu
    def step(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(),
                                    torch.nn.Linear(1024, 512)).to(device)
        x = torch.randn(256, 512, device=device)
        model(x).square().mean().backward()
        return model[0].weight.grad.sum().item()
    step("cpu")
    for mode in ("strict", "fused", "debug"):
        with torchtpu.eager_mode(mode):
            step("tpu")
    time.sleep(0.1)  # (the stream's worker ends its team after 10 ms idle)
    names = [open(f"/proc/self/task/{t}/comm").read().strip()
             for t in os.listdir("/proc/self/task")]
    print(json.dumps(names))
"""


def _thread_names(env):
    import json
    return json.loads(run_python(_THREADS_AFTER_TRAINING, env=env).stdout.strip().splitlines()[-1])


def test_idle_tpu_work_leaves_no_openmp_team_besides_the_initial_threads():
    """libgomp throttles every team while the process has more OpenMP threads than cores (each
    parallel loop then wakes its threads with a futex): a PyTorch CPU training step took 1.75x
    as long next to one idle team of another thread (docs/runtime.md, "One OpenMP team"). By
    default the device work of a program's main thread runs on that thread (backward passes
    included); where it runs elsewhere (here forced: all work on the worker, backward on the
    autograd engine's thread for "tpu"), the stream's worker ends its team after 10 ms idle, the
    engine's thread when its kernel returns: once the device is idle, no thread but the initial
    one has helpers, which would carry its name. With TORCHTPU_ONE_OPENMP_TEAM=0 the worker
    keeps its team (which is how the check fails)."""
    if torch.get_num_threads() < 2:
        pytest.skip("one intra-op thread: no OpenMP team to start")
    elsewhere = {"TORCHTPU_INLINE": "0", "TORCHTPU_BACKWARD_ON_CALLER": "0"}
    for env in ({"TORCHTPU_ONE_OPENMP_TEAM": "1"}, {"TORCHTPU_ONE_OPENMP_TEAM": "1", **elsewhere}):
        names = _thread_names(env)
        ours = [n for n in names if n.startswith(("tpu", "pt_autograd"))]
        if "TORCHTPU_INLINE" in env:
            assert "tpu0-stream0" in ours and "pt_autograd_0" in ours, names
        assert len(ours) == len(set(ours)), f"a thread other than the initial one started a team: {names}"
    names = _thread_names({"TORCHTPU_ONE_OPENMP_TEAM": "0", **elsewhere})
    ours = [n for n in names if n.startswith(("tpu", "pt_autograd"))]
    assert len(ours) > len(set(ours)), names


_BACKWARD_THREADS = """
    import json, threading, torch, torchtpu
    seen = []
    def hooked(device):
        torch.manual_seed(0)
        x = torch.randn(64, 64, device=device, requires_grad=True)
        y = (x @ x).relu()
        y.register_hook(lambda g: seen.append(threading.get_ident()))
        y.sum().backward()
        return x.grad.cpu()
    on_main = hooked("tpu")
    result = {}
    worker = threading.Thread(target=lambda: result.update(grad=hooked("tpu")))
    worker.start(); worker.join()
    torch.testing.assert_close(on_main, result["grad"])
    main = threading.get_ident()
    print(json.dumps({"multithreading": torch.autograd.is_multithreading_enabled(),
                      "flag": torchtpu.backward_on_calling_thread,
                      "main_hook_on_main": seen[0] == main,
                      "thread_hook_on_main": seen[1] == main}))
"""


def test_backward_passes_of_the_main_thread_run_on_it():
    """Backward passes over "tpu" tensors started on the main thread run on it, as the CPU's do,
    not on the autograd engine's thread for "tpu" (docs/runtime.md, "Backward on the calling
    thread"): its device work then runs beside no second OpenMP team. Said by
    torchtpu.backward_on_calling_thread and torch.autograd.is_multithreading_enabled();
    TORCHTPU_BACKWARD_ON_CALLER=0 keeps PyTorch's default. A backward pass started on another
    thread runs on the engine's thread either way, with the same gradients."""
    import json
    out = json.loads(run_python(_BACKWARD_THREADS).stdout.strip().splitlines()[-1])
    assert out == {"multithreading": False, "flag": True, "main_hook_on_main": True,
                   "thread_hook_on_main": False}
    out = json.loads(run_python(_BACKWARD_THREADS, env={"TORCHTPU_BACKWARD_ON_CALLER": "0"})
                     .stdout.strip().splitlines()[-1])
    assert out == {"multithreading": True, "flag": False, "main_hook_on_main": False,
                   "thread_hook_on_main": False}
    bad = run_python("import torchtpu", env={"TORCHTPU_BACKWARD_ON_CALLER": "yes"}, check=False)
    assert bad.returncode != 0 and "TORCHTPU_BACKWARD_ON_CALLER='yes'" in bad.stderr


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
@pytest.mark.parametrize("thread", ["main", "other"])
def test_work_issued_under_inference_mode_runs_wherever_it_is_run(mode, thread):
    # Host aliases made under torch.inference_mode() are inference tensors; the device work that
    # writes them once ran on a stream's worker outside that mode and was refused there
    # ("Inplace update to inference tensor outside InferenceMode"), reported at the next
    # synchronization. Work issued from a thread other than the initial one always runs on the
    # worker; fused eager's work runs wherever its graph is flushed.
    import threading
    torchtpu.set_eager_mode(mode)
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(2, 3, 8)
    w = torch.randn(8, 8)
    lin_tpu = torch.nn.Linear(8, 8).to("tpu")
    lin_tpu.load_state_dict(lin.state_dict())
    results = {}

    def run():
        with torch.inference_mode():
            xt = x.to("tpu")
            cache = torch.zeros(2, 5, 8, device="tpu")
            cache[:, :3] = lin_tpu(xt)
            y = torch.relu(cache @ w.to("tpu")).sum(-1)
            results["y"] = y.cpu()
        results["after"] = (cache * 2).cpu()  # read outside inference mode

    if thread == "main":
        run()
    else:
        t = threading.Thread(target=run)
        t.start()
        t.join()
    with torch.inference_mode():
        cache = torch.zeros(2, 5, 8)
        cache[:, :3] = lin(x)
        expected = torch.relu(cache @ w).sum(-1)
    torch.testing.assert_close(results["y"], expected)
    torch.testing.assert_close(results["after"], cache * 2)


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_an_attention_call_with_a_mask_that_does_not_broadcast_raises_at_the_call(mode):
    # The fused attention kernel refused a mask that does not broadcast against the scores, and
    # fused eager, which had recorded it, reported that inside a later, unrelated host read. The
    # fused kernel is not chosen for such a mask: the math path raises the CPU's error at the call.
    torchtpu.set_eager_mode(mode)
    F = torch.nn.functional
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    mask = torch.ones(3, 5, dtype=torch.bool)
    with pytest.raises(RuntimeError) as cpu:
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    with pytest.raises(RuntimeError) as tpu:
        F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"),
                                       attn_mask=mask.to("tpu"))
    assert str(tpu.value) == str(cpu.value)
    assert torch.all(torch.ones(3, device="tpu") == 1.0).item()  # nothing left to raise later


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_nonzero_into_a_non_empty_out_tensor_is_resized_like_the_cpu(mode):
    # nonzero's result shape depends on the values: strict eager queued its out= variant with the
    # out= tensor as given and refused it at synchronization ("does not have the result's
    # shape"); the CPU resizes it (with its warning), and refuses an out= tensor not of long.
    import warnings
    torchtpu.set_eager_mode(mode)
    x = torch.tensor([[0.0, 1.0], [2.0, 0.0], [3.0, 4.0]])
    out_cpu = torch.empty([], dtype=torch.long)
    out_tpu = torch.empty([], dtype=torch.long, device="tpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.nonzero(x, out=out_cpu)
        torch.nonzero(x.to("tpu"), out=out_tpu)
    assert torch.equal(out_tpu.cpu(), out_cpu)
    with pytest.raises(RuntimeError, match="scalar type Long"):
        torch.nonzero(x.to("tpu"), out=torch.empty([], device="tpu"))
    torchtpu.sync()


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_a_structured_op_warns_once_per_call_as_on_the_cpu(mode):
    # PyTorch's structured functional wrapper runs the op's meta function (its warnings) and calls
    # the out= variant, whose CPU kernel ran the same meta function again as device work: every
    # warning twice (upstream test_indexing counts them: uint8 masks' deprecation).
    import warnings
    torchtpu.set_eager_mode(mode)
    torch.set_warn_always(True)
    try:
        def count(device):
            v = torch.arange(15.0, device=device).reshape(5, 3)
            mask = torch.tensor([1, 0, 1, 1, 0], dtype=torch.uint8, device=device)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = v[mask].cpu()
            return got, len(caught)

        (want, n_cpu), (got, n_tpu) = count("cpu"), count("tpu")
        assert torch.equal(got, want)
        assert n_tpu == n_cpu == 1
    finally:
        torch.set_warn_always(False)


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_an_in_place_call_through_an_out_variant_refuses_to_broadcast_at_the_call(mode):
    # ldexp_ is PyTorch's composite: mul.out(self, 2**other, out=self). The call check and the
    # device work gave self and out= host copies of their own, so the CPU kernel took the call for
    # an out= call, resized the out= copy (with its warning) and failed only at synchronization;
    # run synchronously, it resized self itself. One tensor passed twice is one tensor to the CPU
    # kernel now, as on the CPU.
    torchtpu.set_eager_mode(mode)
    x_cpu, y_cpu = torch.randn(3), torch.randn(2, 3)
    with pytest.raises(RuntimeError) as cpu_error:
        x_cpu.clone().ldexp_(y_cpu)
    x = x_cpu.to("tpu")
    with pytest.raises(RuntimeError) as tpu_error:
        x.ldexp_(y_cpu.to("tpu"))
    assert str(tpu_error.value) == str(cpu_error.value)
    assert x.shape == (3,)
    torchtpu.sync()  # (nothing left to fail)
    assert torch.equal(x.cpu(), x_cpu)
    # The same call with matching shapes runs in place, through the same path.
    y = torch.randn(3)
    x.ldexp_(y.to("tpu"))
    assert torch.equal(x.cpu(), x_cpu.clone().ldexp_(y))


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_the_cpu_kernels_warnings_are_made_at_every_call_in_every_mode(mode):
    # Fused eager ran index_put_ later and its uint8-mask deprecation went to the C++ log at the
    # flush; strict eager lost it when the stream's worker ran the op. The call check's CPU kernel
    # run makes the warnings at the call (each call of a signature), and the device work runs
    # with them dropped.
    import warnings
    torchtpu.set_eager_mode(mode)
    torch.set_warn_always(True)
    try:
        def run(device):
            a = torch.zeros(4, device=device)
            mask = torch.tensor([1, 0, 1, 0], dtype=torch.uint8, device=device)
            one = torch.tensor(1.0, device=device)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for _ in range(3):
                    a.index_put_((mask,), one, accumulate=True)
                got = a.cpu()
            return got, [str(w.message) for w in caught]

        (want, cpu_warnings), (got, tpu_warnings) = run("cpu"), run("tpu")
        assert torch.equal(got, want)
        assert len(cpu_warnings) == 3 and tpu_warnings == cpu_warnings
    finally:
        torch.set_warn_always(False)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_a_recorded_functional_op_raises_its_argument_errors_at_the_call(mode):
    # Fused eager recorded functional host ops with their result shapes from the meta kernel, and
    # the CPU kernel's own argument checks came at the flush or never (searchsorted's side=, a
    # reduction over more than 64 dims). Recorded, they are checked at the call like in-place
    # and out= ops: their CPU kernel on scratch copies, once per signature.
    torchtpu.set_eager_mode(mode)
    for device in ("cpu", "tpu"):
        sorted_ = torch.arange(5.0, device=device)
        with pytest.raises(RuntimeError, match="side can only be 'left' or 'right'"):
            torch.searchsorted(sorted_, torch.randn(4, device=device), side="bad")
        with pytest.raises(RuntimeError, match="up to 64 dims"):
            torch.nansum(torch.zeros([1] * 65, device=device), dim=list(range(65)))
    torchtpu.sync()


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_an_in_place_op_between_in_place_metadata_changes_runs_on_the_recorded_geometry(mode):
    # dropout3d(inplace=True) of an unbatched input: x.unsqueeze_(0), x.mul_(noise),
    # x.squeeze_(0). Fused eager replayed the recorded mul on x as it was at the flush (squeezed
    # back), and the CPU kernel refused the broadcast at synchronization (upstream test_ops'
    # test_variant_consistency_eager_nn_functional_dropout3d).
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(0)
    x_cpu = torch.randn(5, 4, 3, 2, generator=g)
    noise_cpu = torch.rand(1, 5, 1, 1, 1, generator=g)
    results = []
    for x, noise in ((x_cpu.clone(), noise_cpu), (x_cpu.to("tpu"), noise_cpu.to("tpu"))):
        x.unsqueeze_(0)
        x.mul_(noise)
        x.squeeze_(0)
        x.add_(1)
        results.append(x.cpu())
    assert torch.equal(results[1], results[0])
    torchtpu.sync()


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
def test_device_work_runs_under_the_deterministic_algorithms_setting_of_its_call(mode):
    # index_copy with repeated indices under torch.use_deterministic_algorithms(True): the last
    # write wins, as on the CPU. Fused eager ran the recorded op at the flush, outside the
    # setting, on another algorithm (upstream test_indexing's test_index_copy_deterministic).
    from torch.testing._internal.common_utils import DeterministicGuard
    torchtpu.set_eager_mode(mode)
    g = torch.Generator().manual_seed(0)
    x = torch.zeros(500, 4, 3)
    src = torch.rand(10000, 4, 3, generator=g)
    index = torch.randint(500, (10000,), generator=g)
    with DeterministicGuard(True):
        want = torch.index_copy(x, 0, index, src)
        got = torch.index_copy(x.to("tpu"), 0, index.to("tpu"), src.to("tpu"))
    assert torch.equal(got.cpu(), want)
