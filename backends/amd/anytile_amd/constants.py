"""Mathematical constants to more bits than a double holds, and their splits into floats.

The math functions (``math.py``) need pi/2, 2/pi, ln 2 and log2(e) split into a few floats
whose sum is exact to the format's working precision (Cody-Waite reduction), and the bits
of 2/pi far beyond the binary point (Payne-Hanek reduction of large arguments).  They are
computed here from series on Python integers, so nothing is copied from a table.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from math import isqrt

__all__ = ["SCALE", "pi_scaled", "two_over_pi_scaled", "ln2_scaled", "inverse_sqrt_pi_scaled",
           "split", "rounded", "two_over_pi_word"]

#: constants are integers ``c`` meaning ``c / 2**SCALE``
SCALE = 1400


def _arctan_inverse(n: int) -> int:
    """``atan(1/n) * 2**SCALE`` (Gregory's series), truncated."""
    total, power, k = 0, (1 << (SCALE + 16)) // n, 0
    while power:
        term = power // (2 * k + 1)
        total += -term if k & 1 else term
        power //= n * n
        k += 1
    return total >> 16


@lru_cache(maxsize=None)
def pi_scaled() -> int:
    """pi * 2**SCALE, by Machin's formula pi = 16 atan(1/5) - 4 atan(1/239)."""
    return 16 * _arctan_inverse(5) - 4 * _arctan_inverse(239)


@lru_cache(maxsize=None)
def two_over_pi_scaled() -> int:
    """2/pi * 2**SCALE."""
    return (2 << (2 * SCALE)) // pi_scaled()


@lru_cache(maxsize=None)
def ln2_scaled() -> int:
    """ln 2 * 2**SCALE = sum over k >= 1 of 1 / (k 2^k)."""
    guard = SCALE + 16
    return sum((1 << (guard - k)) // k for k in range(1, guard)) >> 16


def rounded(value: Fraction, bits: int) -> float:
    """``value`` rounded to nearest with ``bits`` significant bits (exact as a float)."""
    if value == 0:
        return 0.0
    sign, value = (-1, -value) if value < 0 else (1, value)
    exponent = value.numerator.bit_length() - value.denominator.bit_length()
    if Fraction(2) ** exponent > value:
        exponent -= 1
    unit = Fraction(2) ** (exponent - bits + 1)
    return sign * float(round(value / unit) * unit)


def split(scaled: int, parts: int, bits: int, first_bits: int = 0) -> tuple[float, ...]:
    """``scaled / 2**SCALE`` as ``parts`` floats of ``bits`` significant bits each (the first
    of ``first_bits`` when given: few enough that its product with a small integer is
    exact), each the rounded remainder of the ones before."""
    rest = Fraction(scaled, 1 << SCALE)
    out = []
    for i in range(parts):
        piece = rounded(rest, first_bits if i == 0 and first_bits else bits)
        out.append(piece)
        rest -= Fraction(piece)
    return tuple(out)


def two_over_pi_word(n: int) -> int:
    """Word ``n`` (64 bits, most significant first) of 2/pi's fraction preceded by one zero
    word: word ``n >= 1`` holds fraction bits ``64 n - 63 .. 64 n``."""
    if n <= 0:
        return 0
    return (two_over_pi_scaled() >> (SCALE - 64 * n)) & ((1 << 64) - 1)


def inverse_sqrt_pi_scaled() -> int:
    """1/sqrt(pi) * 2**SCALE."""
    return (1 << (2 * SCALE)) // isqrt(pi_scaled() << SCALE)
