"""Two NVIDIA GPUs in one process: launches run on the device their arrays live on (on that
device's current torch stream), the caller's CUDA context and torch's current device are
left as they were, modules load once per device, arrays on two devices in one launch are a
clear error, copies go device to device, and two host threads launch on the two devices at
once.  Skipped (with the reason) on machines with fewer than two GPUs."""
import threading

import numpy as np
import pytest

import anytile as at
from anytile.errors import BackendError
from anytile_conformance.catalogue.kernels import vector_add_kernel
from anytile_nvidia.backend import NvidiaBackend
from anytile_nvidia.driver import driver

_AVAIL = NvidiaBackend().availability()
_COUNT = len(NvidiaBackend().devices()) if _AVAIL.usable else 0
pytestmark = pytest.mark.skipif(
    _COUNT < 2, reason=f"needs two CUDA devices: {_COUNT} found"
    + ("" if _AVAIL.usable else f" (no NVIDIA GPU: {_AVAIL.reason})"))


def _current_context() -> int:
    return int(driver.check("cuCtxGetCurrent", driver.cu.cuCtxGetCurrent()))


def _add(device, n=50_001, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    xd, yd = at.asarray(x, device=device), at.asarray(y, device=device)
    out = at.asarray(np.full(n, np.nan, np.float32), device=device)
    return x + y, (xd, yd, out, n)


def test_every_gpu_is_a_device_with_its_properties():
    names = [d.name for d in at.devices() if d.type == "cuda"]
    assert names == [f"cuda:{i}" for i in range(_COUNT)]
    for name in names[:2]:
        props = at.device(name).properties
        assert props["multiprocessor_count"] > 0 and props["warp_size"] == 32


def test_arrays_on_the_second_gpu_run_there_and_leave_the_callers_context():
    pushed = driver.enter(0)   # the caller works on cuda:0, as a torch program would
    try:
        before = _current_context()
        want, args = _add("cuda:1")
        for _ in range(3):     # the general path, then the fast path
            vector_add_kernel[(at.cdiv(args[3], 1024),)](*args, BLOCK=1024)
        assert _current_context() == before == int(driver.context(0))
        assert args[2].buffer.device.name == "cuda:1"
        np.testing.assert_array_equal(args[2].numpy(), want)
    finally:
        driver.leave(pushed)


def test_one_kernel_alternating_between_the_gpus():
    runs = [_add(f"cuda:{i % 2}", seed=i) for i in range(6)]
    for want, args in runs:
        vector_add_kernel[(at.cdiv(args[3], 256),)](*args, BLOCK=256)
    for want, args in runs:
        np.testing.assert_array_equal(args[2].numpy(), want)


def test_arrays_on_two_gpus_in_one_launch_are_a_clear_error():
    _, (x, y, out, n) = _add("cuda:0")
    y1 = y.to("cuda:1")
    with pytest.raises(BackendError, match=r"different devices \('x_ptr' on cuda:0, 'y_ptr' on "
                                           r"cuda:1, 'out_ptr' on cuda:0\)"):
        vector_add_kernel[(1,)](x, y1, out, n, BLOCK=1024)


def test_copies_between_the_gpus():
    host = np.arange(1 << 20, dtype=np.float32)
    a0 = at.asarray(host, device="cuda:0")
    a1 = a0.to("cuda:1")
    assert a1.device.name == "cuda:1" and a1.data_ptr() != a0.data_ptr()
    np.testing.assert_array_equal(a1.numpy(), host)
    np.testing.assert_array_equal(a1.to("cuda:0").numpy(), host)
    assert isinstance(driver.can_access_peer(0, 1), bool)


def test_two_threads_launch_on_the_two_gpus_at_once():
    errors, barrier = [], threading.Barrier(2)

    def work(index):
        try:
            want, args = _add(f"cuda:{index}", seed=10 + index)
            barrier.wait()
            for _ in range(200):
                vector_add_kernel[(at.cdiv(args[3], 1024),)](*args, BLOCK=1024)
            np.testing.assert_array_equal(args[2].numpy(), want)
        except Exception as exc:  # noqa: BLE001 -- reported by the main thread
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_torch_tensors_on_the_second_gpu_use_its_current_stream():
    torch = pytest.importorskip("torch")
    torch.cuda.set_device(0)
    stream = torch.cuda.Stream(device=1)
    n = 1 << 20
    with torch.cuda.stream(stream):
        x = torch.zeros(n, device="cuda:1")
        zeros = torch.zeros(n, device="cuda:1")
        out = torch.full((n,), float("nan"), device="cuda:1")
        torch.cuda._sleep(100_000_000)          # keeps the stream busy for tens of ms
        x.fill_(1.0)
        # on another stream the kernel would read x before the fill
        vector_add_kernel[(at.cdiv(n, 1024),)](x, zeros, out, n, BLOCK=1024)
        vector_add_kernel[(at.cdiv(n, 1024),)](x, out, out, n, BLOCK=1024)   # fast path
    stream.synchronize()
    assert torch.cuda.current_device() == 0
    assert torch.equal(out, torch.full_like(out, 2.0))
    with pytest.raises(BackendError, match="different devices"):
        vector_add_kernel[(1,)](torch.zeros(4, device="cuda:0"), zeros, out, 4, BLOCK=4)
    moved = at.asarray(out, device="cuda:0")
    assert moved.device.name == "cuda:0" and np.all(moved.numpy() == 2.0)
