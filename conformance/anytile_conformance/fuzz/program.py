"""A generated kernel as data: inputs, a list of statements, and their Python source.

Every statement defines one variable (a ``BLOCK`` tile or a scalar) from earlier variables;
the kernel stores every variable to its own output, so a mismatch points at the first
statement that differs.  Statements are kept as source templates (``{0}``, ``{1}`` name the
arguments, ``{t}`` the target) so the shrinker can drop or replace them and re-render."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..numerics import TL_NAMES, np_dtype

TILE, SCALAR = "tile", "scalar"


@dataclass(frozen=True)
class Var:
    """A variable of the generated kernel: ``kind`` is ``tile`` or ``scalar``; ``lo``/``hi``
    bound its values (the generator keeps float values exact integers inside a bound)."""

    name: str
    dtype: str
    kind: str
    lo: float
    hi: float


@dataclass(frozen=True)
class Stmt:
    """``target = ...``: ``lines`` are source lines with ``{t}`` for the target and ``{0}``,
    ``{1}``... for ``args`` (variable names)."""

    target: Var
    args: tuple[str, ...]
    lines: tuple[str, ...]
    op: str

    def render(self) -> list[str]:
        return [line.format(*self.args, t=self.target.name) for line in self.lines]


@dataclass(frozen=True)
class Input:
    """An input array (tile inputs have ``n`` elements, scalar inputs one)."""

    var: Var
    data: np.ndarray = field(compare=False)


@dataclass
class Program:
    """A complete generated kernel and its launch: ``n`` elements, ``BLOCK``, ``programs``."""

    seed: int
    inputs: list[Input]
    stmts: list[Stmt]
    n: int
    block: int
    outputs: list[str] = field(default_factory=list)    # empty: every variable

    def variables(self) -> dict[str, Var]:
        found = {i.var.name: i.var for i in self.inputs}
        found.update({s.target.name: s.target for s in self.stmts})
        return found

    @property
    def programs(self) -> int:
        return -(-self.n // self.block)

    def stored(self) -> list[Var]:
        """The variables the kernel stores, in definition order."""
        variables = self.variables()
        names = self.outputs or [s.target.name for s in self.stmts]
        return [variables[n] for n in names]

    def replace(self, **changes) -> "Program":
        return dataclasses.replace(self, **changes)

    def source(self, kernel_name: str = "fuzz_kernel") -> str:
        """The kernel as a Python module (imported from a file, so ``@at.jit`` sees its source)."""
        params = [f"in_{i.var.name}" for i in self.inputs] + \
                 [f"out_{v.name}" for v in self.stored()] + ["n", "BLOCK: tl.constexpr"]
        body = ["pid = tl.program_id(0)",
                "offs = pid * BLOCK + tl.arange(0, BLOCK)",
                "mask = offs < n"]
        for inp in self.inputs:
            v = inp.var
            if v.kind == TILE:
                body.append(f"{v.name} = tl.load(in_{v.name} + offs, mask=mask, other=1)")
            else:
                body.append(f"{v.name} = tl.load(in_{v.name})")
        for stmt in self.stmts:
            body.extend(stmt.render())
        for v in self.stored():
            if v.kind == TILE:
                body.append(f"tl.store(out_{v.name} + offs, {v.name}, mask=mask)")
            else:
                body.append(f"tl.store(out_{v.name} + pid, {v.name})")
        lines = ["import anytile as at", "import anytile.language as tl", "", "",
                 "@at.jit", f"def {kernel_name}({', '.join(params)}):"]
        lines += ["    " + line for line in body]
        return "\n".join(lines) + "\n"

    def output_shape(self, var: Var) -> tuple[int, ...]:
        return (self.programs * self.block,) if var.kind == TILE else (self.programs,)


def tl_dtype_name(dtype: str) -> str:
    return f"tl.{TL_NAMES[dtype]}"


def input_data(rng: np.random.Generator, var: Var, n: int) -> np.ndarray:
    """Random integer values in ``[lo, hi]`` (exact in every dtype the generator uses)."""
    size = n if var.kind == TILE else 1
    values = rng.integers(int(var.lo), int(var.hi), size=size, endpoint=True)
    return values.astype(np_dtype(var.dtype))
