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
from anytile_conformance.catalogue.dot import dot_k_loop_kernel, dot_kernel
from anytile_conformance.catalogue.kernels import softmax_kernel
from anytile_conformance.catalogue.reductions import reduce_kernel, scan_kernel


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
    c = rng.integers(-1000, 1000, (M, N)) if instr.acc_type == "i32" else rng.standard_normal((M, N))
    c = c.astype(acc_np)
    out = np.full((M, N), -7 if instr.acc_type == "i32" else np.nan, acc_np)
    acc = "*i32" if instr.acc_type == "i32" else "*fp32"
    module = ir_of(dot_kernel, {"a_ptr": sig_of[instr.a_type], "b_ptr": sig_of[instr.b_type],
                                "c_ptr": acc, "out_ptr": acc},
                   {"M": M, "N": N, "K": K, "PRECISION": "default",
                    "ACC": tl.int32 if instr.acc_type == "i32" else tl.float32})
    text = simulate_kernel(module, (1,), [a, b, c, out], num_warps, target=target)
    assert "anytile_sim_scratch" in text   # the instruction ran, not the FMA loop
    expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    if instr.acc_type == "i32":
        np.testing.assert_array_equal(out, expected.astype(np.int64).astype(np.int32))
    else:
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("copies", [(), (4, 8, 16)])
def test_pipelined_dot_with_and_without_asynchronous_copies(rng, copies):
    """Without asynchronous copies (the capability is data: ``async_copy_sizes``) the
    pipeline's copies go through registers and shared-memory stores."""
    M, N, K, BK = 64, 64, 80, 16
    target = SimulatedGpuTarget(64, [wave64_32x32x8()], async_copy_sizes=copies)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    out = np.full((M, N), np.nan, np.float32)
    module = ir_of(dot_k_loop_kernel, {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "out_ptr": "*fp32:16",
                                       "k_total": "i32:16"}, {"M": M, "N": N, "BK": BK})
    text, _ = lower_for_simulation(module, 2, target=target)
    assert ("<8 x half>" in text) == (copies == ())   # one 16-byte load a run, in registers
    simulate_kernel(module, (1,), [a, b, out, K], 2, target=target)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("warp_size", [64, 32])
def test_reductions_and_scans_at_any_warp_size(rng, warp_size):
    target = SimulatedGpuTarget(warp_size)
    rows, cols, block = 3, 300, 512
    x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    out = np.full((rows, cols), np.nan, np.float32)
    module = ir_of(softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_row_stride": "i32",
                                    "out_row_stride": "i32", "n_cols": "i32"}, {"BLOCK": block})
    simulate_kernel(module, (rows,), [out, x, cols, cols, cols], 4, target=target)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    for R, C, warps in ((8, 128, 2), (64, 16, 4), (4, 256, 1)):
        x = rng.integers(-50, 50, (R, C)).astype(np.float32)
        for op, axis, want in (("sum", 1, x.sum(1)), ("max", 0, x.max(0)),
                               ("argmax", 1, x.argmax(1).astype(np.int32))):
            got = np.full(want.shape, -7 if op == "argmax" else np.nan, want.dtype)
            module = ir_of(reduce_kernel, {"x_ptr": "*fp32", "out_ptr": "*i32" if op == "argmax" else "*fp32",
                                           "m": "i32", "n": "i32"},
                           {"OP": op, "AXIS": axis, "KEEP": False, "BM": R, "BN": C})
            simulate_kernel(module, (1,), [x, got, R, C], warps, target=target)
            np.testing.assert_array_equal(got, want)
        got = np.full((R, C), np.nan, np.float32)
        module = ir_of(scan_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                       {"OP": "cumsum", "AXIS": 1, "REVERSE": False, "BM": R, "BN": C})
        simulate_kernel(module, (1,), [x, got], warps, target=target)
        np.testing.assert_array_equal(got, np.cumsum(x, axis=1))


def test_threads_above_the_targets_limit_are_a_clear_error():
    module = ir_of(softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_row_stride": "i32",
                                    "out_row_stride": "i32", "n_cols": "i32"}, {"BLOCK": 64})
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


@at.jit
def _affine_then(a1, b1, a2, b2):
    # composing x -> a*x + b maps (first a1, b1, then a2, b2): associative, not commutative
    return a2 * a1, a2 * b1 + b2


@at.jit
def _compose_scan_kernel(a_ptr, b_ptr, outa_ptr, outb_ptr, R: tl.constexpr, C: tl.constexpr,
                         AXIS: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    a, b = tl.associative_scan((tl.load(a_ptr + offs), tl.load(b_ptr + offs)), AXIS,
                               _affine_then, reverse=REVERSE)
    tl.store(outa_ptr + offs, a)
    tl.store(outb_ptr + offs, b)


def _compose_reference(a, b, axis, reverse):
    a, b = np.moveaxis(a, axis, -1).astype(np.int64), np.moveaxis(b, axis, -1).astype(np.int64)
    order = range(a.shape[-1] - 1, -1, -1) if reverse else range(a.shape[-1])
    out_a, out_b = np.empty_like(a), np.empty_like(b)
    acc_a, acc_b = None, None
    for i in order:
        if acc_a is None:
            acc_a, acc_b = a[..., i], b[..., i]
        else:
            acc_a, acc_b = a[..., i] * acc_a, a[..., i] * acc_b + b[..., i]
        out_a[..., i], out_b[..., i] = acc_a, acc_b
    return np.moveaxis(out_a, -1, axis), np.moveaxis(out_b, -1, axis)


@pytest.mark.parametrize("warp_size", [64, 32])
@pytest.mark.parametrize("R,C,axis,num_warps", [(1, 1024, 1, 4), (1, 2048, 1, 8), (4, 256, 1, 4),
                                                 (512, 2, 0, 4), (64, 16, 0, 2), (8, 8, 1, 1),
                                                 (2, 64, 1, 8), (16, 128, 0, 4)])
@pytest.mark.parametrize("reverse", [False, True])
def test_scans_over_lanes_and_warps_keep_scan_order(rng, warp_size, R, C, axis, num_warps, reverse):
    """A non-commutative combine (composing affine maps, in wrapping int32) scanned along
    axes spread over registers, lanes and warps, both directions: every prefix in order."""
    target = SimulatedGpuTarget(warp_size)
    a = rng.integers(-3, 4, (R, C)).astype(np.int32)
    b = rng.integers(-100, 100, (R, C)).astype(np.int32)
    out_a = np.full((R, C), 7, np.int32)
    out_b = np.full((R, C), 7, np.int32)
    module = ir_of(_compose_scan_kernel, {"a_ptr": "*i32", "b_ptr": "*i32", "outa_ptr": "*i32",
                                          "outb_ptr": "*i32"},
                   {"R": R, "C": C, "AXIS": axis, "REVERSE": reverse})
    simulate_kernel(module, (1,), [a, b, out_a, out_b], num_warps, target=target)
    want_a, want_b = _compose_reference(a, b, axis, reverse)
    np.testing.assert_array_equal(out_a, want_a.astype(np.int32))
    np.testing.assert_array_equal(out_b, want_b.astype(np.int32))
