"""The raw launch (``LoadedKernel.raw_launcher``: one ``struct.pack_into`` and
``cuLaunchKernelEx`` through ctypes) against a fake libcuda function; no GPU needed."""
import ctypes

import pytest

from anytile import gpu_host
from anytile.errors import LaunchError
from anytile.ir.types import PointerType, f32, f64, i1, i32, i64
from anytile_nvidia import driver as drvmod

SIGNATURE = [("x", PointerType(f32)), ("n", i32), ("big", i64), ("scale", f32), ("flag", i1),
             ("d", f64)]


class CUlaunchConfig(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]


class FakeLaunchEx:
    """Stands in for libcuda's cuLaunchKernelEx: decodes what a real driver would read."""

    def __init__(self, results=(0,)):
        self.calls = []
        self.results = list(results)

    def __call__(self, config, function, params, extra):
        cfg = CUlaunchConfig.from_address(config.value)
        read = [ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64, ctypes.c_float, ctypes.c_int32,
                ctypes.c_double]
        values = [t.from_address(params[i]).value for i, t in enumerate(read)]
        self.calls.append((tuple(cfg.grid), tuple(cfg.block), cfg.shared, cfg.stream or 0,
                           cfg.num_attrs, function.value, values, extra))
        return self.results.pop(0) if self.results else 0


class FakeCu:
    class CUresult(int):
        CUDA_SUCCESS = 0

    def __init__(self, devices):
        self.devices = devices

    def cuDeviceGetCount(self):
        return 0, self.devices

    def cuGetErrorName(self, err):
        return 0, b"CUDA_ERROR_LAUNCH_FAILED"


OWN_CONTEXT, TORCH_CONTEXT = 0xC0, 0x70


class FakeContexts:
    """libcuda's cuCtxGetCurrent / cuCtxPushCurrent / cuCtxPopCurrent on a context stack."""

    def __init__(self, stack=(OWN_CONTEXT,)):
        self.stack = list(stack)
        self.log = []

    def get(self, ref):
        self.log.append(("get",))
        ref._obj.value = self.stack[-1] if self.stack else None
        return 0

    def push(self, ctx):
        self.log.append(("push", ctx.value))
        self.stack.append(ctx.value)
        return 0

    def pop(self, ref):
        self.log.append(("pop", self.stack.pop()))
        return 0

    @property
    def calls(self):
        return self.get, self.push, self.pop


def raw_kernel(launch_ex, contexts=None, devices=2):
    drv = drvmod.Driver()
    drv._cu = FakeCu(devices)
    drv._launch_ex = launch_ex
    drv._context_calls = (contexts or FakeContexts()).calls
    drv._contexts[0] = OWN_CONTEXT
    kernel = drvmod.LoadedKernel.build(drv, 0, None, 0xF00D, "k", 1024, 128, SIGNATURE)
    return drv, kernel.raw_launcher()


def test_raw_launch_writes_config_and_arguments():
    fake = FakeLaunchEx()
    _, run = raw_kernel(fake)
    run(3, 2, 1, 77, None, 0x7F0000001040, -7, 2**40 + 3, 1.5, True, -0.25)
    (call,) = fake.calls
    assert call[:6] == ((3, 2, 1), (128, 1, 1), 1024, 77, 0, 0xF00D)
    assert call[6] == [0x7F0000001040, -7, 2**40 + 3, 1.5, 1, -0.25] and call[7] is None


def test_raw_launch_takes_the_owners_framework_stream(monkeypatch):
    class Tensor:
        pass
    monkeypatch.setitem(gpu_host.STREAM_GETTERS, Tensor, lambda index: 0xABC + index)
    fake = FakeLaunchEx()
    _, run = raw_kernel(fake)
    run(1, 1, 1, None, Tensor(), 0, 1, 2, 3.0, False, 4.0)
    run(1, 1, 1, None, None, 0, 1, 2, 3.0, False, 4.0)

    class TorchLikeStream:
        cuda_stream = 0xDEF
    run(1, 1, 1, TorchLikeStream(), None, 0, 1, 2, 3.0, False, 4.0)
    assert [c[3] for c in fake.calls] == [0xABC, 0, 0xDEF]


@pytest.mark.parametrize("stack", [[], [TORCH_CONTEXT]], ids=["no context", "torch's context"])
def test_raw_launch_pushes_its_context_and_restores_the_callers(stack):
    contexts = FakeContexts(stack)
    seen = []
    fake = FakeLaunchEx()

    def launch(*args):
        seen.append(contexts.stack[-1])
        return fake(*args)
    _, run = raw_kernel(launch, contexts)
    run(1, 1, 1, 0, None, 0, 1, 2, 3.0, False, 4.0)
    assert seen == [OWN_CONTEXT] and contexts.stack == stack
    assert contexts.log == [("get",), ("push", OWN_CONTEXT), ("pop", OWN_CONTEXT)]


def test_raw_launch_with_its_context_current_switches_nothing():
    contexts = FakeContexts([TORCH_CONTEXT, OWN_CONTEXT])
    fake = FakeLaunchEx()
    _, run = raw_kernel(fake, contexts)
    run(1, 1, 1, 0, None, 0, 1, 2, 3.0, False, 4.0)
    assert len(fake.calls) == 1 and contexts.log == [("get",)]


def test_with_one_gpu_the_raw_launch_asks_for_a_context_only_when_it_has_none():
    contexts = FakeContexts([OWN_CONTEXT])
    fake = FakeLaunchEx()
    _, run = raw_kernel(fake, contexts, devices=1)
    run(1, 1, 1, 0, None, 0, 1, 2, 3.0, False, 4.0)
    assert len(fake.calls) == 1 and contexts.log == []
    contexts = FakeContexts([])              # a new thread: no context current
    fake = FakeLaunchEx(results=(201, 0))    # CUDA_ERROR_INVALID_CONTEXT, then success
    _, run = raw_kernel(fake, contexts, devices=1)
    run(1, 1, 1, 0, None, 0, 1, 2, 3.0, False, 4.0)
    assert len(fake.calls) == 2 and contexts.stack == []
    assert contexts.log == [("push", OWN_CONTEXT), ("pop", OWN_CONTEXT)]


def test_raw_launch_errors_name_the_kernel_and_the_driver_error():
    _, run = raw_kernel(FakeLaunchEx(results=(719,)))
    with pytest.raises(LaunchError, match="cuLaunchKernelEx\\('k'.*CUDA_ERROR_LAUNCH_FAILED"):
        run(1, 1, 1, 0, None, 0, 1, 2, 3.0, False, 4.0)
    _, run = raw_kernel(FakeLaunchEx())
    with pytest.raises(LaunchError, match="kernel 'k': an argument is not in CUDA device memory"):
        run(1, 1, 1, 0, None, None, 1, 2, 3.0, False, 4.0)


def test_no_raw_launch_without_libcuda_or_for_16_bit_float_scalars():
    from anytile.ir.types import bf16
    drv = drvmod.Driver()
    drv._cu = FakeCu(1)
    drv._launch_ex = None
    drv._context_calls = FakeContexts().calls
    assert drvmod.LoadedKernel.build(drv, 0, None, 1, "k", 0, 128, SIGNATURE).raw_launcher() is None
    drv._launch_ex = FakeLaunchEx()
    kernel = drvmod.LoadedKernel.build(drv, 0, None, 1, "k", 0, 128, [("h", bf16)])
    assert kernel.raw_launcher() is None
