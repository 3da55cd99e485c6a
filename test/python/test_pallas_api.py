"""torchtpu.pallas beyond the numerics (docs/custom-kernels.md): pricing from the grid and block
specs and re-pricing per chip, interpret mode's checks as errors naming the kernel, VMEM
capacity, JAX as an optional dependency, meshes, TorchTPU's signature rules."""
import subprocess
import sys

import pytest
import torch

import torchtpu

pytest.importorskip("jax")
import jax  # noqa: E402
import pallas_kernels as pk  # noqa: E402
from torchtpu import pallas  # noqa: E402

pytestmark = pytest.mark.not_in_debug_tier(
    "Pallas kernels run in interpret mode as host code over torch ops, the same in debug "
    "and strict eager")


def test_import_torchtpu_never_imports_jax():
    code = ("import sys, torch, torchtpu, torchtpu.pallas\n"
            "import torch_tpu._internal.pallas\n"
            "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if 'jax' in m)\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_jax_jax_op_says_what_to_install():
    code = ("import sys\nsys.modules['jax'] = None\n"
            "import torch, torchtpu\nfrom torchtpu import pallas\n"
            "try:\n    pallas.jax_op('nojax::f', lambda x: x)\nexcept ImportError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert 'pip install "jax[cpu]==0.10.2"' in out


def test_blocked_matmul_is_priced_from_its_grid_and_blocks():
    op = pk.op("blocked_matmul")
    M, K, N = 256, 512, 384
    x, y = torch.randn(M, K).bfloat16(), torch.randn(K, N).bfloat16()
    work = pallas.kernel_work(op, x, y)
    steps = (M // 128) * (N // 128) * (K // 128)
    assert work["grid_steps"] == steps
    assert work["matmuls"] == [[steps, 128, 128, 128, 1, 2, 0]]
    block = 128 * 128
    # x's and y's blocks change at every step (k is the fastest axis); each output block is
    # written back once, after its last k step.
    assert work["hbm_bytes"] == steps * block * 2 * 2 + (M // 128) * (N // 128) * block * 4
    torchtpu.metrics.reset()
    op(x.tpu(), y.tpu())
    est = torchtpu.metrics.estimate()
    assert est["hbm_bytes"] >= work["hbm_bytes"] and est["flops"] == 2 * M * K * N
    # re-priced for every chip from the same ledger: faster MXUs and HBM, shorter estimates
    times = {c: torchtpu.metrics.op_times(chip=c)["tpk::blocked_matmul"] for c in ("v4", "v6e")}
    assert times["v6e"] < times["v4"]


def test_scalar_prefetch_fetches_follow_the_indices():
    op = pk.op("gather_rows")
    x = torch.randn(6 * 8, 128)
    block = 8 * 128 * 4
    repeated = pallas.kernel_work(op, torch.tensor([1, 1, 1, 1], dtype=torch.int32), x)
    distinct = pallas.kernel_work(op, torch.tensor([1, 2, 3, 4], dtype=torch.int32), x)
    assert distinct["hbm_bytes"] - repeated["hbm_bytes"] == 3 * block  # (3 fetches saved)


def test_data_race_is_reported_naming_the_kernel():
    op = pk.op("racy")
    x = torch.randn(8, 128).tpu()
    with pallas.interpret_checks(detect_races=True):
        with pytest.raises(pallas.KernelError, match=r"tpk::racy: data race detected"):
            op(x)
    out = pk.op("axpy")(x, x)  # (interpret mode works again after the report)
    torch.testing.assert_close(out.cpu(), 3 * x.cpu())


def test_vmem_over_the_chip_capacity_is_reported():
    op = pk.op("huge_block")
    x = torch.empty(64 * 1024 * 1024 // 4 * 3 // 2, dtype=torch.float32).view(-1, 1024)
    with pytest.raises(torch.OutOfMemoryError, match=r"tpk::huge_block: RESOURCE_EXHAUSTED.*VMEM"):
        op(x.tpu())


def test_mesh_of_several_devices_says_what_is_missing():
    mesh = jax.sharding.Mesh([jax.devices()[0]], ("x",))  # one device: runs as without a mesh
    op = pallas.jax_op("tpk::axpy_mesh1", pk.axpy, mesh=mesh,
                       input_partition_specs=[jax.sharding.PartitionSpec("x")] * 2)
    x = torch.randn(8, 128)
    torch.testing.assert_close(op(x.tpu(), x.tpu()).cpu(), 3 * x)

    class TwoDevices:  # (JAX on this CPU has one device: a mesh of two is described)
        devices = __import__("numpy").empty((2,), dtype=object)
        shape = {"x": 2}

    with pytest.raises(NotImplementedError, match="mesh of 2 devices"):
        pallas.jax_op("tpk::axpy_mesh2", pk.axpy, mesh=TwoDevices())


def test_signature_rules_follow_torchtpu():
    with pytest.raises(ValueError, match="namespace"):
        pallas.jax_op("no_namespace", pk.axpy)
    with pytest.raises(ValueError, match="no type annotation"):
        pallas.jax_op("tpk::unannotated", lambda x: x)
    op = pk.op("axpy")
    assert str(op._opoverload._schema) == "tpk::axpy(Tensor x, Tensor y) -> Tensor"


def test_fake_tensors_get_shapes_from_eval_shape():
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = pk.op("blocked_matmul")
    with FakeTensorMode():
        out = op(torch.empty(256, 128, dtype=torch.bfloat16, device="tpu"),
                 torch.empty(128, 384, dtype=torch.bfloat16, device="tpu"))
    assert out.shape == (256, 384) and out.dtype == torch.float32 and out.device.type == "tpu"


def test_custom_jax_kernel_warns_and_runs():
    with pytest.warns(DeprecationWarning, match="jax_op"):
        kernel = pallas.custom_jax_kernel(pk.axpy)
    x = torch.randn(8, 128)
    torch.testing.assert_close(kernel(x.tpu(), x.tpu()).cpu(), 3 * x)


def test_torch_tpu_module_path_is_the_same_implementation():
    import torch_tpu._internal.pallas as tp
    assert tp.jax_op is pallas.jax_op and tp.custom_jax_kernel is pallas.custom_jax_kernel


def test_dry_run_charges_the_kernel_from_shapes():
    op = pk.op("blocked_matmul")
    x, y = torch.randn(256, 512).bfloat16(), torch.randn(512, 384).bfloat16()
    torchtpu.metrics.reset()
    op(x.tpu(), y.tpu())
    ran = torchtpu.metrics.op_times()["tpk::blocked_matmul"]
    torchtpu.metrics.reset()
    with torchtpu.dry_run():
        out = op(torch.empty(256, 512, dtype=torch.bfloat16, device="tpu"),
                 torch.empty(512, 384, dtype=torch.bfloat16, device="tpu"))
        assert out.shape == (256, 384) and out.dtype == torch.float32
    assert torchtpu.metrics.op_times()["tpk::blocked_matmul"] == pytest.approx(ran)


def test_out_of_bounds_dma_is_reported_naming_the_kernel():
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_hbm, o_ref, buf, sem):
        start = pl.program_id(0) * 16 + 8  # (rows 8..23 of 16: known only when it runs)
        copy = pltpu.make_async_copy(x_hbm.at[pl.ds(start, 16)], buf, sem)
        copy.start()
        copy.wait()
        o_ref[...] = buf[...]

    def oob(x: jax.Array) -> jax.Array:
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct((16, 128), x.dtype), grid=(1,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((16, 128), lambda i: (0, 0)),
            scratch_shapes=[pltpu.VMEM((16, 128), x.dtype), pltpu.SemaphoreType.DMA])(x)

    op = pallas.jax_op("tpk::oob", oob)
    with pytest.raises(IndexError, match="tpk::oob: out-of-bounds"):
        op(torch.randn(16, 128).tpu())
