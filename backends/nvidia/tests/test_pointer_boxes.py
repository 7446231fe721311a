"""Boxes found in plain pointer loads (core's ``pointer_boxes.py``) copied by Hopper's tensor
memory accelerator, without a GPU: whole pipelined matmuls whose operands are read through
pointers run on the host simulator with the copies emulated (``tma_sim.py``), checked
against NumPy -- where a box is exactly the tile it is copied by descriptor, elsewhere (a
masked edge, a wrapped index, rows closer together than the tile is wide, coordinates below
zero) by each thread, in the same pipeline.  The same kernels run on an H100 and H200 in
test_device.py."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile_nvidia import tma_sim
from anytile_nvidia.stages import find_ptxas
from anytile_nvidia.tma import tensor_map_maker
from anytile_nvidia.box_maps import BoxMap
from anytile_nvidia.passes.pointer_boxes import ROWS

from tma_kit import box_maps, carried_matmul, lowered, run

#: minutes on the host GPU simulator: `make test-all` runs them
pytestmark = pytest.mark.slow


@at.jit
def tutorial_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # Triton's tutorial form: indices wrapped by % M and % N, the K tail masked
    offs_am = (tl.program_id(0) * BM + tl.arange(0, BM)) % M
    offs_bn = (tl.program_id(1) * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    offs_cm = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_cn = tl.program_id(1) * BN + tl.arange(0, BN)
    tl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :], acc,
             mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@at.jit
def indexed_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sbn, scm, SHIFT, BM: tl.constexpr,
                   BN: tl.constexpr, BK: tl.constexpr):
    # addresses from k each step (split into a base and a step), B held K-major (read
    # transposed), A's rows shifted by SHIFT (below zero for the first tile when negative),
    # both masked on every dimension
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + (rm + SHIFT)[:, None] * sam + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _sig(names, aligned=True):
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16"}
    sig.update({n: "i32:16" if aligned else "i32" for n in names})
    return sig


def _operands(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def _simulate(fn, sig, consts, warps, values, grid, stages=3):
    module, kernel = lowered(fn, sig, consts, warps, stages)
    del tma_sim.copied[:]
    run(module, kernel, values, grid, warps)
    return kernel, list(tma_sim.copied)


@pytest.mark.parametrize("BM,BN,BK,warps,M,N,K", [
    (64, 64, 64, 4, 128, 64, 192),
    (128, 64, 32, 4, 128, 128, 96),      # A's rows permuted: whole 5-D blocks
    (128, 128, 64, 8, 128, 128, 128),    # two warpgroups
])
def test_carried_pointer_tiles_are_copied_by_box(BM, BN, BK, warps, M, N, K):
    a, b, ref = _operands(M, N, K)
    c = np.full((M, N), np.nan, np.float32)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K, "sam": K, "sbk": N,
              "scm": N}
    kernel, copied = _simulate(carried_matmul, _sig(["K", "sam", "sbk", "scm"]),
                               {"BM": BM, "BN": BN, "BK": BK}, warps, values, (M // BM, N // BN))
    np.testing.assert_allclose(c, ref, rtol=2e-2, atol=2e-2)
    # the maps: ROWS rows of the row stride's columns, made on the host for each launch
    assert {m.array[0] for m in box_maps(kernel)} == {"a_ptr", "b_ptr"}
    assert all(m.guarded and m.array[1:] == (ROWS, m.array[2], m.array[2], 1)
               for m in box_maps(kernel))
    assert {m.array[2] for m in box_maps(kernel)} == {"sam", "sbk"}
    # every tile went by box: the K steps of each program, A and B
    steps = K // BK
    assert len({c for c in copied}) >= steps and copied
    text = str(kernel)
    assert "anytile_sim_tma_copy" in text


def test_the_carried_tiles_are_gone_from_the_loop():
    """The loop reads each tile as its first value plus the steps taken: the carried pointer
    tiles, which only fed the loads, are no longer carried."""
    module, kernel = lowered(carried_matmul, _sig(["K", "sam", "sbk", "scm"]),
                             {"BM": 128, "BN": 128, "BK": 64}, 4)
    loop = [op for op in module.kernel.body.ops if op.NAME == "for"][0]
    assert [str(a.type) for a in loop.body.args[1:]].count("tile<128x64xptr<f16>>") == 0
    assert len(box_maps(kernel)) >= 2


@pytest.mark.parametrize("M,N,K", [(128, 128, 128), (200, 136, 200), (64, 72, 40)])
def test_edges_go_by_thread_and_the_rest_by_box(M, N, K):
    """Wrapped rows (% M) and a masked K tail: the tiles where the box is not the tile take
    the per-thread path, in the same pipeline groups."""
    BM, BN, BK = 64, 64, 64
    a, b, ref = _operands(M, N, K, seed=1)
    c = np.full((M, N), np.nan, np.float32)
    values = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K, "stride_am": K,
              "stride_bk": N, "stride_cm": N}
    grid = (-(-M // BM), -(-N // BN))
    sig = _sig(["stride_am", "stride_bk", "stride_cm"])
    sig.update({"M": "i32", "N": "i32", "K": "i32"})
    kernel, copied = _simulate(tutorial_matmul, sig, {"BM": BM, "BN": BN, "BK": BK}, 4, values, grid)
    np.testing.assert_allclose(c, ref, rtol=2e-2, atol=2e-2)
    full = (M // BM) * grid[1] + (N // BN) * grid[0]     # A and B tiles wholly inside, per step
    if K % BK == 0 and M % BM == 0 and N % BN == 0:
        assert len(copied) >= full * (K // BK)
    else:
        assert copied or K < BK


@at.jit
def wrapped_rows(a_ptr, b_ptr, c_ptr, M, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # every row of C stored, those past M from A's rows wrapped around to its first
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    rk, rn = tl.arange(0, BK), tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptr + (rows % M)[:, None] * K + (k + rk)[None, :]),
                     tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :]), acc)
    tl.store(c_ptr + rows[:, None] * BN + rn[None, :], acc)


def test_a_wrapped_index_goes_by_thread_where_it_wraps():
    """Rows ``% M``: the last tile's box would read the rows after the array (here: other
    numbers, in the same buffer) where the pointers wrap around to its first rows."""
    M, K, BM, BN, BK = 100, 128, 64, 64, 64
    rng = np.random.default_rng(4)
    buffer = rng.standard_normal((128, K)).astype(np.float16)
    b = rng.standard_normal((K, BN)).astype(np.float16)
    c = np.full((128, BN), np.nan, np.float32)
    values = {"a_ptr": buffer, "b_ptr": b, "c_ptr": c, "M": M, "K": K}
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "M": "i32", "K": "i32:16"}
    kernel, copied = _simulate(wrapped_rows, sig, {"BM": BM, "BN": BN, "BK": BK}, 4, values, (2,))
    rows = buffer[np.arange(128) % M].astype(np.float64)
    np.testing.assert_allclose(c, rows @ b.astype(np.float64), rtol=2e-2, atol=2e-2)
    assert any(m.array[0] == "a_ptr" for m in box_maps(kernel))
    # A's boxes (whole blocks of 64 rows: the last coordinate is the block) for the first
    # tile only; the second's by thread
    blocks = [c[4] for c in copied if c[1:4] == (0, 0, 0) and c[0] in (0, 64)]
    assert blocks and set(blocks) == {0}


@pytest.mark.parametrize("shift,M", [(0, 128), (-8, 128), (0, 100)])
def test_coordinates_below_zero_and_masked_rows_go_by_thread(shift, M):
    """A's rows start ``shift`` rows before the array's pointer (inside the buffer): the
    first program's box would begin at a negative row, which a map reads as zeros; it goes
    by thread and reads the rows before, as the pointers say."""
    N, K, BM, BN, BK = 64, 128, 64, 64, 64
    rng = np.random.default_rng(2)
    whole = rng.standard_normal((M + 16, K)).astype(np.float16)
    a = whole[8:]                          # a_ptr: row 8 of the buffer
    b = rng.standard_normal((K, N)).astype(np.float16)
    bt = np.ascontiguousarray(b.T)         # K-major: read transposed
    c = np.full((M, N), np.nan, np.float32)
    values = {"a_ptr": a, "b_ptr": bt, "c_ptr": c, "M": M, "N": N, "K": K, "sam": K, "sbn": K,
              "scm": N, "SHIFT": shift}
    sig = _sig(["N", "K", "sam", "sbn", "scm"])
    sig.update({"M": "i32", "SHIFT": "i32"})
    kernel, copied = _simulate(indexed_matmul, sig, {"BM": BM, "BN": BN, "BK": BK}, 4, values,
                               (-(-M // BM), N // BN))
    rows = whole[8 + shift:8 + shift + M].astype(np.float64)
    np.testing.assert_allclose(c, rows @ b.astype(np.float64), rtol=2e-2, atol=2e-2)
    assert copied                           # B (and A's inner tiles) still by box
    assert any(m.array[0] == "b_ptr" and m.guarded for m in box_maps(kernel))


def test_rows_closer_than_the_tile_is_wide_go_by_thread():
    """Rows 16 elements apart, tiles 64 wide: each box would run into the next rows, so every
    copy goes by thread, reading the overlapping rows as the pointers say."""
    M, N, K, BM, BN, BK = 64, 64, 64, 64, 64, 64
    rng = np.random.default_rng(3)
    flat = rng.standard_normal(16 * M + K).astype(np.float16)
    a = np.lib.stride_tricks.as_strided(flat, (M, K), (32, 2))
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    values = {"a_ptr": flat, "b_ptr": b, "c_ptr": c, "M": M, "N": N, "K": K, "sam": 16, "sbk": N,
              "scm": N}
    kernel, copied = _simulate(carried_matmul, _sig(["K", "sam", "sbk", "scm"]),
                               {"BM": BM, "BN": BN, "BK": BK}, 4, values, (1, 1))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-2, atol=2e-2)
    # only B's boxes (one per step; A's never)
    assert len(copied) == K // BK * len([m for m in box_maps(kernel) if m.array[0] == "b_ptr"])


def test_unaligned_rows_keep_per_thread_copies():
    """Row strides not known to be multiples of 16 bytes: no map (the copy unit could not
    describe the array), so no box copies at all."""
    module, kernel = lowered(carried_matmul, _sig(["K", "sam", "sbk", "scm"], aligned=False),
                             {"BM": 128, "BN": 128, "BK": 64}, 4)
    assert box_maps(kernel) == () and "anytile_sim_tma" not in str(kernel)


def test_the_pointer_box_ptx_assembles_for_sm_90a():
    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")
    sig = _sig(["M", "N", "K", "stride_am", "stride_bk", "stride_cm"])
    compiled = at.compile(tutorial_matmul, target="nvidia:sm_90", signature=sig, num_warps=8,
                          constexprs={"BM": 128, "BN": 256, "BK": 64})
    ptx = compiled.asm["ptx"]
    assert "cp.async.bulk.tensor.2d" in ptx and "cp.async.cg.shared.global" in ptx
    assert [m[-1] for m in compiled.metadata["box_maps"]] == [True] * len(compiled.metadata["box_maps"])
    assert compiled.metadata.get("spills", 0) == 0


@pytest.mark.parametrize("BM,BN,warps,boxes", [(128, 256, 8, True), (256, 128, 8, True),
                                                (128, 128, 8, False), (128, 128, 4, False),
                                                (64, 256, 4, False)])
def test_only_large_tiles_copy_pointer_boxes(BM, BN, warps, boxes):
    """The checks and the per-thread copy beside each box cost every step; measured, they pay
    at 128x256 tiles and not at 128x128 (``TensorCopies.pointer_box_tile``)."""
    compiled = at.compile(carried_matmul, target="nvidia:sm_90", num_warps=warps,
                          signature=_sig(["K", "sam", "sbk", "scm"]),
                          constexprs={"BM": BM, "BN": BN, "BK": 64})
    assert bool(compiled.metadata.get("box_maps")) == boxes
    assert bool(compiled.metadata.get("pointer_boxes")) == boxes


def test_a_guarded_map_of_columns_the_checks_refuse_becomes_the_zeros_map():
    """Columns past 32 bits or below one (row strides the kernel's checks refuse): the host
    does not fail the launch, it passes the zeros map, which no copy that passed the checks
    reads.  A map the checks would pass is made as it is, and its failures are errors."""
    made = []

    def encode(box_map, base, rows, cols, row_stride, elem_bytes):
        if cols > 1 << 20:
            from anytile.errors import LaunchError
            raise LaunchError("too wide")
        made.append((base, rows, cols, row_stride))
        return bytes(128)
    guarded = BoxMap(("a_ptr", ROWS, "sam", "sam", 1), "f16", (64, 64), 128, guarded=True)
    make = tensor_map_maker(guarded, encode=encode, zeros=lambda: 0x1000)
    make(0x2000, ROWS, 1 << 33, 1 << 33)
    make(0x2000, ROWS, -64, -64)
    make(0x2000, ROWS, 4096, 4096)
    assert made == [(0x1000, 1, 1, 8), (0x1000, 1, 1, 8), (0x2000, ROWS, 4096, 4096)]
    with pytest.raises(Exception, match="too wide"):
        make(0x2000, ROWS, 1 << 30, 1 << 30)
    plain = BoxMap(("a_ptr", "M", "K", "K", 1), "f16", (64, 64), 128)
    with pytest.raises(Exception, match="too wide"):
        tensor_map_maker(plain, encode=encode, zeros=lambda: 0x1000)(0x2000, 8, 1 << 33, 1 << 33)


@at.jit
def narrow_offset(a_ptr, b_ptr, c_ptr, OFF, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rk, rn = tl.arange(0, BM), tl.arange(0, BK), tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + OFF * 256 + rm[:, None] * BK + (k + rk)[None, :])   # OFF * 256 in 16 bits
        acc = tl.dot(a, tl.load(b_ptr + rk[:, None] * BN + rn[None, :]), acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_a_16_bit_offset_that_wraps_is_read_where_it_wrapped():
    """``OFF * 256`` computed in 16 bits wraps (128 * 256 is -32768): a term kept whole, so
    the box is where the pointers are (found by the review: summed in 64 bits, it had read
    65536 elements too far)."""
    buffer = (np.arange(200000) % 1000).astype(np.float16)
    start = 70000
    c = np.zeros((64, 64), np.float32)
    values = {"a_ptr": buffer[start:], "b_ptr": np.eye(64, dtype=np.float16), "c_ptr": c,
              "OFF": 128, "K": 64}
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "OFF": "i16", "K": "i32"}
    kernel, copied = _simulate(narrow_offset, sig, {"BM": 64, "BN": 64, "BK": 64}, 4, values, (1,))
    want = buffer[start - 32768:start - 32768 + 64 * 64].reshape(64, 64).astype(np.float32)
    np.testing.assert_array_equal(c, want)
    assert copied         # by box, at the wrapped place
