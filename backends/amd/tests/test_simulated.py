"""The AMD lowering end to end on the simulated devices ``amdsim64:0`` (gfx942's tables, waves
of 64) and ``amdsim32:0`` (gfx1100's, waves of 32), through the runtime as a user launches:
dots on MFMA/WMMA in and out of pipelined loops, reductions over the architecture's lane
moves, math, atomics and ``device_assert``, against NumPy.  (The quick conformance suite
runs on both devices in ``make test``.)"""
import ml_dtypes
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile_conformance.catalogue import kernels as catalogue
from anytile_conformance.catalogue.control_flow import assert_kernel
from anytile_conformance.catalogue.dot import dot_kernel

DEVICES = ["amdsim64", "amdsim32"]


@pytest.fixture(params=DEVICES)
def device(request, monkeypatch):
    """The opt-in simulated device, with discovery refreshed before and after (other tests'
    collection may have seen it unusable)."""
    from anytile.runtime.discovery import discover
    monkeypatch.setenv("ANYTILE_GPU_SIMULATOR", "1")
    discover(refresh=True)
    yield at.device(f"{request.param}:0")
    monkeypatch.delenv("ANYTILE_GPU_SIMULATOR")
    discover(refresh=True)


@pytest.mark.parametrize("types", [("f16", "f32", "default"), ("bf16", "f32", "default"),
                                   ("f32", "f32", "default"), ("f32", "f32", "ieee"),
                                   ("i8", "i32", "default")])
def test_dots_on_matrix_instructions(device, rng, types):
    """64 x 64 x 32 with 4 warps: 2 x 2 warp tiles of 16 x 16 instructions on either wave
    (MFMA on amdsim64, xf32 for f32 by default; WMMA on amdsim32, f32 by FMAs)."""
    src, acc, precision = types
    np_in = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "i8": np.int8}[src]
    m, n, k = 64, 64, 32
    if src == "i8":
        a, b = (rng.integers(-128, 128, s).astype(np.int8) for s in ((m, k), (k, n)))
        c = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    else:
        a, b = (rng.uniform(-2, 2, s).astype(np_in) for s in ((m, k), (k, n)))
        c = rng.uniform(-2, 2, (m, n)).astype(np.float32)
    out = at.asarray(np.full((m, n), -7 if src == "i8" else np.nan, c.dtype), device=device)
    args = [at.asarray(v, device=device) for v in (a, b, c)] + [out]
    consts = dict(M=m, N=n, K=k, PRECISION=precision, ACC=tl.int32 if acc == "i32" else tl.float32)
    dot_kernel[(1,)](*args, **consts)
    expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    if src == "i8":
        np.testing.assert_array_equal(out.numpy(), expected.astype(np.int32))
    else:     # f32 by default may round inputs to 10 mantissa bits (xf32, as Triton's tf32)
        tol = 2e-3 * np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + 1e-5
        assert np.all(np.abs(out.numpy() - expected) <= tol)
    sig = {"a_ptr": f"*{_SIG[src]}", "b_ptr": f"*{_SIG[src]}", "c_ptr": f"*{_SIG[acc]}",
           "out_ptr": f"*{_SIG[acc]}"}
    arch = "gfx942" if device.name.startswith("amdsim64") else "gfx1100"
    llir = at.compile(dot_kernel, target=f"amd:{arch}", signature=sig, constexprs=consts).asm["llir"]
    uses_matrix = "llvm.amdgcn.mfma" in llir or "llvm.amdgcn.wmma" in llir
    assert uses_matrix == (arch == "gfx942" or src != "f32")


_SIG = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "i8": "i8", "i32": "i32"}


@pytest.mark.parametrize("K", [16, 80])
def test_pipelined_k_loop_matmul(device, rng, K):
    """The catalogue's grouped matmul: its K loop's dot operands go through the shared-memory
    pipeline (3 stages, loaded through registers: AMD has no asynchronous copies), with a
    masked tail when K = 80, then bias and ReLU."""
    M, N, BM, BN, BK = 64, 64, 64, 32, 32
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    bias = rng.standard_normal(N).astype(np.float32)
    c = at.asarray(np.full((M, N), np.nan, np.float16), device=device)
    consts = {"ACTIVATION": "relu", "BM": BM, "BN": BN, "BK": BK, "GROUP_M": 1}
    catalogue.matmul_kernel[(2,)](*(at.asarray(v, device=device) for v in (a, b, bias)), c,
                                  M, N, K, K, 1, N, 1, N, **consts, num_warps=2)
    expected = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    np.testing.assert_allclose(c.numpy().astype(np.float64), expected, rtol=2e-3, atol=2e-3)
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "bias_ptr": "*fp32", "c_ptr": "*fp16",
           **{n: "i32" for n in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                                 "stride_cm")}}
    k = at.compile(catalogue.matmul_kernel, target="amd:gfx942", signature=sig, constexprs=consts,
                   num_warps=2)
    assert k.metadata["pipelined_dot_operands"] == 2


def test_softmax(device, rng):
    x = rng.standard_normal((3, 300)).astype(np.float32)
    out = at.asarray(np.full_like(x, np.nan), device=device)
    catalogue.softmax_kernel[(3,)](out, at.asarray(x, device=device), 300, 300, 300, BLOCK=512)
    w = x.astype(np.float64)
    e = np.exp(w - w.max(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(1, keepdims=True), rtol=2e-5, atol=1e-7)


@at.jit
def _math_and_atomics(x_ptr, y_ptr, total_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.sin(x) * tl.exp(x * 0.01) + tl.erf(x * 0.1))
    tl.atomic_add(total_ptr, tl.sum(x, axis=0))


def test_math_and_float_atomics(device, rng):
    x = rng.uniform(-50, 50, 512).astype(np.float32)
    y = at.asarray(np.full_like(x, np.nan), device=device)
    total = at.asarray(np.zeros(1, np.float32), device=device)
    _math_and_atomics[(4,)](at.asarray(x, device=device), y, total, BLOCK=128)
    import math
    w = x.astype(np.float64)
    ref = np.sin(w) * np.exp(w * 0.01) + np.array([math.erf(v * 0.1) for v in w])
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total.numpy()[0], w.sum(), rtol=1e-5, atol=1e-3)


def test_device_assert_reports_message_and_line(device):
    x = np.arange(1, 65, dtype=np.int32)
    out = at.empty((64,), np.int32, device=device)
    assert_kernel[(1,)](at.asarray(x, device=device), out, BLOCK=64, debug=True)
    np.testing.assert_array_equal(out.numpy(), x + 1)
    x[7] = -1
    with pytest.raises(at.DeviceAssertError, match="x must be positive"):
        assert_kernel[(1,)](at.asarray(x, device=device), out, BLOCK=64, debug=True)


@at.jit
def shifted_copy_kernel(x_ptr, out_ptr, n, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs + SHIFT, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@at.jit
def unmasked_load_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs % 16, tl.load(x_ptr + offs))


@at.jit
def far_atomic_kernel(h_ptr, FAR: tl.constexpr):
    tl.atomic_add(h_ptr + tl.arange(0, 16) * FAR, 1)


def test_checked_mode_reports_out_of_bounds_accesses_without_making_them(device):
    """debug=True on a GPU lowering: each access is tested against its argument's memory
    (anytile.codegen.bounds_checks); a failing lane's access is not made and the launch
    raises OutOfBoundsError naming the access, the argument and the line."""
    x = at.asarray(np.arange(16, dtype=np.float32), device=device)
    out = at.asarray(np.full(16, -1.0, np.float32), device=device)
    shifted_copy_kernel[(1,)](x, out, 16, SHIFT=0, BLOCK=32, debug=True)   # masked: fine
    np.testing.assert_array_equal(out.numpy(), np.arange(16))
    out = at.asarray(np.full(16, -1.0, np.float32), device=device)
    with pytest.raises(at.OutOfBoundsError, match=r"out-of-bounds store through 'out_ptr'"):
        shifted_copy_kernel[(1,)](x, out, 16, SHIFT=3, BLOCK=16, debug=True)
    # the in-bounds lanes were written, the three past the end were not made
    np.testing.assert_array_equal(out.numpy(), np.r_[[-1.0] * 3, np.arange(13)])
    with pytest.raises(at.OutOfBoundsError, match=r"load through 'x_ptr'.*checked mode") as err:
        unmasked_load_kernel[(1,)](x, out, BLOCK=32, debug=True)
    assert "tl.load(x_ptr + offs)" in str(err.value)
    h = at.asarray(np.zeros(64, np.int32), device=device)
    with pytest.raises(at.OutOfBoundsError, match="atomic add through 'h_ptr'"):
        far_atomic_kernel[(1,)](h, FAR=5, debug=True)
    np.testing.assert_array_equal(h.numpy()[::5][:13], np.ones(13))
    assert h.numpy().sum() == 13
    far_atomic_kernel[(1,)](h, FAR=4)       # without debug: in bounds, runs as compiled
    assert h.numpy().sum() == 29


@at.jit
def ragged_division_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    y = tl.load(y_ptr + offs, mask=m, other=0)      # the masked-off lanes divide by 0
    tl.store(out_ptr + offs, x // y, mask=m)


def test_checked_mode_reports_integer_division_by_zero(device):
    """A divisor of 0 in a lane the kernel loaded is reported (LaunchError naming the line);
    the lanes a masked load left off, whose results are discarded, are not."""
    x, y = np.arange(1, 17, dtype=np.int32), np.full(16, 3, np.int32)
    out = at.asarray(np.zeros(16, np.int32), device=device)
    ragged_division_kernel[(1,)](at.asarray(x, device=device), at.asarray(y, device=device), out,
                                 12, BLOCK=16, debug=True)
    np.testing.assert_array_equal(out.numpy()[:12], x[:12] // 3)
    y[5] = 0
    with pytest.raises(at.LaunchError, match="integer division by zero") as err:
        ragged_division_kernel[(1,)](at.asarray(x, device=device), at.asarray(y, device=device),
                                     out, 12, BLOCK=16, debug=True)
    assert "x // y" in str(err.value)
