"""Checked mode (``debug=True``) on every usable device, on tiles whose layout the store does
not choose (an interleave, a permute, a gather's product): in-bounds stores pass and write
what the unchecked kernel writes; one element past the end is reported."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.errors import OutOfBoundsError


@at.jit(debug=True)
def interleave_store(z_ptr, N: tl.constexpr, EXTRA: tl.constexpr):
    z = tl.interleave(tl.arange(0, N), tl.arange(N, 2 * N))
    tl.store(z_ptr + EXTRA + tl.arange(0, 2 * N), z)


@at.jit(debug=True)
def permuted_store(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    r, c = tl.arange(0, R), tl.arange(0, C)
    tile = tl.load(x_ptr + r[:, None] * C + c[None, :])
    tl.store(out_ptr + c[:, None] * R + r[None, :], tl.permute(tile, (1, 0)))


@at.jit(debug=True)
def scaled_by_channel(x_ptr, w_ptr, out_ptr, PER: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    y = tl.load(x_ptr + offs) * tl.load(w_ptr + offs // PER)
    tl.store(out_ptr + offs, y)


def test_an_interleaved_tile_is_stored_in_bounds(device, poison):
    z = at.asarray(poison(256, np.int32), device=device)
    interleave_store[(1,)](z, N=128, EXTRA=0)
    np.testing.assert_array_equal(z.numpy(), np.stack([np.arange(128), np.arange(128, 256)],
                                                      -1).reshape(256))
    with pytest.raises(OutOfBoundsError):
        interleave_store[(1,)](z, N=128, EXTRA=1)


def test_a_permuted_tile_is_stored_in_bounds(device, rng, poison):
    x = rng.standard_normal((16, 64)).astype(np.float32)
    out = at.asarray(poison((64, 16), np.float32), device=device)
    permuted_store[(1,)](at.asarray(x, device=device), out, R=16, C=64)
    np.testing.assert_array_equal(out.numpy(), x.T)


def test_a_gathered_product_is_stored_in_bounds(device, rng, poison):
    x = rng.standard_normal(1024).astype(np.float32)
    w = rng.standard_normal(8).astype(np.float32)
    out = at.asarray(poison(1024, np.float32), device=device)
    scaled_by_channel[(1,)](at.asarray(x, device=device), at.asarray(w, device=device), out,
                            PER=128, N=1024)
    np.testing.assert_array_equal(out.numpy(), x * np.repeat(w, 128))
