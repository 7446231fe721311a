"""Shrinking a failing program to a small reproducer (delta debugging over statements).

1. Keep only the first differing variable's output and the statements it depends on.
2. Try a smaller launch (fewer elements, a 16-wide tile; one program while views overlap).
3. Repeatedly try to replace one statement by a fresh input of the same dtype, kind and
   value range (its dependencies then fall away); keep every replacement after which the
   program still fails.  Stops when no single replacement keeps the failure (1-minimal).
``still_fails(program) -> bool`` is the only contact with devices, so the shrinker can be
tested with a planted predicate."""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

from .program import TILE, Input, Program, Stmt, input_data

Predicate = Callable[[Program], bool]


def dependency_cone(program: Program, roots: list[str]) -> Program:
    """``program`` restricted to the statements (and inputs) ``roots`` depend on, storing
    only ``roots``."""
    defining = {s.target.name: s for s in program.stmts}
    needed: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        if name in defining:
            stack.extend(defining[name].args)
    return program.replace(stmts=[s for s in program.stmts if s.target.name in needed],
                           inputs=[i for i in program.inputs if i.var.name in needed],
                           outputs=[r for r in roots])


def replace_with_input(program: Program, stmt: Stmt, seed: int) -> Program:
    """``stmt``'s variable becomes an input (same name, dtype and kind, values inside its
    range), then statements and inputs nothing needs any more are dropped."""
    var = stmt.target
    lo, hi = max(var.lo, -20.0), min(var.hi, 20.0)
    if lo > hi:
        lo = hi = var.lo if var.lo > 20.0 else var.hi
    leaf_var = dataclasses.replace(var, lo=lo, hi=hi)
    leaf = Input(leaf_var, input_data(np.random.default_rng(seed), leaf_var, program.n))
    roots = program.outputs or [s.target.name for s in program.stmts if s is not stmt]
    changed = program.replace(stmts=[s for s in program.stmts if s is not stmt],
                              inputs=program.inputs + [leaf], outputs=list(program.outputs))
    return dependency_cone(changed, roots)


def with_launch(program: Program, n: int, block: int) -> Program:
    """``program`` over the first ``n`` elements with tiles of ``block``."""
    inputs = [dataclasses.replace(i, data=i.data[:n]) if i.var.kind == TILE else i
              for i in program.inputs]
    return program.replace(n=n, block=block, inputs=inputs)


def shrink_launch(program: Program, still_fails: Predicate) -> Program:
    """The smallest of a few launch sizes (one 16-wide program first) that still fails."""
    for block in sorted({16, program.block}):
        for n in sorted({1, min(program.n, block), min(program.n, 2 * block)}):
            if (n, block) == (program.n, program.block):
                return program
            candidate = with_launch(program, n, block)
            if candidate.programs > 1 and candidate.overlapping():
                continue        # views overlapping at a shift are defined in one program only
            if still_fails(candidate):
                return candidate
    return program


def shrink(program: Program, still_fails: Predicate, first_bad: Optional[str] = None,
           max_tries: int = 200) -> Program:
    """A smaller program for which ``still_fails`` holds (``program`` if nothing smaller)."""
    current = program
    if first_bad is not None:
        candidate = dependency_cone(program, [first_bad])
        if still_fails(candidate):
            current = candidate
    current = shrink_launch(current, still_fails)
    tries = 0
    progress = True
    while progress and tries < max_tries:
        progress = False
        for stmt in list(current.stmts):
            if stmt.target.name in current.outputs:
                continue        # the differing statement itself stays
            tries += 1
            candidate = replace_with_input(current, stmt, seed=tries)
            if still_fails(candidate):
                current = candidate
                progress = True
                break
            if tries >= max_tries:
                break
    return current
