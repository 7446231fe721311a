"""The axis analysis of a remainder by a value the same along a dimension (Triton's tutorial
wraps its tile indices with ``% M``): its facts checked against the values themselves."""
import itertools
from math import gcd

import numpy as np
import pytest

import anytile as at
import anytile.language as tl
from anytile.codegen.gpu.axis_info import analyse_function
from anytile.ir.nodes import walk


@at.jit
def wrapped_rows(x_ptr, M, BLOCK: tl.constexpr):
    rows = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)) % M
    tl.store(x_ptr + rows, tl.load(x_ptr + rows))


def _rem_info(m_type):
    module = at.compile(wrapped_rows, target="nvidia:sm_90", constexprs={"BLOCK": 64},
                        signature={"x_ptr": "*fp16:16", "M": m_type}).module
    fn = module.kernel
    rem = next(op for op in walk(fn.body) if op.NAME == "binary" and op.kind == "rem")
    return analyse_function(fn)[rem.result]


def test_a_remainder_by_a_multiple_of_16_keeps_runs_of_16():
    info = _rem_info("i32:16")
    assert info.contiguity == (16,) and info.divisibility == (16,)
    # by a value of unknown divisibility every element is its own run
    assert _rem_info("i32").contiguity == (1,)


@pytest.mark.parametrize("start,bound", list(itertools.product([0, 16, 48, 64, 4096],
                                                           [16, 32, 48, 80, 4096])))
def test_the_facts_hold_of_the_values(start, bound):
    """Runs of ``gcd(16, 16) = 16`` from a start divisible by 16, wrapped by a multiple of 16:
    each aligned piece of 16 is consecutive, its first element divisible by 16.  (Not for a
    negative dividend, whose remainder by C's rule steps back at a multiple of the divisor:
    the analysis assumes none, as Triton's does.)"""
    values = np.fmod(np.arange(start, start + 64), bound)
    g = gcd(16, 16)
    for piece in values.reshape(-1, g):
        assert np.all(np.diff(piece) == 1) and piece[0] % g == 0


@at.jit
def shifted_back(x_ptr, y_ptr, S, M, BLOCK: tl.constexpr):
    offs = (tl.arange(0, BLOCK) - S) % M
    tl.store(y_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + 64 + offs))


def test_a_dividend_that_may_be_negative_keeps_no_runs():
    """``(arange - S) % M`` steps back after each multiple of M below zero (-16 % 16 is 0,
    -15 % 16 is -15): no runs, so its loads stay per element."""
    module = at.compile(shifted_back, target="nvidia:sm_90", constexprs={"BLOCK": 64},
                        signature={"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "S": "i32:16",
                                   "M": "i32:16"}).module
    fn = module.kernel
    rem = next(op for op in walk(fn.body) if op.NAME == "binary" and op.kind == "rem")
    assert analyse_function(fn)[rem.result].contiguity == (1,)
    assert list(np.fmod(np.arange(-16, -12), 16)) == [0, -15, -14, -13]


@at.jit
def grouped_rows(x_ptr, M, N, PROMISE: tl.constexpr, BLOCK: tl.constexpr):
    """Triton's tutorial matmul's grouped program order: ``pid_m`` may be negative as far as
    its ops show (``N`` is any int), unless the kernel promises otherwise."""
    pid = tl.program_id(0)
    in_group = 8 * tl.cdiv(N, BLOCK)
    first = (pid // in_group) * 8
    size = tl.minimum(tl.cdiv(M, BLOCK) - first, 8)
    pid_m = first + (pid % in_group) % size
    if PROMISE:
        tl.assume(pid_m >= 0)
    rows = (pid_m * BLOCK + tl.arange(0, BLOCK)) % M
    tl.store(x_ptr + rows, tl.load(x_ptr + rows))


@pytest.mark.parametrize("promise", [False, True])
def test_a_promise_that_the_dividend_is_not_negative_keeps_runs(promise):
    module = at.compile(grouped_rows, target="nvidia:sm_90",
                        constexprs={"BLOCK": 64, "PROMISE": promise},
                        signature={"x_ptr": "*fp16:16", "M": "i32:16", "N": "i32:16"}).module
    fn = module.kernel
    rem = [op for op in walk(fn.body) if op.NAME == "binary" and op.kind == "rem"][-1]
    assert analyse_function(fn)[rem.result].contiguity == ((16,) if promise else (1,))
