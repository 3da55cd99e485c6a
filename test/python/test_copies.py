"""Copies in every direction, across dtypes and layouts, compared bit for bit with the CPU."""

import pytest
import torch

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32,
          torch.int8, torch.uint8, torch.bool, torch.complex64]
DIRECTIONS = ["cpu->tpu", "tpu->cpu", "tpu->tpu", "tpu:0->tpu:1"]
LAYOUTS = ["contiguous", "transposed", "strided", "expanded", "offset"]


def make(dtype, layout, generator):
    base = (torch.randn(6, 10, generator=generator) * 50)
    if dtype == torch.bool:
        base = base > 0
    elif dtype.is_complex:
        base = torch.complex(base, -base)
    else:
        base = base.to(dtype)
    if layout == "contiguous":
        return base
    if layout == "transposed":
        return base.t()
    if layout == "strided":
        return base[::2, 1::3]
    if layout == "expanded":
        return base[:1].expand(4, 10)
    if layout == "offset":
        return base[2:, 3:7]
    raise AssertionError(layout)


def place(t, where):
    """The same layout on another device: a view of a base tensor moved as a whole."""
    if where == "cpu":
        return t
    storage_base = torch.empty(0, dtype=t.dtype, device=where)
    storage_base.set_(t.untyped_storage().tpu() if where == "tpu:0" else
                      t.untyped_storage().tpu(int(where[-1])),
                      t.storage_offset(), t.size(), t.stride())
    return storage_base


@pytest.mark.parametrize("src_dtype,dst_dtype", [(d, d) for d in DTYPES] + [
    (torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32), (torch.float32, torch.int32),
    (torch.int64, torch.float16), (torch.bool, torch.float32), (torch.float64, torch.float32),
    (torch.float32, torch.complex64), (torch.uint8, torch.bool),
])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_copy_matches_cpu(src_dtype, dst_dtype, direction, layout):
    g = torch.Generator().manual_seed(hash((str(src_dtype), layout)) % 2**31)
    src_cpu = make(src_dtype, layout, g)
    src_dev, dst_dev = {"cpu->tpu": ("cpu", "tpu:0"), "tpu->cpu": ("tpu:0", "cpu"),
                        "tpu->tpu": ("tpu:0", "tpu:0"), "tpu:0->tpu:1": ("tpu:0", "tpu:1")}[direction]
    src = place(src_cpu, src_dev)
    assert src.stride() == src_cpu.stride() and src.device == torch.device(src_dev)
    # Destination: a non-contiguous (transposed) buffer, to copy into a strided layout too.
    dst = torch.zeros(src_cpu.shape[::-1], dtype=dst_dtype, device=dst_dev).t()
    dst.copy_(src)
    expected = torch.zeros(src_cpu.shape[::-1], dtype=dst_dtype).t().copy_(src_cpu)
    assert dst.device == torch.device(dst_dev)
    assert torch.equal(dst.cpu(), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_to_and_back_roundtrip(dtype):
    g = torch.Generator().manual_seed(0)
    x = make(dtype, "strided", g)
    on = x.to("tpu")
    assert on.device.type == "tpu" and on.dtype == dtype
    assert torch.equal(on.cpu(), x)
    assert torch.equal(x.to("tpu:1").to("tpu:2").cpu(), x)


def test_conversion_on_the_way():
    x = torch.randn(5, 7)
    assert torch.equal(x.to("tpu", torch.bfloat16).cpu(), x.to(torch.bfloat16))
    assert torch.equal(x.to("tpu").to(torch.float16).cpu(), x.to(torch.float16))
    y = x.to("tpu").to("cpu", torch.int32)
    assert torch.equal(y, x.to(torch.int32))


def test_scalars_and_item():
    for value, dtype in [(3.5, torch.float32), (-7, torch.int64), (True, torch.bool)]:
        t = torch.tensor(value, dtype=dtype, device="tpu")
        assert t.item() == value
    assert torch.tensor([1.5, 2.5], device="tpu").tolist() == [1.5, 2.5]
    assert torch.tensor([[1, 2]], device="tpu").cpu().numpy().tolist() == [[1, 2]]


def test_copy_from_and_resize_and_empty():
    x = torch.randn(0, 3, device="tpu")
    assert x.cpu().shape == (0, 3)
    out = torch.empty(0, device="tpu")
    src = torch.randn(4, 4)
    out.resize_(4, 4).copy_(src)
    assert torch.equal(out.cpu(), src)


def test_printing_names_the_device():
    t = torch.arange(3, device="tpu:1")
    assert repr(t) == "tensor([0, 1, 2], device='tpu:1')"
    assert "device='tpu:0'" in repr(torch.tensor([0.5, -1.25], device="tpu"))


def test_conjugate_and_negative_views_copy_correctly():
    # Regression (OpInfo sweep, fft.ifft on bool): copying a conjugate view used to recurse
    # through PyTorch's Conjugate fallback until the stack overflowed.
    z = torch.randn(5, dtype=torch.complex64)
    assert torch.equal(z.conj().to("tpu").cpu(), z.conj().resolve_conj())
    assert torch.equal(z.to("tpu").conj().cpu(), z.conj())
    assert torch.equal(z.to("tpu").conj().to("tpu:1").cpu(), z.conj())
    x = torch.randn(5)
    assert torch.equal(x.to("tpu")._neg_view().cpu(), -x)
    assert torch.equal(torch.fft.ifft(torch.tensor([True, False, True, True], device="tpu")).cpu(),
                       torch.fft.ifft(torch.tensor([True, False, True, True])))
