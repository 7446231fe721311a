"""The launch path against a fake driver: the argument block the kernel would see, stream
choice and error reporting (no GPU needed)."""
import ctypes

import pytest

from anytile.backend import Buffer, DeviceInfo, KernelArg, PointerArg
from anytile.errors import LaunchError
from anytile.ir.types import PointerType, f32, f64, i1, i32, i64
from anytile_nvidia import driver as drvmod
from anytile_nvidia.backend import NvidiaBackend


class FakeDriverAPI:
    """Records cuLaunchKernel calls; returns ``error`` (a CUresult) when set."""

    class CUresult:
        CUDA_SUCCESS = 0
        CUDA_ERROR_INVALID_CONTEXT = 201
        CUDA_ERROR_INVALID_VALUE = 1

    def __init__(self, error=0, contexts=(0xC0,)):
        self.calls = []
        self.error = error
        self.contexts = list(contexts)      # the thread's context stack, current last
        self.launched_in = []

    def cuLaunchKernel(self, *args):
        self.calls.append(args)
        self.launched_in.append(self.contexts[-1])
        return (self.error,)

    def cuCtxGetCurrent(self):
        return 0, self.contexts[-1] if self.contexts else 0

    def cuCtxPushCurrent(self, ctx):
        self.contexts.append(ctx)
        return (0,)

    def cuCtxPopCurrent(self):
        return 0, self.contexts.pop()

    def cuGetErrorName(self, err):
        return 0, b"CUDA_ERROR_INVALID_VALUE"


SIGNATURE = [("x", PointerType(f32)), ("n", i32), ("big", i64), ("scale", f32), ("flag", i1),
             ("d", f64)]


def loaded_kernel(api):
    drv = drvmod.Driver()
    drv._cu = api
    drv._contexts[0] = 0xC0
    return drvmod.LoadedKernel.build(drv, 0, None, "function", "k", 1024, 128, SIGNATURE)


def arguments(address=0x7F0000001000, offset=64):
    dev = DeviceInfo("cuda:0", 0)
    buf = Buffer(dev, 4096, address, address)
    values = [PointerArg(buf, offset), -7, 2**40 + 3, 1.5, True, -0.25]
    return dev, [KernelArg(t, v) for (_, t), v in zip(SIGNATURE, values)]


def test_argument_block_holds_each_parameter_in_its_c_type():
    api = FakeDriverAPI()
    kernel = loaded_kernel(api)
    dev, args = arguments()
    NvidiaBackend().launch(kernel, (3, 2, 1), args, dev)
    (call,) = api.calls
    assert call[:9] == ("function", 3, 2, 1, 128, 1, 1, 1024, 0)
    params = (ctypes.c_void_p * len(SIGNATURE)).from_address(call[9])
    read = [ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64, ctypes.c_float, ctypes.c_int32,
            ctypes.c_double]
    got = [t.from_address(p).value for t, p in zip(read, params)]
    assert got == [0x7F0000001000 + 64, -7, 2**40 + 3, 1.5, 1, -0.25]


def test_explicit_stream_handles():
    api = FakeDriverAPI()
    kernel = loaded_kernel(api)
    dev, args = arguments()

    class TorchLikeStream:
        cuda_stream = 0xABC
    NvidiaBackend().launch(kernel, (1, 1, 1), args, dev, stream=TorchLikeStream())
    NvidiaBackend().launch(kernel, (1, 1, 1), args, dev, stream=77)
    assert [c[8] for c in api.calls] == [0xABC, 77]


@pytest.mark.parametrize("caller", [[], [0x70]], ids=["no context", "torch's context"])
def test_launch_pushes_the_devices_context_and_restores_the_callers(caller):
    api = FakeDriverAPI(contexts=caller)
    kernel = loaded_kernel(api)
    dev, args = arguments()
    NvidiaBackend().launch(kernel, (1, 1, 1), args, dev)
    assert api.launched_in == [0xC0] and api.contexts == caller


def test_failed_launch_names_the_driver_error():
    kernel = loaded_kernel(FakeDriverAPI(error=1))
    dev, args = arguments()
    with pytest.raises(LaunchError, match="cuLaunchKernel.*CUDA_ERROR_INVALID_VALUE"):
        NvidiaBackend().launch(kernel, (1, 1, 1), args, dev)


def test_argument_without_device_address_is_a_launch_error():
    kernel = loaded_kernel(FakeDriverAPI())
    dev, args = arguments(address=None)
    with pytest.raises(LaunchError, match="not in CUDA device memory"):
        NvidiaBackend().launch(kernel, (1, 1, 1), args, dev)


def test_a_process_forked_after_cuda_was_initialised_is_told_so(monkeypatch):
    """cuInit in a child forked after its parent initialised CUDA answers
    CUDA_ERROR_NOT_INITIALIZED: say that, not "no driver"."""
    import sys
    import types

    class Forked:
        class CUresult:
            CUDA_SUCCESS = 0
            CUDA_ERROR_NOT_INITIALIZED = 3

        @staticmethod
        def cuInit(flags):
            return (Forked.CUresult.CUDA_ERROR_NOT_INITIALIZED,)

    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = Forked
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", Forked)
    drv = drvmod.Driver()
    assert drv.availability_error() is not None
    assert "forked from one that had initialised CUDA" in drv._error
    assert "spawn" in drv._error
