"""Helpers shared by the IR tests: dedented text, parse + verify + round-trip checks."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from anytile.ir.nodes import Module
from anytile.ir.parser import parse_module
from anytile.ir.printer import print_module
from anytile.ir.verifier import IRVerificationError, verify_module


#: A module using every op of ops.py (regions, nested loops, multi-result reduce, calls).
ALL_OPS = (Path(__file__).parent / "all_ops.ir").read_text()


def ir(text: str) -> str:
    """``text`` dedented, without the leading newline, ending in one newline."""
    return textwrap.dedent(text).strip("\n") + "\n"


def parse_verified(text: str) -> Module:
    module = parse_module(ir(text))
    verify_module(module)
    return module


def assert_round_trip(text: str, locs: bool = False) -> Module:
    """``text`` is exactly what the printer writes for the module it parses to."""
    text = ir(text)
    module = parse_module(text)
    verify_module(module)
    assert print_module(module, locs=locs) == text
    again = parse_module(print_module(module, locs=locs))
    assert print_module(again, locs=locs) == text
    return module


def assert_verify_fails(text: str, *fragments: str) -> IRVerificationError:
    """The module of ``text`` parses but does not verify, with every fragment in the error."""
    module = parse_module(ir(text))
    with pytest.raises(IRVerificationError) as info:
        verify_module(module)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return info.value
