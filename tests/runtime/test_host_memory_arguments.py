"""Host arrays (NumPy, and any framework's host array) passed to a kernel see one memory on
every device: on a device with memory of its own (OpenCL, the simulated GPUs) arguments that
share host memory are one device copy, and every writeable one receives the results.  Each
launch is made twice: the second may take the fast path, which must not bypass the copies."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.backend import DeviceInfo
from anytile.interpreter import InterpreterBackend
from anytile.runtime.discovery import register_backend, unregister_backend


@at.jit
def add_one(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


@at.jit
def add_one_strided(out_ptr, x_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) * stride
    mask = tl.arange(0, BLOCK) < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


@at.jit
def write_halves(p_ptr, q_ptr, HALF: tl.constexpr):
    # the second halves of p and of q: disjoint memory when q is p[HALF:]
    offs = HALF + tl.arange(0, HALF)
    tl.store(p_ptr + offs, offs.to(tl.float32) + 100)
    tl.store(q_ptr + offs, offs.to(tl.float32) + 200)


class HostMemory:
    """A foreign host array exposing only ``__array_interface__`` (as a framework's CPU
    tensor may): its memory is host memory, like a NumPy array's."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array

    @property
    def __array_interface__(self) -> dict:
        return self._array.__array_interface__


def test_one_array_passed_twice_is_one_memory(device, rng):
    a = rng.standard_normal(16).astype(np.float32)
    expected = a.copy()
    for _ in range(2):
        add_one[(1,)](a, a, 16, BLOCK=16, device=device)
        expected += 1
        np.testing.assert_array_equal(a, expected)


def test_overlapping_views_are_one_memory(device, rng):
    for _ in range(2):
        b = rng.standard_normal(24).astype(np.float32)
        expected = b.copy()
        expected[8:16] = np.arange(8, 16) + 100
        expected[16:24] = np.arange(8, 16) + 200
        write_halves[(1,)](b[:16], b[8:], HALF=8, device=device)
        np.testing.assert_array_equal(b, expected)


def test_a_read_only_view_of_written_memory_is_read_and_not_written_back(device, rng):
    base = rng.standard_normal(16).astype(np.float32)
    expected = base.copy()
    read_only = base.view()
    read_only.flags.writeable = False
    for _ in range(2):
        add_one[(1,)](base, read_only, 16, BLOCK=16, device=device)
        expected += 1
        np.testing.assert_array_equal(base, expected)


def test_a_foreign_host_array_receives_the_results(device, rng, poison):
    x = rng.standard_normal(32).astype(np.float32)
    for _ in range(2):
        out = poison(32, np.float32)
        add_one[(1,)](HostMemory(out), HostMemory(x), 32, BLOCK=32, device=device)
        np.testing.assert_array_equal(out, x + 1)


def test_a_foreign_host_array_and_a_numpy_view_of_its_memory_are_one_memory(device, rng):
    a = rng.standard_normal(16).astype(np.float32)
    expected = a.copy()
    for _ in range(2):
        add_one[(1,)](HostMemory(a), a, 16, BLOCK=16, device=device)
        expected += 1
        np.testing.assert_array_equal(a, expected)


def test_a_strided_foreign_host_array_keeps_its_layout(device, rng, poison):
    # every other element: the kernel steps by the stride, as over the host memory itself
    x = rng.standard_normal(32).astype(np.float32)
    out = poison(32, np.float32)
    add_one_strided[(1,)](HostMemory(out[::2]), HostMemory(x[::2]), 16, 2, BLOCK=16,
                          device=device)
    np.testing.assert_array_equal(out[::2], x[::2] + 1)
    assert np.isnan(out[1::2]).all()                 # the memory between is not the view's


def test_torch_cpu_tensors_receive_the_results(device, rng):
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng.standard_normal(32).astype(np.float32))
    for _ in range(2):
        out = torch.full((32,), float("nan"))
        add_one[(1,)](out, x, 32, BLOCK=32, device=device)
        np.testing.assert_array_equal(out.numpy(), x.numpy() + 1)
    a = torch.from_numpy(rng.standard_normal(16).astype(np.float32))
    before = a.clone()
    add_one[(1,)](a, a.numpy(), 16, BLOCK=16, device=device)     # a tensor and its NumPy view
    np.testing.assert_array_equal(a.numpy(), before.numpy() + 1)


class CopyingDevice(InterpreterBackend):
    """The interpreter with memory of its own: host arrays are copied to it and back."""

    name = device_prefix = "copying"
    host_memory = False
    fail_allocations = False

    def devices(self):
        return [DeviceInfo("copying:0", 0, "a device that copies host arrays")]

    def target_of(self, device):
        return at.Target("copying", "reference")

    def import_array(self, obj, device):
        return None

    def alloc(self, device, nbytes):
        if self.fail_allocations:
            raise MemoryError("out of device memory on purpose")
        return super().alloc(device, nbytes)


@pytest.fixture
def copying():
    record = register_backend(CopyingDevice)
    try:
        yield record.backend
    finally:
        unregister_backend("copying")


def test_arguments_sharing_memory_on_a_device_that_copies(copying, rng):
    # the tests above on any machine, OpenCL or not
    a = rng.standard_normal(16).astype(np.float32)
    expected = a + np.float32(1)
    add_one[(1,)](a, a, 16, BLOCK=16, device="copying")
    np.testing.assert_array_equal(a, expected)
    b = rng.standard_normal(24).astype(np.float32)
    expected = b.copy()
    expected[8:16] = np.arange(8, 16) + 100
    expected[16:24] = np.arange(8, 16) + 200
    write_halves[(1,)](HostMemory(b[:16]), b[8:], HALF=8, device="copying")
    np.testing.assert_array_equal(b, expected)


def test_a_copy_the_device_cannot_hold_names_the_arguments(copying, rng):
    a = rng.standard_normal(16).astype(np.float32)
    before = a.copy()
    copying.fail_allocations = True
    with pytest.raises(MemoryError, match="add_one: copying arguments 'out_ptr', 'x_ptr' to the "
                                          "device: copying:0 could not allocate 64 bytes"):
        add_one[(1,)](a, a[:8], 16, BLOCK=16, device="copying")
    np.testing.assert_array_equal(a, before)


@at.jit
def double_scalar(out_ptr, x_ptr):
    tl.store(out_ptr, tl.load(x_ptr) * 2)


def test_zero_dimensional_arrays_stay_zero_dimensional(device, rng):
    x = np.array(rng.standard_normal(), np.float32)
    out = np.array(np.nan, np.float32)
    double_scalar[(1,)](out, x, device=device)
    assert out.shape == () and out == x * 2
    on_device = at.asarray(np.array(np.nan, np.float32), device=device)
    on_device.copy_from(x)
    assert on_device.shape == () and on_device.numpy() == x
