"""libdevice's special functions (Bessel, erfc family, gamma; language/extra/_special.py) on
every usable device against SciPy evaluated in float64: errors within each function's
documented bound (ulp, or absolute where the docstring promises an absolute error, near the
zeros of the Bessel functions and of lgamma), special values exact.

In float64 the bound checked is the documented one plus SciPy's own error, measured against
mpmath on the same domains (``SCIPY_ERR``): SciPy is not correctly rounded either (its
Bessel functions are taken from ``jv``/``yv``, AMOS, whose large-x phase is exact, rather
than from Cephes' ``j0``...).  Where
SciPy loses accuracy altogether (erfc and ndtr in their far tails, erfcx for x < 0, all
round exp(+-x^2); erfcinv below 1e-5; gammaln next to 1 and 2), the reference is rebuilt from
SciPy's erfcx (or ndtri, or zeta) and extended precision."""
import numpy as np
import pytest
import scipy.special as sp

import anytile as at
import anytile.language as tl
from anytile.language.extra import libdevice

LD = np.longdouble
INF, NAN = np.inf, np.nan


def _erfc_ref(x):
    xl = x.astype(LD)
    with np.errstate(all="ignore"):
        return np.where(x > 1, sp.erfcx(x) * np.exp(-xl * xl), sp.erfc(x))


def _erfcx_ref(x):
    # SciPy's erfcx(x < 0) rounds exp(x^2): 2 exp(x^2) - erfcx(-x) in extended precision
    xl = x.astype(LD)
    with np.errstate(all="ignore"):
        return np.where(x < 0, 2 * np.exp(xl * xl) - sp.erfcx(-x), sp.erfcx(x))


def _ndtr_ref(x):
    xl = x.astype(LD)
    with np.errstate(all="ignore"):
        tail = 0.5 * sp.erfcx(-x / np.sqrt(2)) * np.exp(-xl * xl / 2)
    return np.where(x < -1, tail, sp.ndtr(x))


def _erfcinv_ref(q):
    # SciPy's erfcinv loses digits below ~1e-5 (it goes through 1 - q); ndtri does not
    with np.errstate(all="ignore"):
        return np.where(q < 0.5, -sp.ndtri(q / 2) / np.sqrt(2), sp.erfcinv(q))


_K = np.arange(2, 80)
_ZETA, _ZETAC = sp.zeta(_K.astype(float), 1), sp.zetac(_K.astype(float))


def _gammaln_ref(x):
    # SciPy's gammaln is only absolutely accurate about its zeros 1 and 2: on [1/2, 5/2], the
    # Taylor series lgamma(c + w) = (c - 1 - gamma) w + sum_k>=2 (-1)^k (zeta(k) - [c == 2])
    # / k w^k with SciPy's zeta values, summed in extended precision
    out = sp.gammaln(x).astype(LD)
    for c, zeta in ((1.0, _ZETA), (2.0, _ZETAC)):
        w = (x - c).astype(LD)
        s = LD(0)
        for k, z in zip(_K[::-1], zeta[::-1]):
            s = (s + (-1.0) ** k * LD(z) / k) * w
        out = np.where(np.abs(w) <= 0.5, (s + LD(c - 1 - np.euler_gamma)) * w, out)
    return out


def _u(lo, hi):
    return ("u", lo, hi)


def _log(lo, hi):
    return ("log", lo, hi)


#: name -> (SciPy reference, sampling ranges for float32, for float64)
FUNCS = {
    "j0": (lambda x: sp.jv(0, x), [_u(-40, 40), _log(40, 1e5)], None),
    "j1": (lambda x: sp.jv(1, x), [_u(-40, 40), _log(40, 1e5)], None),
    "y0": (lambda x: sp.yv(0, x), [_log(1e-5, 40), _u(0, 40), _log(40, 1e5)], None),
    "y1": (lambda x: sp.yv(1, x), [_log(1e-5, 40), _u(0, 40), _log(40, 1e5)], None),
    "cyl_bessel_i0": (sp.i0, [_u(-30, 30), _u(30, 88), _u(-88, -30)],
                      [_u(-30, 30), _u(30, 700), _u(-700, -30)]),
    "cyl_bessel_i1": (sp.i1, [_u(-30, 30), _u(30, 88), _u(-88, -30)],
                      [_u(-30, 30), _u(30, 700), _u(-700, -30)]),
    "erfc": (_erfc_ref, [_u(-6, 10)], [_u(-6, 6), _u(6, 27)]),
    "erfcx": (_erfcx_ref, [_u(-9, 30), _log(30, 1e30)], [_u(-26, 30), _log(30, 1e300)]),
    "erfinv": (sp.erfinv, [_u(-1, 1), ("near1", 1e-7, 1)], [_u(-1, 1), ("near1", 1e-16, 1)]),
    "erfcinv": (_erfcinv_ref, [_log(1e-38, 1), _u(0, 2)], [_log(1e-300, 1), _u(0, 2)]),
    "normcdf": (_ndtr_ref, [_u(-14, 6)], [_u(-38, 9)]),
    "normcdfinv": (sp.ndtri, [_log(1e-38, 0.5), _u(0, 1)], [_log(1e-300, 0.5), _u(0, 1)]),
    "lgamma": (_gammaln_ref, [_log(1e-38, 1e36), _u(-30, 30)], [_log(1e-300, 1e300), _u(-30, 30)]),
    "tgamma": (sp.gamma, [_u(-40, 35), _u(-5, 10), _log(1e-38, 1)],
               [_u(-170, 171.6), _u(-5, 10), _log(1e-300, 1)]),
}

#: name -> (float32 ulp, float32 absolute, float64 ulp, float64 absolute), as documented: an
#: element passes within either bound (None: no absolute bound is promised)
BOUNDS = {
    "j0": (1, 3e-12, 5, 5e-16), "j1": (1, 3e-12, 5, 5e-16),
    "y0": (1, 3e-12, 4, 5e-16), "y1": (1, 3e-12, 4, 5e-16),
    "cyl_bessel_i0": (1, None, 5, None), "cyl_bessel_i1": (1, None, 6, None),
    "erfc": (1, None, 4, None), "erfcx": (1, None, 3, None), "erfinv": (1, None, 4, None),
    "erfcinv": (1, None, 4, None), "normcdf": (1, None, 4, None),
    "normcdfinv": (1, None, 4, None), "lgamma": (1, 1e-15, 5, 1e-15),
    "tgamma": (1, None, 4, None),
}
#: where the absolute bound applies (everywhere if not listed): lgamma's reflection, x < 0
ABS_WHERE = {"lgamma": lambda x: x < 0}
#: SciPy's own float64 error on these domains (ulp, absolute), measured against mpmath
SCIPY_ERR = {"j0": (0, 4e-16), "j1": (0, 4e-16), "y0": (5, 5e-16), "y1": (5, 4e-16),
             "cyl_bessel_i0": (3, None), "cyl_bessel_i1": (10, None), "erfc": (8, None),
             "erfcx": (3, None), "erfinv": (3, None), "erfcinv": (6, None),
             "normcdf": (6, None), "normcdfinv": (3, None), "lgamma": (3, 4e-16),
             "tgamma": (4, None), "jn": (0, 6e-16), "yn": (17, 8e-16)}

#: name -> [(input, exact output)]
SPECIAL = {
    "j0": [(0.0, 1.0), (INF, 0.0), (-INF, 0.0), (NAN, NAN)],
    "j1": [(0.0, 0.0), (INF, 0.0), (-INF, 0.0), (NAN, NAN)],
    "y0": [(0.0, -INF), (-1.0, NAN), (INF, 0.0), (-INF, NAN), (NAN, NAN)],
    "y1": [(0.0, -INF), (-1.0, NAN), (INF, 0.0), (NAN, NAN)],
    "cyl_bessel_i0": [(0.0, 1.0), (INF, INF), (-INF, INF), (NAN, NAN)],
    "cyl_bessel_i1": [(0.0, 0.0), (INF, INF), (-INF, -INF), (NAN, NAN)],
    "erfc": [(0.0, 1.0), (INF, 0.0), (-INF, 2.0), (30.0, 0.0), (NAN, NAN)],
    "erfcx": [(0.0, 1.0), (INF, 0.0), (-INF, INF), (-30.0, INF), (NAN, NAN)],
    "erfinv": [(0.0, 0.0), (1.0, INF), (-1.0, -INF), (1.5, NAN), (-2.0, NAN), (NAN, NAN)],
    "erfcinv": [(1.0, 0.0), (0.0, INF), (2.0, -INF), (-1.0, NAN), (3.0, NAN), (NAN, NAN)],
    "normcdf": [(0.0, 0.5), (INF, 1.0), (-INF, 0.0), (-40.0, 0.0), (NAN, NAN)],
    "normcdfinv": [(0.5, 0.0), (0.0, -INF), (1.0, INF), (-0.5, NAN), (2.0, NAN), (NAN, NAN)],
    "lgamma": [(1.0, 0.0), (2.0, 0.0), (0.0, INF), (-1.0, INF), (-2.0, INF), (INF, INF),
               (-INF, INF), (NAN, NAN)],
    "tgamma": [(1.0, 1.0), (2.0, 1.0), (3.0, 2.0), (5.0, 24.0), (6.0, 120.0), (10.0, 362880.0),
               (0.0, INF), (-0.0, -INF), (-1.0, NAN), (-2.0, NAN), (INF, INF), (-INF, NAN),
               (200.0, INF), (NAN, NAN)],
}
ORDERS = (2, -3, 9)
#: bounds of jn / yn for these orders, as documented (absolute near the zeros, ulp elsewhere)
ORDER_BOUNDS = {"jn": (1, 3e-12, 5, 5e-16), "yn": (1, 3e-12, 12, 1.2e-15)}


def _dtypes(device):
    return [np.float32] + ([np.float64] if "fp64" in device.backend.device_capabilities(device.info)
                           else [])


def _sample(rng, ranges, n, dtype):
    parts = []
    for kind, lo, hi in ranges:
        m = n // len(ranges)
        if kind == "log":
            parts.append(np.exp(rng.uniform(np.log(lo), np.log(hi), m)))
        elif kind == "near1":            # +-(1 - d), d log-uniform in [lo, hi]
            parts.append((1 - np.exp(rng.uniform(np.log(lo), np.log(hi), m)))
                         * rng.choice([-1.0, 1.0], m))
        else:
            parts.append(rng.uniform(lo, hi, m))
    return np.concatenate(parts).astype(dtype)


@at.jit
def special_kernel(x_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    tl.store(out_ptr + offs, getattr(libdevice, FN)(x), mask=mask)


@at.jit
def order_kernel(x_ptr, out_ptr, n, FN: tl.constexpr, N0: tl.constexpr, N1: tl.constexpr,
                 N2: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    fn = getattr(libdevice, FN)
    tl.store(out_ptr + offs, fn(N0, x), mask=mask)
    tl.store(out_ptr + n + offs, fn(N1, x), mask=mask)
    tl.store(out_ptr + 2 * n + offs, fn(N2, x), mask=mask)


BLOCK = 32       # small tiles keep the CPU backend's compile of these long formulas short


def _launch(kernel, device, x, outputs, **consts):
    out = at.asarray(np.full(outputs * x.size, 7.0, x.dtype), device=device)
    kernel[(at.cdiv(x.size, BLOCK),)](at.asarray(x, device=device), out, x.size, BLOCK=BLOCK,
                                      **consts)
    return out.numpy().reshape(outputs, x.size)


def _check(name, x, got, exact, dtype, ulp_bound, abs_bound, abs_where=None):
    exact = np.asarray(exact, LD)
    with np.errstate(all="ignore"):
        exact_t = exact.astype(dtype)
        spacing = np.abs(np.spacing(exact_t)).astype(LD)
        err = np.abs(got.astype(LD) - exact)
    same = (np.isnan(got) & np.isnan(exact_t)) | (np.isinf(exact_t) & (got == exact_t))
    ok = same | (err <= ulp_bound * spacing)
    if abs_bound is not None:
        ok |= (err <= abs_bound) & (True if abs_where is None else abs_where(x))
    if not ok.all():
        i = int(np.flatnonzero(~ok)[np.argmax((err / spacing)[~ok])])
        pytest.fail(f"{name}({x[i]!r}) in {np.dtype(dtype).name}: got {got[i]!r}, SciPy "
                    f"{float(exact[i])!r}: {float(err[i] / spacing[i]):.1f} ulp "
                    f"(abs {float(err[i]):.3g}) > {ulp_bound} ulp"
                    + ("" if abs_bound is None else f" and > {abs_bound:g}"))


def _bounds(bounds, scipy_err, dtype):
    u32, a32, u64, a64 = bounds
    if dtype == np.float32:
        return u32, a32
    su, sa = scipy_err
    return u64 + su, None if a64 is None else a64 + (sa or 0.0)


@pytest.mark.parametrize("fn", sorted(FUNCS))
def test_special_functions_within_their_documented_bounds(device, rng, fn):
    ref, ranges32, ranges64 = FUNCS[fn]
    for dtype in _dtypes(device):
        ranges = ranges64 if dtype == np.float64 and ranges64 is not None else ranges32
        special = np.array([s for s, _ in SPECIAL[fn]], dtype)
        x = np.concatenate([_sample(rng, ranges, 2000, dtype), special])
        got = _launch(special_kernel, device, x, 1, FN=fn)[0]
        with np.errstate(all="ignore"):
            exact = ref(x.astype(np.float64))
        k = x.size - special.size
        _check(fn, x[:k], got[:k], exact[:k], dtype, *_bounds(BOUNDS[fn], SCIPY_ERR[fn], dtype),
               ABS_WHERE.get(fn))
        want = np.array([v for _, v in SPECIAL[fn]], dtype)
        np.testing.assert_array_equal(got[k:], want, err_msg=f"{fn} at {special.tolist()}")


@pytest.mark.parametrize("fn", ["jn", "yn"])
def test_integer_orders_within_their_documented_bounds(device, rng, fn):
    ref = (lambda n, x: sp.jv(n, x + 0j).real) if fn == "jn" else sp.yv   # AMOS for both
    ranges = FUNCS["j0" if fn == "jn" else "y0"][1]
    for dtype in _dtypes(device):
        special = np.array([0.0, INF, NAN] + ([-1.0] if fn == "yn" else [-INF]), dtype)
        x = np.concatenate([_sample(rng, ranges, 1500, dtype), special])
        got = _launch(order_kernel, device, x, 3, FN=fn, N0=ORDERS[0], N1=ORDERS[1],
                      N2=ORDERS[2])
        k = x.size - special.size
        for row, n in zip(got, ORDERS):
            with np.errstate(all="ignore"):
                exact = ref(n, x[:k].astype(np.float64))
            _check(f"{fn}({n}, .)", x[:k], row[:k], exact, dtype,
                   *_bounds(ORDER_BOUNDS[fn], SCIPY_ERR[fn], dtype))
            if fn == "jn":
                want = [0.0, 0.0, NAN, 0.0]
            else:       # Y_-n = (-1)^n Y_n: +inf at 0 for odd negative n
                want = [-INF if n >= 0 or n % 2 == 0 else INF, 0.0, NAN, NAN]
            np.testing.assert_array_equal(row[k:], np.array(want, dtype),
                                          err_msg=f"{fn}({n}, {special.tolist()})")


def test_tgamma_is_exact_at_positive_integers(device):
    for dtype in _dtypes(device):
        top = 24 if dtype == np.float64 else 14
        x = np.arange(1, top, dtype=dtype)
        got = _launch(special_kernel, device, x, 1, FN="tgamma")[0]
        want = np.array([float(np.prod(np.arange(1, k, dtype=np.float64))) for k in range(1, top)])
        np.testing.assert_array_equal(got, want.astype(dtype))


@at.jit
def runtime_order_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, libdevice.jn(n, tl.load(x_ptr + offs)))


def test_bessel_order_must_be_a_compile_time_integer(device):
    x = at.asarray(np.ones(4, np.float32), device=device)
    out = at.asarray(np.zeros(4, np.float32), device=device)
    with pytest.raises(Exception, match="compile-time integer"):
        runtime_order_kernel[(1,)](x, out, 2, BLOCK=4)
    with pytest.raises(Exception, match="compile-time integer, got 2.5"):
        order_kernel[(1,)](x, out, 4, FN="yn", N0=2.5, N1=1, N2=1, BLOCK=4)


GPU_TARGETS = [("anytile_nvidia", "nvidia:sm_90"), ("anytile_amd", "amd:gfx942")]


@pytest.mark.parametrize("module,target", GPU_TARGETS)
def test_the_formulas_compile_for_gpu_targets(module, target):
    pytest.importorskip(module)
    for dt in ("fp32", "fp64"):
        compiled = at.compile(special_kernel, target=target,
                              signature={"x_ptr": f"*{dt}", "out_ptr": f"*{dt}", "n": "i32"},
                              constexprs={"FN": "tgamma", "BLOCK": 128})
        assert compiled.asm
    compiled = at.compile(order_kernel, target=target,
                          signature={"x_ptr": "*fp64", "out_ptr": "*fp64", "n": "i32"},
                          constexprs={"FN": "yn", "N0": 2, "N1": -3, "N2": 7, "BLOCK": 128})
    assert compiled.asm
