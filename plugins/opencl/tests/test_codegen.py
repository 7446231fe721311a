"""What the ``laid-out ir`` and ``opencl-c`` stages produce, checked on the text (no device):
the pragmas and build-relevant facts, vector memory access where contiguity is proven, the
16-bit float and atomic strategies, and clear errors for what a device lacks."""
import pytest

import anytile as at
import anytile.language as tl
from anytile.errors import CompilationError
from anytile_conformance.catalogue.kernels import vector_add_kernel as add_kernel

CPU = "opencl:cpu-s1-v16-l1024k-g4096+fp64+a64+a64x"
GPU = "opencl:gpu-s32-v4-l48k-g1024+fp64+a64+a64x"
SMALL = "opencl:gpu-s16-v4-l64k-g256"           # no fp64, no 64-bit atomics


@at.jit
def row_sum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs), axis=0))


@at.jit
def column_sum_kernel(x_ptr, out_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    rows, cols = tl.arange(0, ROWS), tl.arange(0, COLS)
    x = tl.load(x_ptr + rows[:, None] * COLS + cols[None, :])
    tl.store(out_ptr + cols, tl.sum(x, axis=0))


@at.jit
def atomic_kernel(x_ptr, target_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(target_ptr + offs % 2, tl.load(x_ptr + offs))


def _source(kernel, target, signature, **constexprs):
    compiled = at.compile(kernel, target=target, signature=signature, constexprs=constexprs)
    return compiled, compiled.asm["opencl-c"]


ADD_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


def test_stages_and_the_kernel_prologue():
    compiled, src = _source(add_kernel, CPU, ADD_SIG, BLOCK=1024)
    assert list(compiled.asm) == ["ir", "laid-out ir", "opencl-c"]
    assert "#ocl.blocked<1x64x16>" in str(compiled.asm["laid-out ir"])
    assert src.startswith("#pragma OPENCL FP_CONTRACT OFF")
    assert "reqd_work_group_size(1, 1, 1)" in src
    assert compiled.metadata["kernel_name"] == "at_vector_add_kernel"
    assert compiled.metadata["threads_per_block"] == 1


def test_contiguous_chunks_become_vector_loads_and_stores():
    _, cpu = _source(add_kernel, CPU, ADD_SIG, BLOCK=1024)
    assert cpu.count("vload16(0, ((const __global float*)") == 2
    assert "vstore16(" in cpu
    _, gpu = _source(add_kernel, GPU, ADD_SIG, BLOCK=1024)
    assert "reqd_work_group_size(128, 1, 1)" in gpu and "vload4(0, ((const __global float*)" in gpu


def test_reductions_meet_in_local_memory_only_with_several_work_items():
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32"}
    cpu, cpu_src = _source(row_sum_kernel, CPU, sig, BLOCK=4096)
    gpu, gpu_src = _source(row_sum_kernel, GPU, sig, BLOCK=4096)
    assert "barrier" not in cpu_src and cpu.metadata["shared"] == 0
    assert "__local ulong at_scratch" in gpu_src and gpu_src.count("barrier(CLK_LOCAL_MEM_FENCE)") >= 7
    assert gpu.metadata["shared"] == 128 * 4


def test_sixteen_bit_floats_without_cl_khr_fp16():
    f16 = dict(ADD_SIG, x_ptr="*fp16", y_ptr="*fp16", out_ptr="*fp16")
    _, half = _source(add_kernel, CPU, f16, BLOCK=256)
    assert "vload_half16(" in half and "vstore_half16_rte(" in half
    assert "cl_khr_fp16" not in half and "half " not in half.replace("__private half*", "")
    bf = dict(ADD_SIG, x_ptr="*bf16", y_ptr="*bf16", out_ptr="*bf16")
    _, bf16 = _source(add_kernel, CPU, bf, BLOCK=256)
    assert "vload_half" not in bf16 and "0x7FFFu" in bf16     # round to nearest even by integers


def test_float_and_narrow_atomics_are_compare_and_swap_loops():
    _, f32 = _source(atomic_kernel, CPU, {"x_ptr": "*fp32", "target_ptr": "*fp32"}, BLOCK=16)
    assert "atomic_cmpxchg(p, old, nw)" in f32
    _, i32 = _source(atomic_kernel, CPU, {"x_ptr": "*i32", "target_ptr": "*i32"}, BLOCK=16)
    assert "atomic_add((volatile __global int*)a, v)" in i32
    _, f16 = _source(atomic_kernel, CPU, {"x_ptr": "*fp16", "target_ptr": "*fp16"}, BLOCK=16)
    assert "(a & ~3UL)" in f16                               # the 32-bit word holding it
    _, i64 = _source(atomic_kernel, CPU, {"x_ptr": "*i64", "target_ptr": "*i64"}, BLOCK=16)
    assert "cl_khr_int64_base_atomics : enable" in i64 and "atom_add(" in i64


def test_what_a_device_lacks_is_a_clear_compile_error():
    with pytest.raises(CompilationError, match="cl_khr_fp64"):
        _source(add_kernel, SMALL, dict(ADD_SIG, x_ptr="*fp64", y_ptr="*fp64", out_ptr="*fp64"),
                BLOCK=64)
    with pytest.raises(CompilationError, match="64-bit atomics"):
        _source(atomic_kernel, SMALL, {"x_ptr": "*i64", "target_ptr": "*i64"}, BLOCK=16)
    with pytest.raises(CompilationError, match="local memory"):
        _source(column_sum_kernel, SMALL, {"x_ptr": "*i32", "out_ptr": "*i32"}, ROWS=256, COLS=128)
