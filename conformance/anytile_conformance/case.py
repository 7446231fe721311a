"""Cases, families of cases, and the context a case runs in.

A *family* is a function of keyword parameters registered with ``@family(area, quick=...,
full=...)``; it expands to one ``Case`` per combination of parameter values.  A case that
uses a dtype needs that dtype's capability (``f64`` -> ``fp64``...) automatically; other
needs are declared with ``needs=``.  The case body gets a ``CaseContext``: a device, a random
generator seeded from the suite seed and the case id, and helpers that poison outputs and
compare against the oracle.
"""
from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

import numpy as np

from . import numerics, oracle
from .tolerances import Tolerance

AREAS = ("memory", "arithmetic", "compare-bitwise", "math", "casts", "reductions", "shapes",
         "dot", "control-flow", "atomics", "programs", "constexpr", "kernels")


class CaseFailure(AssertionError):
    """A case's output does not conform."""


@dataclass(frozen=True)
class Case:
    """One runnable check: ``area/name[params]``."""

    area: str
    name: str
    params: tuple[tuple[str, Any], ...]
    body: Callable[..., None] = field(compare=False, repr=False)
    needs: frozenset = frozenset()

    @property
    def id(self) -> str:
        inner = "-".join(f"{k}={_param_text(v)}" for k, v in self.params)
        return f"{self.area}/{self.name}[{inner}]" if inner else f"{self.area}/{self.name}"

    def run(self, ctx: "CaseContext") -> None:
        self.body(ctx, **dict(self.params))


def _param_text(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return "x".join(str(v) for v in value)
    return str(value)


@dataclass
class Family:
    """A parametrised case generator."""

    area: str
    name: str
    body: Callable[..., None]
    quick: dict[str, Sequence[Any]]
    full: dict[str, Sequence[Any]]
    needs: Callable[[dict[str, Any]], Iterable[str]]
    where: Optional[Callable[..., bool]] = None

    def expand(self, mode: str) -> Iterator[Case]:
        grid = self.quick if mode == "quick" else {**self.quick, **self.full}
        keys = list(grid)
        for values in itertools.product(*(grid[k] for k in keys)):
            params = dict(zip(keys, values))
            if self.where is not None and not self.where(**params):
                continue
            needs = set(self.needs(params))
            needs |= {numerics.DTYPE_CAPABILITY[v] for v in values
                      if isinstance(v, str) and v in numerics.DTYPE_CAPABILITY}
            yield Case(self.area, self.name, tuple(params.items()), self.body, frozenset(needs))


FAMILIES: list[Family] = []


def family(area: str, quick: Optional[dict[str, Sequence[Any]]] = None,
           full: Optional[dict[str, Sequence[Any]]] = None,
           needs: Iterable[str] | Callable[[dict[str, Any]], Iterable[str]] = (),
           where: Optional[Callable[..., bool]] = None) -> Callable:
    """Register the decorated function as a family of cases in ``area``.  ``quick`` gives
    the parameter values of quick mode; ``full`` overrides some of them for full mode;
    ``where(**params)`` drops meaningless combinations."""
    if area not in AREAS:
        raise ValueError(f"unknown area {area!r}; areas: {AREAS}")
    need_fn = needs if callable(needs) else (lambda _p, fixed=frozenset(needs): fixed)

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        FAMILIES.append(Family(area, fn.__name__, fn, dict(quick or {}), dict(full or {}),
                               need_fn, where))
        return fn
    return register


def case_seed(suite_seed: int, case_id: str) -> int:
    """A seed that depends only on the suite seed and the case id, so each case can be re-run
    alone and gets the same inputs."""
    digest = hashlib.sha256(f"{suite_seed}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


class CaseContext:
    """What a case body uses: ``device``, ``rng``, ``random``, ``input``, ``output``,
    ``tl_dtype``, ``launch``, ``check``."""

    def __init__(self, device: Any, case: Case, suite_seed: int,
                 capabilities: frozenset) -> None:
        self.device = device
        self.case = case
        self.seed = case_seed(suite_seed, case.id)
        self.rng = np.random.default_rng(self.seed)
        self.capabilities = capabilities

    # -- data ------------------------------------------------------------------------------
    def random(self, shape, dtype: str, low: Optional[float] = None,
               high: Optional[float] = None, nonzero: bool = True) -> np.ndarray:
        """A random host array (never zero unless ``nonzero=False``)."""
        return numerics.random_array(self.rng, shape, dtype, low, high, nonzero)

    def input(self, host: np.ndarray) -> Any:
        """``host`` copied to the device (a copy even on host-memory backends, where
        ``at.asarray`` works in place: references must see the original values)."""
        import anytile as at
        return at.asarray(np.array(host, copy=True, order="C"), device=self.device)

    def output(self, shape, dtype: str) -> Any:
        """A device array of ``shape`` filled with ``dtype``'s poison pattern."""
        import anytile as at
        if isinstance(shape, int):
            shape = (shape,)
        return at.asarray(numerics.poison(shape, dtype), device=self.device)

    @staticmethod
    def tl_dtype(dtype: str) -> Any:
        """The ``anytile.language`` dtype object named by IR name ``dtype``."""
        import anytile.language as tl
        return getattr(tl, numerics.TL_NAMES[dtype])

    # -- running and checking ----------------------------------------------------------------
    def launch(self, kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> None:
        kernel[grid](*args, **kwargs)

    def check(self, label: str, got: Any, expected: np.ndarray, dtype: str,
              tolerance: Tolerance, magnitude: Optional[np.ndarray] = None,
              unwritten: Optional[np.ndarray] = None) -> None:
        """Fail the case unless ``got`` (a device or host array) matches ``expected`` within
        ``tolerance``; ``unwritten`` marks elements that must keep the poison."""
        host = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
        mismatch = oracle.compare(label, host, expected, dtype, tolerance, magnitude, unwritten)
        if mismatch is not None:
            raise CaseFailure(f"{mismatch}\n    (case seed {self.seed})")


def expand_all(mode: str) -> list[Case]:
    """Every case of the catalogue in ``mode``, in catalogue order, ids unique."""
    from . import catalogue  # noqa: F401  (registers the families)
    cases = [case for fam in FAMILIES for case in fam.expand(mode)]
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise RuntimeError(f"duplicate conformance case id {case.id}")
        seen.add(case.id)
    return cases
