"""Counter-based random numbers: ``tl.randint``, ``tl.rand``, ``tl.randn`` and their ``4x`` forms.

They follow Triton's ``triton.language.random`` bit for bit: Philox 4x32 (4x64 for 64-bit
offsets) with 10 rounds keyed by ``seed``, the counter ``(offset, 0, 0, 0)``, the same
integer-to-float mapping and the Box-Muller transform.  Given one seed and one offset, anytile
and Triton draw the same integers and the same uniform floats (normals agree to the accuracy
of ``log``/``sin``/``cos``).  Every function unrolls into ordinary IR (``umulhi``, wrapping
``mul``/``add``, ``xor``), so any backend runs them."""
from __future__ import annotations

from typing import Any

from ..ir import ops
from ..ir import types as irt
from ..ir.builder import Builder
from . import semantic
from .objects import builtin, int32, int64, static_int, tensor, uint32, uint64

__all__ = ["philox", "randint", "randint4x", "rand", "rand4x", "randn", "randn4x",
           "uint_to_uniform_float", "pair_uniform_to_normal"]

N_ROUNDS_DEFAULT = 10

# (round multiplier A, round multiplier B, key increment A, key increment B) per counter width
_PHILOX_CONSTANTS = {
    32: (0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85),
    64: (0xD2E7470EE14C6C93, 0xCA5A826395121157, 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B),
}


def _umulhi(x: Any, y: Any, b: Builder) -> tensor:
    xs, ys = semantic.promote_pair(x, y, b, op="umulhi")
    return tensor(b.create(ops.UMulHiOp, xs.handle, ys.handle).result)


def _int_tensor(x: Any, what: str, b: Builder) -> tensor:
    t = semantic.to_tensor(x, b)
    elem = irt.elem_type(t.type)
    if not (isinstance(elem, irt.ScalarType) and elem.is_int and not elem.is_bool):
        raise TypeError(f"{what} must be an integer, got {t.dtype!r}")
    return t


def _rounds(n_rounds: Any) -> int:
    n = static_int(n_rounds, "n_rounds", "the Philox rounds are unrolled at compile time")
    if n <= 0:
        raise ValueError(f"n_rounds must be positive, got {n}")
    return n


def _philox_rounds(c: list, k0: tensor, k1: tensor, bits: int, n_rounds: int,
                   b: Builder) -> tuple:
    round_a, round_b, key_a, key_b = _PHILOX_CONSTANTS[bits]
    c0, c1, c2, c3 = c
    for _ in range(n_rounds):
        new_c0 = semantic.xor_(semantic.xor_(_umulhi(round_b, c2, b), c1, b), k0, b)
        new_c2 = semantic.xor_(semantic.xor_(_umulhi(round_a, c0, b), c3, b), k1, b)
        c1 = semantic.mul(round_b, c2, b)
        c3 = semantic.mul(round_a, c0, b)
        c0, c2 = new_c0, new_c2
        k0 = semantic.add(k0, key_a, b)
        k1 = semantic.add(k1, key_b, b)
    return c0, c1, c2, c3


@builtin
def philox(seed: Any, c0: Any, c1: Any, c2: Any, c3: Any, n_rounds: Any = N_ROUNDS_DEFAULT,
           _builder: Builder = None) -> tuple:
    """Run Philox on the counter ``(c0, c1, c2, c3)`` keyed by ``seed``; returns four
    unsigned tiles (32-bit counters give uint32, 64-bit ones uint64)."""
    b = _builder
    seed_t = semantic.cast(_int_tensor(seed, "the seed", b), uint64, b)
    counters = [_int_tensor(c, "a Philox counter", b) for c in (c0, c1, c2, c3)]
    bits = irt.elem_type(counters[0].type).bits
    if bits not in (32, 64) or any(irt.elem_type(c.type).bits != bits for c in counters):
        raise TypeError("Philox counters must all be 32-bit or all be 64-bit integers, got "
                        + ", ".join(repr(c.dtype) for c in counters))
    if bits == 32:
        word = uint32
        key_hi = semantic.cast(semantic.and_(semantic.shr(seed_t, 32, b), 0xFFFFFFFF, b), word, b)
        key_lo = semantic.cast(semantic.and_(seed_t, 0xFFFFFFFF, b), word, b)
    else:
        word = uint64
        key_hi = semantic.constant(0, irt.u64, b)
        key_lo = seed_t
    counters = [semantic.bitcast(c, word, b) for c in counters]
    return _philox_rounds(counters, key_lo, key_hi, bits, _rounds(n_rounds), b)


def _randint4x(seed: Any, offset: Any, n_rounds: Any, b: Builder) -> tuple:
    off = _int_tensor(offset, "the offset", b)
    zero = semantic.mul(off, 0, b)
    return philox(seed, off, zero, zero, zero, n_rounds, _builder=b)


@builtin
def randint4x(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT,
              _builder: Builder = None) -> tuple:
    """Four blocks of random unsigned integers for ``seed`` and the integer ``offset`` tile."""
    return _randint4x(seed, offset, n_rounds, _builder)


@builtin
def randint(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT,
            _builder: Builder = None) -> tensor:
    """One block of random unsigned integers (the first of ``randint4x``)."""
    return _randint4x(seed, offset, n_rounds, _builder)[0]


def _to_uniform(x: tensor, b: Builder) -> tensor:
    if irt.elem_type(x.type).bits == 32:
        x, scale = semantic.bitcast(x, int32, b), 4.6566127342e-10
    else:
        x, scale = semantic.bitcast(x, int64, b), 1.0842020432385337e-19
    # fold negative values onto [0, 2^(N-1)) so the float lands in [0, 1)
    x = semantic.where(semantic.less_than(x, 0, b), semantic.sub(semantic.neg(x, b), 1, b), x, b)
    return semantic.mul(x, scale, b)


@builtin
def uint_to_uniform_float(x: Any, _builder: Builder = None) -> tensor:
    """Random 32- or 64-bit integers mapped to float32 uniformly spread over [0, 1)."""
    return _to_uniform(_int_tensor(x, "tl.uint_to_uniform_float's input", _builder), _builder)


@builtin
def rand(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT,
         _builder: Builder = None) -> tensor:
    """A block of float32 uniform in [0, 1) for ``seed`` and ``offset``."""
    return _to_uniform(_randint4x(seed, offset, n_rounds, _builder)[0], _builder)


@builtin
def rand4x(seed: Any, offsets: Any, n_rounds: Any = N_ROUNDS_DEFAULT,
           _builder: Builder = None) -> tuple:
    """Four blocks of float32 uniform in [0, 1)."""
    return tuple(_to_uniform(i, _builder) for i in _randint4x(seed, offsets, n_rounds, _builder))


def _unary(kind: str, x: tensor, b: Builder) -> tensor:
    return tensor(b.create(ops.UnaryOp, kind, x.handle).result)


def _box_muller(u1: Any, u2: Any, b: Builder) -> tuple[tensor, tensor]:
    u1 = semantic.maximum(1.0e-7, u1, b)
    th = semantic.mul(6.283185307179586, u2, b)
    r = _unary("sqrt", semantic.mul(-2.0, _unary("log", u1, b), b), b)
    return semantic.mul(r, _unary("cos", th, b), b), semantic.mul(r, _unary("sin", th, b), b)


@builtin
def pair_uniform_to_normal(u1: Any, u2: Any, _builder: Builder = None) -> tuple:
    """Two independent standard normals from two uniforms (Box-Muller)."""
    return _box_muller(u1, u2, _builder)


@builtin
def randn(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT,
          _builder: Builder = None) -> tensor:
    """A block of float32 standard normals for ``seed`` and ``offset``."""
    i1, i2, _, _ = _randint4x(seed, offset, n_rounds, _builder)
    return _box_muller(_to_uniform(i1, _builder), _to_uniform(i2, _builder), _builder)[0]


@builtin
def randn4x(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT,
            _builder: Builder = None) -> tuple:
    """Four blocks of float32 standard normals."""
    u1, u2, u3, u4 = (_to_uniform(i, _builder)
                      for i in _randint4x(seed, offset, n_rounds, _builder))
    return _box_muller(u1, u2, _builder) + _box_muller(u3, u4, _builder)

