"""The vendor-neutral GPU lowering on the host simulator, at warps of 64 and 32 lanes, with
matrix instructions given only as data (``MatrixInstr`` records shaped like the families a
second GPU vendor brings: wave64 32x32 and 16x16 tiles whose accumulators sit in groups of
four rows, wave32 16x16x16 with operands replicated over the two lane halves and the
accumulator in every other row, or not).  No GPU and no backend needed."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.codegen.gpu import MatrixInstr, acc_layout, check_instr, geometry
from anytile.codegen.gpu.layouts import BlockedLayout, default_blocked, element_owners
from anytile.codegen.gpu.simulator import SimulatedGpuTarget, lower_for_simulation, simulate_kernel
from anytile.errors import CompilationError


def wave64_32x32x8(a_type="f16", acc_type="f32"):
    return MatrixInstr(f"w64.32x32x8.{a_type}", 32, 32, 8, a_type, a_type, acc_type, 64,
                       lambda l, e: (l % 32, 4 * (l // 32) + e),
                       lambda l, e: (4 * (l // 32) + e, l % 32),
                       lambda l, e: (e // 4 * 8 + l // 32 * 4 + e % 4, l % 32), a_pack=4, b_pack=4)


def wave64_16x16x16(a_type="f16", acc_type="f32"):
    return MatrixInstr(f"w64.16x16x16.{a_type}", 16, 16, 16, a_type, a_type, acc_type, 64,
                       lambda l, e: (l % 16, 4 * (l // 16) + e),
                       lambda l, e: (4 * (l // 16) + e, l % 16),
                       lambda l, e: (l // 16 * 4 + e, l % 16), a_pack=4, b_pack=4)


def wave32_replicated():
    return MatrixInstr("w32.16x16x16.replicated", 16, 16, 16, "f16", "f16", "f32", 32,
                       lambda l, e: (l % 16, e), lambda l, e: (e, l % 16),
                       lambda l, e: (2 * e + l // 16, l % 16), a_pack=2, b_pack=2,
                       a_replicas=2, b_replicas=2)


def wave32_contiguous():
    return MatrixInstr("w32.16x16x16.contiguous", 16, 16, 16, "bf16", "bf16", "f32", 32,
                       lambda l, e: (l % 16, 8 * (l // 16) + e),
                       lambda l, e: (8 * (l // 16) + e, l % 16),
                       lambda l, e: (8 * (l // 16) + e, l % 16), a_pack=2, b_pack=2)


INSTRS = {"w64-32x32x8": wave64_32x32x8, "w64-16x16x16": wave64_16x16x16,
          "w32-replicated": wave32_replicated, "w32-contiguous": wave32_contiguous,
          "w64-i8": lambda: wave64_16x16x16("i8", "i32")}


@pytest.mark.parametrize("name", sorted(INSTRS))
def test_fragment_maps_cover_each_tile(name):
    instr = INSTRS[name]()
    check_instr(instr)
    for elem, count, shape, replicas in ((instr.a_elem, instr.a_count, (instr.m, instr.k), instr.a_replicas),
                                         (instr.b_elem, instr.b_count, (instr.k, instr.n), instr.b_replicas),
                                         (instr.acc_elem, instr.acc_count, (instr.m, instr.n), 1)):
        held = [elem(lane, i) for lane in range(instr.lanes) for i in range(count)]
        assert sorted(set(held)) == [(x, y) for x in range(shape[0]) for y in range(shape[1])]
        assert all(held.count(xy) == replicas for xy in set(held))


def test_accumulator_layouts_follow_the_maps():
    assert acc_layout(wave64_32x32x8(), (2, 2)) == BlockedLayout((4, 1), (2, 32), (2, 2), (1, 0))
    assert geometry(wave64_32x32x8()).reps == (4, 1)
    assert acc_layout(wave64_16x16x16(), (1, 4)) == BlockedLayout((4, 1), (4, 16), (1, 4), (1, 0))
    assert acc_layout(wave32_replicated(), (2, 1)) == BlockedLayout((1, 1), (2, 16), (2, 1), (1, 0))
    assert geometry(wave32_replicated()).reps == (8, 1)
    assert acc_layout(wave32_contiguous(), (1, 1)) == BlockedLayout((8, 1), (2, 16), (1, 1), (1, 0))
    # each lane of the derived layout holds exactly the elements the map gives it
    instr = wave64_32x32x8()
    owners = element_owners(acc_layout(instr, (1, 1)), (32, 32))
    for (row, col), held in owners.items():
        (warp, lane, _), = held
        assert (row, col) in [instr.acc_elem(lane, e) for e in range(instr.acc_count)]


@pytest.mark.parametrize("broken,message", [
    (lambda l, e: (l % 16, 0), "held 32 times, not 2"),             # every element on column 0
    (lambda l, e: ((l * 3) % 16, e), "power of two"),                # not affine over lane bits
])
def test_maps_that_are_not_placements_are_refused(broken, message):
    bad = MatrixInstr("bad", 16, 16, 16, "f16", "f16", "f32", 32, broken, lambda l, e: (e, l % 16),
                      lambda l, e: (2 * e + l // 16, l % 16), a_pack=2, b_pack=2, a_replicas=2,
                      b_replicas=2)
    with pytest.raises(ValueError, match=message):
        check_instr(bad)


@at.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, c))


def ir_of(fn, signature, constexprs):
    return at.compile(fn, target="interpreter:reference", signature=signature, constexprs=constexprs).module


_NUMPY = {"f16": np.float16, "i8": np.int8, "f32": np.float32, "i32": np.int32}


def _inputs(rng, in_type, shape):
    if in_type == "i8":
        return rng.integers(-100, 100, shape).astype(np.int8)
    if in_type == "bf16":
        import ml_dtypes
        return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    return rng.standard_normal(shape).astype(_NUMPY[in_type])


@pytest.mark.parametrize("name,M,N,K,num_warps", [
    ("w64-32x32x8", 64, 64, 32, 4), ("w64-32x32x8", 32, 32, 16, 1), ("w64-16x16x16", 32, 64, 32, 2),
    ("w32-replicated", 32, 32, 32, 2), ("w32-contiguous", 64, 16, 16, 4), ("w64-i8", 16, 64, 32, 4)])
def test_dots_run_on_instructions_given_as_data(rng, name, M, N, K, num_warps):
    instr = INSTRS[name]()
    target = SimulatedGpuTarget(instr.lanes, [instr])
    acc_np = np.int32 if instr.acc_type == "i32" else np.float32
    sig_of = {"f16": "*fp16", "bf16": "*bf16", "i8": "*i8"}
    a, b = _inputs(rng, instr.a_type, (M, K)), _inputs(rng, instr.b_type, (K, N))
    c0 = (rng.integers(-1000, 1000, (M, N)) if instr.acc_type == "i32" else rng.standard_normal((M, N))).astype(acc_np)
    c = c0.copy()
    module = ir_of(dot_kernel, {"a_ptr": sig_of[instr.a_type], "b_ptr": sig_of[instr.b_type],
                                "c_ptr": "*i32" if instr.acc_type == "i32" else "*fp32"},
                   {"M": M, "N": N, "K": K})
    text = simulate_kernel(module, (1,), [a, b, c], num_warps, target=target)
    assert "anytile_sim_scratch" in text   # the instruction ran, not the FMA loop
    expected = c0.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    if instr.acc_type == "i32":
        np.testing.assert_array_equal(c, expected.astype(np.int64).astype(np.int32))
    else:
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)


@at.jit
def k_loop_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("copies", [(), (4, 8, 16)])
def test_pipelined_dot_with_and_without_asynchronous_copies(rng, copies):
    """Without asynchronous copies (the capability is data: ``async_copy_sizes``) the
    pipeline's copies go through registers and shared-memory stores."""
    M, N, K, BM, BN, BK = 64, 64, 80, 64, 32, 32
    target = SimulatedGpuTarget(64, [wave64_32x32x8()], async_copy_sizes=copies)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "M": "i32:16", "N": "i32:16",
           "K": "i32:16"}
    module = at.compile(k_loop_matmul, target="interpreter:reference", signature=sig,
                        constexprs={"BM": BM, "BN": BN, "BK": BK}).module
    text, _ = lower_for_simulation(module, 2, target=target)
    assert ("<8 x half>" in text) == (copies == ())   # one 16-byte load a run, in registers
    simulate_kernel(module, (M // BM, N // BN), [a, b, c, M, N, K], 2, target=target)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


@at.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


@at.jit
def reduce_scan_kernel(x_ptr, rows_ptr, cols_ptr, amax_ptr, cum_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    tl.store(rows_ptr + r, tl.sum(x, axis=1))
    tl.store(cols_ptr + c, tl.max(x, axis=0))
    tl.store(amax_ptr + r, tl.argmax(x, axis=1))
    tl.store(cum_ptr + r[:, None] * C + c[None, :], tl.cumsum(x, axis=1))


@pytest.mark.parametrize("warp_size", [64, 32])
def test_reductions_and_scans_at_any_warp_size(rng, warp_size):
    target = SimulatedGpuTarget(warp_size)
    rows, cols, block = 3, 300, 512
    x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    out = np.full((rows, cols), np.nan, np.float32)
    module = ir_of(softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "n_cols": "i32"}, {"BLOCK": block})
    simulate_kernel(module, (rows,), [out, x, cols], 4, target=target)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    for R, C, warps in ((8, 128, 2), (64, 16, 4), (4, 256, 1)):
        x = rng.integers(-50, 50, (R, C)).astype(np.float32)
        got = [np.full(R, np.nan, np.float32), np.full(C, np.nan, np.float32),
               np.full(R, -7, np.int32), np.full((R, C), np.nan, np.float32)]
        module = ir_of(reduce_scan_kernel, {"x_ptr": "*fp32", "rows_ptr": "*fp32", "cols_ptr": "*fp32",
                                            "amax_ptr": "*i32", "cum_ptr": "*fp32"}, {"R": R, "C": C})
        simulate_kernel(module, (1,), [x] + got, warps, target=target)
        np.testing.assert_array_equal(got[0], x.sum(1))
        np.testing.assert_array_equal(got[1], x.max(0))
        np.testing.assert_array_equal(got[2], x.argmax(1))
        np.testing.assert_array_equal(got[3], np.cumsum(x, axis=1))


def test_threads_above_the_targets_limit_are_a_clear_error():
    module = ir_of(softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "n_cols": "i32"}, {"BLOCK": 64})
    lower_for_simulation(module, 16, target=SimulatedGpuTarget(64))   # 1024 threads: fine
    with pytest.raises(CompilationError, match=r"num_warps=32 gives 2048 threads.*32 warps of 64.*"
                                               r"num_warps <= 16"):
        lower_for_simulation(module, 32, target=SimulatedGpuTarget(64))


@pytest.mark.parametrize("shape,num_warps,vector", [((1024,), 4, 4), ((64, 64), 4, 4), ((2, 2), 8, 1),
                                                    ((128, 16), 2, 8), ((8, 1), 4, 1)])
def test_default_layouts_cover_every_element_with_64_lanes(shape, num_warps, vector):
    layout = default_blocked(shape, num_warps, 64, vector)
    assert layout.warp_size == 64 and layout.num_warps == num_warps
    owners = element_owners(layout, shape)
    assert set(owners) == {tuple(i) for i in np.ndindex(*shape)}
    if np.prod(shape) >= num_warps * 64 * layout.size_per_thread[-1]:
        assert all(len(v) == 1 for v in owners.values())
