"""``-k EXPR`` case selection, as in pytest: words are case-insensitive substrings of the case
id, combined with ``and``, ``or``, ``not`` and parentheses (``-k "memory and not f16"``)."""
from __future__ import annotations

import re
from typing import Callable

_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


class SelectionError(ValueError):
    """A ``-k`` expression that cannot be parsed."""


def compile_expression(text: str) -> Callable[[str], bool]:
    """A predicate on case ids for the ``-k`` expression ``text``."""
    tokens = [m.group(1) for m in _TOKEN.finditer(text)]
    if not tokens:
        return lambda _case_id: True
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        if position >= len(tokens):
            raise SelectionError(f"-k {text!r}: expression ends too early")
        position += 1
        return tokens[position - 1]

    def parse_or() -> Callable[[str], bool]:
        left = parse_and()
        while peek() == "or":
            take()
            left = (lambda a, b: lambda s: a(s) or b(s))(left, parse_and())
        return left

    def parse_and() -> Callable[[str], bool]:
        left = parse_not()
        while peek() == "and":
            take()
            left = (lambda a, b: lambda s: a(s) and b(s))(left, parse_not())
        return left

    def parse_not() -> Callable[[str], bool]:
        if peek() == "not":
            take()
            inner = parse_not()
            return lambda s: not inner(s)
        token = take()
        if token == "(":
            inner = parse_or()
            if take() != ")":
                raise SelectionError(f"-k {text!r}: missing ')'")
            return inner
        if token in (")", "and", "or"):
            raise SelectionError(f"-k {text!r}: unexpected {token!r}")
        word = token.lower()
        return lambda s: word in s.lower()

    predicate = parse_or()
    if position != len(tokens):
        raise SelectionError(f"-k {text!r}: unexpected {tokens[position]!r}")
    return predicate
