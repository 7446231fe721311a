"""A generated kernel as data: inputs, a list of statements, and their Python source.

Every statement defines one variable (a ``BLOCK`` tile or a scalar) from earlier variables;
the kernel stores every variable to its own output, so a mismatch points at the first
statement that differs.  Statements are kept as source templates (``{0}``, ``{1}`` name the
arguments, ``{t}`` the target) so the shrinker can drop or replace them and re-render.

Parameters may share memory (``Program.shares``): the same array passed twice, an output
written in place over an input, outputs and inputs side by side in one allocation, or (in a
one-program launch) views that overlap at a shift.  Each program touches only its own
elements of a shared allocation, and a program's loads all come before its stores (with
``tl.debug_barrier()`` between them where views overlap at a shift, as a GPU needs), so every
such kernel has one correct result."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..numerics import TL_NAMES, np_dtype, poison

TILE, SCALAR = "tile", "scalar"


@dataclass(frozen=True)
class Var:
    """A variable of the generated kernel: ``kind`` is ``tile`` or ``scalar``; ``lo``/``hi``
    bound its values (the generator keeps float values exact integers inside a bound).
    ``math`` names the function (``sin``...) of a math result: it is compared within the
    function's ULP bound, not bit for bit, and no statement uses it."""

    name: str
    dtype: str
    kind: str
    lo: float
    hi: float
    math: str = ""


@dataclass(frozen=True)
class Share:
    """A parameter (``in_x``, ``out_v``) that lives in the allocation ``group``, from its
    element ``offset``: the parameters of one group are views of one array."""

    group: str
    offset: int


@dataclass(frozen=True)
class Layout:
    """The memory a launch passes: ``groups`` are the allocations (dtype and initial
    contents: poison, with the inputs' values in their views), ``params`` the kernel's
    array parameters in order, each ``(name, group, offset, elements)``."""

    groups: dict[str, tuple[str, np.ndarray]]
    params: list[tuple[str, str, int, int]]

    def views(self, bases: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {name: bases[group][offset:offset + size]
                for name, group, offset, size in self.params}

    def shared_groups(self) -> list[str]:
        """The allocations more than one parameter lives in."""
        count: dict[str, int] = {}
        for _, group, _, _ in self.params:
            count[group] = count.get(group, 0) + 1
        return [g for g, c in count.items() if c > 1]


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
    shares: dict[str, Share] = field(default_factory=dict)   # parameter -> its allocation
    #: the array parameters' order in the kernel's signature (empty: inputs, then outputs);
    #: a backend copying each argument and copying the copies back in argument order gets
    #: a shared allocation right only when every input comes first
    order: tuple[str, ...] = ()

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
        params = [name for name, _, _, _ in self.params()] + ["n", "BLOCK: tl.constexpr"]
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
        if self.overlapping():
            # the lanes of a program run in no set order: a lane may store an element another
            # lane has still to load, unless every load is done before the first store
            body.append("tl.debug_barrier()")
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

    def defining(self, name: str) -> Optional[Stmt]:
        return next((s for s in self.stmts if s.target.name == name), None)

    def input_named(self, name: str) -> Optional[Input]:
        return next((i for i in self.inputs if i.var.name == name), None)

    def params(self) -> list[tuple[str, Var, int, Optional[np.ndarray]]]:
        """The array parameters in signature order: (name, variable, elements, input data)."""
        params: list[tuple[str, Var, int, Optional[np.ndarray]]] = []
        for i in self.inputs:
            params.append((f"in_{i.var.name}", i.var, self.n if i.var.kind == TILE else 1, i.data))
        for v in self.stored():
            params.append((f"out_{v.name}", v, self.output_shape(v)[0], None))
        if self.order:
            rank = {name: k for k, name in enumerate(self.order)}
            params.sort(key=lambda p: rank.get(p[0], len(rank)))
        return params

    def layout(self) -> Layout:
        """The allocations of this launch and where each array parameter lives in them."""
        sizes: dict[str, tuple[str, int]] = {}
        placed = []
        for name, var, size, data in self.params():
            share = self.shares.get(name)
            group, offset = (share.group, share.offset) if share else (f"@{name}", 0)
            dtype, end = sizes.get(group, (var.dtype, 0))
            sizes[group] = (dtype, max(end, offset + size))
            placed.append((name, group, offset, size, data))
        groups = {g: (dtype, poison((end,), dtype)) for g, (dtype, end) in sizes.items()}
        for _, group, offset, size, data in placed:
            if data is not None:
                groups[group][1][offset:offset + size] = data[:size]
        return Layout(groups, [(name, g, o, size) for name, g, o, size, _ in placed])

    def overlapping(self) -> bool:
        """Whether two parameters' views overlap at different offsets (well-defined only
        when one program runs: another program's stores would race with the loads)."""
        by_group: dict[str, list[tuple[int, int]]] = {}
        for _, group, offset, size in self.layout().params:
            by_group.setdefault(group, []).append((offset, size))
        for spans in by_group.values():
            for i, (a, an) in enumerate(spans):
                for b, bn in spans[i + 1:]:
                    if a != b and a < b + bn and b < a + an:
                        return True
        return False


def tl_dtype_name(dtype: str) -> str:
    return f"tl.{TL_NAMES[dtype]}"


def input_data(rng: np.random.Generator, var: Var, n: int) -> np.ndarray:
    """Random integer values in ``[lo, hi]`` (exact in every dtype the generator uses)."""
    size = n if var.kind == TILE else 1
    values = rng.integers(int(var.lo), int(var.hi), size=size, endpoint=True)
    return values.astype(np_dtype(var.dtype))
