"""The passes of the ``laid-out ir`` stage, in order, as data (``GPU_PASSES``).

Each ``GpuPass`` is a name, a function of the stage's shared state (``LayOut``), the condition
under which it runs and the ``metadata`` key its result is kept under.  ``run_passes`` runs
them in one loop, verifying the IR after each (when ``ANYTILE_VERIFY`` is set) and showing it
to an observer (``ANYTILE_GPU_DUMP``: a folder that gets one file per pass).  A backend puts its
own passes in by name (``dialects.PassPlacement``); ``pass_order(target)`` is the result.

1. ``insert_bounds_checks`` (debug: checked mode, ``codegen.bounds_checks``);
2. ``order_reductions``: reductions that are not commutative become ordered scans;
3. ``select_dot_strategies``: the target's dot strategies, seeing the kernel's chained dots;
4. with ``num_stages`` > 1 (``pipeline.py``): ``load_transposed``, ``narrow_float8_dots``,
   ``split_loop_addresses``, ``stage_invariant_operands``, ``pipeline_dot_operands`` (loads
   feeding matrix-instruction dots go through shared-memory pipelines) and ``pipeline_loops``
   (other loop loads prefetched in registers);
5. ``plan_persistent_shared``: the bytes the pipelines' buffers take;
6. ``assign_layouts``: the axis analysis and a layout on every tile value, each dot planned
   by the target's strategies.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from ...backend import CompileOptions
from ...ir.nodes import Function, Module
from ...ir.printer import print_module
from ...ir.types import elem_type
from ...ir.verifier import verify_if_enabled
from ..bounds_checks import insert_bounds_checks
from .addresses import split_loop_addresses
from .assign import LaidOutKernel, assign_layouts
from .dot import DotSelector
from .narrow import narrow_float8_dots
from .ordered_reduce import order_reductions
from .pipeline import load_transposed, pipeline_dot_operands, pipeline_loops, stage_invariant_operands
from .shared import plan_persistent_shared
from .target import GpuTarget

__all__ = ["LayOut", "GpuPass", "GPU_PASSES", "pass_order", "run_passes"]


@dataclass(eq=False)
class LayOut:
    """What the passes of the ``laid-out ir`` stage share: the module (rewritten in place),
    the target, the options, the compiled kernel's ``metadata``, the dot strategies (once
    ``select_dot_strategies`` ran) and, at the end, the laid-out kernel."""

    module: Module
    target: GpuTarget
    options: CompileOptions
    metadata: dict
    dots: Optional[DotSelector] = None
    laid: Optional[LaidOutKernel] = None

    @property
    def kernel(self) -> Function:
        return self.module.kernel

    @property
    def pipelined(self) -> bool:
        return self.options.num_stages > 1

    def shared_limit(self) -> int:
        """The shared memory the pipelines may fill: the target's, less what its dialects'
        lowerings keep (``GpuDialect.reserved_shared``, asked now)."""
        kept = sum(d.reserved_shared(self.kernel) for d in self.target.dialects
                   if d.reserved_shared is not None)
        return self.target.shared_memory_limit - kept


def _always(state: LayOut) -> bool:
    return True


@dataclass(frozen=True)
class GpuPass:
    """One step of the ``laid-out ir`` stage: ``run(state)`` rewrites ``state.module`` in
    place (or computes a fact), where ``when(state)``; its result is kept in
    ``metadata[metadata]`` when that is given.  ``name`` is what verification errors, dumps
    and ``PassPlacement`` call it."""

    name: str
    run: Callable[[LayOut], Any]
    when: Callable[[LayOut], bool] = field(default=_always)
    metadata: str = ""


def _pipelined(state: LayOut) -> bool:
    return state.pipelined


def _select_dots(state: LayOut) -> None:
    state.dots = DotSelector(state.target, state.options.num_warps, state.kernel)


def _narrow(state: LayOut) -> int:
    dots = state.dots
    return narrow_float8_dots(state.kernel,
                              lambda d, a, b: dots.reads_narrow(d, elem_type(a.type), elem_type(b.type)))


def _stage_invariant(state: LayOut) -> int:
    return stage_invariant_operands(state.kernel, state.dots.reads_shared, state.shared_limit(),
                                    state.dots.operand_buffers)


def _pipeline_dots(state: LayOut) -> int:
    return pipeline_dot_operands(state.kernel, state.options.num_stages, state.dots.reads_shared,
                                 state.shared_limit(), state.dots.operand_buffers)


def _assign(state: LayOut) -> None:
    state.laid = assign_layouts(state.module, state.options.num_warps, state.target.warp_size,
                                state.dots.plan)


GPU_PASSES: tuple[GpuPass, ...] = (
    GpuPass("insert_bounds_checks", lambda s: insert_bounds_checks(s.kernel),
            lambda s: s.options.debug, "bounds_params"),
    GpuPass("order_reductions", lambda s: order_reductions(s.module)),
    GpuPass("select_dot_strategies", _select_dots),
    GpuPass("load_transposed", lambda s: load_transposed(s.kernel), _pipelined),
    GpuPass("narrow_float8_dots", _narrow, _pipelined, "float8_dots"),
    GpuPass("split_loop_addresses", lambda s: split_loop_addresses(s.kernel), _pipelined,
            "split_addresses"),
    GpuPass("stage_invariant_operands", _stage_invariant, _pipelined, "staged_dot_operands"),
    GpuPass("pipeline_dot_operands", _pipeline_dots, _pipelined, "pipelined_dot_operands"),
    GpuPass("pipeline_loops", lambda s: pipeline_loops(s.kernel), _pipelined, "prefetched_loads"),
    GpuPass("plan_persistent_shared", lambda s: plan_persistent_shared(s.kernel)[1],
            metadata="pipelined_shared"),
    GpuPass("assign_layouts", _assign),
)


def pass_order(target: GpuTarget) -> list[GpuPass]:
    """``GPU_PASSES`` with the passes of ``target``'s dialects placed by name, dialect after
    dialect; ``ValueError`` naming the passes there are when a placement names none."""
    order = list(GPU_PASSES)
    for dialect in target.dialects:
        for placement in dialect.passes:
            anchor = placement.before or placement.after
            names = [p.name for p in order]
            if anchor not in names:
                raise ValueError(f"dialect '{dialect.ir.name}' places pass "
                                 f"'{placement.pass_.name}' by '{anchor}', which is not a GPU "
                                 f"pass (there are: {', '.join(names)})")
            at = names.index(anchor) + (0 if placement.before else 1)
            order.insert(at, placement.pass_)
    return order


#: ``observe(index, pass name, module)`` after each pass that ran
Observer = Callable[[int, str, Module], None]


def run_passes(state: LayOut, passes: Sequence[GpuPass],
               observe: Optional[Observer] = None) -> None:
    """Run ``passes`` on ``state`` in order (see the module docstring)."""
    observe = observe or _dump_observer()
    for index, p in enumerate(passes):
        if not p.when(state):
            continue
        result = p.run(state)
        if p.metadata:
            state.metadata[p.metadata] = result
        verify_if_enabled(state.module, after=p.name)
        if observe is not None:
            observe(index, p.name, state.module)


def _dump_observer() -> Optional[Observer]:
    """With ``ANYTILE_GPU_DUMP`` naming a folder: each pass's IR written there, as
    ``<kernel>.<NN>.<pass>.ir``."""
    folder = os.environ.get("ANYTILE_GPU_DUMP", "")
    if not folder:
        return None

    def dump(index: int, name: str, module: Module) -> None:
        os.makedirs(folder, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", module.kernel_name)
        with open(os.path.join(folder, f"{stem}.{index:02d}.{name}.ir"), "w") as f:
            f.write(print_module(module))
    return dump
