"""``anytile run --as-triton`` and ``anytile.triton_compat``: a program written for Triton runs
unmodified; what anytile does not provide is said by name; the program's own errors keep its
traceback, without anytile's frames."""
import os
import subprocess
import sys
import textwrap

import pytest

import anytile as at
from anytile import triton_compat


def run(tmp_path, body: str, *flags: str, device: str = "cpu"):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(body))
    cmd = [sys.executable, "-m", "anytile", "run", "--as-triton", "--device", device, *flags,
           str(prog), "first-arg"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_a_triton_program_runs_unmodified(tmp_path):
    proc = run(tmp_path, """
        import sys
        import numpy as np
        import triton
        import triton.language as tl
        from triton.language.extra import libdevice
        from triton.runtime import driver

        @triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})],
                         key=["n"])
        @triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
        @triton.jit
        def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            if EVEN:
                x = tl.load(x_ptr + offs)
            else:
                x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(out_ptr + offs, libdevice.fabs(x) * 2, mask=offs < n)

        x = np.linspace(-1, 1, 100, dtype=np.float32)
        out = np.zeros_like(x)
        scale[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
        triton.testing.assert_close(out, 2 * np.abs(x))
        assert driver.active.get_current_target().backend == "cpu"
        props = driver.active.utils.get_device_properties(driver.active.get_current_device())
        assert props["multiprocessor_count"] >= 1 and props["warpSize"] == 1
        print("ok", sys.argv[1:], triton.__version__.split("+")[0])
        """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok ['first-arg'] 3.6.0"


def test_what_anytile_does_not_provide_is_named(tmp_path):
    proc = run(tmp_path, """
        import triton
        assert not hasattr(triton, "AsyncCompileMode")
        triton.AsyncCompileMode
        """)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "AttributeError: triton.AsyncCompileMode is not provided by anytile "
        f"({triton_compat.NOT_PROVIDED_HINT})")
    proc = run(tmp_path, """
        import triton
        triton.compile("kernel.ttgir")
        """)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "NotImplementedError: triton.compile of Triton IR (kernel.ttgir) is not provided by "
        f"anytile ({triton_compat.NOT_PROVIDED_HINT})")
    proc = run(tmp_path, "import triton.tools.disasm\n")
    assert proc.returncode == 1
    assert "No module named 'triton.tools.disasm'" in proc.stderr
    assert "anytile does not provide it" in proc.stderr


def test_set_allocator_is_kept_and_checked():
    def alloc(size, alignment, stream):
        raise AssertionError("anytile's kernels need no global scratch")
    try:
        at.set_allocator(alloc)
        assert at.get_allocator() is alloc
        with pytest.raises(TypeError, match="set_allocator takes a function"):
            at.set_allocator(42)
    finally:
        at.set_allocator(None)


def test_the_programs_own_error_keeps_its_traceback_without_anytiles_frames(tmp_path):
    proc = run(tmp_path, """
        def check(v):
            raise ValueError(f"bad value {v}")

        check(3)
        """)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: bad value 3"
    assert "cli.py" not in proc.stderr and "runpy" not in proc.stderr
    assert sum("prog.py" in ln for ln in lines) == 2          # the call, then the raise


def test_a_compile_error_names_the_kernel_line(tmp_path):
    proc = run(tmp_path, """
        import numpy as np
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr):
            tl.store(x_ptr, undefined_name)

        k[(1,)](np.zeros(1, np.float32))
        """)
    assert proc.returncode == 1
    assert proc.stderr.startswith("anytile: error: ") and "prog.py:8:21 (in k)" in proc.stderr
    assert "undefined_name" in proc.stderr and "Traceback" not in proc.stderr


def test_benchmarks_sweep_all_first_or_none(tmp_path):
    body = """
        import triton
        seen = []

        @triton.testing.perf_report(triton.testing.Benchmark(
            x_names=["n"], x_vals=[1, 2, 3], line_arg="p", line_vals=[0], line_names=["t"],
            plot_name="sweep"))
        def bench(n, p):
            seen.append(n)
            return 1.0

        bench.run()
        print(seen)
        """
    assert run(tmp_path, body).stdout.strip() == "[1, 2, 3]"
    assert run(tmp_path, body, "--benchmarks", "first").stdout.strip() == "[1]"
    assert run(tmp_path, body, "--benchmarks", "none").stdout.splitlines() == [
        "sweep: not run (ANYTILE_BENCHMARKS=none)", "[]"]


def test_a_bad_device_or_program_is_one_line(tmp_path):
    proc = run(tmp_path, "print('never')\n", device="nowhere:0")
    assert proc.returncode == 1 and "never" not in proc.stdout
    assert proc.stderr.startswith("anytile: error: ") and "nowhere" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = subprocess.run([sys.executable, "-m", "anytile", "run", "--as-triton",
                           str(tmp_path / "missing.py")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"anytile: error: program '{tmp_path / 'missing.py'}' is not a file"


def test_device_properties_have_tritons_names_on_every_device(device):
    props = triton_compat.device_properties(device)
    assert set(props) >= {"multiprocessor_count", "max_shared_mem", "max_num_regs", "warpSize",
                          "max_threads_per_sm"}
    assert props["multiprocessor_count"] >= 1 and props["warpSize"] >= 1
    assert all(isinstance(v, int) and v >= 0 for v in props.values())


@pytest.mark.parametrize("name", ["triton", "triton.language", "triton.language.extra.libdevice",
                                  "triton.testing", "triton.runtime", "triton.runtime.driver",
                                  "triton.compiler", "triton.runtime.autotuner",
                                  "triton.tools.tensor_descriptor"])
def test_every_served_module_imports(name):
    code = (f"import anytile.triton_compat as c; c.install(); import importlib; "
            f"m = importlib.import_module({name!r}); print(type(m).__name__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_install_refuses_when_the_real_triton_is_loaded(monkeypatch):
    import types
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    with pytest.raises(at.AnytileError, match="already imported"):
        triton_compat.install()


def test_reinterpret_lets_a_kernel_read_memory_as_another_dtype(device):
    import numpy as np
    import anytile.language as tl

    @at.jit
    def halve(x_ptr, y_ptr):
        offs = tl.arange(0, 4)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) >> 1)

    x = np.array([-2, -4, 6, 8], np.int32)
    y = np.zeros(4, np.int32)
    wrapped = triton_compat.reinterpret(x, tl.uint32)
    assert wrapped.base is x and wrapped.dtype == tl.uint32
    assert triton_compat.reinterpret(x, tl.int32) is x
    if device.backend.host_memory:
        halve[(1,)](wrapped, triton_compat.reinterpret(y, tl.uint32), device=device)
        np.testing.assert_array_equal(y, (x.view(np.uint32) >> 1).view(np.int32))
    with pytest.raises(ValueError, match="tl.uint16 has 16 bits, the array's elements 32"):
        triton_compat.reinterpret(x, tl.uint16)


def test_enable_fp_fusion_is_accepted_on_every_device(device):
    """Triton's launch option: every backend takes it (the GPU code generator fuses where it
    is on; cpu, OpenCL and the interpreter round each operation either way), and its value
    keys the compiled kernel."""
    import numpy as np
    import anytile.language as tl

    @at.jit
    def mul_add(x_ptr, y_ptr):
        offs = tl.arange(0, 64)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 1.5 + 0.25)

    x = np.arange(64, dtype=np.float32)
    for fusion in (True, False):
        out = at.asarray(np.zeros(64, np.float32), device=device)
        compiled = mul_add[(1,)](at.asarray(x, device=device), out, enable_fp_fusion=fusion)
        assert compiled.options.enable_fp_fusion is fusion
        np.testing.assert_array_equal(out.numpy(), x * 1.5 + 0.25)    # exact either way
    with pytest.raises(at.errors.LaunchValueError, match="enable_fp_fusion=2"):
        mul_add[(1,)](at.asarray(x, device=device), out, enable_fp_fusion=2)


def test_unsafe_update_src_recompiles_the_new_body(tmp_path):
    import numpy as np
    import anytile.language as tl

    @at.jit
    def op(x_ptr, y_ptr):
        offs = tl.arange(0, 4)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) + 1)

    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    op[(1,)](x, y, device="interpreter")
    np.testing.assert_array_equal(y, x + 1)
    op._unsafe_update_src(op.src.replace("+ 1", "* 3"))
    op[(1,)](x, y, device="interpreter")
    np.testing.assert_array_equal(y, x * 3)
    with pytest.raises(at.AnytileError, match="must be a def"):
        op._unsafe_update_src("x = 1\n")


def test_dtype_names_and_signature_strings():
    import anytile.language as tl
    assert [tl.dtype(n) for n in tl.dtype.SINT_TYPES] == [tl.int8, tl.int16, tl.int32, tl.int64]
    assert tl.dtype("bf16") == tl.bfloat16 and tl.str_to_ty("*fp16") == tl.pointer_type(tl.float16)
    with pytest.raises(TypeError, match="no dtype has that name"):
        tl.dtype("int7")
    with pytest.raises(ValueError, match="names no dtype"):
        tl.str_to_ty("q9")


def test_host_filled_descriptors_and_proton(tmp_path):
    """Triton 3.2-3.3's host-filled TMA descriptors (filled in the grid callable after the
    autotuner picks the blocks, as tutorial 09 does) and proton's scopes, launch-metadata
    counters and viewer, on NumPy arrays on cpu."""
    proc = run(tmp_path, """
        import ctypes
        import numpy as np
        import triton
        import triton.language as tl
        import triton.profiler as proton
        import triton.profiler.viewer as viewer
        from triton.tools.experimental_descriptor import create_2d_tma_descriptor

        assert hasattr(tl, "nv_tma_desc_type")
        M, N = 64, 48
        a = np.arange(M * N, dtype=np.float16).reshape(M, N)
        c = np.zeros_like(a)

        def meta(grid, kernel, args):
            return {"name": f"twice [grid={grid[0]}x{grid[1]}]", "bytes": 4.0 * M * N}

        @triton.jit(launch_metadata=meta)
        def twice(a_desc, c_desc, BM: tl.constexpr, BN: tl.constexpr):
            pm, pn = tl.program_id(0), tl.program_id(1)
            x = tl._experimental_descriptor_load(a_desc, [pm * BM, pn * BN], [BM, BN], tl.float16)
            tl._experimental_descriptor_store(c_desc, x * 2, [pm * BM, pn * BN])

        proton.start(str(__import__("pathlib").Path.cwd() / "run"), hook="triton")
        da = create_2d_tma_descriptor(a.ctypes.data, M, N, 32, 16, 2)
        dc = create_2d_tma_descriptor(c.ctypes.data, M, N, 32, 16, 2)
        with proton.scope("first", {"flops16": 1.0}):
            twice[(2, 3)](da, dc, 32, 16)
        assert (c == a * 2).all()

        bufs = [(ctypes.c_uint8 * 128)() for _ in range(2)]

        class Param:
            def __init__(self, buf):
                self.buf = buf
            def tma_desc_cpu_ptr(self):
                return ctypes.addressof(self.buf)

        @triton.autotune([triton.Config({"BM": 16, "BN": 16}), triton.Config({"BM": 32, "BN": 16})],
                         key=[])
        @triton.jit
        def plus_one(a_desc, c_desc, BM: tl.constexpr, BN: tl.constexpr):
            pm, pn = tl.program_id(0), tl.program_id(1)
            x = tl._experimental_descriptor_load(a_desc, [pm * BM, pn * BN], [BM, BN], tl.float16)
            tl._experimental_descriptor_store(c_desc, x + 1, [pm * BM, pn * BN])

        def grid(META):
            fill = triton.runtime.driver.active.utils.fill_2d_tma_descriptor
            for arr, buf in ((a, bufs[0]), (c, bufs[1])):
                fill(arr.ctypes.data, M, N, META["BM"], META["BN"], 2, ctypes.addressof(buf))
            return (triton.cdiv(M, META["BM"]), triton.cdiv(N, META["BN"]))

        plus_one[grid](Param(bufs[0]), Param(bufs[1]))
        assert (c == a + 1).all()
        proton.finalize()
        tree, metrics = viewer.parse(["time/ms", "gbyte/s"], "run.hatchet")
        viewer.print_tree(tree, metrics)
        try:
            twice[(1, 1)](Param((ctypes.c_uint8 * 128)()), dc, 32, 16)
        except triton.TritonError as e:
            print("error:", e)
        """)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "first" in out and "twice [grid=2x3]" in out and "gbyte/s" in out
    assert "holds no descriptor anytile wrote" in out


def test_jit_repr_names_the_compiled_kernel_and_big_ints_overflow():
    """``@jit(repr=fn)``: ``fn`` sees each parameter's type as Triton spells it and names the
    compiled kernel (the loaded symbol stays the kernel's own); an int no 64-bit type holds
    is an ``OverflowError``, as in Triton."""
    import numpy as np
    seen = []

    def name(spec):
        seen.append(dict(spec.signature))
        return f"scale_{spec.signature['VALUE']}_{spec.constants['BLOCK']}"

    @at.jit(repr=name)
    def scale(VALUE, X, BLOCK: at.language.constexpr):
        offs = at.language.arange(0, BLOCK)
        at.language.store(X + offs, at.language.load(X + offs) * VALUE)

    x = at.asarray(np.ones(16, np.float32))
    for value, spelled in ((3, "i32"), (2**40, "i64"), (2**63 + 5, "u64"), (2.0, "fp32")):
        h = scale[(1,)](value, x, BLOCK=16)
        assert h.name == f"scale_{spelled}_16" and h.metadata.name == "scale"
    assert seen[0] == {"VALUE": "i32", "X": "*fp32", "BLOCK": "constexpr"}
    with pytest.raises(OverflowError, match="'VALUE' is 18446744073709551616"):
        scale[(1,)](2**64, x, BLOCK=16)
    with pytest.raises(TypeError, match="must be a function"):
        at.jit(repr="scale")(scale.fn)


def test_dtype_reprs_are_tritons_spelling_under_the_stand_in(tmp_path):
    proc = run(tmp_path, """
        import triton.language as tl
        for d in (tl.int8, tl.uint32, tl.float16, tl.bfloat16, tl.float8e4b15):
            assert repr(d) == "triton.language." + d.name.replace("fp", "float").replace(
                "bf16", "bfloat16"), repr(d)
            assert eval(repr(d), {"triton": __import__("triton")}) == d
        print("ok")
        """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    import anytile.language as tl
    assert repr(tl.int8) == "tl.int8"


# -- torch's inductor, child interpreters, and what `anytile run` passes on ---------------------
def test_torch_dynamo_and_transformers_import_under_the_hook(tmp_path):
    pytest.importorskip("torch")
    proc = run(tmp_path, """
        import importlib.util
        import torch._dynamo
        import torch
        from torch.utils._triton import has_triton, has_triton_package
        from torch._inductor.utils import triton_version_uses_attrs_dict
        import triton, triton.backends
        assert has_triton_package() and triton_version_uses_attrs_dict()
        # a Triton that runs on the CPU: "cpu" is among its backends, and no CUDA is claimed
        assert "cpu" in triton.backends.backends and has_triton()
        assert triton.backends.backends["nvidia"].driver.is_active() == \\
            any(d.type == "cuda" for d in __import__("anytile").devices())
        assert triton.runtime.driver.active.get_active_torch_device() == torch.device("cpu")
        if importlib.util.find_spec("transformers"):
            import transformers
        print("imported", triton.__version__.split("+")[0])
        """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["imported", "3.6.0"]


def test_the_backends_and_drivers_say_what_is_there():
    code = """if True:
        import anytile as at, anytile.triton_compat as c
        c.install("cpu")
        import triton.backends, triton.runtime.driver as d
        from triton.backends.compiler import GPUTarget
        from triton.compiler.compiler import make_backend
        have = {r.backend.triton_backend or "cpu" for r in
                __import__("anytile.runtime.discovery", fromlist=["x"]).discover().values()
                if r.backend is not None}
        names = {"cuda": "nvidia", "hip": "amd", "cpu": "cpu"}
        assert set(triton.backends.backends) == {names[f] for f in have | {"cpu"}}
        assert d.driver is d and d.active is d.default
        target = d.active.get_current_target()
        assert target == GPUTarget("cpu", at.device("cpu").properties.get("cpu_name") or
                                   target.arch, 1)
        opts = make_backend(target).parse_options({"num_warps": 2, "debug": True})
        assert opts.num_warps == 2 and opts.debug is True
        cpu = triton.backends.backends["cpu"].driver()
        d.set_active(cpu)
        assert d.active is cpu
        d.reset_active()
        assert d.active is d.default
        print("ok")
    """
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_triton_compile_of_an_ast_source_runs_as_tritons_launcher(tmp_path):
    proc = run(tmp_path, """
        import pickle
        import numpy as np
        import triton
        import triton.language as tl
        from triton.compiler import ASTSource

        @triton.jit
        def axpy(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            x = tl.load(x_ptr + offs, mask=m)
            tl.store(out_ptr + offs, a * x + tl.load(y_ptr + offs, mask=m), mask=m)

        assert [p.name for p in axpy.params if p.is_constexpr] == ["BLOCK"]
        src = ASTSource(axpy, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                               "a": "fp32", "n": "i32", "BLOCK": "constexpr"},
                        {"BLOCK": 64}, {(0,): [["tt.divisibility", 16]]})
        target = triton.runtime.driver.active.get_current_target()
        binary = triton.compile(src, target=target, options={"num_warps": 4, "debug": False,
                                                              "sanitize_overflow": False})
        rng = np.random.default_rng(3)
        x, y = rng.standard_normal((2, 200)).astype(np.float32)
        out = np.full_like(x, np.nan)
        binary._init_handles()
        # Triton's launcher: grid, stream, function, metadata, launch metadata, hooks, args
        binary.run(4, 1, 1, None, binary.function, binary.metadata, None, None, None,
                   x, y, out, 1.5, 200, 64)
        np.testing.assert_allclose(out, 1.5 * x.astype(np.float64) + y, rtol=1e-5, atol=1e-5)
        again = pickle.loads(pickle.dumps(binary))    # as torch's compile workers send it
        out[:] = np.nan
        again[(4,)](x, y, out, -2.0, 200, 64)
        np.testing.assert_allclose(out, -2.0 * x.astype(np.float64) + y, rtol=1e-5, atol=1e-5)
        assert binary.metadata.num_warps == 4 and len(binary.hash) == 64
        print("ok")
        """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_tritons_ir_bindings_are_said_not_to_be_provided(tmp_path):
    proc = run(tmp_path, "from triton._C.libtriton import ir\n")
    assert proc.returncode == 1
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("ImportError: No module named 'triton._C.libtriton.ir': anytile "
                           "does not provide it; they are Triton's C++ internals"), last
    assert "needs the real Triton" in last and ".asm['ir']" in last


def test_sys_exit_with_a_message_prints_it_and_exits_1(tmp_path):
    proc = run(tmp_path, "import sys\nprint('before')\nsys.exit('the reason it stopped')\n")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "before\n",
                                                           "the reason it stopped\n")
    proc = run(tmp_path, "import sys\nsys.exit(3)\n")
    assert (proc.returncode, proc.stderr) == (3, "")


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_spawned_pool_serves_triton_in_its_workers(tmp_path, method):
    proc = run(tmp_path, """
        import multiprocessing as mp
        import numpy as np
        import triton
        import triton.language as tl

        @triton.jit
        def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

        def work(seed):
            x = np.random.default_rng(seed).standard_normal(100).astype(np.float32)
            out = np.full_like(x, np.nan)
            double[(triton.cdiv(100, 32),)](x, out, 100, BLOCK=32)
            return bool(np.array_equal(out, 2 * x)), type(triton).__module__

        if __name__ == "__main__":
            with mp.get_context("METHOD").Pool(2) as pool:   # the get is the hang guard
                print(pool.map_async(work, [1, 2, 3]).get(timeout=240))
        """.replace("METHOD", method))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str([(True, "anytile.triton_compat")] * 3)


def test_child_interpreters_give_plugins_time_to_load(tmp_path):
    """Workers started many at once (torch's compile workers: one a core), each loading a
    GPU driver, give a plugin two minutes before it counts as hung; a limit the user set is
    kept."""
    body = """
        import subprocess, sys
        code = "import os, triton; print(os.environ.get('ANYTILE_PLUGIN_TIMEOUT'))"
        print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout.strip())
        """
    env = {k: v for k, v in os.environ.items() if k != "ANYTILE_PLUGIN_TIMEOUT"}
    proc = subprocess.run([sys.executable, "-m", "anytile", "run", "--as-triton", "--device",
                           "cpu", str(_write(tmp_path, body))], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stdout.strip()) == (0, "120"), proc.stderr
    proc = subprocess.run([sys.executable, "-m", "anytile", "run", "--as-triton", "--device",
                           "cpu", str(_write(tmp_path, body))], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env={**env, "ANYTILE_PLUGIN_TIMEOUT": "7"})
    assert (proc.returncode, proc.stdout.strip()) == (0, "7"), proc.stderr


def _write(tmp_path, body: str):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(body))
    return prog
