"""A fused epilogue of a pipelined matmul through shared memory, without a GPU: the residual
tile loaded after the K loop (16-byte runs a thread) joins the tensor-core accumulator's
layout by a layout exchange that takes the place of the pipeline's buffers, free once the K
loop has drained (``shared.busy_buffer_ops``), instead of scratch space after them (which
left a 128x256 tile more shared memory than a program has).  Run on the host simulator with
the MMAs emulated, in a persistent loop (each program's next tile refills the buffers the
exchange used) and with masked edges, against NumPy."""
import copy
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.backend import CompileOptions
from anytile.codegen.gpu import lay_out
from anytile.codegen.gpu.shared import busy_buffer_ops
from anytile.codegen.gpu.shared_ops import SharedAllocOp
from anytile.codegen.gpu.simulator import lower_for_simulation, simulate_kernel
from anytile.ir import ops
from anytile.ir.nodes import walk
from anytile_nvidia.simulated import simulated_nvidia_target
from anytile_nvidia.warpgroup_sim import simulated_hopper_target

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_simulated as ts  # noqa: E402

#: minutes on the host GPU simulator: `make test-all` runs them
pytestmark = pytest.mark.slow


@at.jit
def persistent_matmul(a_ptr, b_ptr, r_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr):
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
        rm = tile // tiles_n * BM + tl.arange(0, BM)
        rn = tile % tiles_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                        mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                        mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        inside = (rm[:, None] < M) & (rn[None, :] < N)
        residual = tl.load(r_ptr + rm[:, None] * N + rn[None, :], mask=inside, other=0.0)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], (acc + residual).to(c_ptr.dtype.element_ty),
                 mask=inside)


def _signature(out):
    return {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "r_ptr": "*fp16:16", "c_ptr": f"*{out}:16",
            "M": "i32", "N": "i32:16", "K": "i32:16"}


TARGETS = {"wgmma": simulated_hopper_target, "mma.sync": simulated_nvidia_target}


@pytest.mark.parametrize("target,out", [("wgmma", "fp16"), ("wgmma", "fp32"), ("mma.sync", "fp16")])
def test_a_fused_epilogue_goes_through_the_drained_buffers(target, out):
    BM, BN, BK, warps = 64, 64, 32, 4
    M, N, K = 150, 192, 96          # 3 x 3 tiles on 2 programs; the last row of tiles masked
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    r = rng.standard_normal((M, N)).astype(np.float16)
    dtype = np.float16 if out == "fp16" else np.float32
    c = ts.poisoned((M, N), dtype)
    module = ts.ir_of(persistent_matmul, _signature(out), {"BM": BM, "BN": BN, "BK": BK},
                      num_warps=warps)
    text = simulate_kernel(module, (2,), [a, b, r, c, M, N, K], warps, target=TARGETS[target]())
    want = a.astype(np.float64) @ b.astype(np.float64) + r
    np.testing.assert_allclose(c.astype(np.float64), want, rtol=2e-2 if out == "fp16" else 1e-5,
                               atol=2e-2 if out == "fp16" else 1e-4)
    # the residual (widened to f32 where it was loaded) goes into the exchange in 16-byte
    # runs and comes out in the accumulator's 8-byte ones; the exchange added no scratch
    # space beyond the buffers
    assert re.search(r"store <4 x float> %\S+, ptr %\S+, align 16", text), "no 16-byte exchange writes"
    assert re.search(r"load <2 x float>, ptr %\S+, align 8", text), "no 8-byte exchange reads"
    _, shared = lower_for_simulation(module, warps, target=TARGETS[target]())
    buffers = sum(op.result.type.nbytes for op in walk(_laid(module, target, warps).kernel.body)
                  if isinstance(op, SharedAllocOp))
    assert shared <= buffers + 256


def _laid(module, target, warps):
    module = copy.deepcopy(module)
    return lay_out(module, TARGETS[target](), CompileOptions(num_warps=warps, num_stages=3), {})


def test_the_buffers_are_busy_from_the_prologue_to_the_drain_only():
    module = ts.ir_of(persistent_matmul, _signature("fp16"), {"BM": 64, "BN": 64, "BK": 32},
                      num_warps=4)
    laid = _laid(module, "wgmma", 4)
    kernel = laid.kernel
    busy = busy_buffer_ops(kernel)
    assert busy == laid.busy_shared
    tile_loop = next(op for op in kernel.body.ops if isinstance(op, ops.ForOp))
    body = tile_loop.body.ops
    k_loop = next(op for op in body if isinstance(op, ops.ForOp))
    first = next(i for i, op in enumerate(body) if isinstance(op, SharedAllocOp))
    end = body.index(k_loop) + 1                         # the drain after the K loop
    assert all(op in busy for op in body[first:end + 1])
    assert all(op in busy for op in walk(k_loop.body))
    assert not any(op in busy for op in body[end + 1:]), "the epilogue is free"
    assert not any(op in busy for op in body[:first])


@at.jit
def carried_pointer_store(a_ptr, b_ptr, c_ptr, n, BM: tl.constexpr, BN: tl.constexpr,
                          BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a_ptr + rm[:, None] * BK + rk[None, :]
    pb = b_ptr + rk[:, None] * BN + rn[None, :]
    pc = c_ptr + rm[:, None] * BN + rn[None, :]
    for _ in range(n):
        tl.store(pc, tl.dot(tl.load(pa), tl.load(pb)))
        pc += BM * BN


def test_a_carried_pointer_tile_goes_through_an_exchange():
    """A loop-carried pointer tile stored through in a dot's layout is exchanged as pointers
    (kept as 64-bit integers, one at a time): no narrow-float storage form for them."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 16)).astype(np.float16)
    b = rng.standard_normal((16, 32)).astype(np.float16)
    c = ts.poisoned((2, 32, 32), np.float32)
    module = ts.ir_of(carried_pointer_store, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32",
                                              "n": "i32"}, {"BM": 32, "BN": 32, "BK": 16}, num_warps=4)
    ts.simulate(module, (1,), [a, b, c, 2])
    want = a.astype(np.float64) @ b.astype(np.float64)
    for step in range(2):
        np.testing.assert_allclose(c[step], want, rtol=1e-2, atol=1e-2)
