"""Several devices of one backend in one process, against a pretend two-GPU backend (the
interpreter posing as a non-host backend with devices ``twogpu:0`` and ``twogpu:1``): each
launch runs on the device its arrays live on, a kernel is loaded once per device, arrays on
two devices in one launch are a clear error, copies between the devices go device to
device, and two threads launching on the two devices at once get their own results.  The
drivers' own part (a device's context made current for a call and the caller's restored) is
tested against fake drivers in ``backends/*/tests/test_driver.py``; on two real GPUs by
``backends/nvidia/tests/test_multi_gpu.py``."""
import threading

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.backend import Buffer, DeviceInfo, ImportedArray
from anytile.errors import BackendError
from anytile.interpreter import InterpreterBackend
from anytile.ir.types import from_numpy
from anytile.runtime.discovery import register_backend, unregister_backend

_DEVICES = [DeviceInfo(f"twogpu:{i}", i, f"pretend GPU {i}", (("multiprocessor_count", 10 + i),))
            for i in range(2)]


@at.jit
def scale(x_ptr, out_ptr, n, a, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a, mask=mask)


class Tensor:
    """A torch-like tensor of a pretend framework, living on device ``index``."""

    def __init__(self, array, index):
        self.array, self.index, self.dtype, self.shape = array, index, array.dtype, array.shape

    def data_ptr(self):
        return self.array.data_ptr()

    def get_device(self):
        return self.index

    def stride(self):
        return self.array.stride()

    def __dlpack_device__(self):     # a device type no real backend claims
        return (1000, self.index)

    def __dlpack__(self, stream=None):
        raise NotImplementedError


class TwoGpus(InterpreterBackend):
    """Two devices sharing the interpreter's memory; it records where kernels were loaded,
    where they ran and the device-to-device copies."""

    name = "twogpu"
    device_prefix = "twogpu"
    host_memory = False

    def __init__(self):
        super().__init__()
        self.loads, self.launches, self.copies = [], [], []
        self.lock = threading.Lock()

    def devices(self):
        return list(_DEVICES)

    def target_of(self, device):
        return at.Target("twogpu", "reference")

    def load(self, kernel, device):
        self.loads.append(device.name)
        return super().load(kernel, device)

    def launch(self, loaded, grid, args, device, stream=None):
        with self.lock:
            self.launches.append(device.name)
        for arg in args:     # every pointer handed to the kernel lives on its device
            if hasattr(arg.value, "buffer"):
                assert arg.value.buffer.device.name == device.name
        super().launch(loaded, grid, args, device, stream)

    def copy_between(self, dst, dst_offset, src, src_offset, nbytes):
        self.copies.append((src.device.name, dst.device.name, nbytes))
        dst.handle[dst_offset:dst_offset + nbytes] = src.handle[src_offset:src_offset + nbytes]
        return True

    def device_of_foreign(self, obj):
        return _DEVICES[obj.index] if isinstance(obj, Tensor) else None

    def import_array(self, obj, device):
        if not isinstance(obj, Tensor) or obj.index != device.index:
            return None
        a = obj.array
        buffer = Buffer(device, a.nbytes, a.buffer.handle, a.data_ptr(), owner=obj)
        return ImportedArray(buffer, 0, a.shape, a.stride(), from_numpy(a.dtype))


@pytest.fixture
def gpus():
    record = register_backend(TwoGpus)
    try:
        yield record.backend
    finally:
        unregister_backend("twogpu")


def _on(index, values):
    return at.asarray(np.asarray(values, np.float32), device=f"twogpu:{index}")


def test_each_launch_runs_where_its_arrays_live_and_loads_once_per_device(gpus):
    for _ in range(3):
        for index in (1, 0):
            x, out = _on(index, np.arange(100)), _on(index, np.zeros(100))
            scale[(4,)](x, out, 100, float(index + 2), BLOCK=32)
            np.testing.assert_array_equal(out.numpy(), (index + 2) * np.arange(100))
    assert gpus.launches == ["twogpu:1", "twogpu:0"] * 3
    assert sorted(gpus.loads) == ["twogpu:0", "twogpu:1"]
    assert at.device("twogpu:1").properties["multiprocessor_count"] == 11


def test_foreign_tensors_on_the_second_device_run_there(gpus):
    x, out = Tensor(_on(1, np.arange(8)), 1), Tensor(_on(1, np.zeros(8)), 1)
    scale[(1,)](x, out, 8, 3.0, BLOCK=8)
    assert gpus.launches == ["twogpu:1"]
    np.testing.assert_array_equal(out.array.numpy(), 3 * np.arange(8))


@pytest.mark.parametrize("mix", ["arrays", "tensors", "array and tensor"])
def test_arrays_on_two_devices_in_one_launch_are_a_clear_error(gpus, mix):
    x0, x1 = _on(0, np.arange(8)), _on(1, np.zeros(8))
    x, out = {"arrays": (x0, x1), "tensors": (Tensor(x0, 0), Tensor(x1, 1)),
              "array and tensor": (x0, Tensor(x1, 1))}[mix]
    with pytest.raises(BackendError) as err:
        scale[(1,)](x, out, 8, 3.0, BLOCK=8)
    message = str(err.value)
    assert "different devices" in message and "'x_ptr' on twogpu:0" in message
    assert "'out_ptr' on twogpu:1" in message and "at.asarray(x, device=...)" in message
    assert gpus.launches == []


def test_a_requested_device_must_be_where_the_arrays_live(gpus):
    x, out = _on(1, np.arange(8)), _on(1, np.zeros(8))
    with pytest.raises(BackendError, match="device=twogpu:0 was asked for, but array arguments "
                                           "live on twogpu:1"):
        scale[(1,)](x, out, 8, 3.0, BLOCK=8, device="twogpu:0")


def test_copies_between_the_devices_go_device_to_device(gpus):
    x0 = _on(0, np.arange(10))
    x1 = x0.to("twogpu:1")
    assert x1.device == at.device("twogpu:1") and x0.to("twogpu:0") is x0
    np.testing.assert_array_equal(x1.numpy(), np.arange(10))
    tensor = Tensor(_on(1, np.arange(5) * 2), 1)
    back = at.asarray(tensor, device="twogpu:0")
    np.testing.assert_array_equal(back.numpy(), np.arange(5) * 2)
    assert gpus.copies == [("twogpu:0", "twogpu:1", 40), ("twogpu:1", "twogpu:0", 20)]
    # a dtype change or a strided view goes through the host
    as_f64 = at.asarray(x0, dtype=np.float64, device="twogpu:1")
    np.testing.assert_array_equal(as_f64.numpy(), np.arange(10))
    assert len(gpus.copies) == 2


def test_two_threads_launch_on_two_devices_at_once(gpus):
    errors, barrier = [], threading.Barrier(2)

    def work(index):
        try:
            x, out = _on(index, np.arange(64)), _on(index, np.zeros(64))
            barrier.wait()
            for step in range(20):
                scale[(2,)](x, out, 64, float(step + index), BLOCK=32)
                np.testing.assert_array_equal(out.numpy(), (step + index) * np.arange(64))
        except Exception as exc:  # noqa: BLE001 -- reported by the main thread
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(set(gpus.launches)) == ["twogpu:0", "twogpu:1"] and len(gpus.launches) == 40
