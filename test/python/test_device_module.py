"""torch.tpu and torch.accelerator: detection, device selection, properties."""
import pytest
import torch
import torchtpu


def test_registration():
    assert torch._C._get_privateuse1_backend_name() == "tpu"
    assert torch.get_device_module("tpu") is torch.tpu
    assert torch.device("tpu:1").type == "tpu"
    t = torch.ones(2).tpu()
    assert t.is_tpu and t.device == torch.device("tpu:0")
    assert torch.nn.Linear(2, 2).tpu().weight.device.type == "tpu"
    assert torch.ones(3).untyped_storage().tpu().device.type == "tpu"


def test_device_count_default_and_availability():
    # Default TORCHTPU_NUM_DEVICES is 4 (a single-host v5e slice); the tests run with it.
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() == 4
    assert torchtpu.device_count() == 4


def test_set_device_and_context():
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device(2)
    assert torch.tpu.current_device() == 2
    assert torch.empty(1, device="tpu").device == torch.device("tpu:2")
    with torch.tpu.device(3):
        assert torch.tpu.current_device() == 3
        assert torch.zeros(1, device="tpu").device.index == 3
    assert torch.tpu.current_device() == 2
    torch.tpu.set_device("tpu:0")
    assert torch.tpu.current_device() == 0


@pytest.mark.parametrize("bad", [4, 99])
def test_invalid_device_index_is_a_clear_error(bad):
    with pytest.raises(RuntimeError, match=rf"Invalid device index tpu:{bad}.*4 simulated TPU"):
        torch.empty(2, device=f"tpu:{bad}")
    with pytest.raises(RuntimeError, match="Invalid device index"):
        torch.tpu.set_device(bad)
    with pytest.raises(RuntimeError, match="Invalid device index"):
        torch.ones(2).to(f"tpu:{bad}")
    assert torch.tpu.current_device() == 0  # nothing changed


def test_properties_follow_the_chip_table():
    props = torch.tpu.get_device_properties(0)
    assert props.chip == "v5e"
    assert props.name == "TPU v5e (simulated)" == torch.tpu.get_device_name()
    assert props.total_memory == 16 * 2**30
    assert props.mxu_dim == 128 and props.mxus_per_core == 4 and props.tensor_cores == 1
    assert props.bf16_flops == 197e12
    assert props.hbm_bytes_per_s == 819e9
    assert "total_memory=16384MB" in repr(props)
    chips = {c["name"]: c for c in torchtpu._C.all_chips()}
    assert set(chips) == {"v4", "v5e", "v5p", "v6e", "v7"}
    assert chips["v6e"]["mxu_dim"] == 256 and chips["v7"]["hbm_bytes"] == 192 * 2**30


def test_chip_and_hbm_from_environment(tmp_path):
    from conftest import run_python

    out = run_python(
        """
        import torch, torchtpu
        p = torch.tpu.get_device_properties()
        print(p.chip, p.mxu_dim, p.total_memory, torch.tpu.device_count())
        """,
        env={"TORCHTPU_CHIP": "v6e", "TORCHTPU_HBM_BYTES": str(1 << 30), "TORCHTPU_NUM_DEVICES": "2"},
    ).stdout.split()
    assert out == ["v6e", "256", str(1 << 30), "2"]


@pytest.mark.parametrize("visible,chips,warning", [
    ("2,0", [2, 0], None), ("3", [3], None), ("", [0, 1, 2, 3], None),
    ("0,0", [], "'0' is listed twice"), ("4", [], "'4' is not a chip of this host (0 to 3)"),
    ("x", [], "'x' is not a chip of this host"),
])
def test_tpu_visible_chips_selects_and_renumbers_the_hosts_chips(visible, chips, warning):
    from conftest import run_python

    proc = run_python(
        """
        import torch, torchtpu
        n = torch.tpu.device_count()
        print([torch.tpu.get_device_properties(i).physical_chip for i in range(n)])
        if n:
            x = torch.arange(4.0, device=f"tpu:{n - 1}") * 2
            assert x.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
        """, env={"TPU_VISIBLE_CHIPS": visible})
    assert proc.stdout.strip() == str(chips)
    if warning:
        assert warning in proc.stderr and "no TPU devices are available" in proc.stderr
    else:
        assert "TPU_VISIBLE_CHIPS" not in proc.stderr


def test_unknown_chip_is_a_clear_error():
    from conftest import run_python

    proc = run_python(
        "import torch, torchtpu; torch.tpu.get_device_properties()",
        env={"TORCHTPU_CHIP": "v99"}, check=False,
    )
    assert proc.returncode != 0
    assert "Unknown TPU chip 'v99'" in proc.stderr and "v5e" in proc.stderr


def test_amp_dtypes():
    assert torch.tpu.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]


def test_accelerator_api():
    acc = torch.accelerator.current_accelerator()
    assert acc is not None and acc.type == "tpu"
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == 4
    torch.accelerator.set_device_index(1)
    assert torch.accelerator.current_device_index() == 1
    assert torch.tpu.current_device() == 1
    with torch.accelerator.device_index(2):
        assert torch.tpu.current_device() == 2
    assert torch.accelerator.current_device_index() == 1
    torch.accelerator.set_device_index(0)
    torch.accelerator.synchronize()
    s = torch.accelerator.current_stream()
    assert s.device.type == "tpu" and s.stream_id == 0
    caps = torch.accelerator.get_device_capability()
    assert torch.float32 in caps["supported_dtypes"] and torch.bfloat16 in caps["supported_dtypes"]


def test_accelerator_memory_api():
    torch.tpu.empty_cache()
    base = torch.accelerator.memory_allocated()
    x = torch.empty(1 << 20, device="tpu")  # 4 MiB
    torchtpu.sync()  # (fused eager allocates pending storages here)
    assert torch.accelerator.memory_allocated() - base == 4 << 20
    assert torch.accelerator.max_memory_allocated() >= base + (4 << 20)
    stats = torch.accelerator.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.accelerator.memory_allocated()
    del x
    assert torch.accelerator.memory_allocated() == base
    free, total = torch.accelerator.get_memory_info()
    assert total == 16 * 2**30 and 0 < free <= total


def test_lazy_init_and_seed_protocol():
    torch.tpu.init()
    assert torch.tpu.is_initialized()
    assert isinstance(torch.tpu.initial_seed(), int)


@pytest.mark.parametrize("select", ["set_device", "device context"])
def test_selecting_a_device_initializes_the_runtime_as_cudas_does(select):
    """torch.cuda.set_device (and entering torch.cuda.device) initializes CUDA; code then reads
    the current device to give an index-less device one: FakeTensor's torch.empty(device=...),
    FSDP2's meta-device initialization (TorchTitan). On tpu, set_device(1) left the runtime
    uninitialized until the first allocation, and fake tensors landed on tpu:0."""
    from conftest import run_python

    enter = ("torch.tpu.set_device(1)" if select == "set_device"
             else "ctx = torch.tpu.device(1); ctx.__enter__()")
    out = run_python(f"""
        import torch, torchtpu
        assert not torch.tpu.is_initialized()
        {enter}
        from torch._subclasses import FakeTensorMode
        with FakeTensorMode():
            t = torch.empty(2, device="tpu")
        print(torch.tpu.is_initialized(), t.device)
    """)
    assert out.stdout.split() == ["True", "tpu:1"]
