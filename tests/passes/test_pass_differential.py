"""The default pipeline preserves meaning: random kernels give bit-identical results on the
reference interpreter before and after it (NaNs compared by position)."""
from __future__ import annotations

import numpy as np
import pytest

from anytile.backend import KernelArg, PointerArg
from anytile.interpreter import InterpreterBackend
from anytile.ir.nodes import Module
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.types import scalar_type
from anytile.ir.verifier import verify_module
from anytile.passes import run_default_pipeline

BACKEND = InterpreterBackend()
DEVICE = BACKEND.devices()[0]
N = 16
STORED = 6

INT_KINDS = ["add", "sub", "mul", "div", "rem", "and", "or", "xor", "shl", "shr", "min", "max"]
FLOAT_KINDS = ["add", "sub", "mul", "fdiv", "div", "rem", "min", "max"]
SPECIAL_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, float("inf"), float("-inf"), float("nan")]


class _Program:
    """Random straight-line code with ifs and loops over ``tile<16xT>`` values."""

    def __init__(self, rng: np.random.Generator, ty: str) -> None:
        self.rng = rng
        self.ty = ty
        self.t = scalar_type(ty)
        self.tile = f"tile<{N}x{ty}>"
        self.lines: list[str] = []
        self.pool = ["%x", "%y"]
        self.counter = 0

    def fresh(self) -> str:
        self.counter += 1
        return f"%v{self.counter}"

    def emit(self, text: str, indent: int = 1) -> None:
        self.lines.append("  " * indent + text)

    def constant_literal(self) -> str:
        if self.t.is_float:
            value = SPECIAL_FLOATS[self.rng.integers(len(SPECIAL_FLOATS))]
            return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(repr(value), repr(value))
        lo = 0 if self.t.is_unsigned else -(1 << (self.t.bits - 1))
        choices = [0, 1, 2, 3, self.t.bits - 1, (1 << (self.t.bits - 1)) - 1, lo,
                   int(self.rng.integers(lo, 1 << (self.t.bits - 1)))]
        if not self.t.is_unsigned:
            choices.append(-1)
        return str(choices[self.rng.integers(len(choices))])

    def constant(self, indent: int) -> str:
        name = self.fresh()
        if self.rng.random() < 0.5:
            self.emit(f"{name} = constant {{value = {self.constant_literal()}}} : {self.tile}",
                      indent)
        else:
            scalar = self.fresh()
            self.emit(f"{scalar} = constant {{value = {self.constant_literal()}}} : {self.ty}",
                      indent)
            self.emit(f"{name} = splat ({scalar}) : {self.tile}", indent)
        return name

    def operand(self, indent: int, pool: list[str]) -> str:
        if self.rng.random() < 0.4:
            return self.constant(indent)
        return pool[self.rng.integers(len(pool))]

    def op(self, indent: int, pool: list[str]) -> str:
        a, b = self.operand(indent, pool), self.operand(indent, pool)
        name = self.fresh()
        roll = self.rng.random()
        if roll < 0.55:
            kinds = FLOAT_KINDS if self.t.is_float else INT_KINDS
            kind = kinds[self.rng.integers(len(kinds))]
            self.emit(f'{name} = binary {{kind = "{kind}"}} ({a}, {b}) : {self.tile}', indent)
        elif roll < 0.7:
            kind = ["neg", "abs"] + (["floor", "sqrt"] if self.t.is_float else ["not"])
            k = kind[self.rng.integers(len(kind))]
            self.emit(f'{name} = unary {{kind = "{k}"}} ({a}) : {self.tile}', indent)
        elif roll < 0.85:
            pred = ["eq", "ne", "lt", "le", "gt", "ge"][self.rng.integers(6)]
            cond = self.fresh()
            self.emit(f'{cond} = compare {{pred = "{pred}"}} ({a}, {b}) : tile<{N}xi1>', indent)
            self.emit(f"{name} = select ({cond}, {a}, {b}) : {self.tile}", indent)
        else:
            wide = "f64" if self.t.is_float else "i64"
            mid = self.fresh()
            self.emit(f"{mid} = cast ({a}) : tile<{N}x{wide}>", indent)
            self.emit(f"{name} = cast ({mid}) : {self.tile}", indent)
        return name

    def loop(self) -> str:
        lo, hi = int(self.rng.integers(0, 3)), int(self.rng.integers(0, 4))
        names = [self.fresh() for _ in range(4)]
        self.emit(f"{names[0]} = constant {{value = {lo}}} : i32")
        self.emit(f"{names[1]} = constant {{value = {hi}}} : i32")
        self.emit(f"{names[2]} = constant {{value = 1}} : i32")
        init = self.pool[self.rng.integers(len(self.pool))]
        result, iv, carried = self.fresh(), self.fresh(), self.fresh()
        self.emit(f"{result} = for ({names[0]}, {names[1]}, {names[2]}, [{init}]) : "
                  f"{self.tile} {{")
        self.emit(f"^({iv}: i32, {carried}: {self.tile}):")
        inner = [carried] + self.pool
        for _ in range(int(self.rng.integers(1, 4))):
            inner.append(self.op(2, inner))
        self.emit(f"yield ([{inner[-1]}])", 2)
        self.emit("}")
        return result

    def branch(self) -> str:
        cond = self.fresh()
        self.emit(f"{cond} = constant {{value = {int(self.rng.integers(2))}}} : i1")
        result = self.fresh()
        self.emit(f"{result} = if ({cond}) : {self.tile} {{")
        then_value = self.op(2, list(self.pool))
        self.emit(f"yield ([{then_value}])", 2)
        self.emit("} else_body {")
        else_value = self.op(2, list(self.pool))
        self.emit(f"yield ([{else_value}])", 2)
        self.emit("}")
        return result

    def text(self, n_ops: int) -> str:
        head = [f"kernel @k(%in: ptr<{self.ty}>, %out: ptr<{self.ty}>) {{",
                f"  %r = arange {{start = 0, end = {N}}} : tile<{N}xi32>",
                f"  %r2 = arange {{start = {N}, end = {2 * N}}} : tile<{N}xi32>",
                f"  %pin = splat (%in) : tile<{N}xptr<{self.ty}>>",
                f"  %px = addptr (%pin, %r) : tile<{N}xptr<{self.ty}>>",
                f"  %py = addptr (%pin, %r2) : tile<{N}xptr<{self.ty}>>",
                f"  %x = load (%px, none, none) : {self.tile}",
                f"  %y = load (%py, none, none) : {self.tile}",
                ]
        for _ in range(n_ops):
            roll = self.rng.random()
            value = self.loop() if roll < 0.1 else self.branch() if roll < 0.2 else \
                self.op(1, self.pool)
            self.pool.append(value)
        # store the last STORED values (not only the last one) so that most values are observed
        for k, value in enumerate(self.pool[-STORED:]):
            self.emit(f"%off{k} = constant {{value = {k * N}}} : i32")
            self.emit(f"%ptr{k} = addptr (%out, %off{k}) : ptr<{self.ty}>")
            self.emit(f"%pk{k} = splat (%ptr{k}) : tile<{N}xptr<{self.ty}>>")
            self.emit(f"%po{k} = addptr (%pk{k}, %r) : tile<{N}xptr<{self.ty}>>")
            self.emit(f"store (%po{k}, {value}, none)")
        return "\n".join(head + self.lines) + "\n}\n"


def _inputs(rng: np.random.Generator, ty: str) -> np.ndarray:
    t = scalar_type(ty)
    if t.is_float:
        values = rng.normal(0, 4, 2 * N)
        specials = np.array(SPECIAL_FLOATS)
        pick = rng.random(2 * N) < 0.4
        values[pick] = specials[rng.integers(len(specials), size=pick.sum())]
        return values.astype(t.np)
    info = np.iinfo(t.np)
    return rng.integers(info.min, int(info.max) + 1, 2 * N, dtype=t.np)


def _run(module: Module, data: np.ndarray) -> np.ndarray:
    out = np.full(N * STORED, 0x5A, np.uint8).repeat(data.itemsize).view(data.dtype)
    keep = [BACKEND.import_array(a, DEVICE) for a in (data, out)]
    args = [KernelArg(p.type, PointerArg(k.buffer, k.offset))
            for p, k in zip(module.kernel.args, keep)]
    BACKEND.launch(BACKEND.load(module, DEVICE), (1, 1, 1), args, DEVICE)
    return out


def _same(a: np.ndarray, b: np.ndarray, ty: str) -> bool:
    if scalar_type(ty).is_float:
        nan_a, nan_b = np.isnan(a.astype(np.float64)), np.isnan(b.astype(np.float64))
        bits = a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")
        return bool(np.array_equal(nan_a, nan_b) and np.array_equal(bits[0][~nan_a],
                                                                    bits[1][~nan_b]))
    return bool(np.array_equal(a, b))


@pytest.mark.parametrize("ty", ["i8", "i32", "u16", "f16", "bf16", "f32"])
def test_pipeline_preserves_results_of_random_kernels(ty):
    rng = np.random.default_rng(sum(map(ord, ty)))
    for case in range(16):
        program = _Program(rng, ty)
        text = program.text(n_ops=int(rng.integers(4, 14)))
        data = _inputs(rng, ty)
        before = parse_module(text)
        verify_module(before)
        expected = _run(before, data)
        after = run_default_pipeline(parse_module(text), verify=True)
        got = _run(after, data)
        assert _same(expected, got, ty), (
            f"case {case}: the pipeline changed the results\n{text}\n--- after ---\n"
            f"{print_module(after)}\nexpected {expected}\ngot      {got}")
