"""NVIDIA's matrix instructions as data: the fragment maps against the PTX ISA's tables, the
placements core derives from them, and dots run from them on the host simulator (by the
generic fragment reads and by the emulated ``ldmatrix``) against NumPy."""
import ml_dtypes
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.codegen.gpu import acc_layout, check_instr, geometry
from anytile.codegen.gpu.layouts import BlockedLayout
from anytile.codegen.gpu.simulator import SimulatedGpuTarget, simulate_kernel
from anytile.errors import CompilationError
from anytile_conformance.catalogue.dot import dot_kernel
from anytile_nvidia.matrix import MATRIX_INSTRS, MMA_BF16, MMA_F16, MMA_TF32
from anytile_nvidia.simulated import simulated_nvidia_target


@pytest.mark.parametrize("instr", MATRIX_INSTRS, ids=str)
def test_maps_are_bijections_onto_the_tiles(instr):
    check_instr(instr)
    for elem, count, shape in ((instr.a_elem, instr.a_count, (instr.m, instr.k)),
                               (instr.b_elem, instr.b_count, (instr.k, instr.n)),
                               (instr.acc_elem, instr.acc_count, (instr.m, instr.n))):
        held = [elem(lane, i) for lane in range(32) for i in range(count)]
        assert sorted(held) == [(x, y) for x in range(shape[0]) for y in range(shape[1])]


def _isa_m16n8k16(lane, i, operand):
    """The PTX ISA's fragment figures for mma.m16n8k16 (.row.col), as the ISA words them:
    groupID = %laneid >> 2, threadID_in_group = %laneid % 4, element i of the fragment."""
    group, thread = lane >> 2, lane % 4
    if operand == "a":    # a0..a7
        row = group if i in (0, 1, 4, 5) else group + 8
        col = thread * 2 + (i & 0x1) + (8 if i >= 4 else 0)
        return row, col
    if operand == "b":    # b0..b3
        return thread * 2 + (i & 0x1) + (8 if i >= 2 else 0), group
    return (group if i < 2 else group + 8), thread * 2 + (i & 0x1)   # c0..c3


def _isa_m16n8k8_tf32(lane, i, operand):
    group, thread = lane >> 2, lane % 4
    if operand == "a":    # a0..a3
        return (group if i in (0, 2) else group + 8), (thread if i < 2 else thread + 4)
    if operand == "b":    # b0, b1
        return (thread if i == 0 else thread + 4), group
    return (group if i < 2 else group + 8), thread * 2 + (i & 0x1)


@pytest.mark.parametrize("instr,isa", [(MMA_F16, _isa_m16n8k16), (MMA_BF16, _isa_m16n8k16),
                                       (MMA_TF32, _isa_m16n8k8_tf32)],
                         ids=lambda value: getattr(value, "__name__", str(value)))
def test_maps_are_the_isa_fragment_tables(instr, isa):
    for elem, count, operand in ((instr.a_elem, instr.a_count, "a"), (instr.b_elem, instr.b_count, "b"),
                                 (instr.acc_elem, instr.acc_count, "c")):
        for lane in range(32):
            assert [elem(lane, i) for i in range(count)] == [isa(lane, i, operand) for i in range(count)]


def test_the_derived_accumulator_layout_is_the_blocked_mma_layout():
    for instr in MATRIX_INSTRS:
        assert acc_layout(instr, (2, 2)) == BlockedLayout((1, 2), (8, 4), (2, 2), (1, 0))
        assert geometry(instr).reps == (2, 1)
    # accumulator element c of tile (i, s): rows of repetitions 2i and 2i + 1, columns 2s..
    assert geometry(MMA_F16).acc_slots == ((0, 0, 0, 0), (0, 0, 1, 0), (0, 1, 0, 0), (0, 1, 1, 0))


@pytest.fixture
def rng(request):
    import zlib
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _signature(sig):
    return {"a_ptr": sig, "b_ptr": sig, "c_ptr": "*fp32", "out_ptr": "*fp32"}


_SHAPES = [("*fp16", 32, 64, 32, 2), ("*fp16", 16, 32, 32, 4), ("*bf16", 64, 16, 16, 4)]


@pytest.mark.parametrize("loader,sig,M,N,K,num_warps",
                         [("ldmatrix", *s) for s in _SHAPES] + [("generic", *s) for s in _SHAPES] +
                         [("generic", "*fp32", 32, 32, 16, 2)])   # tf32: no ldmatrix
def test_dots_from_the_tables_match_numpy(rng, loader, sig, M, N, K, num_warps):
    """The fragments read by the generic loader (element by element from the maps) or by the
    emulated ``ldmatrix``, the instruction executed from the maps: both agree with NumPy
    (f32 inputs run as tf32: each input rounded to 10 mantissa bits)."""
    dtype = {"*fp16": np.float16, "*bf16": ml_dtypes.bfloat16, "*fp32": np.float32}[sig]
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N)).astype(dtype)
    c = rng.standard_normal((M, N)).astype(np.float32)
    out = np.full((M, N), np.nan, np.float32)
    target = simulated_nvidia_target() if loader == "ldmatrix" else SimulatedGpuTarget(32, MATRIX_INSTRS)
    module = at.compile(dot_kernel, target="nvidia:sm_80", signature=_signature(sig),
                        constexprs={"M": M, "N": N, "K": K, "PRECISION": "default", "ACC": tl.float32}).module
    text = simulate_kernel(module, (1,), [a, b, c, out], num_warps, target=target)
    assert "anytile_sim_scratch" in text    # the instruction ran, not the FMA loop

    def tf32(x):
        bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)
    ea, eb = (tf32(a), tf32(b)) if sig == "*fp32" else (a, b)
    expected = c.astype(np.float64) + ea.astype(np.float64) @ eb.astype(np.float64)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_more_threads_than_a_program_may_have_is_a_clear_error():
    consts = {"M": 16, "N": 16, "K": 16, "PRECISION": "default", "ACC": tl.float32}
    k = at.compile(dot_kernel, target="nvidia:sm_80", signature=_signature("*fp16"), constexprs=consts,
                   num_warps=32)
    assert k.metadata["threads_per_block"] == 1024
    with pytest.raises(CompilationError, match=r"num_warps=64 gives 2048 threads.*sm_80.*1024"):
        at.compile(dot_kernel, target="nvidia:sm_80", signature=_signature("*fp16"), constexprs=consts,
                   num_warps=64)


def test_the_emulated_ldmatrix_assembles_with_nvidias_shuffles():
    """The ``ldmatrix`` emulation the simulator runs is written with generic hooks only: on
    NVIDIA's own target it becomes ``shfl.sync.idx`` code that ptxas accepts."""
    from anytile.backend import CompileOptions
    from anytile.codegen.gpu import gpu_stages
    from anytile_nvidia.matrix import LdmatrixFragments, emulated_ldmatrix_x4
    from anytile_nvidia.stages import cubin_stage, find_ptxas, ptx_stage
    from anytile_nvidia.target import NvidiaTarget
    target = NvidiaTarget("sm_80")
    target._ldmatrix = LdmatrixFragments(emulated_ldmatrix_x4(target))
    module = at.compile(dot_kernel, target="nvidia:sm_80", signature=_signature("*fp16"),
                        constexprs={"M": 32, "N": 32, "K": 16, "PRECISION": "default",
                                    "ACC": tl.float32}).module
    metadata: dict = {}
    out = module
    for run in [s.run for s in gpu_stages(target, CompileOptions(num_warps=2))] + [ptx_stage("sm_80")]:
        out = run(out, metadata)
    assert "shfl.sync.idx" in out and "mma.sync.aligned.m16n8k16" in out and "ldmatrix" not in out
    if find_ptxas():
        assert cubin_stage("sm_80", find_ptxas())(out, metadata)[:4] == b"\x7fELF"
