"""Hopper's tensor memory accelerator without a GPU: operands read from ``at.TensorDescriptor``
arguments are copied by descriptor (``tma.py``) into the warpgroup MMA's swizzled slots, the
copies completing on a ring of mbarriers.  The PTX is assembled by ptxas for sm_90a; whole
pipelined matmuls run on the host simulator with the copies emulated (``tma_sim.py``: the
bytes land only when a wait sees their phase complete), checked against NumPy; the host's
descriptor records are checked against the kernel's metadata.  The same kernels run on an
H100 and H200 in test_device.py."""
import copy
import ctypes
import re

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.backend import CompileOptions
from anytile.codegen.gpu import lay_out, lower_to_llvm
from anytile.codegen.gpu.shared import plan_persistent_shared
from anytile.codegen.gpu.simulator import SimulatedKernel
from anytile.ir import walk
from anytile.gpu_host import RecordParameter, argument_slots
from anytile_nvidia.box_lowering import BOX_STATE_BYTES
from anytile_nvidia.box_maps import BoxMap
from anytile_nvidia.stages import find_ptxas
from anytile_nvidia.tma import box_layout, encode_tensor_map, tensor_map_maker, tensor_map_parameters
from anytile_nvidia import tma_sim
from anytile_nvidia.tma_sim import EmulatedTensorCopies, host_map
from anytile_nvidia.warpgroup import SwizzledPanels
from anytile_nvidia.warpgroup_sim import simulated_hopper_target
from tma_kit import Simulated, box_maps, lowered, map_records, run, tma_target

#: minutes on the host GPU simulator: `make test-all` runs them
pytestmark = pytest.mark.slow


@at.jit
def desc_matmul(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, k * BK])
        b = b_desc.load([k * BK, pid_n * BN])
        acc = tl.dot(a, b, acc)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _signature(BM, BN, BK, elem="fp16"):
    return {"a_desc": f"tensordesc<{elem}[{BM}, {BK}]>", "b_desc": f"tensordesc<{elem}[{BK}, {BN}]>",
            "c_ptr": "*fp32:16", "M": "i32", "N": "i32", "K": "i32"}


def _simulate(BM, BN, BK, num_warps, M, N, K, num_stages=3, seed=0):
    """Run ``desc_matmul`` on the simulator with the copies emulated; returns (C, reference,
    the box maps, the LLVM IR)."""
    consts = {"BM": BM, "BN": BN, "BK": BK}
    module = at.compile(desc_matmul, target="nvidia:sm_90", signature=_signature(BM, BN, BK),
                        constexprs=consts, num_warps=num_warps, num_stages=num_stages).module
    target = tma_target()
    options = CompileOptions(num_warps=num_warps, num_stages=num_stages)
    meta: dict = {}
    kernel = lower_to_llvm(lay_out(module, target, options, meta), target, options, meta)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    fn = module.kernel
    values = {"c_ptr": c, "M": M, "N": N, "K": K,
              "a_desc_at_base": a, "a_desc_at_shape0": M, "a_desc_at_shape1": K, "a_desc_at_stride0": K,
              "b_desc_at_base": b, "b_desc_at_shape0": K, "b_desc_at_shape1": N, "b_desc_at_stride0": N}
    args = [values[arg.name] for arg in fn.args]
    records = map_records(box_maps(kernel), values)
    sim = Simulated(str(kernel), fn, num_warps * 32, len(records))
    programs = (-(-M // BM), -(-N // BN))
    del tma_sim.stalls[:]
    sim.run(programs, args + [ctypes.addressof(r) for r in records])
    assert not tma_sim.stalls, f"waits that never completed: {tma_sim.stalls}"
    return c, a.astype(np.float64) @ b.astype(np.float64), list(box_maps(kernel)), str(kernel)


def _desc(box_map):
    """The descriptor argument a map reads (its base is that argument's ``_at_base`` leaf)."""
    return box_map.array[0].removesuffix("_at_base")


def _matmul_operands(M, N, K, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, np.full((M, N), np.nan, np.float32), a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("BM,BN,BK,num_warps,M,N,K", [
    (64, 64, 64, 4, 64, 128, 192),      # A and B in one 128-byte panel each
    (64, 128, 64, 4, 128, 128, 200),    # B in two panels; a K tail outside the array
    (128, 64, 32, 4, 128, 64, 96),      # 64-byte panels; A's rows permuted over two M-tiles
    (128, 64, 64, 8, 200, 100, 128),    # two warpgroups; rows and columns outside the array
    (64, 64, 64, 4, 64, 64, 32),        # K smaller than one step: the copies past the end skip
])
def test_descriptor_matmul_copies_whole_boxes(BM, BN, BK, num_warps, M, N, K):
    c, ref, maps, text = _simulate(BM, BN, BK, num_warps, M, N, K)
    # A: whole blocks of 16 W rows (its rows permuted by the 5-D view), else 8-row boxes
    assert [(_desc(m), m.box, m.interleave) for m in maps] == [
        ("a_desc", (16 * num_warps, min(BK, 64)), num_warps), ("a_desc", (8, min(BK, 64)), 0),
        ("b_desc", (BK, 64), 0)]
    assert "anytile_sim_tma_copy" in text and "cp.async" not in text
    np.testing.assert_allclose(c, ref, rtol=2e-2, atol=2e-2)


@at.jit
def two_desc_loops(a_desc, b_desc, d_desc, e_desc, c_ptr, K1, K2, BM: tl.constexpr,
                   BN: tl.constexpr, BK: tl.constexpr):
    # two pipelined loops one after the other, as attention's causal forward has
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K1, BK):
        acc = tl.dot(a_desc.load([0, k]), b_desc.load([k, 0]), acc)
    acc = acc * 0.5
    for k in range(0, K2, BK):
        acc = tl.dot(d_desc.load([0, k]), e_desc.load([k, 0]), acc)
    offs_m, offs_n = tl.arange(0, BM), tl.arange(0, BN)
    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc)


def test_loops_one_after_the_other_share_their_buffers_and_the_ring():
    """The second loop's slots take the bytes the first loop's box copies wrote; its copies
    start after the hand-over (``shared.reusing_allocs``), and its groups go on counting on
    the one barrier ring (a phase per round of the ring), so no wait stalls."""
    from anytile.codegen.gpu.shared import reusing_allocs
    from anytile.codegen.gpu.shared_ops import SharedAllocOp
    BM, BN, BK, K1, K2, warps = 64, 64, 64, 256, 192, 4
    sig = {"a_desc": f"tensordesc<fp16[{BM}, {BK}]>", "b_desc": f"tensordesc<fp16[{BK}, {BN}]>",
           "d_desc": f"tensordesc<fp16[{BM}, {BK}]>", "e_desc": f"tensordesc<fp16[{BK}, {BN}]>",
           "c_ptr": "*fp32:16", "K1": "i32", "K2": "i32"}
    module = at.compile(two_desc_loops, target="nvidia:sm_90", signature=sig,
                        constexprs={"BM": BM, "BN": BN, "BK": BK}, num_warps=warps).module
    target = tma_target()
    options = CompileOptions(num_warps=warps, num_stages=3)
    laid = lay_out(module, target, options, {})
    allocs = [op for op in walk(laid.kernel.body) if isinstance(op, SharedAllocOp)]
    offsets, _ = plan_persistent_shared(laid.kernel)
    assert len(allocs) == 4 and [offsets[a] for a in allocs[:2]] == [offsets[a] for a in allocs[2:]]
    assert reusing_allocs(laid.kernel, offsets) == {allocs[2]}
    kernel = lower_to_llvm(laid, target, options, {})
    assert sorted({_desc(m) for m in box_maps(kernel)}) == ["a_desc", "b_desc", "d_desc", "e_desc"]
    rng = np.random.default_rng(5)
    a, d = (rng.standard_normal((BM, k)).astype(np.float16) for k in (K1, K2))
    b, e = (rng.standard_normal((k, BN)).astype(np.float16) for k in (K1, K2))
    c = np.full((BM, BN), np.nan, np.float32)
    values = {"c_ptr": c, "K1": K1, "K2": K2}
    for name, x in (("a_desc", a), ("b_desc", b), ("d_desc", d), ("e_desc", e)):
        values.update({f"{name}_at_base": x, f"{name}_at_shape0": x.shape[0],
                       f"{name}_at_shape1": x.shape[1], f"{name}_at_stride0": x.shape[1]})
    run(module, kernel, values, (1, 1), warps)
    f64 = np.float64
    ref = 0.5 * (a.astype(f64) @ b.astype(f64)) + d.astype(f64) @ e.astype(f64)
    np.testing.assert_allclose(c, ref, rtol=2e-2, atol=2e-2)


def test_the_boxes_cover_each_slot_once():
    for rows, cols, warps in ((64, 64, 4), (128, 128, 4), (128, 64, 8), (64, 256, 0)):
        layout = SwizzledPanels(128, warps)
        box_rows, box_cols, copies = box_layout(rows, cols, layout, 2)
        assert box_rows * box_cols * copies == rows * cols
        assert box_cols == 64 and box_rows == (8 if warps else rows)
    # a tile kept transposed (attention's K): the panels hold it as the array does
    transposed = SwizzledPanels(128, 0, columns=True)
    assert box_layout(*transposed.stored((128, 64)), transposed, 2) == (64, 64, 2)
    assert box_layout(64, 8 * 64, SwizzledPanels(128, 8), 2) is None     # 64 boxes: too many


def test_a_descriptor_without_aligned_rows_keeps_per_thread_copies():
    """A row stride not known to be a multiple of 16 elements: the copy unit may not read it,
    so the copies stay cp.async (``plan`` declines)."""
    sig = _signature(64, 64, 64)
    module = at.compile(desc_matmul, target="nvidia:sm_90", signature=sig,
                        constexprs={"BM": 64, "BN": 64, "BK": 64}).module
    for i, arg in enumerate(module.kernel.args):
        if arg.name == "a_desc_at_stride0":
            module.kernel.arg_attrs[i] = {}
    target = tma_target()
    options = CompileOptions(num_warps=4, num_stages=3)
    kernel = lower_to_llvm(lay_out(module, target, options, {}), target, options, {})
    assert [_desc(m) for m in box_maps(kernel)] == ["b_desc"]


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_the_tma_ptx_assembles_for_sm_90a():
    compiled = at.compile(desc_matmul, target="nvidia:sm_90", signature=_signature(128, 128, 64),
                          constexprs={"BM": 128, "BN": 128, "BK": 64}, num_warps=4, num_stages=4)
    ptx = compiled.asm["ptx"]
    # copies of A and B in the prologue's three stages and the loop body, each box by one
    # instruction: A by two 5-D blocks of 64 rows (or, at a ragged edge, sixteen 8-row
    # boxes), B by two 64-column panels
    assert ptx.count("cp.async.bulk.tensor.2d") == 4 * (16 + 2)
    assert ptx.count("cp.async.bulk.tensor.5d") == 4 * 2
    assert "cp.async.cg" not in ptx
    assert "mbarrier.try_wait.parity" in ptx and "mbarrier.expect_tx" in ptx
    assert len(re.findall(r"\.param \.align 64 \.b8 desc_matmul_param_\d+\[128\]", ptx)) == 3
    assert ptx.count("cvta.param.u64") >= 3          # the maps are read where they are
    a_leaves = ["a_desc_at_base", "a_desc_at_shape0", "a_desc_at_shape1", "a_desc_at_stride0", 1]
    b_leaves = [n.replace("a_", "b_", 1) if isinstance(n, str) else n for n in a_leaves]
    assert compiled.metadata["box_maps"] == [[a_leaves, "f16", [64, 64], 128, 4],
                                             [a_leaves, "f16", [8, 64], 128, 0],
                                             [b_leaves, "f16", [64, 64], 128, 0]]
    assert compiled.metadata.get("spills", 0) == 0
    no_tma = at.compile(desc_matmul, target="nvidia:sm_90", signature=_signature(128, 128, 64),
                        constexprs={"BM": 128, "BN": 128, "BK": 64}, num_warps=4, num_stages=4,
                        tma=False)
    assert "cp.async.bulk" not in no_tma.asm["ptx"] and "box_maps" not in no_tma.metadata.extra


def test_the_launcher_passes_one_map_per_descriptor_from_its_leaves():
    compiled = at.compile(desc_matmul, target="nvidia:sm_90", signature=_signature(64, 64, 64),
                          constexprs={"BM": 64, "BN": 64, "BK": 64})
    made = []
    params = tensor_map_parameters(compiled.metadata["box_maps"], compiled.signature)
    names = [n for n, _ in compiled.signature]
    for (name, nbytes, make, sources), leaf in zip(params, ("a_desc", "a_desc", "b_desc")):
        assert nbytes == 128 and [names[i] for i in sources] == [
            f"{leaf}_at_base", f"{leaf}_at_shape0", f"{leaf}_at_shape1", f"{leaf}_at_stride0"]
        made.append(make)
    slots, _, _ = argument_slots([("map", RecordParameter(128))])
    assert len(slots[0]) == 128


@at.jit
def desc_attention(desc_q, desc_k, desc_v, desc_o, sm_scale, N_CTX, BM: tl.constexpr,
                   BN: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr):
    """Flash attention in Triton 3.6's tutorial shape: descriptors, K read as rows and ``.T``."""
    start_m = tl.program_id(0)
    row0 = tl.program_id(1) * N_CTX
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    q = desc_q.load([row0 + start_m * BM, 0])
    m_i = tl.zeros((BM,), tl.float32) - float("inf")
    l_i = tl.zeros((BM,), tl.float32) + 1.0
    acc = tl.zeros((BM, D), tl.float32)
    hi = (start_m + 1) * BM if CAUSAL else N_CTX
    for start_n in range(0, hi, BN):
        qk = tl.dot(q, desc_k.load([row0 + start_n, 0]).T)
        if CAUSAL:
            qk = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], qk, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * sm_scale)
        p = tl.math.exp2(qk * sm_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(tl.float16), desc_v.load([row0 + start_n, 0]), acc * alpha[:, None])
        m_i = m_ij
    desc_o.store([row0 + start_m * BM, 0], (acc / l_i[:, None]).to(tl.float16))


@pytest.mark.parametrize("causal", [False, True])
def test_descriptor_attention_reads_k_transposed_by_whole_boxes(causal):
    """q staged once (a 5-D box: its rows permuted for the MMA), K read as rows and
    transposed: its boxes land in the column-major slot (``box_order``), V as it is; the
    output's box is written by the copy unit."""
    BM, BN, D, N, heads, warps = 64, 32, 64, 128, 2, 4
    sig = {name: f"tensordesc<fp16[{rows}, {D}]>:16" for name, rows in
           (("desc_q", BM), ("desc_k", BN), ("desc_v", BN), ("desc_o", BM))}
    sig.update(sm_scale="fp32", N_CTX="i32")
    module = at.compile(desc_attention, target="nvidia:sm_90", signature=sig,
                        constexprs={"BM": BM, "BN": BN, "D": D, "CAUSAL": causal},
                        num_warps=warps, num_stages=3).module
    target = tma_target()
    options = CompileOptions(num_warps=warps, num_stages=3)
    kernel = lower_to_llvm(lay_out(module, target, options, {}), target, options, {})
    assert sorted({_desc(m) for m in box_maps(kernel)}) == ["desc_k", "desc_o", "desc_q", "desc_v"]
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((heads * N, D)).astype(np.float16) for _ in range(3))
    o = np.full((heads * N, D), np.nan, np.float16)
    scale = 0.125 * 1.44269504
    leaves = {}
    for name, x in (("desc_q", q), ("desc_k", k), ("desc_v", v), ("desc_o", o)):
        leaves.update({f"{name}_at_base": x, f"{name}_at_shape0": heads * N,
                       f"{name}_at_shape1": D, f"{name}_at_stride0": D})
    values = {**leaves, "sm_scale": scale, "N_CTX": N}
    fn = module.kernel
    records = map_records(box_maps(kernel), values)
    sim = Simulated(str(kernel), fn, warps * 32, len(records))
    del tma_sim.stalls[:]
    sim.run((N // BM, heads), [values[a.name] for a in fn.args] + [ctypes.addressof(r) for r in records])
    assert not tma_sim.stalls
    ref = np.empty((heads * N, D))
    for h in range(heads):
        rows = slice(h * N, (h + 1) * N)
        s = q[rows].astype(np.float64) @ k[rows].astype(np.float64).T * 0.125
        if causal:
            s = np.where(np.tril(np.ones((N, N), bool)), s, -np.inf)
        w = np.exp(s - s.max(axis=1, keepdims=True))
        ref[rows] = (w / w.sum(axis=1, keepdims=True)) @ v[rows].astype(np.float64)
    np.testing.assert_allclose(o.astype(np.float64), ref, atol=2e-2, rtol=2e-2)


@at.jit
def block_pointer_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, BM: tl.constexpr,
                         BN: tl.constexpr, BK: tl.constexpr):
    """Triton's block-pointer matmul, both operands moved with ``tl.advance`` each step."""
    a_bp = tl.make_block_ptr(a_ptr, (M, K), (stride_am, 1), (tl.program_id(0) * BM, 0), (BM, BK),
                             (1, 0))
    b_bp = tl.make_block_ptr(b_ptr, (K, N), (stride_bk, 1), (0, tl.program_id(1) * BN), (BK, BN),
                             (1, 0))
    acc = tl.zeros((BM, BN), tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(a_bp, boundary_check=(0, 1)), tl.load(b_bp, boundary_check=(0, 1)), acc)
        a_bp = tl.advance(a_bp, (0, BK))
        b_bp = tl.advance(b_bp, (BK, 0))
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def test_block_pointers_over_pointer_arguments_copy_whole_boxes():
    """A block pointer over a pointer argument, with sizes and strides that are arguments
    (its leaves carried through the loop unchanged, its offsets advanced): the array is
    described by those parameters, so the host makes descriptors of them."""
    BM, BN, BK, warps = 64, 64, 32, 4
    M, N, K = 96, 128, 160
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "M": "i32", "N": "i32",
           "K": "i32", "stride_am": "i32:16", "stride_bk": "i32:16"}
    module, kernel = lowered(block_pointer_matmul, sig, {"BM": BM, "BN": BN, "BK": BK}, warps)
    assert [m.array for m in box_maps(kernel)] == [("a_ptr", "M", "K", "stride_am", 1)] * 2 + \
        [("b_ptr", "K", "N", "stride_bk", 1)]
    a, b, c, ref = _matmul_operands(M, N, K, 3)
    run(module, kernel, {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K,
                          "stride_am": K, "stride_bk": N}, (-(-M // BM), N // BN), warps)
    np.testing.assert_allclose(c, ref, rtol=2e-2, atol=2e-2)


def test_a_pipeline_deeper_than_the_barrier_ring_keeps_per_thread_copies():
    """Group g completes on barrier g % 16: a pipeline that keeps 16 or more groups in
    flight would arm a barrier again before its last phase was waited for, so its copies
    stay cp.async."""
    sig = _signature(64, 64, 32)
    consts = {"BM": 64, "BN": 64, "BK": 32}
    module = at.compile(desc_matmul, target="nvidia:sm_90", signature=sig, constexprs=consts).module
    target = tma_target()
    target.shared_memory_limit = 227 * 1024
    for stages, taken in ((16, True), (17, False)):      # 14 / 15 groups pending at the wait
        options = CompileOptions(num_warps=4, num_stages=stages)
        kernel = lower_to_llvm(lay_out(copy.deepcopy(module), target, options, {}), target,
                               options, {})
        assert bool(box_maps(kernel)) == taken, stages


def test_an_empty_array_reads_as_zeros():
    """A descriptor over an array with no columns: every box is outside it and reads zeros
    (the launcher gives the copy unit, which takes no map of an empty array, a map of one
    zero element instead: ``tensor_map_maker``)."""
    BM, BN, BK, warps, M, N, K = 64, 64, 64, 4, 64, 64, 128
    module = at.compile(desc_matmul, target="nvidia:sm_90", signature=_signature(BM, BN, BK),
                        constexprs={"BM": BM, "BN": BN, "BK": BK}, num_warps=warps).module
    target = tma_target()
    options = CompileOptions(num_warps=warps, num_stages=3)
    kernel = lower_to_llvm(lay_out(module, target, options, {}), target, options, {})
    a = np.ones((M, 8), np.float16)                 # the loop runs K, the array has none
    b = np.ones((K, N), np.float16)
    c = np.full((M, N), np.nan, np.float32)
    values = {"c_ptr": c, "M": M, "N": N, "K": K,
              "a_desc_at_base": a, "a_desc_at_shape0": M, "a_desc_at_shape1": 0, "a_desc_at_stride0": 8,
              "b_desc_at_base": b, "b_desc_at_shape0": K, "b_desc_at_shape1": N, "b_desc_at_stride0": N}
    fn = module.kernel
    records = map_records(box_maps(kernel), values)
    sim = Simulated(str(kernel), fn, warps * 32, len(records))
    del tma_sim.stalls[:]
    sim.run((1, 1), [values[x.name] for x in fn.args] + [ctypes.addressof(r) for r in records])
    assert not tma_sim.stalls
    np.testing.assert_array_equal(c, 0.0)


def test_the_launcher_maps_an_empty_array_onto_zeros_and_remembers_maps():
    """``tensor_map_maker``: a map is made once per array (the cache), an empty array's map
    points at the zero element ``zeros()`` gives, and arrays past 32-bit coordinates are a
    clear error."""
    made = []
    box_map = BoxMap(("a", "m", "k", "s", 1), "f16", (64, 64), 128)

    def encode(m, base, rows, cols, stride, elem):
        made.append((base, rows, cols, stride))
        return bytes(128)
    make = tensor_map_maker(box_map, None, encode, zeros=lambda: 0xABC0)
    make(0x1000, 64, 128, 128)
    make(0x1000, 64, 128, 128)
    make(0x2000, 0, 128, 128)
    assert made == [(0x1000, 64, 128, 128), (0xABC0, 1, 1, 8)]
    with pytest.raises(at.LaunchError, match="32-bit coordinates"):
        encode_tensor_map(box_map, 0x1000, 1 << 31, 64, 64, 2)


def test_an_array_is_found_through_widenings_recasts_and_unchanged_loop_values():
    """``array_leaves``: a size widened to i64, a base recast to elements of the same size
    (Triton 3.2's byte-typed descriptors read as fp16 -- here i16 as f16), and a value a
    loop passes on unchanged all resolve to the kernel's parameters; anything computed
    does not."""
    from anytile_nvidia.box_maps import array_leaves
    from anytile.ir.parser import parse_module
    module = parse_module("""
        kernel @k(%p: ptr<i16> {divisibility = 16}, %m: i32, %n: i64, %s: i64) {
          %one = constant {value = 1} : i64
          %q = bitcast (%p) : ptr<f16>
          %m64 = cast (%m) : i64
          %twice = binary {kind = "add"} (%n, %n) : i64
          %0 = constant {value = 0} : i32
          %r = for (%0, %m, %m, [%q]) : ptr<f16> {
          ^(%i: i32, %carried: ptr<f16>):
            yield ([%carried])
          }
        }
    """)
    kernel = module.kernel
    values = {op.result.name: op.result for op in kernel.body.ops if op.results}
    loop = kernel.body.ops[-1]
    carried = loop.body.args[1]
    one = values["one"]
    assert array_leaves([values["q"], values["m64"], kernel.args[2], kernel.args[3], one],
                        kernel) == ("p", "m", "n", "s", 1)
    assert array_leaves([carried, values["m64"], kernel.args[2], kernel.args[3], one],
                        kernel) == ("p", "m", "n", "s", 1)
    assert array_leaves([values["q"], values["twice"], kernel.args[2], kernel.args[3], one],
                        kernel) is None


@at.jit
def made_descriptor_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                           BK: tl.constexpr):
    """Descriptors made in the kernel (``tl.make_tensor_descriptor``) over pointer arguments,
    as Triton 3.6's tutorial 09 makes them."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([tl.program_id(0) * BM, k]), b_desc.load([k, tl.program_id(1) * BN]),
                     acc)
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def test_descriptors_made_in_the_kernel_over_arguments_copy_whole_boxes():
    """The host can make the descriptor of an array the kernel's arguments describe, however
    the kernel spelled it: here the sizes are arguments and the row stride is one of them."""
    BM, BN, BK, warps, M, N, K = 64, 64, 32, 4, 96, 128, 96
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "M": "i32",
           "N": "i32:16", "K": "i32:16"}
    module, kernel = lowered(made_descriptor_matmul, sig, {"BM": BM, "BN": BN, "BK": BK}, warps)
    assert [m.array for m in box_maps(kernel)] == [("a_ptr", "M", "K", "K", 1)] * 2 + \
        [("b_ptr", "K", "N", "N", 1)]
    a, b, c, ref = _matmul_operands(M, N, K, 5)
    run(module, kernel, {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K},
         (-(-M // BM), N // BN), warps)
    np.testing.assert_allclose(c, ref, rtol=2e-2, atol=2e-2)


@at.jit
def desc_store_matmul(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr):
    """Operands and result through descriptors: the result's box written by the copy unit."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([pid_m * BM, k * BK]), b_desc.load([k * BK, pid_n * BN]), acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@pytest.mark.parametrize("BM,BN,BK,warps,M,N,K,out,pad,stages,boxed", [
    (64, 64, 32, 4, 64, 128, 96, "fp16", 0, 3, True),        # one 128-byte panel a tile
    (64, 128, 32, 4, 100, 200, 64, "fp16", 8, 3, True),      # two panels; boxes clipped at both edges
    (128, 32, 64, 4, 128, 64, 128, "fp32", 4, 3, True),      # f32 in 128-byte panels of 32 columns
    (128, 128, 64, 4, 128, 128, 128, "fp16", 0, 3, True),    # the drained slots hold both panels
    (64, 32, 32, 4, 64, 64, 64, "fp32", 4, 3, True),         # the panel where the slots were
    # no pipeline, so no buffers to take the place of, and a panel would leave room for
    # fewer programs on a multiprocessor: per-thread stores
    (64, 32, 32, 4, 64, 64, 64, "fp32", 4, 1, False),
])
def test_descriptor_stores_write_whole_boxes(BM, BN, BK, warps, M, N, K, out, pad, stages, boxed):
    """A descriptor's store goes from registers into swizzled panels (where the drained
    pipeline's slots were, taking no more shared memory) and out by the copy unit, one box a
    panel; elements past the array's edges (into its padded rows) are not written."""
    dtype = np.float16 if out == "fp16" else np.float32
    sig = {"a_desc": f"tensordesc<fp16[{BM}, {BK}]>", "b_desc": f"tensordesc<fp16[{BK}, {BN}]>",
           "c_desc": f"tensordesc<{out}[{BM}, {BN}]>", "K": "i32"}
    module, kernel = lowered(desc_store_matmul, sig, {"BM": BM, "BN": BN, "BK": BK}, warps, stages)
    text = str(kernel)
    assert ("anytile_sim_tma_store" in text) == boxed
    if stages > 1:
        assert kernel.shared_bytes <= plan_persistent_shared(module.kernel)[1] + BOX_STATE_BYTES
    stores = [m for m in box_maps(kernel) if _desc(m) == "c_desc"]
    assert [m.box for m in stores] == [(BM, 128 // np.dtype(dtype).itemsize)]
    a, b, _, ref = _matmul_operands(M, N, K, 5)
    c_wide = np.full((M, N + pad), 7.0, dtype)
    values = {"K": K,
              "a_desc_at_base": a, "a_desc_at_shape0": M, "a_desc_at_shape1": K, "a_desc_at_stride0": K,
              "b_desc_at_base": b, "b_desc_at_shape0": K, "b_desc_at_shape1": N, "b_desc_at_stride0": N,
              "c_desc_at_base": c_wide, "c_desc_at_shape0": M, "c_desc_at_shape1": N,
              "c_desc_at_stride0": N + pad}
    run(module, kernel, values, (-(-M // BM), -(-N // BN)), warps)
    np.testing.assert_allclose(c_wide[:, :N].astype(np.float64), ref, rtol=2e-2, atol=2e-2)
    np.testing.assert_array_equal(c_wide[:, N:], 7.0)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_the_box_store_ptx_assembles_for_sm_90a():
    """sm_90's PTX of a descriptor's store: 128x256 fp16 in four 128-byte panels, as many a
    round as the pipeline's slots leave room for, each panel one bulk tensor store."""
    sig = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 256]>",
           "c_desc": "tensordesc<fp16[128, 256]>", "K": "i32"}
    compiled = at.compile(desc_store_matmul, target="nvidia:sm_90", signature=sig, num_warps=8,
                          constexprs={"BM": 128, "BN": 256, "BK": 64}, num_stages=3)
    ptx = compiled.asm["ptx"]
    stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group", ptx)
    # the four 16 KiB panels where the drained 4 slots of 48 KiB were: one round
    assert len(stores) == 1 and ptx.count("cp.async.bulk.wait_group.read 0") == 1
    assert compiled.metadata["shared"] <= 232448
    assert "fence.proxy.async.shared::cta" in ptx
    assert not re.search(r"st\.global", ptx)
    c_leaves = ["c_desc_at_base", "c_desc_at_shape0", "c_desc_at_shape1", "c_desc_at_stride0", 1]
    assert [c_leaves, "f16", [128, 64], 128, 0] in compiled.metadata["box_maps"]
    assert compiled.metadata.get("spills", 0) == 0


@at.jit
def dot_then_wide_store(a_ptr, b_ptr, o_ptr, x_ptr, c_desc, BM: tl.constexpr, BN: tl.constexpr,
                        K: tl.constexpr):
    """A dot first (its scratch space leaves the store room), then a box store of ``x``."""
    r, k, n = tl.arange(0, 64), tl.arange(0, K), tl.arange(0, 64)
    acc = tl.dot(tl.load(a_ptr + r[:, None] * K + k[None, :]), tl.load(b_ptr + k[:, None] * 64 + n[None, :]))
    tl.store(o_ptr + r[:, None] * 64 + n[None, :], acc)
    offs_m, offs_n = tl.arange(0, BM), tl.arange(0, BN)
    c_desc.store([0, 0], tl.load(x_ptr + offs_m[:, None] * BN + offs_n[None, :]))


def test_a_store_of_more_panels_than_lanes_takes_rounds_of_32():
    """8 x 4096 fp16 is 64 panels of 64 columns: a round stores at most 32 (a lane of warp
    0 each), so it takes two rounds to write every column."""
    BM, BN, K = 8, 4096, 32
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "o_ptr": "*fp32:16", "x_ptr": "*fp16:16",
           "c_desc": f"tensordesc<fp16[{BM}, {BN}]>"}
    module, kernel = lowered(dot_then_wide_store, sig, {"BM": BM, "BN": BN, "K": K}, 4)
    assert 'call void @"anytile_sim_tma_store"(' in str(kernel)
    x = (np.arange(BM * BN) % 1000).astype(np.float16).reshape(BM, BN)
    c = np.full((BM, BN), 7, np.float16)
    o = np.zeros((64, 64), np.float32)
    run(module, kernel, {"a_ptr": np.ones((64, K), np.float16), "b_ptr": np.ones((K, 64), np.float16),
                          "o_ptr": o, "x_ptr": x, "c_desc_at_base": c, "c_desc_at_shape0": BM,
                          "c_desc_at_shape1": BN, "c_desc_at_stride0": BN}, (1,), 4)
    np.testing.assert_array_equal(c, x)
    np.testing.assert_array_equal(o, K)


@at.jit
def pointer_matmul_block_store(a_ptr, b_ptr, c_ptr, M, N, K, sa, sb, BM: tl.constexpr,
                               BN: tl.constexpr, BK: tl.constexpr, BOOL: tl.constexpr):
    # rows ``sa`` and ``sb`` apart, not known to be aligned: copied by cp.async, not by boxes
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptr + rm[:, None] * sa + (k + rk)[None, :]),
                     tl.load(b_ptr + (k + rk)[:, None] * sb + rn[None, :]), acc)
    bp = tl.make_block_ptr(c_ptr, (M, N), (N, 1), (tl.program_id(0) * BM, tl.program_id(1) * BN),
                           (BM, BN), (1, 0))
    tl.store(bp, acc > 0 if BOOL else acc.to(tl.float16), boundary_check=(0, 1))


def test_a_kernel_whose_only_boxes_are_stores_keeps_no_copy_tracking():
    """Loads by cp.async and a box store: no barrier ring is kept (the 128 bytes the pipeline
    did not budget), so a pipeline that fills the shared memory still compiles."""
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32", "N": "i32:16",
           "K": "i32:16", "sa": "i32", "sb": "i32"}
    module, kernel = lowered(pointer_matmul_block_store, sig,
                              {"BM": 128, "BN": 128, "BK": 64, "BOOL": False}, 4)
    text = str(kernel)
    assert [m.array[0] for m in box_maps(kernel)] == ["c_ptr"]
    assert "anytile_sim_tma_init" not in text and "anytile_sim_tma_try_wait" not in text
    assert kernel.shared_bytes <= tma_target().shared_memory_limit


def test_a_store_of_booleans_is_not_a_box():
    """The copy unit has no boolean element type: such a store keeps the per-thread path."""
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*i1:16", "M": "i32", "N": "i32:16",
           "K": "i32:16", "sa": "i32", "sb": "i32"}
    compiled = at.compile(pointer_matmul_block_store, target="nvidia:sm_90", signature=sig, num_warps=4,
                          constexprs={"BM": 128, "BN": 128, "BK": 64, "BOOL": True})
    assert "box_maps" not in compiled.metadata.extra
