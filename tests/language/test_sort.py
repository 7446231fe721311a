"""``tl.sort`` and ``tl.topk`` order NaN as NumPy does: after every number in ascending order,
first in descending order (so ``tl.topk`` counts NaN as the largest value); the numbers
around them are sorted.  On every usable device, against NumPy."""
import numpy as np
import pytest

import anytile as at
import anytile.language as tl


@at.jit
def sorted_rows(x_ptr, up_ptr, down_ptr, top_ptr, ROWS: tl.constexpr, N: tl.constexpr,
                K: tl.constexpr):
    rows = tl.arange(0, ROWS)[:, None]
    tile = rows * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + tile)
    tl.store(up_ptr + tile, tl.sort(x))
    tl.store(down_ptr + tile, tl.sort(x, descending=True))
    tl.store(top_ptr + rows * K + tl.arange(0, K)[None, :], tl.topk(x, K))


def _rows_with_nan(rng, dtype, n=16):
    x = rng.standard_normal((4, n)).astype(dtype)
    x[1, rng.choice(n, size=4, replace=False)] = [np.inf, -np.inf, np.nan, 0.0]
    x[2, rng.choice(n, size=3, replace=False)] = np.nan
    x[3] = np.nan                             # a row of NaN only; row 0 has none
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sort_and_topk_place_nan_as_numpy_does(device, rng, poison, dtype):
    x = _rows_with_nan(rng, dtype)
    up, down = (at.asarray(poison(x.shape, dtype), device=device) for _ in range(2))
    top = at.asarray(poison((4, 4), dtype), device=device)
    sorted_rows[(1,)](at.asarray(x, device=device), up, down, top, ROWS=4, N=16, K=4)
    want = np.sort(x, axis=-1)
    np.testing.assert_array_equal(up.numpy(), want)
    np.testing.assert_array_equal(down.numpy(), want[:, ::-1])
    np.testing.assert_array_equal(top.numpy(), want[:, ::-1][:, :4])
