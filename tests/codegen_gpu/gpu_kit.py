"""Snapshot pairs for the GPU passes: IR text in, expected IR text out (layouts and the
shared-memory dialect included), verified before and after, the expected text parsing back."""
from __future__ import annotations

import textwrap
from typing import Any, Callable

import anytile.codegen.gpu  # noqa: F401 -- registers the GPU layouts' and types' text forms
from anytile.ir.core import Module
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.verifier import verify_module


def ir(text: str) -> str:
    """``text`` dedented, without the leading newline, ending in one newline."""
    return textwrap.dedent(text).strip("\n") + "\n"


def check(run: Callable[[Module], Any], before: str, after: str) -> Any:
    """``run(module)`` rewrites the module parsed from ``before`` (in place) into exactly
    ``after``; returns what ``run`` returned."""
    module = parse_module(ir(before))
    verify_module(module)
    out = run(module)
    verify_module(module)
    assert print_module(module) == ir(after)
    again = parse_module(ir(after))
    verify_module(again)
    assert print_module(again) == ir(after)
    return out
