"""``tl.randint``/``tl.rand``/``tl.randn`` against a NumPy Philox 4x32-10, and Triton's
python/tutorials/04-low-memory-dropout.py seeded dropout (MIT licence), body unchanged."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl

U32 = np.uint32


def philox_4x32(seed, offsets, n_rounds=10):
    """Reference Philox 4x32 on the counter (offset, 0, 0, 0) with key (seed_lo, seed_hi)."""
    mask = (1 << 32) - 1
    c = [np.asarray(offsets).astype(np.int64).astype(np.uint64) & mask] + \
        [np.zeros(len(offsets), np.uint64) for _ in range(3)]
    seed = int(seed) & ((1 << 64) - 1)
    k0, k1 = np.uint64(seed & mask), np.uint64(seed >> 32)
    a, b = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    m = np.uint64(mask)
    for _ in range(n_rounds):
        p0, p2 = a * c[0], b * c[2]  # exact: both factors < 2^32
        c = [((p2 >> np.uint64(32)) ^ c[1] ^ k0) & m, p2 & m,
             ((p0 >> np.uint64(32)) ^ c[3] ^ k1) & m, p0 & m]
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & m, (k1 + np.uint64(0xBB67AE85)) & m
    return [x.astype(U32) for x in c]


def uniform(x):
    """Triton's uint_to_uniform_float for uint32 in float32 arithmetic."""
    i = x.view(np.int32).astype(np.int64)
    i = np.where(i < 0, -i - 1, i).astype(np.float32)
    return i * np.float32(4.6566127342e-10)


def test_reference_matches_a_published_triton_draw():
    # tl.randint4x(42, 0) on Triton, as published with its walkthrough of random.py
    assert [int(v[0]) for v in philox_4x32(42, [0])] == \
        [2632642643, 2012563771, 314527917, 1463989207]


@at.jit
def draw(seed, OUT_I, OUT_U, OUT_N, OUT4, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    tl.store(OUT_I + offs, tl.randint(seed, offs), mask=m)
    tl.store(OUT_U + offs, tl.rand(seed, offs), mask=m)
    tl.store(OUT_N + offs, tl.randn(seed, offs), mask=m)
    r0, r1, r2, r3 = tl.randint4x(seed, offs)
    tl.store(OUT4 + offs * 4 + 0, r0, mask=m)
    tl.store(OUT4 + offs * 4 + 1, r1, mask=m)
    tl.store(OUT4 + offs * 4 + 2, r2, mask=m)
    tl.store(OUT4 + offs * 4 + 3, r3, mask=m)


@pytest.mark.parametrize("seed", [123, 2**31 + 5, -7])
def test_randint_rand_randn_match_philox(device, poison, seed):
    n = 300
    outs = [at.asarray(poison(n, dt), device=device) for dt in (U32, np.float32, np.float32)]
    out4 = at.asarray(poison(4 * n, U32), device=device)
    draw[(at.cdiv(n, 128),)](seed, *outs, out4, n, BLOCK=128)
    ref = philox_4x32(seed, np.arange(n))
    np.testing.assert_array_equal(outs[0].numpy(), ref[0])
    np.testing.assert_array_equal(out4.numpy().reshape(n, 4), np.stack(ref, 1))
    u = outs[1].numpy()
    np.testing.assert_array_equal(u, uniform(ref[0]))
    assert 0 <= u.min() and u.max() < 1
    u1, u2 = (np.maximum(1e-7, uniform(r).astype(np.float64)) for r in ref[:2])
    normal = np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * uniform(ref[1]).astype(np.float64))
    np.testing.assert_allclose(outs[2].numpy(), normal, rtol=1e-4, atol=1e-4)


# -- python/tutorials/04-low-memory-dropout.py ------------------------------------------------
@at.jit
def _seeded_dropout(
    x_ptr,
    output_ptr,
    n_elements,
    p,
    seed,
    BLOCK_SIZE: tl.constexpr,
):
    # compute memory offsets of elements handled by this instance
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    # load data from x
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    # randomly prune it
    random = tl.rand(seed, offsets)
    x_keep = random > p
    # write-back
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def test_04_seeded_dropout(device, rng, poison):
    n, p, seed = 2000, 0.5, 123
    x = rng.standard_normal(n, dtype=np.float32)
    outs = []
    for s in (seed, seed, 512):
        out = at.asarray(poison(n, np.float32), device=device)
        grid = lambda meta: (at.cdiv(n, meta['BLOCK_SIZE']), )  # noqa: E731
        _seeded_dropout[grid](at.asarray(x, device=device), out, n, p, s, BLOCK_SIZE=1024)
        outs.append(out.numpy())
    keep = uniform(philox_4x32(seed, np.arange(n))[0]) > np.float32(p)
    np.testing.assert_allclose(outs[0], np.where(keep, x / (1 - p), 0.0), rtol=1e-6)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], outs[2])
    assert 0.4 < keep.mean() < 0.6


@at.jit
def draw64(seed, OUT, N: tl.constexpr):
    offs = tl.arange(0, N).to(tl.int64) + 2**40
    a, b, c, d = tl.randint4x(seed, offs)
    tl.store(OUT + tl.arange(0, N) * 4 + 0, a)
    tl.store(OUT + tl.arange(0, N) * 4 + 1, b)
    tl.store(OUT + tl.arange(0, N) * 4 + 2, c)
    tl.store(OUT + tl.arange(0, N) * 4 + 3, d)


def philox_4x64(seed, offset, n_rounds=10):
    """Reference Philox 4x64 with Python integers (Triton's 64-bit constants)."""
    m = (1 << 64) - 1
    c0, c1, c2, c3 = offset & m, 0, 0, 0
    k0, k1 = seed & m, 0
    a, b = 0xD2E7470EE14C6C93, 0xCA5A826395121157
    for _ in range(n_rounds):
        pa, pb = a * c0, b * c2
        c0, c1, c2, c3 = (pb >> 64) ^ c1 ^ k0, pb & m, (pa >> 64) ^ c3 ^ k1, pa & m
        k0, k1 = (k0 + 0x9E3779B97F4A7C15) & m, (k1 + 0xBB67AE8584CAA73B) & m
    return [c0, c1, c2, c3]


def test_randint4x_with_64_bit_offsets(device, poison):
    out = at.asarray(poison(64, np.uint64), device=device)
    draw64[(1,)](987654321, out, N=16)
    ref = [philox_4x64(987654321, 2**40 + i) for i in range(16)]
    np.testing.assert_array_equal(out.numpy().reshape(16, 4), np.array(ref, dtype=np.uint64))
