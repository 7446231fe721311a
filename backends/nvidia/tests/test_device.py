"""Running on a real NVIDIA GPU: memory, zero-copy imports, launches, errors.  Skipped (with
the driver's reason) where no device is present."""
import sys
from pathlib import Path

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.backend import KernelArg, PointerArg
from anytile.errors import LaunchError
from anytile.ir.types import i32
from anytile_nvidia.backend import NvidiaBackend
from anytile_conformance.catalogue.kernels import vector_add_kernel


_BACKEND = NvidiaBackend()
_AVAIL = _BACKEND.availability()
pytestmark = pytest.mark.skipif(not _AVAIL.usable, reason=f"no NVIDIA GPU: {_AVAIL.reason}")


@pytest.fixture
def cuda():
    return at.device("cuda:0")


def test_device_properties(cuda):
    props = cuda.properties
    assert props["warp_size"] == 32 and props["multiprocessor_count"] > 0
    assert props["max_shared_memory_per_block_optin"] >= props["max_shared_memory_per_block"]
    major, minor = props["compute_capability"]
    assert f"sm_{major}{minor}" in _BACKEND.targets()


def test_copy_round_trip(cuda):
    host = np.random.default_rng(0).standard_normal(1001).astype(np.float32)
    dev = at.asarray(host, device=cuda)
    assert dev.data_ptr() % 256 == 0
    np.testing.assert_array_equal(dev.numpy(), host)


def test_vector_add_runs(cuda):
    rng = np.random.default_rng(1)
    n = 100_003
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = at.asarray(np.full(n, np.nan, np.float32), device=cuda)
    vector_add_kernel[(at.cdiv(n, 1024),)](at.asarray(x, device=cuda), at.asarray(y, device=cuda), out, n,
                                       BLOCK=1024)
    np.testing.assert_array_equal(out.numpy(), x + y)


def test_torch_tensors_are_used_in_place(cuda):
    torch = pytest.importorskip("torch")
    x = torch.randn(5000, device="cuda")
    y = torch.randn(5000, device="cuda")
    out = torch.full((5000,), float("nan"), device="cuda")
    vector_add_kernel[(at.cdiv(5000, 256),)](x, y, out, 5000, BLOCK=256, device=cuda)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


def test_cupy_arrays_are_used_in_place(cuda):
    cp = pytest.importorskip("cupy")
    x = cp.arange(3000, dtype=cp.float32)
    out = cp.full(3000, cp.nan, dtype=cp.float32)
    vector_add_kernel[(at.cdiv(3000, 256),)](x, x, out, 3000, BLOCK=256, device=cuda)
    cp.cuda.runtime.deviceSynchronize()
    assert bool((out == 2 * x).all())


def test_launch_errors_name_the_driver_error(cuda):
    module_args = [KernelArg(i32, 0)]
    backend = cuda.backend
    kernel = at.compile(vector_add_kernel, target=str(backend.target_of(cuda.info)),
                        signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                        constexprs={"BLOCK": 256})
    loaded = backend.load(kernel, cuda.info)
    buf = backend.alloc(cuda.info, 1024)
    ptr = KernelArg(kernel.signature[0][1], PointerArg(buf))
    with pytest.raises(LaunchError, match="CUDA"):
        backend.launch(loaded, (2**31 - 1, 70000, 1), [ptr, ptr, ptr] + module_args, cuda.info)
    backend.free(buf)


@at.jit
def big_shared_kernel(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :])
    flat = tl.reshape(x * 2, (R * C,))  # through 64 KB of shared memory: needs the opt-in
    tl.store(out_ptr + tl.arange(0, R * C), flat)


def test_large_shared_memory_conversion(cuda):
    x = np.random.default_rng(2).standard_normal((128, 128)).astype(np.float32)
    out = at.asarray(np.full(128 * 128, np.nan, np.float32), device=cuda)
    big_shared_kernel[(1,)](at.asarray(x, device=cuda), out, R=128, C=128)
    np.testing.assert_array_equal(out.numpy(), (x * 2).reshape(-1))


def test_device_assert_raises_and_the_context_survives(cuda):
    from anytile_conformance.catalogue.control_flow import assert_kernel
    x = np.arange(1, 129, dtype=np.int32)
    out = at.empty((128,), np.int32, device=cuda)
    assert_kernel[(1,)](at.asarray(x, device=cuda), out, BLOCK=128, debug=True)
    np.testing.assert_array_equal(out.numpy(), x + 1)
    x[100] = 0
    with pytest.raises(at.DeviceAssertError, match="x must be positive"):
        assert_kernel[(1,)](at.asarray(x, device=cuda), out, BLOCK=128, debug=True)
    x[100] = 5   # the error word was cleared and the context is still usable
    assert_kernel[(1,)](at.asarray(x, device=cuda), out, BLOCK=128, debug=True)
    np.testing.assert_array_equal(out.numpy(), x + 1)


@at.jit
def _shifted_store(x_ptr, out_ptr, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs + SHIFT, tl.load(x_ptr + offs))


@at.jit
def _divide(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m, other=0) //
             tl.load(y_ptr + offs, mask=m, other=0), mask=m)


def test_checked_mode_on_the_gpu(cuda):
    """debug=True: an out-of-bounds store is not made and raises OutOfBoundsError naming the
    argument; a division by zero in a loaded lane raises; the context stays usable."""
    x = at.asarray(np.arange(128, dtype=np.float32), device=cuda)
    out = at.asarray(np.full(128, -1.0, np.float32), device=cuda)
    with pytest.raises(at.OutOfBoundsError, match="store through 'out_ptr'"):
        _shifted_store[(1,)](x, out, SHIFT=5, BLOCK=128, debug=True)
    np.testing.assert_array_equal(out.numpy(), np.r_[[-1.0] * 5, np.arange(123)])
    _shifted_store[(1,)](x, out, SHIFT=0, BLOCK=128, debug=True)
    np.testing.assert_array_equal(out.numpy(), np.arange(128))
    a, d = np.arange(1, 129, dtype=np.int32), np.full(128, 7, np.int32)
    q = at.asarray(np.zeros(128, np.int32), device=cuda)
    _divide[(1,)](at.asarray(a, device=cuda), at.asarray(d, device=cuda), q, 100, BLOCK=128,
                  debug=True)
    np.testing.assert_array_equal(q.numpy()[:100], a[:100] // 7)
    d[50] = 0
    with pytest.raises(at.LaunchError, match="integer division by zero"):
        _divide[(1,)](at.asarray(a, device=cuda), at.asarray(d, device=cuda), q, 100,
                      BLOCK=128, debug=True)


@pytest.mark.parametrize("BM,BN,BK,num_warps,K", [(64, 64, 16, 4, 96), (128, 128, 32, 4, 200),
                                                  (128, 256, 64, 8, 256), (64, 128, 32, 4, 40),
                                                  (128, 64, 32, 8, 64)])
@pytest.mark.parametrize("loop", ["k_loop_matmul", "carried_pointer_matmul"])
@pytest.mark.parametrize("wgmma", [False, True])
def test_pipelined_matmul_on_the_gpu(cuda, BM, BN, BK, num_warps, K, loop, wgmma):
    """The cp.async pipeline with mma.sync and, on sm_90 with ``wgmma=True``, the warpgroup
    MMA against NumPy: several warpgroups, masked K tails, both loop shapes."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import test_simulated as ts
    kernel = getattr(ts, loop)
    M, N = 2 * BM, 2 * BN
    rng = np.random.default_rng(K)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = at.empty((M, N), np.float32, device=cuda)
    compiled = kernel[(M // BM, N // BN)](at.asarray(a, device=cuda), at.asarray(b, device=cuda), c,
                                          M, N, K, BM=BM, BN=BN, BK=BK, num_warps=num_warps,
                                          wgmma=wgmma)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.numpy(), ref, rtol=2e-3, atol=2e-3)
    hopper = cuda.properties["compute_capability"] == (9, 0)   # every shape here fits wgmma
    assert bool(compiled.metadata.get("wgmma")) == (wgmma and hopper)


@pytest.mark.parametrize("BM,BN,BK,num_warps,M,N,K,stages,pad", [
    (128, 128, 64, 4, 256, 256, 320, 3, 0), (128, 256, 64, 8, 300, 260, 200, 3, 0),
    (64, 128, 32, 4, 128, 256, 64, 4, 0), (128, 64, 64, 8, 128, 64, 40, 3, 0),
    (64, 64, 64, 4, 64, 64, 512, 5, 0),
    (128, 128, 64, 8, 200, 128, 64, 3, 0),     # ragged M: A's last block in 8-row boxes, some outside
    (128, 128, 64, 4, 256, 192, 128, 3, 16)])  # rows wider than the array (padded strides)
@pytest.mark.parametrize("tma", [False, True])
def test_descriptor_matmul_on_the_gpu(cuda, BM, BN, BK, num_warps, M, N, K, stages, pad, tma):
    """Operands from ``at.TensorDescriptor`` arguments, copied by the tensor memory
    accelerator on sm_90 (``tma=True``: descriptors made on the host, mbarrier ring) or by
    cp.async, against NumPy: partial boxes at every edge, boxes wholly outside the array,
    rows padded past the array's width, several warpgroups and stages."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_tma import desc_matmul
    rng = np.random.default_rng(K + M)
    a_wide = rng.standard_normal((M, K + pad)).astype(np.float16)
    b_wide = rng.standard_normal((K, N + pad)).astype(np.float16)
    a, b = a_wide[:, :K], b_wide[:, :N]
    c = at.empty((M, N), np.float32, device=cuda)
    a_d, b_d = at.asarray(a_wide, device=cuda), at.asarray(b_wide, device=cuda)
    descs = (at.TensorDescriptor(a_d, [M, K], [K + pad, 1], [BM, BK]),
             at.TensorDescriptor(b_d, [K, N], [N + pad, 1], [BK, BN]))
    for _ in range(2):      # the second launch reuses the host's descriptors
        compiled = desc_matmul[(-(-M // BM), -(-N // BN))](*descs, c, M, N, K, BM=BM, BN=BN, BK=BK,
                                                            num_warps=num_warps, num_stages=stages,
                                                            tma=tma)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(c.numpy(), ref, rtol=2e-3, atol=2e-3)
    hopper = cuda.properties["compute_capability"] == (9, 0)
    aligned = (K + pad) % 16 == 0 or (N + pad) % 16 == 0     # rows of A or of B 16-byte aligned
    assert bool(compiled.metadata.get("box_maps")) == (tma and hopper and aligned)


def test_descriptors_made_in_the_kernel_on_the_gpu(cuda):
    """``tl.make_tensor_descriptor`` over pointer arguments: TMA on sm_90 (the host makes
    the descriptors from the arguments), against NumPy with ragged edges."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_tma import made_descriptor_matmul
    M, N, K = 200, 256, 192
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = at.empty((M, N), np.float32, device=cuda)
    compiled = made_descriptor_matmul[(-(-M // 128), N // 128)](
        at.asarray(a, device=cuda), at.asarray(b, device=cuda), c, M, N, K,
        BM=128, BN=128, BK=64, num_warps=8, num_stages=3)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=2e-3, atol=2e-3)
    if cuda.properties["compute_capability"] == (9, 0):
        assert compiled.metadata.get("box_maps")


def test_a_descriptor_of_an_empty_array_reads_zeros_on_the_gpu(cuda):
    """The copy unit takes no map of an empty array: the launcher maps it onto zeros."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_tma import desc_matmul
    a_d = at.asarray(np.ones((64, 64), np.float16), device=cuda)
    b_d = at.asarray(np.ones((64, 64), np.float16), device=cuda)
    c = at.asarray(np.full((64, 64), np.nan, np.float32), device=cuda)
    compiled = desc_matmul[(1, 1)](at.TensorDescriptor(a_d, [64, 0], [64, 1], [64, 64]),
                                   at.TensorDescriptor(b_d, [64, 64], [64, 1], [64, 64]), c,
                                   64, 64, 64, BM=64, BN=64, BK=64, num_warps=4, num_stages=3)
    np.testing.assert_array_equal(c.numpy(), 0.0)
    if cuda.properties["compute_capability"] == (9, 0):
        assert compiled.metadata.get("box_maps")


@pytest.mark.parametrize("case", ["carried", "tutorial-edges", "shifted", "wrapped", "overlapping"])
@pytest.mark.parametrize("tma", [False, True])
def test_pointer_box_matmul_on_the_gpu(cuda, case, tma):
    """Operands read through plain pointers by 128x256 tiles on eight warps, copied by TMA on
    sm_90 where the box the pointers read is exactly the tile (``pointer_boxes.py``) and by
    cp.async elsewhere: at masked and wrapped edges, rows starting before the array's
    pointer, rows closer together than the tile is wide; against NumPy."""
    from test_pointer_boxes import indexed_matmul, tutorial_matmul, wrapped_rows
    from tma_kit import carried_matmul
    rng = np.random.default_rng(len(case))
    dev = lambda x: at.asarray(x, device=cuda)      # noqa: E731
    tiles = dict(BM=128, BN=256, BK=64, num_warps=8, num_stages=3, tma=tma)
    if case in ("carried", "overlapping"):
        M, N, K = (512, 512, 1024) if case == "carried" else (128, 256, 128)
        sam = K if case == "carried" else 16
        flat = rng.standard_normal(sam * M + K).astype(np.float16)
        a = np.lib.stride_tricks.as_strided(flat, (M, K), (2 * sam, 2))
        b = rng.standard_normal((K, N)).astype(np.float16)
        c = at.empty((M, N), np.float32, device=cuda)
        compiled = carried_matmul[(M // 128, N // 256)](dev(flat), dev(b), c, K, sam, N, N, **tiles)
        ref = a.astype(np.float64) @ b.astype(np.float64)
    elif case == "tutorial-edges":
        M, N, K = 300, 528, 336          # rows 16-byte aligned, every edge ragged
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        c = at.empty((M, N), np.float32, device=cuda)
        compiled = tutorial_matmul[(-(-M // 128), -(-N // 256))](dev(a), dev(b), c, M, N, K, K, N, N,
                                                                 **{**tiles, "num_stages": 4})
        ref = a.astype(np.float64) @ b.astype(np.float64)
    elif case == "shifted":
        torch = pytest.importorskip("torch")
        M, N, K = 300, 256, 256
        whole = rng.standard_normal((M + 16, K)).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        c = at.empty((M, N), np.float32, device=cuda)
        rows_from_8 = torch.from_numpy(whole).cuda()[8:]     # A's pointer 8 rows into its buffer
        compiled = indexed_matmul[(-(-M // 128), 1)](rows_from_8, dev(np.ascontiguousarray(b.T)), c, M, N,
                                                     K, K, K, N, -8, **tiles)
        ref = whole[:M].astype(np.float64) @ b.astype(np.float64)
    else:
        M, K = 200, 128
        buffer = rng.standard_normal((256, K)).astype(np.float16)
        b = rng.standard_normal((K, 256)).astype(np.float16)
        c = at.empty((256, 256), np.float32, device=cuda)
        compiled = wrapped_rows[(2,)](dev(buffer), dev(b), c, M, K, **tiles)
        ref = buffer[np.arange(256) % M].astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.numpy(), ref, rtol=2e-3, atol=2e-3)
    hopper = cuda.properties["compute_capability"] == (9, 0)
    assert bool(compiled.metadata.get("box_maps")) == (tma and hopper)


@pytest.mark.parametrize("M,N,K", [(256, 256, 320), (200, 192, 96)])
@pytest.mark.parametrize("tma", [False, True])
def test_block_pointer_matmul_on_the_gpu(cuda, M, N, K, tma):
    """Block pointers over pointer arguments, advanced each step: copied by TMA on sm_90
    through descriptors made from the pointer, size and stride arguments."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_tma import block_pointer_matmul
    rng = np.random.default_rng(M + K)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = at.empty((M, N), np.float32, device=cuda)
    compiled = block_pointer_matmul[(-(-M // 128), -(-N // 128))](
        at.asarray(a, device=cuda), at.asarray(b, device=cuda), c, M, N, K, K, N,
        BM=128, BN=128, BK=64, num_warps=8, num_stages=3, tma=tma)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=2e-3, atol=2e-3)
    hopper = cuda.properties["compute_capability"] == (9, 0)
    assert bool(compiled.metadata.get("box_maps")) == (tma and hopper)


def test_event_timer_do_bench_and_profiler(cuda):
    """do_bench and the profiler time launches with CUDA events on the GPU."""
    from anytile_nvidia.backend import _EventTimer
    assert isinstance(cuda.backend.timer(cuda.info), _EventTimer)
    n = 1 << 22
    x = at.asarray(np.random.default_rng(3).standard_normal(n).astype(np.float32), device=cuda)
    out = at.empty_like(x)
    launch = lambda: vector_add_kernel[(n // 1024,)](x, x, out, n, BLOCK=1024)  # noqa: E731
    ms = at.testing.do_bench(launch, warmup=5, rep=20)
    assert 0 < ms < 100
    with at.profiler.profile() as prof:
        launch()
        launch()
    (row,) = prof.summary()
    assert row["launches"] == 2 and row["device"] == "cuda:0" and 0 < row["mean_ms"] < 100
    np.testing.assert_array_equal(out.numpy(), 2 * x.numpy())


def test_device_print_reaches_stdout(capfd):
    # vprintf's lines come out when the launch has completed
    import numpy as np
    import anytile as at
    import anytile.language as tl

    @at.jit
    def show(x_ptr):
        tl.device_print("v", tl.load(x_ptr + tl.arange(0, 4)))

    dev = at.device("cuda:0")
    show[(1,)](at.asarray(np.arange(4, dtype=np.int32), device=dev), num_warps=1)
    dev.synchronize()
    lines = sorted(capfd.readouterr().out.splitlines())    # once each, though 32 threads
    assert lines == [f"pid (0, 0, 0) idx ({i}) v {i}" for i in range(4)]    # hold copies


@pytest.mark.parametrize("M,N,K,BM,BN,BK,num_warps", [(256, 256, 320, 128, 128, 64, 4),
                                                      (200, 256, 96, 128, 256, 32, 8)])
def test_float8_matmul_on_the_gpu(cuda, M, N, K, BM, BN, BK, num_warps):
    """e4m3 x e5m2 with B read along K: the warpgroup MMA's float8 form on sm_90 (the dot's
    operands narrowed back from f16), against NumPy; the hardware sums float8 products
    with fewer bits than f32 (as Triton's default on sm_90 does), hence the tolerance."""
    import ml_dtypes
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_float8_dots import _matmul8
    rng = np.random.default_rng(M + K)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((K, N)).astype(ml_dtypes.float8_e5m2)
    c = at.empty((M, N), np.float32, device=cuda)
    compiled = _matmul8[(-(-M // BM), N // BN)](
        at.asarray(a, device=cuda), at.asarray(np.ascontiguousarray(b.T), device=cuda), c, M, N, K,
        B_ALONG_K=True, BM=BM, BN=BN, BK=BK, num_warps=num_warps, num_stages=3)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-2, atol=5e-2)
    hopper = cuda.properties["compute_capability"] == (9, 0)
    assert (compiled.metadata.get("float8_dots") == 1) == hopper


@pytest.mark.parametrize("along_k", [True, False])
@pytest.mark.parametrize("M,N,K,BM,BN,BK,num_warps", [(256, 256, 320, 128, 128, 64, 4),
                                                      (384, 256, 96, 128, 256, 32, 8)])
def test_int8_matmul_on_the_gpu(cuda, M, N, K, BM, BN, BK, num_warps, along_k):
    """int8 into int32, exact: B read along K runs on the warpgroup MMA's s8 form on sm_90,
    B read along N on ``mma.sync``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_float8_dots import _matmul8
    rng = np.random.default_rng(M + K)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    c = at.empty((M, N), np.int32, device=cuda)
    compiled = _matmul8[(-(-M // BM), N // BN)](
        at.asarray(a, device=cuda), at.asarray(np.ascontiguousarray(b.T) if along_k else b, device=cuda),
        c, M, N, K, B_ALONG_K=along_k, BM=BM, BN=BN, BK=BK, ACC=tl.int32, num_warps=num_warps,
        num_stages=3)
    np.testing.assert_array_equal(c.numpy(), a.astype(np.int64) @ b.astype(np.int64))
    hopper = cuda.properties["compute_capability"] == (9, 0)
    assert ("wgmma.mma_async" in compiled.asm["ptx"]) == (hopper and along_k)


@pytest.mark.parametrize("tma", [False, True])
def test_float8_descriptor_matmul_on_the_gpu(cuda, tma):
    """float8 descriptors, B given N x K and read with ``.T``: whole boxes of bytes by the
    copy unit (``tma=True``) or cp.async, then the float8 MMA."""
    import ml_dtypes
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_float8_dots import _fp8_desc_matmul
    M, N, K, BM, BN, BK = 200, 256, 320, 128, 128, 128
    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.float8_e4m3fn)
    bt = rng.standard_normal((N, K)).astype(ml_dtypes.float8_e4m3fn)
    c = at.empty((M, N), np.float32, device=cuda)
    descs = (at.TensorDescriptor(at.asarray(a, device=cuda), [M, K], [K, 1], [BM, BK]),
             at.TensorDescriptor(at.asarray(bt, device=cuda), [N, K], [K, 1], [BN, BK]))
    compiled = _fp8_desc_matmul[(-(-M // BM), N // BN)](*descs, c, M, N, K, BM=BM, BN=BN, BK=BK,
                                                        num_warps=8, num_stages=3, tma=tma)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) @ bt.T.astype(np.float64),
                               rtol=1e-2, atol=5e-2)
    hopper = cuda.properties["compute_capability"] == (9, 0)
    assert (compiled.metadata.get("float8_dots") == 1) == hopper
    assert bool(compiled.metadata.get("box_maps")) == (tma and hopper)
