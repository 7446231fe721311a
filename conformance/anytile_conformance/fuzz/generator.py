"""Random, well-defined kernels from the language subset.

Well-defined means every backend must compute the same bits:
* no out-of-bounds access (tile loads and stores are masked; scalar loads read element 0);
* no division by zero or ``INT_MIN // -1`` (divisors are ``(b & 15) + 1``);
* shift amounts are masked below the bit width;
* float values are integers whose magnitude stays below ``2^precision`` at every step, so
  +, -, *, min, max, sums and scans are exact whatever the order, contraction or vector width;
* casts into floats only from values the target holds exactly; float -> int casts saturate
  as the IR defines;
* loops have constant or small data-independent trip counts.
Integer arithmetic wraps freely (it is defined).

Two kinds of statement and launch go further:
* a math function (``tl.sin``, ``tl.exp``...) of an input mixing huge, moderate and tiny
  magnitudes in one tile, compared within the function's ULP bound of the exact value (its
  result feeds no other statement);
* parameters sharing memory (``Program.shares``): the same array passed twice, an output
  written in place over an input, two outputs in one place (the later store wins), inputs
  and outputs side by side in one allocation, and, when one program runs, views overlapping
  at a shift."""
from __future__ import annotations

import random
from typing import Callable, Optional

import numpy as np

from ..numerics import FLOAT_DTYPES, FLOAT_FORMATS, int_range, np_dtype, round_to_format, wide_float
from ..tolerances import MATH_ULPS
from .program import (SCALAR, TILE, Input, Program, Share, Stmt, Var, input_data,
                      tl_dtype_name)

INT_FUZZ_DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")

#: the math functions a generated kernel calls (those the tolerance table bounds)
MATH_FUNCTIONS = tuple(MATH_ULPS)
#: functions whose arguments are kept positive (elsewhere the answer is NaN for every input)
POSITIVE_ONLY = ("log", "log2", "sqrt", "rsqrt")
#: per dtype, the magnitudes ``(tiny, moderate, huge)`` mixed in one tile: normal numbers
#: from just above the smallest normal to well below the largest finite value
MAGNITUDES = {
    "f16": ((6.2e-5, 1e-2), (1e-2, 50.0), (500.0, 6e4)),
    "bf16": ((1e-30, 1e-3), (1e-3, 50.0), (1e4, 1e30)),
    "f32": ((1e-30, 1e-3), (1e-3, 50.0), (1e4, 1e30)),
    "f64": ((1e-300, 1e-3), (1e-3, 50.0), (1e4, 1e300)),
}
#: at most this many math statements (each brings its own input) in one kernel
MAX_MATH = 2
#: the share of kernels whose parameters share memory
SHARING = 0.3


def exact_limit(dtype: str) -> float:
    """Float magnitudes up to which every integer is exact in ``dtype``."""
    return float(2 ** FLOAT_FORMATS[dtype].precision)


def _bound(dtype: str, lo: float, hi: float) -> Optional[tuple[float, float]]:
    """The range of a result, or ``None`` when a float result could lose exactness; integer
    results that may wrap get their whole dtype range."""
    if dtype in FLOAT_DTYPES:
        limit = exact_limit(dtype)
        return None if max(abs(lo), abs(hi)) > limit else (lo, hi)
    dlo, dhi = int_range(dtype)
    return (lo, hi) if dlo <= lo and hi <= dhi else (float(dlo), float(dhi))


def _keep_dtype(dtype: str) -> str:
    """Sums of narrow integers, max/min of anything narrower than 32 bits and cumsum of bf16
    are widened (as Triton does): cast back, so the result wraps or rounds in ``dtype`` as the
    generator's model says."""
    narrow = dtype in ("bf16", "f16") or (dtype not in FLOAT_DTYPES and int(dtype[1:]) < 32)
    return f".to({tl_dtype_name(dtype)})" if narrow else ""


class KernelGenerator:
    """Generates one ``Program`` from a seed; ``dtypes`` are those the backend supports."""

    def __init__(self, seed: int, dtypes: tuple[str, ...], max_stmts: int = 14) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.dtypes = dtypes
        self.max_stmts = max_stmts
        self.vars: list[Var] = []
        self.stmts: list[Stmt] = []
        self.extra_inputs: list[Input] = []     # the arguments of math statements
        self.counter = 0
        self.n = 1

    # -- helpers -----------------------------------------------------------------------------
    def _fresh(self, dtype: str, kind: str, lo: float, hi: float) -> Var:
        self.counter += 1
        return Var(f"v{self.counter}", dtype, kind, lo, hi)

    def _pick(self, pred: Callable[[Var], bool] = lambda v: True) -> Optional[Var]:
        options = [v for v in self.vars if pred(v)]
        return self.rng.choice(options) if options else None

    def _same(self, a: Var, tile_ok: bool = True) -> Var:
        """Another variable of ``a``'s dtype (``a`` itself if there is none)."""
        return self._pick(lambda v: v.dtype == a.dtype and (tile_ok or v.kind == SCALAR)) or a

    @staticmethod
    def _kind(*vs: Var) -> str:
        return TILE if any(v.kind == TILE for v in vs) else SCALAR

    # -- statement builders (each returns None when it does not apply) -----------------------
    def binary(self) -> Optional[Stmt]:
        a = self._pick()
        b = self._same(a)
        is_int = a.dtype not in FLOAT_DTYPES
        ops = ["add", "sub", "mul", "min", "max"] + (["and", "or", "xor", "shl", "shr", "div", "rem"]
                                                     if is_int else [])
        op = self.rng.choice(ops)
        corners = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
        ranges = {"add": (a.lo + b.lo, a.hi + b.hi), "sub": (a.lo - b.hi, a.hi - b.lo),
                  "mul": (min(corners), max(corners)), "min": (min(a.lo, b.lo), min(a.hi, b.hi)),
                  "max": (max(a.lo, b.lo), max(a.hi, b.hi)),
                  "div": (min(a.lo, 0), max(a.hi, 0)),
                  "rem": (min(0, max(a.lo, -15)), max(0, min(a.hi, 15)))}
        bits = int(a.dtype[1:]) if is_int else 0
        templates = {"add": "{t} = {0} + {1}", "sub": "{t} = {0} - {1}", "mul": "{t} = {0} * {1}",
                     "min": "{t} = tl.minimum({0}, {1})", "max": "{t} = tl.maximum({0}, {1})",
                     "and": "{t} = {0} & {1}", "or": "{t} = {0} | {1}", "xor": "{t} = {0} ^ {1}",
                     "shl": f"{{t}} = {{0}} << ({{1}} & {bits - 1})",
                     "shr": f"{{t}} = {{0}} >> ({{1}} & {bits - 1})",
                     "div": "{t} = {0} // (({1} & 15) + 1)", "rem": "{t} = {0} % (({1} & 15) + 1)"}
        lo, hi = ranges.get(op, int_range(a.dtype))
        bound = _bound(a.dtype, lo, hi)
        if bound is None:
            return None
        return Stmt(self._fresh(a.dtype, self._kind(a, b), *bound), (a.name, b.name),
                     (templates[op],), op)

    def unary(self) -> Optional[Stmt]:
        a = self._pick()
        ops = ["neg", "abs"] + (["not"] if a.dtype not in FLOAT_DTYPES else [])
        op = self.rng.choice(ops)
        if a.dtype.startswith("u") and op != "not":
            lo, hi = int_range(a.dtype)
        elif op == "neg":
            lo, hi = -a.hi, -a.lo
        elif op == "abs":
            lo, hi = 0.0, max(abs(a.lo), abs(a.hi))
        else:
            lo, hi = int_range(a.dtype)
        bound = _bound(a.dtype, lo, hi)
        if bound is None:
            return None
        template = {"neg": "{t} = -{0}", "abs": "{t} = tl.abs({0})", "not": "{t} = ~{0}"}[op]
        return Stmt(self._fresh(a.dtype, a.kind, *bound), (a.name,), (template,), op)

    def cast(self) -> Optional[Stmt]:
        a = self._pick()
        dst = self.rng.choice([d for d in self.dtypes if d != a.dtype])
        if dst in FLOAT_DTYPES:
            limit = exact_limit(dst)
            if max(abs(a.lo), abs(a.hi)) <= limit:
                return Stmt(self._fresh(dst, a.kind, a.lo, a.hi), (a.name,),
                            (f"{{t}} = {{0}}.to({tl_dtype_name(dst)})",), "cast")
            if a.dtype in FLOAT_DTYPES:
                return None
            lo = 0.0 if a.dtype.startswith("u") else -63.0
            return Stmt(self._fresh(dst, a.kind, lo, 63.0), (a.name,),
                        (f"{{t}} = ({{0}} % 64).to({tl_dtype_name(dst)})",), "cast")
        dlo, dhi = int_range(dst)
        if a.dtype in FLOAT_DTYPES:    # integer-valued floats: exact, or saturated as defined
            lo, hi = min(max(a.lo, dlo), dhi), min(max(a.hi, dlo), dhi)
        else:
            lo, hi = _bound(dst, a.lo, a.hi)
        return Stmt(self._fresh(dst, a.kind, lo, hi), (a.name,),
                    (f"{{t}} = {{0}}.to({tl_dtype_name(dst)})",), "cast")

    def where(self) -> Optional[Stmt]:
        x = self._pick(lambda v: v.kind == TILE)
        if x is None:
            return None
        c0 = self._pick()
        c1 = self._same(c0)
        y = self._same(x)
        pred = self.rng.choice(["<", "<=", ">", ">=", "==", "!="])
        return Stmt(self._fresh(x.dtype, TILE, min(x.lo, y.lo), max(x.hi, y.hi)),
                    (c0.name, c1.name, x.name, y.name),
                    (f"{{t}} = tl.where({{0}} {pred} {{1}}, {{2}}, {{3}})",), "where")

    def reduce(self) -> Optional[Stmt]:
        a = self._pick(lambda v: v.kind == TILE)
        if a is None:
            return None
        op = self.rng.choice(["sum", "max", "min"])
        lo, hi = (a.lo * 256, a.hi * 256) if op == "sum" else (a.lo, a.hi)
        bound = _bound(a.dtype, min(lo, a.lo), max(hi, a.hi))
        if bound is None:
            return None
        return Stmt(self._fresh(a.dtype, SCALAR, *bound), (a.name,),
                    (f"{{t}} = tl.{op}({{0}}, axis=0){_keep_dtype(a.dtype)}",), f"reduce_{op}")

    def scan(self) -> Optional[Stmt]:
        a = self._pick(lambda v: v.kind == TILE)
        if a is None:
            return None
        bound = _bound(a.dtype, min(a.lo * 256, a.lo), max(a.hi * 256, a.hi))
        if bound is None:
            return None
        return Stmt(self._fresh(a.dtype, TILE, *bound), (a.name,),
                    (f"{{t}} = tl.cumsum({{0}}, axis=0){_keep_dtype(a.dtype)}",), "cumsum")

    def for_loop(self) -> Optional[Stmt]:
        a = self._pick()
        b = self._pick(lambda v: v.dtype == a.dtype and (a.kind == TILE or v.kind == SCALAR)) or a
        trips = self.rng.randint(0, 4)
        bound = _bound(a.dtype, a.lo + trips * min(b.lo, 0), a.hi + trips * max(b.hi, 0))
        if bound is None:
            return None
        body = "    {t} = {t} + {1}" if a.dtype in FLOAT_DTYPES or self.rng.random() < 0.5 \
            else "    {t} = ({t} ^ {1}) * 3"
        if "^" in body:
            bound = int_range(a.dtype)
        return Stmt(self._fresh(a.dtype, a.kind, *bound), (a.name, b.name),
                    ("{t} = {0}", f"for _ in range({trips}):", body), "for")

    def while_loop(self) -> Optional[Stmt]:
        a = self._pick()
        b = self._pick(lambda v: v.dtype == a.dtype and (a.kind == TILE or v.kind == SCALAR)) or a
        trips = self.rng.randint(0, 3)
        bound = _bound(a.dtype, min(a.lo, b.lo), max(a.hi, b.hi) + trips)
        if bound is None:
            return None
        return Stmt(self._fresh(a.dtype, a.kind, *bound), (a.name, b.name),
                    ("{t} = {0}", "j_{t} = 0", f"while j_{{t}} < {trips}:",
                     "    {t} = tl.maximum({t}, {1}) + 1", "    j_{t} += 1"), "while")

    def if_else(self) -> Optional[Stmt]:
        s = self._pick(lambda v: v.kind == SCALAR)
        if s is None:
            return None
        s2 = self._same(s, tile_ok=False)
        x = self._pick()
        y = self._same(x)
        bound = _bound(x.dtype, min(x.lo - y.hi, x.lo + y.lo), max(x.hi + y.hi, x.hi - y.lo))
        if bound is None:
            return None
        return Stmt(self._fresh(x.dtype, self._kind(x, y), *bound), (s.name, s2.name, x.name, y.name),
                    ("if {0} >= {1}:", "    {t} = {2} + {3}", "else:", "    {t} = {2} - {3}"), "if")

    def program_id(self) -> Optional[Stmt]:
        a = self._pick()
        bound = _bound(a.dtype, a.lo, a.hi + 3)
        if bound is None:
            return None
        return Stmt(self._fresh(a.dtype, a.kind, *bound), (a.name,),
                    (f"{{t}} = {{0}} + (pid % 4).to({tl_dtype_name(a.dtype)})",), "program_id")

    def math(self) -> Optional[Stmt]:
        floats = [d for d in self.dtypes if d in FLOAT_DTYPES]
        if self.rng.random() < 0.5 or sum(1 for s in self.stmts if s.target.math) >= MAX_MATH:
            return None                 # a third of the kernels, not most of them
        dtype, fn = self.rng.choice(floats), self.rng.choice(MATH_FUNCTIONS)
        self.counter += 1
        argument = Var(f"m{self.counter}", dtype, TILE, float("-inf"), float("inf"))
        self.extra_inputs.append(
            Input(argument, mixed_magnitudes(self.np_rng, fn, dtype, self.n)))
        return Stmt(self._fresh_math(dtype, fn), (argument.name,), (f"{{t}} = tl.{fn}({{0}})",),
                    f"math_{fn}")

    def _fresh_math(self, dtype: str, fn: str) -> Var:
        self.counter += 1
        return Var(f"v{self.counter}", dtype, TILE, float("-inf"), float("inf"), math=fn)

    BUILDERS = ("binary", "binary", "binary", "unary", "cast", "cast", "where", "reduce", "scan",
                "for_loop", "while_loop", "if_else", "program_id", "math")

    # -- parameters sharing memory -----------------------------------------------------------
    def share_memory(self, inputs: list[Input], stored: list[Var], n: int,
                     programs: int, block: int) -> tuple[list[Input], dict[str, Share]]:
        """Make some parameters share an allocation (see the module docstring); returns the
        inputs (an input passed twice takes the other's values) and the shares."""
        if self.rng.random() >= SHARING:
            return inputs, {}
        tiles = [i for i in inputs if i.var.kind == TILE and i.var.name.startswith("x")]
        outs = [v for v in stored if v.kind == TILE and not v.math]
        ways = ["twice", "in_place", "same_output", "side_by_side"] + \
            (["overlap"] if programs == 1 and n > 1 else [])
        way = self.rng.choice(ways)
        group = "g0"
        if way == "twice":
            pairs = [(a, b) for a in tiles for b in tiles
                     if a is not b and a.var.dtype == b.var.dtype]
            if not pairs:
                return inputs, {}
            a, b = self.rng.choice(pairs)
            inputs = [Input(i.var, a.data.copy()) if i is b else i for i in inputs]
            return inputs, {f"in_{a.var.name}": Share(group, 0), f"in_{b.var.name}": Share(group, 0)}
        if way == "same_output":
            pairs = [(a, b) for a in outs for b in outs if a is not b and a.dtype == b.dtype]
            if not pairs:
                return inputs, {}
            a, b = self.rng.choice(pairs)
            return inputs, {f"out_{a.name}": Share(group, 0), f"out_{b.name}": Share(group, 0)}
        pairs = [(i, v) for i in tiles for v in outs if i.var.dtype == v.dtype]
        if not pairs:
            return inputs, {}
        x, v = self.rng.choice(pairs)
        source, target = f"in_{x.var.name}", f"out_{v.name}"
        if way == "in_place":
            return inputs, {source: Share(group, 0), target: Share(group, 0)}
        if way == "side_by_side":       # one allocation, disjoint views: either one first
            gap = self.rng.randint(0, 3)
            if self.rng.random() < 0.5:
                return inputs, {source: Share(group, 0), target: Share(group, n + gap)}
            return inputs, {target: Share(group, 0), source: Share(group, programs * block + gap)}
        shift = self.rng.randint(1, n - 1) if n > 2 else 1   # one program: loads before stores
        if self.rng.random() < 0.5:
            return inputs, {source: Share(group, 0), target: Share(group, shift)}
        return inputs, {target: Share(group, 0), source: Share(group, shift)}

    # -- whole programs ----------------------------------------------------------------------
    def generate(self) -> Program:
        block = self.rng.choice([16, 32, 64, 128])
        n = self.rng.randint(1, 3 * block)
        self.n = n
        inputs = []
        for i in range(self.rng.randint(2, 4)):
            inputs.append(self._input(f"x{i}", TILE, n))
        for i in range(self.rng.randint(0, 2)):
            inputs.append(self._input(f"s{i}", SCALAR, n))
        target = self.rng.randint(3, self.max_stmts)
        attempts = 0
        while len(self.stmts) < target and attempts < 20 * self.max_stmts:
            attempts += 1
            stmt = getattr(self, self.rng.choice(self.BUILDERS))()
            if stmt is not None:
                self.stmts.append(stmt)
                if not stmt.target.math:       # a math result is checked, never used
                    self.vars.append(stmt.target)
        inputs += self.extra_inputs
        programs = -(-n // block)
        inputs, shares = self.share_memory(inputs, [s.target for s in self.stmts], n,
                                           programs, block)
        program = Program(self.seed, inputs, self.stmts, n, block, shares=shares)
        if shares:          # where memory is shared, argument order matters to a careless copy
            names = [name for name, _, _, _ in program.params()]
            self.rng.shuffle(names)
            program = program.replace(order=tuple(names))
        return program

    def _input(self, name: str, kind: str, n: int) -> Input:
        dtype = self.rng.choice(self.dtypes)
        lo, hi = (0.0, 20.0) if dtype.startswith("u") else (-20.0, 20.0)
        if dtype == "bf16":
            lo, hi = max(lo, -8.0), 8.0
        var = Var(name, dtype, kind, lo, hi)
        self.vars.append(var)
        return Input(var, input_data(self.np_rng, var, n))


def mixed_magnitudes(rng: np.random.Generator, fn: str, dtype: str, n: int) -> np.ndarray:
    """``n`` arguments for ``fn`` in ``dtype`` mixing tiny, moderate and huge magnitudes
    (one of each at least, where ``n`` allows), of either sign unless ``fn`` needs positive
    ones.  An argument whose exact result would be subnormal is replaced by 1.5: a backend
    may flush those to zero (the conformance suite does not ask for them either)."""
    from ..catalogue.math_fns import _reference
    classes = rng.integers(0, 3, size=n)
    classes[:3] = rng.permutation(3)[:min(n, 3)]
    ranges = np.array(MAGNITUDES[dtype])
    lo, hi = np.log(ranges[classes, 0]), np.log(ranges[classes, 1])
    x = np.exp(rng.uniform(lo, hi))
    if fn not in POSITIVE_ONLY:
        x = np.where(rng.random(n) < 0.5, -x, x)
    x = x.astype(np_dtype(dtype))
    fmt = FLOAT_FORMATS[dtype]
    with np.errstate(all="ignore"):
        result = round_to_format(_reference(fn, x.astype(wide_float(dtype))), dtype)
    subnormal = (result != 0) & (np.abs(result) < 2.0 ** fmt.emin)
    return np.where(subnormal, np.asarray(1.5, dtype=x.dtype), x).astype(x.dtype)


def fuzz_dtypes(capabilities: frozenset) -> tuple[str, ...]:
    """The dtypes generated kernels use on a backend with ``capabilities``."""
    floats = ["f32"] + [d for d, cap in (("f16", "fp16"), ("bf16", "bf16"), ("f64", "fp64"))
                        if cap in capabilities]
    return INT_FUZZ_DTYPES + tuple(floats)


def generate(seed: int, capabilities: frozenset, max_stmts: int = 14) -> Program:
    """One random well-defined program."""
    return KernelGenerator(seed, fuzz_dtypes(capabilities), max_stmts).generate()
