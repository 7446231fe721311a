"""The HIP driver without AMD hardware: what the backend says and does with hip-python
importable and no ROCm runtime (this machine, and CI), and the launch paths against a fake
hip-python module and a fake ``hipModuleLaunchKernel`` (argument blocks, streams, device
selection, every HIP error named)."""
import ctypes
import json

import pytest

from anytile.backend import Buffer, DeviceInfo, KernelArg, PointerArg
from anytile.cli import main as cli_main
from anytile.errors import BackendError, LaunchError
from anytile.ir.types import PointerType, bf16, f32, f64, i1, i32, i64
from anytile_amd import driver as drvmod
from anytile_amd.backend import AmdBackend

SIGNATURE = [("x", PointerType(f32)), ("n", i32), ("big", i64), ("scale", f32), ("flag", i1),
             ("d", f64)]
READ = [ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64, ctypes.c_float, ctypes.c_int32,
        ctypes.c_double]


def _no_runtime():
    return drvmod.HipDriver().availability_error() is not None


no_runtime = pytest.mark.skipif(not _no_runtime(), reason="a HIP runtime is present here")


@no_runtime
def test_without_rocm_the_backend_says_why_and_compiles_anyway():
    backend = AmdBackend()
    avail = backend.availability()
    assert not avail.usable and "Traceback" not in avail.reason
    assert "libamdhip64" in avail.reason or "hip-python is not importable" in avail.reason
    assert backend.devices() == []
    facts = backend.describe()
    assert "gfx942" in facts["targets"] and "hip_runtime" not in facts
    with pytest.raises(BackendError, match="libamdhip64|hip-python"):
        drvmod.HipDriver().alloc(0, 16)


@no_runtime
def test_anytile_backends_lists_amd_as_not_usable(capsys):
    assert cli_main(["backends", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["amd"]["usable"] is False and "libamdhip64" in rows["amd"]["reason"]


def test_hip_python_without_its_package_is_reported(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_hip(name, *args, **kwargs):
        if name == "hip":
            raise ImportError("No module named 'hip'")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_hip)
    assert "hip-python is not importable: ImportError" in drvmod.HipDriver().availability_error()


class FakeHip:
    """hip-python's shape: every call returns ``(hipError_t, *results)``."""

    class hipError_t(int):
        hipSuccess = 0

    def __init__(self, error=0, count=1, current=0):
        self.calls, self.error, self.count, self.current = [], error, count, current

    def hipInit(self, flags):
        return (self.hipError_t(0),)

    def hipGetErrorName(self, err):
        return 0, {1: b"hipErrorInvalidValue", 100: b"hipErrorNoDevice"}.get(int(err), b"hipErrorUnknown")

    def hipGetDeviceCount(self):
        return (self.hipError_t(self.error), self.count)

    def hipGetDevice(self):
        return self.hipError_t(0), self.current

    def hipSetDevice(self, index):
        self.calls.append(("hipSetDevice", index))
        self.current = index
        return (self.hipError_t(0),)

    def hipModuleLaunchKernel(self, *args):
        self.calls.append(("hipModuleLaunchKernel", self.current) + args)
        return (self.hipError_t(self.error),)

    def device_calls(self):
        """libamdhip64's hipGetDevice / hipSetDevice as ctypes would call them."""
        def get(ref):
            ref._obj.value = self.current
            return 0
        return get, lambda index: self.hipSetDevice(index)[0]


def _driver(fake):
    drv = drvmod.HipDriver()
    drv._hip = fake
    return drv


def _loaded(drv, function, shared, threads, signature=SIGNATURE):
    return drvmod.LoadedKernel.from_signature(signature, device_index=0, name="k", shared_bytes=shared,
                                              threads=threads, driver=drv, function=function)


def loaded_kernel(fake):
    return _loaded(_driver(fake), "function", 2048, 256)


def arguments(address=0x7F0000001000, offset=64):
    dev = DeviceInfo("hip:0", 0)
    buf = Buffer(dev, 4096, address, address)
    values = [PointerArg(buf, offset), -7, 2**40 + 3, 1.5, True, -0.25]
    return dev, [KernelArg(t, v) for (_, t), v in zip(SIGNATURE, values)]


def test_launch_passes_the_argument_block_to_hipModuleLaunchKernel():
    fake = FakeHip()
    kernel = loaded_kernel(fake)
    dev, args = arguments()
    AmdBackend().launch(kernel, (3, 2, 1), args, dev)
    (_, device, *call) = fake.calls[0]
    assert device == 0 and len(fake.calls) == 1
    assert call[:9] == ["function", 3, 2, 1, 256, 1, 1, 2048, 0] and call[10] is None
    params = (ctypes.c_void_p * len(SIGNATURE)).from_address(call[9])
    got = [t.from_address(p).value for t, p in zip(READ, params)]
    assert got == [0x7F0000001000 + 64, -7, 2**40 + 3, 1.5, 1, -0.25]


def test_explicit_streams_and_the_callers_device_set_back():
    fake = FakeHip(current=1)       # torch made device 1 current in this thread
    kernel = loaded_kernel(fake)
    dev, args = arguments()

    class TorchLikeStream:
        cuda_stream = 0xABC
    AmdBackend().launch(kernel, (1, 1, 1), args, dev, stream=TorchLikeStream())
    AmdBackend().launch(kernel, (1, 1, 1), args, dev, stream=77)
    launches = [c for c in fake.calls if c[0] == "hipModuleLaunchKernel"]
    assert [c[10] for c in launches] == [0xABC, 77] and [c[1] for c in launches] == [0, 0]
    assert [c[1] for c in fake.calls if c[0] == "hipSetDevice"] == [0, 1, 0, 1]
    assert fake.current == 1


def test_hip_errors_are_named():
    kernel = loaded_kernel(FakeHip(error=1))
    dev, args = arguments()
    with pytest.raises(LaunchError, match=r"hipModuleLaunchKernel\('k', grid=\(1, 1, 1\)\).*hipErrorInvalidValue"):
        AmdBackend().launch(kernel, (1, 1, 1), args, dev)
    drv = _driver(FakeHip(error=100))
    assert drv.availability_error() == "HIP call hipGetDeviceCount failed: hipErrorNoDevice"
    assert _driver(FakeHip(count=0)).availability_error() == "the HIP runtime reports no AMD GPU"


def test_an_argument_without_a_device_address_is_a_launch_error():
    kernel = loaded_kernel(FakeHip())
    dev, args = arguments()
    args[0] = KernelArg(args[0].type, PointerArg(Buffer(dev, 16, None, None), 0))
    with pytest.raises(LaunchError, match="kernel 'k': an argument is not in AMD GPU memory"):
        AmdBackend().launch(kernel, (1, 1, 1), args, dev)


class FakeLaunch:
    """Stands in for libamdhip64's hipModuleLaunchKernel: reads what the runtime would."""

    def __init__(self, results=(0,)):
        self.calls, self.results = [], list(results)

    def __call__(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        values = [t.from_address(params[i]).value for i, t in enumerate(READ)]
        self.calls.append((function.value, (gx, gy, gz), (bx, by, bz), shared, stream, values, extra))
        return self.results.pop(0) if self.results else 0


def raw(fake_launch, fake_hip=None):
    drv = _driver(fake_hip or FakeHip())
    drv._launch_fn = fake_launch
    drv._device_calls = drv.hip.device_calls()
    kernel = _loaded(drv, 0xF00D, 1024, 128)
    return drv, kernel.raw_launcher()


def test_raw_launch_packs_the_arguments_once():
    fake = FakeLaunch()
    drv, run = raw(fake)
    run(3, 2, 1, 77, None, 0x7F0000001040, -7, 2**40 + 3, 1.5, True, -0.25)
    run(1, 1, 1, None, None, 0x7F0000002000, 5, 6, 7.0, False, 8.0)
    first, second = fake.calls
    assert first == (0xF00D, (3, 2, 1), (128, 1, 1), 1024, 77,
                     [0x7F0000001040, -7, 2**40 + 3, 1.5, 1, -0.25], None)
    assert second[4] == 0 and second[5] == [0x7F0000002000, 5, 6, 7.0, 0, 8.0]
    assert [c for c in drv.hip.calls if c[0] == "hipSetDevice"] == []


def test_raw_launch_on_another_device_than_the_callers_sets_it_back():
    fake_hip = FakeHip(current=1, count=2)
    devices = []
    fake = FakeLaunch()

    def launch(*args):
        devices.append(fake_hip.current)
        return fake(*args)
    _, run = raw(launch, fake_hip)
    run(1, 1, 1, 0, None, 0, 1, 2, 3.0, False, 4.0)
    assert devices == [0] and fake_hip.current == 1


def test_raw_launch_errors_name_the_kernel_and_the_hip_error():
    _, run = raw(FakeLaunch(results=(1,)))
    with pytest.raises(LaunchError, match=r"hipModuleLaunchKernel\('k'.*hipErrorInvalidValue"):
        run(1, 1, 1, 0, None, 0, 1, 2, 3.0, False, 4.0)
    _, run = raw(FakeLaunch())
    with pytest.raises(LaunchError, match="kernel 'k': an argument is not in AMD GPU memory"):
        run(1, 1, 1, 0, None, None, 1, 2, 3.0, False, 4.0)


def test_no_raw_launch_without_libamdhip64_or_for_16_bit_float_scalars():
    drv = _driver(FakeHip())
    drv._launch_fn = None
    drv._device_calls = drv.hip.device_calls()
    assert _loaded(drv, 1, 0, 128).raw_launcher() is None
    drv._launch_fn = FakeLaunch()
    assert _loaded(drv, 1, 0, 128, [("h", bf16)]).raw_launcher() is None


@no_runtime
def test_the_real_library_is_not_found_here():
    assert drvmod._open_launch() is None
