"""Language features Triton programs use that anytile once lacked, on every usable device."""
import re

import pytest
import numpy as np

import anytile as at
import anytile.language as tl
from anytile.language.extra import libdevice


@at.jit
def cat_halves(x_ptr, out_ptr, N: tl.constexpr):
    a = tl.load(x_ptr + tl.arange(0, N))
    b = tl.load(x_ptr + N + tl.arange(0, N))
    tl.store(out_ptr + tl.arange(0, 2 * N), tl.cat(b, a, can_reorder=True))


@at.jit
def cat_rows(x_ptr, out_ptr):
    r, c = tl.arange(0, 4), tl.arange(0, 8)
    tile = tl.load(x_ptr + r[:, None] * 8 + c[None, :])
    both = tl.cat(tile, tile * 10)
    r2 = tl.arange(0, 8)
    tl.store(out_ptr + r2[:, None] * 8 + c[None, :], both)


def test_cat(device, rng, poison):
    x = rng.standard_normal(32).astype(np.float32)
    out = at.asarray(poison(32, np.float32), device=device)
    cat_halves[(1,)](at.asarray(x, device=device), out, N=16)
    np.testing.assert_array_equal(out.numpy(), np.concatenate([x[16:], x[:16]]))
    t = rng.standard_normal((4, 8)).astype(np.float32)
    out2 = at.asarray(poison((8, 8), np.float32), device=device)
    cat_rows[(1,)](at.asarray(t, device=device), out2)
    np.testing.assert_array_equal(out2.numpy(), np.concatenate([t, t * 10]))


@at.jit
def scalar_of_one_element(x_ptr, out_ptr):
    one = tl.load(x_ptr + 3 + tl.arange(0, 1))
    tl.static_assert(len(one.item().shape) == 0)
    tl.store(out_ptr + tl.arange(0, 4), tl.full((4,), one.item(), tl.float32) * 2)


def test_item(device, rng, poison):
    x = rng.standard_normal(8).astype(np.float32)
    out = at.asarray(poison(4, np.float32), device=device)
    scalar_of_one_element[(1,)](at.asarray(x, device=device), out)
    np.testing.assert_array_equal(out.numpy(), np.full(4, 2 * x[3], np.float32))


@at.jit
def python_accumulator(x_ptr, out_ptr, n, PTR_TYPE: tl.constexpr):
    tl.static_assert(x_ptr.dtype == PTR_TYPE)
    acc = 0
    for i in range(n):
        acc += tl.load(x_ptr + i)
    tl.store(out_ptr, acc.to(tl.int64))


def test_python_int_accumulator_and_pointer_alias(device, rng, poison):
    x = rng.integers(-1000, 1000, 10).astype(np.int32)
    out = at.asarray(poison(1, np.int64), device=device)
    python_accumulator[(1,)](at.asarray(x, device=device), out, 10, PTR_TYPE=tl.pi32_t)
    assert out.numpy()[0] == x.astype(np.int64).sum()


@at.jit
def split_precision_dot(a_ptr, b_ptr, out_ptr, PRECISION: tl.constexpr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
    tl.store(out_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b, input_precision=PRECISION))


def test_bf16x3_and_bf16x6_dots(device, rng, poison):
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal((16, 16)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    for precision, tol in (("bf16x3", 2.0 ** -14 * 16), ("bf16x6", 2.0 ** -20 * 16)):
        out = at.asarray(poison((16, 16), np.float32), device=device)
        split_precision_dot[(1,)](at.asarray(a, device=device), at.asarray(b, device=device), out,
                                  PRECISION=precision)
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        assert (np.abs(out.numpy() - exact) <= tol * scale + 1e-6).all(), precision


@at.jit
def through_addresses(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    address = (x_ptr + offs).to(tl.int64)               # each element's address
    same = address.to(tl.pointer_type(tl.float32))      # and back (Triton's int_to_ptr)
    step = (x_ptr + 1).to(tl.uint64) - x_ptr.to(tl.uint64)   # bytes of one element
    tl.store(out_ptr + offs, tl.load(same) + step.to(tl.float32))


def test_pointers_to_int64_addresses_and_back(device, rng, poison):
    x = rng.standard_normal(16).astype(np.float32)
    out = at.asarray(poison(16, np.float32), device=device)
    through_addresses[(1,)](at.asarray(x, device=device), out, N=16)
    np.testing.assert_array_equal(out.numpy(), x + 4)


@at.jit
def gather_by_address(table_ptr, out_ptr, N: tl.constexpr):
    g = tl.program_id(0)
    source = tl.load(table_ptr + g).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, N)
    tl.store(out_ptr + g * N + offs, tl.load(source + offs))


def test_addresses_from_the_host_as_pointers(device, rng, poison):
    """Grouped GEMM's idiom: a table of the host-side addresses of several arrays."""
    parts = [at.asarray(rng.standard_normal(8).astype(np.float32), device=device)
             for _ in range(3)]
    if parts[0].data_ptr() is None:
        import pytest
        pytest.skip(f"{device} has no flat addresses the host can read (OpenCL 1.2 buffers)")
    table = at.asarray(np.array([p.data_ptr() for p in parts[::-1]], np.int64), device=device)
    out = at.asarray(poison(24, np.float32), device=device)
    gather_by_address[(3,)](table, out, N=8)
    np.testing.assert_array_equal(out.numpy(), np.concatenate([p.numpy() for p in parts[::-1]]))


def test_casts_between_pointers_and_numbers_name_the_rule(tmp_path):
    import pytest

    @at.jit
    def bad(x_ptr, WHICH: tl.constexpr):
        if WHICH == 0:
            tl.store(x_ptr, tl.load(x_ptr).to(tl.int32).to(tl.pointer_type(tl.float32)))
        else:
            tl.store(x_ptr, x_ptr.to(tl.float32))

    x = np.zeros(2, np.float32)
    with pytest.raises(at.CompilationError, match="only 64-bit integers"):
        bad[(1,)](x, WHICH=0, device="interpreter")
    with pytest.raises(at.CompilationError, match="a pointer becomes an integer"):
        bad[(1,)](x, WHICH=1, device="interpreter")


@at.jit
def transpose_by_descriptors(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    xd = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    yd = tl.make_tensor_descriptor(y_ptr, [N, M], [M, 1], [BN, BM])
    pm, pn = tl.program_id(0), tl.program_id(1)
    block = xd.load([pm * BM, pn * BN])
    for _ in range(2):                                  # carried through a loop
        yd = yd
    tl.store_tensor_descriptor(yd, [pn * BN, pm * BM], block.T)


@at.jit
def block_over_the_edge(x_ptr, out_ptr, M, N, B: tl.constexpr, PAD: tl.constexpr):
    xd = tl.make_tensor_descriptor(x_ptr, [M, N], [N, 1], [B, B], padding_option=PAD)
    r = tl.arange(0, B)
    tl.store(out_ptr + r[:, None] * B + r[None, :], tl.load_tensor_descriptor(xd, [2, 3]))


def test_tensor_descriptors_load_pad_and_store_inside_the_array(device, rng, poison):
    x = rng.standard_normal((37, 21)).astype(np.float32)
    y = at.asarray(poison((21, 37), np.float32), device=device)
    transpose_by_descriptors[(3, 2)](at.asarray(x, device=device), y, 37, 21, BM=16, BN=16)
    np.testing.assert_array_equal(y.numpy(), x.T)      # nothing written outside the array
    small = rng.standard_normal((6, 5)).astype(np.float32)
    for pad, fill in (("zero", 0.0), ("nan", np.nan)):
        out = at.asarray(poison((8, 8), np.float32), device=device)
        block_over_the_edge[(1,)](at.asarray(small, device=device), out, 6, 5, B=8, PAD=pad)
        want = np.full((8, 8), fill, np.float32)
        want[:4, :2] = small[2:, 3:]
        np.testing.assert_array_equal(out.numpy(), want)


def test_tensor_descriptor_misuse_is_a_clear_error():
    import pytest

    @at.jit
    def bad(x_ptr, WHICH: tl.constexpr):
        if WHICH == 0:
            d = tl.make_tensor_descriptor(x_ptr, [4, 4], [4, 1], [4, 4], padding_option="ones")
        elif WHICH == 1:
            d = tl.make_tensor_descriptor(x_ptr, [4, 4], [1, 4], [4, 4])
        elif WHICH == 3:    # rows of 2 floats: 8 bytes, and Triton asks for 16
            d = tl.make_tensor_descriptor(x_ptr, [4, 4], [4, 1], [4, 2])
        else:
            d = tl.make_tensor_descriptor(x_ptr, [4, 4], [4, 1], [4, 4])
            tl.store(x_ptr, tl.sum(d.load([0]), 0)[0])

    x = np.zeros(16, np.float32)
    for which, message in ((0, "padding_option must be 'zero' or 'nan'"),
                           (1, "the last stride must be 1"),
                           (2, "1 offsets for a descriptor of rank 2"),
                           (3, "at least 16 bytes in the last dimension, got 2 elements of 4")):
        with pytest.raises(at.CompilationError, match=message):
            bad[(1,)](x, WHICH=which, device="interpreter")


@at.jit
def scale_transposed(xd, yd, factor, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    block = xd.load([pm * BM, pn * BN])
    yd.store([pn * BN, pm * BM], (block * factor).T)


def test_tensor_descriptors_passed_from_the_host(device, rng, poison):
    x = rng.standard_normal((37, 21)).astype(np.float32)
    xa = at.asarray(x, device=device)
    y = at.asarray(poison((21, 37), np.float32), device=device)
    xd = at.TensorDescriptor(xa, [37, 21], [21, 1], [16, 16])
    yd = at.TensorDescriptor.from_tensor(y, [16, 16])
    for factor in (2.0, 3.0):           # the second launch reuses the compiled kernel
        scale_transposed[(3, 2)](xd, yd, factor, BM=16, BN=16)
        np.testing.assert_array_equal(y.numpy(), factor * x.T)
    host = poison((21, 37), np.float32)  # a NumPy base: copied to the device and back
    scale_transposed[(3, 2)](xd, at.TensorDescriptor.from_tensor(host, [16, 16]), 1.0,
                             BM=16, BN=16)
    np.testing.assert_array_equal(host, x.T)
    # a view of part of an array: its own shape and strides
    part = at.TensorDescriptor(at.asarray(np.ascontiguousarray(x[:, :16]), device=device),
                               [37, 16], [16, 1], [16, 16])
    out = at.asarray(poison((16, 37), np.float32), device=device)
    scale_transposed[(3, 1)](part, at.TensorDescriptor.from_tensor(out, [16, 16]), 1.0,
                             BM=16, BN=16)
    np.testing.assert_array_equal(out.numpy(), x[:, :16].T)


def test_host_tensor_descriptor_errors_name_the_problem():
    import pytest
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(at.LaunchValueError, match="the last stride must be 1"):
        at.TensorDescriptor(x, [4, 4], [1, 4], [4, 4])
    with pytest.raises(at.LaunchArgumentError, match="one entry per dimension"):
        at.TensorDescriptor(x, [4, 4], [4, 1], [4])
    with pytest.raises(at.LaunchValueError, match="powers of 2"):
        at.TensorDescriptor(x, [4, 4], [4, 1], [3, 4])
    with pytest.raises(at.LaunchValueError, match="padding must be 'zero' or 'nan'"):
        at.TensorDescriptor(x, [4, 4], [4, 1], [4, 4], padding="ones")
    with pytest.raises(at.LaunchArgumentError, match="argument 'xd.base' is a str"):
        scale_transposed[(1, 1)](at.TensorDescriptor("abc", [4, 4], [4, 1], [4, 4]),
                                 at.TensorDescriptor(x, [4, 4], [4, 1], [4, 4]), 1.0,
                                 BM=4, BN=4, device="interpreter")


@at.jit
def printing(x_ptr, n, flag):
    offs = tl.arange(0, 4)
    x = tl.load(x_ptr + offs)
    tl.device_print("x", x)
    tl.device_print("n", n, offs.to(tl.int8) - 2, hex=True)
    tl.device_print("", flag)
    tl.device_print("as f16", x.to(tl.float16))
    tl.device_print("bits", x.to(tl.bfloat16), hex=True)
    tl.device_print("u", (offs - 1).to(tl.uint32))


def test_device_print_writes_one_line_per_element(device, capfd):
    if "device_print" not in device.backend.capabilities:
        import pytest
        with pytest.raises(at.CompilationError, match="tl.device_print is not supported"):
            printing[(2,)](at.asarray(np.zeros(4, np.float32), device=device), 255, True)
        return
    x = np.array([1.5, -2, 1e-20, np.nan], np.float32)
    printing[(2,)](at.asarray(x, device=device), 255, True)
    device.synchronize()            # a device may print when the kernel has finished
    lines = capfd.readouterr().out.splitlines()
    per_program = [f"pid (0, 0, 0) idx ({i}) x {v}" for i, v in
                   enumerate(["1.5", "-2", "9.99999968e-21", "nan"])]
    per_program += ["pid (0, 0, 0) n (operand 0) 0xff"]
    per_program += [f"pid (0, 0, 0) idx ({i}) n (operand 1) 0x{(i - 2) & 0xff:x}" for i in range(4)]
    per_program += ["pid (0, 0, 0) 1"]
    per_program += [f"pid (0, 0, 0) idx ({i}) as f16 {v}" for i, v in
                    enumerate(["1.5", "-2", "0", "nan"])]
    per_program += [f"pid (0, 0, 0) idx ({i}) bits 0x{v:x}" for i, v in
                    enumerate([0x3fc0, 0xc000, 0x1e3d, 0x7fc0])]
    per_program += [f"pid (0, 0, 0) idx ({i}) u {(i - 1) % 2**32}" for i in range(4)]
    expected = per_program + [line.replace("pid (0,", "pid (1,") for line in per_program]
    assert sorted(lines) == sorted(expected)      # elements held in copies print once
    if device.backend.name in ("interpreter", "cpu"):     # one thread per program: in order
        assert [ln for ln in lines if ln.startswith("pid (0,")] == per_program


@at.jit
def batched_dot(q_ptr, k_ptr, c_ptr, o_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                K: tl.constexpr):
    b, m, n, kk = tl.arange(0, B), tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    q = tl.load(q_ptr + b[:, None, None] * M * K + m[None, :, None] * K + kk[None, None, :])
    w = tl.load(k_ptr + b[:, None, None] * K * N + kk[None, :, None] * N + n[None, None, :])
    out = b[:, None, None] * M * N + m[None, :, None] * N + n[None, None, :]
    tl.store(o_ptr + out, tl.dot(q, w, tl.load(c_ptr + out), input_precision="ieee"))


def test_batched_3d_dot(device, rng, poison):
    for dtype, acc in ((np.float32, np.float32), (np.int8, np.int32)):
        q = (rng.standard_normal((4, 16, 32)) * 3).astype(dtype)
        w = (rng.standard_normal((4, 32, 16)) * 3).astype(dtype)
        c = (rng.standard_normal((4, 16, 16)) * 3).astype(acc)
        out = at.asarray(poison((4, 16, 16), acc), device=device)
        batched_dot[(1,)](at.asarray(q, device=device), at.asarray(w, device=device),
                          at.asarray(c, device=device), out, B=4, M=16, N=16, K=32)
        exact = np.matmul(q.astype(np.float64), w.astype(np.float64)) + c
        np.testing.assert_allclose(out.numpy(), exact, rtol=1e-5, atol=1e-4)


@at.jit
def pdl_increment(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    tl.extra.cuda.gdc_wait()
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    value = tl.load(x_ptr + offs, mask=mask)
    tl.extra.cuda.gdc_launch_dependents()
    tl.store(y_ptr + offs, value + 1, mask=mask)


def test_programmatic_dependent_launch_calls_and_extern_libs(device, poison):
    """Tutorial 11's PDL calls compile to nothing (launches are already ordered) and
    tutorial 07's ``extern_libs`` launch option is checked and not used."""
    x = np.arange(20, dtype=np.float32)
    y = at.asarray(poison(20, np.float32), device=device)
    for _ in range(2):
        pdl_increment[(1,)](at.asarray(x, device=device), y, 20, BLOCK=32, launch_pdl=True,
                            extern_libs={"libdevice": "/path/to/libdevice.10.bc"})
    np.testing.assert_array_equal(y.numpy(), x + 1)
    with pytest.raises(at.LaunchArgumentError, match="extern_libs must be a dict"):
        pdl_increment[(1,)](x, y, 20, BLOCK=32, extern_libs=["libdevice"])


@at.jit
def bf16_atomics(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.atomic_add(out_ptr + offs % 4, x)
    tl.atomic_max(out_ptr + 4 + offs % 4, x, sem="relaxed")
    tl.atomic_min(out_ptr + 8 + offs % 4, x, scope="cta")


def test_bf16_atomics(device):
    """Sums of halves are exact in bf16, so many programs adding into four cells give one
    answer whatever the order."""
    import ml_dtypes
    x = ((np.arange(256) % 7 - 3) * 0.5).astype(ml_dtypes.bfloat16)
    out = at.asarray(np.zeros(12, ml_dtypes.bfloat16), device=device)
    bf16_atomics[(8,)](at.asarray(x, device=device), out, BLOCK=256)
    xs = x.astype(np.float32)
    want = [8 * xs[r::4].sum() for r in range(4)] + [max(0, xs[r::4].max()) for r in range(4)] + \
        [min(0, xs[r::4].min()) for r in range(4)]
    np.testing.assert_array_equal(out.numpy().astype(np.float32), want)


def test_descriptor_argument_loads_say_their_box_and_specialise_sizes_and_strides():
    """A block read through a descriptor argument says which box of which array it is
    (``LoadOp.box`` and ``array``, for devices that copy boxes by descriptor; every other
    device ignores them), the IR text keeps them, and the specialisation marks the sizes and strides that are multiples of 16 (so
    bounds masks hold in aligned runs and rows start aligned)."""
    from anytile.ir.parser import parse_module
    from anytile.ir.printer import print_module
    x = np.arange(48 * 32, dtype=np.float32).reshape(48, 32)
    y = np.zeros((32, 48), np.float32)
    compiled = scale_transposed.warmup(at.TensorDescriptor(x, [48, 32], [32, 1], [16, 16]),
                                       at.TensorDescriptor(y, [32, 48], [48, 1], [16, 16]), 1.0,
                                       BM=16, BN=16, grid=(3, 2), device="interpreter")
    text = compiled.asm["ir"]
    # the box's coordinates, then the array: the descriptor's base, sizes and strides
    assert re.search(r"load \(.*\[%\w+, %\w+\], \[%xd_at_base, %xd_at_shape0, %xd_at_shape1, "
                     r"%xd_at_stride0, %\w+\]\)", text)
    assert print_module(parse_module(text)) == text
    header = text.splitlines()[0]
    for leaf in ("xd_at_shape0", "xd_at_shape1", "xd_at_stride0", "yd_at_stride0"):
        assert re.search(rf"%{leaf}: i64 {{divisibility = 16}}", header), leaf
    odd = np.zeros((37, 21), np.float32)
    text = scale_transposed.warmup(at.TensorDescriptor(odd, [37, 21], [21, 1], [16, 16]),
                                   at.TensorDescriptor(y, [32, 48], [48, 1], [16, 16]), 1.0,
                                   BM=16, BN=16, grid=(3, 2), device="interpreter").asm["ir"]
    assert re.search(r"%xd_at_stride0: i64[,)]", text.splitlines()[0])


@at.jit
def add_transposed(a_ptr, b_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    r, c = tl.arange(0, R), tl.arange(0, C)
    a = tl.load(a_ptr + r[:, None] * C + c[None, :])          # rows contiguous
    bt = tl.load(b_ptr + c[None, :] * R + r[:, None])         # columns contiguous: B transposed
    tl.store(out_ptr + r[:, None] * C + c[None, :], a + bt)


def test_a_tile_exchanged_in_rounds_when_shared_memory_cannot_hold_it(device, rng, poison):
    """``a + b.T`` puts one operand in the other's layout through shared memory: 128x256
    doubles (264 KiB with padding) are more than a GPU program has (sm_90: 227 KiB), so the
    GPU lowerings exchange the tile in slices of rows, one round each; the result is the same."""
    a = rng.standard_normal((128, 256))
    b = rng.standard_normal((256, 128))
    out = at.asarray(poison((128, 256), np.float64), device=device)
    add_transposed[(1,)](at.asarray(a, device=device), at.asarray(b, device=device), out,
                         R=128, C=256)
    np.testing.assert_array_equal(out.numpy(), a + b.T)


@at.jit
def tanh_and_its_gradient(x_ptr, t_ptr, g_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    t = libdevice.tanh(tl.load(x_ptr + offs))
    tl.store(t_ptr + offs, t)
    tl.store(g_ptr + offs, 1 - t * t)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_is_exactly_one_where_it_rounds_to_one(device, dtype, poison):
    """Where tanh rounds to +-1 (|x| above 9.02 in f32), it is +-1, and GELU's ``1 - t*t``
    is 0: a tanh one ulp short of 1 there (allowed by OpenCL's few-ulp bound) gave
    Liger-Kernel's GEGLU gradient errors of 0.01 at x = -67."""
    beyond = 9.5 if dtype == np.float32 else 19.5     # f64 rounds to 1 from 19.1 on
    x = np.array([-10769.0, -67.0, -beyond, beyond, 20.0, 1e30, -1e30, 30.0], dtype)
    t = at.asarray(poison(8, dtype), device=device)
    g = at.asarray(poison(8, dtype), device=device)
    tanh_and_its_gradient[(1,)](at.asarray(x, device=device), t, g, N=8)
    np.testing.assert_array_equal(t.numpy(), np.sign(x))
    np.testing.assert_array_equal(g.numpy(), np.zeros(8, dtype))
