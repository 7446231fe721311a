"""Device-independent passes over the tile IR, and the default pipeline.

Every pass is a plain function ``pass_(module) -> bool`` that rewrites the module in place
and says whether it changed anything.  ``PASSES`` names them for tools and tests.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..ir.nodes import Module
from ..ir.verifier import IRVerificationError, verification_enabled, verify_module
from .broadcast_dot import broadcast_products_to_dots
from .canonicalize import canonicalize
from .cse import cse
from ..ir.dce import dce
from .dot_accumulate import fuse_dot_accumulate
from .fold import fold_constants
from .inline import inline_calls

__all__ = ["PASSES", "run_default_pipeline", "run_pass", "canonicalize", "cse", "dce",
           "fold_constants", "inline_calls", "fuse_dot_accumulate", "broadcast_products_to_dots"]

Pass = Callable[[Module], bool]

PASSES: dict[str, Pass] = {
    "inline": inline_calls,
    "canonicalize": canonicalize,
    "fold": fold_constants,
    "cse": cse,
    "broadcast-dot": broadcast_products_to_dots,
    "dot-accumulate": fuse_dot_accumulate,
    "dce": dce,
}

_MAX_SIMPLIFY_ROUNDS = 16


def run_pass(module: Module, name: str, verify: Optional[bool] = None) -> bool:
    """Run the pass called ``name``; verify the module afterwards when ``verify`` (by
    default when ``ANYTILE_VERIFY`` is set: ``verification_enabled()``)."""
    changed = PASSES[name](module)
    if verify is None:
        verify = verification_enabled()
    if verify:
        try:
            verify_module(module)
        except IRVerificationError as e:
            raise IRVerificationError(f"after pass '{name}': {e}", e.op) from None
    return changed


def run_default_pipeline(module: Module, verify: Optional[bool] = None) -> Module:
    """inline; canonicalize + fold to a fixed point; cse; broadcast-dot; dot-accumulate; dce
    (verifying after each pass when ``verify``, by default when ``verification_enabled()``).
    Returns ``module``, rewritten in place."""
    if verify is None:
        verify = verification_enabled()
    run_pass(module, "inline", verify)
    for _ in range(_MAX_SIMPLIFY_ROUNDS):
        changed = run_pass(module, "canonicalize", verify)
        changed |= run_pass(module, "fold", verify)
        if not changed:
            break
    run_pass(module, "cse", verify)
    run_pass(module, "broadcast-dot", verify)
    run_pass(module, "dot-accumulate", verify)
    run_pass(module, "dce", verify)
    return module
