"""The compile side of the TorchTPU twin (docs/coming-from-torchtpu.md): ``torch_tpu._internal.
compile`` (``TpuBackend`` over torchtpu's compiled mode), ``compiler_options`` and ``dynamism``.
Values are compared with PyTorch on the CPU at the float32 matmul precision set by each test."""
import copy
import os
import textwrap
import threading
import warnings

import pytest
import torch
import torchtpu
from conftest import run_python
from torch_tpu._internal import compiler_options as compiler
from torch_tpu._internal import dynamism
from torch_tpu._internal.compile import TpuBackend, _backend
from torch_tpu._internal.compile import compiler as compile_compiler


# A fresh Dynamo (and metrics) for each test, at precision "highest" restored after it.
pytestmark = [pytest.mark.usefixtures("fresh_state"), pytest.mark.not_in_debug_tier(
    "compiled mode's programs run without the eager queue that debug eager makes "
    "synchronous: the strict tier runs them, and the fused tier beside recorded work")]


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


# ---------------------------------------------------------------------------------------------
# torch_tpu._internal.compile

def test_tpu_backend_trains_as_the_cpu_and_lists_its_graphs_in_order():
    cpu = _mlp()
    tpu = copy.deepcopy(cpu).to("tpu")
    x = torch.randn(5, 8)
    loss_cpu = cpu(x).square().mean()
    loss_cpu.backward()
    backend = TpuBackend()
    step = torch.compile(tpu, backend=backend, dynamic=False)
    loss = step(x.to("tpu")).square().mean()
    loss.backward()
    torch.testing.assert_close(loss.cpu(), loss_cpu.detach(), rtol=1e-6, atol=1e-6)
    for p_cpu, p_tpu in zip(cpu.parameters(), tpu.parameters()):
        torch.testing.assert_close(p_tpu.grad.cpu(), p_cpu.grad, rtol=1e-5, atol=1e-6)
    names = [a.name.split("_")[0] for a in backend._compiled_executables]
    assert names == ["forward", "backward"]
    # Each artifact is torchtpu's program of the graph, run once (debug eager runs compiled
    # graphs op by op: no program).
    runs = [s["runs"] for a in backend._compiled_executables for s in a.stats()]
    assert runs == ([] if torchtpu.get_eager_mode() == "debug" else [1, 1])


def test_debug_mode_keeps_each_graphs_code_and_stablehlo_text_and_runs_nothing():
    tpu = _mlp().to("tpu")
    backend = TpuBackend(debug=True)
    out = torch.compile(tpu, backend=backend, dynamic=False)(torch.randn(5, 8, device="tpu"))
    out.sum().backward()
    fwd, bwd = backend._compiled_executables
    assert "torch.ops.aten.addmm.default" in fwd.graph_module_debug_str
    torch.tpu.synchronize()
    rng = torch.tpu.get_rng_state()
    before = torchtpu.metrics.counters()
    text = fwd.mlir_text
    after = torchtpu.metrics.counters()
    assert torch.equal(torch.tpu.get_rng_state(), rng)
    # Recorded by fused eager, then dropped: every op eliminated as dead, none run.
    recorded = after["defer.ops_recorded"] - before.get("defer.ops_recorded", 0)
    assert recorded >= 3
    assert after["defer.ops_eliminated"] - before.get("defer.ops_eliminated", 0) == recorded
    assert "func.func @main(%arg0: tensor<5x8xf32>" in text
    assert text.count("stablehlo.dot_general") == 2  # the two Linear layers
    assert "precision = [HIGHEST, HIGHEST]" in text  # (the matmul precision in force)
    assert "@aten.gelu" in text  # (no StableHLO form here: a custom_call, listed)
    assert "stablehlo.dot_general" in bwd.mlir_text
    assert fwd.mlir_texts == [text]


def test_without_debug_the_graph_texts_are_none_with_a_warning():
    backend = TpuBackend()
    torch.compile(lambda x: x * 2, backend=backend)(torch.ones(3, device="tpu"))
    (artifact,) = backend._compiled_executables
    with pytest.warns(UserWarning, match=r"debug mode only.*TpuBackend\(debug=True\)"):
        assert artifact.mlir_text is None
    with pytest.warns(UserWarning, match="debug mode only"):
        assert artifact.graph_module_debug_str is None


def test_dynamism_false_refuses_dynamic_shapes_as_torchtpu_does():
    compiled = torch.compile(lambda x: (x * 2).sum(0), backend=TpuBackend())
    assert torch.equal(compiled(torch.ones(4, 3, device="tpu")).cpu(), torch.full((3,), 8.0))
    # The second length makes Dynamo's graph dynamic: TorchTPU's static backend refuses it.
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed,
                       match=r"NotImplementedError: TPU backend: does not support dynamic shape"):
        compiled(torch.ones(6, 3, device="tpu"))


def test_dynamism_true_compiles_one_graph_for_every_length_priced_per_bucket():
    torchtpu.metrics.reset()
    backend = TpuBackend(dynamism=True)
    compiled = torch.compile(lambda x, w: torch.softmax(x @ w, -1), backend=backend)
    w = torch.randn(8, 5)
    for n in (4, 6, 7, 9, 11):
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(x.to("tpu"), w.to("tpu")).cpu(),
                                   torch.softmax(x @ w, -1), rtol=1e-5, atol=1e-6)
    stats = torchtpu.metrics.compiled()
    assert stats["dynamo_graphs"] == 2  # the static first one, then one with a symbolic length
    assert not stats["program_failures"]
    if torchtpu.get_eager_mode() != "debug":  # (debug eager runs compiled graphs op by op)
        assert stats["buckets"] >= 2
    assert compile_compiler.has_dynamic_symints(
        [n.meta["val"] for n in backend._compiled_executables[-1].graph_module.graph.nodes
         if n.op == "placeholder"])


def test_dynamism_true_refuses_dynamic_true_as_torchtpu_does():
    compiled = torch.compile(lambda x: x + 1, backend=TpuBackend(dynamism=True), dynamic=True)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match=r"dynamic=True"):
        compiled(torch.ones(4, device="tpu"))


def test_torchtpus_options_pass_through_and_unknown_ones_are_refused():
    a, b = torch.randn(16, 32), torch.randn(32, 8)
    backend = TpuBackend()
    medium = torch.compile(lambda a, b: a @ b, backend=backend,
                           options={"matmul_precision": "medium"})(a.to("tpu"), b.to("tpu"))
    torch.set_float32_matmul_precision("medium")
    eager_medium = (a.to("tpu") @ b.to("tpu")).cpu()
    torch.set_float32_matmul_precision("highest")
    assert torch.equal(medium.cpu(), eager_medium)  # one bf16 pass, as eager at "medium"
    assert not torch.equal(medium.cpu(), (a.to("tpu") @ b.to("tpu")).cpu())
    torch._dynamo.reset()
    bad = torch.compile(lambda x: x + 1, backend=TpuBackend(), options={"xla_flag": "1"})
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed,
                       match="unexpected option 'xla_flag'"):
        bad(torch.ones(2, device="tpu"))


def test_async_compile_option_first_call_raises_submitted_then_runs():
    compiled = torch.compile(lambda x: x.exp() + 1, backend=TpuBackend(),
                             options={"async_compile": True})
    x = torch.randn(6)
    with pytest.raises(_backend.AsyncCompilationSubmitted) as info:
        compiled(x.to("tpu"))
    assert isinstance(info.value.artifact, compile_compiler.CompiledArtifact)
    assert _backend.resolve_compilations([info.value]) == 1
    torch.testing.assert_close(compiled(x.to("tpu")).cpu(), x.exp() + 1)


def test_async_compile_helper_warms_every_shape_then_gives_the_cpus_values():
    torchtpu.metrics.reset()
    fn = _backend.async_compile(lambda x: torch.tanh(x) * 3, [(torch.ones(4, device="tpu"),),
                                                             {"x": torch.ones(7, device="tpu")}])
    assert torchtpu.metrics.compiled()["dynamo_graphs"] == 2
    for n in (4, 7):
        x = torch.randn(n)
        torch.testing.assert_close(fn(x.to("tpu")).cpu(), torch.tanh(x) * 3)
    assert torchtpu.metrics.compiled()["dynamo_graphs"] == 2  # (no compile at the real calls)


def test_debug_and_enable_serialization_false_keep_graphs_out_of_the_disk_cache(tmp_path):
    code = textwrap.dedent("""
        import os, torch, torchtpu
        from torch_tpu._internal.compile import TpuBackend
        for backend in (TpuBackend(debug=True), TpuBackend(enable_serialization=False),
                        TpuBackend()):
            torch._dynamo.reset()
            torch.compile(lambda x: x.sin() * 2, backend=backend)(torch.ones(3, device="tpu"))
            cache = torchtpu.metrics.compiled()["cache"]
            print(cache["misses"], cache["saved"])
    """)
    out = run_python(code, env={**os.environ, "TORCHTPU_CACHE_DIR": str(tmp_path)})
    assert out.stdout.split() == ["0", "0", "0", "0", "1", "1"]


def test_helpers_and_xla_only_names():
    nested = {"a": [torch.ones(2), (torch.zeros(1), 3)]}
    moved = _backend.to_device(nested, "tpu")
    assert moved["a"][0].device.type == "tpu" and moved["a"][1][0].device.type == "tpu"
    assert moved["a"][1][1] == 3
    assert _backend.get_default_cpu_backend() in ("inductor", "aot_eager")
    assert not compile_compiler.has_dynamic_symints([torch.ones(2), 3])
    with pytest.raises(NotImplementedError, match="TpuBackend"):
        compile_compiler.StaticCompiler  # noqa: B018
    # Importing the module leaves backend="tpu" torchtpu's own.
    from torch._dynamo.backends.registry import lookup_backend
    from torchtpu.compile import tpu_backend
    assert lookup_backend("tpu") is tpu_backend


# ---------------------------------------------------------------------------------------------
# torch_tpu._internal.compiler_options

def test_custom_compiler_options_nest_merge_and_restore(monkeypatch):
    monkeypatch.setattr(compiler, "_warned", set())
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    with pytest.warns(UserWarning, match="xla_optimization_level.*apply to nothing"):
        with compiler.custom_compiler_options({"xla_optimization_level": "O1"}):
            assert compiler.current_compiler_options() == {"xla_optimization_level": "O1"}
            with compiler.custom_compiler_options({"xla_optimization_level": "O3",
                                                   "xla_tpu_enable_deduplicated_calls": "ENABLED"}):
                assert compiler.current_compiler_options() == {
                    "xla_optimization_level": "O3", "xla_tpu_enable_deduplicated_calls": "ENABLED"}
                out = (a.to("tpu") @ b.to("tpu")).cpu()  # (materialized in the block)
            assert compiler.current_compiler_options() == {"xla_optimization_level": "O1"}
    assert compiler.current_compiler_options() == {}
    torch.testing.assert_close(out, a @ b)  # the values do not depend on them
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (warned once per option name)
        with pytest.raises(RuntimeError, match="boom"):
            with compiler.custom_compiler_options({"xla_optimization_level": "O2"}):
                raise RuntimeError("boom")
    assert compiler.current_compiler_options() == {}


def test_custom_compiler_options_are_per_thread_and_checked():
    seen = []
    with compiler.custom_compiler_options({"xla_memory_fitting_level": "O0"}):
        thread = threading.Thread(target=lambda: seen.append(compiler.current_compiler_options()))
        thread.start()
        thread.join()
    assert seen == [{}]
    with pytest.raises(ValueError, match="xla_optimization_level must be one of O0, O1, O2, O3"):
        with compiler.custom_compiler_options({"xla_optimization_level": "O4"}):
            pass
    with pytest.raises(TypeError, match="strings"):
        with compiler.custom_compiler_options({"xla_flag": 1}):
            pass
    assert compiler.current_compiler_options() == {}


# ---------------------------------------------------------------------------------------------
# torch_tpu._internal.dynamism

def test_mark_dynamic_and_get_dynamism_info(monkeypatch):
    monkeypatch.setattr(dynamism, "_warned", False)
    x, y = torch.ones(10, device="tpu"), torch.ones(10, device="tpu")
    z = x + y
    assert dynamism.get_dynamism_info(x) == []
    with pytest.warns(UserWarning, match="fused eager plans each size"):
        assert dynamism.mark_dynamic(x, 0, 2, 10) is x
    (info,) = dynamism.get_dynamism_info(x)
    assert (info.dimension, info.lower_bound, info.upper_bound) == (0, 2, 10)
    assert dynamism.get_dynamism_info(y) == [] and dynamism.get_dynamism_info(z) == []
    dynamism.mark_dynamic(x, 0, 5, 10)  # a new mark replaces the old one
    assert [m.lower_bound for m in dynamism.get_dynamism_info(x)] == [5]
    # Kept where the tensor's backend metadata goes (torchtpu/_backend_meta.py).
    assert dynamism.get_dynamism_info(x.detach()) == dynamism.get_dynamism_info(x)
    assert dynamism.get_dynamism_info(copy.deepcopy(x)) == dynamism.get_dynamism_info(x)


def test_mark_dynamic_refusals_are_torch_tpus():
    x = torch.ones(10, 10, device="tpu")
    with pytest.raises(RuntimeError, match="dimension -1 is out of bounds"):
        dynamism.mark_dynamic(x, -1, 2, 10)
    with pytest.raises(RuntimeError, match="but the dimension size is 10"):
        dynamism.mark_dynamic(x, 0, 2, 9)
    dynamism.mark_dynamic(x, 0, 2, 10)
    with pytest.raises(RuntimeError, match="only one dynamic dimension is supported"):
        dynamism.mark_dynamic(x, 1, 2, 10)
    with pytest.raises(RuntimeError, match="not on the PrivateUse1 device"):
        dynamism.mark_dynamic(torch.ones(3), 0, 1, 3)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_marked_tensors_compute_as_the_cpu(mode):
    torchtpu.set_eager_mode(mode)
    a, b = torch.arange(4.0).reshape(2, 2), torch.arange(6.0).reshape(3, 2)
    ta, tb = a.to("tpu"), b.to("tpu")
    dynamism.mark_dynamic(ta, 0, 2, 10)
    dynamism.mark_dynamic(tb, 0, 2, 10)
    assert torch.equal(torch.cat([ta, tb]).pow(2).cpu(), torch.cat([a, b]).pow(2))
