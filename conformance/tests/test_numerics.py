"""Exact rounding, ULP distances, poison and integer wrapping used by the oracle."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from anytile_conformance import numerics, oracle, tolerances


@pytest.mark.parametrize("name, np_type", [("f32", np.float32), ("f16", np.float16)])
def test_round_to_format_matches_numpy_correct_rounding(name, np_type):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=2000) * 10.0 ** rng.integers(-8, 8, size=2000),
                        [1e-45, 7e4, 65519.0, 65520.0, -3.4e38, 1.0 + 2.0 ** -11]])
    with np.errstate(over="ignore"):
        expected = x.astype(np_type).astype(np.float64)
    np.testing.assert_array_equal(numerics.round_to_format(x, name), expected)


def test_round_to_bfloat16_matches_ml_dtypes_from_float32():
    x = np.random.default_rng(1).normal(size=3000).astype(np.float32) * 1000
    expected = x.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_array_equal(numerics.round_to_format(x.astype(np.float64), "bf16"), expected)


def test_ulp_error():
    one = np.array([1.0])
    assert numerics.ulp_error(np.float32(1.0) + np.spacing(np.float32(1.0)), one, "f32")[0] == 1.0
    assert numerics.ulp_error(np.array([np.nan]), np.array([np.nan]), "f32")[0] == 0.0
    assert numerics.ulp_error(np.array([np.inf]), np.array([1e39]), "f32")[0] == 0.0  # overflow
    assert numerics.ulp_error(np.array([np.inf]), one, "f32")[0] == np.inf
    assert numerics.ulp_error(np.array([1.0 + 2 ** -10]), one, "f16")[0] == 1.0


def test_poison_is_recognised_and_distinct_from_arithmetic_nan():
    for name in numerics.ALL_DTYPES:
        p = numerics.poison((4,), name)
        assert numerics.is_poison(p, name).all()
    nan = np.array([np.nan], dtype=np.float32)
    assert not numerics.is_poison(nan, "f32").any()


def test_wrap_int_and_random_inputs_are_nonzero():
    np.testing.assert_array_equal(numerics.wrap_int([128, -129, 255], "i8"), [-128, 127, -1])
    rng = np.random.default_rng(2)
    for name in numerics.ALL_DTYPES:
        assert (numerics.random_array(rng, (500,), name) != 0).all()


def test_compare_flags_unwritten_and_out_of_tolerance():
    got = numerics.poison((4,), "f32")
    got[:3] = [1.0, 2.0, 3.0]
    expected = np.array([1.0, 2.0, 3.0, 4.0])
    mismatch = oracle.compare("out", got, expected, "f32", tolerances.EXACT)
    assert mismatch is not None and mismatch.unwritten == 1 and "never written" in str(mismatch)
    masked = np.array([False, False, False, True])
    assert oracle.compare("out", got, expected, "f32", tolerances.EXACT, poisoned=masked) is None
    off = np.array([1.0, 2.0, 3.0 + 3 * 2 ** -22, 4.0], dtype=np.float32)
    assert oracle.compare("out", off, expected, "f32", tolerances.Ulps(3)) is None
    assert oracle.compare("out", off, expected, "f32", tolerances.Ulps(0.5)) is not None


def test_accumulation_bound_scales_with_terms():
    tol = tolerances.accumulation(100, "f32")
    assert tol.factor == pytest.approx(100 * 2.0 ** -24)
    assert tolerances.accumulation(100, "i32") == tolerances.EXACT
    got, exact, magnitude = np.array([1.0 + 1e-6]), np.array([1.0]), np.array([10.0])
    assert oracle.compare("s", got.astype(np.float32), exact, "f32", tol, magnitude) is None
    assert oracle.compare("s", got.astype(np.float32) * 2, exact, "f32", tol, magnitude) is not None


def test_tolerance_table_follows_opencl():
    assert tolerances.MATH_ULPS["exp"]["f32"] == 3 and tolerances.MATH_ULPS["log2"]["f32"] == 3
    assert tolerances.MATH_ULPS["sin"]["f32"] == 4 and tolerances.MATH_ULPS["sqrt"]["f32"] == 0.5
    assert all(len(row) == 3 for row in tolerances.table_rows())
