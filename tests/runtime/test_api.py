"""The user's API: arrays, devices, launching, specialisation, caching, AOT compile, CLI."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import anytile as at
import anytile.language as tl


@at.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


def test_array_constructors_and_copies(device):
    a = at.empty((3, 5), np.float32, device=device)
    assert a.shape == (3, 5) and a.dtype == np.float32 and a.device == device
    assert a.stride() == (5, 1) and a.strides == (20, 4) and a.nbytes == 60
    np.testing.assert_array_equal(at.zeros((4,), np.int16, device=device).numpy(), np.zeros(4))
    np.testing.assert_array_equal(at.full((2, 2), 7, np.int64, device=device).numpy(),
                                  np.full((2, 2), 7))
    b = at.empty((8,), tl.bfloat16, device=device)
    assert b.element_type.name == "bf16" and b.itemsize == 2
    host = np.arange(12, dtype=np.float64).reshape(3, 4)
    np.testing.assert_array_equal(at.asarray(host, device=device).numpy(), host)
    np.testing.assert_array_equal(np.asarray(at.asarray(host, device=device)), host)
    like = at.empty_like(at.asarray(host, device=device), dtype=np.int32)
    assert like.shape == (3, 4) and like.dtype == np.int32


def test_numpy_arguments_receive_the_kernels_results_on_every_device(device):
    # on a device with memory of its own the arrays are copied there and the results back;
    # twice, so that both the general launch path and the fast path are covered
    x = np.arange(100, dtype=np.float32)
    for factor in (2.0, 3.0):
        out = np.zeros_like(x)
        scale_kernel[(4,)](x, out, 100, factor, BLOCK=32, device=device)
        np.testing.assert_array_equal(out, x * factor)
    np.testing.assert_array_equal(x, np.arange(100, dtype=np.float32))   # inputs untouched


def test_bad_dtype_is_a_clear_error():
    with pytest.raises(TypeError, match="not a dtype anytile supports"):
        at.empty((2,), np.complex64, device="interpreter")


_HUGE = (2**40, 2**40)      # 2**80 elements: the count wraps in 64 bits


class _Shaped:
    """A foreign array of any shape (NumPy refuses to make one this large)."""

    def __init__(self, shape):
        self.shape, self.dtype = shape, np.dtype(np.float32)


@pytest.mark.parametrize("make, what", [
    (lambda shape, dev: at.empty(shape, np.float32, device=dev), "at.empty"),
    (lambda shape, dev: at.zeros(shape, np.float32, device=dev), "at.zeros"),
    (lambda shape, dev: at.full(shape, 1.5, np.float32, device=dev), "at.full"),
    (lambda shape, dev: at.empty_like(_Shaped(shape), device=dev), "at.empty_like"),
    (lambda shape, dev: at.zeros_like(_Shaped(shape), device=dev), "at.zeros_like"),
])
def test_shapes_too_large_or_negative_are_clear_errors(device, make, what):
    """An element count past 64 bits used to wrap: an array of size 0 over a 1-byte buffer."""
    with pytest.raises(ValueError, match=rf"{what}: shape \(1099511627776, 1099511627776\) of "
                                         rf"float32 is {2**80} elements \({2**82} bytes\)"):
        make(_HUGE, device)
    with pytest.raises(ValueError, match=rf"{what}: shape \({2**62},\) of float32 .* at most"):
        make((2**62,), device)                  # 2**64 bytes: one past what offsets hold
    if what.endswith("_like"):
        return
    with pytest.raises(ValueError, match=rf"{what}: negative dimension in shape \(4, -1\)"):
        make((4, -1), device)
    with pytest.raises(TypeError, match=rf"{what}: the shape must be an int or a sequence of ints"):
        make((2.5,), device)


def test_an_allocation_the_device_refuses_names_the_size(monkeypatch):
    dev = at.device("interpreter")

    def refuse(info, nbytes):
        raise RuntimeError("out of device memory")
    monkeypatch.setattr(dev.backend, "alloc", refuse)
    with pytest.raises(MemoryError, match=r"at.full: interpreter:0 could not allocate 24 bytes "
                                          r"for shape \(3,\) of float64: RuntimeError: out of"):
        at.full((3,), 1.0, np.float64, device=dev)


def test_grid_callable_sees_constexprs_and_args(device, rng):
    n = 1000
    xh = rng.standard_normal(n).astype(np.float32)
    out = at.empty((n,), np.float32, device=device)
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (at.cdiv(meta["n"], meta["BLOCK"]),)
    scale_kernel[grid](at.asarray(xh, device=device), out, n, 2.5, BLOCK=128)
    assert seen["BLOCK"] == 128 and seen["n"] == n
    np.testing.assert_allclose(out.numpy(), xh * np.float32(2.5), rtol=1e-6)


def test_specialisation_compiles_once_per_signature(device):
    kernel = at.jit(scale_kernel.fn)
    x32 = at.zeros((64,), np.float32, device=device)
    x16 = at.zeros((64,), np.float16, device=device)
    c1 = kernel[(1,)](x32, x32, 64, 1.0, BLOCK=64)
    c2 = kernel[(1,)](x32, x32, 64, 2.0, BLOCK=64)
    assert c1 is c2                                    # same types: cached
    c3 = kernel[(1,)](x16, x16, 64, 1.0, BLOCK=64)
    assert c3 is not c1 and "ptr<f16>" in c3.asm["ir"]
    c4 = kernel[(1,)](x32, x32, 63, 1.0, BLOCK=64)     # 63 is not divisible by 16
    assert c4 is not c1
    assert "divisibility" in c1.asm["ir"]
    c5 = kernel[(1,)](x32, x32, 64, 1.0, BLOCK=32)     # another constexpr
    assert c5 is not c1


def test_rebinding_a_called_jit_function_recompiles(tmp_path, monkeypatch):
    (tmp_path / "kmod.py").write_text(textwrap.dedent("""
        import anytile as at
        import anytile.language as tl

        @at.jit
        def helper(x):
            return x + 1

        @at.jit
        def helper_times_ten(x):
            return x * 10

        @at.jit
        def kern(out_ptr):
            tl.store(out_ptr, helper(tl.program_id(0) + 4))
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import kmod
    out = at.zeros((1,), np.int32, device="interpreter")
    kmod.kern[(1,)](out)
    assert out.numpy()[0] == 5
    kmod.helper = kmod.helper_times_ten
    kmod.kern[(1,)](out)
    assert out.numpy()[0] == 40


def test_warmup_compiles_without_running():
    out = at.asarray(np.full(64, -1.0, np.float32), device="interpreter")
    compiled = scale_kernel.warmup(out, out, 64, 2.0, BLOCK=64, grid=(1,))
    assert compiled.asm["ir"].startswith("kernel @scale_kernel")
    assert np.all(out.numpy() == -1.0)


def test_debug_comes_from_the_launch_then_jit_then_anytile_debug(monkeypatch):
    """``debug=`` at launch wins, then ``@jit(debug=...)``, then ``ANYTILE_DEBUG`` (read when
    a kernel is compiled); ``at.compile`` follows the same rules."""
    def new_kernel(**jit_options):
        @at.jit(**jit_options)
        def copy(x_ptr, out_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))
        return copy

    def debug_of(kernel, **options):
        x = at.zeros((16,), np.float32, device="interpreter")
        return kernel.warmup(x, x, BLOCK=16, **options).options.debug

    def aot_debug_of(kernel, **options):
        return at.compile(kernel, target="interpreter:reference",
                          signature={"x_ptr": "*fp32", "out_ptr": "*fp32"},
                          constexprs={"BLOCK": 16}, **options).options.debug

    monkeypatch.delenv("ANYTILE_DEBUG", raising=False)
    assert not debug_of(new_kernel()) and debug_of(new_kernel(), debug=True)
    assert debug_of(new_kernel(debug=True)) and not debug_of(new_kernel(debug=True), debug=False)
    assert aot_debug_of(new_kernel(debug=True)) and not aot_debug_of(new_kernel())
    monkeypatch.setenv("ANYTILE_DEBUG", "0")
    assert not debug_of(new_kernel())
    monkeypatch.setenv("ANYTILE_DEBUG", "1")
    assert debug_of(new_kernel()) and aot_debug_of(new_kernel())
    assert not debug_of(new_kernel(), debug=False) and not debug_of(new_kernel(debug=False))


def test_arrays_on_different_devices_are_refused():
    devs = at.devices()
    if len(devs) < 2:
        pytest.skip("needs two usable devices")
    a = at.zeros((16,), np.float32, device=devs[0])
    b = at.zeros((16,), np.float32, device=devs[1])
    with pytest.raises(at.BackendError, match="different devices"):
        scale_kernel[(1,)](a, b, 16, 1.0, BLOCK=16)


def test_bad_arguments_are_clear_errors():
    x = at.zeros((16,), np.float32, device="interpreter")
    with pytest.raises(TypeError, match=r"scale_kernel\(\) missing 1 required positional argument: 'BLOCK'"):
        scale_kernel[(1,)](x, x, 16, 1.0)
    with pytest.raises(TypeError, match="argument 'factor' is a str"):
        scale_kernel[(1,)](x, x, 16, "two", BLOCK=16)
    with pytest.raises(TypeError, match=r"scale_kernel\(\) takes 5 positional arguments but 6"):
        scale_kernel[(1,)](x, x, 16, 1.0, 16, 3)
    with pytest.raises(ValueError, match="1 to 3 non-negative ints"):
        scale_kernel[(1, 1, 1, 1)](x, x, 16, 1.0, BLOCK=16)
    with pytest.raises(TypeError, match="no option"):
        scale_kernel[(1,)](x, x, 16, 1.0, BLOCK=16, num_wraps=4)
    with pytest.raises(RuntimeError, match="launch it with a grid"):
        scale_kernel(x, x, 16, 1.0, BLOCK=16)


def test_another_vendors_tuning_hints_are_ignored(device):
    # one Triton config list serves every device: AMD's and NVIDIA's hints change no result
    x = np.arange(16, dtype=np.float32)
    out = np.zeros_like(x)
    scale_kernel[(1,)](x, out, 16, 2.0, BLOCK=16, waves_per_eu=2, matrix_instr_nonkdim=16,
                       kpack=2, maxnreg=128, device=device)
    np.testing.assert_array_equal(out, 2 * x)


def test_empty_grid_launches_nothing():
    out = at.asarray(np.full(16, 3.0, np.float32), device="interpreter")
    scale_kernel[(0,)](out, out, 16, 0.0, BLOCK=16)
    assert np.all(out.numpy() == 3.0)


def test_env_var_chooses_the_default_device(monkeypatch):
    monkeypatch.setenv("ANYTILE_DEVICE", "interpreter")
    assert at.default_device().name == "interpreter:0"
    xh = np.ones(16, np.float32)
    out = np.zeros(16, np.float32)
    compiled = scale_kernel[(1,)](xh, out, 16, 3.0, BLOCK=16)
    assert compiled.target.backend == "interpreter"
    np.testing.assert_array_equal(out, 3.0)


def test_aot_compile_for_every_installed_target():
    for record in at.list_backends():
        if record.backend is None:
            continue
        target = f"{record.name}:{record.backend.targets()[0]}"
        compiled = at.compile(scale_kernel, target=target,
                              signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                         "factor": "fp32"},
                              constexprs={"BLOCK": 128}, num_warps=4)
        assert "ir" in compiled.asm and str(compiled.target) == target
        assert compiled.signature[0][0] == "x_ptr"


def test_aot_compile_errors_name_the_problem():
    with pytest.raises(at.CompilationError, match="'factor'.*no type in signature"):
        at.compile(scale_kernel, target="interpreter:reference",
                   signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                   constexprs={"BLOCK": 128})
    with pytest.raises(ValueError, match="unknown type 'float33'"):
        at.compile(scale_kernel, target="interpreter:reference",
                   signature={"x_ptr": "*float33", "out_ptr": "*fp32", "n": "i32", "factor": "fp32"},
                   constexprs={"BLOCK": 128})
    with pytest.raises(at.BackendError, match="cannot compile for 'sm_1'"):
        at.compile(scale_kernel, target="interpreter:sm_1", signature={}, constexprs={})


def test_cli_compile_prints_a_stage(tmp_path):
    src = tmp_path / "k.py"
    src.write_text(textwrap.dedent("""
        import anytile as at
        import anytile.language as tl

        @at.jit
        def double(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
    """))
    run = lambda *a: subprocess.run([sys.executable, "-m", "anytile", "compile", *a],  # noqa: E731
                                    capture_output=True, text=True)
    res = run(f"{src}:double", "--target", "interpreter:reference",
              "--signature", "x_ptr=*fp32,n=i32", "--constexpr", "BLOCK=64", "--emit", "ir")
    assert res.returncode == 0, res.stderr
    assert "kernel @double" in res.stdout and "arange" in res.stdout
    res = run(f"{src}:double", "--target", "interpreter:reference",
              "--signature", "x_ptr=*fp32", "--constexpr", "BLOCK=64")
    assert res.returncode == 1 and "'n'" in res.stderr and "Traceback" not in res.stderr


def test_compilation_error_shows_the_users_line_not_internals(tmp_path):
    src = tmp_path / "bad.py"
    src.write_text(textwrap.dedent("""
        import numpy as np
        import anytile as at
        import anytile.language as tl

        @at.jit
        def bad(x_ptr, n):
            offs = tl.arange(0, n)
            tl.store(x_ptr + offs, 1.0)

        bad[(1,)](np.zeros(16, np.float32), 16)
    """))
    res = subprocess.run([sys.executable, str(src)], capture_output=True, text=True)
    assert res.returncode == 1
    assert f"{src}:8:" in res.stderr
    assert "tl.arange(0, n)" in res.stderr and "^" in res.stderr
    assert "must be a tl.constexpr" in res.stderr
    assert "frontend" not in res.stderr and "generator.py" not in res.stderr


def test_integer_one_is_specialised_as_a_constant_like_triton():
    x = at.asarray(np.arange(16, dtype=np.float32), device="interpreter")
    out = at.zeros((16,), np.float32, device="interpreter")
    compiled = scale_kernel[(1,)](x, out, 1, 2.0, BLOCK=16)
    assert [name for name, _ in compiled.signature] == ["x_ptr", "out_ptr", "factor"]
    assert compiled.constexprs["n"] == 1
    result = out.numpy()
    assert result[0] == 0.0 and np.all(result[1:] == 0.0)   # n=1: only element 0 is written
    x2 = at.asarray(np.full(16, 3.0, np.float32), device="interpreter")
    scale_kernel[(1,)](x2, out, 1, 2.0, BLOCK=16)
    assert out.numpy()[0] == 6.0 and np.all(out.numpy()[1:] == 0.0)
    kernel = at.jit(scale_kernel.fn, do_not_specialize=("n",))
    compiled = kernel[(1,)](x, out, 1, 2.0, BLOCK=16)
    assert [name for name, _ in compiled.signature] == ["x_ptr", "out_ptr", "n", "factor"]


def test_a_kernel_without_source_is_a_clear_error():
    namespace = {}
    exec("def k(x):\n    pass\n", namespace)
    with pytest.raises(TypeError, match="needs the source of 'k'"):
        at.jit(namespace["k"])


def test_cli_compile_of_a_missing_file_is_one_line(tmp_path):
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "anytile", "compile", str(tmp_path / "nope.py:k"),
                           "--target", "interpreter:reference"], capture_output=True, text=True)
    assert done.returncode != 0
    assert "no such file" in done.stderr and "Traceback" not in done.stderr
