"""TorchTPU's graph-inspection tools (torch_tpu._internal.sync.computation_graphviz,
computation_mlir and their dump_ forms) over fused eager's pending graph
(docs/eager-modes.md, "Inspecting the pending graph (TorchTPU's names)"): what they show, that
asking runs nothing, and the views between recorded ops."""
import itertools
import random
import re

import pytest
import torch
import torchtpu

from torch_tpu._internal import sync
from torch_tpu._internal.sync import _stablehlo_text as _stablehlo


pytestmark = pytest.mark.one_tier("its tests set fused eager themselves")


@pytest.fixture(autouse=True)
def _fused():
    mode = torchtpu.get_eager_mode()
    torchtpu.set_eager_mode("fused")
    torchtpu.sync()
    yield
    torchtpu.set_eager_mode(mode)


def op_nodes(dot: str) -> list:
    return re.findall(r"^\s+(n\d+) \[", dot, re.M)


def param_nodes(dot: str) -> list:
    return re.findall(r"^\s+(p\d+) \[", dot, re.M)


def edges(dot: str) -> list:
    return re.findall(r"^\s+(\w+) -> (\w+)", dot, re.M)


def record_chain():
    """ones + arange, mul, matmul, sum: five recorded ops (arange runs at once: its out= kernel
    sizes its result) over one materialized input."""
    a = torch.ones(4, 4, device="tpu")
    b = torch.arange(16, device="tpu", dtype=torch.float32).reshape(4, 4)
    c = a + b
    d = c * 2
    e = d @ b
    f = e.sum()
    return b, f


def cpu_chain():
    b = torch.arange(16, dtype=torch.float32).reshape(4, 4)
    return (((torch.ones(4, 4) + b) * 2) @ b).sum()


def test_graphviz_of_a_chain_has_its_ops_and_dependencies_and_runs_nothing():
    b, f = record_chain()
    assert sync.is_materialized(b) and not sync.is_materialized(f)
    pending = torchtpu.debug.pending_ops()
    reasons = torchtpu.metrics.materializations()
    dot = sync.computation_graphviz(f)
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    assert len(op_nodes(dot)) == 5  # fill_ (ones), add, mul, mm, sum
    assert len(param_nodes(dot)) == 1  # b, materialized
    # fill->add, b->add, add->mul, mul->mm, b->mm, mm->sum
    assert len(edges(dot)) == 6
    for name in ("aten::fill_.Scalar", "aten::add.out", "aten::mul.out", "aten::mm.out",
                 "aten::sum.IntList_out"):
        assert name in dot
    assert "parameter 0: b" in dot and "(materialized)" in dot  # named after the variable
    assert "f = " in dot and "output 0" in dot
    assert "float32[4, 4]" in dot and "float32[]" in dot
    # Asking ran nothing and recorded nothing.
    assert not sync.is_materialized(f)
    assert torchtpu.debug.pending_ops() == pending
    assert torchtpu.metrics.materializations() == reasons
    torch.testing.assert_close(f.cpu(), cpu_chain())


def test_mlir_of_a_chain_is_stablehlo_and_runs_nothing():
    b, f = record_chain()
    pending = torchtpu.debug.pending_ops()
    mlir = sync.computation_mlir(f)
    assert mlir.startswith("module {")
    assert re.search(r"func\.func @main\(%arg0: tensor<4x4xf32>\) -> tensor<f32> \{", mlir)
    for op in ("stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.add",
               "stablehlo.multiply", "stablehlo.dot_general", "stablehlo.reduce"):
        assert op in mlir, op
    assert "contracting_dims = [1] x [0]" in mlir
    assert "applies stablehlo.add across dimensions = [0, 1]" in mlir
    assert re.search(r"return %\d+ : tensor<f32>", mlir)
    assert "custom_call" not in mlir  # every op of the chain has a StableHLO form
    assert not sync.is_materialized(f) and torchtpu.debug.pending_ops() == pending
    torch.testing.assert_close(f.cpu(), cpu_chain())


def test_only_the_ops_behind_the_tensors_are_shown():
    x = torch.randn(8, 8).to("tpu")
    torchtpu.sync()
    y = (x + 1).exp()
    unrelated = (x * 3).sigmoid()
    dot, mlir = sync.computation_graphviz(y), sync.computation_mlir(y)
    assert len(op_nodes(dot)) == 2 and "aten::sigmoid" not in dot and "aten::mul" not in dot
    assert "stablehlo.exponential" in mlir
    assert "stablehlo.logistic" not in mlir and "stablehlo.multiply" not in mlir
    # Both: a func with two results.
    both = sync.computation_mlir([y, unrelated])  # (a list is flattened as a pytree)
    assert "stablehlo.logistic" in both and "-> (tensor<8x8xf32>, tensor<8x8xf32>)" in both
    assert len(op_nodes(sync.computation_graphviz({"y": y, "u": (unrelated,)}))) == 4
    torch.testing.assert_close(y.cpu(), (x.cpu() + 1).exp())
    torch.testing.assert_close(unrelated.cpu(), (x.cpu() * 3).sigmoid())


def test_the_notebooks_fusion_check():
    # TorchTPU's eager_mode notebook: fused, the graph of (x + 1) * 2 has add and multiply;
    # strict, the ops ran and the tensor is a parameter.
    for mode, fused in (("fused", True), ("strict", False)):
        with torchtpu.eager_mode(mode):
            x = torch.randn(10, 10, device="tpu", dtype=torch.bfloat16)
            z = (x + 1) * 2
            mlir = sync.computation_mlir(z)
            assert ("stablehlo.add" in mlir and "stablehlo.multiply" in mlir) == fused
            assert "tensor<10x10xbf16>" in mlir
            torchtpu.sync()


def test_a_tensor_that_is_not_pending_is_one_parameter():
    x = torch.randn(3, 5).to("tpu")
    torchtpu.sync()
    assert sync.is_materialized(x)
    dot = sync.computation_graphviz(x)
    assert op_nodes(dot) == [] and len(param_nodes(dot)) == 1 and edges(dot) == []
    mlir = sync.computation_mlir(x)
    assert "func.func @main(%arg0: tensor<3x5xf32>) -> tensor<3x5xf32>" in mlir
    assert "return %arg0 : tensor<3x5xf32>" in mlir
    # A view of it: the parameter is the caller's variable x, seen through the view.
    t = sync.computation_mlir(x.T)
    assert "@main(%arg0: tensor<3x5xf32>) -> tensor<5x3xf32>" in t
    assert "stablehlo.transpose %arg0, dims = [1, 0]" in t and "parameter 0 (x)" in t


def test_errors():
    with pytest.raises(ValueError):
        sync.computation_graphviz()
    with pytest.raises(ValueError):
        sync.computation_mlir([])
    with pytest.raises(ValueError):
        sync.dump_computation_mlir([], "unused.mlir")
    with pytest.raises(ValueError, match="not on the tpu device"):
        sync.computation_mlir(torch.ones(3))
    with pytest.raises(ValueError, match="not on the tpu device"):
        sync.computation_graphviz([torch.ones(3, device="tpu"), torch.ones(3)])
    with pytest.raises(ValueError):
        sync.computation_mlir([torch.ones(3, device="tpu"), 3])


def test_dumps_make_their_directories(tmp_path):
    b, f = record_chain()
    dot_file = tmp_path / "graphs" / "deep" / "chain.dot"
    mlir_file = tmp_path / "mlir" / "chain.mlir"
    sync.dump_computation_graphviz([f], str(dot_file))
    sync.dump_computation_mlir([f], mlir_file)
    assert len(op_nodes(dot_file.read_text())) == 5
    assert "parameter 0: b" in dot_file.read_text()  # the caller's names, through the dump too
    assert mlir_file.read_text() == sync.computation_mlir(f)
    assert not sync.is_materialized(f)
    torch.testing.assert_close(f.cpu(), cpu_chain())


def test_ops_without_a_stablehlo_form_are_custom_calls_and_listed():
    x = torch.randn(4, 6).to("tpu")
    torchtpu.sync()
    y = torch.nn.functional.gelu(x)  # erf: no StableHLO op
    z = torch.nn.functional.layer_norm(y, (6,))
    mlir = sync.computation_mlir(z)
    assert re.search(r"stablehlo\.custom_call @aten\.gelu\(", mlir)
    assert re.search(r"%\d+:3 = stablehlo\.custom_call @aten\.native_layer_norm\(", mlir)
    assert "stablehlo.custom_call @aten.gelu" in mlir
    tail = mlir[mlir.rindex("}"):]
    assert "//   aten::gelu.out" in tail and "//   aten::native_layer_norm" in tail
    assert "backend_config = \"aten::gelu.out(approximate='none')\"" in mlir
    # The tanh approximation has a StableHLO form.
    w = torch.nn.functional.gelu(x, approximate="tanh")
    assert "custom_call" not in sync.computation_mlir(w) and "stablehlo.tanh" in \
        sync.computation_mlir(w)
    torch.testing.assert_close(z.cpu(), torch.nn.functional.layer_norm(
        torch.nn.functional.gelu(x.cpu()), (6,)), rtol=1e-5, atol=1e-5)


def test_casts_comparisons_reductions_where_and_matmul_precision():
    x = torch.randn(2, 3, 4).to("tpu")
    w = torch.randn(2, 4, 5).to("tpu")
    torchtpu.sync()
    with torch.tpu.precision(torch.tpu.Precision.DEFAULT):
        p = torch.bmm(x, w)
    y = torch.where(p > 0, p, 0.5 * p).to(torch.bfloat16).float().mean(-1).amax()
    m = sync.computation_mlir(y)
    for op in ("stablehlo.compare GT", "stablehlo.select", "stablehlo.convert",
               "batching_dims = [0] x [0], contracting_dims = [2] x [1]",
               "precision = [DEFAULT, DEFAULT]", "applies stablehlo.maximum",
               "stablehlo.divide"):
        assert op in m, op
    assert "tensor<2x3x5xbf16>" in m and "tensor<2x3x5xi1>" in m
    cpu = torch.bmm(x.cpu(), w.cpu())
    ref = torch.where(cpu > 0, cpu, 0.5 * cpu).to(torch.bfloat16).float().mean(-1).amax()
    torch.testing.assert_close(y.cpu(), ref, rtol=2e-2, atol=2e-2)


def test_a_write_into_a_view_is_a_dynamic_update_slice():
    y = torch.empty(4, 6, device="tpu")
    y[0].fill_(1)
    y[1:, 2:].fill_(2)
    y[1:, :2] = 3
    dot = sync.computation_graphviz(y)
    assert "(uninitialized pending storage)" in dot and "(updated)" in dot
    mlir = sync.computation_mlir(y)
    assert mlir.count("stablehlo.dynamic_update_slice") == 3
    assert "uninitialized pending storage" in mlir
    expected = torch.empty(4, 6)
    expected[0], expected[1:, 2:], expected[1:, :2] = 1, 2, 3
    torch.testing.assert_close(y.cpu(), expected)


# ---------------------------------------------------------------------------------------------
# The views between ops, checked with torch's own views on the host: a StableHLO slice,
# reshape, transpose and broadcast_in_dim done by torch ops.

class TorchEmitter:
    """The Emitter's view ops (_stablehlo.apply_steps / update_steps) on host tensors."""

    def sizes(self, x):
        return list(x.shape)

    def slice(self, x, starts, limits):
        return x[tuple(slice(a, b) for a, b in zip(starts, limits))]

    def reshape(self, x, sizes):
        return x.reshape(sizes)

    def transpose(self, x, perm):
        return x.permute(perm)

    def broadcast_in_dim(self, x, dims, sizes):
        shape = [1] * len(sizes)
        for d, s in zip(dims, x.shape):
            shape[d] = s
        return x.reshape(shape).expand(sizes)

    def constant(self, value, sizes, dtype):
        return torch.tensor(value, dtype=dtype)

    def dynamic_update_slice(self, x, update, starts):
        out = x.clone()
        out[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
        return out


def geometry(t):
    return list(t.shape), list(t.stride()), t.storage_offset()


def random_views(base: torch.Tensor, rng: random.Random):
    """Views of `base` as user code makes them."""
    views = [base, base.T if base.dim() == 2 else base.transpose(0, -1), base.reshape(-1)]
    for _ in range(12):
        v = base
        for _ in range(rng.randint(1, 3)):
            choice = rng.randint(0, 5)
            if choice == 0 and v.dim() >= 2:
                v = v.transpose(0, rng.randrange(1, v.dim()))
            elif choice == 1 and v.dim() >= 1 and v.shape[0] > 1:
                a = rng.randrange(0, v.shape[0] - 1)
                v = v[a:rng.randrange(a + 1, v.shape[0] + 1)]
            elif choice == 2 and v.dim() >= 1:
                v = v[rng.randrange(0, v.shape[0])]
            elif choice == 3 and v.is_contiguous() and v.numel() % 2 == 0:
                v = v.reshape(2, -1)
            elif choice == 4 and v.dim() >= 1:
                v = v.unsqueeze(0).expand(2, *v.shape)
            elif choice == 5 and v.dim() >= 1 and v.shape[-1] > 2:
                v = v[..., ::2]
        views.append(v)
    return views


def test_views_are_slices_reshapes_transposes_and_broadcasts():
    rng = random.Random(0)
    e = TorchEmitter()
    checked = 0
    for shape, perm in itertools.product([(4, 6), (2, 3, 4), (24,)], [False, True]):
        storage = torch.arange(48.0)
        base = storage[:24].view(*shape)
        if perm and base.dim() >= 2:
            base = base.transpose(0, 1)
        for src in [base] + random_views(base, rng)[:4]:
            if (0 in src.stride() and src.numel() > 1) or \
                    src.untyped_storage().data_ptr() != storage.untyped_storage().data_ptr():
                continue
            for dst in random_views(base, rng):
                if dst.untyped_storage().data_ptr() != storage.untyped_storage().data_ptr():
                    continue  # (a reshape that copied)
                steps = _stablehlo.plan_view(*geometry(src), *geometry(dst))
                if steps is None:
                    continue  # (a custom_call: allowed, but counted below)
                got = _stablehlo.apply_steps(e, src.clone(), steps)
                assert got.shape == dst.shape and torch.equal(got, dst), (geometry(src),
                                                                         geometry(dst), steps)
                checked += 1
                if 0 in dst.stride() or dst.numel() == 0:
                    continue
                # A write into the view: the value with those elements replaced.
                update = -torch.arange(dst.numel(), dtype=torch.float32).reshape(dst.shape) - 1
                new = _stablehlo.update_steps(e, src.clone(), steps, update)
                expected_storage = storage.clone()
                expected_storage.as_strided(dst.shape, dst.stride(),
                                            dst.storage_offset()).copy_(update)
                expected = expected_storage.as_strided(src.shape, src.stride(),
                                                       src.storage_offset())
                assert new is not None and torch.equal(new, expected), (geometry(src),
                                                                        geometry(dst), steps)
    assert checked > 100
