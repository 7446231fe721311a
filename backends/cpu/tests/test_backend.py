"""The cpu backend as a plugin: discovery, device facts, stages kept in ``asm``, memory,
zero-copy import of NumPy arrays."""
import numpy as np

from anytile.backend import CAPABILITIES
from anytile.ir.types import f32, i32

from cpu_kit import CPU, CPU_DEVICE, KernelBuilder, compile_module, ptr, run_cpu


def _add_module(block=256):
    kb = KernelBuilder([("x", ptr(f32)), ("y", ptr(f32)), ("out", ptr(f32)), ("n", i32)])
    base = kb.binary("mul", kb.pid(0), kb.const(block, i32))
    offs = kb.binary("add", kb.splat(base, (block,)), kb.arange(block))
    mask = kb.compare("lt", offs, kb.splat(kb.arg("n"), (block,)))
    s = kb.binary("add", kb.load(kb.ptrs(kb.arg("x"), offs), mask),
                  kb.load(kb.ptrs(kb.arg("y"), offs), mask))
    kb.store(kb.ptrs(kb.arg("out"), offs), s, mask)
    return kb.module


def test_discovered_through_the_entry_point():
    from anytile.runtime.discovery import discover
    record = discover()["cpu"]
    assert record.availability.usable
    assert type(record.backend).__name__ == "CpuBackend"


def test_device_and_capabilities():
    assert CPU_DEVICE.name == "cpu:0"
    assert CPU.host_memory
    assert CPU.capabilities <= set(CAPABILITIES)
    facts = CPU.describe()
    assert facts["vector_bits"] in (128, 256, 512) and facts["cores"] >= 1 and facts["cpu"]
    target = CPU.target_of(CPU_DEVICE)
    assert target.backend == "cpu" and target.arch in CPU.targets()


def test_asm_has_every_stage_and_the_llir_is_vectorised():
    compiled = compile_module(_add_module())
    assert list(compiled.asm) == ["ir", "laid-out ir", "llir", "asm"]
    assert "#cpu.vector<" in compiled.asm["laid-out ir"]
    lanes = CPU.describe()["vector_bits"] // 32
    assert f"<{lanes} x float>" in compiled.asm["llir"]
    assert "llvm.masked.load" in compiled.asm["llir"]
    assert "run:" in compiled.asm["asm"] or "run" in compiled.asm["asm"]


def test_laid_out_ir_parses_back_and_verifies():
    from anytile.ir import parse_module, print_module, verify_module
    from anytile_cpu.layout import CpuVectorLayout
    text = compile_module(_add_module()).asm["laid-out ir"]
    module = parse_module(text)
    verify_module(module)
    assert print_module(module) == text
    lanes = max(4, CPU.describe()["vector_bits"] // 32)
    assert {op.result.type.layout for op in module.kernel.walk()
            if op.results and hasattr(op.result.type, "layout")} == {CpuVectorLayout(lanes)}


def test_kernel_runs_on_many_programs(rng):
    n = 100_003
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.full(n + 3, np.nan, np.float32)
    run_cpu(_add_module(), (n + 255) // 256, x, y, out, n)
    np.testing.assert_array_equal(out[:n], x + y)
    assert np.isnan(out[n:]).all()


def test_load_rebuilds_machine_code_from_llir_text():
    """A kernel restored from a text-only cache (no object code) still loads."""
    compiled = compile_module(_add_module())
    compiled.binary = str(compiled.binary)
    loaded = CPU.load(compiled, CPU_DEVICE)
    x = np.arange(10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    from cpu_kit import launch
    launch(CPU, loaded, 1, compiled.module.kernel.args, [x, x, out, 10])
    np.testing.assert_array_equal(out, 2 * x)


def test_alloc_is_aligned_and_copies_round_trip(rng):
    buf = CPU.alloc(CPU_DEVICE, 1000)
    assert buf.address % 256 == 0 and buf.nbytes == 1000
    data = rng.integers(0, 255, 1000).astype(np.uint8)
    CPU.copy_to_device(buf, 0, data)
    back = np.zeros(600, np.uint8)
    CPU.copy_to_host(buf, 400, back)
    np.testing.assert_array_equal(back, data[400:])
    CPU.free(buf)
    assert buf.freed


def test_import_array_is_zero_copy_with_strides():
    a = np.arange(60, dtype=np.float32).reshape(6, 10)
    seen = CPU.import_array(a, CPU_DEVICE)
    assert seen.buffer.address + seen.offset == a.ctypes.data
    assert seen.strides == (10, 1) and seen.shape == (6, 10)
    view = a[::-2, 1::3]                       # negative and non-unit strides
    seen = CPU.import_array(view, CPU_DEVICE)
    assert seen.buffer.address + seen.offset == view.ctypes.data
    assert seen.strides == (-20, 3)
    assert seen.buffer.address == a[1, 1:].ctypes.data   # lowest byte any element uses (row 1)


def test_scalar_arguments_of_every_kind(rng):
    """i32, i64, f32, f64 and bool parameters reach the kernel with their values."""
    from anytile.ir.types import f64, i1, i64
    kb = KernelBuilder([("out", ptr(f64)), ("a", i32), ("b", i64), ("c", f32), ("d", f64),
                        ("e", i1)])
    vals = [kb.cast(kb.arg(n), f64) for n in ("a", "b", "c", "d", "e")]
    for k, v in enumerate(vals):
        kb.store(kb.ptrs(kb.arg("out"), kb.arange(1, k)), kb.splat(v, (1,)))
    out = np.full(5, np.nan)
    run_cpu(kb.module, 1, out, -7, -(1 << 40), 1.5, -2.25, True)
    np.testing.assert_array_equal(out, [-7, -(1 << 40), 1.5, -2.25, 1])


def test_generic_x86_levels_compile_ahead_of_time_and_run_here(rng):
    """``x86-64-v3`` code (AVX2: 8 lanes) runs on any AVX2 host, this one included."""
    from anytile.backend import CompileOptions, Target
    from cpu_kit import launch
    if "x86-64-v3" not in CPU.targets():
        return   # not an x86-64 host
    if CPU.describe()["vector_bits"] < 256:
        return   # this host has no AVX2: it can compile v3 code but not run it
    module = _add_module()
    compiled = compile_module(module)
    stages = CPU.stages(Target("cpu", "x86-64-v3"), CompileOptions())
    import copy
    out = copy.deepcopy(module)
    for stage in stages:
        out = stage.run(out, {})
        if stage.name == "llir":
            assert "<8 x float>" in out and "<16 x float>" not in out
    compiled.binary = out
    x = rng.standard_normal(300).astype(np.float32)
    res = np.full(300, np.nan, np.float32)
    launch(CPU, CPU.load(compiled, CPU_DEVICE), 2, module.kernel.args, [x, x, res, 300])
    np.testing.assert_array_equal(res, 2 * x)


def test_compiles_and_launches_from_several_threads(rng):
    import threading
    errors = []

    def work(seed):
        try:
            r = np.random.default_rng(seed)
            n = 1000 + seed
            x = r.standard_normal(n).astype(np.float32)
            out = np.full(n, np.nan, np.float32)
            run_cpu(_add_module(128), (n + 127) // 128, x, x, out, n)
            np.testing.assert_array_equal(out, 2 * x)
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_compiled_kernel_pickles_and_loads_again(rng):
    """Stage outputs are plain data: a compiled kernel survives pickling (a disk cache)."""
    import pickle
    compiled = pickle.loads(pickle.dumps(compile_module(_add_module())))
    from cpu_kit import launch
    x = rng.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    launch(CPU, CPU.load(compiled, CPU_DEVICE), 1, compiled.module.kernel.args, [x, x, out, 64])
    np.testing.assert_array_equal(out, 2 * x)


def test_narrow_float_arguments_round_once_and_overflow_to_inf():
    """Scalar float arguments are rounded as the interpreter rounds them: once, to nearest
    even (bf16 too, which a plain f64 -> bf16 conversion rounds twice), out of range -> inf."""
    from anytile.ir.types import bf16, f16
    from cpu_kit import run_both
    tie_breaker = 1 + 2**-8 + 2**-30        # just above a bf16 tie: rounds up, not to even
    for t, value, want in [(bf16, tie_breaker, 1 + 2**-7), (f32, 1e300, np.inf),
                           (f32, -1e300, -np.inf), (f16, 1e10, np.inf), (f16, 0.1, 0.1)]:
        kb = KernelBuilder([("out", ptr(t)), ("v", t)])
        kb.store(kb.ptrs(kb.arg("out"), kb.arange(1)), kb.splat(kb.arg("v"), (1,)))
        mine, ref = run_both(kb.module, 1, np.full(1, np.nan, t.np), value)
        assert mine[0].view(np.uint8).tobytes() == ref[0].view(np.uint8).tobytes()
        assert mine[0][0] == t.np.type(want)


def test_read_only_arrays_are_read_but_never_stored_into():
    """A NumPy view of ``bytes`` has no protection in host memory: the launch refuses it
    where the kernel stores, and reads it in place where the kernel only loads."""
    import pytest
    from anytile.errors import LaunchError
    x = np.frombuffer(np.arange(300, dtype=np.float32).tobytes(), np.float32)
    y = np.ones(300, np.float32)
    out = np.full(300, np.nan, np.float32)
    run_cpu(_add_module(), 2, x, y, out, 300)
    np.testing.assert_array_equal(out, np.arange(300) + 1)
    frozen = bytes(1200)
    with pytest.raises(LaunchError) as info:
        run_cpu(_add_module(), 2, x, y, np.frombuffer(frozen, np.float32), 300)
    assert "'out'" in str(info.value) and "read-only" in str(info.value)
    assert frozen == bytes(1200)


def test_written_pointer_params_follow_pointers_back_to_parameters():
    from anytile.ir.types import i1
    from anytile.codegen.pointers import written_pointer_params
    assert written_pointer_params(_add_module().kernel) == [2]
    kb = KernelBuilder([("a", ptr(f32)), ("b", ptr(f32)), ("c", ptr(f32)), ("flag", i1)])
    from anytile.ir import SelectOp
    either = kb.v(SelectOp, kb.arg("flag"), kb.arg("a"), kb.arg("b"))
    kb.store(kb.ptrs(either, kb.arange(4)), kb.splat(kb.const(1.0, f32), (4,)))
    assert written_pointer_params(kb.fn) == [0, 1]
    # a pointer carried through a loop is not traced: every pointer parameter may be written
    kb = KernelBuilder([("a", ptr(f32)), ("n", i32), ("b", ptr(f32))])
    p, = kb.for_(kb.const(0, i32), kb.arg("n"), kb.const(1, i32), [kb.arg("a")],
                 lambda k, q: [q])
    kb.store(p, kb.const(1.0, f32))
    assert written_pointer_params(kb.fn) == [0, 2]


def test_a_freed_buffer_is_refused_at_launch():
    import pytest
    from anytile.backend import PointerArg
    from anytile.errors import LaunchError
    buf = CPU.alloc(CPU_DEVICE, 1024)
    CPU.free(buf)
    x = np.ones(256, np.float32)
    with pytest.raises(LaunchError) as info:
        run_cpu(_add_module(), 1, x, x, PointerArg(buf, 0), 256)
    assert "'out'" in str(info.value) and "freed" in str(info.value)


def test_empty_grids_run_nothing_and_negative_ones_are_refused():
    import pytest
    from anytile.errors import LaunchError
    x = np.ones(256, np.float32)
    out = np.full(256, np.nan, np.float32)
    for grid in [(0,), (4, 0), (1, 1, 0)]:
        run_cpu(_add_module(), grid, x, x, out, 256)
    assert np.isnan(out).all()
    with pytest.raises(LaunchError) as info:
        run_cpu(_add_module(), (2, -1), x, x, out, 256)
    assert "negative" in str(info.value)
