"""The launch fast path (``fast_launch.make_fast_launcher``) against a pretend GPU backend that
offers ``Backend.launcher`` and ``Backend.foreign_reader``: which launches take it, that its
key follows dtype, alignment, ints equal to 1 and divisibility, and that results and errors
stay those of the general path."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.backend import Buffer, DeviceInfo, ImportedArray, KernelArg, PointerArg
from anytile.interpreter import InterpreterBackend
from anytile.ir.types import PointerType, f32, from_numpy
from anytile.runtime.discovery import register_backend, unregister_backend

_DEVICE = DeviceInfo("fastfake:0", 0, "pretend GPU with raw launches")


@at.jit
def axpy(x_ptr, out_ptr, n, a, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a, mask=mask)


class FakeTensor:
    """A torch-like tensor of the pretend framework: it owns an ``at.Array`` on the fake GPU
    and answers ``data_ptr()``, ``get_device()``, ``dtype``, ``__dlpack_device__``."""

    def __init__(self, array):
        self.array = array
        self.dtype = array.dtype

    def data_ptr(self):
        return self.array.data_ptr()

    def get_device(self):
        return 0

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        raise NotImplementedError


class FastFakeGpu(InterpreterBackend):
    """The interpreter posing as a non-host backend with the optional fast-path hooks."""

    name = "fastfake"
    device_prefix = "fastfake"
    host_memory = False

    def __init__(self):
        super().__init__()
        self.general_launches = 0
        self.raw_launches: list = []

    def devices(self):
        return [_DEVICE]

    def target_of(self, device):
        return at.Target("fastfake", "reference")

    def load(self, kernel, device):
        return super().load(kernel, device), kernel.signature

    def launch(self, loaded, grid, args, device, stream=None):
        self.general_launches += 1
        super().launch(loaded[0], grid, args, device, stream)

    def launcher(self, loaded, device):
        executor, signature = loaded

        def run(gx, gy, gz, stream, owner, *values):
            self.raw_launches.append((values, stream, owner))
            args = [KernelArg(t, PointerArg(Buffer(device, 0, None, v)) if isinstance(t, PointerType)
                              else v) for (_, t), v in zip(signature, values)]
            executor.launch((gx, gy, gz), args)
        return run

    def device_of_foreign(self, obj):
        return _DEVICE if isinstance(obj, FakeTensor) else None

    def import_array(self, obj, device):
        if not isinstance(obj, FakeTensor):
            return None
        a = obj.array
        buffer = Buffer(device, a.nbytes, a.buffer.handle, a.data_ptr(), owner=obj)
        return ImportedArray(buffer, 0, a.shape, a.stride(), from_numpy(a.dtype))

    def foreign_reader(self, cls):
        if cls is not FakeTensor:
            return None
        return lambda t: (t.data_ptr(), (str(t.dtype), t.get_device(), t.data_ptr() % 16 == 0))


@pytest.fixture
def gpu():
    record = register_backend(FastFakeGpu)
    try:
        yield record.backend
    finally:
        unregister_backend("fastfake")


def _array(values, dtype=np.float32):
    return at.asarray(np.asarray(values, dtype), device="fastfake")


def test_repeated_launches_take_the_fast_path(gpu):
    x = _array(np.arange(16))
    out = _array(np.full(16, np.nan))
    first = axpy[(1,)](x, out, 16, 2.0, BLOCK=16)
    assert gpu.general_launches == 1 and not gpu.raw_launches
    second = axpy[(1,)](x, out, 16, 3.0, BLOCK=16)
    assert second is first and gpu.general_launches == 1 and len(gpu.raw_launches) == 1
    np.testing.assert_array_equal(out.numpy(), 3.0 * np.arange(16, dtype=np.float32))
    values, stream, owner = gpu.raw_launches[0]
    assert values == (x.data_ptr(), out.data_ptr(), 16, 3.0) and stream is None and owner is None


def test_a_new_dtype_or_alignment_is_a_new_specialisation(gpu):
    x = _array(np.arange(16))
    out = _array(np.zeros(16))
    f32_kernel = axpy[(1,)](x, out, 16, 2.0, BLOCK=16)
    axpy[(1,)](x, out, 16, 2.0, BLOCK=16)
    x64, out64 = _array(np.arange(16), np.float64), _array(np.zeros(16), np.float64)
    f64_kernel = axpy[(1,)](x64, out64, 16, 2.0, BLOCK=16)
    assert f64_kernel is not f32_kernel
    assert dict(f64_kernel.signature)["x_ptr"] == PointerType(from_numpy(np.dtype(np.float64)))
    np.testing.assert_array_equal(out64.numpy(), 2.0 * np.arange(16))
    # the same memory seen 4 bytes further on is no longer 16-byte aligned
    shifted = at.Array(x.buffer, (15,), f32, x.device, offset=4)
    unaligned = axpy[(1,)](shifted, out, 15, 1.0, BLOCK=16)
    assert unaligned is not f32_kernel
    np.testing.assert_array_equal(out.numpy()[:15], np.arange(1, 16, dtype=np.float32))
    assert axpy[(1,)](x, out, 16, 2.0, BLOCK=16) is f32_kernel   # back on the fast path


def test_ints_equal_to_one_and_divisibility_are_specialised_on_the_fast_path(gpu):
    x = _array(np.arange(16) + 1)
    out = _array(np.zeros(16))
    for _ in range(2):   # the second round runs from the fast cache
        out.copy_from(np.zeros(16))
        one = axpy[(1,)](x, out, 1, 2.0, BLOCK=16)
        assert one.constexprs["n"] == 1 and "n" not in dict(one.signature)
        assert out.numpy()[0] == 2.0 and np.all(out.numpy()[1:] == 0.0)
        sixteen = axpy[(1,)](x, out, 16, 1.0, BLOCK=16)
        seven = axpy[(1,)](x, out, 7, 1.0, BLOCK=16)
        assert len({id(one), id(sixteen), id(seven)}) == 3
    assert gpu.raw_launches[-1][0][2] == 7
    kernel = at.jit(axpy.fn, do_not_specialize=("n",))
    for _ in range(2):
        assert "n" in dict(kernel[(1,)](x, out, 1, 2.0, BLOCK=16).signature)


def test_foreign_tensors_go_through_the_backends_reader(gpu):
    xh = np.arange(16, dtype=np.float32)
    x = FakeTensor(_array(xh))
    out = FakeTensor(_array(np.zeros(16)))
    for scale in (2.0, 5.0):
        compiled = axpy[(1,)](x, out, 16, scale, BLOCK=16)
        np.testing.assert_array_equal(out.array.numpy(), scale * xh)
    assert compiled.target.backend == "fastfake"
    assert gpu.general_launches == 1 and len(gpu.raw_launches) == 1
    values, stream, owner = gpu.raw_launches[0]
    assert owner is x and values[0] == x.data_ptr()
    axpy[(1,)](x, out, 16, 1.0, BLOCK=16, stream=7)
    assert gpu.raw_launches[-1][1] == 7


def test_errors_on_the_fast_path_name_the_kernel(gpu):
    x = _array(np.arange(16))
    axpy[(1,)](x, x, 16, 1.0, BLOCK=16)
    axpy[(1,)](x, x, 16, 1.0, BLOCK=16)
    with pytest.raises(TypeError, match="axpy: argument 'a' is a str"):
        axpy[(1,)](x, x, 16, "two", BLOCK=16)
    with pytest.raises(TypeError, match=r"axpy\(\) takes 5 positional arguments but 6 were given"):
        axpy[(1,)](x, x, 16, 1.0, 16, 3)
    with pytest.raises(TypeError, match=r"axpy\(\) missing 1 required positional argument: 'BLOCK'"):
        axpy[(1,)](x, x, 16, 1.0)


def test_grids_and_options_on_the_fast_path(gpu):
    x = _array(np.arange(64))
    out = _array(np.zeros(64))
    for _ in range(2):
        axpy[lambda meta: (1,)](x, out, 16, 2.0, BLOCK=16, num_warps=2)
        axpy[(0,)](x, out, 16, 100.0, BLOCK=16, num_warps=2)     # launches nothing
    assert len(gpu.raw_launches) == 1
    np.testing.assert_array_equal(out.numpy()[:16], 2.0 * np.arange(16, dtype=np.float32))


def test_rebinding_a_called_jit_function_leaves_the_fast_path(gpu, tmp_path, monkeypatch):
    source = (
        "import anytile as at, anytile.language as tl\n"
        "@at.jit\ndef f(x):\n    return x + 1.0\n"
        "@at.jit\ndef k(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr + offs, f(tl.load(x_ptr + offs)))\n")
    (tmp_path / "rebind_mod.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    import rebind_mod
    x, out = _array(np.zeros(16)), _array(np.zeros(16))
    rebind_mod.k[(1,)](x, out, BLOCK=16)
    rebind_mod.k[(1,)](x, out, BLOCK=16)
    assert np.all(out.numpy() == 1.0)
    (tmp_path / "other_mod.py").write_text(source.replace("x + 1.0", "x + 2.0"))
    import other_mod
    rebind_mod.f = other_mod.f
    rebind_mod.k[(1,)](x, out, BLOCK=16)
    assert np.all(out.numpy() == 2.0)


@at.jit
def times_s(x_ptr, out_ptr, S: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * S)


@pytest.mark.parametrize("order", [(1.0, 1, True), (1, True, 1.0)])
def test_equal_constexprs_of_other_types_compile_apart(order):
    """1, 1.0 and True hash alike; they must not share a compiled kernel."""
    x = np.full(4, 2 ** 24 + 1, np.int32)
    for s in order:
        out = np.zeros(4, np.int32)
        compiled = times_s[(1,)](x, out, s, BLOCK=4, device="interpreter")
        assert type(compiled.constexprs["S"]) is type(s)
        assert out[0] - 2 ** 24 == (0 if type(s) is float else 1)


def test_numpy_bools_are_scalars():
    out = np.zeros(4, np.float32)
    axpy[(1,)](np.ones(4, np.float32), out, 4, np.float32(3.0), BLOCK=4, device="interpreter")
    np.testing.assert_array_equal(out, 3.0)
    from anytile.runtime.arrays import device_of_foreign_array
    assert device_of_foreign_array(np.bool_(True)) is None
    assert device_of_foreign_array(1) is None


def test_generated_python_is_compiled_in_one_place():
    # fast_launch.define is where core turns generated source into functions: one place to
    # read and to audit
    import ast
    from pathlib import Path

    import anytile

    class Calls(ast.NodeVisitor):
        """(file, innermost function) of each exec() or eval() call."""

        def __init__(self, where: str) -> None:
            self.where, self.functions, self.found = where, ["<module>"], []

        def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
            self.functions.append(node.name)
            self.generic_visit(node)
            self.functions.pop()

        def visit_Call(self, node: ast.Call) -> None:
            if isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval"):
                self.found.append((self.where, self.functions[-1]))
            self.generic_visit(node)

    core = Path(anytile.__file__).parent
    found = []
    for path in sorted(core.rglob("*.py")):
        calls = Calls(path.relative_to(core).as_posix())
        calls.visit(ast.parse(path.read_text(encoding="utf-8")))
        found += calls.found
    assert found == [("runtime/fast_launch.py", "define")], found


def test_a_warmed_up_kernel_launches_on_the_fast_path(gpu):
    """``kernel.warmup(...)[grid](...)`` (how Triton's tutorials launch a persistent kernel
    sized from its registers) takes the fast path as ``kernel[grid](...)`` does, its
    constexprs passed by position."""
    x = _array(np.arange(16))
    out = _array(np.full(16, np.nan))
    compiled = axpy.warmup(x, out, 16, 2.0, BLOCK=16, grid=(1,))
    compiled[(1,)](x, out, 16, 2.0, 16)
    launches = gpu.general_launches
    compiled[(1, 1, 1)](x, out, 16, 3.0, 16)
    assert gpu.general_launches == launches and len(gpu.raw_launches) == 1
    np.testing.assert_array_equal(out.numpy(), 3.0 * np.arange(16, dtype=np.float32))


@at.autotune(configs=[at.Config({"BLOCK": 16}, num_warps=4), at.Config({"BLOCK": 32}, num_warps=2)],
             key=["n"], do_bench=lambda fn, quantiles: [1.0, 1.0, 1.0])
@at.heuristics({"SCALE": lambda args: 2.0})
@at.jit
def tuned_axpy(x_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * SCALE, mask=mask)


def test_an_autotuned_kernel_launches_on_the_fast_path(gpu):
    """Once tuned for a key, ``kernel[grid](...)`` of an ``@autotune``/``@heuristics`` kernel
    goes through the kernel's fast path as a plain launch does (Triton's tutorial matmul is
    called so; the general path cost a small matmul as much as the kernel)."""
    x = _array(np.arange(16))
    out = _array(np.full(16, np.nan))
    tuned_axpy[(1,)](x, out, 16)                  # tunes: every config runs
    tuned_axpy[(1,)](x, out, 16)
    launches = gpu.general_launches
    tuned_axpy[lambda meta: (1,)](x, out, 16)
    assert gpu.general_launches == launches and gpu.raw_launches
    np.testing.assert_array_equal(out.numpy(), 2.0 * np.arange(16, dtype=np.float32))


def test_warmup_after_a_launch_is_answered_from_the_fast_path(gpu, monkeypatch):
    """Triton's tutorial softmax calls ``warmup`` before every launch: arguments a launch has
    run with are answered from the fast path's cache, without the general path."""
    import anytile.runtime.jit as jit_module
    x = _array(np.arange(16))
    out = _array(np.full(16, np.nan))
    first = axpy.warmup(x, out, 16, 2.0, BLOCK=16, num_warps=2, grid=(1,))
    first[(1,)](x, out, 16, 2.0, 16)

    def general(*args, **kwargs):
        raise AssertionError("the general path ran")
    monkeypatch.setattr(jit_module, "launch", general)
    assert axpy.warmup(x, out, 16, 5.0, BLOCK=16, num_warps=2, grid=(1,)) is first
    with pytest.raises(AssertionError, match="general path"):      # another specialisation
        axpy.warmup(x, out, 16, 5.0, BLOCK=32, num_warps=2)
