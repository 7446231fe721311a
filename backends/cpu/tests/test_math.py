"""Accuracy of the vectorised math functions (``anytile.codegen.llvm.math``) in ulps,
against float64 NumPy / ``math``, on random, wide-range and edge inputs."""
import math

import ml_dtypes
import numpy as np
import pytest

from anytile.ir.types import scalar_type

from cpu_kit import grid_module, poisoned, run_cpu

FUNCTIONS = ["exp", "exp2", "log", "log2", "sin", "cos", "erf", "tanh"]
# OpenCL's single-precision bounds (the conformance suite's table)
MAX_ULP_F32 = {"exp": 3, "exp2": 3, "log": 3, "log2": 3, "sin": 4, "cos": 4, "erf": 16, "tanh": 5}
REFERENCE = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin,
             "cos": np.cos, "tanh": np.tanh, "erf": np.vectorize(math.erf, otypes=[np.float64])}
BLOCK = 1024
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38, -1e-38, 3e38, -3e38, 1.0,
         -1.0, 88.7, 89.0, -103.0, -87.3, 128.0, -150.0, 0.5, 2.0, 1e7, 3.3e7, 1e30, -1e20,
         4.0, 3.9, 0.9999, 1.0001, 1e-7, -1e-7, 20.0, 9.0]


def _inputs(rng) -> np.ndarray:
    n = 1 << 15
    parts = [np.array(EDGES),
             rng.uniform(-10, 10, n),
             rng.standard_normal(n) * 100,
             np.exp(rng.uniform(-100, 88, n)) * rng.choice([-1, 1], n),
             rng.uniform(-1e7, 1e7, n // 4),
             rng.uniform(-1e30, 1e30, n // 8),
             rng.uniform(-1e-3, 1e-3, n // 8)]
    with np.errstate(over="ignore"):
        return np.concatenate(parts).astype(np.float32)


def _run(dtype_name: str, x: np.ndarray) -> list:
    t = scalar_type(dtype_name)
    module = grid_module(BLOCK, [t], [(t, lambda kb, v, k=k: kb.unary(k, v)) for k in FUNCTIONS])
    outs = [poisoned(x.size, t.np) for _ in FUNCTIONS]
    run_cpu(module, (x.size + BLOCK - 1) // BLOCK, x, *outs, x.size)
    return outs


def _ulps(got: np.ndarray, ref: np.ndarray, dtype) -> np.ndarray:
    """|got - ref| in units of the last place of ``ref`` rounded to ``dtype``."""
    got = got.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = ref.astype(dtype).astype(np.float64)
        ulp = np.spacing(np.abs(ref).astype(dtype)).astype(np.float64)
    tiny = np.spacing(np.array(0, dtype)).astype(np.float64)
    ulp = np.where(np.isfinite(ulp) & (ulp > 0), ulp, tiny)
    same = (got == rounded) | (np.isnan(got) & np.isnan(ref))
    with np.errstate(invalid="ignore"):
        return np.where(same, 0.0, np.abs(got - ref) / ulp)


def test_f32_within_opencl_ulp_bounds(rng):
    x = _inputs(rng)
    outs = _run("f32", x)
    xd = x.astype(np.float64)
    for name, got in zip(FUNCTIONS, outs):
        with np.errstate(all="ignore"):
            ref = REFERENCE[name](xd)
        err = _ulps(got, ref, np.float32)
        worst = int(np.argmax(err))
        assert err.max() <= MAX_ULP_F32[name], (
            f"{name}: {err.max():.2f} ulp at x={x[worst]!r}: got {got[worst]!r}, want {ref[worst]!r}")


def test_f32_special_values_exact():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0], np.float32)
    outs = dict(zip(FUNCTIONS, _run("f32", x)))
    inf, nan = np.inf, np.nan
    want = {"exp": [1, 1, inf, 0, nan, math.exp(-1)], "exp2": [1, 1, inf, 0, nan, 0.5],
            "log": [-inf, -inf, inf, nan, nan, nan], "log2": [-inf, -inf, inf, nan, nan, nan],
            "sin": [0.0, -0.0, nan, nan, nan, math.sin(-1)],
            "cos": [1, 1, nan, nan, nan, math.cos(-1)],
            "erf": [0.0, -0.0, 1, -1, nan, math.erf(-1)], "tanh": [0.0, -0.0, 1, -1, nan, math.tanh(-1)]}
    for name, values in want.items():
        np.testing.assert_array_equal(outs[name], np.array(values, np.float32), err_msg=name)
        np.testing.assert_array_equal(np.signbit(outs[name][:2]), np.signbit(np.array(values[:2], np.float32)),
                                      err_msg=f"{name} sign of zero")


def test_f64_uses_an_accurate_library(rng):
    x = rng.uniform(-50, 50, 4096)
    x[:4] = [0.0, 1e-300, 700.0, -700.0]
    outs = _run("f64", x)
    for name, got in zip(FUNCTIONS, outs):
        with np.errstate(all="ignore"):
            ref = REFERENCE[name](x)
        assert _ulps(got, ref, np.float64).max() <= 2, name


@pytest.mark.parametrize("name,dtype", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_narrow_floats_round_once(rng, name, dtype):
    x = rng.uniform(-6, 6, 2048).astype(dtype)
    x[x == 0] = 1
    outs = _run(name, np.abs(x) if False else x)
    xd = x.astype(np.float64)
    for fname, got in zip(FUNCTIONS, outs):
        with np.errstate(all="ignore"):
            ref = REFERENCE[fname](xd)
        err = _ulps(got, ref, dtype)
        assert np.nanmax(err) <= 1.0, fname
