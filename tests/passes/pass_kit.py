"""Snapshot pairs for passes: IR text in, expected IR text out, verified before and after."""
from __future__ import annotations

import textwrap
from typing import Sequence, Union

from anytile.ir.nodes import Module
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.verifier import verify_module
from anytile.passes import run_pass


def ir(text: str) -> str:
    """``text`` dedented, without the leading newline, ending in one newline."""
    return textwrap.dedent(text).strip("\n") + "\n"


def run_passes(passes: Union[str, Sequence[str]], before: str) -> Module:
    module = parse_module(ir(before))
    verify_module(module)
    for name in [passes] if isinstance(passes, str) else passes:
        run_pass(module, name, verify=True)
    return module


def check(passes: Union[str, Sequence[str]], before: str, after: str) -> Module:
    """Running ``passes`` on ``before`` prints exactly ``after`` (which must itself parse)."""
    module = run_passes(passes, before)
    assert print_module(module) == ir(after)
    assert print_module(parse_module(ir(after))) == ir(after)
    return module
