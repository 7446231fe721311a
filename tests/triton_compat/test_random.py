"""Counter-based random numbers: ``tl.philox``, ``tl.randint``/``randint4x``,
``tl.rand``/``rand4x``, ``tl.randn``/``randn4x`` and a seeded dropout kernel, checked bit for
bit (normals: to float32 accuracy) against a NumPy Philox-4xW-10 written here from the
published algorithm (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2,
3", SC 2011).

On top of the bare generator sit the conventions anytile shares with Triton: the counter is
``(offset, 0, 0, 0)``; 32-bit counters take the 64-bit seed as the key ``(low word, high word)``,
64-bit counters take ``(seed, 0)``; a word becomes a float by reading it as a signed integer,
folding negatives with ``~v`` and scaling by about ``2**-(W-1)``; normals use Box-Muller."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl

# Per word width: the two round multipliers and the two Weyl increments of the key schedule
# (the golden ratio and sqrt(3) - 1 as W-bit fractions), as given in the paper.
PHILOX = {
    32: ((0xD2511F53, 0xCD9E8D57), (0x9E3779B9, 0xBB67AE85)),
    64: ((0xD2E7470EE14C6C93, 0xCA5A826395121157), (0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B)),
}
UNIFORM_SCALE = {32: np.float32(4.6566127342e-10), 64: np.float32(1.0842020432385337e-19)}


def philox_block(counter, key, width=32, rounds=10):
    """One Philox-4xW block: four W-bit words out for four counter words and two key words.

    Each round multiplies words 0 and 2 by the round multipliers (full 2W-bit products), and
    the new words are (hi(B*x2) ^ x1 ^ k0, lo(B*x2), hi(A*x0) ^ x3 ^ k1, lo(A*x0)); before
    every round but the first, the key is bumped by the Weyl increments."""
    (mul_a, mul_b), (bump0, bump1) = PHILOX[width]
    word = (1 << width) - 1
    x0, x1, x2, x3 = (int(v) & word for v in counter)
    k0, k1 = (int(v) & word for v in key)
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + bump0) & word, (k1 + bump1) & word
        prod_a, prod_b = mul_a * x0, mul_b * x2
        x0, x1, x2, x3 = ((prod_b >> width) ^ x1 ^ k0, prod_b & word,
                          (prod_a >> width) ^ x3 ^ k1, prod_a & word)
    return x0, x1, x2, x3


def draws(seed, offsets, width=32):
    """``tl.randint4x(seed, offsets)`` as four unsigned arrays (one per output word)."""
    seed = int(seed) % (1 << 64)
    key = (seed & 0xFFFFFFFF, seed >> 32) if width == 32 else (seed, 0)
    blocks = [philox_block((int(o), 0, 0, 0), key, width) for o in np.ravel(offsets)]
    return [np.array(col, dtype=np.uint32 if width == 32 else np.uint64) for col in zip(*blocks)]


def to_uniform(words):
    """Unsigned words to float32 in [0, 1), as the kernels do it (float32 arithmetic)."""
    width = words.dtype.itemsize * 8
    signed = words.view(np.int32 if width == 32 else np.int64)
    folded = np.where(signed < 0, ~signed, signed)
    return folded.astype(np.float32) * UNIFORM_SCALE[width]


def box_muller(u1, u2):
    """The Box-Muller pair of normals in float64 (u1 clamped away from 0)."""
    r = np.sqrt(-2 * np.log(np.maximum(np.float32(1e-7), u1).astype(np.float64)))
    angle = 2 * np.pi * u2.astype(np.float64)
    return r * np.cos(angle), r * np.sin(angle)


# Known answers distributed with Random123 by the paper's authors: counter, key, output.
KNOWN_ANSWERS = {
    32: [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
         ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
         ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
          (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))],
    64: [((0, 0, 0, 0), (0, 0), (0x16554D9ECA36314C, 0xDB20FE9D672D0FDC, 0xD7E772CEE186176B,
                                 0x7E68B68AEC7BA23B)),
         ((2**64 - 1,) * 4, (2**64 - 1,) * 2, (0x87B092C3013FE90B, 0x438C3C67BE8D0224,
                                               0x9CC7D7C69CD777B6, 0xA09CAEBF594F0BA0)),
         ((0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0, 0x082EFA98EC4E6C89),
          (0x452821E638D01377, 0xBE5466CF34E90C6C),
          (0xA528F45403E61D95, 0x38C72DBD566E9788, 0xA5A1610E72FD18B5, 0x57BD43B5E52B7FE6))],
}


@pytest.mark.parametrize("width", [32, 64])
def test_reference_reproduces_published_known_answers(width):
    for counter, key, expected in KNOWN_ANSWERS[width]:
        assert philox_block(counter, key, width) == expected


@at.jit
def philox_per_program(SEEDS, COUNTERS, OUT):
    # one Philox block per program: a full four-word counter, the key given as a 64-bit seed
    i = tl.program_id(0)
    c = COUNTERS + 4 * i
    words = tl.philox(tl.load(SEEDS + i), tl.load(c), tl.load(c + 1), tl.load(c + 2),
                      tl.load(c + 3))
    for j in tl.static_range(4):
        tl.store(OUT + 4 * i + j, words[j])


def test_tl_philox_matches_published_known_answers(device, poison):
    cases = KNOWN_ANSWERS[32]
    seeds = np.array([k0 | k1 << 32 for _, (k0, k1), _ in cases], np.uint64)
    counters = np.array([c for c, _, _ in cases], np.uint32)
    out = at.asarray(poison((len(cases), 4), np.uint32), device=device)
    philox_per_program[(len(cases),)](at.asarray(seeds, device=device),
                                      at.asarray(counters, device=device), out)
    np.testing.assert_array_equal(out.numpy(), np.array([e for _, _, e in cases], np.uint32))


@at.jit
def _store_interleaved(dst, offs, four, live):
    # a tuple of four tiles as one argument; element j of draw i lands at dst[4 * i + j]
    for j in tl.static_range(4):
        tl.store(dst + offs * 4 + j, four[j], mask=live)


@at.jit
def single_draws(seed, INTS, UNIFORM, NORMAL, INTS4, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = offs < n
    tl.store(INTS + offs, tl.randint(seed, offs), mask=live)
    tl.store(UNIFORM + offs, tl.rand(seed, offs), mask=live)
    tl.store(NORMAL + offs, tl.randn(seed, offs), mask=live)
    _store_interleaved(INTS4, offs, tl.randint4x(seed, offs), live)


@pytest.mark.parametrize("seed", [123, 2**31 + 5, -7])
def test_draws_match_the_reference(device, poison, seed):
    n = 300
    outs = [at.asarray(poison(n, dt), device=device) for dt in (np.uint32, np.float32, np.float32)]
    ints4 = at.asarray(poison((n, 4), np.uint32), device=device)
    single_draws[(at.cdiv(n, 128),)](seed, *outs, ints4, n, BLOCK=128)
    words = draws(seed, np.arange(n))
    np.testing.assert_array_equal(outs[0].numpy(), words[0])
    np.testing.assert_array_equal(ints4.numpy(), np.stack(words, 1))
    uniform = outs[1].numpy()
    np.testing.assert_array_equal(uniform, to_uniform(words[0]))
    assert 0 <= uniform.min() and uniform.max() < 1
    normal, _ = box_muller(to_uniform(words[0]), to_uniform(words[1]))
    np.testing.assert_allclose(outs[2].numpy(), normal, rtol=1e-4, atol=1e-4)


@at.jit
def four_wide_draws(seed, UNIFORM4, NORMAL4, N: tl.constexpr):
    offs = tl.arange(0, N) + 1000
    everywhere = offs >= 0
    _store_interleaved(UNIFORM4, offs - 1000, tl.rand4x(seed, offs), everywhere)
    _store_interleaved(NORMAL4, offs - 1000, tl.randn4x(seed, offs), everywhere)


def test_rand4x_and_randn4x_match_the_reference(device, poison):
    n, seed = 64, 31337
    uniform4 = at.asarray(poison((n, 4), np.float32), device=device)
    normal4 = at.asarray(poison((n, 4), np.float32), device=device)
    four_wide_draws[(1,)](seed, uniform4, normal4, N=n)
    uniforms = [to_uniform(w) for w in draws(seed, 1000 + np.arange(n))]
    np.testing.assert_array_equal(uniform4.numpy(), np.stack(uniforms, 1))
    normals = box_muller(uniforms[0], uniforms[1]) + box_muller(uniforms[2], uniforms[3])
    np.testing.assert_allclose(normal4.numpy(), np.stack(normals, 1), rtol=1e-4, atol=1e-4)


@at.jit
def wide_offset_draws(seed, WORDS, UNIFORM, base, N: tl.constexpr):
    lane = tl.arange(0, N)
    offs = lane.to(tl.int64) + base
    w0, w1, w2, w3 = tl.randint4x(seed, offs)
    tl.store(WORDS + lane * 4, w0)
    tl.store(WORDS + lane * 4 + 1, w1)
    tl.store(WORDS + lane * 4 + 2, w2)
    tl.store(WORDS + lane * 4 + 3, w3)
    tl.store(UNIFORM + lane, tl.rand(seed, offs))


def test_64_bit_offsets_use_philox_4x64(device, poison):
    seed, base, n = 987654321, 2**40 + 3, 16
    words = at.asarray(poison((n, 4), np.uint64), device=device)
    uniform = at.asarray(poison(n, np.float32), device=device)
    wide_offset_draws[(1,)](seed, words, uniform, base, N=n)
    ref = draws(seed, base + np.arange(n), width=64)
    np.testing.assert_array_equal(words.numpy(), np.stack(ref, 1))
    np.testing.assert_array_equal(uniform.numpy(), to_uniform(ref[0]))


@at.jit
def dropout_seeded(src, dst, n, drop_rate, seed, BLOCK: tl.constexpr):
    idx = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    inside = idx < n
    v = tl.load(src + idx, mask=inside)
    survives = tl.rand(seed, idx) > drop_rate
    tl.store(dst + idx, tl.where(survives, v / (1 - drop_rate), 0.0), mask=inside)


def test_seeded_dropout_is_reproducible(device, rng, poison):
    n, rate = 2000, 0.5
    x = rng.standard_normal(n, dtype=np.float32)
    xa = at.asarray(x, device=device)
    grid = lambda meta: (at.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    results = {}
    for key, seed in (("a", 77), ("again", 77), ("other", 4242)):
        out = at.asarray(poison(n, np.float32), device=device)
        dropout_seeded[grid](xa, out, n, rate, seed, BLOCK=512)
        results[key] = out.numpy()
    keep = to_uniform(draws(77, np.arange(n))[0]) > np.float32(rate)
    assert 0.4 < keep.mean() < 0.6
    np.testing.assert_allclose(results["a"], np.where(keep, x.astype(np.float64) / (1 - rate), 0),
                               rtol=1e-6)
    np.testing.assert_array_equal(results["a"], results["again"])
    assert not np.array_equal(results["a"], results["other"])
